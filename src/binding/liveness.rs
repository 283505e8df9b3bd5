//! N-API surface of `pi-native/liveness`: syscall-sized primitives over an already-checked pid.
//! Argument checks, the `process.kill` argument rule and result objects live in the JS contract
//! layer (`lib/contract/liveness.js`).

use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::liveness::{self as core, KillArg, ProbeError};

/// libuv's number for an error name, as Node puts it on `err.errno` (POSIX: `-errno`;
/// Windows: libuv's own `UV__E*` numbers).
fn uv_errno(name: &str) -> i32 {
    #[cfg(unix)]
    {
        match name {
            "ESRCH" => -libc::ESRCH,
            "EPERM" => -libc::EPERM,
            _ => -libc::EINVAL,
        }
    }
    #[cfg(windows)]
    {
        crate::fserror::uv_win_errno(name)
    }
}

/// `kill(pid, 0)`: 0 on success, else the negative errno Node reports for `process.kill`.
#[napi(catch_unwind)]
pub fn kill0(pid: i32) -> i32 {
    match core::kill_probe(&KillArg::Pid(pid)) {
        Ok(()) => 0,
        Err(ProbeError::Esrch) => uv_errno("ESRCH"),
        Err(ProbeError::Eperm) => uv_errno("EPERM"),
        Err(ProbeError::Errno(e)) => -e,
        Err(ProbeError::Code(name)) => uv_errno(name),
        // Not produced for a `KillArg::Pid`.
        Err(_) => uv_errno("EINVAL"),
    }
}

/// Legacy start time of an int32 pid (C4, probe gate included), or `undefined`.
#[napi(catch_unwind, ts_return_type = "number | undefined")]
pub fn legacy_start_time(pid: i32) -> Either<f64, Undefined> {
    match core::legacy_start_time(&KillArg::Pid(pid), || Some(pid.to_string())) {
        Some(t) => Either::A(t),
        None => Either::B(()),
    }
}

/// State of a positive int32 pid: `alive`, `dead`, `zombie` or `eperm`.
#[napi(catch_unwind, ts_return_type = "'alive' | 'dead' | 'zombie' | 'eperm'")]
pub fn probe_state(pid: i32) -> &'static str {
    core::probe_pid(pid).as_str()
}

/// Identity of a running process: its pid, its true start time in epoch milliseconds and its
/// state.
#[napi(object)]
pub struct ProcessIdentity {
    pub pid: i32,
    pub start_time_ms: f64,
    #[napi(ts_type = "'alive' | 'zombie' | 'eperm'")]
    pub state: String,
}

/// Identity of a positive int32 pid, or `undefined` when no such process exists.
#[napi(catch_unwind, ts_return_type = "ProcessIdentity | undefined")]
pub fn process_identity(pid: i32) -> Either<ProcessIdentity, Undefined> {
    match core::process_identity(pid) {
        Some(id) => Either::A(ProcessIdentity {
            pid: id.pid,
            start_time_ms: id.start_time_ms,
            state: id.state.as_str().to_string(),
        }),
        None => Either::B(()),
    }
}

/// Whether a positive int32 pid still names the process that started at `startTimeMs`.
#[napi(catch_unwind)]
pub fn same_process(pid: i32, start_time_ms: f64) -> bool {
    core::is_same_process(pid, start_time_ms)
}

/// `kill0` as a bare Node-API callback, put over the `#[napi]` export when the module loads
/// ([`install_bare_kill0`]; the `#[napi]` declaration stays for the loader and the `.d.ts`).
/// napi-rs 3 wraps every call of a function with arguments in a borrow scope (thread-local
/// stacks, an `Arc`, a mutex): measured on an Intel host, 309 → 210 ns a probe without it,
/// against ~170 ns for the `kill(2)` itself and 284–294 ns for `process.kill(pid, 0)`. This
/// makes the three Node-API calls the probe needs and nothing else. A value that is not a
/// number (the contract layer never passes one) throws, with napi-rs's `NumberExpected` code.
unsafe extern "C" fn kill0_bare(
    env: sys::napi_env,
    info: sys::napi_callback_info,
) -> sys::napi_value {
    // Raw Node-API for the arguments only: napi-rs reads a function's arguments through the
    // borrow-scoped glue measured above (its `CallbackInfo` is that glue's, not a public API).
    // The value conversions are napi-rs's own, which add nothing to the Node-API calls.
    let mut argc = 1usize;
    let mut arg = std::ptr::null_mut();
    // SAFETY: `env` and `info` are the live arguments of this callback; `arg` has room for argc.
    let got = unsafe {
        sys::napi_get_cb_info(
            env,
            info,
            &mut argc,
            &mut arg,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        ) == sys::Status::napi_ok
    };
    // SAFETY: `arg` is this call's argument, on `env`'s thread.
    let pid = (got && argc >= 1)
        .then(|| unsafe { i32::from_napi_value(env, arg) }.ok())
        .flatten();
    let result = match pid {
        Some(pid) => std::panic::catch_unwind(|| kill0(pid)).map_err(panic_to_error),
        None => Err(Error::new(
            Status::NumberExpected,
            "kill0: the pid must be a number".to_string(),
        )),
    };
    match result {
        // SAFETY: `env` is live on this thread.
        Ok(errno) => unsafe { i32::to_napi_value(env, errno) }.unwrap_or(std::ptr::null_mut()),
        Err(err) => {
            // SAFETY: `env` is live on this thread; the callback then returns null, as thrown ones do.
            unsafe { JsError::from(err).throw_into(env) };
            std::ptr::null_mut()
        }
    }
}

/// Replace the generated `kill0` export with [`kill0_bare`] (same name, arguments and result).
#[napi(module_exports)]
pub fn install_bare_kill0(mut exports: Object, env: Env) -> Result<()> {
    let f = env.create_function::<i32, i32>("kill0", kill0_bare)?;
    exports.set_named_property("kill0", f)
}

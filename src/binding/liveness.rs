//! N-API surface of `pi-native/liveness`: syscall-sized primitives over an already-checked pid.
//! Argument checks, the `process.kill` argument rule and result objects live in the JS contract
//! layer (`lib/contract/liveness.js`).

use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::liveness::{self as core, KillArg, ProbeError};

/// `kill(pid, 0)`: 0 on success, else the negative errno Node reports for `process.kill`.
#[napi]
pub fn kill0(pid: i32) -> i32 {
    match core::kill_probe(&KillArg::Pid(pid)) {
        Ok(()) => 0,
        Err(ProbeError::Esrch) => -libc::ESRCH,
        Err(ProbeError::Eperm) => -libc::EPERM,
        Err(ProbeError::Errno(e)) => -e,
        // Not produced for a `KillArg::Pid`.
        Err(_) => -libc::EINVAL,
    }
}

/// Legacy start time of an int32 pid (C4, probe gate included), or `undefined`.
#[napi(ts_return_type = "number | undefined")]
pub fn legacy_start_time(pid: i32) -> Either<f64, Undefined> {
    match core::legacy_start_time(&KillArg::Pid(pid), || Some(pid.to_string())) {
        Some(t) => Either::A(t),
        None => Either::B(()),
    }
}

/// State of a positive int32 pid: `alive`, `dead`, `zombie` or `eperm`.
#[napi(ts_return_type = "'alive' | 'dead' | 'zombie' | 'eperm'")]
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
#[napi(ts_return_type = "ProcessIdentity | undefined")]
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
#[napi]
pub fn same_process(pid: i32, start_time_ms: f64) -> bool {
    core::is_same_process(pid, start_time_ms)
}

//! N-API surface of `pi-native/liveness`.

use napi::bindgen_prelude::*;
use napi::JsValue;
use napi_derive::napi;

use super::jsval::{number_of, prop, received, to_js_string, to_number, type_error, type_of};
use crate::jsstr::{is_integer, to_int32};
use crate::liveness::{self as core, KillArg};

/// How `process.kill` sees an arbitrary JS value (SPEC C0: accepted iff `pid == (pid | 0)`).
fn kill_arg(v: &Unknown) -> Result<KillArg> {
    Ok(match type_of(v)? {
        ValueType::Undefined | ValueType::Null => {
            KillArg::InvalidType(core::invalid_pid_message(&received(v)?))
        }
        ValueType::Number => {
            let x = number_of(v)?;
            KillArg::from_number(x, || to_js_string(v).unwrap_or_default())
        }
        ValueType::Symbol | ValueType::BigInt => KillArg::Uncoercible,
        // Strings, booleans, objects: loose equality compares their numeric value with ToInt32 of it.
        _ => match to_number(v) {
            Some(x) if x == to_int32(x) as f64 => KillArg::Pid(to_int32(x)),
            Some(_) => KillArg::InvalidType(core::invalid_pid_message(&received(v)?)),
            None => KillArg::Uncoercible,
        },
    })
}

/// The number in `v` when it is a JS number, without coercion.
fn as_number(v: &Unknown) -> Result<Option<f64>> {
    Ok(match type_of(v)? {
        ValueType::Number => Some(number_of(v)?),
        _ => None,
    })
}

/// True when `pid` is a live process (or one this process may not signal). False for
/// `undefined`, non-numbers, non-finite numbers and pids ≤ 0, and when the probe fails.
/// Same results as pi-adaptative's `isReloadSessionProcessAlive`.
#[napi(ts_args_type = "pid: number | undefined")]
pub fn is_reload_session_process_alive(pid: Unknown) -> Result<bool> {
    Ok(match as_number(&pid)? {
        Some(x) => core::is_reload_session_process_alive(x),
        None => false,
    })
}

/// Integration-lock owner liveness: a lock owned by another host counts as alive; otherwise
/// `owner.pid` is probed as `process.kill(pid, 0)` would (EPERM = alive).
/// Same results as pi-adaptative's `defaultIsPidAlive`.
#[napi(ts_args_type = "owner: IntegrationLockOwner")]
pub fn default_is_pid_alive(env: &Env, owner: Unknown) -> Result<bool> {
    let hostname = prop(env, &owner, "hostname")?;
    let same_host = type_of(&hostname)? == ValueType::String
        && to_js_string(&hostname).is_some_and(|h| h == core::os_hostname());
    if !same_host {
        return Ok(true);
    }
    let pid = prop(env, &owner, "pid")?;
    Ok(core::default_is_pid_alive(true, &kill_arg(&pid)?))
}

/// `{ pid, alive, detail }` for a recorded pid, with pi-crew's exact `detail` strings:
/// `no pid recorded`, `process is alive`, `process exists but permission is denied`,
/// `process does not exist`, or the probe error's message. `pid` echoes the argument.
#[napi(
    ts_args_type = "pid: number | undefined",
    ts_return_type = "ProcessLiveness"
)]
pub fn check_process_liveness<'a>(env: &'a Env, pid: Unknown<'a>) -> Result<Object<'a>> {
    let l =
        core::check_process_liveness(as_number(&pid)?, || to_js_string(&pid).unwrap_or_default());
    let mut obj = Object::new(env)?;
    obj.set("pid", pid)?;
    obj.set("alive", l.alive)?;
    obj.set("detail", l.detail)?;
    Ok(obj)
}

/// Start time of `pid` in the legacy orphan-registry unit (Linux: `floor(starttime_ticks × 100)`
/// from `/proc/<pid>/stat`, not milliseconds), or `undefined` when the pid cannot be probed or
/// read. Values equal those pi-crew stored, so registry comparisons keep working.
#[napi(ts_args_type = "pid: number", ts_return_type = "number | undefined")]
pub fn get_process_start_time(pid: Unknown) -> Result<Either<f64, ()>> {
    let arg = kill_arg(&pid)?;
    let is_number = type_of(&pid)? == ValueType::Number;
    // String(pid): an int32 number prints as its decimal digits (-0 as "0"); other values
    // need the engine's own conversion. Only computed once the probe gate has passed.
    let text = || match &arg {
        KillArg::Pid(p) if is_number => Some(p.to_string()),
        _ => to_js_string(&pid),
    };
    Ok(match core::legacy_start_time(&arg, text) {
        Some(t) => Either::A(t),
        None => Either::B(()),
    })
}

/// A positive int32 pid from a JS number, or None for numbers outside that range.
fn positive_pid(x: f64) -> Option<i32> {
    (is_integer(x) && x >= 1.0 && x <= i32::MAX as f64).then_some(x as i32)
}

fn pid_argument(env: &Env, v: &Unknown, name: &str) -> Result<f64> {
    match as_number(v)? {
        Some(x) => Ok(x),
        None => type_error(
            env,
            &format!("The \"{name}\" argument must be of type number"),
        ),
    }
}

fn state_of(x: f64) -> &'static str {
    match positive_pid(x) {
        Some(p) => core::probe_pid(p).as_str(),
        None => "invalid",
    }
}

/// Probe a pid: `alive`, `dead`, `zombie` (exited, not yet reaped: dead for supervision),
/// `eperm` (exists, not signalable by this process) or `invalid` (not a positive int32).
/// Throws a TypeError when `pid` is not a number.
#[napi(
    ts_args_type = "pid: number",
    ts_return_type = "'alive' | 'dead' | 'zombie' | 'eperm' | 'invalid'"
)]
pub fn probe_pid(env: &Env, pid: Unknown) -> Result<&'static str> {
    Ok(state_of(pid_argument(env, &pid, "pid")?))
}

/// `probePid` for many pids at once; one state per element, in order.
#[napi(
    ts_args_type = "pids: readonly number[]",
    ts_return_type = "Array<'alive' | 'dead' | 'zombie' | 'eperm' | 'invalid'>"
)]
pub fn probe_pids(env: &Env, pids: Unknown) -> Result<Vec<&'static str>> {
    if !pids.is_array()? {
        return type_error(env, "The \"pids\" argument must be an array of numbers");
    }
    // SAFETY: checked to be an array just above.
    let arr: Array = unsafe { pids.cast()? };
    let mut out = Vec::with_capacity(arr.len() as usize);
    for i in 0..arr.len() {
        let name = format!("pids[{i}]");
        let x = match arr.get::<Unknown>(i)? {
            Some(v) => pid_argument(env, &v, &name)?,
            None => {
                return type_error(
                    env,
                    &format!("The \"{name}\" argument must be of type number"),
                )
            }
        };
        out.push(state_of(x));
    }
    Ok(out)
}

/// Identity of a running process: its pid, its true start time in epoch milliseconds and its
/// state. Stable for the life of the process; a reused pid gets a different `startTimeMs`.
#[napi(object)]
pub struct ProcessIdentity {
    pub pid: i32,
    pub start_time_ms: f64,
    #[napi(ts_type = "'alive' | 'zombie' | 'eperm'")]
    pub state: String,
}

/// The identity of `pid`, or `undefined` when no such process exists (or `pid` is not a
/// positive int32). Throws a TypeError when `pid` is not a number.
#[napi(
    ts_args_type = "pid: number",
    ts_return_type = "ProcessIdentity | undefined"
)]
pub fn get_process_identity(env: &Env, pid: Unknown) -> Result<Either<ProcessIdentity, ()>> {
    let x = pid_argument(env, &pid, "pid")?;
    let id = positive_pid(x).and_then(core::process_identity);
    Ok(match id {
        Some(id) => Either::A(ProcessIdentity {
            pid: id.pid,
            start_time_ms: id.start_time_ms,
            state: id.state.as_str().to_string(),
        }),
        None => Either::B(()),
    })
}

/// True while the process an identity was taken from still runs under that pid; false once it
/// exited, became a zombie, or its pid was reused. Throws a TypeError unless `identity` is an
/// object with numeric `pid` and `startTimeMs`.
#[napi(ts_args_type = "identity: Pick<ProcessIdentity, 'pid' | 'startTimeMs'>")]
pub fn is_same_process(env: &Env, identity: Unknown) -> Result<bool> {
    const MSG: &str =
        "The \"identity\" argument must be an object with numeric \"pid\" and \"startTimeMs\"";
    if type_of(&identity)? != ValueType::Object {
        return type_error(env, MSG);
    }
    let obj = identity.coerce_to_object()?;
    let pid: Unknown = obj.get_named_property("pid")?;
    let start: Unknown = obj.get_named_property("startTimeMs")?;
    let (Some(pid), Some(start)) = (as_number(&pid)?, as_number(&start)?) else {
        return type_error(env, MSG);
    };
    Ok(positive_pid(pid).is_some_and(|p| core::is_same_process(p, start)))
}

/// Owner record of a worktree integration lock (pi-adaptative `IntegrationLockOwner`).
#[napi(object)]
pub struct IntegrationLockOwner {
    pub pid: f64,
    pub hostname: String,
    pub token: String,
    pub session_id: Option<String>,
    pub lane_key: Option<String>,
    pub acquired_at: String,
}

/// Result of `checkProcessLiveness` (pi-crew `ProcessLiveness`).
#[napi(object)]
pub struct ProcessLiveness {
    pub pid: Option<f64>,
    pub alive: bool,
    pub detail: String,
}

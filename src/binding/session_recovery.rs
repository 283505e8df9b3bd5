//! N-API surface of `pi-native/session-recovery`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use napi::bindgen_prelude::*;
use napi::JsValue;
use napi_derive::napi;

use super::jsval::{prop, to_js_string, type_error, type_of};
use crate::session_recovery::{self as core, ArgPart, Tri};

/// JS truthiness.
fn truthy(v: &Unknown) -> Result<bool> {
    v.coerce_to_bool()
}

/// A truthy string property (Some), a falsy one (None), else a TypeError naming it.
fn optional_string(env: &Env, v: &Unknown, name: &str) -> Result<Option<String>> {
    if !truthy(v)? {
        return Ok(None);
    }
    if type_of(v)? != ValueType::String {
        return type_error(env, &format!("The \"{name}\" property must be a string"));
    }
    Ok(to_js_string(v))
}

/// Working-session identity and directory of a worker, or `null` when no safe identity can be
/// derived (ids are reduced to their part after the last `:` and must be `[A-Za-z0-9_-]+`).
/// An explicit `sessionDir` is returned verbatim; otherwise it is
/// `path.join(artifactsRoot, "sessions", <agent or session id>)`.
#[napi(
    ts_args_type = "input: SessionIdentityInput",
    ts_return_type = "WorkerSessionContext | null"
)]
pub fn derive_session_paths<'a>(env: &'a Env, input: Unknown<'a>) -> Result<Option<Object<'a>>> {
    let agent_id = prop(env, &input, "agentId")?;
    let session_id = prop(env, &input, "sessionId")?;
    let agent = optional_string(env, &agent_id, "agentId")?;
    let session = optional_string(env, &session_id, "sessionId")?;
    let Some((id, leaf)) = core::derive_identity(session.as_deref(), agent.as_deref()) else {
        return Ok(None);
    };
    let mut out = Object::new(env)?;
    out.set("sessionId", id)?;
    let session_dir = prop(env, &input, "sessionDir")?;
    if truthy(&session_dir)? {
        out.set("sessionDir", session_dir)?;
        return Ok(Some(out));
    }
    let root = prop(env, &input, "artifactsRoot")?;
    let Some(root) = optional_string(env, &root, "artifactsRoot")? else {
        return Ok(None);
    };
    out.set("sessionDir", core::sessions_dir(&root, &leaf))?;
    Ok(Some(out))
}

/// Arm both argument arrays with `--session-id <id> --session-dir <dir>` (only the flags each
/// array lacks), right after `--mode json -p` when present, else at the end. Mutates the arrays
/// in place (`builtArgs` first); returns true iff either array changed.
#[napi(ts_args_type = "spawnArgs: string[], builtArgs: string[], ctx: WorkerSessionContext")]
pub fn append_worker_session_args(
    env: &Env,
    spawn_args: Unknown,
    built_args: Unknown,
    ctx: Unknown,
) -> Result<bool> {
    for (v, name) in [(&spawn_args, "spawnArgs"), (&built_args, "builtArgs")] {
        if !v.is_array()? {
            return type_error(env, &format!("The \"{name}\" argument must be an array"));
        }
    }
    let mut changed = false;
    for arr in [&built_args, &spawn_args] {
        // SAFETY: both were checked to be arrays above.
        let mut arr: Array = unsafe { arr.cast()? };
        let mut values: Vec<Unknown> = Vec::with_capacity(arr.len() as usize);
        let mut texts: Vec<Option<String>> = Vec::with_capacity(arr.len() as usize);
        for i in 0..arr.len() {
            let v: Unknown = arr
                .get(i)?
                .ok_or_else(|| Error::from_reason("array changed while being read"))?;
            texts.push(match type_of(&v)? {
                ValueType::String => to_js_string(&v),
                _ => None,
            });
            values.push(v);
        }
        let borrowed: Vec<Option<&str>> = texts.iter().map(|t| t.as_deref()).collect();
        let Some((at, parts)) = core::plan_session_args(&borrowed) else {
            continue;
        };
        let mut inserted: Vec<Unknown> = Vec::with_capacity(parts.len());
        for part in parts {
            inserted.push(match part {
                ArgPart::SessionIdFlag => env.create_string("--session-id")?.to_unknown(),
                ArgPart::SessionIdValue => prop(env, &ctx, "sessionId")?,
                ArgPart::SessionDirFlag => env.create_string("--session-dir")?.to_unknown(),
                ArgPart::SessionDirValue => prop(env, &ctx, "sessionDir")?,
            });
        }
        // Equivalent of splice(at, 0, ...inserted): rewrite the tail in place.
        let tail: Vec<Unknown> = inserted.into_iter().chain(values.drain(at..)).collect();
        for (k, v) in tail.into_iter().enumerate() {
            arr.set((at + k) as u32, v)?;
        }
        changed = true;
    }
    Ok(changed)
}

fn env_var(env: &Env, name: &str) -> Result<Option<String>> {
    // process.env as JS sees it now (tests assign to it; worker threads have private copies).
    let process: Object = env.get_global()?.get_named_property("process")?;
    let vars: Object = process.get_named_property("env")?;
    let v: Unknown = vars.get_named_property(name)?;
    Ok(match type_of(&v)? {
        ValueType::Undefined => None,
        _ => to_js_string(&v),
    })
}

/// Whether crash recovery is on: `PI_CREW_SESSION_RECOVERY` (1/true/yes or 0/false/no, read
/// from `process.env` at call time) wins in both directions; else `explicit` when it is not
/// null/undefined (returned unchanged); else true.
#[napi(ts_args_type = "explicit?: boolean", ts_return_type = "boolean")]
pub fn resolve_session_recovery_enabled<'a>(
    env: &'a Env,
    explicit: Unknown<'a>,
) -> Result<Either<bool, Unknown<'a>>> {
    if let Some(b) = core::parse_env_bool(env_var(env, "PI_CREW_SESSION_RECOVERY")?.as_deref()) {
        return Ok(Either::A(b));
    }
    Ok(match type_of(&explicit)? {
        ValueType::Undefined | ValueType::Null => Either::A(true),
        _ => Either::B(explicit),
    })
}

fn tri(v: &Unknown) -> Result<Tri> {
    Ok(match type_of(v)? {
        ValueType::Undefined => Tri::Undefined,
        ValueType::Null => Tri::Null,
        ValueType::Boolean if v.coerce_to_bool()? => Tri::True,
        _ => Tri::Other,
    })
}

/// True when a worker's end looks like a crash worth recovering: exit code `null` (signal death)
/// or killed. `result.exitStatus`, when present, overrides `exitCode` and `killed` field by field.
#[napi(
    ts_args_type = "result: { exitCode: number | null; exitStatus?: { exitCode?: number | null; killed?: boolean } }, killed: boolean"
)]
pub fn should_attempt_session_recovery(
    env: &Env,
    result: Unknown,
    killed: Unknown,
) -> Result<bool> {
    let status = prop(env, &result, "exitStatus")?;
    let exit_status = if truthy(&status)? {
        Some((
            tri(&prop(env, &status, "exitCode")?)?,
            tri(&prop(env, &status, "killed")?)?,
        ))
    } else {
        None
    };
    let code = tri(&prop(env, &result, "exitCode")?)?;
    Ok(core::should_attempt(code, exit_status, tri(&killed)?))
}

/// Raw result of `recoverSessionTail` (the public wrapper adds the caller's `sessionId`).
#[napi(object)]
pub struct SessionTail {
    /// File-derived session id: the file name without `.jsonl`.
    pub session_id: String,
    pub session_file: String,
    pub text: Utf16String,
    pub timestamp: Utf16String,
    pub stop_reason: Utf16String,
}

/// The recovery pool: a fixed set of threads, a small multiple of the cores, taking calls in
/// FIFO order; a call waiting for a thread keeps its deadline. tokio's blocking pool would grow
/// to 512 threads under an overload and starve the event loop. The threads run at a lower
/// priority (10 nice levels down): recovery is background work and must not take the CPU from the JS
/// thread. `None` when the threads cannot be started (every call then resolves null).
fn pool() -> Option<&'static rayon_core::ThreadPool> {
    static POOL: OnceLock<Option<rayon_core::ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        rayon_core::ThreadPoolBuilder::new()
            .num_threads((2 * cores).clamp(2, 16))
            .thread_name(|i| format!("pi-recovery-{i}"))
            .start_handler(|_| lower_priority())
            // A panicking scan only drops its reply (the call resolves null); never abort.
            .panic_handler(|_| {})
            .build()
            .ok()
    })
    .as_ref()
}

/// Ten nice levels below the calling pool thread's current priority (capped at 19; per thread
/// on Linux; best effort, and irreversible without privileges, which is why recovery has
/// threads of its own): the JS thread keeps its priority, so the scheduler runs it first and
/// scans cannot open event-loop gaps, even when the whole process was started with `nice`.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: plain syscalls on the calling thread; no memory is passed.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        let current = libc::getpriority(libc::PRIO_PROCESS, tid);
        libc::setpriority(libc::PRIO_PROCESS, tid, (current + 10).min(19));
    }
}

/// Building block of `recoverLastAssistantFromSession`: list, read and parse off the JS thread
/// on a bounded pool; resolves `null` when nothing qualifies, on any I/O failure, or at the
/// deadline (counted from this call, including time spent queued; the abandoned scan stops).
/// Never rejects.
#[napi(ts_return_type = "Promise<SessionTail | null>")]
pub fn recover_session_tail<'e>(
    env: &'e Env,
    session_dir: String,
    session_id: Option<String>,
    max_file_bytes: f64,
    deadline_ms: f64,
    max_files: u32,
) -> Result<PromiseRaw<'e, Option<SessionTail>>> {
    // Taken here, on the JS thread: the deadline counts from the call, not from when a
    // runtime thread first gets to the task.
    let deadline = Instant::now() + Duration::from_millis(deadline_ms.clamp(0.0, 1e12) as u64);
    let limits = core::Limits {
        max_file_bytes: max_file_bytes.clamp(0.0, u64::MAX as f64) as u64,
        max_files: max_files as usize,
        deadline,
    };
    env.spawn_future(async move {
        let cancel = Arc::new(AtomicBool::new(false));
        let worker_cancel = Arc::clone(&cancel);
        let (reply, answer) = tokio::sync::oneshot::channel();
        if let Some(pool) = pool() {
            pool.spawn_fifo(move || {
                // A call abandoned while queued costs nothing but this check (recover() makes it).
                let _ = reply.send(core::recover(
                    &session_dir,
                    session_id.as_deref(),
                    &limits,
                    &worker_cancel,
                ));
            });
        }
        // One tokio timer per call (no libuv handle: it never keeps the process alive).
        let outcome = tokio::time::timeout_at(deadline.into(), answer).await;
        // Past the deadline (or on any failure) the scan is told to stop and the answer is null.
        cancel.store(true, Ordering::Relaxed);
        Ok(match outcome {
            Ok(Ok(Some(r))) => Some(SessionTail {
                session_id: r.session_id,
                session_file: r.session_file,
                text: r.text.into(),
                timestamp: r.timestamp.into(),
                stop_reason: r.stop_reason.into(),
            }),
            _ => None,
        })
    })
}

/// Input of `deriveSessionPaths` (pi-crew `SessionIdentityInput`).
#[napi(object)]
pub struct SessionIdentityInput {
    pub session_id: Option<String>,
    pub session_dir: Option<String>,
    pub agent_id: Option<String>,
    pub artifacts_root: Option<String>,
}

/// A worker's session identity (pi-crew `WorkerSessionContext`).
#[napi(object)]
pub struct WorkerSessionContext {
    pub session_id: String,
    pub session_dir: String,
}

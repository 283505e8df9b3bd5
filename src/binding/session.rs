//! N-API surface of `pi-native/session-recovery`: the off-thread tail scan. The identity and
//! gate helpers are JavaScript (`lib/contract/session.js`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use napi::bindgen_prelude::*;
use napi::JsDeferred;
use napi_derive::napi;

use super::settle::{Outbox, Ticket};
use crate::background::{Deadlines, DueKey, Pool};
use crate::session::{self as core, Recovered};

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

/// The recovery pool: a fixed bound of threads, a small multiple of the cores, taking calls in
/// FIFO order ([`Pool`]); a call waiting for a thread keeps its deadline. tokio's blocking pool
/// would grow to 512 threads under an overload and starve the event loop. The threads run at a
/// lower priority (10 nice levels down): recovery is background work and must not take the CPU
/// from the JS thread.
fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Pool::new((2 * cores).clamp(2, 16), "pi-recovery", lower_priority)
    })
}

/// Ten nice levels below the calling pool thread's current priority (capped at 19; per thread
/// on Linux; best effort, and irreversible without privileges, which is why recovery has
/// threads of its own): the JS thread keeps its priority, so the scheduler runs it first and
/// scans cannot open event-loop gaps, even when the whole process was started with `nice`.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: plain syscalls on the calling thread; no memory is passed.
    unsafe {
        // The raw syscall: glibc's gettid() wrapper is 2.30+, above the binaries' 2.17 floor.
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        let current = libc::getpriority(libc::PRIO_PROCESS, tid);
        libc::setpriority(libc::PRIO_PROCESS, tid, (current + 10).min(19));
    }
}

type Settle = Box<dyn FnOnce(Env) -> Result<Option<SessionTail>>>;

/// A call's promise: settled through the environment's [`Outbox`] (no lock the JS thread could
/// wait for, as a scan thread of lower priority settles it), or where the host has none, through
/// napi-rs's `JsDeferred`.
enum Promise {
    Outbox(Ticket),
    Deferred(JsDeferred<Option<SessionTail>, Settle>),
}

/// One recovery call in flight: settled once, by its scan or by its deadline, whichever is
/// first; the other finds the promise already taken.
struct Call {
    promise: Mutex<Option<Promise>>,
    /// Tells the scan to stop (set at the deadline, at settlement, at teardown).
    cancel: AtomicBool,
    /// The JS environment that made the call ([`super::env_owner`]).
    owner: u64,
    due: OnceLock<DueKey>,
}

impl Call {
    /// The promise, if nobody settled or dropped it yet.
    fn take_promise(&self) -> Option<Promise> {
        self.promise
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    fn settle(&self, answer: Option<Recovered>) {
        self.cancel.store(true, Ordering::Relaxed);
        if let Some(&key) = self.due.get() {
            DEADLINES.withdraw(key);
        }
        let promise = self.take_promise();
        if let Some(promise) = promise {
            let tail = answer.map(|r| SessionTail {
                session_id: r.session_id,
                session_file: r.session_file,
                text: r.text.into(),
                timestamp: r.timestamp.into(),
                stop_reason: r.stop_reason.into(),
            });
            match promise {
                Promise::Outbox(ticket) => ticket.resolve(tail),
                Promise::Deferred(deferred) => deferred.resolve(Box::new(move |_| Ok(tail))),
            }
        }
    }
}

/// Calls past their deadline resolve null (the abandoned scan stops at its next check).
static DEADLINES: Deadlines<Arc<Call>> =
    Deadlines::new("pi-recovery-deadline", |call| call.settle(None));

/// At teardown of environment `owner`: its calls are stopped and forgotten (their promises
/// went with the environment).
pub fn cancel_calls_of(owner: u64) {
    for call in DEADLINES.withdraw_where(|c| c.owner == owner) {
        call.cancel.store(true, Ordering::Relaxed);
        drop(call.take_promise());
    }
}

/// Diagnostic: recovery calls in flight in this process (neither settled nor dropped with the
/// environment that made them).
#[napi(catch_unwind)]
pub fn recovery_calls_pending() -> u32 {
    DEADLINES.pending() as u32
}

/// Diagnostic: whether this environment settles recovery promises through its own libuv async
/// handle (`src/binding/settle.rs`), as under Node, rather than napi-rs's thread-safe functions.
#[napi(catch_unwind)]
pub fn recovery_settles_through_outbox(env: &Env) -> bool {
    Outbox::here(env).is_some()
}

/// Tell the addon whether the host runtime is Node (lib/native.js decides from `process.release`
/// and `process.versions`): only then are recovery promises settled through Node's libuv
/// (`src/binding/settle.rs`). Other runtimes may export libuv-named functions that do not work.
#[napi(catch_unwind)]
pub fn settle_through_libuv(node: bool) {
    super::settle::use_libuv(node);
}

/// Diagnostic: a promise of the recovery outbox whose settling side ends without an answer (as
/// after a panic): it must reject, and its process must still exit on its own. Resolves `true`
/// where there is no outbox (nothing to check).
#[napi(catch_unwind, ts_return_type = "Promise<boolean>")]
pub fn outbox_unsettled_probe<'e>(env: &'e Env) -> Result<Object<'e>> {
    match Outbox::here(env).and_then(|o| o.promise()) {
        Some((value, ticket)) => {
            std::thread::spawn(move || drop(ticket));
            Ok(Object::from_raw(env.raw(), value))
        }
        None => {
            let (deferred, object) =
                env.create_deferred::<bool, Box<dyn FnOnce(Env) -> Result<bool>>>()?;
            deferred.resolve(Box::new(|_| Ok(true)));
            Ok(object)
        }
    }
}

/// Building block of `recoverLastAssistantFromSession`: list, read and parse off the JS thread
/// on a bounded pool; resolves `null` when nothing qualifies, on any I/O failure, or at the
/// deadline (counted from this call, including time spent queued; the abandoned scan stops).
/// Never rejects. The scan's thread settles the promise itself: one hand-over each way.
#[napi(catch_unwind, ts_return_type = "Promise<SessionTail | null>")]
pub fn recover_session_tail<'e>(
    env: &'e Env,
    session_dir: String,
    session_id: Option<String>,
    max_file_bytes: f64,
    deadline_ms: f64,
    max_files: u32,
) -> Result<Object<'e>> {
    // Taken here, on the JS thread: the deadline counts from the call, not from when a
    // pool thread first gets to the task.
    let deadline = Instant::now() + Duration::from_millis(deadline_ms.clamp(0.0, 1e12) as u64);
    let limits = core::Limits {
        max_file_bytes: max_file_bytes.clamp(0.0, u64::MAX as f64) as u64,
        max_files: max_files as usize,
        deadline,
    };
    let owner = super::env_owner(env)?;
    let (promise, object) = match Outbox::here(env).and_then(|o| o.promise()) {
        Some((value, ticket)) => (Promise::Outbox(ticket), Object::from_raw(env.raw(), value)),
        None => {
            let (deferred, object) = env.create_deferred::<Option<SessionTail>, Settle>()?;
            (Promise::Deferred(deferred), object)
        }
    };
    let call = Arc::new(Call {
        promise: Mutex::new(Some(promise)),
        cancel: AtomicBool::new(false),
        owner,
        due: OnceLock::new(),
    });
    // Without a deadline timer or a pool thread the call cannot be bounded: it answers null.
    let Some(key) = DEADLINES.register(deadline, Arc::clone(&call)) else {
        call.settle(None);
        return Ok(object);
    };
    let _ = call.due.set(key);
    let scan = Arc::clone(&call);
    let queued = pool().spawn(Box::new(move || {
        // A call abandoned while queued costs nothing but this check (recover() makes it).
        let answer = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            core::recover(&session_dir, session_id.as_deref(), &limits, &scan.cancel)
        }));
        scan.settle(answer.ok().flatten());
    }));
    if !queued {
        call.settle(None);
    }
    Ok(object)
}

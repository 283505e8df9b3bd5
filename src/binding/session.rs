//! N-API surface of `pi-native/session-recovery`: the off-thread tail scan. The identity and
//! gate helpers are JavaScript (`lib/contract/session.js`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::session as core;

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
#[napi(catch_unwind, ts_return_type = "Promise<SessionTail | null>")]
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

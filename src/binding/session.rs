//! N-API surface of `pi-native/session-recovery`: the off-thread tail scan. The identity and
//! gate helpers are JavaScript (`lib/contract/session.js`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
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

/// Building block of `recoverLastAssistantFromSession`: list, read and parse off the JS thread;
/// resolves `null` when nothing qualifies, on any I/O failure, or at the deadline (counted from
/// this call; the abandoned scan stops). Never rejects.
#[napi]
pub async fn recover_session_tail(
    session_dir: String,
    session_id: Option<String>,
    max_file_bytes: f64,
    deadline_ms: f64,
    max_files: u32,
) -> Option<SessionTail> {
    let started = Instant::now();
    let deadline = started + Duration::from_millis(deadline_ms.clamp(0.0, 1e12) as u64);
    let limits = core::Limits {
        max_file_bytes: max_file_bytes.clamp(0.0, u64::MAX as f64) as u64,
        max_files: max_files as usize,
        deadline,
    };
    let cancel = Arc::new(AtomicBool::new(false));
    let worker_cancel = Arc::clone(&cancel);
    let work = tokio::task::spawn_blocking(move || {
        core::recover(&session_dir, session_id.as_deref(), &limits, &worker_cancel)
    });
    let outcome = tokio::time::timeout_at(deadline.into(), work).await;
    // Past the deadline (or on any failure) the scan is told to stop and the answer is null.
    cancel.store(true, Ordering::Relaxed);
    match outcome {
        Ok(Ok(Some(r))) => Some(SessionTail {
            session_id: r.session_id,
            session_file: r.session_file,
            text: r.text.into(),
            timestamp: r.timestamp.into(),
            stop_reason: r.stop_reason.into(),
        }),
        _ => None,
    }
}

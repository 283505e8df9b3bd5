//! Notified lock handoff: a waiter whose attempt met a held lock is woken the moment that lock
//! directory is removed — by a native or a JavaScript holder — instead of sleeping the rest of
//! its retry interval. Only the waiting changes: attempts, stale rules and the total retry
//! budget stay proper-lockfile's (B17/B18).
//!
//! One watcher serves the whole process, and a folder is watched only while some acquisition
//! waits for a lock in it: on Linux one inotify instance (`linux.rs`; instances are limited per
//! user and shared with every editor and file watcher of that user), elsewhere the `notify`
//! crate (kqueue on macOS, ReadDirectoryChangesW on Windows; `portable.rs`). Where the OS
//! refuses (no inotify instance or watch left), waiters keep the schedule, with no error.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

#[cfg(target_os = "linux")]
#[path = "linux.rs"]
mod os;

#[cfg(not(target_os = "linux"))]
#[path = "portable.rs"]
mod os;

/// The process's watcher (made on first need, tried again while the OS refuses it) and how
/// many waits use each watched folder.
struct Watches {
    backend: Option<os::Backend>,
    dirs: HashMap<PathBuf, usize>,
}

fn watches() -> std::sync::MutexGuard<'static, Watches> {
    static WATCHES: OnceLock<Mutex<Watches>> = OnceLock::new();
    WATCHES
        .get_or_init(|| {
            Mutex::new(Watches {
                backend: None,
                dirs: HashMap::new(),
            })
        })
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Start reporting removals inside `dir` to `on_removed`, with the full path of what was removed
/// (or `dir` itself when the folder goes). Every `true` must be paired with one [`unwatch`].
/// False when no notification can be had there (the caller keeps its schedule).
pub fn watch(dir: &Path, on_removed: fn(&Path)) -> bool {
    let mut w = watches();
    if let Some(n) = w.dirs.get_mut(dir) {
        *n += 1;
        return true;
    }
    if w.backend.is_none() {
        w.backend = os::Backend::start(on_removed);
    }
    let Some(backend) = w.backend.as_mut() else {
        return false;
    };
    if !backend.add(dir) {
        return false;
    }
    w.dirs.insert(dir.to_path_buf(), 1);
    true
}

/// One wait in `dir` ended; the folder stops being watched when no wait is left in it.
pub fn unwatch(dir: &Path) {
    let mut w = watches();
    let Some(n) = w.dirs.get_mut(dir) else {
        return;
    };
    *n -= 1;
    if *n == 0 {
        w.dirs.remove(dir);
        if let Some(backend) = w.backend.as_mut() {
            backend.remove(dir);
        }
    }
}

/// Folders watched right now (a diagnostic for tests).
pub fn watched() -> usize {
    watches().dirs.len()
}

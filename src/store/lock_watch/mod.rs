//! Notified lock handoff (issue 12): a waiter whose attempt met a held lock is woken the moment
//! that lock directory is removed — by a native or a JavaScript holder — instead of sleeping the
//! rest of its retry interval. Only the waiting changes: attempts, stale rules and the total
//! retry budget stay proper-lockfile's (B17/B18). The file-system notifications come from the
//! `notify` crate (inotify on Linux, kqueue on macOS, ReadDirectoryChangesW on Windows); where
//! a watch cannot be set up, waiters simply keep the schedule. On Linux a waiter first tries a
//! watch of its own ([`linux::DirWatch`]).

#[cfg(target_os = "linux")]
pub mod linux;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};

/// Directories watched at once; the oldest is dropped beyond this (watches are cheap, but a
/// process touching many agentDirs should not accumulate them forever).
const MAX_DIRS: usize = 64;

struct Watches {
    watcher: RecommendedWatcher,
    /// Watched directories, most recently used last.
    dirs: VecDeque<PathBuf>,
}

fn watches(on_removed: fn(&Path)) -> Option<&'static Mutex<Watches>> {
    static W: OnceLock<Option<Mutex<Watches>>> = OnceLock::new();
    W.get_or_init(|| {
        let watcher = notify::recommended_watcher(move |res: notify::Result<Event>| {
            if let Ok(ev) = res {
                if matches!(ev.kind, EventKind::Remove(_) | EventKind::Any) {
                    for p in &ev.paths {
                        on_removed(p);
                    }
                }
            }
        })
        .ok()?;
        Some(Mutex::new(Watches {
            watcher,
            dirs: VecDeque::new(),
        }))
    })
    .as_ref()
}

/// Make sure removals inside `dir` are reported to `on_removed` (the full path of what was
/// removed). Returns false when no notification can be had there (the caller keeps its
/// schedule).
pub fn watch(dir: &Path, on_removed: fn(&Path)) -> bool {
    let Some(w) = watches(on_removed) else {
        return false;
    };
    let mut w = w.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = w.dirs.iter().position(|d| d == dir) {
        let d = w.dirs.remove(i).expect("index in range");
        w.dirs.push_back(d);
        return true;
    }
    if w.watcher.watch(dir, RecursiveMode::NonRecursive).is_err() {
        return false;
    }
    w.dirs.push_back(dir.to_path_buf());
    if w.dirs.len() > MAX_DIRS {
        if let Some(old) = w.dirs.pop_front() {
            let _ = w.watcher.unwatch(&old);
        }
    }
    true
}

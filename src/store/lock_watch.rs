//! Notified lock handoff (issue 12): a waiter whose attempt met a held lock is woken the moment
//! that lock directory is removed — by a native or a JavaScript holder — instead of sleeping the
//! rest of its retry interval. Only the waiting changes: attempts, stale rules and the total
//! retry budget stay proper-lockfile's (B17/B18). The file-system notifications come from the
//! `notify` crate (inotify on Linux, kqueue on macOS, ReadDirectoryChangesW on Windows); where
//! a watch cannot be set up, waiters simply keep the schedule.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
#[cfg(target_os = "linux")]
use std::time::{Duration, Instant};

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

/// Linux: one inotify instance per waiting acquisition, watching only deletions in the lock's
/// folder, and blocked on by the waiting thread itself. The process-wide watcher above wakes
/// a helper thread for every event in a watched folder (each entry write, rename and lock)
/// for as long as the folder stays watched, and the helper then wakes the waiter: on 8
/// contending processes that cost more than the 25 ms waits it cut short. Here an event wakes
/// only threads that wait, only for removals, and with one wake-up.
#[cfg(target_os = "linux")]
pub struct DirWatch {
    inotify: inotify::Inotify,
    name: std::ffi::OsString,
}

/// Why [`DirWatch::wait`] returned.
#[cfg(target_os = "linux")]
pub enum Woken {
    /// The lock directory was removed (or its folder went away): try again now.
    Removed,
    /// `until` came.
    Due,
    /// `cancelled` said so.
    Cancelled,
}

#[cfg(target_os = "linux")]
impl DirWatch {
    /// Start watching for the removal of `lock_path`; None where inotify is unavailable (the
    /// caller keeps the schedule). Removals from this moment on are seen.
    pub fn new(lock_path: &str) -> Option<Self> {
        use inotify::{Inotify, WatchMask};
        let path = Path::new(lock_path);
        let (dir, name) = (path.parent()?, path.file_name()?);
        let inotify = Inotify::init().ok()?;
        let mask = WatchMask::DELETE
            | WatchMask::MOVED_FROM
            | WatchMask::DELETE_SELF
            | WatchMask::MOVE_SELF
            | WatchMask::ONLYDIR;
        inotify.watches().add(dir, mask).ok()?;
        Some(DirWatch {
            inotify,
            name: name.to_os_string(),
        })
    }

    /// Sleep until `until` or a removal of the lock, looking at `cancelled` at least every
    /// `CANCEL_CHECK` (an environment torn down stops its waits).
    pub fn wait(&mut self, until: Instant, cancelled: impl Fn() -> bool) -> Woken {
        use std::os::fd::AsRawFd;
        const CANCEL_CHECK: Duration = Duration::from_millis(20);
        let mut buf = [0u8; 4096];
        loop {
            if cancelled() {
                return Woken::Cancelled;
            }
            if self.removed(&mut buf) {
                return Woken::Removed;
            }
            let now = Instant::now();
            if now >= until {
                return Woken::Due;
            }
            let slice = (until - now).min(CANCEL_CHECK);
            let mut pfd = libc::pollfd {
                fd: self.inotify.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // Round up: a poll that returns a little early would only loop once more.
            let ms = slice.as_micros().div_ceil(1000) as libc::c_int;
            // SAFETY: one valid pollfd, owned by this frame, for the duration of the call.
            unsafe { libc::poll(&mut pfd, 1, ms) };
        }
    }

    /// Drain the queued events: whether one of them removed the lock (or its folder).
    fn removed(&mut self, buf: &mut [u8]) -> bool {
        use inotify::EventMask;
        let mut seen = false;
        while let Ok(events) = self.inotify.read_events(buf) {
            let mut any = false;
            for ev in events {
                any = true;
                seen |= ev
                    .mask
                    .intersects(EventMask::DELETE_SELF | EventMask::MOVE_SELF | EventMask::IGNORED)
                    || ev.name.is_some_and(|n| n == self.name.as_os_str());
            }
            if !any {
                break;
            }
        }
        seen
    }
}

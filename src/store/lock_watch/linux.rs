//! Linux: the notified handoff's own per-wait watch (inotify, deletions only).

use std::path::Path;
use std::time::{Duration, Instant};

/// One inotify instance per waiting acquisition, watching only deletions in the lock's folder,
/// and blocked on by the waiting thread itself. The process-wide watcher keeps a folder watched
/// after its waits and wakes a helper thread for every event in it (each entry write, rename
/// and lock), and the helper then wakes the waiter; here an event wakes only threads that wait,
/// only for removals, with one wake-up.
pub struct DirWatch {
    inotify: inotify::Inotify,
    name: std::ffi::OsString,
}

/// Why [`DirWatch::wait`] returned.
pub enum Woken {
    /// The lock directory was removed (or its folder went away): try again now.
    Removed,
    /// `until` came.
    Due,
    /// `cancelled` said so.
    Cancelled,
}

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

//! Linux: the notified handoff's own per-wait watch (inotify, deletions only).

use std::path::Path;
use std::time::{Duration, Instant};

/// One inotify instance per waiting acquisition, watching only deletions in the lock's folder,
/// and blocked on by the waiting thread itself. The process-wide watcher keeps a folder watched
/// after its waits and wakes a helper thread for every event in it (each entry write, rename
/// and lock), and the helper then wakes the waiter; here an event wakes only threads that wait,
/// only for removals, with one wake-up.
pub struct DirWatch {
    /// Some until dropped; then closed on a thread of its own (see `Drop`).
    inotify: Option<inotify::Inotify>,
    name: std::ffi::OsString,
}

impl Drop for DirWatch {
    /// Closing an inotify instance that had a watch waits for the kernel to tear the watch down
    /// (fsnotify's group teardown flushes its mark reaper, which waits for an SRCU grace
    /// period): 8 ms median and 130 ms p99 on a loaded 2-vCPU VM, 60–570 ms beside the writers
    /// of the CAS torture (issue 28). A waiter drops its watch right after its attempt took the
    /// lock, so that close held the lock, long enough to send the sibling writer to its own
    /// notified wait, whose close held it again: one writer then lost every compare for
    /// seconds. The close is left to a short-lived thread (one per watch, which only a wait of
    /// 75 ms or more makes; instances kept open for reuse would hold a per-user resource beyond
    /// the waits); only if no thread can be started does it happen here.
    fn drop(&mut self) {
        if let Some(inotify) = self.inotify.take() {
            let _ = std::thread::Builder::new()
                .name("pi-native-inotify-close".into())
                .stack_size(64 * 1024)
                .spawn(move || drop(inotify));
        }
    }
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
            inotify: Some(inotify),
            name: name.to_os_string(),
        })
    }

    /// Sleep until `until` or a removal of the lock, looking at `cancelled` at least every
    /// `CANCEL_CHECK` (an environment torn down stops its waits).
    pub fn wait(&mut self, until: Instant, cancelled: impl Fn() -> bool) -> Woken {
        use std::os::fd::AsRawFd;
        const CANCEL_CHECK: Duration = Duration::from_millis(20);
        let mut buf = [0u8; 4096];
        let Some(fd) = self.inotify.as_ref().map(|i| i.as_raw_fd()) else {
            return Woken::Due; // unreachable: only `drop` takes it
        };
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
                fd,
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
        let Some(inotify) = self.inotify.as_mut() else {
            return false;
        };
        let mut seen = false;
        while let Ok(events) = inotify.read_events(buf) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Dropping a watch returns without waiting for the kernel's teardown of it (milliseconds
    /// at the least): a waiter drops its watch with the lock just taken (issue 28).
    #[test]
    fn drop_does_not_wait_for_the_teardown() {
        let dir = std::env::temp_dir().join(format!("pi-native-dirwatch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let lock = dir.join("x.json.lock").to_string_lossy().into_owned();
        let mut took: Vec<Duration> = (0..10)
            .map(|_| {
                let w = DirWatch::new(&lock).expect("an inotify watch");
                let t = Instant::now();
                drop(w);
                t.elapsed()
            })
            .collect();
        took.sort();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(took[5] < Duration::from_millis(1), "drops took {took:?}");
    }
}

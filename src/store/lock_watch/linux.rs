//! Linux: one inotify instance for the process, watching only removals (`IN_DELETE`,
//! `IN_MOVED_FROM`, and the folder's own `IN_DELETE_SELF`/`IN_MOVE_SELF`), read by one thread
//! blocked in `read(2)`: an event costs one wake-up of that thread, and a quiet folder none.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask, Watches};

type Folders = Arc<Mutex<HashMap<WatchDescriptor, PathBuf>>>;

pub struct Backend {
    watches: Watches,
    folders: Folders,
}

fn lock(f: &Folders) -> std::sync::MutexGuard<'_, HashMap<WatchDescriptor, PathBuf>> {
    f.lock().unwrap_or_else(|e| e.into_inner())
}

impl Backend {
    /// The instance and its reader thread; None when the kernel refuses an instance (the
    /// user's `max_user_instances` is used up) or the thread cannot start.
    pub fn start(on_removed: fn(&Path)) -> Option<Backend> {
        let mut inotify = Inotify::init().ok()?;
        let watches = inotify.watches();
        let folders: Folders = Arc::default();
        let seen = Arc::clone(&folders);
        std::thread::Builder::new()
            .name("pi-native-lock-watch".into())
            .spawn(move || {
                let mut buf = [0u8; 4096];
                loop {
                    let Ok(events) = inotify.read_events_blocking(&mut buf) else {
                        // EINTR and the like: read again; the instance lives as long as the process.
                        continue;
                    };
                    let mut removed: Vec<PathBuf> = Vec::new();
                    {
                        let f = lock(&seen);
                        for ev in events {
                            let Some(dir) = f.get(&ev.wd) else { continue };
                            if ev
                                .mask
                                .intersects(EventMask::DELETE_SELF | EventMask::MOVE_SELF)
                            {
                                removed.push(dir.clone());
                            } else if let Some(name) = ev.name {
                                removed.push(dir.join(name));
                            }
                        }
                    }
                    for p in removed {
                        on_removed(&p);
                    }
                }
            })
            .ok()?;
        Some(Backend { watches, folders })
    }

    /// Watch removals in `dir`; false when the kernel refuses (no watch left, no folder).
    pub fn add(&mut self, dir: &Path) -> bool {
        let mask = WatchMask::DELETE
            | WatchMask::MOVED_FROM
            | WatchMask::DELETE_SELF
            | WatchMask::MOVE_SELF
            | WatchMask::ONLYDIR;
        match self.watches.add(dir, mask) {
            Ok(wd) => {
                lock(&self.folders).insert(wd, dir.to_path_buf());
                true
            }
            Err(_) => false,
        }
    }

    /// Stop watching `dir`.
    pub fn remove(&mut self, dir: &Path) {
        let wd = {
            let mut f = lock(&self.folders);
            let wd = f
                .iter()
                .find(|(_, d)| d.as_path() == dir)
                .map(|(w, _)| w.clone());
            if let Some(wd) = &wd {
                f.remove(wd);
            }
            wd
        };
        if let Some(wd) = wd {
            let _ = self.watches.remove(wd);
        }
    }
}

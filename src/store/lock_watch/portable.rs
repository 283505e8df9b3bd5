//! macOS and Windows: the `notify` crate's watcher (kqueue, ReadDirectoryChangesW), one for the
//! process, reporting removals.

use std::path::Path;

use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};

pub struct Backend {
    watcher: RecommendedWatcher,
}

impl Backend {
    /// The watcher; None where the OS gives none.
    pub fn start(on_removed: fn(&Path)) -> Option<Backend> {
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
        Some(Backend { watcher })
    }

    /// Watch `dir` (not its subfolders); false when the OS refuses.
    pub fn add(&mut self, dir: &Path) -> bool {
        self.watcher.watch(dir, RecursiveMode::NonRecursive).is_ok()
    }

    /// Stop watching `dir`.
    pub fn remove(&mut self, dir: &Path) {
        let _ = self.watcher.unwatch(dir);
    }
}

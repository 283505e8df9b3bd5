//! Where the file-system calls of an async operation run: never on the JS thread, and never
//! on libuv's pool when they may wait on a network (issue 41: four calls retrying through a
//! network client's error window held all four of its threads, and the host's own `readFile`
//! waited 4.7 s). A folder on a local file system gets the local lane; a network or FUSE
//! folder the lane of its mount (its device), with threads of its own; a folder not looked at
//! yet the lane that looks (one `statfs`, remembered), so an unknown mount cannot stall the
//! others. Each lane is a bounded pool ([`crate::background::Pool`]): a call stuck in its
//! file system gives its place to a new thread after 250 ms, up to a cap per lane, beyond
//! which calls wait.
//!
//! Threads in all: the local lane up to 4, the looking lane up to 4, each mount up to 8 (2
//! counted, 6 more while calls are stuck), besides the runtime that drives the futures.

use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use crate::background::Pool;
use crate::platform::fs_kind;

/// A lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lane {
    /// Local file systems.
    Local,
    /// One network or FUSE mount, by device.
    Mount(u64),
    /// Folders not looked at yet.
    Unknown,
}

/// A call running this long counts as stuck: a new thread may take the next.
const STUCK_AFTER: Duration = Duration::from_millis(250);

fn pools() -> std::sync::MutexGuard<'static, HashMap<Lane, &'static Pool>> {
    static POOLS: OnceLock<Mutex<HashMap<Lane, &'static Pool>>> = OnceLock::new();
    POOLS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

fn pool(lane: Lane) -> &'static Pool {
    pools().entry(lane).or_insert_with(|| {
        let p = match lane {
            Lane::Local => Pool::new(4, "pi-native-fs", || {}),
            Lane::Unknown => Pool::new(2, "pi-native-look", || {})
                .replacing_stuck(STUCK_AFTER)
                .capped(4),
            Lane::Mount(_) => Pool::new(2, "pi-native-mount", || {})
                .replacing_stuck(STUCK_AFTER)
                .capped(8),
        };
        // One pool per lane for the process's life (a process meets few mounts).
        Box::leak(Box::new(p))
    })
}

/// The lane of the folder `dir`, from what is remembered of it (no call).
pub fn of_folder(dir: &Path) -> Lane {
    match fs_kind::remembered(dir) {
        Some((_, false)) => Lane::Local,
        Some((dev, true)) => Lane::Mount(dev),
        None => Lane::Unknown,
    }
}

/// The lane of the file `path`'s folder.
pub fn of_file(path: &str) -> Lane {
    Path::new(path).parent().map_or(Lane::Unknown, of_folder)
}

/// Run `job` on `lane`; the future resolves with its result (None: no thread could take it,
/// or it panicked).
pub fn run<T: Send + 'static>(
    lane: Lane,
    job: impl FnOnce() -> T + Send + 'static,
) -> impl Future<Output = Option<T>> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let p = pool(lane);
    let queued = p.spawn(Box::new(move || {
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).ok();
        let _ = tx.send(out);
    }));
    p.replace_stuck();
    async move {
        if !queued {
            return None;
        }
        rx.await.ok().flatten()
    }
}

/// Run `job` for the folder `dir`: on its lane, learning where it lives first if that is not
/// known yet (on the looking lane).
pub fn run_in<T: Send + 'static>(
    dir: &Path,
    job: impl FnOnce() -> T + Send + 'static,
) -> impl Future<Output = Option<T>> {
    let lane = of_folder(dir);
    let dir = dir.to_path_buf();
    run(lane, move || {
        if lane == Lane::Unknown {
            fs_kind::learn(&dir);
        }
        job()
    })
}

/// Calls queued behind stuck ones get a thread (called by the lock refresh scheduler's tick:
/// nothing else happens on a lane whose every thread is stuck).
pub fn replace_stuck() {
    let all: Vec<&'static Pool> = pools().values().copied().collect();
    for p in all {
        p.replace_stuck();
    }
}

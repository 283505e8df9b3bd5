//! The lock (SPEC §3.4, L1–L10): proper-lockfile's on-disk protocol, so native and JavaScript
//! writers share files, with pi-native's own decisions as pure state machines over a narrow
//! world interface, explored by a deterministic simulator (docs/LOCKING.md).
//!
//! - [`model`]: acquiring (L2–L3, B17/B18, the network rule, L2a's orphans, the token);
//! - [`hold`]: refreshing (L5), the fence and the publish, releasing (L7, W-B4, L2c);
//! - [`world`]: the calls and replies between them and a world; [`real`]: production's world;
//!   `sim`: the simulator's (feature `sim`, and the tests);
//! - [`memory`]: what the process learned (sightings, orphans, folders);
//! - [`table`]: the process's own locks, queues and JS environments;
//! - [`drive`]: production's drivers, blocking (sync) and timer-based (async);
//! - [`refresh`]: the refresh scheduler.
//!
//! On top of the protocol, an in-process table lets operations of this process queue for each
//! other (woken on release instead of sleeping blindly), lets a synchronous CAS in an exit
//! hook wait for this process's in-flight native holder (W-B6), releases only locks this
//! process still owns (W-B4), and refreshes from helper threads so synchronous holders are
//! protected too (W-B5). Held lock directories are removed when their JS environment goes:
//! those held for JS callbacks at its `exit` event (L8), all others at its teardown (L10h).

pub mod drive;
pub mod hold;
pub mod memory;
pub mod model;
pub mod real;
pub mod refresh;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
pub mod table;
pub mod world;

use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use crate::fserror::FsError;
use crate::nodepath;
use hold::{Hold, Lost, Next};
use memory::Memory;
use real::RealWorld;
use world::{Op, World};

pub use model::{normalize_stale, MIN_STALE_MS};
pub use table::{busy_here, HolderKind, InFlight};

/// The default bound for client attribute caches on network and FUSE file systems: NFS caches
/// directory attributes for up to 60 s (`acdirmax`), sshfs for 20 s, SMB clients for 1–10 s.
pub const DEFAULT_ATTRIBUTE_CACHE_MS: u64 = 60_000;

/// Which staleness rule a lock follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsRule {
    /// By the file system the lock's folder is on ([`crate::platform::fs_kind`]).
    Auto,
    /// The local rule: stale when the mtime is older than the threshold.
    Local,
    /// The network rule, whatever the file system.
    Network,
}

/// How acquisition retries (B17 / B18).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Async policy: `retries + 1` attempts, waits min(25·2^k, 500) ms, every error retried,
    /// the final error is the most frequent one.
    Async { retries: u32 },
    /// Sync policy: max(1, retries) + 1 attempts, only ELOCKED retried (blocking sleeps).
    Sync { retries: u32 },
    /// One attempt, no waiting at all, not even for this process's own queue: the store's
    /// fast path (ARCHITECTURE.md, "Fast path"), which falls back to the async policy.
    Once,
}

impl Retry {
    fn policy(self) -> model::Policy {
        match self {
            Retry::Async { retries } => model::Policy::Async { retries },
            Retry::Sync { retries } => model::Policy::Sync { retries },
            Retry::Once => model::Policy::Once,
        }
    }
}

/// Lock acquisition options (proper-lockfile's, as the callers pass them).
#[derive(Debug, Clone, Copy)]
pub struct LockOptions {
    pub retry: Retry,
    /// Effective stale threshold (already normalized: at least 2000 ms).
    pub stale_ms: u64,
    pub kind: HolderKind,
    /// Which JS environment (main thread or a worker) holds it, for exit cleanup.
    pub owner: u64,
    /// Create the target's folder (mkdir -p, Node's errors) if the lock's `mkdir` finds it
    /// missing: the store's "mkdir -p, then lock" (B13) at the cost of one `mkdir` instead of
    /// a `stat` on every call. A failure to create it is final, as the original's mkdir -p is.
    pub create_parent: bool,
    /// The hold, once taken, waits for a verdict of the JS thread (a CAS whose comparison JS
    /// makes). Like a `withFileLock` callback's ([`HolderKind::Callback`]), such an async hold is
    /// not taken at all after its environment's `exit` event.
    pub js_verdict: bool,
    /// Local or network staleness rule (set by the host: `PI_NATIVE_LOCK_FS`).
    pub fs: FsRule,
    /// Under the network rule, how long a client may have cached what it answers
    /// (`PI_NATIVE_ATTRIBUTE_CACHE_MS`, `attributeCacheMs`).
    pub attribute_cache_ms: u64,
    /// Whether the lock's folder is on a network or FUSE file system, as decided once for the
    /// folder by the caller (None: decided here, with one `statfs` the first time).
    pub remote: Option<bool>,
}

impl LockOptions {
    /// The process-matrix store's async policy (B17).
    pub fn store_async() -> Self {
        LockOptions {
            retry: Retry::Async { retries: 10 },
            stale_ms: MIN_STALE_MS,
            kind: HolderKind::Native,
            owner: 0,
            create_parent: false,
            js_verdict: false,
            fs: FsRule::Auto,
            attribute_cache_ms: DEFAULT_ATTRIBUTE_CACHE_MS,
            remote: None,
        }
    }

    /// The process-matrix store's sync policy (B18 with retries 0 → two attempts).
    pub fn store_sync() -> Self {
        LockOptions {
            retry: Retry::Sync { retries: 0 },
            ..LockOptions::store_async()
        }
    }

    fn sync(&self) -> bool {
        matches!(self.retry, Retry::Sync { .. })
    }
}

/// The process's memory of the protocol ([`memory::Memory`]).
pub(crate) fn memory() -> MutexGuard<'static, Memory> {
    static MEMORY: OnceLock<Mutex<Memory>> = OnceLock::new();
    MEMORY
        .get_or_init(|| Mutex::new(Memory::default()))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// L1: the lock directory for a target and the resolved target. With `realpath` on, the
/// callers (lib/native.js) resolve the target with Node's own `fs.realpath` first, as
/// proper-lockfile does, so its errors and answers are Node's.
pub fn lock_path_for(file: &str) -> (String, String) {
    let target = nodepath::resolve(file);
    (format!("{target}.lock"), target)
}

/// Whether the folder `dir` is on a network or FUSE file system (one `statfs` per folder,
/// remembered).
pub fn folder_remote(dir: &str) -> bool {
    crate::platform::fs_kind::is_remote_folder(std::path::Path::new(dir))
}

/// One lock of this process: its hold (None while it is being acquired), and the world its
/// calls go to. Behind its own mutex, taken only to decide and to record, never across a
/// file-system call: a call stuck in a file system holds up nobody.
#[derive(Debug)]
pub(crate) struct Cell {
    pub hold: Mutex<Option<Hold>>,
    /// Signalled when a refresh records what it did.
    pub recorded: Condvar,
    pub world: RealWorld,
}

impl Cell {
    pub fn hold(&self) -> MutexGuard<'_, Option<Hold>> {
        self.hold.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A held lock; release it with [`LockGuard::release`] (dropping releases too).
#[derive(Debug)]
pub struct LockGuard {
    lock_path: String,
    file: String,
    owner: u64,
    cell: Arc<Cell>,
    released: bool,
    /// Taken by a synchronous call: its JS thread is the caller, so it never waits for it.
    sync: bool,
}

/// Test hook (the paused-holder tests): with `PI_NATIVE_TEST_STOP_BEFORE_COMMIT=1` in
/// the environment when the addon loads, the process stops itself (SIGSTOP) right before each
/// fenced commit, i.e. between its compare and its rename, until a SIGCONT. Off otherwise.
fn test_stop_before_commit() {
    static ON: OnceLock<bool> = OnceLock::new();
    let on = *ON.get_or_init(|| {
        std::env::var_os("PI_NATIVE_TEST_STOP_BEFORE_COMMIT").is_some_and(|v| v == "1")
    });
    #[cfg(unix)]
    if on {
        // SAFETY: raising a signal on this process has no memory-safety preconditions.
        unsafe { libc::raise(libc::SIGSTOP) };
    }
    #[cfg(not(unix))]
    let _ = on;
}

/// A wait of a blocking driver, shortened at random by up to half (retries of many processes
/// should not stay in step).
fn jittered(d: Duration) -> Duration {
    d.mul_f64(0.5 + 0.5 * rand::random::<f64>())
}

impl LockGuard {
    /// The resolved target path this lock protects (`file` of lock errors).
    pub fn file(&self) -> &str {
        &self.file
    }

    /// Whether the lock's folder is on a network or FUSE file system.
    pub fn remote(&self) -> bool {
        self.cell.world.remote
    }

    /// Publish a write: rename `temp` over `target` only while the lock is verifiably still
    /// ours (the fence), and resolve a rename whose reply was lost by looking at `temp`,
    /// never by renaming again blindly. ECOMPROMISED when the lock is not ours any more.
    pub fn publish_rename(&self, temp: &str, target: &str) -> Result<(), FsError> {
        let mut world = self.cell.world.clone();
        world.temp = temp.to_string();
        world.target = target.to_string();
        self.publish(world, Op::Rename)
    }

    /// Publish a removal of `target` (fenced, as [`LockGuard::publish_rename`]); a target
    /// already gone counts as removed.
    pub fn publish_unlink(&self, target: &str) -> Result<(), FsError> {
        let mut world = self.cell.world.clone();
        world.target = target.to_string();
        self.publish(world, Op::Unlink)
    }

    fn publish(&self, mut world: RealWorld, publish: Op) -> Result<(), FsError> {
        test_stop_before_commit();
        if table::state().torn_down.contains(&self.owner) && self.owner != 0 {
            return Err(FsError::Cancelled);
        }
        let mut next = match self.cell.hold().as_mut() {
            Some(h) => h.publish_start(real::now()),
            None => return Err(self.compromised()),
        };
        loop {
            next = match next {
                Next::Call(op) => {
                    let r = world.call(op);
                    let mut h = self.cell.hold();
                    match h.as_mut() {
                        Some(h) => h.publish_next(publish, op, r, real::now()),
                        None => return Err(self.compromised()),
                    }
                }
                Next::Backoff(d) => {
                    std::thread::sleep(jittered(d));
                    match self.cell.hold().as_mut() {
                        Some(h) => h.publish_resume(real::now()),
                        None => return Err(self.compromised()),
                    }
                }
                Next::Done(Ok(())) => return Ok(()),
                Next::Done(Err(Lost::Compromised)) => return Err(self.compromised()),
                Next::Done(Err(Lost::Io { syscall, err } | Lost::Unknown { syscall, err })) => {
                    return Err(world.error(syscall, err))
                }
            };
        }
    }

    fn compromised(&self) -> FsError {
        FsError::Compromised {
            file: self.file.clone(),
        }
    }

    /// Mark an asynchronous hold as waiting for the JS thread (a CAS suspended until JS judges
    /// its file): from now on a synchronous acquisition on the JS thread must not wait for it
    /// beyond its own retry budget, since it cannot finish while that thread is blocked (W-B6).
    /// After its environment's `exit` event the JS thread runs only exit listeners, so the
    /// verdict never comes: the lock is given back at once, as `release_callback_locks` gives
    /// back a `withFileLock` cut short (L8), and the suspended CAS will act on nothing. A sync
    /// hold is left as it is: its caller judges at once.
    pub fn awaits_js(&self) {
        if self.sync {
            return;
        }
        let mut st = table::state();
        let exited = st.exited.contains(&self.owner);
        match st.held.get_mut(&self.lock_path) {
            Some(h) if Arc::ptr_eq(&h.cell, &self.cell) => h.kind = HolderKind::Callback,
            _ => return,
        }
        if exited {
            st.held.remove(&self.lock_path);
            drop(st);
            give_back(vec![(self.lock_path.clone(), self.cell.clone())]);
        } else {
            table::wake(st);
        }
    }

    /// Release: forget it in-process, then remove the lock directory if it is still ours.
    /// Err(ECOMPROMISED) when it was not ours any more (taken over while held; nothing is
    /// removed then, W-B4). Callers that must not mask an outcome ignore the error (B15).
    pub fn release(mut self) -> Result<(), FsError> {
        self.release_inner()
    }

    fn release_inner(&mut self) -> Result<(), FsError> {
        if self.released {
            return Ok(());
        }
        self.released = true;
        let result =
            drive::release_blocking(&self.lock_path, &self.cell).map_err(|()| self.compromised());
        let mut st = table::state();
        if st
            .held
            .get(&self.lock_path)
            .is_some_and(|h| Arc::ptr_eq(&h.cell, &self.cell))
        {
            st.held.remove(&self.lock_path);
        }
        table::wake(st);
        result
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let _ = self.release_inner();
    }
}

/// Acquire the lock on `file` per `opts`, blocking the calling thread while it waits (sync
/// operations; the async ones use [`drive::acquire_async`]).
pub fn acquire(file: &str, opts: LockOptions) -> Result<LockGuard, FsError> {
    drive::acquire_blocking(file, opts)
}

/// The `exit` event of the JS environment `owner` (L8): locks held for JS callbacks that can
/// no longer finish (a `withFileLock` cut short by `process.exit`, an async CAS suspended for
/// its JS verdict) are removed, and an async CAS that suspends later gives its lock back at
/// once ([`LockGuard::awaits_js`]). Operations are not cancelled: exit listeners that run
/// later may still use the store synchronously.
pub fn release_callback_locks(owner: u64) {
    let mine: Vec<(String, Arc<Cell>)> = {
        let mut st = table::state();
        if owner != 0 {
            st.exited.insert(owner);
        }
        let paths: Vec<String> = st
            .held
            .iter()
            .filter(|(_, h)| h.owner == owner && h.kind == HolderKind::Callback)
            .map(|(p, _)| p.clone())
            .collect();
        paths
            .into_iter()
            .filter_map(|p| st.held.remove(&p).map(|h| (p, h.cell)))
            .collect()
    };
    give_back(mine);
}

/// Remove lock directories that are still ours and forget them. A lock whose refresh is
/// stuck past its deadline is given up without a file-system call (at exit too).
fn give_back(locks: Vec<(String, Arc<Cell>)>) {
    for (path, cell) in locks {
        let _ = drive::release_blocking(&path, &cell);
    }
    table::wake(table::state());
}

/// At teardown of the JS environment `owner` (worker terminate, process exit; L8 / L10h): its
/// waits end, its native operations get up to 500 ms to finish, and its locks are given back.
pub fn release_all(owner: u64) {
    let mut st = table::state();
    st.torn_down.insert(owner);
    table::wake(st);
    let mut st = table::state();
    let deadline = std::time::Instant::now() + Duration::from_millis(500);
    loop {
        let busy = st
            .held
            .values()
            .any(|h| h.owner == owner && h.kind == HolderKind::Native);
        let now = std::time::Instant::now();
        if !busy || now >= deadline {
            break;
        }
        st = table::sleep(st, deadline - now);
    }
    let mine: Vec<(String, Arc<Cell>)> = st
        .held
        .iter()
        .filter(|(_, h)| h.owner == owner)
        .map(|(p, h)| (p.clone(), h.cell.clone()))
        .collect();
    for (path, _) in &mine {
        st.held.remove(path);
    }
    drop(st);
    give_back(mine);
}

/// How many acquisition attempts were made early, on a notified removal (diagnostic).
pub fn notified_attempts() -> u64 {
    table::state().notified_attempts
}

#[cfg(test)]
mod tests;

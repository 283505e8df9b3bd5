//! proper-lockfile 4.1.2's on-disk lock protocol (SPEC §3.4, L1–L10), so native and JavaScript
//! writers can share files: the lock is the directory `<resolved target>.lock`, taken by an
//! atomic `mkdir`, stale only when its mtime is more than 2000 ms old (takeover = rmdir + one
//! more mkdir), kept fresh by rewriting its mtime at least every second while held.
//!
//! On top of the protocol, an in-process table of held locks lets operations of this process
//! queue for each other (woken on release instead of sleeping blindly), lets a synchronous CAS
//! in an exit hook wait for this process's in-flight native holder (W-B6), releases only locks
//! this process still owns (W-B4), and refreshes from helper threads so synchronous holders are
//! protected too (W-B5). Held lock directories are removed when their JS environment goes:
//! those held for JS callbacks at its `exit` event (L8), all others at its teardown (L10h).
//!
//! Network and FUSE file systems (NFS, SMB, sshfs, …; [`crate::platform::fs_kind`]): a client
//! may answer `stat` from an attribute cache seconds old, so a lock's mtime says little about
//! when its holder last refreshed it. There a lock is judged stale only once this process has
//! seen it unchanged for longer than the stale threshold plus a bound for attribute caches
//! ([`LockOptions::attribute_cache_ms`]; SPEC L10b allows any longer threshold), and a holder
//! that went longer than the stale threshold without a successful refresh counts its lock as
//! lost (ECOMPROMISED) instead of trusting a cache. COMPATIBILITY.md, "Shared agentDir across
//! machines", says what is and is not exclusive there.
//!
//! The refreshes are made by [`crate::store::lock_refresh`]; on every file system a holder whose last
//! successful refresh is older than the stale threshold (by the clock that counts suspended
//! time, [`BootInstant`]) counts its lock as lost, since from then on another process may
//! judge it stale. Transient errors of network file systems are retried
//! ([`crate::store::transient`]).

use std::collections::HashSet;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::fserror::FsError;
use crate::nodepath;
use crate::platform;
use crate::platform::clock::BootInstant;
use crate::store::transient::{self, Op};

/// proper-lockfile floors staleness at 2000 ms; the store's effective threshold is exactly that.
pub const MIN_STALE_MS: u64 = 2000;
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

/// Who holds an in-process lock: decides whether a synchronous waiter may block for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HolderKind {
    /// A native store operation: finishes on its own, without the JS thread.
    Native,
    /// A JS callback (`withFileLock`): needs the JS thread to finish.
    Callback,
}

/// How acquisition retries (B17 / B18).
#[derive(Debug, Clone, Copy)]
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
    fn attempts(self) -> u32 {
        match self {
            Retry::Async { retries } => retries.saturating_add(1),
            Retry::Sync { retries } => retries.max(1).saturating_add(1),
            Retry::Once => 1,
        }
    }

    /// Wait after failed attempt number `k` (1-based).
    fn wait(self, k: u32) -> Duration {
        let ms = 25u64.saturating_mul(1u64 << (k - 1).min(20)).min(500);
        Duration::from_millis(ms)
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
    /// missing: the store's "mkdir -p, then lock" (B13, set by its `lock_entry`) at the cost of
    /// one `mkdir` instead of a `stat` on every call. A failure to create it is final, as the
    /// original's mkdir -p is.
    pub create_parent: bool,
    /// The hold, once taken, waits for a verdict of the JS thread (a CAS whose comparison JS
    /// makes). Like a `withFileLock` callback's ([`HolderKind::Callback`]), such an async hold is
    /// not taken at all after its environment's `exit` event ([`State::dead_end`]).
    pub js_verdict: bool,
    /// Local or network staleness rule (set by the host: `PI_NATIVE_LOCK_FS`).
    pub fs: FsRule,
    /// Under the network rule, how long a client may have cached what it answers
    /// (`PI_NATIVE_ATTRIBUTE_CACHE_MS`, `attributeCacheMs`).
    pub attribute_cache_ms: u64,
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
        }
    }

    /// The process-matrix store's sync policy (B18 with retries 0 → two attempts).
    pub fn store_sync() -> Self {
        LockOptions {
            retry: Retry::Sync { retries: 0 },
            stale_ms: MIN_STALE_MS,
            kind: HolderKind::Native,
            owner: 0,
            create_parent: false,
            js_verdict: false,
            fs: FsRule::Auto,
            attribute_cache_ms: DEFAULT_ATTRIBUTE_CACHE_MS,
        }
    }
}

/// L4: `stale = max(stale || 0, 2000)`.
pub fn normalize_stale(stale: Option<f64>) -> u64 {
    let s = stale.filter(|s| s.is_finite() && *s > 0.0).unwrap_or(0.0);
    (s.min(u64::MAX as f64) as u64).max(MIN_STALE_MS)
}

/// A lock directory as found on disk: (device, inode, mtime in ns).
type DirId = platform::fs::Stamp;

/// L2b: whether `found` is the lock directory recorded as `ours`. On a local file system by
/// device, inode and mtime. On a network or FUSE one (`remote`) by device and mtime only:
/// libfuse clients that open by path (smbnetfs, sshfs) give the same directory a new inode
/// number once the kernel forgot it (seen on smbnetfs every few seconds while its client has
/// EIO windows), which would tell a holder it lost a lock nobody took. The mtime is ours (we set
/// it at every refresh); a successor can only be made after ours was judged stale, at least 2 s
/// after that mtime, so it cannot carry it.
pub(crate) fn same_dir(remote: bool, found: DirId, ours: DirId) -> bool {
    if remote {
        (found.0, found.2) == (ours.0, ours.2)
    } else {
        found == ours
    }
}

/// Where one acquisition stands with its lock directory.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Hold {
    /// Queued or attempting: nothing on disk is ours yet.
    Acquiring,
    /// Ours: the directory as this process last set it, and when that set began (by the clock
    /// that counts suspended time: from `refreshed` + the stale threshold on, another process
    /// may judge it stale).
    Held { id: DirId, refreshed: BootInstant },
    /// Not ours any more (taken over, removed: `left` is None), or possibly not (no successful
    /// refresh within the stale threshold: `left` is the directory as we last set it). Nothing
    /// on disk is touched again, but for the release's removal of `left` if it is still there,
    /// unchanged (L2c).
    Lost { left: Option<DirId> },
    /// Given back, or never taken.
    Released,
}

/// What this process knows of one lock directory it holds. Behind its own mutex so that a
/// fenced commit and the release never race each other's file-system calls, and never hold the
/// table's mutex while they make them. A refresh takes it only to read and to record, never
/// across its own file-system calls ([`crate::store::lock_refresh`]): a refresh stuck in the file
/// system holds up nobody.
#[derive(Debug)]
pub(crate) struct Disk {
    pub(crate) hold: Hold,
    /// The lock's stale threshold (a holder that goes longer without a successful refresh
    /// counts its lock as lost, L5).
    pub(crate) stale: Duration,
    /// Whether the network staleness rule applies (judged by observation, not by mtimes).
    pub(crate) network: bool,
    /// Whether the folder keeps whole seconds only: then mtimes are set rounded up, as
    /// proper-lockfile does (L2/L5), so that a fresh lock never looks older than it is.
    pub(crate) whole_seconds: bool,
    /// Whether the folder is on a network or FUSE file system (`platform::fs_kind`): a CAS then
    /// reads the entry through [`super::coherent_read`].
    pub(crate) remote: bool,
    /// A refresh of this lock is queued or running.
    pub(crate) refreshing: bool,
    /// A refresh is between its check and its record: its touch may have landed already, so
    /// the directory may carry a newer mtime than `hold` says.
    pub(crate) touching: bool,
}

/// A [`Disk`] and the condition its waiters wait on (a refresh's record, see `touching`).
#[derive(Debug)]
pub(crate) struct DiskCell {
    pub(crate) disk: Mutex<Disk>,
    pub(crate) recorded: Condvar,
}

impl Disk {
    /// The instant from which another process may judge this lock stale, while held.
    pub(crate) fn deadline(&self) -> Option<BootInstant> {
        match self.hold {
            Hold::Held { refreshed, .. } => Some(refreshed + self.stale),
            _ => None,
        }
    }

    /// Marks the lock lost once its deadline has passed; whether it is still held.
    pub(crate) fn check_deadline(&mut self) -> bool {
        match self.deadline() {
            Some(d) if BootInstant::now() > d => {
                if let Hold::Held { id, .. } = self.hold {
                    self.hold = Hold::Lost { left: Some(id) };
                }
                false
            }
            Some(_) => true,
            None => false,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Held {
    kind: HolderKind,
    owner: u64,
    pub(crate) disk: Arc<DiskCell>,
}

/// In-process state: locks held by this process, the FIFO of operations waiting for each, and
/// the JS environments already torn down (their waits end, their operations never commit).
#[derive(Default)]
pub(crate) struct State {
    pub(crate) held: HashMap<String, Held>,
    queues: HashMap<String, VecDeque<u64>>,
    next_ticket: u64,
    torn_down: HashSet<u64>,
    /// JS environments whose `exit` event has fired: no JS callback of theirs will run again.
    exited: HashSet<u64>,
    /// Lock paths somebody here waits for on disk → removals seen so far (notified handoff).
    waiting: HashMap<String, Waiting>,
    /// Attempts made early because a removal was notified (a diagnostic for tests).
    notified_attempts: u64,
    /// Threads asleep on `released` ([`sleep_until_released`]): a release with nobody asleep
    /// skips the wake-up call (a syscall on every uncontended store operation otherwise).
    sleepers: usize,
}

#[derive(Default)]
struct Waiting {
    waiters: usize,
    removals: u64,
}

/// A removal inside a watched directory ([`crate::store::lock_watch`]): wake whoever waits for it,
/// or for any lock in it when the directory itself went.
fn on_removed(path: &std::path::Path) {
    let mut st = lock_state();
    let mut woke = false;
    for (lock_path, w) in st.waiting.iter_mut() {
        let lock_path = std::path::Path::new(lock_path);
        if lock_path == path || lock_path.parent() == Some(path) {
            w.removals += 1;
            woke = true;
        }
    }
    drop(st);
    if woke {
        table().released.notify_all();
    }
}

/// Start being woken by removals of `lock_path`; false where notifications are unavailable.
fn start_watching(lock_path: &str) -> bool {
    let Some(dir) = std::path::Path::new(lock_path).parent() else {
        return false;
    };
    if !crate::store::lock_watch::watch(dir, on_removed) {
        return false;
    }
    lock_state()
        .waiting
        .entry(lock_path.to_string())
        .or_default()
        .waiters += 1;
    true
}

fn stop_watching(lock_path: &str) {
    {
        let mut st = lock_state();
        if let Some(w) = st.waiting.get_mut(lock_path) {
            w.waiters -= 1;
            if w.waiters == 0 {
                st.waiting.remove(lock_path);
            }
        }
    }
    if let Some(dir) = std::path::Path::new(lock_path).parent() {
        crate::store::lock_watch::unwatch(dir);
    }
}

fn removals(lock_path: &str) -> u64 {
    lock_state()
        .waiting
        .get(lock_path)
        .map_or(0, |w| w.removals)
}

/// How many acquisition attempts were made early, on a notified removal (diagnostic).
pub fn notified_attempts() -> u64 {
    lock_state().notified_attempts
}

/// The shortest scheduled wait that a notified handoff may cut short. The 25 and 50 ms waits
/// keep the plain schedule: a CAS that met the lock held almost always finds the entry changed
/// once it gets it, and woken at once it takes the lock before fresh readers do, only to fail
/// its compare (measured with 8 contending processes: 3.9 attempts per success and about an
/// eighth of the throughput with every wait notified; COMPATIBILITY.md).
const WATCH_FROM_WAIT: Duration = Duration::from_millis(100);

/// How a waiting acquisition learns that the lock directory was removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watch {
    /// It does not: the schedule alone.
    Off,
    /// The process's one watcher ([`crate::store::lock_watch`]) counts removals and wakes the
    /// `released` condition variable.
    On,
}

impl Watch {
    /// Watched where notifications can be had (one inotify instance for the whole process on
    /// Linux); where the OS refuses (no instance left for this user), the schedule alone.
    fn start(lock_path: &str) -> Watch {
        if start_watching(lock_path) {
            Watch::On
        } else {
            Watch::Off
        }
    }

    fn stop(self, lock_path: &str) {
        if self == Watch::On {
            stop_watching(lock_path);
        }
    }

    /// Wait until `due`, or until the lock is seen removed (more removals than `seen`), or
    /// until `owner`'s environment is torn down.
    fn wait(self, owner: u64, due: Instant, lock_path: &str, seen: u64) -> Wake {
        wait_for(owner, due, lock_path, seen, self == Watch::On)
    }
}

enum Wake {
    /// The next scheduled attempt is due.
    Due,
    /// The lock directory was removed: try now (the schedule is unchanged).
    Removed,
    /// The caller's environment was torn down.
    Cancelled,
}

struct Table {
    state: Mutex<State>,
    released: Condvar,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| Table {
        state: Mutex::new(State::default()),
        released: Condvar::new(),
    })
}

/// Wake the threads asleep in [`sleep_until_released`] after a change of `st`, if any. Checked
/// under the state's mutex, which a sleeper holds from its last look until it sleeps: nobody
/// counted means nobody can miss the change.
fn wake_sleepers(st: std::sync::MutexGuard<'static, State>) {
    let wake = st.sleepers > 0;
    drop(st);
    if wake {
        table().released.notify_all();
    }
}

/// Sleep on `released` for at most `timeout` (counted in `sleepers`), returning the guard.
fn sleep_until_released(
    mut st: std::sync::MutexGuard<'static, State>,
    timeout: Duration,
) -> std::sync::MutexGuard<'static, State> {
    st.sleepers += 1;
    let mut st = table()
        .released
        .wait_timeout(st, timeout)
        .unwrap_or_else(|e| e.into_inner())
        .0;
    st.sleepers -= 1;
    st
}

pub(crate) fn lock_state() -> std::sync::MutexGuard<'static, State> {
    table().state.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn lock_disk(d: &DiskCell) -> std::sync::MutexGuard<'_, Disk> {
    d.disk.lock().unwrap_or_else(|e| e.into_inner())
}

impl State {
    /// Whether an acquisition per `opts` must not take its lock: its environment was torn down,
    /// or it is async, would wait for the JS thread once held, and that environment's `exit`
    /// event has fired, so no JS of it runs again. Taken anyway, such a lock would be given back
    /// only if its thread got there before the process ended: a lock directory left once, in a
    /// CI run under Wine, by an async CAS with a Proxy `expected` started right before
    /// `process.exit` fits that window. Sync acquisitions go on: later exit listeners may lock.
    fn dead_end(&self, opts: &LockOptions) -> bool {
        opts.owner != 0
            && (self.torn_down.contains(&opts.owner)
                || !matches!(opts.retry, Retry::Sync { .. })
                    && (opts.js_verdict || opts.kind == HolderKind::Callback)
                    && self.exited.contains(&opts.owner))
    }
}

/// True once the JS environment `owner` has been torn down (0 = no environment: Rust tests).
fn is_torn_down(owner: u64) -> bool {
    owner != 0 && lock_state().torn_down.contains(&owner)
}

/// Async lock operations of this process under way, by lock path: counted from the call on
/// the JS thread, before the work reaches a thread, until the work ends ([`InFlight`]).
static IN_FLIGHT: std::sync::LazyLock<Mutex<HashMap<String, usize>>> =
    std::sync::LazyLock::new(|| Mutex::new(HashMap::new()));

fn in_flight() -> std::sync::MutexGuard<'static, HashMap<String, usize>> {
    IN_FLIGHT.lock().unwrap_or_else(|e| e.into_inner())
}

/// One async operation of this process on a lock, from its call on the JS thread until its
/// work ends (when this is dropped). While any is under way on a lock, [`busy_here`] says so:
/// such an operation, called earlier, may be about to take the lock, and nothing may be
/// answered ahead of it without the lock (store::cas_mismatch_now).
#[derive(Debug)]
pub struct InFlight {
    lock_path: String,
}

impl InFlight {
    /// Count an operation on `file`'s lock (resolved, as the store's locks are) as under way.
    pub fn start(file: &str) -> InFlight {
        let (lock_path, _) = lock_path_for(file);
        *in_flight().entry(lock_path.clone()).or_insert(0) += 1;
        InFlight { lock_path }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut map = in_flight();
        if let Some(n) = map.get_mut(&self.lock_path) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.lock_path);
            }
        }
    }
}

/// Whether this process has anything under way on the lock `lock_path`: an async operation
/// called and not finished ([`InFlight`]), a holder, or a queued acquisition.
pub fn busy_here(lock_path: &str) -> bool {
    if in_flight().contains_key(lock_path) {
        return true;
    }
    let st = lock_state();
    st.held.contains_key(lock_path) || st.queues.contains_key(lock_path)
}

/// A held lock; release it with [`LockGuard::release`] (dropping releases too).
#[derive(Debug)]
pub struct LockGuard {
    lock_path: String,
    file: String,
    owner: u64,
    disk: Arc<DiskCell>,
    released: bool,
    /// Taken by a synchronous call: its JS thread is the caller, so it never waits for it.
    sync: bool,
}

impl LockGuard {
    /// The resolved target path this lock protects (`file` of lock errors).
    pub fn file(&self) -> &str {
        &self.file
    }

    /// Run `publish` (the rename or unlink that makes a write visible) only while the lock is
    /// verifiably still ours: its directory has the device, inode and mtime this process
    /// created and last refreshed, and the JS environment that took it is still alive. The
    /// refresher cannot run in between (same per-lock mutex), so what remains unfenced is the
    /// few microseconds between the `stat` and `publish`. A lock that is not ours any more
    /// fails with ECOMPROMISED and `publish` does not run.
    pub fn fenced<T>(&self, publish: impl FnOnce() -> Result<T, FsError>) -> Result<T, FsError> {
        test_stop_before_commit();
        let disk = lock_disk(&self.disk);
        if is_torn_down(self.owner) {
            return Err(FsError::Cancelled);
        }
        let (ours, _disk) = still_ours(&self.lock_path, &self.disk, disk);
        if !ours {
            return Err(FsError::Compromised {
                file: self.file.clone(),
            });
        }
        publish()
    }

    /// Whether the lock's folder is on a network or FUSE file system (`platform::fs_kind`).
    pub fn remote(&self) -> bool {
        lock_disk(&self.disk).remote
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
        let mut st = lock_state();
        let exited = st.exited.contains(&self.owner);
        match st.held.get_mut(&self.lock_path) {
            Some(h) if Arc::ptr_eq(&h.disk, &self.disk) => h.kind = HolderKind::Callback,
            _ => return,
        }
        if exited {
            st.held.remove(&self.lock_path);
            drop(st);
            give_back(vec![(self.lock_path.clone(), self.disk.clone())]);
        } else {
            wake_sleepers(st);
        }
    }

    /// Release: forget it in-process, then rmdir the lock directory if it is still ours.
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
        let result = {
            let disk = lock_disk(&self.disk);
            // Removed only once verified ours (device, inode and the mtime we set). What stays
            // unfenced is the moment between that `stat` and the `rmdir`: another writer could
            // take the lock over in it only after judging it stale, i.e. if this thread stalled
            // there for longer than a refresh period (1 s) plus the time left to the threshold.
            let (ours, mut disk) = still_ours(&self.lock_path, &self.disk, disk);
            if ours && !remove_lock_dir(&self.lock_path, disk.remote) {
                if let Hold::Held { id, .. } = disk.hold {
                    remember_orphan(&self.lock_path, id);
                }
            }
            // L2c: lost by its deadline only (refreshes failed, nobody took it): our directory,
            // if still there unchanged, is removed rather than left for others to wait out (the
            // network rule's 62 s). Not while a refresh is in flight: the mount may be hung, and a
            // release never waits for it; its touch may also have landed (another mtime).
            if let Hold::Lost { left: Some(id) } = disk.hold {
                if !disk.touching {
                    remove_if_unchanged(&self.lock_path, id, disk.remote);
                }
            }
            let lost = matches!(disk.hold, Hold::Lost { .. });
            // The refresher never touches a path once it is released.
            disk.hold = Hold::Released;
            if lost {
                Err(FsError::Compromised {
                    file: self.file.clone(),
                })
            } else {
                Ok(())
            }
        };
        let mut st = lock_state();
        if st
            .held
            .get(&self.lock_path)
            .is_some_and(|h| Arc::ptr_eq(&h.disk, &self.disk))
        {
            st.held.remove(&self.lock_path);
        }
        wake_sleepers(st);
        result
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let _ = self.release_inner();
    }
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

/// Whether the lock directory is still the one recorded in `disk` (the guard of `cell`);
/// marks it lost if not. Lost also once the deadline has passed (no successful refresh within
/// the stale threshold): from then on another process may judge it stale, and on a network
/// file system this client's own `stat` may answer from a cache that has not seen a takeover.
/// Checked before any file-system call, so a lock whose refresh is stuck is given up without
/// waiting for the file system. While a refresh is between its check and its record, its
/// touch may already have landed: a directory that differs only then is waited for (until the
/// deadline) rather than taken for a foreign one. Returns the guard it was handed.
fn still_ours<'a>(
    lock_path: &str,
    cell: &'a DiskCell,
    mut disk: std::sync::MutexGuard<'a, Disk>,
) -> (bool, std::sync::MutexGuard<'a, Disk>) {
    loop {
        let Hold::Held { id, .. } = disk.hold else {
            return (false, disk);
        };
        if !disk.check_deadline() {
            return (false, disk);
        }
        let (remote, network) = (disk.remote, disk.network);
        let found = transient::retry(
            Op::Read,
            || remote,
            || {
                if network {
                    platform::fs::stamp_fresh(lock_path)
                } else {
                    platform::fs::stamp_of(lock_path)
                }
            },
        );
        match found {
            Ok(s) if same_dir(remote, s, id) => return (true, disk),
            _ if disk.touching => {
                let wait = disk
                    .deadline()
                    .map_or(Duration::ZERO, |d| d.duration_since(BootInstant::now()));
                disk = cell
                    .recorded
                    .wait_timeout(disk, wait.max(Duration::from_millis(1)))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
            _ => {
                disk.hold = Hold::Lost { left: None };
                return (false, disk);
            }
        }
    }
}

/// Remove a lock directory known to be ours (a release); on a network file system a transient
/// refusal (a client that still has it open) is tried again, so that it does not stay behind
/// for others to wait out. Whether it is gone.
fn remove_lock_dir(lock_path: &str, remote: bool) -> bool {
    transient::retry(Op::Dir, || remote, || rmdir_gone(lock_path)).is_ok()
}

/// L2c: remove the lock directory at `lock_path` if it is still `id`, ours as last set, though
/// the lock counts as lost (no successful refresh within the threshold); remembered as an
/// orphan (L2a) if it cannot be removed now. The `stat` asks the server (a client cache could
/// show our mtime over a successor's directory); what stays unfenced is the moment between it
/// and the `rmdir`, as in every release.
fn remove_if_unchanged(lock_path: &str, id: DirId, remote: bool) {
    let found = transient::retry(Op::Read, || remote, || platform::fs::stamp_fresh(lock_path));
    if found.is_ok_and(|s| same_dir(remote, s, id)) && !remove_lock_dir(lock_path, remote) {
        remember_orphan(lock_path, id);
    }
}

/// One `rmdir` of a lock directory; already gone counts as done.
fn rmdir_gone(lock_path: &str) -> std::io::Result<()> {
    match std::fs::remove_dir(lock_path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}

/// Lock directories of ours that could not be removed (a set-up that failed, or a release,
/// while a network client's EIO window outlasted the transient retries): path → the directory
/// as last read back from the server (recognized by device and mtime, L2b). At most
/// [`MAX_SIGHTINGS`]; past that the memory starts over (a directory forgotten is only waited
/// out by the stale rule, as any other).
fn own_orphans() -> std::sync::MutexGuard<'static, HashMap<String, DirId>> {
    static ORPHANS: OnceLock<Mutex<HashMap<String, DirId>>> = OnceLock::new();
    ORPHANS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Remember a directory of ours that could not be removed, as `id` last showed it.
fn remember_orphan(lock_path: &str, id: DirId) {
    let mut orphans = own_orphans();
    if orphans.len() >= MAX_SIGHTINGS {
        orphans.clear();
    }
    orphans.insert(lock_path.to_string(), id);
}

/// L2a: a lock directory found at `lock_path` that is one this process made and could not
/// remove (see [`own_orphans`]) is removed now, so that the attempt can make it again instead of
/// waiting it out. Ours is recognized by device and mtime, as the network rule recognizes a
/// lock (libfuse clients that open by path change a directory's inode number): a successor
/// could only have been made after ours was judged stale, at least 2 s (proper-lockfile's floor
/// on `stale`) after our mtime, so it cannot carry ours. Whether it was removed.
fn reclaim_own_orphan(lock_path: &str, found: DirId) -> bool {
    let Some(ours) = own_orphans().remove(lock_path) else {
        return false;
    };
    if !same_dir(true, found, ours) {
        return false; // not ours any more: judged by the stale rule like any lock
    }
    // One `rmdir`, not the transient retries: the attempt must stay short (a lock made at its
    // end counts as refreshed at its start), and the schedule's next attempt tries again.
    if rmdir_gone(lock_path).is_ok() {
        return true;
    }
    own_orphans().insert(lock_path.to_string(), ours);
    false
}

/// L1: the lock directory for a target and the resolved target. With `realpath` on, the
/// callers (lib/native.js) resolve the target with Node's own `fs.realpath` first, as
/// proper-lockfile does, so its errors and answers are Node's.
pub fn lock_path_for(file: &str) -> (String, String) {
    let target = nodepath::resolve(file);
    (format!("{target}.lock"), target)
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// Whether the folder of the lock directory `lock_path`, found on device `dev`, is on a
/// network or FUSE file system (cached per folder).
fn folder_remote(lock_path: &str, dev: u64) -> bool {
    std::path::Path::new(lock_path)
        .parent()
        .is_some_and(|dir| platform::fs_kind::is_remote(dir, dev))
}

/// Whether a lock in a folder that is (or is not) `remote` follows the network rule.
fn network_rule(remote: bool, opts: &LockOptions) -> bool {
    match opts.fs {
        FsRule::Local => false,
        FsRule::Network => true,
        FsRule::Auto => remote,
    }
}

/// The folder of `lock_path` is remote, by a look that needs no `stat` of ours (error paths).
fn folder_remote_now(lock_path: &str) -> bool {
    std::path::Path::new(lock_path)
        .parent()
        .is_some_and(platform::fs_kind::is_remote_folder)
}

/// The stamp of a lock directory; `ESTALE` (and, on a network file system, EIO) tried again.
fn stamp_retried(lock_path: &str, fresh: bool) -> std::io::Result<DirId> {
    transient::retry(
        Op::Read,
        || folder_remote_now(lock_path),
        || {
            if fresh {
                platform::fs::stamp_fresh(lock_path)
            } else {
                platform::fs::stamp_of(lock_path)
            }
        },
    )
}

/// A lock directory just made: what it is, and the rules it follows.
#[derive(Debug, Clone, Copy)]
struct Made {
    id: DirId,
    network: bool,
    whole_seconds: bool,
    remote: bool,
}

/// One acquisition attempt on disk (L2–L3). On success, the directory as made.
fn attempt_on_disk(lock_path: &str, file: &str, opts: &LockOptions) -> Result<Made, FsError> {
    match mkdir_and_stat(lock_path, opts) {
        Ok(made) => return Ok(made),
        Err(e) if !e.is("EEXIST") => return Err(e),
        Err(_) => {}
    }
    let released_meanwhile = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    let mut found = match stamp_retried(lock_path, false) {
        Ok(s) => s,
        // Released meanwhile: one more mkdir, no staleness checks.
        Err(e) if released_meanwhile(&e) => {
            return mkdir_and_stat(lock_path, opts).map_err(|e| locked_if_exists(e, file));
        }
        Err(e) => return Err(FsError::io(&e, "stat", lock_path)),
    };
    let remote = matches!(opts.fs, FsRule::Auto) && folder_remote(lock_path, found.0);
    let network = network_rule(remote, opts);
    if network {
        // The server's answer where the client can be made to ask for it.
        found = match stamp_retried(lock_path, true) {
            Ok(s) => s,
            Err(e) if released_meanwhile(&e) => {
                return mkdir_and_stat(lock_path, opts).map_err(|e| locked_if_exists(e, file));
            }
            Err(e) => return Err(FsError::io(&e, "stat", lock_path)),
        };
    }
    if reclaim_own_orphan(lock_path, found) {
        return mkdir_and_stat(lock_path, opts).map_err(|e| locked_if_exists(e, file));
    }
    let stale = if network {
        stale_on_network(lock_path, found, opts)
    } else {
        found.2.div_euclid(1_000_000) < now_ms() as i128 - opts.stale_ms as i128
    };
    if !stale {
        return Err(FsError::Locked {
            file: file.to_string(),
        });
    }
    // Takeover: rmdir (ENOENT ignored), then exactly one more mkdir.
    if let Err(e) = transient::retry(
        Op::Dir,
        || folder_remote_now(lock_path),
        || std::fs::remove_dir(lock_path),
    ) {
        if e.kind() != std::io::ErrorKind::NotFound {
            return Err(FsError::io(&e, "rmdir", lock_path));
        }
    }
    mkdir_and_stat(lock_path, opts).map_err(|e| locked_if_exists(e, file))
}

/// Lock directories held by others, as this process last saw them on network file systems,
/// and since when it has seen each unchanged.
fn sightings() -> std::sync::MutexGuard<'static, HashMap<String, (DirId, Instant)>> {
    static SEEN: OnceLock<Mutex<HashMap<String, (DirId, Instant)>>> = OnceLock::new();
    SEEN.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Sightings remembered at once (beyond this the memory starts over: a lock then needs a full
/// threshold of observation again, which only ever delays a takeover).
const MAX_SIGHTINGS: usize = 4096;

/// The network rule: stale once seen unchanged (device, mtime) for longer than the
/// stale threshold plus the attribute-cache bound, by this process's own clock, whatever the
/// mtime says. A live holder rewrites its mtime every second, and a cached answer is at most
/// the bound old, so a lock unchanged for that long has not been refreshed for longer than the
/// threshold. The mtime itself is never trusted, not even when it looks long past: it was set
/// by another machine's clock, and a client cache may answer with the mtime of an earlier lock
/// directory at the same path. So a lock left by a crash long ago costs a new process one full
/// observation before it is taken over.
fn stale_on_network(lock_path: &str, found: DirId, opts: &LockOptions) -> bool {
    let limit = opts.stale_ms.saturating_add(opts.attribute_cache_ms);
    let now = Instant::now();
    let since = {
        let mut seen = sightings();
        match seen.get(lock_path) {
            // Device and mtime, not the inode: libfuse file systems that open by path (smbnetfs,
            // sshfs) hand out a new inode number for the same directory once the kernel forgot
            // it, which would restart the observation forever. A live holder rewrites its mtime
            // every second, so an unchanged mtime is what says "not refreshed".
            Some(&(id, since)) if same_dir(true, found, id) => since,
            _ => {
                if seen.len() >= MAX_SIGHTINGS {
                    seen.clear();
                }
                seen.insert(lock_path.to_string(), (found, now));
                now
            }
        }
    };
    now.duration_since(since) > Duration::from_millis(limit)
}

fn locked_if_exists(e: FsError, file: &str) -> FsError {
    if e.is("EEXIST") {
        FsError::Locked {
            file: file.to_string(),
        }
    } else {
        e
    }
}

/// `t` rounded up to a whole second (proper-lockfile's mtime on `s`-precision file systems).
pub(crate) fn ceil_second(t: SystemTime) -> SystemTime {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    match since.subsec_nanos() {
        0 => t,
        n => t + Duration::from_nanos(u64::from(1_000_000_000 - n)),
    }
}

/// Folders whose file system was found to keep whole seconds only (or not), by the precision
/// probe. At most [`MAX_PRECISIONS`] folders; past that the memory starts over (a folder is then
/// probed again, one `utimensat` and one `stat` more).
fn whole_seconds() -> std::sync::MutexGuard<'static, HashMap<String, bool>> {
    static W: OnceLock<Mutex<HashMap<String, bool>>> = OnceLock::new();
    W.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

const MAX_PRECISIONS: usize = 1024;

fn remember_precision(folder: String, whole: bool) {
    let mut w = whole_seconds();
    if w.len() >= MAX_PRECISIONS {
        w.clear();
    }
    w.insert(folder, whole);
}

/// `mkdir` of a lock directory. On a network file system a refusal other than EEXIST may be
/// transient: SMB answers EIO for a directory another client is removing, or one that is
/// there. So the directory is looked at: there (or there again) is contention (EEXIST, judged
/// by the stale rule as any held lock); not there is a transient refusal, tried again.
fn make_lock_dir(lock_path: &str) -> Result<(), FsError> {
    let mut backoff = transient::Backoff::new();
    loop {
        let e = match std::fs::create_dir(lock_path) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        let exists = std::io::Error::from_raw_os_error(eexist());
        if e.kind() == std::io::ErrorKind::AlreadyExists
            || !transient::is_transient(&e, Op::Dir, true)
            || !folder_remote_now(lock_path)
        {
            return Err(FsError::io(&e, "mkdir", lock_path));
        }
        if std::fs::symlink_metadata(lock_path).is_ok_and(|m| m.is_dir()) {
            return Err(FsError::io(&exists, "mkdir", lock_path));
        }
        if !backoff.wait() {
            return Err(FsError::io(&e, "mkdir", lock_path));
        }
    }
}

fn eexist() -> i32 {
    #[cfg(unix)]
    {
        libc::EEXIST
    }
    #[cfg(windows)]
    {
        183 // ERROR_ALREADY_EXISTS
    }
}

/// L2: make the lock directory, then read back what it is, and learn the rules it follows.
/// Proper-lockfile's precision probe where it matters: under the network rule once per folder
/// (set the mtime to the next whole second plus 5 ms and read it back from the server: SFTP
/// and SMB carry whole seconds only), and under the local rule only where the new directory's
/// mtime has no sub-second part at all (1 s granularity file systems; elsewhere that happens
/// once in a few hundred `mkdir`s, and costs one probe). On a whole-second file system the
/// lock's mtime is set to the next whole second at once and at every refresh, as
/// proper-lockfile rounds (L2/L5): truncated, a fresh lock would look up to a second older than
/// it is, and be judged stale that much too soon.
fn mkdir_and_stat(lock_path: &str, opts: &LockOptions) -> Result<Made, FsError> {
    make_lock_dir(lock_path)?;
    // A set-up that failed takes its directory back; one that cannot be removed either is
    // remembered as ours when we know what it looks like (L2a).
    let failed = |e: std::io::Error, syscall: &'static str, seen: Option<DirId>| {
        if !remove_lock_dir(lock_path, true) {
            if let Some(id) = seen {
                remember_orphan(lock_path, id);
            }
        }
        FsError::io(&e, syscall, lock_path)
    };
    let id = stamp_retried(lock_path, false).map_err(|e| failed(e, "stat", None))?;
    let remote = folder_remote(lock_path, id.0);
    let network = network_rule(remote, opts);
    let sub_second = id.2.rem_euclid(1_000_000_000) != 0;
    if !network && sub_second {
        return Ok(Made {
            id,
            network,
            whole_seconds: false,
            remote,
        });
    }
    let folder = std::path::Path::new(lock_path)
        .parent()
        .map_or_else(String::new, |p| p.to_string_lossy().into_owned());
    let known = whole_seconds().get(&folder).copied();
    let now = SystemTime::now();
    let set = match known {
        Some(false) => None,
        Some(true) => Some(ceil_second(now)),
        None => Some(ceil_second(now) + Duration::from_millis(5)),
    };
    let Some(t) = set else {
        return Ok(Made {
            id,
            network,
            whole_seconds: false,
            remote,
        });
    };
    // Not tried again: a lock whose mtime lands late is already old in the others' eyes (its
    // holder would be told it lost it); the attempt fails and the schedule makes the next.
    let seen = Some(id);
    platform::fs::set_times(lock_path, t).map_err(|e| failed(e, "utime", seen))?;
    let id = stamp_retried(lock_path, network).map_err(|e| failed(e, "stat", seen))?;
    let whole = known.unwrap_or_else(|| {
        let whole = id.2.rem_euclid(1_000_000_000) / 1_000_000 == 0;
        remember_precision(folder, whole);
        whole
    });
    Ok(Made {
        id,
        network,
        whole_seconds: whole,
        remote,
    })
}

/// How long a synchronous acquisition may wait for this process's own native holder (W-B6).
const SYNC_WAIT_FOR_OWN_HOLDER: Duration = Duration::from_millis(2000);

/// Acquire the lock on `file` per `opts` (blocking the calling thread while it waits).
///
/// First this process's own turn: operations on one path queue in FIFO order and are woken
/// by each release (bounded by the retry budget; a synchronous caller may wait up to 2 s for
/// an in-flight native operation, W-B6). Then the on-disk protocol with the retry schedule,
/// which is what excludes other processes. Every wait ends early when the caller's JS
/// environment is torn down ([`FsError::Cancelled`]).
pub fn acquire(file: &str, opts: LockOptions) -> Result<LockGuard, FsError> {
    // Kept until this acquisition is over: the scheduler cannot end meanwhile.
    let _running = crate::store::lock_refresh::ensure_running().map_err(|why| {
        FsError::Internal(format!(
            "pi-native: the lock refresh thread could not start ({why})"
        ))
    })?;
    let (lock_path, target) = lock_path_for(file);
    let attempts = opts.retry.attempts();
    let budget: Duration = (1..attempts).map(|k| opts.retry.wait(k)).sum();
    let disk = take_turn(&lock_path, &target, opts, budget)?;
    let guard = LockGuard {
        lock_path,
        file: target,
        owner: opts.owner,
        disk,
        released: false,
        sync: matches!(opts.retry, Retry::Sync { .. }),
    };
    let mut errors: Vec<FsError> = Vec::new();
    let mut k = 1; // the scheduled attempt this is (B17/B18)

    // Each wait of the schedule runs from the failure of the scheduled attempt before it, as
    // proper-lockfile's timers do: a slow attempt does not shorten the waits after it. An
    // extra attempt (a notified wake-up) leaves the schedule where it was.
    let mut failed_at = Instant::now();
    let mut extra = false;
    let mut watch = Watch::Off;
    let mut parent_checked = !opts.create_parent;
    // Err(Some(e)): the target's folder could not be made, a final error of its own.
    let result = loop {
        if lock_state().dead_end(&opts) {
            break Err(None); // answered below: nothing made on disk after the end
        }
        let seen = removals(&guard.lock_path);
        let attempted = BootInstant::now();
        match attempt_on_disk(&guard.lock_path, &guard.file, &opts) {
            Ok(made) => {
                if made.network {
                    sightings().remove(&guard.lock_path);
                }
                let mut disk = lock_disk(&guard.disk);
                disk.hold = Hold::Held {
                    id: made.id,
                    refreshed: attempted,
                };
                disk.network = made.network;
                disk.whole_seconds = made.whole_seconds;
                disk.remote = made.remote;
                break Ok(());
            }
            Err(err) if !parent_checked && !err.is("ELOCKED") && !err.is("EEXIST") => {
                // The folder may be missing (or not a folder): mkdir -p it now, failing as the
                // original's mkdir -p before its lock would; then attempt again, uncounted.
                parent_checked = true;
                if let Err(e) =
                    crate::store::atomic_file::mkdir_p(&crate::store::atomic_file::dirname(file))
                {
                    break Err(Some(e));
                }
            }
            Err(err) => {
                let retryable = match opts.retry {
                    Retry::Async { .. } => true,
                    Retry::Sync { .. } => platform::fs::sync_lock_retryable(&err),
                    Retry::Once => false,
                };
                errors.push(err);
                if !retryable || k >= attempts {
                    break Err(None);
                }
                if !std::mem::take(&mut extra) {
                    failed_at = Instant::now();
                }
                if watch == Watch::Off
                    && opts.retry.wait(k) >= WATCH_FROM_WAIT
                    && errors.last().is_some_and(|e| e.is("ELOCKED"))
                {
                    watch = Watch::start(&guard.lock_path);
                    if watch == Watch::On {
                        extra = true;
                        continue; // the holder may have let go before the watch was set up
                    }
                }
                let due = failed_at + opts.retry.wait(k);
                match watch.wait(opts.owner, due, &guard.lock_path, seen) {
                    Wake::Due => k += 1,
                    Wake::Removed => {
                        lock_state().notified_attempts += 1;
                        extra = true;
                    }
                    Wake::Cancelled => break Err(None),
                }
            }
        }
    };
    watch.stop(&guard.lock_path);
    if lock_state().dead_end(&opts) {
        // Taken or not, an environment that went away (or whose JS will not run again, for a
        // hold that waits for it) gets nothing (Drop gives it back).
        return Err(FsError::Cancelled);
    }
    let final_error = match result {
        Ok(()) => return Ok(guard),
        Err(e) => e,
    };
    let target = guard.file.clone();
    drop(guard); // gives the turn back (nothing on disk is ours)
    Err(final_error.unwrap_or_else(|| match opts.retry {
        Retry::Async { .. } => most_frequent(errors),
        Retry::Sync { .. } | Retry::Once => {
            errors.pop().unwrap_or(FsError::Locked { file: target })
        }
    }))
}

/// Wait until `due`, or until `lock_path` is removed (when `watching`: more removals than
/// `seen`), or until `owner`'s environment is torn down.
fn wait_for(owner: u64, due: Instant, lock_path: &str, seen: u64, watching: bool) -> Wake {
    let mut st = lock_state();
    loop {
        if owner != 0 && st.torn_down.contains(&owner) {
            return Wake::Cancelled;
        }
        if watching && st.waiting.get(lock_path).is_some_and(|w| w.removals > seen) {
            return Wake::Removed;
        }
        let now = Instant::now();
        if now >= due {
            return Wake::Due;
        }
        st = sleep_until_released(st, due - now);
    }
}

/// The most frequent error by message; ties go to the latest (B17).
fn most_frequent(errors: Vec<FsError>) -> FsError {
    let mut best: Option<(usize, usize)> = None; // (count, index)
    for (i, e) in errors.iter().enumerate() {
        let msg = e.to_string();
        let count = errors.iter().filter(|x| x.to_string() == msg).count();
        if best.is_none_or(|(c, _)| count >= c) {
            best = Some((count, i));
        }
    }
    let (_, i) = best.expect("at least one attempt was made");
    errors.into_iter().nth(i).expect("index in range")
}

/// Wait (FIFO, bounded) until no other operation of this process holds or waits for
/// `lock_path` ahead of us, then claim it. ELOCKED when the wait runs out, Cancelled when the
/// caller's environment is torn down meanwhile.
fn take_turn(
    lock_path: &str,
    file: &str,
    opts: LockOptions,
    budget: Duration,
) -> Result<Arc<DiskCell>, FsError> {
    let mut st = lock_state();
    let start = Instant::now();
    // Looked at again after every wake-up: a holder that turns to wait for the JS thread
    // (`LockGuard::awaits_js`) cannot finish while a sync caller blocks that thread.
    let deadline = |st: &State| {
        start
            + match (opts.retry, st.held.get(lock_path)) {
                (Retry::Sync { .. }, Some(h)) if h.kind == HolderKind::Native => {
                    budget.max(SYNC_WAIT_FOR_OWN_HOLDER)
                }
                _ => budget,
            }
    };
    let ticket = st.next_ticket;
    st.next_ticket += 1;
    st.queues
        .entry(lock_path.to_string())
        .or_default()
        .push_back(ticket);
    loop {
        let cancelled = st.dead_end(&opts);
        let first = st.queues.get(lock_path).and_then(|q| q.front()) == Some(&ticket);
        if !cancelled && first && !st.held.contains_key(lock_path) {
            if let Some(q) = st.queues.get_mut(lock_path) {
                q.pop_front();
                if q.is_empty() {
                    st.queues.remove(lock_path);
                }
            }
            let disk = Arc::new(DiskCell {
                disk: Mutex::new(Disk {
                    hold: Hold::Acquiring,
                    stale: Duration::from_millis(opts.stale_ms),
                    network: false,
                    whole_seconds: false,
                    remote: false,
                    refreshing: false,
                    touching: false,
                }),
                recorded: Condvar::new(),
            });
            st.held.insert(
                lock_path.to_string(),
                Held {
                    kind: opts.kind,
                    owner: opts.owner,
                    disk: disk.clone(),
                },
            );
            return Ok(disk);
        }
        let now = Instant::now();
        let deadline = deadline(&st);
        if cancelled || now >= deadline {
            if let Some(q) = st.queues.get_mut(lock_path) {
                q.retain(|t| *t != ticket);
                if q.is_empty() {
                    st.queues.remove(lock_path);
                }
            }
            drop(st);
            table().released.notify_all();
            return Err(if cancelled {
                FsError::Cancelled
            } else {
                FsError::Locked {
                    file: file.to_string(),
                }
            });
        }
        st = sleep_until_released(st, deadline - now);
    }
}

/// The `exit` event of the JS environment `owner` (L8): locks held for JS callbacks that can
/// no longer finish (a `withFileLock` cut short by `process.exit`, an async CAS suspended for
/// its JS verdict) are removed, and an async CAS that suspends later gives its lock back at
/// once ([`LockGuard::awaits_js`]). Operations are not cancelled: exit listeners that run
/// later may still use the store synchronously.
pub fn release_callback_locks(owner: u64) {
    let mine: Vec<(String, Arc<DiskCell>)> = {
        let mut st = lock_state();
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
            .filter_map(|p| st.held.remove(&p).map(|h| (p, h.disk)))
            .collect()
    };
    give_back(mine);
}

/// Remove lock directories that are still ours and forget them. A lock whose refresh is
/// stuck past its deadline is given up without a file-system call (at exit too).
fn give_back(locks: Vec<(String, Arc<DiskCell>)>) {
    for (path, cell) in locks {
        let d = lock_disk(&cell);
        let (ours, mut d) = still_ours(&path, &cell, d);
        if ours {
            remove_lock_dir(&path, d.remote);
        }
        d.hold = Hold::Released;
    }
    table().released.notify_all();
}

/// At teardown of the JS environment `owner` (worker terminate, process exit; L8 / L10h):
pub fn release_all(owner: u64) {
    let mut st = lock_state();
    st.torn_down.insert(owner);
    table().released.notify_all();
    let deadline = Instant::now() + Duration::from_millis(500);
    loop {
        let busy = st
            .held
            .values()
            .any(|h| h.owner == owner && h.kind == HolderKind::Native);
        let now = Instant::now();
        if !busy || now >= deadline {
            break;
        }
        st = sleep_until_released(st, deadline - now);
    }
    let mine: Vec<(String, Arc<DiskCell>)> = st
        .held
        .iter()
        .filter(|(_, h)| h.owner == owner)
        .map(|(p, h)| (p.clone(), h.disk.clone()))
        .collect();
    for (path, _) in &mine {
        st.held.remove(path);
    }
    drop(st);
    give_back(mine);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    fn tmp(name: &str) -> String {
        let d = std::env::temp_dir().join(format!("pi-native-lock-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d.join("target.json").to_string_lossy().into_owned()
    }

    #[test]
    fn own_orphans_are_removed_only_as_recorded() {
        let lock = format!("{}.lock", tmp("own-orphan"));
        let exists = || std::path::Path::new(&lock).exists();
        std::fs::create_dir(&lock).unwrap();
        let id = platform::fs::stamp_of(&lock).unwrap();
        assert!(!reclaim_own_orphan(&lock, id), "never recorded: not ours");
        assert!(exists());
        // Recorded with another mtime: a successor's lock, left alone (and ours forgotten).
        let earlier = id.2 - 2_000_000_000;
        remember_orphan(&lock, (id.0, id.1, earlier));
        assert!(!reclaim_own_orphan(&lock, id));
        assert!(exists());
        assert!(!own_orphans().contains_key(&lock));
        // Another device: not ours either.
        remember_orphan(&lock, (id.0 ^ 1, id.1, id.2));
        assert!(!reclaim_own_orphan(&lock, id));
        assert!(exists());
        // As read back after its mkdir (whatever its inode now): removed, and forgotten.
        remember_orphan(&lock, (id.0, id.1 ^ 1, id.2));
        assert!(reclaim_own_orphan(&lock, id));
        assert!(!exists());
        assert!(!own_orphans().contains_key(&lock));
    }

    #[test]
    fn schedule_matches_b17_b18() {
        let a = Retry::Async { retries: 10 };
        assert_eq!(a.attempts(), 11);
        let waits: Vec<u64> = (1..11).map(|k| a.wait(k).as_millis() as u64).collect();
        assert_eq!(waits, vec![25, 50, 100, 200, 400, 500, 500, 500, 500, 500]);
        assert_eq!(Retry::Sync { retries: 0 }.attempts(), 2);
        assert_eq!(Retry::Sync { retries: 3 }.attempts(), 4);
        assert_eq!(normalize_stale(None), 2000);
        assert_eq!(normalize_stale(Some(500.0)), 2000);
        assert_eq!(normalize_stale(Some(10_000.0)), 10_000);
    }

    #[test]
    fn contention_stale_takeover_and_ownership() {
        let file = tmp("a");
        let lock = format!("{file}.lock");
        let g = acquire(&file, LockOptions::store_async()).unwrap();
        assert!(std::path::Path::new(&lock).is_dir());
        // Held in-process: the sync policy fails with ELOCKED after its two attempts... unless
        // the holder is native, in which case it waits for the release first.
        let handle = std::thread::spawn({
            let file = file.clone();
            move || acquire(&file, LockOptions::store_sync()).map(|g| g.release())
        });
        std::thread::sleep(Duration::from_millis(50));
        g.release().unwrap();
        assert!(handle.join().unwrap().is_ok());
        assert!(!std::path::Path::new(&lock).exists());

        // A foreign fresh lock: ELOCKED.
        std::fs::create_dir(&lock).unwrap();
        let err = acquire(
            &file,
            LockOptions {
                retry: Retry::Sync { retries: 0 },
                ..LockOptions::store_sync()
            },
        )
        .unwrap_err();
        assert_eq!(err, FsError::Locked { file: file.clone() });
        // A foreign stale lock (mtime 3 s ago): taken over.
        let c = CString::new(lock.clone()).unwrap();
        let old = libc::timespec {
            tv_sec: (now_ms() / 1000) as i64 - 3,
            tv_nsec: 0,
        };
        let times = [old, old];
        // SAFETY: valid path and a two-element timespec array.
        let rc = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), 0) };
        assert_eq!(rc, 0);
        let g = acquire(&file, LockOptions::store_sync()).unwrap();
        // Someone steals it (replaces the directory): our release must leave theirs alone.
        std::fs::remove_dir(&lock).unwrap();
        std::fs::create_dir(&lock).unwrap();
        assert_eq!(
            g.release(),
            Err(FsError::Compromised { file: file.clone() })
        );
        assert!(std::path::Path::new(&lock).is_dir());
        std::fs::remove_dir(&lock).unwrap();
    }

    #[test]
    fn fenced_publish_runs_only_while_the_lock_is_ours() {
        let file = tmp("fence");
        let lock = format!("{file}.lock");
        let g = acquire(&file, LockOptions::store_async()).unwrap();
        assert_eq!(g.fenced(|| Ok(1)), Ok(1));
        // Taken over (rmdir + mkdir by another writer): publish must not run.
        std::fs::remove_dir(&lock).unwrap();
        std::fs::create_dir(&lock).unwrap();
        let mut ran = false;
        let r = g.fenced(|| {
            ran = true;
            Ok(())
        });
        assert_eq!(r, Err(FsError::Compromised { file: file.clone() }));
        assert!(!ran);
        assert!(g.release().is_err());
        assert!(
            std::path::Path::new(&lock).is_dir(),
            "the taker's lock stays"
        );
        std::fs::remove_dir(&lock).unwrap();

        // Removed under us (e.g. released by a robbed third party): also compromised.
        let g = acquire(&file, LockOptions::store_async()).unwrap();
        std::fs::remove_dir(&lock).unwrap();
        assert!(g.fenced(|| Ok(())).is_err());
    }

    /// After an environment's `exit` event, an async hold that would wait for its JS thread (a
    /// judged CAS, a `withFileLock` callback) is not taken at all, so no lock directory can be
    /// made after the last exit listener; sync ones and async ones that need no JS still are.
    #[test]
    fn no_async_hold_waiting_for_js_after_exit() {
        let file = tmp("after-exit");
        let lock = format!("{file}.lock");
        let owner = 2_000_000 + u64::from(std::process::id());
        release_callback_locks(owner); // the `exit` event
        let judged = LockOptions {
            owner,
            js_verdict: true,
            ..LockOptions::store_async()
        };
        assert_eq!(acquire(&file, judged).err(), Some(FsError::Cancelled));
        let callback = LockOptions {
            owner,
            kind: HolderKind::Callback,
            ..LockOptions::store_async()
        };
        assert_eq!(acquire(&file, callback).err(), Some(FsError::Cancelled));
        assert!(
            !std::path::Path::new(&lock).exists(),
            "nothing made on disk"
        );
        for opts in [
            LockOptions {
                owner,
                ..LockOptions::store_async()
            },
            LockOptions {
                owner,
                js_verdict: true,
                ..LockOptions::store_sync()
            },
        ] {
            let g = acquire(&file, opts).unwrap();
            assert!(std::path::Path::new(&lock).is_dir());
            g.release().unwrap();
        }
        assert!(!std::path::Path::new(&lock).exists());
    }

    #[test]
    fn teardown_cancels_waits_and_commits_of_its_environment() {
        let file = tmp("teardown");
        let owner = 1_000_000 + u64::from(std::process::id());
        let opts = LockOptions {
            owner,
            ..LockOptions::store_async()
        };
        let g = acquire(&file, opts).unwrap();
        // A second operation of the same environment waits in the in-process queue.
        let waiter = std::thread::spawn({
            let file = file.clone();
            move || acquire(&file, opts).map(|_| ())
        });
        std::thread::sleep(Duration::from_millis(50));
        let started = Instant::now();
        release_all(owner);
        assert_eq!(waiter.join().unwrap(), Err(FsError::Cancelled));
        assert!(started.elapsed() < Duration::from_secs(1));
        // The held lock was removed by the teardown; its late commit is refused.
        assert!(!std::path::Path::new(&format!("{file}.lock")).exists());
        assert_eq!(g.fenced(|| Ok(())), Err(FsError::Cancelled));
        assert_eq!(g.release(), Ok(()));
        assert_eq!(acquire(&file, opts).unwrap_err(), FsError::Cancelled);
    }

    /// A refresh that stalls between its check and its touch (SPEC L10e): the directory was
    /// replaced in between by a taker's, and the touch must land on ours, never on theirs.
    #[cfg(unix)]
    #[test]
    fn a_stalled_refresh_never_touches_the_takers_directory() {
        let file = tmp("stall");
        let lock = format!("{file}.lock");
        std::fs::create_dir(&lock).unwrap();
        let ours = platform::fs::stamp_of(&lock).unwrap();
        let mut theirs = None;
        let touched = platform::fs::touch_dir_if(
            &lock,
            |s| {
                // The stall: a taker removes our directory and makes its own, a while ago.
                std::fs::remove_dir(&lock).unwrap();
                std::fs::create_dir(&lock).unwrap();
                set_mtime_secs_ago(&lock, 5);
                theirs = Some(platform::fs::stamp_of(&lock).unwrap());
                s == ours
            },
            None,
        );
        assert!(
            matches!(touched, platform::fs::Touched::NotOurs),
            "{touched:?}"
        );
        assert_eq!(
            platform::fs::stamp_of(&lock).unwrap(),
            theirs.unwrap(),
            "theirs untouched"
        );
        std::fs::remove_dir(&lock).unwrap();
    }

    #[cfg(unix)]
    fn set_mtime_secs_ago(path: &str, secs: i64) {
        let c = CString::new(path).unwrap();
        let t = libc::timespec {
            tv_sec: (now_ms() / 1000) as i64 - secs,
            tv_nsec: 0,
        };
        // SAFETY: valid path and a two-element timespec array.
        let rc = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), [t, t].as_ptr(), 0) };
        assert_eq!(rc, 0);
    }

    fn network(cache_ms: u64) -> LockOptions {
        LockOptions {
            retry: Retry::Sync { retries: 0 },
            fs: FsRule::Network,
            attribute_cache_ms: cache_ms,
            ..LockOptions::store_sync()
        }
    }

    /// The network rule: a foreign lock is stale only once seen unchanged for the threshold
    /// plus the cache bound, whatever its mtime says (even one far in the past); the local rule
    /// is unchanged.
    #[cfg(unix)]
    #[test]
    fn network_rule_judges_by_what_it_saw() {
        let file = tmp("netrule");
        let lock = format!("{file}.lock");
        std::fs::create_dir(&lock).unwrap();
        // 3 s old: stale by the local rule at once, not by the network rule.
        set_mtime_secs_ago(&lock, 3);
        let locked = FsError::Locked { file: file.clone() };
        assert_eq!(acquire(&file, network(60_000)).unwrap_err(), locked);
        // Fresh again (as a live holder keeps it), then seen unchanged: taken once 2 s + 300 ms
        // have passed since this first look.
        platform::fs::set_times(&lock, SystemTime::now()).unwrap();
        let first = Instant::now();
        let taken = loop {
            match acquire(&file, network(300)) {
                Ok(g) => break g,
                Err(e) => assert_eq!(e, locked),
            }
            assert!(first.elapsed() < Duration::from_secs(10));
        };
        // At least stale + cache after the first look of this test's own (the first
        // acquisition above saw the same directory even earlier).
        assert!(
            first.elapsed() >= Duration::from_millis(2000),
            "{:?}",
            first.elapsed()
        );
        taken.release().unwrap();
        // A change restarts the clock: a directory made afresh is not stale, however long
        // ago the path was first seen.
        std::fs::create_dir(&lock).unwrap();
        assert_eq!(acquire(&file, network(300)).unwrap_err(), locked);
        // An mtime far in the past is not trusted either: seen for the first time, not stale.
        set_mtime_secs_ago(&lock, 3600);
        assert_eq!(acquire(&file, network(60_000)).unwrap_err(), locked);
        // The local rule: 3 s old is stale at once.
        set_mtime_secs_ago(&lock, 3);
        acquire(
            &file,
            LockOptions {
                fs: FsRule::Local,
                ..network(60_000)
            },
        )
        .unwrap()
        .release()
        .unwrap();
    }

    /// Make `g`'s last successful refresh `ms` milliseconds old, as a pause would.
    fn last_refreshed_ago(g: &LockGuard, ms: u64) {
        let mut d = lock_disk(&g.disk);
        if let Hold::Held { id, .. } = d.hold {
            d.hold = Hold::Held {
                id,
                refreshed: BootInstant::now().earlier_by(Duration::from_millis(ms)),
            };
        }
    }

    /// A holder that went longer than the stale threshold without a successful refresh
    /// (paused, its refreshes failing or stuck) counts its lock as lost, under the local rule
    /// (from then on its mtime is old enough for any process to take it over) as under the
    /// network rule.
    #[test]
    fn local_holder_without_a_recent_refresh_is_compromised() {
        let file = tmp("localholder");
        let g = acquire(&file, LockOptions::store_sync()).unwrap();
        assert!(!lock_disk(&g.disk).network);
        last_refreshed_ago(&g, 2100);
        assert_eq!(
            g.fenced(|| Ok(())),
            Err(FsError::Compromised { file: file.clone() })
        );
        assert_eq!(
            g.release(),
            Err(FsError::Compromised { file: file.clone() })
        );
        // L2c: nobody took it, it is still ours as last set: removed, not left to be waited out.
        assert!(!std::path::Path::new(&format!("{file}.lock")).exists());

        // Taken over meanwhile (another directory at the path): left alone.
        let g = acquire(&file, LockOptions::store_sync()).unwrap();
        last_refreshed_ago(&g, 2100);
        let lock = format!("{file}.lock");
        std::fs::remove_dir(&lock).unwrap();
        std::fs::create_dir(&lock).unwrap();
        assert_eq!(
            g.release(),
            Err(FsError::Compromised { file: file.clone() })
        );
        assert!(std::path::Path::new(&lock).is_dir(), "the taker's stays");
        std::fs::remove_dir(&lock).unwrap();
    }

    /// Under the network rule a holder that went longer than the stale threshold without a
    /// successful refresh (paused, or its refreshes failing) counts its lock as lost.
    #[test]
    fn network_holder_without_a_recent_refresh_is_compromised() {
        let file = tmp("netholder");
        let g = acquire(&file, network(60_000)).unwrap();
        // The temp folder keeps nanoseconds: no rounding there.
        assert!(lock_disk(&g.disk).network);
        assert!(!lock_disk(&g.disk).whole_seconds);
        assert_eq!(g.fenced(|| Ok(1)), Ok(1));
        last_refreshed_ago(&g, 2500);
        assert_eq!(
            g.fenced(|| Ok(())),
            Err(FsError::Compromised { file: file.clone() })
        );
        assert_eq!(
            g.release(),
            Err(FsError::Compromised { file: file.clone() })
        );
        // L2c: still ours as last set: removed.
        assert!(!std::path::Path::new(&format!("{file}.lock")).exists());
    }

    /// A lock busy publishing (its mutex held, as by a rename hanging on a network mount) does
    /// not hold up the refresh of the others.
    #[test]
    fn a_busy_lock_does_not_delay_the_refresh_of_others() {
        let (a, b) = (tmp("busy-a"), tmp("busy-b"));
        let ga = acquire(&a, LockOptions::store_async()).unwrap();
        let gb = acquire(&b, LockOptions::store_async()).unwrap();
        let before = platform::fs::stamp_of(&format!("{b}.lock")).unwrap();
        let busy = lock_disk(&ga.disk);
        std::thread::sleep(Duration::from_millis(2200));
        let after = platform::fs::stamp_of(&format!("{b}.lock")).unwrap();
        drop(busy);
        assert!(after.2 > before.2, "b refreshed while a was busy");
        assert_eq!(gb.fenced(|| Ok(())), Ok(()));
        gb.release().unwrap();
        // a went the whole threshold without a refresh (its holder busy): from then on another
        // process may judge it stale, so it is lost; nobody took it, so its release removes it
        // (L2c).
        assert_eq!(ga.release(), Err(FsError::Compromised { file: a.clone() }));
        assert!(!std::path::Path::new(&format!("{a}.lock")).exists());
    }

    /// L2b: on a remote folder the inode number is not part of a lock directory's identity.
    #[test]
    fn remote_identity_is_device_and_mtime() {
        let ours = (7, 100, 1_000_000_000);
        assert!(same_dir(true, (7, 101, 1_000_000_000), ours));
        assert!(!same_dir(false, (7, 101, 1_000_000_000), ours));
        for other in [(8, 100, 1_000_000_000), (7, 100, 2_000_000_000)] {
            assert!(!same_dir(true, other, ours));
            assert!(!same_dir(false, other, ours));
        }
        assert!(same_dir(false, ours, ours));
    }

    #[test]
    fn most_frequent_error_wins_ties_go_latest() {
        let l = FsError::Locked { file: "f".into() };
        let n = FsError::io(
            &std::io::Error::from_raw_os_error(libc::ENOENT),
            "mkdir",
            "x",
        );
        assert_eq!(most_frequent(vec![l.clone(), n.clone(), l.clone()]), l);
        assert_eq!(most_frequent(vec![l.clone(), n.clone()]), n);
    }
}

//! proper-lockfile 4.1.2's on-disk lock protocol (SPEC §3.4, L1–L10), so native and JavaScript
//! writers can share files: the lock is the directory `<resolved target>.lock`, taken by an
//! atomic `mkdir`, stale only when its mtime is more than 2000 ms old (takeover = rmdir + one
//! more mkdir), kept fresh by rewriting its mtime at least every second while held.
//!
//! On top of the protocol, an in-process table of held locks lets operations of this process
//! queue for each other (woken on release instead of sleeping blindly), lets a synchronous CAS
//! in an exit hook wait for this process's in-flight native holder (W-B6), releases only locks
//! this process still owns (W-B4), refreshes from a helper thread so synchronous holders are
//! protected too (W-B5), and removes held lock directories at process exit (L10h).

use std::collections::{HashMap, VecDeque};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::fserror::FsError;
use crate::nodepath;
use crate::platform;

/// proper-lockfile floors staleness at 2000 ms; the store's effective threshold is exactly that.
pub const MIN_STALE_MS: u64 = 2000;
/// Refresh period while held (L4: stale / 2, clamped to at least 1000 ms).
const UPDATE_MS: u64 = 1000;

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
}

impl Retry {
    fn attempts(self) -> u32 {
        match self {
            Retry::Async { retries } => retries.saturating_add(1),
            Retry::Sync { retries } => retries.max(1).saturating_add(1),
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
    pub realpath: bool,
    pub kind: HolderKind,
    /// Which JS environment (main thread or a worker) holds it, for exit cleanup.
    pub owner: u64,
}

impl LockOptions {
    /// The process-matrix store's async policy (B17).
    pub fn store_async() -> Self {
        LockOptions {
            retry: Retry::Async { retries: 10 },
            stale_ms: MIN_STALE_MS,
            realpath: false,
            kind: HolderKind::Native,
            owner: 0,
        }
    }

    /// The process-matrix store's sync policy (B18 with retries 0 → two attempts).
    pub fn store_sync() -> Self {
        LockOptions {
            retry: Retry::Sync { retries: 0 },
            stale_ms: MIN_STALE_MS,
            realpath: false,
            kind: HolderKind::Native,
            owner: 0,
        }
    }
}

/// L4: `stale = max(stale || 0, 2000)`.
pub fn normalize_stale(stale: Option<f64>) -> u64 {
    let s = stale.filter(|s| s.is_finite() && *s > 0.0).unwrap_or(0.0);
    (s.min(u64::MAX as f64) as u64).max(MIN_STALE_MS)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct DirId {
    dev: u64,
    ino: u64,
    mtime_ns: i128,
}

#[derive(Debug)]
struct Held {
    kind: HolderKind,
    owner: u64,
    /// None while the on-disk acquisition is still in progress.
    id: Option<DirId>,
    last_refresh: Instant,
    compromised: bool,
}

/// In-process state: locks held by this process and the FIFO of operations waiting for each.
#[derive(Default)]
struct State {
    held: HashMap<String, Held>,
    queues: HashMap<String, VecDeque<u64>>,
    next_ticket: u64,
}

struct Table {
    state: Mutex<State>,
    released: Condvar,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        std::thread::Builder::new()
            .name("pi-native-lock-refresh".into())
            .spawn(refresh_loop)
            .ok();
        Table {
            state: Mutex::new(State::default()),
            released: Condvar::new(),
        }
    })
}

fn lock_state() -> std::sync::MutexGuard<'static, State> {
    table().state.lock().unwrap_or_else(|e| e.into_inner())
}

/// A held lock; release it with [`LockGuard::release`] (dropping releases too).
#[derive(Debug)]
pub struct LockGuard {
    lock_path: String,
    file: String,
    released: bool,
}

impl LockGuard {
    /// Release: forget it in-process, then rmdir the lock directory if it is still ours.
    /// Release errors are ignored (B15); a lock taken over meanwhile is left alone (W-B4).
    pub fn release(mut self) -> Result<(), FsError> {
        self.release_inner()
    }

    fn release_inner(&mut self) -> Result<(), FsError> {
        if self.released {
            return Ok(());
        }
        self.released = true;
        let held = lock_state().held.remove(&self.lock_path);
        table().released.notify_all();
        let Some(held) = held else { return Ok(()) };
        if held.compromised {
            return Err(FsError::Compromised {
                file: self.file.clone(),
            });
        }
        if let Some(id) = held.id {
            remove_if_ours(&self.lock_path, id);
        }
        Ok(())
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let _ = self.release_inner();
    }
}

fn dir_id(path: &str, meta: &std::fs::Metadata) -> DirId {
    let (dev, ino) = platform::fs::file_id(path, meta);
    DirId {
        dev,
        ino,
        mtime_ns: platform::fs::mtime_ns(meta),
    }
}

fn remove_if_ours(lock_path: &str, id: DirId) {
    match std::fs::metadata(lock_path) {
        Ok(meta) if dir_id(lock_path, &meta) == id => {
            let _ = std::fs::remove_dir(lock_path);
        }
        _ => {}
    }
}

/// L1: the lock directory for a target.
pub fn lock_path_for(file: &str, realpath: bool) -> Result<(String, String), FsError> {
    let target = if realpath {
        platform::fs::realpath(file).map_err(|e| FsError::io(&e, "realpath", file))?
    } else {
        nodepath::resolve(file)
    };
    Ok((format!("{target}.lock"), target))
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
}

/// One acquisition attempt on disk (L2–L3).
fn attempt_on_disk(lock_path: &str, file: &str, stale_ms: u64) -> Result<DirId, FsError> {
    match mkdir_and_stat(lock_path) {
        Ok(id) => return Ok(id),
        Err(e) if !e.is("EEXIST") => return Err(e),
        Err(_) => {}
    }
    let meta = match std::fs::metadata(lock_path) {
        Ok(m) => m,
        // Released meanwhile: one more mkdir, no staleness checks.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return mkdir_and_stat(lock_path).map_err(|e| locked_if_exists(e, file));
        }
        Err(e) => return Err(FsError::io(&e, "stat", lock_path)),
    };
    let mtime_ms = platform::fs::mtime_ns(&meta).div_euclid(1_000_000);
    let stale = mtime_ms < now_ms() as i128 - stale_ms as i128;
    if !stale {
        return Err(FsError::Locked {
            file: file.to_string(),
        });
    }
    // Takeover: rmdir (ENOENT ignored), then exactly one more mkdir.
    if let Err(e) = std::fs::remove_dir(lock_path) {
        if e.kind() != std::io::ErrorKind::NotFound {
            return Err(FsError::io(&e, "rmdir", lock_path));
        }
    }
    mkdir_and_stat(lock_path).map_err(|e| locked_if_exists(e, file))
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

fn mkdir_and_stat(lock_path: &str) -> Result<DirId, FsError> {
    std::fs::create_dir(lock_path).map_err(|e| FsError::io(&e, "mkdir", lock_path))?;
    match std::fs::metadata(lock_path) {
        Ok(meta) => Ok(dir_id(lock_path, &meta)),
        Err(e) => {
            let _ = std::fs::remove_dir(lock_path);
            Err(FsError::io(&e, "stat", lock_path))
        }
    }
}

/// How long a synchronous acquisition may wait for this process's own native holder (W-B6).
const SYNC_WAIT_FOR_OWN_HOLDER: Duration = Duration::from_millis(2000);

/// Acquire the lock on `file` per `opts` (blocking the calling thread while it waits).
///
/// First this process's own turn: operations on one path queue in FIFO order and are woken
/// by each release (bounded by the retry budget; a synchronous caller may wait up to 2 s for
/// an in-flight native operation, W-B6). Then the on-disk protocol with the retry schedule,
/// which is what excludes other processes.
pub fn acquire(file: &str, opts: LockOptions) -> Result<LockGuard, FsError> {
    let (lock_path, target) = lock_path_for(file, opts.realpath)?;
    let attempts = opts.retry.attempts();
    let budget: Duration = (1..attempts).map(|k| opts.retry.wait(k)).sum();
    take_turn(&lock_path, &target, opts, budget)?;
    let mut errors: Vec<FsError> = Vec::new();
    for k in 1..=attempts {
        match attempt_on_disk(&lock_path, &target, opts.stale_ms) {
            Ok(id) => {
                if let Some(h) = lock_state().held.get_mut(&lock_path) {
                    h.id = Some(id);
                    h.last_refresh = Instant::now();
                }
                return Ok(LockGuard {
                    lock_path,
                    file: target,
                    released: false,
                });
            }
            Err(err) => {
                let retryable = match opts.retry {
                    Retry::Async { .. } => true,
                    Retry::Sync { .. } => platform::fs::sync_lock_retryable(&err),
                };
                errors.push(err);
                if !retryable {
                    break;
                }
                if k < attempts {
                    std::thread::sleep(opts.retry.wait(k));
                }
            }
        }
    }
    // Give the turn back before reporting.
    lock_state().held.remove(&lock_path);
    table().released.notify_all();
    Err(match opts.retry {
        Retry::Async { .. } => most_frequent(errors),
        Retry::Sync { .. } => errors.pop().unwrap_or(FsError::Locked { file: target }),
    })
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
/// `lock_path` ahead of us, then claim it. ELOCKED when the wait runs out.
fn take_turn(
    lock_path: &str,
    file: &str,
    opts: LockOptions,
    budget: Duration,
) -> Result<(), FsError> {
    let mut st = lock_state();
    let bound = match (opts.retry, st.held.get(lock_path)) {
        (Retry::Sync { .. }, Some(h)) if h.kind == HolderKind::Native => {
            budget.max(SYNC_WAIT_FOR_OWN_HOLDER)
        }
        _ => budget,
    };
    let deadline = Instant::now() + bound;
    let ticket = st.next_ticket;
    st.next_ticket += 1;
    st.queues
        .entry(lock_path.to_string())
        .or_default()
        .push_back(ticket);
    loop {
        let first = st.queues.get(lock_path).and_then(|q| q.front()) == Some(&ticket);
        if first && !st.held.contains_key(lock_path) {
            if let Some(q) = st.queues.get_mut(lock_path) {
                q.pop_front();
                if q.is_empty() {
                    st.queues.remove(lock_path);
                }
            }
            st.held.insert(
                lock_path.to_string(),
                Held {
                    kind: opts.kind,
                    owner: opts.owner,
                    id: None,
                    last_refresh: Instant::now(),
                    compromised: false,
                },
            );
            return Ok(());
        }
        let now = Instant::now();
        if now >= deadline {
            if let Some(q) = st.queues.get_mut(lock_path) {
                q.retain(|t| *t != ticket);
                if q.is_empty() {
                    st.queues.remove(lock_path);
                }
            }
            drop(st);
            table().released.notify_all();
            return Err(FsError::Locked {
                file: file.to_string(),
            });
        }
        st = table()
            .released
            .wait_timeout(st, deadline - now)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

/// L5 / L10d: every held lock gets its mtime rewritten at least every second, after checking it
/// still carries the mtime this process set; otherwise it is marked compromised.
fn refresh_loop() {
    loop {
        std::thread::sleep(Duration::from_millis(250));
        // Blocks until the table's initialization (which spawned this thread) has finished.
        let mut st = lock_state();
        for (path, h) in st.held.iter_mut() {
            let Some(id) = h.id else { continue };
            if h.compromised || h.last_refresh.elapsed() < Duration::from_millis(UPDATE_MS - 250) {
                continue;
            }
            match refresh(path, id) {
                Some(new_id) => {
                    h.id = Some(new_id);
                    h.last_refresh = Instant::now();
                }
                None => h.compromised = true,
            }
        }
    }
}

fn refresh(lock_path: &str, id: DirId) -> Option<DirId> {
    let meta = std::fs::metadata(lock_path).ok()?;
    if dir_id(lock_path, &meta) != id {
        return None;
    }
    if !platform::fs::touch_now(lock_path) {
        return Some(id);
    }
    std::fs::metadata(lock_path)
        .ok()
        .map(|m| dir_id(lock_path, &m))
}

/// At teardown of the JS environment `owner` (process or worker exit, L8 / L10h): give its
/// in-flight native operations a moment to finish on their threads (they release their own
/// locks), then remove the lock directories still held for JS callbacks that can no longer
/// run. A native operation still running after that keeps its lock (it may yet rename its
/// file); the 2 s stale rule frees it once the process is gone.
pub fn release_all(owner: u64) {
    let deadline = Instant::now() + Duration::from_millis(100);
    let mut st = lock_state();
    loop {
        let busy = st
            .held
            .values()
            .any(|h| h.owner == owner && h.kind == HolderKind::Native);
        let now = Instant::now();
        if !busy || now >= deadline {
            break;
        }
        st = table()
            .released
            .wait_timeout(st, deadline - now)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
    let mine: Vec<String> = st
        .held
        .iter()
        .filter(|(_, h)| h.owner == owner && h.kind == HolderKind::Callback)
        .map(|(p, _)| p.clone())
        .collect();
    for path in mine {
        if let Some(h) = st.held.remove(&path) {
            if let (Some(id), false) = (h.id, h.compromised) {
                remove_if_ours(&path, id);
            }
        }
    }
    drop(st);
    table().released.notify_all();
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
            tv_sec: (now_ms() / 1000) as libc::time_t - 3,
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
        g.release().unwrap();
        assert!(std::path::Path::new(&lock).is_dir());
        std::fs::remove_dir(&lock).unwrap();
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

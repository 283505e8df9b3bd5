//! What this process knows of its own locks: which it holds (and for whom), the FIFO of its
//! operations waiting for each, the JS environments torn down or past their `exit` event, and
//! who waits to be told of a lock's removal. One table for the process; sync waiters sleep on
//! its condition variable, async ones on its notifier, and every change that can end a wait
//! wakes both.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use super::Cell;

/// Who holds an in-process lock: decides whether a synchronous waiter may block for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HolderKind {
    /// A native store operation: finishes on its own, without the JS thread.
    Native,
    /// A JS callback (`withFileLock`), or a CAS waiting for the JS thread's verdict.
    Callback,
}

#[derive(Debug)]
pub(crate) struct Held {
    pub kind: HolderKind,
    pub owner: u64,
    pub cell: Arc<Cell>,
}

/// JS environments remembered as torn down or exited, at most this many (the oldest are
/// forgotten: environment ids only grow, and a wait or commit of one that old is long over).
const MAX_ENVIRONMENTS: usize = 4096;

/// A set of environment ids that forgets the oldest beyond its bound.
#[derive(Default)]
pub(crate) struct Envs(BTreeSet<u64>);

impl Envs {
    pub fn insert(&mut self, owner: u64) {
        self.0.insert(owner);
        while self.0.len() > MAX_ENVIRONMENTS {
            self.0.pop_first();
        }
    }

    pub fn contains(&self, owner: &u64) -> bool {
        self.0.contains(owner)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

#[derive(Default)]
pub(crate) struct Waiting {
    pub waiters: usize,
    pub removals: u64,
}

/// In-process state.
#[derive(Default)]
pub(crate) struct State {
    pub held: HashMap<String, Held>,
    pub queues: HashMap<String, VecDeque<u64>>,
    pub next_ticket: u64,
    pub torn_down: Envs,
    /// JS environments whose `exit` event has fired: no JS callback of theirs will run again.
    pub exited: Envs,
    /// Lock paths somebody here waits for on disk → removals seen so far (notified handoff).
    pub waiting: HashMap<String, Waiting>,
    /// Attempts made early because a removal was notified (a diagnostic for tests).
    pub notified_attempts: u64,
    /// Threads asleep on the condition variable: a change with nobody asleep skips the
    /// wake-up call (a syscall on every uncontended store operation otherwise).
    pub sleepers: usize,
}

pub(crate) struct Table {
    pub state: Mutex<State>,
    pub changed: Condvar,
    /// Async waiters (timers, not threads) wait on this.
    pub notify: tokio::sync::Notify,
}

pub(crate) fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| Table {
        state: Mutex::new(State::default()),
        changed: Condvar::new(),
        notify: tokio::sync::Notify::new(),
    })
}

pub(crate) fn state() -> MutexGuard<'static, State> {
    table().state.lock().unwrap_or_else(|e| e.into_inner())
}

/// Wake whoever waits for a change of `st` (checked under its mutex, which a sleeper holds
/// from its last look until it sleeps: nobody counted means nobody can miss the change).
pub(crate) fn wake(st: MutexGuard<'static, State>) {
    let sleepers = st.sleepers > 0;
    drop(st);
    if sleepers {
        table().changed.notify_all();
    }
    table().notify.notify_waiters();
}

/// Sleep on the condition variable for at most `timeout`, returning the guard.
pub(crate) fn sleep(
    mut st: MutexGuard<'static, State>,
    timeout: Duration,
) -> MutexGuard<'static, State> {
    st.sleepers += 1;
    let mut st = table()
        .changed
        .wait_timeout(st, timeout)
        .unwrap_or_else(|e| e.into_inner())
        .0;
    st.sleepers -= 1;
    st
}

/// A removal inside a watched directory ([`crate::store::lock_watch`]): wake whoever waits for
/// it, or for any lock in it when the directory itself went.
fn on_removed(path: &std::path::Path) {
    let mut st = state();
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
        table().changed.notify_all();
        table().notify.notify_waiters();
    }
}

/// Be told of removals at `lock_path` (notified handoff) while this is alive; where the OS
/// refuses a watch (no inotify instance left for this user) it does nothing.
pub(crate) struct Watch {
    lock_path: Option<String>,
}

impl Watch {
    pub fn off() -> Watch {
        Watch { lock_path: None }
    }

    pub fn start(lock_path: &str) -> Watch {
        let Some(dir) = std::path::Path::new(lock_path).parent() else {
            return Watch::off();
        };
        if !crate::store::lock_watch::watch(dir, on_removed) {
            return Watch::off();
        }
        state()
            .waiting
            .entry(lock_path.to_string())
            .or_default()
            .waiters += 1;
        Watch {
            lock_path: Some(lock_path.to_string()),
        }
    }

    pub fn on(&self) -> bool {
        self.lock_path.is_some()
    }

    /// Removals seen so far.
    pub fn removals(&self) -> u64 {
        self.lock_path
            .as_ref()
            .map_or(0, |p| state().waiting.get(p).map_or(0, |w| w.removals))
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let Some(lock_path) = self.lock_path.take() else {
            return;
        };
        {
            let mut st = state();
            if let Some(w) = st.waiting.get_mut(&lock_path) {
                w.waiters -= 1;
                if w.waiters == 0 {
                    st.waiting.remove(&lock_path);
                }
            }
        }
        if let Some(dir) = std::path::Path::new(&lock_path).parent() {
            crate::store::lock_watch::unwatch(dir);
        }
    }
}

/// Async lock operations of this process under way, by lock path: counted from the call on
/// the JS thread, before the work reaches a thread, until the work ends ([`InFlight`]).
static IN_FLIGHT: std::sync::LazyLock<Mutex<HashMap<String, usize>>> =
    std::sync::LazyLock::new(|| Mutex::new(HashMap::new()));

fn in_flight() -> MutexGuard<'static, HashMap<String, usize>> {
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
        let (lock_path, _) = super::lock_path_for(file);
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
    let st = state();
    st.held.contains_key(lock_path) || st.queues.contains_key(lock_path)
}

/// When a turn in this process's own queue is over waiting (see `take_turn`).
pub(crate) fn turn_deadline(
    start: Instant,
    budget: Duration,
    sync: bool,
    st: &State,
    lock_path: &str,
) -> Instant {
    const SYNC_WAIT_FOR_OWN_HOLDER: Duration = Duration::from_millis(2000);
    start
        + match st.held.get(lock_path) {
            Some(h) if sync && h.kind == HolderKind::Native => budget.max(SYNC_WAIT_FOR_OWN_HOLDER),
            _ => budget,
        }
}

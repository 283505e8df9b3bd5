//! Keeping held locks fresh (L5 / L10d): every held lock gets its mtime rewritten about every
//! half second ([`super::hold::REFRESH_AFTER`]), each on its own schedule, so that no other
//! process judges it stale while it is held (the stale threshold is 2 s).
//!
//! One scheduler thread looks at the held locks every 250 ms (holding the table's mutex only to
//! list them) and hands each due refresh to a pool; it makes no file-system call itself and
//! skips a lock busy deciding. It runs only while a lock is held or being acquired: at the
//! first look that finds none it ends, and the next acquisition starts it again, so an idle host
//! process is never woken by it. A refresh can get stuck in the file system (a mount that
//! stopped answering): the pool then starts another thread for the next due refresh instead of
//! letting it queue behind the stuck one ([`crate::background::Pool`] counts a thread busy for
//! longer than [`STUCK_AFTER`] out of its bound), so a stuck refresh delays no other lock's. A
//! refresh never holds its lock's mutex across a file-system call either: a publish, a release
//! (also the synchronous one on the JS thread, and the one at exit) never waits for it.
//!
//! A holder is told its lock is lost no later than the moment another process may judge it
//! stale: the last successful refresh plus the threshold, by the clock that counts suspended
//! time. The scheduler marks such locks lost as it passes, and every publish and release checks
//! that deadline before anything else ([`super::hold::Hold`]).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use super::real;
use super::world::World;
use super::{table, Cell};

/// How often the scheduler looks.
const TICK: Duration = Duration::from_millis(250);
/// A refresh running this long is taken for stuck: it no longer holds a place in the pool.
pub const STUCK_AFTER: Duration = Duration::from_millis(250);
/// Threads refreshing at once, besides those stuck.
const THREADS: usize = 2;

/// The scheduler thread, while it runs. Whether it may end is decided under this mutex, which
/// [`ensure_running`] takes too: an acquisition never counts on a scheduler that is ending.
static SCHEDULER: Mutex<Option<std::thread::JoinHandle<()>>> = Mutex::new(None);
/// Acquisitions under way (each holds a [`Running`]).
static ACQUIRING: AtomicUsize = AtomicUsize::new(0);

/// Keeps the scheduler from ending while an acquisition is under way.
pub struct Running(());

impl Drop for Running {
    fn drop(&mut self) {
        ACQUIRING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Make sure the scheduler runs for an acquisition about to start: started if it is not
/// running (first use, or it ended when no lock was left); a thread that could not be started
/// is tried again at the next acquisition instead of failing every later one.
pub fn ensure_running() -> Result<Running, String> {
    let mut s = SCHEDULER.lock().unwrap_or_else(|e| e.into_inner());
    ACQUIRING.fetch_add(1, Ordering::SeqCst);
    let running = Running(());
    if s.as_ref().is_some_and(|h| !h.is_finished()) {
        return Ok(running);
    }
    let h = std::thread::Builder::new()
        .name("pi-native-locks".into())
        .spawn(run)
        .map_err(|e| e.to_string())?;
    *s = Some(h);
    Ok(running)
}

fn pool() -> &'static crate::background::Pool {
    static POOL: OnceLock<crate::background::Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        crate::background::Pool::new(THREADS, "pi-native-touch", || {}).replacing_stuck(STUCK_AFTER)
    })
}

fn run() {
    loop {
        std::thread::sleep(TICK);
        let _ = std::panic::catch_unwind(schedule);
        // Nothing held, nothing being acquired: end (lock order: SCHEDULER, then the table).
        let mut s = SCHEDULER.lock().unwrap_or_else(|e| e.into_inner());
        if ACQUIRING.load(Ordering::SeqCst) == 0 && table::state().held.is_empty() {
            *s = None;
            return;
        }
    }
}

/// One look at every held lock: lost ones past their deadline are marked, due ones handed to
/// the pool.
fn schedule() {
    let held: Vec<Arc<Cell>> = table::state()
        .held
        .values()
        .map(|h| h.cell.clone())
        .collect();
    let now = real::now();
    for cell in held {
        let mut h = match cell.hold.try_lock() {
            Ok(h) => h,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => continue,
        };
        let Some(hold) = h.as_mut() else { continue };
        // Tell the holder as soon as another process may judge its lock stale.
        if !hold.check_deadline(now) || !hold.refresh_due(now) {
            continue;
        }
        let Some(op) = hold.refresh_op(now) else {
            continue;
        };
        drop(h);
        let job = {
            let cell = cell.clone();
            move || refresh(&cell, op, now.boot)
        };
        if !pool().spawn(Box::new(job)) {
            // No thread to hand it to: refresh here rather than not at all.
            refresh(&cell, op, now.boot);
        }
    }
    // Refreshes queued behind stuck ones get a thread of their own, and so do the calls of
    // the lanes (crate::lanes).
    pool().replace_stuck();
    crate::lanes::replace_stuck();
}

/// One refresh through a handle of the lock directory ([`super::world::Op::Touch`]), recorded
/// under the lock's mutex, which is held only to record.
fn refresh(cell: &Cell, op: super::world::Op, sent: Duration) {
    let r = cell.world.clone().call(op);
    if let Some(h) = cell.hold().as_mut() {
        h.refresh_record(r, sent, real::now());
    }
    cell.recorded.notify_all();
}

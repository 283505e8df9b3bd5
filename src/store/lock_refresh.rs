//! Keeping held locks fresh (L5 / L10d): every held lock gets its mtime rewritten about every
//! half second, each on its own schedule, so that no other process judges it stale while it is
//! held (the stale threshold is 2 s).
//!
//! One scheduler thread looks at the held locks every 250 ms (holding the table's mutex only to
//! list them) and hands each due refresh to a pool; it makes no file-system call itself and
//! skips a lock that is busy publishing (its own holder verifies it anyway). It runs only while
//! a lock is held or being acquired: at the first look that finds none it ends, and the next
//! acquisition starts it again, so an idle host process is never woken by it. A refresh can get
//! stuck in the file system (a mount that stopped answering): the pool then starts another
//! thread for the next due refresh instead of letting it queue behind the stuck one
//! ([`crate::background::Pool`] counts a thread busy for longer than [`STUCK_AFTER`] out of its
//! bound), so a stuck refresh delays no other lock's. A refresh never holds its lock's mutex
//! across a file-system call either: a fenced commit, a release (also the synchronous one on
//! the JS thread, and the one at exit) never waits for a stuck refresh.
//!
//! A holder is told its lock is lost no later than the moment another process may judge it
//! stale: the last successful refresh plus the stale threshold, by the clock that counts
//! suspended time ([`BootInstant`]). The scheduler marks such locks lost as it passes, and every
//! fenced commit and release checks that deadline before anything else.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use super::lock::{ceil_second, lock_disk, lock_state, same_dir, DiskCell, Hold};
use crate::platform;
use crate::platform::clock::BootInstant;

/// How often the scheduler looks.
const TICK: Duration = Duration::from_millis(250);
/// A lock is refreshed once its last refresh is this old (L4 asks for at least every 1000 ms;
/// refreshing sooner leaves more of the threshold for a refresh that is slow to complete).
const DUE_AFTER: Duration = Duration::from_millis(500);
/// A refresh running this long is taken for stuck: it no longer holds a place in the pool.
pub const STUCK_AFTER: Duration = Duration::from_millis(250);
/// Threads refreshing at once, besides those stuck.
const THREADS: usize = 2;

/// The scheduler thread, while it runs. Whether it may end is decided under this mutex, which
/// [`ensure_running`] takes too: an acquisition never counts on a scheduler that is ending.
static SCHEDULER: Mutex<Option<std::thread::JoinHandle<()>>> = Mutex::new(None);
/// Acquisitions under way (each holds a [`Running`]): their lock is not in the held table yet,
/// or is there as `Acquiring`, and will need refreshing.
static ACQUIRING: AtomicUsize = AtomicUsize::new(0);

/// Keeps the scheduler from ending while an acquisition is under way; dropped when it is over
/// (the lock is then in the held table, or was not taken).
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
        if ACQUIRING.load(Ordering::SeqCst) == 0 && lock_state().held.is_empty() {
            *s = None;
            return;
        }
    }
}

/// One look at every held lock: lost ones past their deadline are marked, due ones handed to
/// the pool.
fn schedule() {
    let held: Vec<(String, Arc<DiskCell>)> = lock_state()
        .held
        .iter()
        .map(|(p, h)| (p.clone(), h.disk.clone()))
        .collect();
    for (path, cell) in held {
        let mut d = match cell.disk.try_lock() {
            Ok(d) => d,
            Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => continue,
        };
        // Tell the holder as soon as another process may judge its lock stale.
        if !d.check_deadline() {
            continue;
        }
        let due =
            matches!(d.hold, Hold::Held { refreshed, .. } if refreshed.elapsed() >= DUE_AFTER);
        if !due || d.refreshing {
            continue;
        }
        d.refreshing = true;
        drop(d);
        let job = {
            let (path, cell) = (path.clone(), cell.clone());
            move || refresh(&path, &cell)
        };
        if !pool().spawn(Box::new(job)) {
            // No thread to hand it to: refresh here rather than not at all.
            refresh(&path, &cell);
        }
    }
    // Refreshes queued behind stuck ones get a thread of their own.
    pool().replace_stuck();
}

/// One refresh: rewrite the mtime of the lock directory if it is still the one recorded, through
/// a handle of that very directory ([`platform::fs::touch_dir_if`]); otherwise, or once the
/// deadline passed without success, the lock is lost (L5). The lock's mutex is held only to
/// read what to do and to record what happened.
pub(super) fn refresh(lock_path: &str, cell: &DiskCell) {
    let (id, remote, started, to) = {
        let mut d = lock_disk(cell);
        let Hold::Held { id, .. } = d.hold else {
            d.refreshing = false;
            return;
        };
        if !d.check_deadline() {
            d.refreshing = false;
            return;
        }
        d.touching = true;
        let to = d.whole_seconds.then(|| ceil_second(SystemTime::now()));
        (id, d.remote, BootInstant::now(), to)
    };
    let touched = platform::fs::touch_dir_if(lock_path, |s| same_dir(remote, s, id), to);
    let mut d = lock_disk(cell);
    d.touching = false;
    d.refreshing = false;
    // Released, lost or already recorded meanwhile: nothing to record.
    if matches!(d.hold, Hold::Held { id: now, .. } if now == id) {
        match touched {
            platform::fs::Touched::Done(now) => {
                d.hold = Hold::Held {
                    id: now,
                    refreshed: started,
                }
            }
            platform::fs::Touched::NotOurs => d.hold = Hold::Lost { left: None },
            // L5: a failing refresh is tried again until the deadline passes without success.
            platform::fs::Touched::Failed(_) => {
                d.check_deadline();
            }
        }
    }
    drop(d);
    cell.recorded.notify_all();
}

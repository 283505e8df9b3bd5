//! Threads for background work that must not occupy libuv's pool (session recovery's scans, lock
//! refreshes): a bounded FIFO pool whose idle threads sleep, and one deadline timer thread.
//!
//! Why not a crate: rayon's pool (used before) lets idle workers spin in `sched_yield` for a
//! while after every job is queued; on a 2-core machine three spinning threads took more CPU
//! than the scan they were waiting beside (measured: 40% of a near-end recovery's CPU time).
//! tokio's blocking pool is unbounded (up to 512 threads under an overload). What is needed is
//! small: a queue, a condition variable, threads started on demand up to a bound.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

type Job = Box<dyn FnOnce() + Send>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A bounded FIFO thread pool: jobs run in the order queued; a job queued while every thread
/// is busy waits for one (it is never given a thread beyond the bound). Optionally
/// ([`Pool::replacing_stuck`]) a thread whose job has run for too long stops counting towards
/// the bound, so that jobs queued behind a stuck one get a thread of their own; the extra
/// threads end once they find nothing to do.
pub struct Pool {
    state: Mutex<PoolState>,
    ready: Condvar,
    max_threads: usize,
    name: &'static str,
    /// Run once on each new thread before its first job.
    on_start: fn(),
    /// A job running this long no longer holds a place within `max_threads`.
    stuck_after: Option<Duration>,
    /// Threads in all, stuck ones included: beyond this, jobs wait.
    cap: usize,
}

#[derive(Default)]
struct PoolState {
    jobs: VecDeque<Job>,
    /// Threads asleep waiting for a job.
    idle: usize,
    threads: usize,
    /// Index of the next thread started (names and `busy` keys).
    next_index: usize,
    /// When each busy thread started its current job, by thread index.
    busy: HashMap<usize, Instant>,
}

impl Pool {
    pub fn new(max_threads: usize, name: &'static str, on_start: fn()) -> Self {
        Pool {
            state: Mutex::new(PoolState::default()),
            ready: Condvar::new(),
            max_threads: max_threads.max(1),
            name,
            on_start,
            stuck_after: None,
            cap: usize::MAX,
        }
    }

    /// The same pool, never more than `cap` threads in all, stuck ones included (a mount that
    /// stopped answering keeps at most this many).
    pub fn capped(mut self, cap: usize) -> Self {
        self.cap = cap.max(self.max_threads);
        self
    }

    /// The same pool, where a thread busy with one job for `after` or longer no longer counts
    /// towards the bound (see [`Pool::replace_stuck`]).
    pub fn replacing_stuck(mut self, after: Duration) -> Self {
        self.stuck_after = Some(after);
        self
    }

    /// Queue `job`. False (the job dropped unrun) only when the pool has no thread and none can
    /// be started.
    pub fn spawn(&'static self, job: Job) -> bool {
        let mut st = lock(&self.state);
        st.jobs.push_back(job);
        // An asleep thread for every queued job (this one included): wake one, start nothing.
        if st.idle >= st.jobs.len() {
            drop(st);
            self.ready.notify_one();
            return true;
        }
        if !self.start_if_room(&mut st) && st.threads == 0 {
            st.jobs.pop_back();
            return false;
        }
        true
    }

    /// Threads that count towards the bound: all of them, less those stuck in a job.
    fn counted(&self, st: &PoolState) -> usize {
        match self.stuck_after {
            None => st.threads,
            Some(d) => st.threads - st.busy.values().filter(|t| t.elapsed() >= d).count(),
        }
    }

    /// Start a thread if the bound allows; whether one was started.
    fn start_if_room(&'static self, st: &mut PoolState) -> bool {
        if self.counted(st) >= self.max_threads || st.threads >= self.cap {
            return false;
        }
        let index = st.next_index;
        let started = std::thread::Builder::new()
            .name(format!("{}-{index}", self.name))
            .spawn(move || self.work(index));
        if started.is_err() {
            return false; // the running threads will get to it
        }
        st.next_index += 1;
        st.threads += 1;
        true
    }

    /// Give queued jobs a thread when the ones they wait for are stuck (a pool made with
    /// [`Pool::replacing_stuck`]; called periodically by its user, since nothing else happens
    /// while every thread is stuck).
    pub fn replace_stuck(&'static self) {
        let mut st = lock(&self.state);
        while st.jobs.len() > st.idle && self.start_if_room(&mut st) {}
    }

    fn work(&self, index: usize) {
        (self.on_start)();
        let mut st = lock(&self.state);
        loop {
            if let Some(job) = st.jobs.pop_front() {
                st.busy.insert(index, Instant::now());
                drop(st);
                // A job settles its own call on a panic; the thread must survive it regardless.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                st = lock(&self.state);
                st.busy.remove(&index);
                // A thread started beside stuck ones ends once there is nothing left to do.
                if st.threads > self.max_threads && st.jobs.is_empty() {
                    st.threads -= 1;
                    return;
                }
            } else {
                st.idle += 1;
                st = self.ready.wait(st).unwrap_or_else(|e| e.into_inner());
                st.idle -= 1;
            }
        }
    }
}

/// Key of a pending deadline: when, then the order of registration (keys are unique).
pub type DueKey = (Instant, u64);

/// One thread that runs an action at each registered instant unless it was withdrawn first.
/// It sleeps until the earliest registered instant; registering a later one wakes nobody, so a
/// steady stream of calls that finish in time costs no thread wake-ups here.
pub struct Deadlines<T: Send + 'static> {
    state: Mutex<DueState<T>>,
    changed: Condvar,
    on_due: fn(T),
    name: &'static str,
}

struct DueState<T> {
    due: BTreeMap<DueKey, T>,
    next: u64,
    /// When the timer thread will next look (None: not before something is registered).
    planned: Option<Instant>,
    /// Whether the timer thread runs. A thread that could not be started is tried again at the
    /// next registration (a transient EAGAIN must not disable every later deadline).
    started: bool,
}

impl<T: Send + 'static> Deadlines<T> {
    pub const fn new(name: &'static str, on_due: fn(T)) -> Self {
        Deadlines {
            state: Mutex::new(DueState {
                due: BTreeMap::new(),
                next: 0,
                planned: None,
                started: false,
            }),
            changed: Condvar::new(),
            on_due,
            name,
        }
    }

    /// Run `on_due(item)` at `at` unless [`Self::withdraw`] takes it back first. None when the
    /// timer thread cannot be started (the caller must not rely on the deadline).
    pub fn register(&'static self, at: Instant, item: T) -> Option<DueKey> {
        let mut st = lock(&self.state);
        if !st.started {
            st.started = std::thread::Builder::new()
                .name(self.name.into())
                .spawn(move || self.run())
                .is_ok();
            if !st.started {
                return None;
            }
        }
        let key = (at, st.next);
        st.next += 1;
        st.due.insert(key, item);
        if st.planned.is_none_or(|p| at < p) {
            st.planned = Some(at);
            drop(st);
            self.changed.notify_one();
        }
        Some(key)
    }

    /// Take back a registration; None when its action already ran (or is running).
    pub fn withdraw(&self, key: DueKey) -> Option<T> {
        lock(&self.state).due.remove(&key)
    }

    /// How many registrations are pending (neither withdrawn nor run).
    pub fn pending(&self) -> usize {
        lock(&self.state).due.len()
    }

    /// Take back every registration `pick` selects.
    pub fn withdraw_where(&self, mut pick: impl FnMut(&T) -> bool) -> Vec<T> {
        let mut st = lock(&self.state);
        let keys: Vec<DueKey> = st
            .due
            .iter()
            .filter(|(_, v)| pick(v))
            .map(|(k, _)| *k)
            .collect();
        keys.iter().filter_map(|k| st.due.remove(k)).collect()
    }

    fn run(&self) {
        let mut st = lock(&self.state);
        loop {
            let now = Instant::now();
            match st.due.first_key_value().map(|(k, _)| *k) {
                Some(key) if key.0 <= now => {
                    let item = st.due.remove(&key).expect("key just seen");
                    drop(st);
                    // The thread must outlive a panicking action: every later deadline needs it.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        (self.on_due)(item)
                    }));
                    st = lock(&self.state);
                }
                Some((at, _)) => {
                    st.planned = Some(at);
                    st = self
                        .changed
                        .wait_timeout(st, at - now)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
                None => {
                    st.planned = None;
                    st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    #[test]
    fn pool_runs_every_job_within_its_bound() {
        static POOL: std::sync::LazyLock<Pool> =
            std::sync::LazyLock::new(|| Pool::new(2, "test-pool", || {}));
        let (tx, rx) = mpsc::channel();
        let running = std::sync::Arc::new(AtomicUsize::new(0));
        let most = std::sync::Arc::new(AtomicUsize::new(0));
        for i in 0..20 {
            let (tx, running, most) = (tx.clone(), running.clone(), most.clone());
            assert!(POOL.spawn(Box::new(move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(2));
                running.fetch_sub(1, Ordering::SeqCst);
                tx.send(i).unwrap();
                if i == 3 {
                    panic!("a panicking job must not take its thread down");
                }
            })));
        }
        let mut got: Vec<i32> = (0..20)
            .map(|_| rx.recv_timeout(Duration::from_secs(30)).unwrap())
            .collect();
        assert_eq!(most.load(Ordering::SeqCst), 2);
        assert_eq!(lock(&POOL.state).threads, 2);
        // Every job ran once, the one that panicked included. (In which order two threads finish
        // is the machine's: a loaded one can pause either thread inside a job.)
        got.sort();
        assert_eq!(got, (0..20).collect::<Vec<_>>());
    }

    /// One thread takes the jobs exactly in the order they were queued.
    #[test]
    fn pool_takes_jobs_in_queue_order() {
        static POOL: std::sync::LazyLock<Pool> =
            std::sync::LazyLock::new(|| Pool::new(1, "test-order", || {}));
        let (tx, rx) = mpsc::channel();
        for i in 0..20 {
            let tx = tx.clone();
            assert!(POOL.spawn(Box::new(move || tx.send(i).unwrap())));
        }
        let got: Vec<i32> = (0..20)
            .map(|_| rx.recv_timeout(Duration::from_secs(30)).unwrap())
            .collect();
        assert_eq!(got, (0..20).collect::<Vec<_>>());
    }

    /// Jobs queued behind stuck ones get threads of their own; the extra threads end once idle.
    #[test]
    fn stuck_jobs_do_not_hold_up_the_others() {
        static POOL: std::sync::LazyLock<Pool> = std::sync::LazyLock::new(|| {
            Pool::new(2, "test-stuck", || {}).replacing_stuck(Duration::from_millis(50))
        });
        let (release, stuck) = mpsc::channel::<()>();
        let stuck = std::sync::Arc::new(Mutex::new(stuck));
        for _ in 0..4 {
            let stuck = stuck.clone();
            assert!(POOL.spawn(Box::new(move || {
                let _ = stuck.lock().unwrap().recv_timeout(Duration::from_secs(10));
            })));
        }
        std::thread::sleep(Duration::from_millis(100));
        let (tx, rx) = mpsc::channel();
        POOL.spawn(Box::new(move || tx.send(()).unwrap()));
        // The two threads are stuck (one in recv, one waiting for the receiver's lock); the
        // periodic look gives the queued jobs threads.
        let started = Instant::now();
        loop {
            POOL.replace_stuck();
            if rx.recv_timeout(Duration::from_millis(60)).is_ok() {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "the healthy job never ran"
            );
        }
        for _ in 0..4 {
            release.send(()).unwrap();
        }
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(lock(&POOL.state).threads, 2, "back to the bound once idle");
    }

    #[test]
    fn deadlines_fire_in_order_unless_withdrawn() {
        static FIRED: Mutex<Vec<u32>> = Mutex::new(Vec::new());
        static TIMER: Deadlines<u32> = Deadlines::new("test-deadlines", |v| lock(&FIRED).push(v));
        let t0 = Instant::now();
        let late = TIMER.register(t0 + Duration::from_millis(60), 3).unwrap();
        TIMER.register(t0 + Duration::from_millis(40), 2).unwrap();
        let early = TIMER.register(t0 + Duration::from_millis(20), 1).unwrap();
        let never = TIMER.register(t0 + Duration::from_millis(30), 9).unwrap();
        assert_eq!(TIMER.withdraw(never), Some(9));
        let deadline = Instant::now() + Duration::from_secs(10);
        while lock(&FIRED).len() < 3 {
            assert!(Instant::now() < deadline, "fired {:?}", *lock(&FIRED));
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(*lock(&FIRED), vec![1, 2, 3]);
        assert_eq!(TIMER.withdraw(early), None);
        assert_eq!(TIMER.withdraw(late), None);
        assert!(t0.elapsed() >= Duration::from_millis(60));
    }

    #[test]
    fn a_panicking_action_leaves_the_timer_running() {
        static FIRED: Mutex<Vec<u32>> = Mutex::new(Vec::new());
        static TIMER: Deadlines<u32> = Deadlines::new("test-deadlines-panic", |v| {
            if v == 0 {
                panic!("an action that panics");
            }
            lock(&FIRED).push(v)
        });
        let t0 = Instant::now();
        TIMER.register(t0 + Duration::from_millis(10), 0).unwrap();
        TIMER.register(t0 + Duration::from_millis(30), 1).unwrap();
        // Conditions with deadlines, not fixed sleeps: the machine may be loaded.
        let until = |want: &[u32]| {
            let deadline = Instant::now() + Duration::from_secs(10);
            while *lock(&FIRED) != want {
                assert!(
                    Instant::now() < deadline,
                    "fired {:?}, wanted {want:?}",
                    *lock(&FIRED)
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        until(&[1]);
        TIMER.register(Instant::now(), 2).unwrap();
        until(&[1, 2]);
    }
}

//! Production's drivers of the lock's state machines: each step's call made in the real world
//! ([`super::real`]), each wait made by the calling thread (blocking, for the sync API and the
//! fast path) or by a timer (async: [`acquire_async`], no thread parked while it waits).
//!
//! First this process's own turn: operations on one path queue in FIFO order and are woken by
//! each release (bounded by the retry budget; a synchronous caller may wait up to 2 s for an
//! in-flight native operation, W-B6). Then the on-disk protocol with the retry schedule, which
//! is what excludes other processes. Every wait ends early when the caller's JS environment is
//! torn down ([`FsError::Cancelled`]).

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::hold::{Hold, Next};
use super::model::{self, Acquire, Failure, Rule, Setup, Step};
use super::real::{self, RealWorld};
use super::table::{self, HolderKind, State, Watch};
use super::world::World;
use super::{memory, Cell, FsRule, LockGuard, LockOptions, Retry};
use crate::fserror::FsError;

/// The shortest scheduled wait that a notified handoff may cut short. The 25 and 50 ms waits
/// keep the plain schedule: a CAS that met the lock held almost always finds the entry changed
/// once it gets it, and woken at once it takes the lock before fresh readers do, only to fail
/// its compare (measured with 8 contending processes: 3.9 attempts per success and about an
/// eighth of the throughput with every wait notified; COMPATIBILITY.md).
const WATCH_FROM_WAIT: Duration = Duration::from_millis(100);

impl State {
    /// Whether an acquisition per `opts` must not take its lock: its environment was torn down,
    /// or it is async, would wait for the JS thread once held, and that environment's `exit`
    /// event has fired, so no JS of it runs again. Taken anyway, such a lock would be given
    /// back only if its thread got there before the process ended. Sync acquisitions go on:
    /// later exit listeners may lock.
    pub(crate) fn dead_end(&self, opts: &LockOptions) -> bool {
        opts.owner != 0
            && (self.torn_down.contains(&opts.owner)
                || !opts.sync()
                    && (opts.js_verdict || opts.kind == HolderKind::Callback)
                    && self.exited.contains(&opts.owner))
    }
}

/// The acquisition machine for `lock_path`, with the rules its folder follows.
fn setup(lock_path: &str, opts: &LockOptions, remote: bool) -> Setup {
    let folder = std::path::Path::new(lock_path)
        .parent()
        .map_or_else(String::new, |p| p.to_string_lossy().into_owned());
    let network = match opts.fs {
        FsRule::Local => false,
        FsRule::Network => true,
        FsRule::Auto => remote,
    };
    Setup {
        rule: if network {
            Rule::Network {
                cache: Duration::from_millis(opts.attribute_cache_ms),
            }
        } else {
            Rule::Local
        },
        remote,
        stale: Duration::from_millis(opts.stale_ms),
        policy: opts.retry.policy(),
        retry_eperm: cfg!(windows),
        token: model::new_token(rand::random(), rand::random()),
        lock: lock_path.to_string(),
        folder,
        mutations: model::Mutations::default(),
    }
}

/// Whether the lock's folder is remote, as the caller decided or by one `statfs`: of the folder,
/// or, before its first entry made it, of its nearest existing folder (taken for local, the
/// first lock in a new agentDir on a network mount ran the local protocol there).
fn remote_of(lock_path: &str, opts: &LockOptions) -> bool {
    opts.remote.unwrap_or_else(|| {
        std::path::Path::new(lock_path)
            .parent()
            .is_some_and(crate::platform::fs_kind::is_remote_folder)
    })
}

/// Wait (FIFO, bounded) until no other operation of this process holds or waits for
/// `lock_path` ahead of us, then claim it: the cell the acquisition fills. ELOCKED when the
/// wait runs out, Cancelled when the caller's environment is torn down meanwhile.
fn take_turn(
    lock_path: &str,
    file: &str,
    opts: &LockOptions,
    world: RealWorld,
) -> Result<Arc<Cell>, FsError> {
    let budget = opts.retry.policy().budget();
    let mut st = table::state();
    let start = Instant::now();
    let ticket = st.next_ticket;
    st.next_ticket += 1;
    st.queues
        .entry(lock_path.to_string())
        .or_default()
        .push_back(ticket);
    let mut world = Some(world);
    loop {
        match turn(&mut st, lock_path, ticket, opts, &mut world) {
            Some(Ok(cell)) => return Ok(cell),
            Some(Err(())) => {
                table::wake(st);
                return Err(FsError::Cancelled);
            }
            None => {}
        }
        let deadline = table::turn_deadline(start, budget, opts.sync(), &st, lock_path);
        let now = Instant::now();
        if now >= deadline {
            leave_queue(&mut st, lock_path, ticket);
            table::wake(st);
            return Err(FsError::Locked {
                file: file.to_string(),
            });
        }
        st = table::sleep(st, deadline - now);
    }
}

/// One look at the queue: Some(Ok) our turn came (claimed), Some(Err) cancelled (left the
/// queue), None keep waiting.
fn turn(
    st: &mut State,
    lock_path: &str,
    ticket: u64,
    opts: &LockOptions,
    world: &mut Option<RealWorld>,
) -> Option<Result<Arc<Cell>, ()>> {
    if st.dead_end(opts) {
        leave_queue(st, lock_path, ticket);
        return Some(Err(()));
    }
    let first = st.queues.get(lock_path).and_then(|q| q.front()) == Some(&ticket);
    if !first || st.held.contains_key(lock_path) {
        return None;
    }
    leave_queue(st, lock_path, ticket);
    let cell = Arc::new(Cell {
        hold: Mutex::new(None),
        recorded: Condvar::new(),
        world: world.take().expect("claimed once"),
    });
    st.held.insert(
        lock_path.to_string(),
        table::Held {
            kind: opts.kind,
            owner: opts.owner,
            cell: cell.clone(),
        },
    );
    Some(Ok(cell))
}

fn leave_queue(st: &mut State, lock_path: &str, ticket: u64) {
    if let Some(q) = st.queues.get_mut(lock_path) {
        q.retain(|t| *t != ticket);
        if q.is_empty() {
            st.queues.remove(lock_path);
        }
    }
}

/// What an acquisition ended with: the lock, or the error (none made on disk).
fn finish(
    lock_path: String,
    file: String,
    opts: &LockOptions,
    cell: Arc<Cell>,
    outcome: Result<model::Held, FsError>,
) -> Result<LockGuard, FsError> {
    let held = match outcome {
        Ok(h) => h,
        Err(e) => {
            // Nothing on disk is ours: the turn is given back.
            let mut st = table::state();
            if st
                .held
                .get(&lock_path)
                .is_some_and(|h| Arc::ptr_eq(&h.cell, &cell))
            {
                st.held.remove(&lock_path);
            }
            table::wake(st);
            return Err(e);
        }
    };
    *cell.hold() = Some(Hold::new(held, Duration::from_millis(opts.stale_ms)));
    let guard = LockGuard {
        lock_path,
        file,
        owner: opts.owner,
        cell,
        released: false,
        sync: opts.sync(),
    };
    if table::state().dead_end(opts) {
        // Taken, but its environment went away (or will run no JS again, for a hold that
        // waits for it): given back (Drop), nothing for the caller.
        return Err(FsError::Cancelled);
    }
    Ok(guard)
}

/// The error a failed acquisition reports.
fn failure(world: &RealWorld, file: &str, f: Failure) -> FsError {
    match f {
        Failure::Locked => FsError::Locked {
            file: file.to_string(),
        },
        Failure::Io { syscall, err } => world.error(syscall, err),
    }
}

/// [`super::acquire`]: the blocking driver.
pub fn acquire_blocking(file: &str, opts: LockOptions) -> Result<LockGuard, FsError> {
    // Kept until this acquisition is over: the refresh scheduler cannot end meanwhile.
    let _running = super::refresh::ensure_running().map_err(|why| {
        FsError::Internal(format!(
            "pi-native: the lock refresh thread could not start ({why})"
        ))
    })?;
    let (lock_path, target) = super::lock_path_for(file);
    let remote = remote_of(&lock_path, &opts);
    let world = RealWorld::new(lock_path.clone(), remote);
    let cell = take_turn(&lock_path, &target, &opts, world.clone())?;
    let mut acq = Acquire::new(setup(&lock_path, &opts, remote));
    let mut world = world;
    let outcome = run_blocking(&mut acq, &mut world, file, &target, &opts);
    finish(lock_path, target, &opts, cell, outcome)
}

fn run_blocking(
    acq: &mut Acquire,
    world: &mut RealWorld,
    file: &str,
    target: &str,
    opts: &LockOptions,
) -> Result<model::Held, FsError> {
    if table::state().dead_end(opts) {
        return Err(FsError::Cancelled);
    }
    let mut parent_checked = !opts.create_parent;
    let mut watch = Watch::off();
    let mut seen = 0;
    let mut step = acq.start(real::now(), &mut memory());
    loop {
        step = match step {
            Step::Call(op) => {
                let r = world.call(op);
                acq.next(r, real::now(), &mut memory())
            }
            Step::Sleep { .. } | Step::Done(Err(_)) if !parent_checked && missing_parent(acq) => {
                // The folder may be missing (or not a folder): mkdir -p it now, failing as the
                // original's mkdir -p before its lock would; then the attempt again, uncounted.
                parent_checked = true;
                if let Err(e) =
                    super::super::atomic_file::mkdir_p(&super::super::atomic_file::dirname(file))
                {
                    return abandon_blocking(acq, world, e);
                }
                acq.again(real::now(), &mut memory())
            }
            Step::Sleep { until } => {
                if !watch.on()
                    && acq.contended()
                    && acq.next_wait() >= WATCH_FROM_WAIT
                    && opts.retry != Retry::Once
                {
                    watch = Watch::start(&acq.setup().lock);
                    if watch.on() {
                        // The holder may have let go before the watch was set up.
                        seen = watch.removals();
                        let c = real::now();
                        step = acq.woke(c, &mut memory(), true);
                        continue;
                    }
                }
                match wait_blocking(opts.owner, until, &watch, seen) {
                    Wake::Cancelled => return abandon_blocking(acq, world, FsError::Cancelled),
                    Wake::Due => acq.woke(real::now(), &mut memory(), false),
                    Wake::Removed(n) => {
                        seen = n;
                        table::state().notified_attempts += 1;
                        acq.woke(real::now(), &mut memory(), true)
                    }
                }
            }
            Step::Done(Ok(h)) => return Ok(h),
            Step::Done(Err(f)) => return Err(failure(world, target, f)),
        };
    }
}

/// Whether the last attempt failed making the lock, in a way a missing folder explains.
fn missing_parent(acq: &Acquire) -> bool {
    matches!(
        acq.last_failure(),
        Some(Failure::Io {
            syscall: "mkdir",
            ..
        })
    )
}

/// Give up, removing what the acquisition made (its private directory), then report `e`.
fn abandon_blocking(
    acq: &mut Acquire,
    world: &mut RealWorld,
    e: FsError,
) -> Result<model::Held, FsError> {
    let mut step = acq.abandon();
    while let Step::Call(op) = step {
        let r = world.call(op);
        step = acq.next(r, real::now(), &mut memory());
    }
    Err(e)
}

enum Wake {
    /// The next scheduled attempt is due.
    Due,
    /// The lock directory was removed (this many removals seen): try now.
    Removed(u64),
    /// The caller's environment was torn down.
    Cancelled,
}

/// Wait until the monotonic instant `until` (of [`real::now`]), or until the watched lock is
/// seen removed, or until `owner`'s environment is torn down.
fn wait_blocking(owner: u64, until: Duration, watch: &Watch, seen: u64) -> Wake {
    let mut st = table::state();
    loop {
        if owner != 0 && st.torn_down.contains(&owner) {
            return Wake::Cancelled;
        }
        if watch.on() {
            drop(st);
            let n = watch.removals();
            if n > seen {
                return Wake::Removed(n);
            }
            st = table::state();
        }
        let now = real::now().mono;
        if now >= until {
            return Wake::Due;
        }
        st = table::sleep(st, until - now);
    }
}

/// Give `cell`'s lock back: look that it is still ours, remove it (L7), or remember it as an
/// orphan (L2a). Err(()) when it was not ours any more (ECOMPROMISED).
pub(crate) fn release_blocking(lock_path: &str, cell: &Cell) -> Result<(), ()> {
    let mut world = cell.world.clone();
    let mut next = {
        let mut h = cell.hold();
        let Some(h) = h.as_mut() else { return Ok(()) };
        let mut mem = memory();
        h.release_start(real::now(), Some((&mut mem, lock_path)))
    };
    loop {
        next = match next {
            Next::Call(op) => {
                let r = world.call(op);
                let mut h = cell.hold();
                let Some(h) = h.as_mut() else { return Ok(()) };
                let mut mem = memory();
                h.release_next(r, real::now(), Some((&mut mem, lock_path)))
            }
            Next::Backoff(d) => {
                std::thread::sleep(super::jittered(d));
                let mut h = cell.hold();
                let Some(h) = h.as_mut() else { return Ok(()) };
                h.release_resume(real::now())
            }
            Next::Done(r) => return r.map_err(|_| ()),
        };
    }
}

// ---- the async driver: timers, not parked threads -------------------------------------------

/// Where a lock's calls run ([`crate::lanes`]), and whether its folder is remote: known to the
/// caller, remembered, or learned on the looking lane (one `statfs`, off every thread that
/// matters; a folder not made yet is on its nearest folder's file system).
pub async fn lane_of(lock_path: &str, opts: &LockOptions) -> (crate::lanes::Lane, bool) {
    use crate::lanes::Lane;
    let dir = std::path::PathBuf::from(lock_path)
        .parent()
        .map_or_else(std::path::PathBuf::new, |p| p.to_path_buf());
    let known = match crate::platform::fs_kind::remembered(&dir) {
        Some(k) => Some(k),
        None => crate::lanes::run(Lane::Unknown, move || {
            crate::platform::fs_kind::learn_nearest(&dir)
        })
        .await
        .flatten(),
    };
    match (known, opts.remote) {
        (Some((dev, true)), _) => (Lane::Mount(dev), opts.remote.unwrap_or(true)),
        (Some((_, false)), r) => (Lane::Local, r.unwrap_or(false)),
        (None, r) => (Lane::Unknown, r.unwrap_or(false)),
    }
}

/// Make one call of `world` on `lane`.
async fn call_on(
    lane: crate::lanes::Lane,
    world: &RealWorld,
    op: super::world::Op,
) -> super::world::Reply {
    let mut w = world.clone();
    crate::lanes::run(lane, move || w.call(op))
        .await
        .unwrap_or(super::world::Reply::Failed(super::world::Errno {
            raw: 0,
            kind: super::world::ErrKind::Other,
        }))
}

/// [`acquire_blocking`] as a future: every wait (this process's own queue, the schedule, a
/// notified removal) is a timer or a notification, never a parked thread; every call runs on
/// the lock's lane. Thousands of waiters cost memory, not threads.
pub async fn acquire_async(file: String, opts: LockOptions) -> Result<LockGuard, FsError> {
    let _running = super::refresh::ensure_running().map_err(|why| {
        FsError::Internal(format!(
            "pi-native: the lock refresh thread could not start ({why})"
        ))
    })?;
    let (lock_path, target) = super::lock_path_for(&file);
    let (lane, remote) = lane_of(&lock_path, &opts).await;
    let world = RealWorld::new(lock_path.clone(), remote);
    let cell = take_turn_async(&lock_path, &target, &opts, world.clone()).await?;
    let mut acq = Acquire::new(setup(&lock_path, &opts, remote));
    let outcome = run_async(&mut acq, lane, &world, &file, &target, &opts).await;
    finish(lock_path, target, &opts, cell, outcome)
}

/// [`take_turn`], waiting on the table's notifier.
async fn take_turn_async(
    lock_path: &str,
    file: &str,
    opts: &LockOptions,
    world: RealWorld,
) -> Result<Arc<Cell>, FsError> {
    let budget = opts.retry.policy().budget();
    let start = Instant::now();
    let ticket = {
        let mut st = table::state();
        let t = st.next_ticket;
        st.next_ticket += 1;
        st.queues
            .entry(lock_path.to_string())
            .or_default()
            .push_back(t);
        t
    };
    let mut world = Some(world);
    loop {
        // Registered before the look: a change after it wakes this wait.
        let changed = table::table().notify.notified();
        let deadline = {
            let mut st = table::state();
            match turn(&mut st, lock_path, ticket, opts, &mut world) {
                Some(Ok(cell)) => return Ok(cell),
                Some(Err(())) => {
                    table::wake(st);
                    return Err(FsError::Cancelled);
                }
                None => {}
            }
            let deadline = table::turn_deadline(start, budget, opts.sync(), &st, lock_path);
            if Instant::now() >= deadline {
                leave_queue(&mut st, lock_path, ticket);
                table::wake(st);
                return Err(FsError::Locked {
                    file: file.to_string(),
                });
            }
            deadline
        };
        let _ =
            tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), changed).await;
    }
}

async fn run_async(
    acq: &mut Acquire,
    lane: crate::lanes::Lane,
    world: &RealWorld,
    file: &str,
    target: &str,
    opts: &LockOptions,
) -> Result<model::Held, FsError> {
    if table::state().dead_end(opts) {
        return Err(FsError::Cancelled);
    }
    let mut parent_checked = !opts.create_parent;
    let mut watch = Watch::off();
    let mut seen = 0;
    let mut step = acq.start(real::now(), &mut memory());
    loop {
        step = match step {
            Step::Call(op) => {
                let r = call_on(lane, world, op).await;
                acq.next(r, real::now(), &mut memory())
            }
            Step::Sleep { .. } | Step::Done(Err(_)) if !parent_checked && missing_parent(acq) => {
                parent_checked = true;
                let dir = super::super::atomic_file::dirname(file);
                let made =
                    crate::lanes::run(lane, move || super::super::atomic_file::mkdir_p(&dir)).await;
                match made {
                    Some(Ok(())) => acq.again(real::now(), &mut memory()),
                    Some(Err(e)) => return abandon_async(acq, lane, world, e).await,
                    None => {
                        let e = FsError::Internal(
                            "pi-native: internal failure in a worker thread".into(),
                        );
                        return abandon_async(acq, lane, world, e).await;
                    }
                }
            }
            Step::Sleep { until } => {
                if !watch.on()
                    && acq.contended()
                    && acq.next_wait() >= WATCH_FROM_WAIT
                    && opts.retry != Retry::Once
                {
                    watch = Watch::start(&acq.setup().lock);
                    if watch.on() {
                        seen = watch.removals();
                        step = acq.woke(real::now(), &mut memory(), true);
                        continue;
                    }
                }
                match wait_async(opts.owner, until, &watch, seen).await {
                    Wake::Cancelled => {
                        return abandon_async(acq, lane, world, FsError::Cancelled).await
                    }
                    Wake::Due => acq.woke(real::now(), &mut memory(), false),
                    Wake::Removed(n) => {
                        seen = n;
                        table::state().notified_attempts += 1;
                        acq.woke(real::now(), &mut memory(), true)
                    }
                }
            }
            Step::Done(Ok(h)) => return Ok(h),
            Step::Done(Err(f)) => return Err(failure(world, target, f)),
        };
    }
}

async fn abandon_async(
    acq: &mut Acquire,
    lane: crate::lanes::Lane,
    world: &RealWorld,
    e: FsError,
) -> Result<model::Held, FsError> {
    let mut step = acq.abandon();
    while let Step::Call(op) = step {
        let r = call_on(lane, world, op).await;
        step = acq.next(r, real::now(), &mut memory());
    }
    Err(e)
}

/// [`wait_blocking`] as a future: a timer, woken early by the table's notifier.
async fn wait_async(owner: u64, until: Duration, watch: &Watch, seen: u64) -> Wake {
    loop {
        let changed = table::table().notify.notified();
        if owner != 0 && table::state().torn_down.contains(&owner) {
            return Wake::Cancelled;
        }
        if watch.on() {
            let n = watch.removals();
            if n > seen {
                return Wake::Removed(n);
            }
        }
        let now = real::now().mono;
        if now >= until {
            return Wake::Due;
        }
        let _ = tokio::time::timeout(until - now, changed).await;
    }
}

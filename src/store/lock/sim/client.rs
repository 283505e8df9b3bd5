//! The simulated processes. Each runs a loop of counter increments under the entry's lock:
//! acquire, read the entry, write a temp file with the value + 1, publish it, release.
//!
//! - [`Native`] runs pi-native's own decisions: [`Acquire`](super::super::model::Acquire) and
//!   [`Hold`](super::super::hold::Hold), the very state machines production drives, with its
//!   refreshes on a second thread.
//! - [`Reference`] follows proper-lockfile 4.1.2's rules (SPEC §3.4), as a JavaScript process
//!   of an older host would: mtime identity, no fence, a crash when compromised.

use std::time::Duration;

use super::super::hold::{Hold, Next, State};
use super::super::memory::Memory;
use super::super::model::{self, Acquire, Policy, Rule, Setup, Step};
use super::super::world::{Clocks, ErrKind, Op, Reply, Which};
use super::fs::{Folder, Name};
use super::rng::Rng;

/// A simulated thread of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Thread {
    Main,
    Refresher,
}

/// What a thread is handed when it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    Start,
    Reply(Reply),
    Timer,
}

/// What a thread does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Call(Op),
    /// Until this monotonic instant of its machine.
    SleepMono(Duration),
    /// For this long.
    Sleep(Duration),
    /// The process ends (proper-lockfile's uncaught ECOMPROMISED).
    Die,
}

/// What the checker hears from a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Told {
    /// A publish (write number `n`) was reported done (Some(true)), not done (Some(false)),
    /// or of unknown outcome (None).
    Published { n: u64, ok: Option<bool> },
}

/// The world of one step.
pub struct Ctx<'a> {
    pub p: usize,
    pub c: Clocks,
    pub rng: &'a mut Rng,
    pub folder: &'a mut Folder,
    pub now: Duration,
    pub told: &'a mut Vec<Told>,
}

/// What the decisions of one run are given (the same for every native process).
#[derive(Debug, Clone, Copy)]
pub struct Params {
    pub rule: Rule,
    pub remote: bool,
    pub stale: Duration,
    pub mutations: model::Mutations,
}

#[derive(Debug)]
enum Main {
    Idle,
    Acquiring { acq: Box<Acquire>, fast: bool },
    Publishing { last: Op },
    Releasing,
}

/// A pi-native process.
#[derive(Debug)]
pub struct Native {
    params: Params,
    pub mem: Memory,
    pub hold: Option<Hold>,
    main: Main,
    /// Acquisitions and writes so far (they name its private directory and temp file).
    nacq: u64,
    pub nwrite: u64,
    /// The refresh in flight: its hold's acquisition and when it was sent.
    refresh: Option<(u64, Duration)>,
    /// The acquisition the current hold came from.
    hold_acq: u64,
}

impl Native {
    pub fn new(params: Params) -> Native {
        Native {
            params,
            mem: Memory::default(),
            hold: None,
            main: Main::Idle,
            nacq: 0,
            nwrite: 0,
            refresh: None,
            hold_acq: 0,
        }
    }

    /// What a path of the protocol names for this process now.
    pub fn resolve(&self, p: usize, w: Which) -> Name {
        match w {
            Which::Lock => Name::Lock,
            Which::Target => Name::Entry,
            Which::Pending => Name::Pending(p, self.nacq),
            Which::Temp => Name::Temp(p, self.nwrite),
        }
    }

    /// Whether it is acquiring now (a waiter).
    pub fn waiting(&self) -> bool {
        matches!(self.main, Main::Acquiring { .. } | Main::Idle)
    }

    pub fn step(&mut self, t: Thread, input: Input, x: &mut Ctx) -> Action {
        match t {
            Thread::Main => self.main(input, x),
            Thread::Refresher => self.refresher(input, x),
        }
    }

    fn refresher(&mut self, input: Input, x: &mut Ctx) -> Action {
        if let (Input::Reply(r), Some((gen, sent))) = (input, self.refresh.take()) {
            if gen == self.hold_acq {
                if let Some(h) = self.hold.as_mut() {
                    h.refresh_record(r, sent, x.c);
                }
            }
            return Action::Sleep(Duration::from_millis(250));
        }
        if let Some(h) = self.hold.as_mut() {
            if h.refresh_due(x.c) {
                if let Some(op) = h.refresh_op(x.c) {
                    self.refresh = Some((self.hold_acq, x.c.boot));
                    return Action::Call(op);
                }
            }
        }
        Action::Sleep(Duration::from_millis(250))
    }

    fn setup(&mut self, x: &mut Ctx, policy: Policy) -> Setup {
        Setup {
            rule: self.params.rule,
            remote: self.params.remote,
            stale: self.params.stale,
            policy,
            retry_eperm: false,
            token: model::new_token(x.rng.draw() as u32, x.rng.draw() as u32),
            lock: "L".into(),
            folder: "F".into(),
            mutations: self.params.mutations,
        }
    }

    fn main(&mut self, input: Input, x: &mut Ctx) -> Action {
        let main = std::mem::replace(&mut self.main, Main::Idle);
        match (main, input) {
            (Main::Idle, _) => {
                self.nacq += 1;
                let setup = self.setup(x, Policy::Once);
                let mut acq = Box::new(Acquire::new(setup));
                let step = acq.start(x.c, &mut self.mem);
                self.acquiring(acq, true, step, x)
            }
            (Main::Acquiring { mut acq, fast }, Input::Reply(r)) => {
                let step = acq.next(r, x.c, &mut self.mem);
                self.acquiring(acq, fast, step, x)
            }
            (Main::Acquiring { mut acq, fast }, _) => {
                let step = acq.woke(x.c, &mut self.mem, false);
                self.acquiring(acq, fast, step, x)
            }
            (Main::Publishing { last }, Input::Reply(r)) => {
                let next = self
                    .hold
                    .as_mut()
                    .map(|h| h.publish_next(Op::Rename, last, r, x.c));
                self.publishing(next, x)
            }
            (Main::Publishing { .. }, _) => {
                let next = self.hold.as_mut().map(|h| h.publish_resume(x.c));
                self.publishing(next, x)
            }
            (Main::Releasing, Input::Reply(r)) => {
                let mem = &mut self.mem;
                let next = self
                    .hold
                    .as_mut()
                    .map(|h| h.release_next(r, x.c, Some((mem, "L"))));
                self.releasing(next, x)
            }
            (Main::Releasing, _) => {
                let next = self.hold.as_mut().map(|h| h.release_resume(x.c));
                self.releasing(next, x)
            }
        }
    }

    fn acquiring(&mut self, acq: Box<Acquire>, fast: bool, step: Step, x: &mut Ctx) -> Action {
        match step {
            Step::Call(op) => {
                self.main = Main::Acquiring { acq, fast };
                Action::Call(op)
            }
            Step::Sleep { until } => {
                self.main = Main::Acquiring { acq, fast };
                Action::SleepMono(until)
            }
            Step::Done(Ok(held)) => {
                self.hold = Some(Hold::new(held, self.params.stale));
                self.hold_acq = self.nacq;
                // Under the lock: read the entry as the server has it, write value + 1.
                let value = x.folder.read_entry();
                self.nwrite += 1;
                x.folder.write_temp(x.p, self.nwrite, value + 1, x.now);
                let next = self.hold.as_mut().map(|h| h.publish_start(x.c));
                self.publishing(next, x)
            }
            // The fast path found it busy: the full policy.
            Step::Done(Err(_)) if fast => {
                let setup = self.setup(x, Policy::Async { retries: 10 });
                let mut acq = Box::new(Acquire::new(setup));
                let step = acq.start(x.c, &mut self.mem);
                self.acquiring(acq, false, step, x)
            }
            Step::Done(Err(_)) => {
                self.main = Main::Idle;
                Action::Sleep(x.rng.ms(0, 300))
            }
        }
    }

    fn publishing(&mut self, next: Option<Next>, x: &mut Ctx) -> Action {
        match next {
            Some(Next::Call(op)) => {
                self.main = Main::Publishing { last: op };
                Action::Call(op)
            }
            Some(Next::Backoff(d)) => {
                self.main = Main::Publishing { last: Op::Rename };
                Action::Sleep(d.mul_f64(0.5 + 0.5 * x.rng.unit()))
            }
            Some(Next::Done(r)) => {
                x.told.push(Told::Published {
                    n: self.nwrite,
                    ok: match r {
                        Ok(()) => Some(true),
                        Err(super::super::hold::Lost::Unknown { .. }) => None,
                        Err(_) => Some(false),
                    },
                });
                if r.is_err() {
                    x.folder.drop_temp(x.p, self.nwrite);
                }
                let mem = &mut self.mem;
                let next = self
                    .hold
                    .as_mut()
                    .map(|h| h.release_start(x.c, Some((mem, "L"))));
                self.releasing(next, x)
            }
            None => {
                self.main = Main::Idle;
                Action::Sleep(Duration::from_millis(1))
            }
        }
    }

    fn releasing(&mut self, next: Option<Next>, x: &mut Ctx) -> Action {
        match next {
            Some(Next::Call(op)) => {
                self.main = Main::Releasing;
                Action::Call(op)
            }
            Some(Next::Backoff(d)) => {
                self.main = Main::Releasing;
                Action::Sleep(d.mul_f64(0.5 + 0.5 * x.rng.unit()))
            }
            Some(Next::Done(_)) | None => {
                self.hold = None;
                self.main = Main::Idle;
                Action::Sleep(x.rng.ms(0, 200))
            }
        }
    }

    /// Whether this process believes it holds the lock, and its deadline has not passed.
    pub fn holds_live(&self, c: Clocks) -> bool {
        self.hold.as_ref().is_some_and(|h| {
            matches!(h.state, State::Held | State::Releasing)
                && h.deadline().is_some_and(|d| c.boot <= d)
        })
    }

    /// Whether it is acquiring now.
    pub fn is_acquiring(&self) -> bool {
        matches!(self.main, Main::Acquiring { .. })
    }

    /// Its hold, for a failure's report.
    pub fn hold_state(&self) -> String {
        format!("{:?}", self.hold)
    }

    /// Whether it would recognize `atime` as an orphan of its own.
    pub fn owns_orphan(&self, atime: i128) -> bool {
        self.mem.orphans.get(&"L".to_string()).is_some_and(|known| {
            known.iter().any(|o| match o {
                super::super::memory::Orphan::Token(t) => model::token_matches(*t, atime),
                super::super::memory::Orphan::Stamp(s) => s.atime == atime,
            })
        })
    }
}

#[derive(Debug, Clone, Copy)]
enum RMain {
    Idle,
    /// (attempt k, retake: staleness checks off)
    Mkdir {
        k: u32,
        retake: bool,
    },
    Probe {
        k: u32,
    },
    ProbeStat {
        k: u32,
    },
    PlainStat {
        k: u32,
    },
    Judge {
        k: u32,
    },
    Remove {
        k: u32,
    },
    Sleeping {
        k: u32,
    },
    Publishing,
    Releasing,
}

/// A JavaScript process with proper-lockfile 4.1.2 (realpath off, stale 2000, update 1000).
#[derive(Debug)]
pub struct Reference {
    stale: Duration,
    main: RMain,
    /// The mtime it set or read (ms), and when it last refreshed (wall ms): while held.
    pub held: Option<(i128, i128)>,
    /// The mtime of a refresh under way (ms), taken as its own once the call answers.
    setting: i128,
    /// Whole-second precision, once probed (the first acquisition of the process).
    precision_s: Option<bool>,
    pub nwrite: u64,
    refreshing: bool,
}

fn ms(ns: i128) -> i128 {
    ns.div_euclid(1_000_000)
}

impl Reference {
    pub fn new(stale: Duration) -> Reference {
        Reference {
            stale,
            main: RMain::Idle,
            held: None,
            setting: 0,
            precision_s: None,
            nwrite: 0,
            refreshing: false,
        }
    }

    pub fn resolve(&self, p: usize, w: Which) -> Name {
        match w {
            Which::Lock | Which::Pending => Name::Lock,
            Which::Target => Name::Entry,
            Which::Temp => Name::Temp(p, self.nwrite),
        }
    }

    pub fn step(&mut self, t: Thread, input: Input, x: &mut Ctx) -> Action {
        match t {
            Thread::Main => self.main(input, x),
            Thread::Refresher => self.refresher(input, x),
        }
    }

    /// proper-lockfile's updateLock: every second, stat; a foreign mtime (or the lock gone)
    /// is compromised, which the store does not catch: the process ends.
    fn refresher(&mut self, input: Input, x: &mut Ctx) -> Action {
        let second = Duration::from_millis(1000);
        let Some((mtime, last)) = self.held else {
            self.refreshing = false;
            return Action::Sleep(second);
        };
        let now = ms(x.c.wall);
        let over = last + (self.stale.as_millis() as i128) < now;
        match input {
            Input::Reply(Reply::Attrs(a)) if self.refreshing => {
                if ms(a.mtime) != mtime {
                    return Action::Die;
                }
                let set = if self.precision_s == Some(true) {
                    model::ceil_second(x.c.wall)
                } else {
                    ms(x.c.wall) * 1_000_000
                };
                self.setting = ms(set);
                Action::Call(Op::SetTimes {
                    which: Which::Lock,
                    atime: set,
                    mtime: set,
                })
            }
            Input::Reply(Reply::Done) if self.refreshing => {
                self.refreshing = false;
                let _ = mtime;
                self.held = Some((self.setting, now));
                Action::Sleep(second)
            }
            Input::Reply(Reply::Failed(e)) if self.refreshing => {
                self.refreshing = false;
                if e.kind == ErrKind::NotFound || over {
                    return Action::Die;
                }
                Action::Sleep(second)
            }
            _ => {
                self.refreshing = true;
                Action::Call(Op::Stat {
                    which: Which::Lock,
                    fresh: false,
                })
            }
        }
    }

    fn fail(&mut self, k: u32, x: &mut Ctx) -> Action {
        let policy = Policy::Async { retries: 10 };
        if k >= policy.attempts() {
            self.main = RMain::Idle;
            return Action::Sleep(x.rng.ms(0, 300));
        }
        self.main = RMain::Sleeping { k };
        Action::SleepMono(x.c.mono + policy.wait(k))
    }

    fn main(&mut self, input: Input, x: &mut Ctx) -> Action {
        use ErrKind::{Exists, NotFound};
        let mkdir = |k, retake| {
            (
                RMain::Mkdir { k, retake },
                Action::Call(Op::Mkdir(Which::Lock)),
            )
        };
        let (next, action) = match (self.main, input) {
            (RMain::Idle, _) => mkdir(1, false),
            (RMain::Sleeping { k, .. }, _) => mkdir(k + 1, false),
            (RMain::Mkdir { k, .. }, Input::Reply(Reply::Done)) => {
                if self.precision_s.is_none() {
                    let t = model::ceil_second(x.c.wall) + 5_000_000;
                    (
                        RMain::Probe { k },
                        Action::Call(Op::SetTimes {
                            which: Which::Lock,
                            atime: t,
                            mtime: t,
                        }),
                    )
                } else {
                    (
                        RMain::PlainStat { k },
                        Action::Call(Op::Stat {
                            which: Which::Lock,
                            fresh: false,
                        }),
                    )
                }
            }
            (RMain::Mkdir { k, retake: false }, Input::Reply(Reply::Failed(e)))
                if e.kind == Exists =>
            {
                (
                    RMain::Judge { k },
                    Action::Call(Op::Stat {
                        which: Which::Lock,
                        fresh: false,
                    }),
                )
            }
            (RMain::Mkdir { k, .. }, _) => return self.fail(k, x),
            (RMain::Probe { k }, Input::Reply(Reply::Done)) => (
                RMain::ProbeStat { k },
                Action::Call(Op::Stat {
                    which: Which::Lock,
                    fresh: false,
                }),
            ),
            (RMain::ProbeStat { .. }, Input::Reply(Reply::Attrs(a))) => {
                self.precision_s = Some(ms(a.mtime) % 1000 == 0);
                return self.acquired(ms(a.mtime), x);
            }
            (RMain::PlainStat { k: _ }, Input::Reply(Reply::Attrs(a))) => {
                return self.acquired(ms(a.mtime), x)
            }
            // A failed probe removes the directory and reports the error.
            (RMain::Probe { k } | RMain::ProbeStat { k } | RMain::PlainStat { k }, _) => (
                RMain::Remove { k: k + 100 },
                Action::Call(Op::Rmdir(Which::Lock)),
            ),
            (RMain::Judge { k }, Input::Reply(Reply::Attrs(a))) => {
                if a.mtime < x.c.wall - self.stale.as_nanos() as i128 {
                    (RMain::Remove { k }, Action::Call(Op::Rmdir(Which::Lock)))
                } else {
                    return self.fail(k, x);
                }
            }
            (RMain::Judge { k }, Input::Reply(Reply::Failed(e))) if e.kind == NotFound => {
                mkdir(k, true)
            }
            (RMain::Judge { k }, _) => return self.fail(k, x),
            (RMain::Remove { k }, _) if k > 100 => return self.fail(k - 100, x),
            (RMain::Remove { k }, Input::Reply(Reply::Done)) => mkdir(k, true),
            (RMain::Remove { k }, Input::Reply(Reply::Failed(e))) if e.kind == NotFound => {
                mkdir(k, true)
            }
            (RMain::Remove { k }, _) => return self.fail(k, x),
            (RMain::Publishing, Input::Reply(r)) => {
                x.told.push(Told::Published {
                    n: self.nwrite,
                    ok: Some(r == Reply::Done),
                });
                if r != Reply::Done {
                    x.folder.drop_temp(x.p, self.nwrite);
                }
                (RMain::Releasing, Action::Call(Op::Rmdir(Which::Lock)))
            }
            (RMain::Releasing, Input::Reply(_)) => {
                self.held = None;
                (RMain::Idle, Action::Sleep(x.rng.ms(0, 200)))
            }
            (m, _) => (m, Action::Sleep(Duration::from_millis(1))),
        };
        self.main = next;
        action
    }

    fn acquired(&mut self, mtime: i128, x: &mut Ctx) -> Action {
        self.held = Some((mtime, ms(x.c.wall)));
        let value = x.folder.read_entry();
        self.nwrite += 1;
        x.folder.write_temp(x.p, self.nwrite, value + 1, x.now);
        // No fence: proper-lockfile's holder publishes whatever happened meanwhile.
        self.main = RMain::Publishing;
        Action::Call(Op::Rename)
    }

    /// Whether it believes it holds the lock.
    pub fn holds(&self) -> bool {
        self.held.is_some()
    }
}

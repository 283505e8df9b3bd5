//! Acquiring a lock (L2–L3, B17/B18), as a state machine over [`super::world`]: each step
//! names one file-system call, or a wait of the retry schedule, and is handed what came back.
//! No I/O and no clock of its own, so production (sync and async drivers, [`super::drive`]) and
//! the simulator run exactly this code.
//!
//! The protocol on disk is proper-lockfile's (SPEC §3.4): the lock is the directory
//! `<target>.lock`, made atomically, stale once its mtime is older than the threshold (local
//! rule) or once seen unchanged for the threshold plus the attribute-cache bound (network rule,
//! L10b); a takeover is `rmdir` + one more try (L10c). What a native holder adds (L2b):
//!
//! - **A token nobody can predict.** Every lock a native makes carries a random atime (the
//!   token) set right after it is made (proper-lockfile looks only at the mtime). The holder
//!   recognizes its lock by that token alone, so neither a refresh in flight nor a
//!   whole-second server that gives a successor the same mtime can confuse it.
//! - **A reply lost is never answered by repeating the call by path.** On a network or FUSE
//!   folder a failure may come after the work was done. A lock is prepared under a private
//!   name (a random UUID) and moved to the lock path with a rename that refuses to replace
//!   (where the folder can), so a lost reply is resolved by looking at the private name; a
//!   lock path whose `mkdir` answered such an error is never claimed (it may be another's).
//! - **A lock is never removed on a guess.** Only a lock judged stale by the rule, or a
//!   directory of ours recognized by its token, is removed.

use std::time::Duration;

use super::memory::{Memory, Orphan, Sight};
use super::world::{Attrs, Clocks, ErrKind, Errno, Op, Reply, Which};

mod judge;
mod terms;

pub use terms::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum S {
    /// Learning what a network folder's file system keeps (once per folder): the private
    /// directory made, its times set, read back.
    ProbeMkdir,
    ProbeTimes,
    ProbeStat,
    PMkdir,
    PMkdirLook(Errno),
    PTimes,
    PCheck(Errno),
    PRename,
    PRenameLook(Errno),
    PDropThenPlain,
    Mkdir,
    MkdirLook(Errno),
    Times,
    /// Looking at a directory whose times could not be set, before removing it.
    TimesFailed(Failure),
    /// Reading back what was made; the error of its `utimensat` if that went unanswered.
    Verify(Option<Errno>),
    /// Removing the directory of a set-up that failed (the n-th try).
    Cleanup(Failure, u32),
    CleanupLook(Failure, u32),
    Judge,
    Takeover {
        reclaim: bool,
    },
    Sleeping,
    Finishing(Failure),
    Over,
}

/// A look at a lock found there is acted on only if it answered within this.
const LOOK_FRESH: Duration = Duration::from_millis(500);

/// A removal of our own set-up's directory is tried again (after looking that it is still
/// ours) only this long before others may judge it stale.
const MARGIN: Duration = Duration::from_millis(500);

fn utime(err: Errno) -> Failure {
    Failure::Io {
        syscall: "utime",
        err,
    }
}

fn failed(syscall: &'static str, err: Errno) -> Failure {
    Failure::Io { syscall, err }
}

/// One acquisition: attempts on the schedule of its [`Policy`].
#[derive(Debug)]
pub struct Acquire {
    setup: Setup,
    s: S,
    /// The scheduled attempt under way (1-based).
    k: u32,
    /// The attempt under way is an extra one (a removal was notified).
    extra: bool,
    errors: Vec<Failure>,
    /// Monotonic instant the last scheduled attempt failed (its wait counts from there).
    failed_at: Duration,
    /// The private directory exists (made, not yet moved).
    pending: bool,
    /// This attempt's one more try after a takeover or a release seen (no staleness checks).
    retake: bool,
    /// The mtime this set-up set, and when it was sent (boot clock).
    set_mtime: i128,
    sent_at: Duration,
    /// When the directory now at the lock path got its mtime at the latest: its `mkdir` (plain
    /// path) or its times as a private directory (boot clock). Until this plus the threshold
    /// nobody may take it over (L10b), so a look at it answered before then still holds.
    made_at: Duration,
    /// When the look that judges a lock found there was sent (monotonic).
    look_sent: Duration,
    /// The orphan of ours being removed.
    reclaiming: Option<Orphan>,
    /// The directory made, as last seen (for recognizing it later if it stays).
    seen: Option<Attrs>,
    /// The folder's file system was probed by this acquisition (or needs no probe).
    probed: bool,
}

impl Acquire {
    /// A new acquisition; `start` makes its first step.
    pub fn new(setup: Setup) -> Acquire {
        Acquire {
            setup,
            s: S::Over,
            k: 1,
            extra: false,
            errors: Vec::new(),
            failed_at: Duration::ZERO,
            pending: false,
            retake: false,
            set_mtime: 0,
            sent_at: Duration::ZERO,
            made_at: Duration::ZERO,
            look_sent: Duration::ZERO,
            reclaiming: None,
            seen: None,
            probed: false,
        }
    }

    /// What this acquisition was given.
    pub fn setup(&self) -> &Setup {
        &self.setup
    }

    /// The first attempt's first step.
    pub fn start(&mut self, c: Clocks, mem: &mut Memory) -> Step {
        self.begin(c, mem)
    }

    /// After a [`Step::Sleep`]: the next scheduled attempt (`early`: an extra one, for a
    /// removal the driver was told of).
    pub fn woke(&mut self, c: Clocks, mem: &mut Memory, early: bool) -> Step {
        if self.s != S::Sleeping {
            return self.over_with_last();
        }
        if early {
            self.extra = true;
        } else {
            self.k += 1;
        }
        self.begin(c, mem)
    }

    /// While sleeping: give up now (the caller's environment went away). The private
    /// directory is removed if one was made; then `Done(Err(last error))`.
    pub fn abandon(&mut self) -> Step {
        let f = self.errors.last().copied().unwrap_or(Failure::Locked);
        self.finish(f)
    }

    /// The token of the directory being made, and since when (boot clock) nobody may take it
    /// over, while an attempt is under way.
    pub fn making(&self) -> Option<(i128, Duration)> {
        (self.s != S::Sleeping && self.s != S::Over).then_some((self.setup.token, self.made_at))
    }

    /// The failure of the last attempt, if any.
    pub fn last_failure(&self) -> Option<Failure> {
        self.errors.last().copied()
    }

    /// Try the failed attempt again, uncounted, its failure forgotten: after the driver made
    /// the target's missing folder (the store's "mkdir -p, then lock", B13).
    pub fn again(&mut self, c: Clocks, mem: &mut Memory) -> Step {
        self.errors.pop();
        self.extra = true;
        self.s = S::Sleeping;
        self.begin(c, mem)
    }

    /// Whether the last failure was contention (ELOCKED): a driver watches for the lock's
    /// removal only then.
    pub fn contended(&self) -> bool {
        self.errors.last() == Some(&Failure::Locked)
    }

    /// The wait the schedule makes after the attempt under way.
    pub fn next_wait(&self) -> Duration {
        self.setup.policy.wait(self.k)
    }

    fn begin(&mut self, c: Clocks, mem: &mut Memory) -> Step {
        self.retake = false;
        self.seen = None;
        let folder = mem.folder(&self.setup.folder);
        if self.setup.remote
            && !self.probed
            && (folder.tokens.is_none() || folder.whole_seconds.is_none())
        {
            // Before judging anybody's lock there: whether the folder keeps atimes (tokens)
            // and sub-second mtimes, learned on a private directory.
            self.probed = true;
            return if self.pending {
                self.probe_times(c)
            } else {
                self.call(S::ProbeMkdir, Op::Mkdir(Which::Pending))
            };
        }
        self.proceed(c, mem)
    }

    /// The attempt proper: the private directory's times and the rename, or `mkdir`.
    fn proceed(&mut self, c: Clocks, mem: &mut Memory) -> Step {
        if self.pending {
            self.times(Which::Pending, c, mem)
        } else if self.renames(mem) {
            self.call(S::PMkdir, Op::Mkdir(Which::Pending))
        } else {
            self.mkdir(c)
        }
    }

    /// The probe's times: the token, and an mtime with a sub-second part.
    fn probe_times(&mut self, c: Clocks) -> Step {
        self.set_mtime = if c.wall.rem_euclid(1_000_000_000) == 0 {
            c.wall + 1
        } else {
            c.wall
        };
        self.call(
            S::ProbeTimes,
            Op::SetTimes {
                which: Which::Pending,
                atime: self.setup.token,
                mtime: self.set_mtime,
            },
        )
    }

    /// After the probe (learned or not): on with the attempt, the private directory (if it
    /// was made) used or removed.
    fn probed(&mut self, c: Clocks, mem: &mut Memory) -> Step {
        if self.pending && !self.renames(mem) {
            self.pending = false;
            return self.call(S::PDropThenPlain, Op::Rmdir(Which::Pending));
        }
        self.proceed(c, mem)
    }

    /// `mkdir` at the lock path, remembering when it was sent.
    fn mkdir(&mut self, c: Clocks) -> Step {
        self.made_at = c.boot;
        self.call(S::Mkdir, Op::Mkdir(Which::Lock))
    }

    /// Whether locks are prepared under a private name and moved into place here.
    fn renames(&self, mem: &Memory) -> bool {
        self.setup.remote
            && mem.folder(&self.setup.folder).noreplace != Some(false)
            && !self.setup.mutations.no_private_name
    }

    fn call(&mut self, s: S, op: Op) -> Step {
        self.s = s;
        Step::Call(op)
    }

    /// Set the times of a directory being made: the token as atime, now (rounded up on a
    /// whole-second folder) as mtime.
    fn times(&mut self, which: Which, c: Clocks, mem: &Memory) -> Step {
        let whole = mem.folder(&self.setup.folder).whole_seconds == Some(true);
        self.set_mtime = if whole { ceil_second(c.wall) } else { c.wall };
        self.sent_at = c.boot;
        if which == Which::Pending {
            self.made_at = c.boot;
        }
        let s = if which == Which::Pending {
            S::PTimes
        } else {
            S::Times
        };
        self.call(
            s,
            Op::SetTimes {
                which,
                atime: self.setup.token,
                mtime: self.set_mtime,
            },
        )
    }

    fn stat(&mut self, s: S, which: Which) -> Step {
        self.call(s, Op::Stat { which, fresh: true })
    }

    /// The reply to the last [`Step::Call`].
    pub fn next(&mut self, r: Reply, c: Clocks, mem: &mut Memory) -> Step {
        use ErrKind::{Exists, NotFound, Unknown, Unsupported};
        match (self.s, r) {
            // ---- what the folder keeps (once per folder, network folders) ----
            (S::ProbeMkdir, Reply::Done) => {
                self.pending = true;
                self.probe_times(c)
            }
            (S::ProbeMkdir, Reply::Failed(e)) if e.kind == Exists => {
                self.pending = true;
                self.probe_times(c)
            }
            (S::ProbeMkdir, Reply::Failed(e)) => self.fail(failed("mkdir", e), c),
            (S::ProbeTimes, Reply::Done) => self.call(
                S::ProbeStat,
                Op::Stat {
                    which: Which::Pending,
                    fresh: true,
                },
            ),
            // Unlearned this time: the attempt goes on (learned at a later one).
            (S::ProbeTimes, _) => self.probed(c, mem),
            (S::ProbeStat, Reply::Attrs(a)) => {
                let tokens = token_matches(self.setup.token, a.atime);
                let whole = a.mtime.rem_euclid(1_000_000_000) == 0;
                mem.learn(&self.setup.folder, |f| {
                    f.tokens = Some(tokens);
                    f.whole_seconds = Some(whole);
                });
                self.probed(c, mem)
            }
            (S::ProbeStat, _) => self.probed(c, mem),

            // ---- prepared under a private name, moved into place (network folders) ----
            (S::PMkdir, Reply::Done) => self.pending_made(c, mem),
            (S::PMkdir, Reply::Failed(e)) => match e.kind {
                // Only a lost reply of ours can have made a name nobody else knows.
                Exists => self.pending_made(c, mem),
                Unknown => self.stat(S::PMkdirLook(e), Which::Pending),
                _ => self.fail(failed("mkdir", e), c),
            },
            (S::PMkdirLook(_), Reply::Attrs(_)) => self.pending_made(c, mem),
            (S::PMkdirLook(e), _) => self.fail(failed("mkdir", e), c),
            (S::PTimes, Reply::Done) => self.call(S::PRename, Op::RenameNoReplace),
            (S::PTimes, Reply::Failed(e)) => match e.kind {
                Unknown => self.stat(S::PCheck(e), Which::Pending),
                NotFound => {
                    self.pending = false; // not there any more: made again next attempt
                    self.fail(utime(e), c)
                }
                _ => self.fail(utime(e), c),
            },
            (S::PCheck(e), Reply::Attrs(a)) => {
                if token_matches(self.setup.token, a.atime) && same_time(self.set_mtime, a.mtime) {
                    self.call(S::PRename, Op::RenameNoReplace)
                } else {
                    self.fail(utime(e), c)
                }
            }
            (S::PCheck(e), _) => self.fail(utime(e), c),
            (S::PRename, Reply::Done) => {
                self.pending = false;
                self.stat(S::Verify(None), Which::Lock)
            }
            (S::PRename, Reply::Failed(e)) => match e.kind {
                Exists => self.judge_or_locked(c),
                Unsupported => {
                    mem.learn(&self.setup.folder, |f| f.noreplace = Some(false));
                    self.pending = false;
                    self.call(S::PDropThenPlain, Op::Rmdir(Which::Pending))
                }
                Unknown => self.stat(S::PRenameLook(e), Which::Pending),
                NotFound => {
                    self.pending = false;
                    self.fail(failed("rename", e), c)
                }
                ErrKind::Other => self.fail(failed("rename", e), c),
            },
            (S::PRenameLook(_), Reply::Failed(x)) if x.kind == NotFound => {
                // Gone from its private name: the rename was made.
                self.pending = false;
                self.stat(S::Verify(None), Which::Lock)
            }
            // Made or not, nobody can say now: if it was, the lock there carries our token,
            // so it is remembered as a possible orphan of ours (recognizing it is no guess).
            (S::PRenameLook(e), _) => self.orphaned(failed("rename", e), c, mem),
            (S::PDropThenPlain, _) => self.mkdir(c),

            // ---- made at the lock path (local folders, and where the rename cannot) ----
            // Answered so late that it may have been taken over meanwhile: never touched by
            // path (it may be another's now); one of ours left there goes by the stale rule.
            (S::Mkdir, Reply::Done) if self.late(c) => self.fail(Failure::Locked, c),
            (S::Mkdir, Reply::Done) => self.times(Which::Lock, c, mem),
            (S::Mkdir, Reply::Failed(e)) => match e.kind {
                Exists => self.judge_or_locked(c),
                Unknown if self.setup.remote => {
                    self.look_sent = c.mono;
                    self.stat(S::MkdirLook(e), Which::Lock)
                }
                _ => self.fail(failed("mkdir", e), c),
            },
            // Made by us or by another: nobody can tell, so it is never claimed. Judged like
            // any lock there (one of ours is taken over by the stale rule).
            (S::MkdirLook(_), Reply::Attrs(a)) if !self.retake => self.judge(a, c, mem),
            (S::MkdirLook(_), Reply::Attrs(_)) => self.fail(Failure::Locked, c),
            (S::MkdirLook(e), _) => self.fail(failed("mkdir", e), c),
            (S::Times, Reply::Done) => self.stat(S::Verify(None), Which::Lock),
            (S::Times, Reply::Failed(e)) => match e.kind {
                Unknown => self.stat(S::Verify(Some(e)), Which::Lock),
                // Gone before it was stamped: removed by the one process that may remove a
                // lock it does not hold, a stale taker racing ours (L3's check-then-remove).
                // Contention, retried on the schedule (the sync policy too; COMPATIBILITY.md).
                NotFound => self.fail(Failure::Locked, c),
                // Ours, untouched: seen first, to be recognized if its removal fails too.
                _ => self.stat(S::TimesFailed(utime(e)), Which::Lock),
            },
            (S::TimesFailed(f), Reply::Attrs(a)) => {
                self.seen = Some(a);
                self.cleanup(f)
            }
            (S::TimesFailed(f), _) => self.cleanup(f),

            // ---- read back what was made ----
            (S::Verify(times), Reply::Attrs(a)) => self.verify(a, times, c, mem),
            // Gone before it was read back: taken the same way, contention as well.
            (S::Verify(_), Reply::Failed(e)) if e.kind == NotFound => self.fail(Failure::Locked, c),
            // Unreadable: removed while surely still ours; too late for that, remembered by
            // its token in case it is there (recognizing it later is no guess).
            (S::Verify(_), Reply::Failed(e)) if self.late(c) => {
                self.orphaned(failed("stat", e), c, mem)
            }
            (S::Verify(_), Reply::Failed(e)) => self.cleanup(failed("stat", e)),

            // ---- a set-up that failed takes its directory back ----
            (S::Cleanup(f, _), Reply::Done) => self.fail(f, c),
            (S::Cleanup(f, n), Reply::Failed(e)) => match e.kind {
                NotFound => self.fail(f, c),
                Unknown => self.stat(S::CleanupLook(f, n), Which::Lock),
                _ => self.orphaned(f, c, mem),
            },
            (S::CleanupLook(f, n), Reply::Attrs(a)) => {
                if !token_matches(self.setup.token, a.atime) {
                    // Removed (and maybe another's now), or ours but never tokened: not ours
                    // to recognize, the stale rule takes it.
                    self.fail(f, c)
                } else if n < 3 && c.boot + MARGIN < self.made_at + self.setup.stale {
                    self.call(S::Cleanup(f, n + 1), Op::Rmdir(Which::Lock))
                } else {
                    self.orphaned(f, c, mem)
                }
            }
            (S::CleanupLook(f, _), Reply::Failed(e)) if e.kind == NotFound => self.fail(f, c),
            (S::CleanupLook(f, _), _) => self.orphaned(f, c, mem),

            // ---- an existing lock ----
            (S::Judge, Reply::Attrs(a)) => self.judge(a, c, mem),
            // Released meanwhile: one more try, no staleness checks.
            (S::Judge, Reply::Failed(e)) if e.kind == NotFound => self.retake(c, mem),
            (S::Judge, Reply::Failed(e)) => self.fail(failed("stat", e), c),
            (S::Takeover { reclaim }, Reply::Done) => self.taken_over(reclaim, c, mem),
            (S::Takeover { reclaim }, Reply::Failed(e)) if e.kind == NotFound => {
                self.taken_over(reclaim, c, mem)
            }
            // Unanswered or refused: never repeated by path; the next attempt judges afresh.
            (S::Takeover { .. }, Reply::Failed(e)) => self.fail(failed("rmdir", e), c),

            (S::Finishing(f), _) => self.done_with(f),
            // A reply that does not fit the state (a driver's mistake): fail safe.
            _ => self.over_with_last(),
        }
    }

    fn pending_made(&mut self, c: Clocks, mem: &mut Memory) -> Step {
        self.pending = true;
        self.times(Which::Pending, c, mem)
    }

    fn judge_or_locked(&mut self, c: Clocks) -> Step {
        if self.retake {
            return self.fail(Failure::Locked, c);
        }
        self.look_sent = c.mono;
        let fresh = matches!(self.setup.rule, Rule::Network { .. });
        self.call(
            S::Judge,
            Op::Stat {
                which: Which::Lock,
                fresh,
            },
        )
    }

    fn cleanup(&mut self, f: Failure) -> Step {
        self.call(S::Cleanup(f, 1), Op::Rmdir(Which::Lock))
    }

    /// A directory of ours that could not be removed: remembered by its token (L2a), so the
    /// next attempt that finds it removes it instead of waiting it out.
    fn orphaned(&mut self, f: Failure, c: Clocks, mem: &mut Memory) -> Step {
        if !self.setup.mutations.forget_orphans {
            // Tokened (or maybe, when a call went unanswered): by the token. Never tokened but
            // seen right after it was made: by that stamp.
            let o = match self.seen.take() {
                Some(a) if !token_matches(self.setup.token, a.atime) => Orphan::Stamp(a),
                _ => Orphan::Token(self.setup.token),
            };
            mem.orphan(&self.setup.lock, o);
        }
        self.fail(f, c)
    }

    /// The attempt failed with `f`: wait for the next one, or end.
    fn fail(&mut self, f: Failure, c: Clocks) -> Step {
        self.errors.push(f);
        let retryable = match self.setup.policy {
            Policy::Async { .. } => true,
            Policy::Sync { .. } => match f {
                Failure::Locked => true,
                Failure::Io { err, .. } => self.setup.retry_eperm && is_eperm(err.raw),
            },
            Policy::Once => false,
        };
        if !retryable || self.k >= self.setup.policy.attempts() {
            let last = match self.setup.policy {
                Policy::Async { .. } => most_frequent(&self.errors),
                _ => f,
            };
            return self.finish(last);
        }
        // An extra (early) attempt leaves the schedule where it was.
        if !std::mem::take(&mut self.extra) {
            self.failed_at = c.mono;
        }
        self.s = S::Sleeping;
        Step::Sleep {
            until: self.failed_at + self.setup.policy.wait(self.k),
        }
    }

    fn finish(&mut self, f: Failure) -> Step {
        if self.pending {
            self.pending = false;
            return self.call(S::Finishing(f), Op::Rmdir(Which::Pending));
        }
        self.done_with(f)
    }

    fn done_with(&mut self, f: Failure) -> Step {
        self.s = S::Over;
        Step::Done(Err(f))
    }

    fn over_with_last(&mut self) -> Step {
        let f = self.errors.last().copied().unwrap_or(Failure::Locked);
        self.done_with(f)
    }
}

#[cfg(unix)]
fn is_eperm(raw: i32) -> bool {
    raw == libc::EPERM
}

#[cfg(windows)]
fn is_eperm(raw: i32) -> bool {
    raw == 5 // ERROR_ACCESS_DENIED, libuv's EPERM
}

/// The most frequent failure; ties go to the latest (B17).
pub fn most_frequent(errors: &[Failure]) -> Failure {
    let mut best: Option<(usize, Failure)> = None;
    for e in errors {
        let count = errors.iter().filter(|x| *x == e).count();
        if best.is_none_or(|(c, _)| count >= c) {
            best = Some((count, *e));
        }
    }
    best.map_or(Failure::Locked, |(_, e)| e)
}

#[cfg(test)]
mod tests;

//! A lock while held, as state machines over [`super::world`]: its refresh (L5/L10d), the
//! fence a publish passes (a write is published only while the lock is verifiably ours), the
//! publish itself, and the release (L7, W-B4, L2c). Like [`super::model`], no I/O and no clock
//! of its own.
//!
//! The holder is told its lock is lost no later than the moment another process may judge it
//! stale: its last successful refresh (boot clock, which counts suspended time) plus the
//! threshold. From then on nothing is published under it.

use std::time::Duration;

use super::memory::Memory;
use super::model::{Held, Ident};
use super::world::{Attrs, Clocks, ErrKind, Errno, Op, Reply, Which};

/// Where a hold stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Held,
    /// Being given back: still refreshed (a release that waits out a network client's error
    /// window must not let its lock go stale meanwhile), never published under.
    Releasing,
    /// Not ours any more (taken over, removed: `left` false), or possibly not (no successful
    /// refresh within the threshold: `left` true, the directory as we last set it may still
    /// be there, and the release removes it if so, L2c).
    Lost {
        left: bool,
    },
    Released,
}

/// A held lock, as its holder knows it.
#[derive(Debug, Clone)]
pub struct Hold {
    pub held: Held,
    pub stale: Duration,
    pub state: State,
    /// A refresh is between its call and its record: under [`Ident::Stamp`] its touch may
    /// have landed already, so the directory may carry a newer mtime than `held` says.
    pub touching: bool,
    /// Removals tried by the release (each after looking that the lock is still ours).
    removals: u32,
    /// The release's step under way.
    release: R,
    /// Publishing: the retries of an unanswered rename or removal, and since when; the look
    /// that tells whether an unanswered one was made, while it is being made again.
    publish_tries: u32,
    publish_since: Duration,
    publish_look: Option<Op>,
}

/// A refresh is due once the last is this old (L10d asks for at least every 1000 ms; sooner
/// leaves more of the threshold to a refresh that is slow to complete).
pub const REFRESH_AFTER: Duration = Duration::from_millis(500);

/// A publish or release whose call went unanswered is looked at and tried again for this
/// long, as transient refusals are (smbnetfs answers EIO for 3 s after a failed request).
pub const RETRY_WITHIN: Duration = Duration::from_millis(6000);

/// Looks of a release before a lock of ours that will not go is left as an orphan.
const MAX_REMOVALS: u32 = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum R {
    Idle,
    Look,
    Remove,
    Recheck,
    Again,
}

/// What a fence found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fence {
    /// Ours: publish now.
    Ours,
    /// Not ours (or past its deadline): nothing is published, ECOMPROMISED.
    Lost,
    /// Unsure for now (a refresh in flight may have moved a stamp; a transient error): look
    /// again after this wait.
    Again(Duration),
}

/// What a publish or release driver does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    Call(Op),
    /// Wait up to this long (a driver may shorten it at random), then `resume`.
    Backoff(Duration),
    /// Published (or released): Ok; or the failure to report.
    Done(Result<(), Lost>),
}

/// Why a publish or release did not happen as asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lost {
    /// The lock was not ours any more (ECOMPROMISED): nothing was published.
    Compromised,
    /// The call failed (its syscall and error): nothing was published.
    Io { syscall: &'static str, err: Errno },
    /// The call went unanswered and the file system would not say, within the retries,
    /// whether it was made (its syscall and the error it answered).
    Unknown { syscall: &'static str, err: Errno },
}

impl Hold {
    /// A lock just acquired ([`super::model::Acquire`]).
    pub fn new(held: Held, stale: Duration) -> Hold {
        Hold {
            held,
            stale,
            state: State::Held,
            touching: false,
            removals: 0,
            release: R::Idle,
            publish_tries: 0,
            publish_since: Duration::ZERO,
            publish_look: None,
        }
    }

    /// The instant (boot clock) from which another process may judge it stale, while ours.
    pub fn deadline(&self) -> Option<Duration> {
        matches!(self.state, State::Held | State::Releasing)
            .then(|| self.held.refreshed + self.stale)
    }

    /// Marks the lock lost once its deadline has passed; whether it is still ours.
    pub fn check_deadline(&mut self, c: Clocks) -> bool {
        match self.deadline() {
            Some(d) if c.boot > d => {
                self.state = State::Lost { left: true };
                false
            }
            Some(_) => true,
            None => false,
        }
    }

    fn stat(&self) -> Op {
        Op::Stat {
            which: Which::Lock,
            fresh: self.held.remote,
        }
    }

    // ---- refresh -----------------------------------------------------------------------

    /// Whether a refresh is due now.
    pub fn refresh_due(&self, c: Clocks) -> bool {
        matches!(self.state, State::Held | State::Releasing)
            && !self.touching
            && c.boot >= self.held.refreshed + REFRESH_AFTER
    }

    /// Start a refresh: the call to make, or None when the lock is not ours to refresh (or
    /// just turned lost by its deadline). The caller records the reply with
    /// [`Hold::refresh_record`], handing back `c.boot` as `sent`.
    pub fn refresh_op(&mut self, c: Clocks) -> Option<Op> {
        if !self.check_deadline(c) {
            return None;
        }
        self.touching = true;
        let mtime = if self.held.whole_seconds {
            super::model::ceil_second(c.wall)
        } else {
            c.wall
        };
        Some(Op::Touch {
            ident: self.held.ident,
            mtime,
        })
    }

    /// What a refresh found. A refresh that failed is tried again at the next tick, until the
    /// deadline passes without success (L5).
    pub fn refresh_record(&mut self, r: Reply, sent: Duration, c: Clocks) {
        self.touching = false;
        if !matches!(self.state, State::Held | State::Releasing) {
            return;
        }
        match r {
            Reply::Attrs(a) => {
                self.held.refreshed = sent;
                if let Ident::Stamp { dev, ino, .. } = self.held.ident {
                    self.held.ident = Ident::Stamp {
                        dev,
                        ino,
                        mtime: a.mtime,
                    };
                }
            }
            // A release in flight may have removed it already: that is the release's to tell.
            Reply::NotOurs if self.state == State::Releasing => {}
            Reply::NotOurs => self.state = State::Lost { left: false },
            _ => {
                self.check_deadline(c);
            }
        }
    }

    // ---- fence and publish -------------------------------------------------------------

    /// The look a fence makes, or None when the lock is already known lost (or its deadline
    /// passed: from then on another process may judge it stale).
    pub fn fence_op(&mut self, c: Clocks) -> Option<Op> {
        (self.state == State::Held && self.check_deadline(c)).then(|| self.stat())
    }

    /// What the fence's look found.
    pub fn fence_judge(&mut self, r: Reply, c: Clocks) -> Fence {
        // The look answered now: if the deadline passed while it was under way, another
        // process may have judged the lock stale after the look was made.
        if !self.check_deadline(c) {
            return Fence::Lost;
        }
        match r {
            Reply::Attrs(a) if self.held.ident.is(&a) => Fence::Ours,
            // A refresh in flight may have moved the stamp it recognizes by.
            Reply::Attrs(_) if self.touching && self.held.ident.moves() => {
                Fence::Again(Duration::from_millis(1))
            }
            Reply::Failed(e) if e.kind == ErrKind::Unknown && self.check_deadline(c) => {
                Fence::Again(Duration::from_millis(50))
            }
            _ => {
                if self.state == State::Held {
                    self.state = State::Lost { left: false };
                }
                Fence::Lost
            }
        }
    }

    /// Start a publish (the fenced rename of a temp file over the target, or the fenced
    /// removal of the target): first the fence's look.
    pub fn publish_start(&mut self, c: Clocks) -> Next {
        self.publish_tries = 0;
        self.publish_since = c.mono;
        self.publish_look = None;
        self.fence_next(c)
    }

    fn fence_next(&mut self, c: Clocks) -> Next {
        match self.fence_op(c) {
            Some(op) => Next::Call(op),
            None => Next::Done(Err(Lost::Compromised)),
        }
    }

    /// The next step of a publish whose call (`publish`: [`Op::Rename`] or [`Op::Unlink`])
    /// is made once the fence passed. `last` is the call the reply answers.
    pub fn publish_next(&mut self, publish: Op, last: Op, r: Reply, c: Clocks) -> Next {
        match last {
            Op::Stat {
                which: Which::Lock, ..
            } => match self.fence_judge(r, c) {
                Fence::Ours => Next::Call(publish),
                Fence::Lost => Next::Done(Err(Lost::Compromised)),
                Fence::Again(d) => Next::Backoff(d),
            },
            Op::Rename | Op::Unlink => match r {
                Reply::Done => Next::Done(Ok(())),
                // The target was already gone: a removal is done (B11/B12).
                Reply::Failed(e) if last == Op::Unlink && e.kind == ErrKind::NotFound => {
                    Next::Done(Ok(()))
                }
                // Made or not? Look at the name only the writer knows (the temp) or at the
                // target, never repeat blindly.
                Reply::Failed(e) if e.kind == ErrKind::Unknown => Next::Call(Op::Stat {
                    which: if last == Op::Rename {
                        Which::Temp
                    } else {
                        Which::Target
                    },
                    fresh: true,
                }),
                Reply::Failed(e) => Next::Done(Err(Lost::Io {
                    syscall: last.syscall(),
                    err: e,
                })),
                _ => Next::Done(Err(Lost::Compromised)),
            },
            // The look after an unanswered publish.
            Op::Stat { .. } => {
                let spent = c.mono.saturating_sub(self.publish_since) >= RETRY_WITHIN;
                let unanswered = Errno {
                    raw: eio(),
                    kind: ErrKind::Unknown,
                };
                match r {
                    // The temp moved (only its rename could), or the target is gone: done.
                    Reply::Failed(e) if e.kind == ErrKind::NotFound => Next::Done(Ok(())),
                    // Unanswered again: looked at again (no fence needed to look).
                    Reply::Failed(e) if e.kind == ErrKind::Unknown && !spent => {
                        self.publish_tries += 1;
                        self.publish_look = Some(last);
                        Next::Backoff(backoff(self.publish_tries))
                    }
                    Reply::Failed(e) => Next::Done(Err(Lost::Unknown {
                        syscall: publish.syscall(),
                        err: if e.kind == ErrKind::Unknown {
                            e
                        } else {
                            unanswered
                        },
                    })),
                    // Still there: not done. Made again, through the fence, for a while.
                    _ if spent => Next::Done(Err(Lost::Io {
                        syscall: publish.syscall(),
                        err: unanswered,
                    })),
                    _ => {
                        self.publish_tries += 1;
                        self.publish_look = None;
                        Next::Backoff(backoff(self.publish_tries))
                    }
                }
            }
            _ => Next::Done(Err(Lost::Compromised)),
        }
    }

    /// After a publish's [`Next::Backoff`]: the look again, or the fence before the call.
    pub fn publish_resume(&mut self, c: Clocks) -> Next {
        match self.publish_look.take() {
            Some(look) => Next::Call(look),
            None => self.fence_next(c),
        }
    }

    // ---- release -----------------------------------------------------------------------

    /// Start giving the lock back: look that it is still ours, then remove it. A lock lost by
    /// its deadline only, whose directory may still be there as we last set it, is removed
    /// too if it is (L2c) — not while a refresh is in flight (the mount may be hung) — and the
    /// release still reports it lost.
    pub fn release_start(&mut self, c: Clocks, mem: Option<(&mut Memory, &str)>) -> Next {
        if self.state == State::Held {
            self.check_deadline(c);
        }
        match self.state {
            State::Held => {
                self.state = State::Releasing;
                self.release = R::Look;
                Next::Call(self.stat())
            }
            // Under the network rule, only while no native process can have taken it over
            // yet (it must have seen it unchanged for the threshold plus the cache bound):
            // a look then, even one a client cache answers, shows what is there.
            State::Lost { left: true } if !self.touching && self.unclaimed(c) => {
                self.release = R::Look;
                Next::Call(self.stat())
            }
            // Maybe still there as ours: remembered by its token (L2a), recognized later.
            State::Lost { left: true } => self.orphan(mem),
            State::Lost { .. } => {
                self.state = State::Released;
                Next::Done(Err(Lost::Compromised))
            }
            State::Releasing | State::Released => Next::Done(Ok(())),
        }
    }

    fn outcome(&mut self) -> Next {
        let lost = matches!(self.state, State::Lost { .. });
        self.state = State::Released;
        self.release = R::Idle;
        Next::Done(if lost { Err(Lost::Compromised) } else { Ok(()) })
    }

    fn orphan(&mut self, mem: Option<(&mut Memory, &str)>) -> Next {
        if let (Some((mem, lock)), Ident::Token { token, .. }) = (mem, self.held.ident) {
            if !self.held.mutations.forget_orphans {
                mem.orphan(lock, super::memory::Orphan::Token(token));
            }
        }
        self.outcome()
    }

    /// The next step of a release. `mem` (and the lock path) receive a directory of ours that
    /// could not be removed (L2a).
    pub fn release_next(&mut self, r: Reply, c: Clocks, mem: Option<(&mut Memory, &str)>) -> Next {
        if self.state == State::Releasing {
            // Past its deadline now: still removed below if ours (L2c), but reported lost.
            self.check_deadline(c);
        }
        match (self.release, r) {
            (R::Look, Reply::Attrs(a)) if self.held.ident.is(&a) => {
                self.release = R::Remove;
                Next::Call(Op::Rmdir(Which::Lock))
            }
            (R::Look, Reply::Attrs(_)) if self.touching && self.held.ident.moves() => {
                Next::Backoff(Duration::from_millis(1))
            }
            (R::Look, Reply::Failed(e)) if e.kind == ErrKind::Unknown && self.tries_left(c) => {
                Next::Backoff(backoff(self.removals))
            }
            // Not there, or another's: not ours any more (W-B4: nothing removed).
            (R::Look, Reply::Attrs(_)) | (R::Look, Reply::NotOurs) => {
                if self.state == State::Releasing {
                    self.state = State::Lost { left: false };
                }
                self.outcome()
            }
            (R::Look, Reply::Failed(e)) if e.kind == ErrKind::NotFound => {
                if self.state == State::Releasing {
                    self.state = State::Lost { left: false };
                }
                self.outcome()
            }
            // Unknown: it may still be there as ours. Remembered by its token (recognizing
            // it later is no guess), and reported as it stands.
            (R::Look, _) => self.orphan(mem),
            (R::Remove, Reply::Done) => self.outcome(),
            (R::Remove, Reply::Failed(e)) if e.kind == ErrKind::NotFound => self.outcome(),
            // Made or not? Looked at, never repeated blindly (it may be the next holder's).
            (R::Remove, Reply::Failed(e)) if e.kind == ErrKind::Unknown => {
                if self.held.mutations.repeat_rmdir && self.removals < MAX_REMOVALS {
                    self.removals += 1;
                    return Next::Call(Op::Rmdir(Which::Lock));
                }
                self.release = R::Recheck;
                Next::Call(self.stat())
            }
            (R::Remove, _) => self.orphan(mem),
            // Still ours: removed again, if it is recognized by its token. A stamp (a folder
            // that keeps no atime) is not enough to act on a second time: left to the stale
            // rule.
            (R::Recheck, Reply::Attrs(a))
                if self.held.ident.is(&a)
                    && self.held.ident.moves()
                    && !self.held.mutations.mtime_identity =>
            {
                self.outcome()
            }
            (R::Recheck, Reply::Attrs(a)) if self.held.ident.is(&a) => {
                self.removals += 1;
                if self.removals >= MAX_REMOVALS || !self.tries_left(c) {
                    return self.orphan(mem);
                }
                self.release = R::Again;
                Next::Backoff(backoff(self.removals))
            }
            (R::Recheck, Reply::Failed(e)) if e.kind == ErrKind::Unknown => {
                self.removals += 1;
                if self.removals >= MAX_REMOVALS || !self.tries_left(c) {
                    return self.orphan(mem);
                }
                Next::Backoff(backoff(self.removals))
            }
            // Gone, or another's now: ours was removed by the unanswered call.
            (R::Recheck, Reply::Attrs(_)) => self.outcome(),
            (R::Recheck, Reply::Failed(e)) if e.kind == ErrKind::NotFound => self.outcome(),
            (R::Recheck, _) => self.orphan(mem),
            _ => self.outcome(),
        }
    }

    /// After a release's [`Next::Backoff`].
    pub fn release_resume(&mut self, c: Clocks) -> Next {
        let _ = c;
        match self.release {
            R::Again => {
                self.release = R::Remove;
                Next::Call(Op::Rmdir(Which::Lock))
            }
            R::Recheck | R::Look => Next::Call(self.stat()),
            _ => self.outcome(),
        }
    }

    /// Whether a release may keep trying: while the lock would not be judged stale yet (a
    /// removal tried later could meet a taker's lock), or, when lost by its deadline, not.
    fn tries_left(&self, c: Clocks) -> bool {
        self.deadline()
            .is_some_and(|d| c.boot + Duration::from_millis(250) < d)
    }

    /// Whether nobody following the protocol's rules can have taken the lock over yet.
    fn unclaimed(&self, c: Clocks) -> bool {
        !self.held.network
            || c.boot + Duration::from_millis(250)
                < self.held.refreshed + self.stale + self.held.cache
    }

    /// Whether `a` is this hold's directory.
    pub fn is_ours(&self, a: &Attrs) -> bool {
        self.held.ident.is(a)
    }
}

/// Wait before retry `k` (1-based) of an unanswered call: min(10·2^k, 200) ms (a driver may
/// shorten it at random by up to half).
pub fn backoff(k: u32) -> Duration {
    Duration::from_millis(10u64.saturating_mul(1 << k.min(10)).min(200))
}

#[cfg(unix)]
fn eio() -> i32 {
    libc::EIO
}

#[cfg(windows)]
fn eio() -> i32 {
    1117 // ERROR_IO_DEVICE
}

//! Judging the lock found at the path (L3, the network rule of L10b, L2a: an orphan of ours
//! by its token) and verifying a directory just made: steps of [`super::Acquire`].

use super::*;

impl Acquire {
    /// L3, the network rule, and L2a: whether the lock found there is an orphan of ours (by
    /// its token), stale, or held.
    pub(super) fn judge(&mut self, a: Attrs, c: Clocks, mem: &mut Memory) -> Step {
        // A look answered late shows what was there long ago: acted on, its removal could
        // meet a lock made since. Looked at again by the next attempt.
        if c.mono > self.look_sent + LOOK_FRESH {
            return self.fail(Failure::Locked, c);
        }
        if let Some(o) = mem.orphan_at(&self.setup.lock, &a) {
            self.reclaiming = Some(o);
            return self.call(S::Takeover { reclaim: true }, Op::Rmdir(Which::Lock));
        }
        let stale = match self.setup.rule {
            Rule::Local => a.mtime < c.wall - self.setup.stale.as_nanos() as i128,
            // Seen as (device, mtime, atime): a token tells locks apart. Where the folder is
            // known to keep no atime, the inode too (whole seconds and a skewed clock can give
            // two locks one mtime); not otherwise, since libfuse clients renumber inodes.
            Rule::Network { cache } => {
                let folder = mem.folder(&self.setup.folder);
                let ino = if folder.tokens == Some(false) {
                    a.ino
                } else {
                    0
                };
                // On whole seconds a refresh sets the next whole second, which the refreshes
                // of the second before it set already: the last refresh a look cannot see may
                // come up to a second after the first look (simulator seed 281226340532447).
                let unseen = if folder.whole_seconds == Some(false) {
                    Duration::ZERO
                } else {
                    Duration::from_secs(1)
                };
                stale_on_network(
                    mem,
                    &self.setup.lock,
                    (a.dev, ino, a.mtime, a.atime),
                    c,
                    self.setup.stale + cache + unseen,
                    self.setup.stale + cache,
                )
            }
        };
        if stale {
            self.call(S::Takeover { reclaim: false }, Op::Rmdir(Which::Lock))
        } else {
            self.fail(Failure::Locked, c)
        }
    }

    pub(super) fn taken_over(&mut self, reclaim: bool, c: Clocks, mem: &mut Memory) -> Step {
        if let (true, Some(o)) = (reclaim, self.reclaiming.take()) {
            mem.forget_orphan(&self.setup.lock, o);
        }
        mem.sightings.remove(&self.setup.lock);
        self.retake(c, mem)
    }

    /// One more try after a takeover or a release seen: EEXIST then means ELOCKED.
    pub(super) fn retake(&mut self, c: Clocks, mem: &mut Memory) -> Step {
        self.retake = true;
        self.proceed(c, mem)
    }

    /// What was made reads back: ours, with our token, in time?
    pub(super) fn verify(
        &mut self,
        a: Attrs,
        times: Option<Errno>,
        c: Clocks,
        mem: &mut Memory,
    ) -> Step {
        self.seen = Some(a);
        let folder = mem.folder(&self.setup.folder);
        let tokened = token_matches(self.setup.token, a.atime);
        // Answered so late (a reply that hung, a pause) that the directory this look saw may
        // have been taken over since: never removed by path now. Ours is remembered by its
        // token (L2a), to be recognized if it is still there.
        let late = self.late(c);
        if late {
            return if tokened {
                self.orphaned(Failure::Locked, c, mem)
            } else {
                self.fail(Failure::Locked, c)
            };
        }
        if !tokened {
            // Ours only if made in time: no takeover can happen sooner (L10b). Then either
            // its times were never set (the call went unanswered), or the folder keeps no
            // atime. Anything else is not ours to touch.
            let ours = match times {
                // The times went unanswered: made by us (plain path) and not set.
                Some(_) => !self.renames(mem),
                // Set, and the atime not kept: a folder that keeps none (never learned
                // against a folder known to keep them: then this is another's).
                None => folder.tokens != Some(true) && same_time(self.set_mtime, a.mtime),
            };
            match times {
                _ if !ours => return self.fail(Failure::Locked, c),
                // Ours, but not recognizable later: removed now, while surely still ours.
                Some(e) => return self.cleanup(utime(e)),
                None => mem.learn(&self.setup.folder, |f| f.tokens = Some(false)),
            }
        } else if folder.tokens != Some(true) {
            mem.learn(&self.setup.folder, |f| f.tokens = Some(true));
        }
        if folder.whole_seconds.is_none() {
            let whole = self.set_mtime.rem_euclid(1_000_000_000) != 0
                && a.mtime.rem_euclid(1_000_000_000) == 0;
            mem.learn(&self.setup.folder, |f| f.whole_seconds = Some(whole));
            if whole && tokened {
                // Truncated, it looks up to a second older than it is: set it rounded up.
                return self.times(Which::Lock, c, mem);
            }
        }
        let network = matches!(self.setup.rule, Rule::Network { .. });
        let ident = if tokened && !self.setup.mutations.mtime_identity {
            Ident::Token {
                dev: a.dev,
                token: self.setup.token,
            }
        } else {
            // A folder that keeps no atime: device, inode and mtime (a libfuse client that
            // renumbers inodes then tells a holder it lost its lock: loud, never wrong the
            // other way).
            Ident::Stamp {
                dev: a.dev,
                ino: (!self.setup.mutations.mtime_identity).then_some(a.ino),
                mtime: a.mtime,
            }
        };
        mem.sightings.remove(&self.setup.lock);
        self.s = S::Over;
        Step::Done(Ok(Held {
            ident,
            refreshed: self.sent_at,
            whole_seconds: mem.folder(&self.setup.folder).whole_seconds == Some(true),
            network,
            cache: match self.setup.rule {
                Rule::Network { cache } => cache,
                Rule::Local => Duration::ZERO,
            },
            remote: self.setup.remote,
            mutations: self.setup.mutations,
        }))
    }

    /// Whether a look answered now comes too late to act on the directory being made.
    pub(super) fn late(&self, c: Clocks) -> bool {
        c.boot > self.made_at + self.setup.stale / 2
    }
}

/// The network rule: stale once seen unchanged for longer than `limit`, by this process's
/// monotonic clock, whatever the mtime says (another machine's clock set it, and a cache may
/// show an older directory's). Seen unchanged means at every look, with no gap longer than
/// `gap` between two looks (the whole observation: a long pause or suspend, calls far apart):
/// across such a gap a lock may have been replaced by one that looks the same (whole seconds,
/// no token), so the observation starts again. Calls closer together than that (a heartbeat
/// every 30 s) keep observing. A lock left by a crash long ago costs a new process one full
/// observation.
pub(super) fn stale_on_network(
    mem: &mut Memory,
    lock: &str,
    seen: Sight,
    c: Clocks,
    limit: Duration,
    gap: Duration,
) -> bool {
    let since = match mem.sightings.get(&lock.to_string()) {
        Some(&(s, since, last)) if s == seen && c.mono.saturating_sub(last) <= gap => since,
        _ => c.mono,
    };
    mem.sightings
        .insert(lock.to_string(), (seen, since, c.mono));
    c.mono.saturating_sub(since) > limit
}

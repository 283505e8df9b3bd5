//! What the simulator checks after every step, against the ground truth only it knows (which
//! process made each directory, which calls took effect):
//!
//! 1. **Never two holders that can publish.** A native process publishes (its rename takes
//!    effect) only while the directory at the lock path is one it made and believes it holds.
//! 2. **No CAS lost or applied twice.** A native publish reported done took effect, and one
//!    reported failed did not (a caller retries a failed CAS: had it taken effect, it would
//!    be applied twice).
//! 3. **No lock of another holder removed.** A native removes a directory it did not make only
//!    as a takeover of the very directory it judged stale, and only if that one was not live
//!    (its holder past its deadline, or gone). The one race the protocol leaves open is
//!    counted, not failed: two processes taking over the same stale lock at once (L10c:
//!    `rmdir` + `mkdir`, nothing else), where the second `rmdir` meets the first taker's new
//!    lock between a look and a removal; the victim's fence then refuses to publish (1).
//! 4. **A dead holder's lock is taken over within the bound.** Once the faults stop, a lock
//!    whose holder is gone is taken over within the bound the docs promise: the stale rule's
//!    (threshold + 2 s locally; threshold + attribute-cache bound + 1.5 s under the network
//!    rule), or at once (2 s) when it is a directory its own live maker can recognize (by its
//!    token, L2a; or, on folders that move without replacing, any directory it made).
//!
//! proper-lockfile's own processes break 1–3 under faults (no fence, mtime identity, release
//! without looking, W-B3/W-B4); what they do is counted, never failed.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use super::super::world::Attrs;

/// Counts of what happened in a run.
#[derive(Debug, Default, Clone)]
pub struct Stats {
    pub steps: u64,
    pub calls: u64,
    pub publishes: u64,
    pub takeovers: u64,
    /// Takeover races (3) among natives.
    pub races: u64,
    /// Things proper-lockfile processes did that a native never may.
    pub reference: u64,
    /// Native publishes made in the round trip of their fence while a proper-lockfile process
    /// (or a takeover race) took their live lock: consequences of those, counted there.
    pub consequences: u64,
    /// Publishes reported with an unknown outcome (the file system would not say).
    pub unknown: u64,
    pub value: u64,
}

/// One process as the checker asks about it.
pub struct Who {
    pub alive: bool,
    pub native: bool,
    /// Believes it holds a lock (natives: and its deadline has not passed).
    pub holds: bool,
    /// Is acquiring (natives), so a directory it made lately may become its lock.
    pub acquiring: bool,
    /// Would recognize the directory at the lock path as an orphan of its own.
    pub owns_orphan: bool,
    /// Is trying to take the lock.
    pub waiting: bool,
}

pub struct Checker {
    pub stale: Duration,
    /// The network rule judges by observation (else by mtime).
    pub network: bool,
    /// The bound of a takeover by the stale rule, and of an own directory's recognition.
    pub rule_bound: Duration,
    pub own_bound: Duration,
    /// Any directory a live native made is recognizable (it is moved into place carrying
    /// its token).
    pub renames: bool,
    pub calm_from: Duration,
    pub violations: Vec<String>,
    pub stats: Stats,
    /// Lock directory → (maker, made at).
    made: HashMap<u64, (usize, Duration)>,
    /// Lock directories made by a `mkdir` whose reply was lost: never claimed by their maker
    /// (it cannot tell them from another's).
    unclaimed: HashSet<u64>,
    /// Lock directory → (remover, removed at, whether the removal was one the protocol
    /// leaves open or a proper-lockfile misdeed).
    removed: HashMap<u64, (usize, Duration, bool)>,
    /// Per process: the lock directory it made last.
    last_made: HashMap<usize, u64>,
    /// Per process: the last directory its look at the lock path showed, when, and whether it
    /// was stale by the local rule's terms at the look.
    seen: HashMap<usize, (Option<u64>, Duration, bool)>,
    applied: HashSet<(usize, u64)>,
    /// The lock directory that has been without a live holder since, during the calm.
    ownerless: Option<(u64, Duration)>,
    reported: HashSet<u64>,
}

impl Checker {
    pub fn new(
        stale: Duration,
        network: bool,
        rule_bound: Duration,
        own_bound: Duration,
        renames: bool,
        calm_from: Duration,
    ) -> Checker {
        Checker {
            stale,
            network,
            rule_bound,
            own_bound,
            renames,
            calm_from,
            violations: Vec::new(),
            stats: Stats::default(),
            made: HashMap::new(),
            unclaimed: HashSet::new(),
            removed: HashMap::new(),
            last_made: HashMap::new(),
            seen: HashMap::new(),
            applied: HashSet::new(),
            ownerless: None,
            reported: HashSet::new(),
        }
    }

    fn fail(&mut self, t: Duration, what: String) {
        if self.violations.len() < 20 {
            self.violations
                .push(format!("t={:.3}s {what}", t.as_secs_f64()));
        }
    }

    /// Whether `m` holds directory `obj`: its latest, and it believes it holds a lock (or is
    /// still making it, within the threshold of its making).
    fn holding(&self, m: usize, w: &Who, obj: u64, t: Duration) -> bool {
        let made = self
            .made
            .get(&obj)
            .filter(|&&(by, _)| by == m)
            .map(|&(_, at)| at);
        w.alive
            && self.last_made.get(&m) == Some(&obj)
            && (w.holds
                || w.acquiring
                    && !self.unclaimed.contains(&obj)
                    && made.is_some_and(|at| t <= at + self.stale))
    }

    /// Whether `p`'s latest lock was taken from it by a proper-lockfile misdeed or a takeover
    /// race: what it does about it until it makes another is a consequence of those.
    fn victim(&self, p: usize) -> bool {
        self.last_made
            .get(&p)
            .and_then(|o| self.removed.get(o))
            .is_some_and(|&(q, _, excused)| q != p && excused)
    }

    pub fn saw(&mut self, p: usize, obj: Option<u64>, t: Duration, stale: bool) {
        self.seen.insert(p, (obj, t, stale));
    }

    pub fn lock_made(&mut self, p: usize, obj: u64, t: Duration, unclaimed: bool) {
        if unclaimed {
            self.unclaimed.insert(obj);
        }
        self.made.insert(obj, (p, t));
        self.last_made.insert(p, obj);
    }

    /// Process `p` removed lock directory `obj` (made by `maker`); `who(q)` describes q now.
    /// `stale`: whether the directory was stale by the rule's own terms (its mtime older than
    /// the threshold by the server's clock; under the network rule, unchanged that long).
    #[allow(clippy::too_many_arguments)]
    pub fn lock_removed(
        &mut self,
        p: usize,
        obj: u64,
        maker: usize,
        attrs: Attrs,
        stale: bool,
        t: Duration,
        who: &dyn Fn(usize) -> Who,
    ) {
        let excused = self.classify_removal(p, obj, maker, &attrs, stale, t, who);
        self.removed.insert(obj, (p, t, excused));
    }

    /// Whether the removal is one the protocol leaves open or a proper-lockfile misdeed
    /// (whose consequences are excused); fails the run if a native's removal is neither.
    #[allow(clippy::too_many_arguments)]
    fn classify_removal(
        &mut self,
        p: usize,
        obj: u64,
        maker: usize,
        attrs: &Attrs,
        stale: bool,
        t: Duration,
        who: &dyn Fn(usize) -> Who,
    ) -> bool {
        let remover = who(p);
        if maker == p {
            return false; // its own (release, cleanup, an orphan of its own)
        }
        if self.victim(p) {
            self.stats.consequences += 1;
            return true;
        }
        let (seen, seen_at, seen_stale) =
            self.seen
                .get(&p)
                .copied()
                .unwrap_or((None, Duration::ZERO, false));
        if seen == Some(obj) {
            let _ = attrs;
            let m = who(maker);
            if self.holding(maker, &m, obj, t) && !stale {
                // A proper-lockfile holder refreshes a lock past its threshold (after a
                // suspend) if its mtime is still its own: a look that found it stale, then the
                // removal, can straddle that refresh. proper-lockfile's race, counted (soak
                // seed 181519875632906).
                if remover.native && (m.native || !seen_stale) {
                    self.fail(
                        t,
                        format!("p{p} took over p{maker}'s live lock (directory {obj})"),
                    );
                    return false;
                }
                self.stats.reference += 1;
                return true;
            }
            self.stats.takeovers += 1;
            return false;
        }
        // The race the protocol leaves open: what it judged was removed by another after
        // its look, and this one made after it.
        // What it saw was taken by a misdeed (a cache may still show it): a consequence.
        if seen.is_some_and(|o| {
            self.removed
                .get(&o)
                .is_some_and(|&(q, _, excused)| q != p && excused)
        }) {
            self.stats.consequences += 1;
            return true;
        }
        let judged_gone_after = seen.is_some_and(|o| {
            self.removed
                .get(&o)
                .is_some_and(|&(q, at, _)| q != p && at >= seen_at)
        });
        let made_after = self.made.get(&obj).is_some_and(|&(_, at)| at >= seen_at);
        if judged_gone_after && made_after {
            if remover.native {
                self.stats.races += 1;
            } else {
                self.stats.reference += 1;
            }
            true
        } else if remover.native {
            self.fail(t, format!("p{p} removed p{maker}'s lock (directory {obj}) which it never judged (its last look: {seen:?})"));
            false
        } else {
            self.stats.reference += 1;
            true
        }
    }

    /// Process `p`'s write `n` took effect, replacing the entry with `value`; `lock` is the
    /// directory at the lock path now.
    pub fn published(
        &mut self,
        p: usize,
        n: u64,
        value: u64,
        lock: Option<u64>,
        t: Duration,
        who: &dyn Fn(usize) -> Who,
    ) {
        self.stats.publishes += 1;
        self.applied.insert((p, n));
        let w = who(p);
        let made_by_it = lock.is_some_and(|o| self.made.get(&o).is_some_and(|&(m, _)| m == p));
        let owns = made_by_it && lock.is_some_and(|o| self.holding(p, &w, o, t));
        if !owns {
            if w.native && self.victim(p) {
                self.stats.consequences += 1;
            } else if w.native {
                self.fail(t, format!("p{p} published write {n} without holding the lock (lock dir {lock:?}, made by it: {made_by_it}, believes it holds it: {})", w.holds));
            } else {
                self.stats.reference += 1;
            }
        }
        if value != self.stats.value + 1 && w.native && owns {
            // Someone published while this one held the lock: counted where it happened.
            self.stats.reference += 0;
        }
        self.stats.value = value;
    }

    /// Process `p` reported write `n` done (`ok`) or failed.
    pub fn told(&mut self, p: usize, n: u64, ok: Option<bool>, native: bool, t: Duration) {
        let applied = self.applied.contains(&(p, n));
        // An outcome the file system would not tell is reported as such: either is fine.
        let Some(ok) = ok else {
            self.stats.unknown += 1;
            return;
        };
        if applied != ok {
            if native {
                self.fail(
                    t,
                    format!(
                        "p{p} reported write {n} {} but it was {}",
                        if ok { "done" } else { "failed" },
                        if applied { "applied" } else { "not applied" }
                    ),
                );
            } else {
                self.stats.reference += 1;
            }
        }
    }

    /// After every step: the takeover bound (4), during the calm.
    /// `lock`: the directory at the lock path, and whether another process than its maker
    /// set its times (its token then lost: nothing recognizes it but the stale rule).
    pub fn after(&mut self, t: Duration, lock: Option<(u64, bool)>, who: &dyn Fn(usize) -> Who) {
        self.stats.steps += 1;
        if t < self.calm_from {
            return;
        }
        let Some((obj, foreign)) = lock else {
            self.ownerless = None;
            return;
        };
        let Some(&(maker, _)) = self.made.get(&obj) else {
            return;
        };
        let m = who(maker);
        if self.holding(maker, &m, obj, t) {
            self.ownerless = None;
            return;
        }
        let since = match self.ownerless {
            Some((o, since)) if o == obj => since,
            _ => {
                self.ownerless = Some((obj, t));
                t
            }
        };
        let own = m.alive && m.native && m.waiting && !foreign && (m.owns_orphan || self.renames);
        let bound = if own { self.own_bound } else { self.rule_bound };
        if t.saturating_sub(since) > bound && self.reported.insert(obj) {
            self.fail(
                t,
                format!(
                    "lock directory {obj} (made by p{maker}, {}) left without a holder for {:.1}s (bound {:.1}s)",
                    if own { "which it can recognize" } else { "gone" },
                    t.saturating_sub(since).as_secs_f64(),
                    bound.as_secs_f64()
                ),
            );
        }
    }
}

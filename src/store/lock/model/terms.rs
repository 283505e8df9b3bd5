//! The vocabulary of acquiring: staleness rules, retry policies, failures, tokens, the
//! identity of a lock made, and the steps the machine hands its driver.

use std::time::Duration;

use super::super::world::{Attrs, Errno, Op};

/// proper-lockfile floors staleness at 2000 ms; the store's effective threshold is exactly that.
pub const MIN_STALE_MS: u64 = 2000;

/// Which staleness rule a lock follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Stale when the mtime is older than the threshold (proper-lockfile's own rule).
    Local,
    /// Stale once this process has seen it unchanged for longer than the threshold plus
    /// `cache`, the bound for client attribute caches (SPEC L10b allows any longer threshold).
    Network { cache: Duration },
}

/// How acquisition retries (B17 / B18).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// `retries + 1` attempts, waits min(25·2^k, 500) ms, every error retried, the final error
    /// the most frequent one.
    Async { retries: u32 },
    /// max(1, retries) + 1 attempts, only ELOCKED retried (and EPERM where `retry_eperm`).
    Sync { retries: u32 },
    /// One attempt, no waiting: the store's fast path.
    Once,
}

impl Policy {
    /// Attempts in all.
    pub fn attempts(self) -> u32 {
        match self {
            Policy::Async { retries } => retries.saturating_add(1),
            Policy::Sync { retries } => retries.max(1).saturating_add(1),
            Policy::Once => 1,
        }
    }

    /// Wait after failed attempt number `k` (1-based).
    pub fn wait(self, k: u32) -> Duration {
        let ms = 25u64
            .saturating_mul(1u64 << (k.max(1) - 1).min(20))
            .min(500);
        Duration::from_millis(ms)
    }

    /// The whole schedule's waits.
    pub fn budget(self) -> Duration {
        (1..self.attempts()).map(|k| self.wait(k)).sum()
    }
}

/// L4: `stale = max(stale || 0, 2000)`.
pub fn normalize_stale(stale: Option<f64>) -> u64 {
    let s = stale.filter(|s| s.is_finite() && *s > 0.0).unwrap_or(0.0);
    (s.min(u64::MAX as f64) as u64).max(MIN_STALE_MS)
}

/// Why an acquisition (or one attempt) failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// ELOCKED: held by another.
    Locked,
    /// A call failed: its syscall name and error (the path is the lock's).
    Io { syscall: &'static str, err: Errno },
}

/// A token: a random atime between 2038 and 2072, nanoseconds included. Far from any time a
/// clock gives, so never the atime of a lock somebody else made (proper-lockfile sets atime to
/// mtime), and unpredictable to the second. `secs` and `nanos` are random draws.
pub fn new_token(secs: u32, nanos: u32) -> i128 {
    let s = TOKEN_FROM + i128::from(secs % (1 << 30));
    s * 1_000_000_000 + i128::from(nanos % 1_000_000_000)
}

/// The first second of the tokens' range (2038-01-19).
const TOKEN_FROM: i128 = 1 << 31;

/// Whether an atime read back is `token`, as the file system keeps it (to the nanosecond,
/// 100 ns, microsecond, millisecond or second).
pub fn token_matches(token: i128, seen: i128) -> bool {
    // ns, 100 ns (NTFS, SMB), µs, ms, whole seconds.
    [1, 100, 1_000, 1_000_000, 1_000_000_000]
        .iter()
        .any(|p| seen == token - token.rem_euclid(*p))
}

/// Whether an mtime read back is `set`, as the file system keeps it (ns to whole seconds).
pub(super) fn same_time(set: i128, seen: i128) -> bool {
    token_matches(set, seen)
}

/// `t` (ns) rounded up to a whole second (proper-lockfile's mtime on `s`-precision folders).
pub fn ceil_second(t: i128) -> i128 {
    let r = t.rem_euclid(1_000_000_000);
    if r == 0 {
        t
    } else {
        t + 1_000_000_000 - r
    }
}

/// How a holder recognizes its lock directory (L2b).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ident {
    /// By the token it carries as its atime, on its device.
    Token { dev: u64, token: i128 },
    /// Where the folder keeps no atime: device, inode (when known) and the mtime the holder
    /// last set.
    Stamp {
        dev: u64,
        ino: Option<u64>,
        mtime: i128,
    },
}

impl Ident {
    /// Whether `a` is the directory this identifies.
    pub fn is(&self, a: &Attrs) -> bool {
        match *self {
            Ident::Token { dev, token } => a.dev == dev && token_matches(token, a.atime),
            Ident::Stamp { dev, ino, mtime } => {
                a.dev == dev && ino.is_none_or(|i| i == a.ino) && a.mtime == mtime
            }
        }
    }

    /// Whether a refresh changes what identifies it (the mtime of [`Ident::Stamp`]).
    pub fn moves(&self) -> bool {
        matches!(self, Ident::Stamp { .. })
    }
}

/// A lock just acquired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Held {
    pub ident: Ident,
    /// The boot-clock instant its mtime was last set (sent): from this plus the threshold on,
    /// another process may judge it stale.
    pub refreshed: Duration,
    pub whole_seconds: bool,
    pub network: bool,
    /// Under the network rule, its bound for attribute caches (zero under the local rule).
    pub cache: Duration,
    pub remote: bool,
    pub mutations: Mutations,
}

/// What the driver does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Make this call and hand the reply to [`Acquire::next`].
    Call(Op),
    /// Wait until the monotonic instant `until`, then call [`Acquire::woke`]. A driver told of
    /// the lock's removal may wake early (`woke(.., true)`): one extra attempt, the schedule
    /// unchanged.
    Sleep { until: Duration },
    /// Over.
    Done(Result<Held, Failure>),
}

/// Defects fixed here, switched back on: only the simulator sets them, to show that it finds
/// each one from a fresh seed (docs/LOCKING.md, "What the simulator finds"). Production always
/// passes the default, all off.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mutations {
    /// Issue 41 defect 1: a release `rmdir` that went unanswered is made again by path,
    /// without looking first.
    pub repeat_rmdir: bool,
    /// Defect 2: a holder recognizes its lock by device and mtime, not by a token.
    pub mtime_identity: bool,
    /// Defect 6: no private name on network folders: an unanswered `mkdir` at the lock path
    /// cannot be told from contention.
    pub no_private_name: bool,
    /// Defect 7: a directory of ours that could not be removed is not remembered (L2a).
    pub forget_orphans: bool,
}

/// What an acquisition is given.
#[derive(Debug, Clone)]
pub struct Setup {
    pub rule: Rule,
    /// The folder is on a network or FUSE file system: a failure may hide work done.
    pub remote: bool,
    pub stale: Duration,
    pub policy: Policy,
    /// B18 on win32: EPERM (a directory being deleted) counts as contention.
    pub retry_eperm: bool,
    /// A fresh random token ([`new_token`]).
    pub token: i128,
    /// The lock path and its folder (keys of the process's [`Memory`]).
    pub lock: String,
    pub folder: String,
    pub mutations: Mutations,
}

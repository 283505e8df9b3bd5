//! Transient file-system errors, retried with a bounded, jittered backoff instead of being
//! thrown (issue 34). Network file systems answer some calls with errors that only say "not
//! now": SMB refuses to rename over a file another client still has open (`EBUSY`, `EEXIST`,
//! `EACCES`, `EPERM` through smbnetfs, whose `close` reaches the server after the caller's
//! `close` returned) and answers a `mkdir` racing another client's `rmdir` with `EIO`; an NFS or
//! GlusterFS client answers `ESTALE` for a name whose object another client just replaced. A
//! few milliseconds later the same call succeeds. graceful-fs retries Windows renames the same
//! way (B19).
//!
//! `ESTALE` is retried everywhere (only network file systems give it); the others only where
//! the folder is remote (`platform::fs_kind`): on a local disk they are real answers (a single
//! `EPERM` on a POSIX rename is not retried, B19).

use std::io;
use std::time::Duration;

/// What the failed call was: which errors may be transient depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// The rename of a temp file over an entry (a reader elsewhere may hold the entry open).
    Rename,
    /// A lock directory's `mkdir`, `rmdir`, or a folder's `mkdir -p`.
    Dir,
    /// Opening, reading or `stat`ing.
    Read,
}

/// Whether `e` may go away if the call is made again a little later.
pub fn is_transient(e: &io::Error, op: Op, remote: bool) -> bool {
    let Some(errno) = e.raw_os_error() else {
        return false;
    };
    #[cfg(unix)]
    {
        match errno {
            libc::ESTALE => true,
            // A read's EIO may be a reconnecting client; its EACCES or EPERM is a real answer.
            libc::EIO => remote,
            libc::EBUSY | libc::EACCES | libc::EPERM => remote && op != Op::Read,
            libc::EEXIST => remote && op == Op::Rename,
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        // Windows: sharing violations and access denials on a remote share (B19 retries
        // EPERM/EACCES/EBUSY renames everywhere there already).
        const ERROR_ACCESS_DENIED: i32 = 5;
        const ERROR_SHARING_VIOLATION: i32 = 32;
        const ERROR_LOCK_VIOLATION: i32 = 33;
        remote
            && op != Op::Read
            && matches!(
                errno,
                ERROR_ACCESS_DENIED | ERROR_SHARING_VIOLATION | ERROR_LOCK_VIOLATION
            )
    }
}

/// How long a transient error is retried: waits of min(10·2^k, 200) ms, each shortened at
/// random by up to half (so that two clients that collided do not collide again in step), until
/// this much time has passed since the first failure. It covers smbnetfs's worst case: after a
/// request it could not complete (its connection process died, under contention), it sleeps
/// 2 s before trying again and then answers EIO for everything on that server for 3 s (its
/// negative cache, `neg_cache_timeout`).
pub const RETRY_WITHIN: Duration = Duration::from_millis(6000);

/// A retry schedule in progress.
#[derive(Debug)]
pub struct Backoff {
    retries: u32,
    started: std::time::Instant,
    within: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::within(RETRY_WITHIN)
    }
}

impl Backoff {
    pub fn new() -> Backoff {
        Backoff::default()
    }

    /// A schedule that gives up once `within` has passed.
    pub fn within(within: Duration) -> Backoff {
        Backoff {
            retries: 0,
            started: std::time::Instant::now(),
            within,
        }
    }

    /// Sleep before the next try; false (without sleeping) once the time is spent.
    pub fn wait(&mut self) -> bool {
        let spent = self.started.elapsed();
        if spent >= self.within {
            return false;
        }
        let full = 10u64.saturating_mul(1 << self.retries.min(10)).min(200);
        let jittered = Duration::from_millis(full / 2 + rand::random_range(0..=full / 2));
        self.retries += 1;
        std::thread::sleep(jittered.min(self.within - spent));
        true
    }

    /// How many retries were made.
    pub fn retries(&self) -> u32 {
        self.retries
    }
}

/// `f`, made again while it fails with an error transient for `op` (`remote` is asked only
/// after a failure, so a local call pays nothing for it); the last error once the retries are
/// spent.
pub fn retry<T>(
    op: Op,
    remote: impl Fn() -> bool,
    mut f: impl FnMut() -> io::Result<T>,
) -> io::Result<T> {
    let mut backoff = Backoff::new();
    let mut remote_known: Option<bool> = None;
    loop {
        match f() {
            Ok(v) => return Ok(v),
            Err(e) => {
                let remote = *remote_known.get_or_insert_with(&remote);
                if !is_transient(&e, op, remote) || !backoff.wait() {
                    return Err(e);
                }
            }
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    fn err(errno: i32) -> io::Error {
        io::Error::from_raw_os_error(errno)
    }

    #[test]
    fn which_errors_are_transient() {
        assert!(
            is_transient(&err(libc::ESTALE), Op::Read, false),
            "ESTALE anywhere"
        );
        assert!(is_transient(&err(libc::EBUSY), Op::Rename, true));
        assert!(is_transient(&err(libc::EEXIST), Op::Rename, true));
        assert!(
            !is_transient(&err(libc::EEXIST), Op::Dir, true),
            "an existing lock is contention"
        );
        assert!(is_transient(&err(libc::EIO), Op::Dir, true));
        assert!(is_transient(&err(libc::EIO), Op::Read, true));
        assert!(!is_transient(&err(libc::EACCES), Op::Read, true));
        for e in [
            libc::EPERM,
            libc::EACCES,
            libc::EBUSY,
            libc::EIO,
            libc::EEXIST,
        ] {
            assert!(
                !is_transient(&err(e), Op::Rename, false),
                "local: a real answer ({e})"
            );
        }
        assert!(!is_transient(&err(libc::ENOENT), Op::Rename, true));
    }

    #[test]
    fn retries_are_bounded_and_succeed_when_the_error_goes() {
        let mut calls = 0;
        let r = retry(
            Op::Rename,
            || true,
            || {
                calls += 1;
                if calls < 3 {
                    Err(err(libc::EBUSY))
                } else {
                    Ok(calls)
                }
            },
        );
        assert_eq!(r.unwrap(), 3);
        let started = std::time::Instant::now();
        let mut backoff = Backoff::within(Duration::from_millis(500));
        let mut waits = 0;
        while backoff.wait() {
            waits += 1;
        }
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(500) && took < Duration::from_millis(900),
            "{took:?}"
        );
        assert!(waits >= 4, "{waits}");
        // Local: no retry, and `remote` asked only once something failed.
        let mut calls = 0;
        let r: io::Result<()> = retry(
            Op::Rename,
            || false,
            || {
                calls += 1;
                Err(err(libc::EPERM))
            },
        );
        assert!(r.is_err());
        assert_eq!(calls, 1);
    }
}

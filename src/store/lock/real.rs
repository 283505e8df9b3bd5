//! The world of production ([`super::world::World`]): the calls made with real syscalls
//! (`platform::fs`), their failures read as the decisions read them, and the real clocks.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use super::world::{Attrs, Clocks, ErrKind, Errno, Op, Reply, Which, World};
use crate::fserror::FsError;
use crate::platform::clock::BootInstant;
use crate::platform::{self, DirAttrs, TouchedDir};

/// The paths one lock's calls name, and whether they are on a network or FUSE folder (where a
/// failure may hide work done).
#[derive(Debug, Clone)]
pub struct RealWorld {
    pub lock: String,
    /// The private directory (`<lock>.<uuid>`), made only on network folders.
    pub pending: String,
    /// The temp file and the target of a publish.
    pub temp: String,
    pub target: String,
    pub remote: bool,
}

impl RealWorld {
    /// The world of the lock at `lock` (no publish paths yet).
    pub fn new(lock: String, remote: bool) -> RealWorld {
        let pending = format!("{lock}.{}", super::super::atomic_file::random_uuid());
        RealWorld {
            lock,
            pending,
            temp: String::new(),
            target: String::new(),
            remote,
        }
    }

    fn path(&self, w: Which) -> &str {
        match w {
            Which::Lock => &self.lock,
            Which::Pending => &self.pending,
            Which::Temp => &self.temp,
            Which::Target => &self.target,
        }
    }

    /// The Node-shaped error of a failed call (every path of the lock protocol is reported as
    /// the lock path, as proper-lockfile's errors name it; a publish names its temp and
    /// target).
    pub fn error(&self, syscall: &'static str, err: Errno) -> FsError {
        let e = std::io::Error::from_raw_os_error(err.raw);
        match syscall {
            "rename" if !self.temp.is_empty() => {
                FsError::io(&e, "rename", &self.temp).with_dest(&self.target)
            }
            "rm" => FsError::io(&e, "rm", &self.target),
            _ => FsError::io(&e, syscall, &self.lock),
        }
    }

    fn failed(&self, op: Op, e: std::io::Error) -> Reply {
        Reply::Failed(classify(&e, op, self.remote))
    }

    /// `call`, made again for up to [`LOOK_AGAIN_WITHIN`] while it fails with an error that
    /// says nothing (a network client's error window). Only for calls that change nothing, or
    /// nothing anybody else can name.
    fn again_while_unknown(
        &self,
        op: Op,
        mut call: impl FnMut() -> std::io::Result<Reply>,
    ) -> Reply {
        let mut backoff = super::super::transient::Backoff::within(LOOK_AGAIN_WITHIN);
        loop {
            match call() {
                Ok(r) => return r,
                Err(e) => {
                    let r = self.failed(op, e);
                    if !(matches!(r, Reply::Failed(x) if x.kind == ErrKind::Unknown)
                        && backoff.wait())
                    {
                        return r;
                    }
                }
            }
        }
    }
}

/// How the decisions read an OS error of `op` on a folder that is (or is not) `remote`.
pub fn classify(e: &std::io::Error, op: Op, remote: bool) -> Errno {
    let raw = e.raw_os_error().unwrap_or(0);
    let mutates = !matches!(op, Op::Stat { .. });
    let kind = match reading(raw) {
        Reading::NotFound => ErrKind::NotFound,
        // SMB refuses a rename over a file another client has open with EEXIST: not done.
        Reading::Exists if remote && op == Op::Rename => ErrKind::Unknown,
        Reading::Exists => ErrKind::Exists,
        Reading::Unsupported if op == Op::RenameNoReplace => ErrKind::Unsupported,
        Reading::NotNow if remote => ErrKind::Unknown,
        // SMB refuses a call on a directory being removed by another client: not an answer.
        Reading::Refused if remote && mutates => ErrKind::Unknown,
        _ => ErrKind::Other,
    };
    Errno { raw, kind }
}

enum Reading {
    NotFound,
    Exists,
    Unsupported,
    /// The client could not reach the server, or the reply did not come.
    NotNow,
    Refused,
    Other,
}

#[cfg(unix)]
fn reading(raw: i32) -> Reading {
    match raw {
        libc::ENOENT | libc::ENOTDIR => Reading::NotFound,
        libc::EEXIST => Reading::Exists,
        libc::EINVAL | libc::ENOSYS | libc::ENOTSUP => Reading::Unsupported,
        libc::EIO
        | libc::ETIMEDOUT
        | libc::ENOTCONN
        | libc::EAGAIN
        | libc::ESTALE
        | libc::ECONNRESET
        | libc::EINTR => Reading::NotNow,
        libc::EBUSY | libc::EACCES | libc::EPERM => Reading::Refused,
        _ => Reading::Other,
    }
}

#[cfg(windows)]
fn reading(raw: i32) -> Reading {
    match crate::fserror::win32_code_name(raw as u32) {
        "ENOENT" => Reading::NotFound,
        "EEXIST" => Reading::Exists,
        "EINVAL" | "ENOTSUP" => Reading::Unsupported,
        "EIO" | "EAGAIN" => Reading::NotNow,
        "EBUSY" | "EACCES" | "EPERM" => Reading::Refused,
        _ => Reading::Other,
    }
}

fn attrs(a: DirAttrs) -> Attrs {
    Attrs {
        dev: a.dev,
        ino: a.ino,
        mtime: a.mtime,
        atime: a.atime,
    }
}

/// How long a look (a `stat`, which changes nothing) is made again while a network client
/// answers "not now" (smbnetfs answers EIO for 3 s after a request it could not complete).
const LOOK_AGAIN_WITHIN: std::time::Duration = std::time::Duration::from_millis(6000);

impl World for RealWorld {
    fn call(&mut self, op: Op) -> Reply {
        match op {
            Op::Mkdir(w) => match std::fs::create_dir(self.path(w)) {
                Ok(()) => Reply::Done,
                Err(e) => self.failed(op, e),
            },
            // The private directory's name is known to nobody else: its removal, unlike the
            // lock's, is made again through a network client's error window (a private
            // directory left there is left for good, until `sweepOrphanTempFiles`).
            Op::Rmdir(Which::Pending) => self.again_while_unknown(op, || {
                std::fs::remove_dir(&self.pending).map(|()| Reply::Done)
            }),
            Op::Rmdir(w) => match std::fs::remove_dir(self.path(w)) {
                Ok(()) => Reply::Done,
                Err(e) => self.failed(op, e),
            },
            // A look changes nothing: made again through a network client's error window.
            Op::Stat { which, fresh } => self.again_while_unknown(op, || {
                platform::fs::dir_attrs(self.path(which), fresh && self.remote)
                    .map(|a| Reply::Attrs(attrs(a)))
            }),
            Op::SetTimes {
                which,
                atime,
                mtime,
            } => match platform::fs::set_times_ns(self.path(which), atime, mtime) {
                Ok(()) => Reply::Done,
                Err(e) => self.failed(op, e),
            },
            Op::RenameNoReplace => {
                match platform::fs::rename_noreplace(&self.pending, &self.lock) {
                    Ok(()) => Reply::Done,
                    Err(e) => self.failed(op, e),
                }
            }
            Op::Touch { ident, mtime } => {
                let atime = match ident {
                    super::model::Ident::Token { token, .. } => token,
                    super::model::Ident::Stamp { .. } => mtime,
                };
                match platform::fs::touch_dir(&self.lock, |a| ident.is(&attrs(*a)), atime, mtime) {
                    TouchedDir::Done(a) => Reply::Attrs(attrs(a)),
                    TouchedDir::NotOurs => Reply::NotOurs,
                    TouchedDir::Failed(e) => self.failed(op, e),
                }
            }
            Op::Rename => match platform::fs::rename_replace(&self.temp, &self.target) {
                Ok(()) => Reply::Done,
                Err(e) => self.failed(op, e),
            },
            Op::Unlink => match std::fs::remove_file(&self.target) {
                Ok(()) => Reply::Done,
                Err(e) => self.failed(op, e),
            },
        }
    }

    fn clocks(&self) -> Clocks {
        now()
    }
}

/// The three clocks now.
pub fn now() -> Clocks {
    static ORIGIN: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let origin = *ORIGIN.get_or_init(Instant::now);
    Clocks {
        wall: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128),
        mono: origin.elapsed(),
        boot: BootInstant::now().since_origin(),
    }
}

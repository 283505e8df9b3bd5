//! Errors shaped like Node's: fs failures carry `code`, negative `errno`, `syscall`, `path`
//! (and `dest`) with Node's message format; lock contention is proper-lockfile's ELOCKED.

use std::fmt;

/// A failure the JS layer turns into an `Error` with the same properties Node would set.
#[derive(Debug, Clone, PartialEq)]
pub enum FsError {
    Io {
        code: &'static str,
        /// Negative, as Node reports libuv errors.
        errno: i32,
        syscall: &'static str,
        path: String,
        dest: Option<String>,
    },
    /// proper-lockfile's `Lock file is already being held` (`file` = the resolved target).
    Locked { file: String },
    /// The lock was taken over by another writer while held (`ECOMPROMISED`).
    Compromised { file: String },
    /// The JS environment that started the operation was torn down; nothing was published.
    /// Never reaches JavaScript (there is nobody left to settle with).
    Cancelled,
    /// A failure of pi-native itself (e.g. a helper thread that could not start).
    Internal(String),
}

impl FsError {
    pub fn io(err: &std::io::Error, syscall: &'static str, path: &str) -> FsError {
        let raw = err.raw_os_error().unwrap_or(libc::EIO);
        FsError::Io {
            code: code_name(raw),
            errno: -raw,
            syscall,
            path: path.to_string(),
            dest: None,
        }
    }

    pub fn with_dest(mut self, to: &str) -> FsError {
        if let FsError::Io { dest, .. } = &mut self {
            *dest = Some(to.to_string());
        }
        self
    }

    pub fn code(&self) -> &'static str {
        match self {
            FsError::Io { code, .. } => code,
            FsError::Locked { .. } => "ELOCKED",
            FsError::Compromised { .. } => "ECOMPROMISED",
            FsError::Cancelled => "ABORT_ERR",
            FsError::Internal(_) => "ERR_PI_NATIVE_INTERNAL",
        }
    }

    /// True for an Io error with this code.
    pub fn is(&self, code: &str) -> bool {
        self.code() == code
    }
}

impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FsError::Io {
                code,
                errno,
                syscall,
                path,
                dest,
            } => {
                write!(f, "{code}: {}, {syscall} '{path}'", description(-errno))?;
                if let Some(d) = dest {
                    write!(f, " -> '{d}'")?;
                }
                Ok(())
            }
            FsError::Locked { .. } => f.write_str("Lock file is already being held"),
            FsError::Compromised { .. } => {
                f.write_str("Unable to update lock within the stale threshold")
            }
            FsError::Cancelled => {
                f.write_str("The operation was aborted: its JavaScript environment was torn down")
            }
            FsError::Internal(msg) => f.write_str(msg),
        }
    }
}

/// libuv's error name for an errno.
pub fn code_name(e: i32) -> &'static str {
    match e {
        libc::ENOENT => "ENOENT",
        libc::EACCES => "EACCES",
        libc::EEXIST => "EEXIST",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::ENOTEMPTY => "ENOTEMPTY",
        libc::EPERM => "EPERM",
        libc::EROFS => "EROFS",
        libc::ENOSPC => "ENOSPC",
        libc::EBUSY => "EBUSY",
        libc::EXDEV => "EXDEV",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        libc::ELOOP => "ELOOP",
        libc::EINVAL => "EINVAL",
        libc::EMFILE => "EMFILE",
        libc::ENFILE => "ENFILE",
        libc::EIO => "EIO",
        libc::EAGAIN => "EAGAIN",
        libc::EBADF => "EBADF",
        libc::EDQUOT => "EDQUOT",
        libc::ESTALE => "ESTALE",
        _ => "UNKNOWN",
    }
}

/// libuv's `uv_strerror` text for an errno.
fn description(e: i32) -> &'static str {
    match e {
        libc::ENOENT => "no such file or directory",
        libc::EACCES => "permission denied",
        libc::EEXIST => "file already exists",
        libc::ENOTDIR => "not a directory",
        libc::EISDIR => "illegal operation on a directory",
        libc::ENOTEMPTY => "directory not empty",
        libc::EPERM => "operation not permitted",
        libc::EROFS => "read-only file system",
        libc::ENOSPC => "no space left on device",
        libc::EBUSY => "resource busy or locked",
        libc::EXDEV => "cross-device link not permitted",
        libc::ENAMETOOLONG => "name too long",
        libc::ELOOP => "too many symbolic links encountered",
        libc::EINVAL => "invalid argument",
        libc::EMFILE => "too many open files",
        libc::ENFILE => "file table overflow",
        libc::EIO => "i/o error",
        libc::EAGAIN => "resource temporarily unavailable",
        libc::EBADF => "bad file descriptor",
        libc::EDQUOT => "disk quota exceeded",
        libc::ESTALE => "stale file handle",
        _ => "unknown error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_message_format() {
        let e = FsError::io(
            &std::io::Error::from_raw_os_error(libc::ENOENT),
            "open",
            "/x/y",
        );
        assert_eq!(
            e.to_string(),
            "ENOENT: no such file or directory, open '/x/y'"
        );
        assert_eq!(e.code(), "ENOENT");
        let r = FsError::io(
            &std::io::Error::from_raw_os_error(libc::EXDEV),
            "rename",
            "/a",
        )
        .with_dest("/b");
        assert_eq!(
            r.to_string(),
            "EXDEV: cross-device link not permitted, rename '/a' -> '/b'"
        );
        assert_eq!(
            FsError::Locked { file: "/f".into() }.to_string(),
            "Lock file is already being held"
        );
    }
}

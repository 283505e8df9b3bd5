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
    /// A network file system's client kept answering for `path` with an object its folder no
    /// longer names, past the bound a read waits for them to agree (store::coherent_read).
    Incoherent { path: String },
}

impl FsError {
    pub fn io(err: &std::io::Error, syscall: &'static str, path: &str) -> FsError {
        let (code, errno) = os_error(err);
        FsError::Io {
            code,
            errno,
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
            FsError::Incoherent { .. } => "ERR_PI_NATIVE_INCOHERENT",
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
                errno: _,
                syscall,
                path,
                dest,
            } => {
                write!(f, "{code}: {}, {syscall} '{path}'", description(code))?;
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
            FsError::Incoherent { path } => write!(
                f,
                "pi-native: the file system's client keeps leading '{path}' to an object its \
                 folder no longer names (an entry cache that outlives the wait); mount it \
                 without one: FUSE -o entry_timeout=0, JuiceFS --entry-cache 0, GlusterFS \
                 -o entry-timeout=0 with performance.md-cache-timeout 0"
            ),
        }
    }
}

/// The libuv code name and Node `errno` of an OS error (Linux, macOS: `-errno`).
#[cfg(unix)]
pub fn os_error(err: &std::io::Error) -> (&'static str, i32) {
    let raw = err.raw_os_error().unwrap_or(libc::EIO);
    (code_name(raw), -raw)
}

/// The libuv code name and Node `errno` of an OS error (Windows: the Win32 error translated as
/// libuv's `uv_translate_sys_error` does, and libuv's own negative Windows numbers).
#[cfg(windows)]
pub fn os_error(err: &std::io::Error) -> (&'static str, i32) {
    let code = match err.raw_os_error() {
        Some(raw) => win32_code_name(raw as u32),
        None => "EIO",
    };
    (code, uv_win_errno(code))
}

/// libuv's error name for an errno.
#[cfg(unix)]
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
        libc::ENOTCONN => "ENOTCONN",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::ENOSYS => "ENOSYS",
        libc::ENOTSUP => "ENOTSUP",
        libc::ECONNRESET => "ECONNRESET",
        libc::ENXIO => "ENXIO",
        _ => "UNKNOWN",
    }
}

/// libuv's name for a Win32 error code (the file-system subset of `uv_translate_sys_error`).
pub fn win32_code_name(e: u32) -> &'static str {
    match e {
        1 => "EISDIR", // ERROR_INVALID_FUNCTION
        2 | 3 | 15 | 53 | 67 | 123 | 126 | 161 | 203 | 267 => "ENOENT", // not found / bad name
        4 => "EMFILE", // ERROR_TOO_MANY_OPEN_FILES
        5 | 1314 => "EPERM", // ERROR_ACCESS_DENIED, ERROR_PRIVILEGE_NOT_HELD
        6 | 1004 => "EBADF", // ERROR_INVALID_HANDLE, ERROR_INVALID_FLAGS
        8 | 14 => "ENOMEM", // ERROR_NOT_ENOUGH_MEMORY, ERROR_OUTOFMEMORY
        13 | 87 | 122 | 1464 => "EINVAL", // invalid data / parameter, short buffer
        17 => "EXDEV", // ERROR_NOT_SAME_DEVICE
        19 => "EROFS", // ERROR_WRITE_PROTECT
        32 | 33 | 170 | 231 => "EBUSY", // sharing / lock violation, busy
        39 | 82 | 112 | 277 | 1100 => "ENOSPC", // disk full
        50 => "ENOTSUP", // ERROR_NOT_SUPPORTED
        80 | 183 => "EEXIST", // ERROR_FILE_EXISTS, ERROR_ALREADY_EXISTS
        111 | 206 => "ENAMETOOLONG", // ERROR_BUFFER_OVERFLOW, ERROR_FILENAME_EXCED_RANGE
        145 => "ENOTEMPTY", // ERROR_DIR_NOT_EMPTY
        232 => "EAGAIN", // ERROR_NO_DATA
        740 | 998 | 1920 => "EACCES", // elevation required, no access, can't access file
        1921 => "ELOOP", // ERROR_CANT_RESOLVE_FILENAME
        23 | 31 | 110 | 156 | 1101..=1106 | 1111 | 1117 | 1129 | 1165 | 1166 | 1393 => "EIO",
        _ => "UNKNOWN",
    }
}

/// libuv's negative error numbers on Windows (`UV__E*` in uv/errno.h).
#[cfg(windows)]
pub fn uv_win_errno(code: &str) -> i32 {
    match code {
        "EACCES" => -4092,
        "EAGAIN" => -4088,
        "EBADF" => -4083,
        "EBUSY" => -4082,
        "EEXIST" => -4075,
        "EINVAL" => -4071,
        "EIO" => -4070,
        "EISDIR" => -4068,
        "ELOOP" => -4067,
        "EMFILE" => -4066,
        "ENAMETOOLONG" => -4064,
        "ENFILE" => -4061,
        "ENOENT" => -4058,
        "ENOMEM" => -4057,
        "ENOSPC" => -4055,
        "ENOTDIR" => -4052,
        "ENOTEMPTY" => -4051,
        "ENOTSUP" => -4049,
        "EPERM" => -4048,
        "EROFS" => -4043,
        "ESRCH" => -4040,
        "EXDEV" => -4037,
        _ => -4094, // UV_UNKNOWN
    }
}

/// libuv's `uv_strerror` text for an error name.
fn description(code: &str) -> &'static str {
    match code {
        "ENOENT" => "no such file or directory",
        "EACCES" => "permission denied",
        "EEXIST" => "file already exists",
        "ENOTDIR" => "not a directory",
        "EISDIR" => "illegal operation on a directory",
        "ENOTEMPTY" => "directory not empty",
        "EPERM" => "operation not permitted",
        "EROFS" => "read-only file system",
        "ENOSPC" => "no space left on device",
        "EBUSY" => "resource busy or locked",
        "EXDEV" => "cross-device link not permitted",
        "ENAMETOOLONG" => "name too long",
        "ELOOP" => "too many symbolic links encountered",
        "EINVAL" => "invalid argument",
        "EMFILE" => "too many open files",
        "ENFILE" => "file table overflow",
        "EIO" => "i/o error",
        "EAGAIN" => "resource temporarily unavailable",
        "EBADF" => "bad file descriptor",
        "EDQUOT" => "disk quota exceeded",
        "ESTALE" => "stale file handle",
        "ENOMEM" => "not enough memory",
        "ENOTSUP" => "operation not supported on socket",
        "ENOTCONN" => "socket is not connected",
        "ETIMEDOUT" => "connection timed out",
        "ENOSYS" => "function not implemented",
        "ECONNRESET" => "connection reset by peer",
        "ENXIO" => "no such device or address",
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

//! File-system primitives on Linux and macOS.

use std::ffi::CString;
use std::fs::{File, Metadata, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};

use crate::fserror::FsError;

/// Create mode of a new file: `mode & ~umask` (what Node's `open(…, 'wx', mode)` does).
pub fn set_create_mode(opts: &mut OpenOptions, mode: u32) {
    opts.mode(mode);
}

/// B19's rename of the temp file over the target: POSIX does exactly one attempt.
pub fn rename_replace(from: &str, to: &str) -> std::io::Result<()> {
    std::fs::rename(from, to)
}

/// Open for reading without blocking on a FIFO or device (W-B9).
pub fn open_read_nonblocking(path: &str) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

/// Positioned reads (`pread`): std's own trait on Unix.
pub use std::os::unix::fs::FileExt as FileReadAt;

/// Node's `Stats#mtimeMs`: seconds × 1e3 + nanoseconds / 1e6, in double arithmetic.
pub fn mtime_ms(meta: &Metadata) -> f64 {
    meta.mtime() as f64 * 1e3 + meta.mtime_nsec() as f64 / 1e6
}

/// Modification time in nanoseconds since the epoch.
pub fn mtime_ns(meta: &Metadata) -> i128 {
    meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128
}

/// (device, inode) of a file: which directory a lock path currently names.
pub fn file_id(_path: &str, meta: &Metadata) -> (u64, u64) {
    (meta.dev(), meta.ino())
}

/// Set a path's access and modification times to now (proper-lockfile's `utimes` refresh).
pub fn touch_now(path: &str) -> bool {
    let Ok(c) = CString::new(std::path::Path::new(path).as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: c is a valid NUL-terminated path; a null times pointer means "now" for both.
    unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), std::ptr::null(), 0) == 0 }
}

/// B18: which failed synchronous lock attempts are retried (POSIX: contention only).
pub fn sync_lock_retryable(err: &FsError) -> bool {
    err.is("ELOCKED")
}

//! File-system primitives on Linux and macOS.

use std::ffi::CString;
use std::fs::{File, Metadata, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::time::{SystemTime, UNIX_EPOCH};

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

/// Put a raw directory listing in the order Node's `readdir` returns (K1): libuv sorts the
/// names by their bytes on Unix.
pub fn node_readdir_order(names: &mut [std::ffi::OsString]) {
    names.sort_unstable_by(|a, b| a.as_encoded_bytes().cmp(b.as_encoded_bytes()));
}

/// Node's `Stats#mtimeMs`: seconds × 1e3 + nanoseconds / 1e6, in double arithmetic.
pub fn mtime_ms(meta: &Metadata) -> f64 {
    meta.mtime() as f64 * 1e3 + meta.mtime_nsec() as f64 / 1e6
}

/// Modification time in nanoseconds since the epoch.
pub fn mtime_ns(meta: &Metadata) -> i128 {
    meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128
}

pub use super::{DirAttrs, Stamp, TouchedDir};

fn stamp(meta: &Metadata) -> Stamp {
    (meta.dev(), meta.ino(), mtime_ns(meta))
}

/// The stamp of what `path` names (following symbolic links, as Node's `fs.stat`).
pub fn stamp_of(path: &str) -> std::io::Result<Stamp> {
    std::fs::metadata(path).map(|m| stamp(&m))
}

pub use super::Facts;

/// The facts of an open file, asked of the file server where the file system caches
/// attributes (Linux: `statx(fd, AT_EMPTY_PATH | AT_STATX_FORCE_SYNC)`: a FUSE or NFS client
/// then asks its server for the size instead of answering from its attribute cache; sshfs
/// refreshed its own cache at the `open` just made). Elsewhere `fstat`.
pub fn fresh_facts(f: &File) -> std::io::Result<Facts> {
    #[cfg(target_os = "linux")]
    {
        let x = match statx_force_sync(f.as_raw_fd(), c"", libc::AT_EMPTY_PATH) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => return facts_of(f),
            r => r?,
        };
        Ok(Facts {
            ino: x.stx_ino,
            size: x.stx_size,
            is_file: u32::from(x.stx_mode) & libc::S_IFMT == libc::S_IFREG,
        })
    }
    #[cfg(not(target_os = "linux"))]
    facts_of(f)
}

/// `fstat`'s facts of an open file.
fn facts_of(f: &File) -> std::io::Result<Facts> {
    let m = f.metadata()?;
    Ok(Facts {
        ino: m.ino(),
        size: m.len(),
        is_file: m.file_type().is_file(),
    })
}

/// `statx(dirfd, path, flags | AT_STATX_FORCE_SYNC, STATX_BASIC_STATS)` as the raw syscall:
/// glibc's statx() wrapper is 2.28+ (musl's 1.2.5+), above the binaries' 2.17 floor. ENOSYS
/// (kernel < 4.11, a seccomp filter) is the caller's to answer with a plain stat, as glibc's
/// wrapper would.
#[cfg(target_os = "linux")]
fn statx_force_sync(
    dirfd: libc::c_int,
    path: &std::ffi::CStr,
    flags: libc::c_int,
) -> std::io::Result<libc::statx> {
    // SAFETY: statx is plain old data; all-zero is a valid value for it.
    let mut x: libc::statx = unsafe { std::mem::zeroed() };
    // SAFETY: path is a valid NUL-terminated string, dirfd a descriptor or AT_FDCWD, and x is
    // writable for the call.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_statx,
            dirfd,
            path.as_ptr(),
            flags | libc::AT_STATX_FORCE_SYNC,
            libc::STATX_BASIC_STATS,
            &mut x as *mut libc::statx,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(x)
}

fn dir_attrs_of(meta: &Metadata) -> DirAttrs {
    DirAttrs {
        dev: meta.dev(),
        ino: meta.ino(),
        mtime: mtime_ns(meta),
        atime: meta.atime() as i128 * 1_000_000_000 + meta.atime_nsec() as i128,
    }
}

/// A directory's attributes (following symbolic links, as Node's `fs.stat`); `fresh`: asked
/// of the file server where the client caches attributes (`statx(AT_STATX_FORCE_SYNC)`).
pub fn dir_attrs(path: &str, fresh: bool) -> std::io::Result<DirAttrs> {
    #[cfg(target_os = "linux")]
    if fresh {
        let c = CString::new(std::path::Path::new(path).as_os_str().as_bytes())?;
        match statx_force_sync(libc::AT_FDCWD, &c, 0) {
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {}
            r => {
                let x = r?;
                return Ok(DirAttrs {
                    dev: libc::makedev(x.stx_dev_major, x.stx_dev_minor),
                    ino: x.stx_ino,
                    mtime: x.stx_mtime.tv_sec as i128 * 1_000_000_000 + x.stx_mtime.tv_nsec as i128,
                    atime: x.stx_atime.tv_sec as i128 * 1_000_000_000 + x.stx_atime.tv_nsec as i128,
                });
            }
        }
    }
    let _ = fresh;
    std::fs::metadata(path).map(|m| dir_attrs_of(&m))
}

fn timespec(ns: i128) -> libc::timespec {
    libc::timespec {
        tv_sec: ns.div_euclid(1_000_000_000) as _, // time_t (deprecated alias on musl)
        tv_nsec: ns.rem_euclid(1_000_000_000) as _,
    }
}

/// `utimensat(path, [atime, mtime])`, times in nanoseconds since the epoch.
pub fn set_times_ns(path: &str, atime: i128, mtime: i128) -> std::io::Result<()> {
    let c = CString::new(std::path::Path::new(path).as_os_str().as_bytes())?;
    let times = [timespec(atime), timespec(mtime)];
    // SAFETY: c is a valid NUL-terminated path; the array has the two timespecs utimensat reads.
    if unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Set the times of the directory at `path` to (`atime`, `mtime`) only if it is the one `ours`
/// recognises: checked and touched through one descriptor of it (`O_DIRECTORY|O_NOFOLLOW`,
/// `fstat`, `futimens`), so a call that stalls in between can only touch that directory (SPEC
/// L10e); afterwards `path` must still name it, looked up while the descriptor pins it. Where
/// the directory cannot be opened for reading (a umask without the owner's read bit), the
/// check and the touch go by path.
pub fn touch_dir(
    path: &str,
    mut ours: impl FnMut(&DirAttrs) -> bool,
    atime: i128,
    mtime: i128,
) -> TouchedDir {
    let times = [timespec(atime), timespec(mtime)];
    let dir = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(path);
    let dir = match dir {
        Ok(d) => d,
        Err(e) if gone(&e) => return TouchedDir::NotOurs,
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
            return match dir_attrs(path, false) {
                Ok(a) if ours(&a) => {
                    match set_times_ns(path, atime, mtime).and_then(|()| dir_attrs(path, false)) {
                        Ok(a) => TouchedDir::Done(a),
                        Err(e) if gone(&e) => TouchedDir::NotOurs,
                        Err(e) => TouchedDir::Failed(e),
                    }
                }
                Ok(_) => TouchedDir::NotOurs,
                Err(e) if gone(&e) => TouchedDir::NotOurs,
                Err(e) => TouchedDir::Failed(e),
            }
        }
        Err(e) => return TouchedDir::Failed(e),
    };
    match dir.metadata() {
        Ok(m) if ours(&dir_attrs_of(&m)) => {}
        Ok(_) => return TouchedDir::NotOurs,
        Err(e) => return TouchedDir::Failed(e),
    }
    // SAFETY: the descriptor is open for the call; times is a two-element timespec array.
    if unsafe { libc::futimens(dir.as_raw_fd(), times.as_ptr()) } != 0 {
        return TouchedDir::Failed(std::io::Error::last_os_error());
    }
    let after = match dir.metadata() {
        Ok(m) => dir_attrs_of(&m),
        Err(e) => return TouchedDir::Failed(e),
    };
    let now = std::fs::symlink_metadata(path);
    drop(dir);
    match now {
        Ok(m) if (m.dev(), m.ino()) == (after.dev, after.ino) => TouchedDir::Done(after),
        Ok(_) => TouchedDir::NotOurs,
        Err(e) if gone(&e) => TouchedDir::NotOurs,
        Err(e) => TouchedDir::Failed(e),
    }
}

/// Move the directory `from` to `to` only if nothing is at `to`: Linux `renameat2(…,
/// RENAME_NOREPLACE)` (the raw syscall: glibc's wrapper is 2.28+, above the binaries' 2.17
/// floor), macOS `renamex_np(…, RENAME_EXCL)`. EINVAL / ENOSYS / ENOTSUP where the file system
/// (or kernel) cannot.
pub fn rename_noreplace(from: &str, to: &str) -> std::io::Result<()> {
    let f = CString::new(std::path::Path::new(from).as_os_str().as_bytes())?;
    let t = CString::new(std::path::Path::new(to).as_os_str().as_bytes())?;
    #[cfg(target_os = "linux")]
    {
        const RENAME_NOREPLACE: libc::c_uint = 1;
        // SAFETY: both paths are valid NUL-terminated strings; AT_FDCWD resolves them.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                libc::AT_FDCWD,
                f.as_ptr(),
                libc::AT_FDCWD,
                t.as_ptr(),
                RENAME_NOREPLACE,
            )
        };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
    #[cfg(target_vendor = "apple")]
    {
        // SAFETY: both paths are valid NUL-terminated strings.
        if unsafe { libc::renamex_np(f.as_ptr(), t.as_ptr(), libc::RENAME_EXCL) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
    #[cfg(not(any(target_os = "linux", target_vendor = "apple")))]
    {
        let _ = (f, t);
        Err(std::io::Error::from_raw_os_error(libc::ENOSYS))
    }
}

/// Set the times of `path` to `to` (proper-lockfile's precision probe, on a directory just
/// made and so certainly ours).
pub fn set_times(path: &str, to: SystemTime) -> std::io::Result<()> {
    let c = CString::new(std::path::Path::new(path).as_os_str().as_bytes())?;
    let d = to.duration_since(UNIX_EPOCH).unwrap_or_default();
    let t = libc::timespec {
        tv_sec: d.as_secs() as _, // time_t (whose alias the libc crate deprecates on musl)
        tv_nsec: d.subsec_nanos() as _,
    };
    // SAFETY: c is a valid NUL-terminated path; the array has the two timespecs utimensat reads.
    if unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), [t, t].as_ptr(), 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The path (or one of its folders) is not there, or no longer a directory.
fn gone(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP)
    )
}

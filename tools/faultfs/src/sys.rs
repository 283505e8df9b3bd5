//! The system calls std has no safe form for, on paths and descriptors of the backing folder.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

fn cstr(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn name_cstr(n: &OsStr) -> io::Result<CString> {
    CString::new(n.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `open(2)` with the caller's flags passed as they are (std refuses some combinations the
/// kernel accepts, e.g. `O_TRUNC` on a read-only open).
pub fn open(path: &Path, flags: libc::c_int, mode: u32) -> io::Result<File> {
    let c = cstr(path)?;
    // SAFETY: c is a valid NUL-terminated path; open has no other memory arguments.
    let fd = unsafe { libc::open(c.as_ptr(), flags | libc::O_CLOEXEC, mode as libc::c_uint) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by open and is owned by nobody else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// `renameat2(2)` between two directories given by descriptor.
pub fn renameat2(
    from_dir: &File,
    from: &OsStr,
    to_dir: &File,
    to: &OsStr,
    flags: u32,
) -> io::Result<()> {
    let (a, b) = (name_cstr(from)?, name_cstr(to)?);
    // SAFETY: both descriptors are open; a and b are valid NUL-terminated names.
    check(unsafe {
        libc::renameat2(
            from_dir.as_raw_fd(),
            a.as_ptr(),
            to_dir.as_raw_fd(),
            b.as_ptr(),
            flags,
        )
    })
}

/// The target of the symbolic link `node` (an `O_PATH` descriptor of the link itself).
pub fn readlink(node: &File) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: the empty path is NUL-terminated; buf is writable for buf.len() bytes.
    let n = unsafe {
        libc::readlinkat(
            node.as_raw_fd(),
            c"".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// A new name `name` in `dir` for the file `node` is (an `O_PATH` descriptor).
pub fn link(node: &File, dir: &File, name: &OsStr) -> io::Result<()> {
    let n = name_cstr(name)?;
    // SAFETY: descriptors are open; the empty path and n are NUL-terminated.
    check(unsafe {
        libc::linkat(
            node.as_raw_fd(),
            c"".as_ptr(),
            dir.as_raw_fd(),
            n.as_ptr(),
            libc::AT_EMPTY_PATH,
        )
    })
}

/// `mknodat(2)`.
pub fn mknod(dir: &File, name: &OsStr, mode: u32, rdev: u32) -> io::Result<()> {
    let n = name_cstr(name)?;
    // SAFETY: dir is open and n NUL-terminated.
    check(unsafe {
        libc::mknodat(
            dir.as_raw_fd(),
            n.as_ptr(),
            mode as libc::mode_t,
            libc::dev_t::from(rdev),
        )
    })
}

/// One timestamp for [`utimens`]: a time, now, or unchanged.
#[derive(Clone, Copy)]
pub enum Stamp {
    At(i64, i64),
    Now,
    Omit,
}

/// `utimensat(2)` on `path` (following a final symbolic link: the /proc path of a node).
pub fn utimens(path: &Path, atime: Stamp, mtime: Stamp) -> io::Result<()> {
    let c = cstr(path)?;
    let ts = |s: Stamp| match s {
        Stamp::At(sec, nsec) => libc::timespec {
            tv_sec: sec as libc::time_t,
            tv_nsec: nsec as _,
        },
        Stamp::Now => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW as _,
        },
        Stamp::Omit => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT as _,
        },
    };
    let times = [ts(atime), ts(mtime)];
    // SAFETY: c is NUL-terminated; times points to two timespecs.
    check(unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), 0) })
}

/// `faccessat(2)` on `path`.
pub fn access(path: &Path, mask: i32) -> io::Result<()> {
    let c = cstr(path)?;
    // SAFETY: c is NUL-terminated.
    check(unsafe { libc::faccessat(libc::AT_FDCWD, c.as_ptr(), mask, 0) })
}

/// `fstatvfs(2)`.
pub fn statvfs(file: &File) -> io::Result<libc::statvfs> {
    // SAFETY: statvfs is plain old data; all-zero is a valid value for it.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is open and s writable.
    check(unsafe { libc::fstatvfs(file.as_raw_fd(), &mut s) })?;
    Ok(s)
}

/// Raise the open-file limit to its hard maximum (every node the kernel knows holds a descriptor).
pub fn raise_nofile() {
    // SAFETY: rlimit is plain old data; all-zero is a valid value for it.
    let mut r: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: r is writable.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0 {
        r.rlim_cur = r.rlim_max;
        // SAFETY: r is a valid rlimit.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) };
    }
}

/// Create files with exactly the mode the caller asked for (the kernel applies its umask).
pub fn clear_umask() {
    // SAFETY: umask only sets the process's mask.
    unsafe { libc::umask(0) };
}

/// Detach the mount at `path` now; it goes once nothing uses it (`umount2(MNT_DETACH)`).
pub fn lazy_unmount(path: &Path) -> io::Result<()> {
    let c = cstr(path)?;
    // SAFETY: c is NUL-terminated.
    check(unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) })
}

/// Block until process `pid` has exited (a pidfd becomes readable); Err when it cannot be
/// watched (then the caller falls back to polling).
pub fn wait_exit(pid: i32) -> io::Result<()> {
    // SAFETY: pidfd_open takes a pid and flags, no memory.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by pidfd_open and is owned by nobody else.
    let file = unsafe { File::from_raw_fd(fd as libc::c_int) };
    let mut p = libc::pollfd {
        fd: file.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: p is one valid pollfd.
        let r = unsafe { libc::poll(&mut p, 1, -1) };
        if r > 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if r < 0 && e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

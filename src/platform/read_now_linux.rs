//! Reads the JS thread may make itself, because the kernel refuses instead of waiting (Linux).
//!
//! A `readEntry` of a small file whose directory and pages are cached costs a few microseconds
//! of syscalls, but a hop to libuv's pool and back costs ~45 µs on a small VM. So the file is
//! first read with the kernel's non-blocking forms, the ones io_uring issues inline before it
//! punts work to a thread: `openat2(RESOLVE_CACHED)` + `O_NONBLOCK` (fails with EAGAIN when a
//! path component is not in the dentry cache or needs revalidation) and `preadv2(RWF_NOWAIT)`
//! (fails with EAGAIN when a page is not in the page cache). Any refusal sends the read to the
//! pool, which makes it the ordinary way.
//!
//! It is tried only in directories learned off the JS thread ([`learn`]) to be on a file system
//! whose files are local: a disk file system that honours `RWF_NOWAIT`, or a memory one (tmpfs,
//! ramfs), whose reads only touch memory. Network and FUSE file systems are never read here,
//! since their `fstat` or `read` may wait for a server. On a disk file system a read that would
//! update the access time is left to the pool too (it dirties the inode, which may wait for the
//! journal), and so are all reads on a `strictatime` mount.

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// What a read on the JS thread found.
pub enum ReadNow {
    /// The file's bytes.
    Bytes(Vec<u8>),
    /// The file is certainly absent, or not a regular file: the pool's read would find nothing.
    Absent,
    /// The read would have to wait, or was not tried: make it on the pool.
    WouldBlock,
}

/// Files larger than this are read on the pool: their parse alone is a long stretch of the JS
/// thread, and process-matrix entries are a few KiB.
const MAX_BYTES: u64 = 64 * 1024;

/// How many directories are remembered (a host uses one or two agent directories).
const MAX_DIRS: usize = 16;

#[derive(Clone, Copy)]
enum Kind {
    /// A disk file system: reads pass `RWF_NOWAIT`.
    Disk,
    /// tmpfs or ramfs: pages live in memory (tmpfs refuses `RWF_NOWAIT` with EOPNOTSUPP).
    Memory,
    /// A disk file system whose reads refused `RWF_NOWAIT` (EOPNOTSUPP, e.g. an overlayfs over
    /// such a file system): never tried again, and never learned again.
    Refused,
}

/// Whether a read may update the file's access time (the mount's atime mode): on a disk file
/// system that dirties the inode, which can wait for the journal, so such reads go to the pool.
#[derive(Clone, Copy, PartialEq)]
enum Atime {
    /// `noatime`, or a memory file system (no journal to wait for).
    Never,
    /// `relatime`: only when the access time is not after the change and modification times,
    /// or is a day old.
    Relative,
}

struct Known {
    dir: String,
    dev: u64,
    kind: Kind,
    atime: Atime,
}

static KNOWN: Mutex<Vec<Known>> = Mutex::new(Vec::new());

/// Set once `openat2` or `RESOLVE_CACHED` is missing (kernel < 5.12, or a seccomp filter).
static UNSUPPORTED: AtomicBool = AtomicBool::new(false);

fn dir_of(path: &str) -> Option<&str> {
    path.rfind('/')
        .map(|i| &path[..i])
        .filter(|d| !d.is_empty())
}

fn known(dir: &str) -> Option<(u64, Kind, Atime)> {
    let known = KNOWN.lock().unwrap_or_else(|p| p.into_inner());
    known
        .iter()
        .find(|k| k.dir == dir)
        .map(|k| (k.dev, k.kind, k.atime))
}

/// Mark `dir` as never to be read on the JS thread (its reads refuse `RWF_NOWAIT`).
fn refuse(dir: &str) {
    let mut known = KNOWN.lock().unwrap_or_else(|p| p.into_inner());
    for k in known.iter_mut().filter(|k| k.dir == dir) {
        k.kind = Kind::Refused;
    }
}

fn forget(dir: &str) {
    let mut known = KNOWN.lock().unwrap_or_else(|p| p.into_inner());
    known.retain(|k| k.dir != dir);
}

/// ramfs's `statfs` magic (linux/magic.h; the libc crate does not name it).
const RAMFS_MAGIC: libc::c_long = 0x8584_58f6;

/// `statvfs` mount flags (linux/statfs.h; the libc crate names them for glibc only).
const ST_NOATIME: u64 = 1024;
const ST_RELATIME: u64 = 4096;

/// The kind of file system `statfs` reports, when its files may be read on the JS thread.
fn kind_of(fs_type: libc::c_long) -> Option<Kind> {
    match fs_type {
        libc::TMPFS_MAGIC | RAMFS_MAGIC => Some(Kind::Memory),
        libc::EXT4_SUPER_MAGIC
        | libc::XFS_SUPER_MAGIC
        | libc::BTRFS_SUPER_MAGIC
        | libc::F2FS_SUPER_MAGIC
        | libc::OVERLAYFS_SUPER_MAGIC => Some(Kind::Disk),
        _ => None,
    }
}

/// Off the JS thread, after a pool read of `path`: note whether its directory's files may be
/// read on the JS thread from now on. Costs three syscalls the first time a directory is seen.
pub fn learn(path: &str) {
    if UNSUPPORTED.load(Ordering::Relaxed) {
        return;
    }
    let Some(dir) = dir_of(path) else { return };
    if known(dir).is_some() {
        return;
    }
    let Ok(c) = std::ffi::CString::new(dir) else {
        return;
    };
    // SAFETY: statfs is plain integers, for which zero is a valid value.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `fs` a statfs buffer the call fills.
    if unsafe { libc::statfs(c.as_ptr(), &mut fs) } != 0 {
        return;
    }
    let Some(kind) = kind_of(fs.f_type as libc::c_long) else {
        return;
    };
    // SAFETY: statvfs is plain integers, for which zero is a valid value.
    let mut vfs: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as for statfs above; statvfs adds the mount flags statfs's libc type leaves out.
    if unsafe { libc::statvfs(c.as_ptr(), &mut vfs) } != 0 {
        return;
    }
    let flags = vfs.f_flag as u64;
    let atime = match kind {
        Kind::Memory => Atime::Never,
        _ if flags & ST_NOATIME != 0 => Atime::Never,
        _ if flags & ST_RELATIME != 0 => Atime::Relative,
        // strictatime: nearly every read updates the access time.
        _ => return,
    };
    let Ok(meta) = std::fs::metadata(dir) else {
        return;
    };
    let mut known = KNOWN.lock().unwrap_or_else(|p| p.into_inner());
    if known.iter().any(|k| k.dir == dir) {
        return;
    }
    if known.len() >= MAX_DIRS {
        known.remove(0);
    }
    known.push(Known {
        dir: dir.to_owned(),
        dev: meta.dev(),
        kind,
        atime,
    });
}

/// `openat2(dir, path, flags | O_CLOEXEC, resolve)`; `dir` is `AT_FDCWD` or an open directory.
fn openat2(dir: i32, path: &std::ffi::CStr, flags: i32, resolve: u64) -> Result<File, i32> {
    // SAFETY: open_how is plain integers; zero is "no flags" for each.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = (flags | libc::O_CLOEXEC) as u64;
    how.resolve = resolve;
    // SAFETY: a valid path and `open_how` of the size passed; the fd returned is ours to own.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir as libc::c_long,
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    if fd < 0 {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        if matches!(errno, libc::ENOSYS | libc::EINVAL | libc::EPERM) {
            // openat2 or RESOLVE_CACHED missing (kernel < 5.12, qemu-user, a seccomp filter).
            UNSUPPORTED.store(true, Ordering::Relaxed);
        }
        return Err(errno);
    }
    // SAFETY: the kernel just returned this descriptor to us.
    Ok(unsafe { File::from_raw_fd(fd as i32) })
}

/// `openat2(path, O_RDONLY | O_NONBLOCK, RESOLVE_CACHED)`.
fn open_cached(path: &std::ffi::CStr) -> Result<File, i32> {
    openat2(
        libc::AT_FDCWD,
        path,
        libc::O_RDONLY | libc::O_NONBLOCK,
        libc::RESOLVE_CACHED,
    )
}

/// `preadv2(fd, buf, offset, RWF_NOWAIT)` for disk files, plain `pread` for memory ones.
fn read_at(f: &File, buf: &mut [u8], offset: u64, kind: Kind) -> std::io::Result<usize> {
    let iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let flags = match kind {
        Kind::Memory => 0,
        _ => libc::RWF_NOWAIT,
    };
    // SAFETY: one iovec over `buf`, which outlives the call. On 64-bit targets the whole offset
    // goes in `pos_l` (the kernel shifts `pos_h` out).
    let n = unsafe {
        libc::syscall(
            libc::SYS_preadv2,
            f.as_raw_fd() as libc::c_long,
            &iov as *const libc::iovec,
            1 as libc::c_long,
            offset as libc::c_long,
            0 as libc::c_long,
            flags as libc::c_long,
        )
    };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(n as usize)
}

/// Whether a read would update the access time under `relatime` (the kernel's
/// `relatime_need_update`): the access time is not after the modification or change time, or is
/// at least a day old. A freshly written entry needs one such read; it is left to the pool.
fn relatime_updates(meta: &std::fs::Metadata) -> bool {
    let atime = (meta.atime(), meta.atime_nsec());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    (meta.mtime(), meta.mtime_nsec()) >= atime
        || (meta.ctime(), meta.ctime_nsec()) >= atime
        || now - atime.0 >= 24 * 60 * 60
}

/// Read `path` on the calling thread if the kernel can answer without waiting.
pub fn read_now(path: &str) -> ReadNow {
    if UNSUPPORTED.load(Ordering::Relaxed) {
        return ReadNow::WouldBlock;
    }
    let Some(dir) = dir_of(path) else {
        return ReadNow::WouldBlock;
    };
    let Some((dev, kind, atime)) = known(dir) else {
        return ReadNow::WouldBlock;
    };
    if let Kind::Refused = kind {
        return ReadNow::WouldBlock;
    }
    let Ok(c) = std::ffi::CString::new(path) else {
        return ReadNow::WouldBlock;
    };
    let f = match open_cached(&c) {
        Ok(f) => f,
        // A cached negative entry, or a cached non-directory on the way: certain answers.
        Err(libc::ENOENT) | Err(libc::ENOTDIR) => return ReadNow::Absent,
        Err(_) => return ReadNow::WouldBlock,
    };
    let Ok(meta) = f.metadata() else {
        return ReadNow::WouldBlock;
    };
    if meta.dev() != dev {
        // Something else is mounted there now, or the entry links elsewhere: learn again.
        forget(dir);
        return ReadNow::WouldBlock;
    }
    if !meta.file_type().is_file() {
        return ReadNow::Absent;
    }
    if atime == Atime::Relative && relatime_updates(&meta) {
        return ReadNow::WouldBlock;
    }
    let size = meta.len();
    if size == 0 || size > MAX_BYTES {
        return ReadNow::WouldBlock;
    }
    // As the pool's read does (super::read_sized); EAGAIN means a page is not cached.
    match super::read_sized(size as usize, |buf, offset| read_at(&f, buf, offset, kind)) {
        Ok(bytes) => ReadNow::Bytes(bytes),
        Err(e) => {
            if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
                refuse(dir);
            }
            ReadNow::WouldBlock
        }
    }
}

/// Whether nothing is at `path` (a lock directory) now, learned without waiting: true only when
/// its directory was learned ([`learn`]), is still on the device recorded then, and the kernel
/// answers from memory that the name is absent. On a disk file system that is a cached negative
/// dentry (`RESOLVE_CACHED`; kept after the lock's `rmdir`); tmpfs and ramfs keep no negative
/// dentries, so there the name is looked up plainly, in memory. False whenever unsure.
pub fn absent_now(path: &str) -> bool {
    if UNSUPPORTED.load(Ordering::Relaxed) {
        return false;
    }
    let Some(dir) = dir_of(path) else {
        return false;
    };
    let Some((dev, kind, _)) = known(dir) else {
        return false;
    };
    let resolve = match kind {
        Kind::Disk => libc::RESOLVE_CACHED,
        Kind::Memory => 0,
        Kind::Refused => return false,
    };
    let name = &path[dir.len() + 1..];
    if name.is_empty() || name == "." || name == ".." {
        return false;
    }
    let (Ok(cdir), Ok(cname)) = (std::ffi::CString::new(dir), std::ffi::CString::new(name)) else {
        return false;
    };
    let Ok(d) = openat2(
        libc::AT_FDCWD,
        &cdir,
        libc::O_PATH | libc::O_DIRECTORY,
        libc::RESOLVE_CACHED,
    ) else {
        return false;
    };
    match d.metadata() {
        Ok(meta) if meta.dev() == dev => {}
        Ok(_) => {
            forget(dir);
            return false;
        }
        Err(_) => return false,
    }
    // One name inside a directory verified to be on the learned file system.
    matches!(
        openat2(
            d.as_raw_fd(),
            &cname,
            libc::O_PATH | libc::O_NOFOLLOW,
            resolve
        ),
        Err(libc::ENOENT)
    )
}

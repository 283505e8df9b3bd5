//! File-system primitives on Windows, matching what libuv (and so Node) does there.

use std::fs::{File, FileTimes, Metadata, OpenOptions};
use std::io::{Seek, SeekFrom};
use std::os::windows::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::os::windows::io::AsRawHandle;
use std::time::{Duration, SystemTime};

use windows_sys::Win32::Storage::FileSystem::{
    GetFileInformationByHandle, BY_HANDLE_FILE_INFORMATION, FILE_ATTRIBUTE_READONLY,
    FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_OPEN_REPARSE_POINT, FILE_READ_ATTRIBUTES,
    FILE_WRITE_ATTRIBUTES,
};

use crate::fserror::os_error;

/// 100 ns intervals between 1601-01-01 (FILETIME epoch) and 1970-01-01.
const FILETIME_UNIX_OFFSET: u64 = 116_444_736_000_000_000;

/// libuv's create mode on Windows: a mode without the owner-write bit (0o200) makes the new
/// file read-only; nothing else of the mode applies.
pub fn set_create_mode(opts: &mut OpenOptions, mode: u32) {
    if mode & 0o200 == 0 {
        opts.attributes(FILE_ATTRIBUTE_READONLY);
    }
}

/// B19 on win32: rename over the target, retrying EPERM/EACCES/EBUSY (a reader or virus
/// scanner holding the target open) up to 9 more times after waits of min(10·2^k, 200) ms.
///
/// Renames onto one target from this process are serialized first: Windows refuses a
/// replace while another replace of the same file is in flight (EPERM), and the async API can
/// run many writes of one file on parallel threads, where Node runs at most four.
pub fn rename_replace(from: &str, to: &str) -> std::io::Result<()> {
    let _turn = target_turn(to);
    let mut k = 0u32;
    loop {
        match std::fs::rename(from, to) {
            Ok(()) => return Ok(()),
            Err(e) if k < 9 && matches!(os_error(&e).0, "EPERM" | "EACCES" | "EBUSY") => {
                std::thread::sleep(Duration::from_millis((10u64 << k).min(200)));
                k += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

/// One of 64 striped locks chosen by the (case-folded) target path.
fn target_turn(to: &str) -> std::sync::MutexGuard<'static, ()> {
    use std::hash::{Hash, Hasher};
    static STRIPES: [std::sync::Mutex<()>; 64] = [const { std::sync::Mutex::new(()) }; 64];
    let mut h = std::collections::hash_map::DefaultHasher::new();
    to.to_lowercase().hash(&mut h);
    STRIPES[(h.finish() % 64) as usize]
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Open for reading (Windows has no FIFOs at ordinary paths; named pipes live under `\\.\pipe`).
pub fn open_read_nonblocking(path: &str) -> std::io::Result<File> {
    OpenOptions::new().read(true).open(path)
}

/// Positioned reads with the Unix `FileExt` signature and semantics: the file cursor is left
/// where it was (Windows' positioned `ReadFile` moves it, and callers mix positioned reads
/// with sequential ones on the same handle).
pub trait FileReadAt {
    /// Fill `buf` from `offset`; `UnexpectedEof` when the file ends first.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()>;
}

impl FileReadAt for File {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        let mut handle = self;
        let cursor = handle.stream_position()?;
        let result = read_exact_at_moving(self, buf, offset);
        handle.seek(SeekFrom::Start(cursor))?;
        result
    }
}

fn read_exact_at_moving(file: &File, mut buf: &mut [u8], mut offset: u64) -> std::io::Result<()> {
    while !buf.is_empty() {
        match file.seek_read(buf, offset) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => {
                buf = &mut buf[n..];
                offset += n as u64;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// FILETIME (100 ns since 1601) → (seconds, nanoseconds) since the epoch, as libuv converts.
fn filetime_to_unix(ft: u64) -> (i64, i64) {
    let t = ft as i64 - FILETIME_UNIX_OFFSET as i64;
    (t.div_euclid(10_000_000), t.rem_euclid(10_000_000) * 100)
}

/// Put a raw directory listing in the order Node's `readdir` returns (K1): on Windows libuv
/// keeps the file system's own order (NTFS: by upper-cased name), which `read_dir` also gives.
pub fn node_readdir_order(_names: &mut [std::ffi::OsString]) {}

/// Node's `Stats#mtimeMs` from the last-write FILETIME.
pub fn mtime_ms(meta: &Metadata) -> f64 {
    let (sec, nsec) = filetime_to_unix(meta.last_write_time());
    sec as f64 * 1e3 + nsec as f64 / 1e6
}

/// Modification time in nanoseconds since the epoch.
pub fn mtime_ns(meta: &Metadata) -> i128 {
    let (sec, nsec) = filetime_to_unix(meta.last_write_time());
    sec as i128 * 1_000_000_000 + nsec as i128
}

pub use super::{Facts, Stamp};

/// The facts of an open file (Windows clients of a share ask the server at open).
pub fn fresh_facts(f: &File) -> std::io::Result<Facts> {
    let m = f.metadata()?;
    Ok(Facts {
        ino: 0,
        size: m.len(),
        is_file: m.file_type().is_file(),
    })
}

/// Open a directory (or file) for its attributes, without following a final reparse point,
/// sharing read, write and delete (std's default) so a taker's removal is never refused.
fn open_attributes(path: &str, access: u32) -> std::io::Result<File> {
    OpenOptions::new()
        .access_mode(access)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)
}

/// The stamp of an open handle.
fn handle_stamp(f: &File) -> std::io::Result<Stamp> {
    // SAFETY: all-zero is a valid BY_HANDLE_FILE_INFORMATION.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: the handle is open for the call's duration; info is writable.
    if unsafe { GetFileInformationByHandle(f.as_raw_handle() as _, &mut info) } == 0 {
        return Err(std::io::Error::last_os_error());
    }
    let ft = ((info.ftLastWriteTime.dwHighDateTime as u64) << 32)
        | info.ftLastWriteTime.dwLowDateTime as u64;
    let (sec, nsec) = filetime_to_unix(ft);
    Ok((
        info.dwVolumeSerialNumber as u64,
        ((info.nFileIndexHigh as u64) << 32) | info.nFileIndexLow as u64,
        sec as i128 * 1_000_000_000 + nsec as i128,
    ))
}

/// The stamp of what `path` names.
pub fn stamp_of(path: &str) -> std::io::Result<Stamp> {
    handle_stamp(&open_attributes(path, FILE_READ_ATTRIBUTES)?)
}

pub use super::{DirAttrs, TouchedDir};

fn system_time(ns: i128) -> SystemTime {
    if ns >= 0 {
        SystemTime::UNIX_EPOCH + Duration::from_nanos(ns.min(u64::MAX as i128) as u64)
    } else {
        SystemTime::UNIX_EPOCH - Duration::from_nanos((-ns).min(u64::MAX as i128) as u64)
    }
}

/// The attributes of an open handle.
fn handle_attrs(f: &File) -> std::io::Result<DirAttrs> {
    // SAFETY: all-zero is a valid BY_HANDLE_FILE_INFORMATION.
    let mut info: BY_HANDLE_FILE_INFORMATION = unsafe { std::mem::zeroed() };
    // SAFETY: the handle is open for the call's duration; info is writable.
    if unsafe { GetFileInformationByHandle(f.as_raw_handle() as _, &mut info) } == 0 {
        return Err(std::io::Error::last_os_error());
    }
    let ns = |hi: u32, lo: u32| {
        let (sec, nsec) = filetime_to_unix(((hi as u64) << 32) | lo as u64);
        sec as i128 * 1_000_000_000 + nsec as i128
    };
    Ok(DirAttrs {
        dev: info.dwVolumeSerialNumber as u64,
        ino: ((info.nFileIndexHigh as u64) << 32) | info.nFileIndexLow as u64,
        mtime: ns(
            info.ftLastWriteTime.dwHighDateTime,
            info.ftLastWriteTime.dwLowDateTime,
        ),
        atime: ns(
            info.ftLastAccessTime.dwHighDateTime,
            info.ftLastAccessTime.dwLowDateTime,
        ),
    })
}

/// A directory's attributes (Windows has no client attribute cache to bypass).
pub fn dir_attrs(path: &str, _fresh: bool) -> std::io::Result<DirAttrs> {
    handle_attrs(&open_attributes(path, FILE_READ_ATTRIBUTES)?)
}

/// Set the access and modification times of `path` (ns since the epoch).
pub fn set_times_ns(path: &str, atime: i128, mtime: i128) -> std::io::Result<()> {
    open_attributes(path, FILE_WRITE_ATTRIBUTES)?.set_times(
        FileTimes::new()
            .set_accessed(system_time(atime))
            .set_modified(system_time(mtime)),
    )
}

/// Set the times of the directory at `path` only if it is the one `ours` recognises: checked
/// and touched through one handle (SPEC L10e); afterwards `path` must still name it.
pub fn touch_dir(
    path: &str,
    mut ours: impl FnMut(&DirAttrs) -> bool,
    atime: i128,
    mtime: i128,
) -> TouchedDir {
    let dir = match open_attributes(path, FILE_READ_ATTRIBUTES | FILE_WRITE_ATTRIBUTES) {
        Ok(d) => d,
        Err(e) if gone(&e) => return TouchedDir::NotOurs,
        Err(e) => return TouchedDir::Failed(e),
    };
    match handle_attrs(&dir) {
        Ok(a) if ours(&a) => {}
        Ok(_) => return TouchedDir::NotOurs,
        Err(e) => return TouchedDir::Failed(e),
    }
    if let Err(e) = dir.set_times(
        FileTimes::new()
            .set_accessed(system_time(atime))
            .set_modified(system_time(mtime)),
    ) {
        return TouchedDir::Failed(e);
    }
    let after = match handle_attrs(&dir) {
        Ok(a) => a,
        Err(e) => return TouchedDir::Failed(e),
    };
    drop(dir);
    match dir_attrs(path, false) {
        Ok(a) if (a.dev, a.ino) == (after.dev, after.ino) => TouchedDir::Done(after),
        Ok(_) => TouchedDir::NotOurs,
        Err(e) if gone(&e) => TouchedDir::NotOurs,
        Err(e) => TouchedDir::Failed(e),
    }
}

/// Windows: not used (a lock is made at its path there; `ENOSYS` in libuv's terms).
pub fn rename_noreplace(_from: &str, _to: &str) -> std::io::Result<()> {
    Err(std::io::Error::from_raw_os_error(50)) // ERROR_NOT_SUPPORTED
}

/// Set the times of `path` to `to` (the precision probe, on a directory just made).
pub fn set_times(path: &str, to: SystemTime) -> std::io::Result<()> {
    open_attributes(path, FILE_WRITE_ATTRIBUTES)?
        .set_times(FileTimes::new().set_accessed(to).set_modified(to))
}

/// The path is not there (or not any more), or is being deleted.
fn gone(e: &std::io::Error) -> bool {
    matches!(os_error(e).0, "ENOENT" | "ENOTDIR" | "EPERM")
}

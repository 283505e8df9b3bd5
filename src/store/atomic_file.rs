//! Atomic replace (SPEC B19 / §3.3): write a uniquely named temp file next to the target,
//! then rename it over the target, so readers see the old or the new file, never a mix.
//! Durable mode (`PI_NATIVE_FSYNC=1`, W-B1) also fsyncs the temp file and the directory.

use std::fs::OpenOptions;
use std::io::Write;

use super::transient::{self, Op};
use crate::fserror::FsError;
use crate::platform;

/// Whether the nearest existing folder at or above `dir` is on a network or FUSE file system
/// (error paths only).
fn remote_at(dir: &str) -> bool {
    platform::fs_kind::is_remote_folder(std::path::Path::new(dir))
}

/// `fs.mkdirSync(dir, { recursive: true })` with Node's errors, also on a network file system
/// that refuses for a moment: when the walk fails but `dir` is a directory by then (SMB answers
/// EIO for a folder another client just made), it succeeded, as Node's own walk would have
/// found on a local disk; a transient error (`ESTALE`; EIO, EBUSY on a network file system) is
/// tried again (bounded).
pub fn mkdir_p(dir: &str) -> Result<(), FsError> {
    let mut backoff = transient::Backoff::new();
    loop {
        let e = match mkdir_p_walk(dir) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if std::fs::metadata(dir).is_ok_and(|m| m.is_dir()) {
            return Ok(());
        }
        let maybe_transient = e.is("ESTALE") || (e.is("EIO") || e.is("EBUSY")) && remote_at(dir);
        if !maybe_transient || !backoff.wait() {
            return Err(e);
        }
    }
}

/// Node's `path.dirname` of the host platform (SPEC G6).
pub fn dirname(p: &str) -> String {
    crate::nodepath::dirname(p)
}

/// `fs.mkdirSync(dir, { recursive: true })` on Windows: std's recursive create (the exact
/// error walk below is POSIX errno-based).
#[cfg(not(unix))]
fn mkdir_p_walk(dir: &str) -> Result<(), FsError> {
    if std::fs::metadata(dir).is_ok_and(|m| m.is_dir()) {
        return Ok(());
    }
    std::fs::create_dir_all(dir).map_err(|e| FsError::io(&e, "mkdir", dir))
}

#[cfg(unix)]
/// `fs.mkdirSync(dir, { recursive: true })`, with Node's errors: Node walks up on ENOENT and
/// back down, reports every failure against `dir` itself, and turns "a path component is a
/// file" into ENOTDIR (EEXIST only when `dir` itself is a non-directory).
fn mkdir_p_walk(dir: &str) -> Result<(), FsError> {
    // The common case (it exists) costs one stat.
    if std::fs::metadata(dir).is_ok_and(|m| m.is_dir()) {
        return Ok(());
    }
    let fail = |errno: i32| FsError::io(&std::io::Error::from_raw_os_error(errno), "mkdir", dir);
    let mut pending: Vec<String> = vec![dir.to_string()];
    // Node loops forever when a directory's mkdir keeps failing with ENOENT although its parent
    // exists (e.g. under /proc); a second ENOENT for the same path ends the walk instead.
    let mut missing_once: Vec<String> = Vec::new();
    while let Some(next) = pending.pop() {
        let err = match std::fs::create_dir(&next) {
            Ok(()) => continue,
            Err(e) => e.raw_os_error().unwrap_or(libc::EIO),
        };
        match err {
            libc::EACCES | libc::ENOSPC | libc::ENOTDIR | libc::EPERM => return Err(fail(err)),
            libc::ENOENT if missing_once.contains(&next) => return Err(fail(libc::ENOENT)),
            libc::ENOENT => {
                missing_once.push(next.clone());
                let parent = match next.rfind('/') {
                    Some(i) => next[..i].to_string(),
                    None => next.clone(),
                };
                if parent != next {
                    pending.push(next);
                    pending.push(parent);
                } else if pending.is_empty() {
                    return Err(fail(libc::EEXIST));
                }
            }
            _ => match std::fs::metadata(&next) {
                Ok(m) if !m.is_dir() => {
                    let e = if err == libc::EEXIST && !pending.is_empty() {
                        libc::ENOTDIR
                    } else {
                        libc::EEXIST
                    };
                    return Err(fail(e));
                }
                Ok(_) => {}
                Err(e) => return Err(fail(e.raw_os_error().unwrap_or(libc::EIO))),
            },
        }
    }
    Ok(())
}

/// A random UUID v4 in lowercase hex (Node's `crypto.randomUUID()` format), through the `uuid`
/// crate's `fast-rng`: a thread-local CSPRNG seeded from the OS source (getrandom / getentropy
/// / ProcessPrng), so a write does not spend a syscall on it — as Node's `randomUUID()` draws
/// from a cached batch of random bytes.
pub fn random_uuid() -> String {
    uuid::Uuid::new_v4().hyphenated().to_string()
}

/// The temp name of B19: `<filePath>.<pid>.<uuid>.tmp` (filePath as given).
pub fn temp_path(file: &str) -> String {
    format!("{file}.{}.{}.tmp", own_pid(), random_uuid())
}

/// This process's id, asked of the kernel once (a Node process never forks its addon state).
fn own_pid() -> u32 {
    static PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *PID.get_or_init(std::process::id)
}

/// B19: mkdir -p the parent, exclusive-create the temp file (`wx`, mode & ~umask), write,
/// close, rename over `file`; on any failure unlink the temp file and return the first error.
pub fn write_atomic(file: &str, content: &[u8], mode: u32, durable: bool) -> Result<(), FsError> {
    mkdir_p(&dirname(file))?;
    write_atomic_in_existing_dir(file, content, mode, durable)
}

/// [`write_atomic`] when the caller has just made sure the parent directory exists.
pub fn write_atomic_in_existing_dir(
    file: &str,
    content: &[u8],
    mode: u32,
    durable: bool,
) -> Result<(), FsError> {
    write_atomic_published(file, content, mode, durable, &|tmp| {
        rename_retried(tmp, file)
    })
}

/// How the temp file is made visible: renamed over the target directly ([`rename_retried`]),
/// or through a lock ([`crate::store::lock::LockGuard::publish_rename`]), which refuses it when
/// the lock is not ours any more and resolves a rename whose reply was lost.
pub type Publish<'a> = &'a dyn Fn(&str) -> Result<(), FsError>;

/// [`write_atomic_in_existing_dir`] with the rename made through `publish` (handed the temp
/// file's path).
pub fn write_atomic_published(
    file: &str,
    content: &[u8],
    mode: u32,
    durable: bool,
    publish: Publish,
) -> Result<(), FsError> {
    let tmp = temp_path(file);
    let result = write_and_publish(file, &tmp, content, mode, durable, publish);
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn write_and_publish(
    file: &str,
    tmp: &str,
    content: &[u8],
    mode: u32,
    durable: bool,
    publish: Publish,
) -> Result<(), FsError> {
    let mut opts = OpenOptions::new();
    opts.write(true).create_new(true).truncate(true);
    platform::fs::set_create_mode(&mut opts, mode);
    let mut f = opts.open(tmp).map_err(|e| FsError::io(&e, "open", tmp))?;
    f.write_all(content)
        .map_err(|e| FsError::io(&e, "write", tmp))?;
    if durable {
        f.sync_all().map_err(|e| FsError::io(&e, "fsync", tmp))?;
    }
    drop(f);
    publish(tmp)?;
    if durable {
        let dir = dirname(file);
        if let Ok(d) = std::fs::File::open(&dir) {
            d.sync_all().map_err(|e| FsError::io(&e, "fsync", &dir))?;
        }
    }
    Ok(())
}

/// The rename of a write that no lock guards (writeFileAtomic): on a network file system a
/// rename over an entry another client has open may be refused for a moment (SMB: EBUSY,
/// EEXIST, EACCES) and is tried again. One whose reply was lost after it was made (the temp
/// file gone) is done.
fn rename_retried(tmp: &str, file: &str) -> Result<(), FsError> {
    let mut backoff = transient::Backoff::new();
    let remote = std::cell::OnceCell::new();
    loop {
        match platform::fs::rename_replace(tmp, file) {
            Ok(()) => return Ok(()),
            Err(e) => {
                let remote = *remote.get_or_init(|| remote_at(&dirname(file)));
                let again = transient::is_transient(&e, Op::Rename, remote);
                if again
                    && std::fs::symlink_metadata(tmp)
                        .is_err_and(|x| x.kind() == std::io::ErrorKind::NotFound)
                {
                    return Ok(());
                }
                if !(again && backoff.wait()) {
                    return Err(FsError::io(&e, "rename", tmp).with_dest(file));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(not(windows))]
    #[test]
    fn dirname_like_node() {
        assert_eq!(dirname("/a/b/c.json"), "/a/b");
        assert_eq!(dirname("c.json"), ".");
        assert_eq!(dirname("/c"), "/");
        assert_eq!(dirname("a/b/"), "a");
        assert_eq!(dirname("/"), "/");
        assert_eq!(dirname("a//b"), "a");
    }

    #[test]
    fn uuid_shape() {
        let u = random_uuid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert!(matches!(&u[19..20], "8" | "9" | "a" | "b"));
        assert_ne!(u, random_uuid());
    }

    #[test]
    fn writes_replace_and_leave_no_temp() {
        let dir = std::env::temp_dir().join(format!("pi-native-atomic-{}", std::process::id()));
        let file = dir.join("sub/x.json");
        let f = file.to_str().unwrap();
        write_atomic(f, b"a much longer first payload", 0o666, false).unwrap();
        write_atomic(f, b"short", 0o666, true).unwrap();
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "short");
        let names: Vec<_> = std::fs::read_dir(dir.join("sub")).unwrap().collect();
        assert_eq!(names.len(), 1);
        // A failing rename (target is a non-empty directory) leaves no temp behind.
        std::fs::create_dir_all(dir.join("sub/d.json/inner")).unwrap();
        let err =
            write_atomic(dir.join("sub/d.json").to_str().unwrap(), b"x", 0o666, false).unwrap_err();
        assert_eq!(err.code(), "EISDIR");
        assert_eq!(std::fs::read_dir(dir.join("sub")).unwrap().count(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! Where a directory lives: on a local file system, or on a network or FUSE one whose clients
//! cache attributes (NFS, SMB/CIFS, sshfs and every other FUSE file system, 9p, Ceph, Lustre,
//! GPFS, …). On the second kind a `stat` may answer from a cache that is seconds old and a
//! change made by another machine is not announced, so the lock protocol judges staleness
//! there by its own observation (lock.rs, "Network and FUSE file systems") and directory
//! watchers poll. The per-OS probes are in `linux.rs`, `darwin.rs` and `windows.rs`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

#[cfg(target_os = "linux")]
#[path = "linux.rs"]
mod os;

#[cfg(target_vendor = "apple")]
#[path = "darwin.rs"]
mod os;

#[cfg(windows)]
#[path = "windows.rs"]
mod os;

/// What kind of file system holds a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsKind {
    /// True for network and FUSE file systems (attribute caches, no cross-machine events).
    pub remote: bool,
    /// The file system's name as the OS reports it (`ext4`, `nfs`, `fuse`, `smbfs`, …), or a
    /// magic number in hex where the name is not known.
    pub name: String,
}

/// Probe the file system that holds `path` (no cache).
pub fn probe(path: &Path) -> std::io::Result<FsKind> {
    os::probe(path)
}

/// Answers remembered per directory, with the device id they were found on: a directory that
/// became (or stopped being) a mount point since is probed again.
fn cache() -> &'static Mutex<HashMap<PathBuf, (u64, bool)>> {
    static C: OnceLock<Mutex<HashMap<PathBuf, (u64, bool)>>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Directories remembered at once; beyond this the memory starts over (a process touching
/// thousands of folders pays one `statfs` each again, nothing more).
const MAX_REMEMBERED: usize = 1024;

/// Whether `dir`, found on device `dev` (the `stat` the caller already made of it or of a
/// path directly inside it), is on a network or FUSE file system. Remembered per directory;
/// a directory that cannot be probed counts as local, and is probed again next time.
pub fn is_remote(dir: &Path, dev: u64) -> bool {
    let mut c = cache().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&(d, remote)) = c.get(dir) {
        if d == dev {
            return remote;
        }
    }
    drop(c);
    // A probe that fails (a network client answering ESTALE for a moment) is tried again; one
    // that keeps failing counts as local this time and is not remembered.
    let mut probed = probe(dir);
    for _ in 0..3 {
        if probed.is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
        probed = probe(dir);
    }
    let Ok(kind) = probed else {
        return false;
    };
    let remote = kind.remote;
    c = cache().lock().unwrap_or_else(|e| e.into_inner());
    if c.len() >= MAX_REMEMBERED {
        c.clear();
    }
    c.insert(dir.to_path_buf(), (dev, remote));
    remote
}

/// What is remembered of `dir`, without a call: (device, remote).
pub fn remembered(dir: &Path) -> Option<(u64, bool)> {
    cache()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(dir)
        .copied()
}

/// Learn where `dir` lives (one `stat` for its device, one `statfs`), remembered; None when it
/// cannot be looked at.
pub fn learn(dir: &Path) -> Option<(u64, bool)> {
    if let Some(known) = remembered(dir) {
        return Some(known);
    }
    let dev = device_of(dir)?;
    let remote = is_remote(dir, dev);
    remembered(dir).or(Some((dev, remote)))
}

/// [`learn`] of `dir`, or, where it does not exist yet, of its nearest existing folder (not
/// remembered for `dir`: a folder made there is on that folder's file system, unless a mount
/// appears first).
pub fn learn_nearest(dir: &Path) -> Option<(u64, bool)> {
    let mut at = Some(dir);
    while let Some(d) = at {
        if let Some(known) = learn(d) {
            return Some(known);
        }
        at = d.parent();
    }
    None
}

#[cfg(unix)]
fn device_of(dir: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(dir).ok().map(|m| m.dev())
}

#[cfg(windows)]
fn device_of(dir: &Path) -> Option<u64> {
    crate::platform::fs::dir_attrs(&dir.to_string_lossy(), false)
        .ok()
        .map(|a| a.dev)
}

/// Whether `dir` is on a network or FUSE file system: the remembered answer for it if any,
/// else [`learn_nearest`] (a folder not made yet is on its nearest existing folder's file
/// system). False when nothing on the path can be looked at.
pub fn is_remote_folder(dir: &Path) -> bool {
    if let Some(&(_, remote)) = cache().lock().unwrap_or_else(|e| e.into_inner()).get(dir) {
        return remote;
    }
    learn_nearest(dir).is_some_and(|(_, remote)| remote)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_dir_is_local_and_named() {
        let k = probe(&std::env::temp_dir()).unwrap();
        assert!(!k.name.is_empty());
        // The test machines keep their temp folder on a local disk or tmpfs.
        assert!(!k.remote, "{k:?}");
        assert!(probe(Path::new("/definitely/not/here")).is_err());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn procfs_and_tmpfs_are_local() {
        assert_eq!(
            probe(Path::new("/proc")).unwrap(),
            FsKind {
                remote: false,
                name: "proc".into()
            }
        );
    }
}

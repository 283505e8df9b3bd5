//! Whether a folder lives on a network or FUSE file system, where the local kernel's
//! notifications miss what other machines (or a FUSE daemon's other clients) change, so a
//! folder watch there also polls.
//!
//! Interim: `crate::platform::fs_kind` (issue 28) is to answer this for the whole crate; this
//! module's one function is the single call site to switch over to it.

use std::path::Path;

/// True on a network or FUSE file system, false on a local one, None when it cannot be told
/// (the path cannot be looked at).
pub fn notifications_miss_remote_changes(dir: &Path) -> Option<bool> {
    os_is_remote(dir)
}

#[cfg(target_os = "linux")]
fn os_is_remote(dir: &Path) -> Option<bool> {
    use std::os::unix::ffi::OsStrExt;
    // statfs magics (linux/magic.h and the file systems' own headers).
    const REMOTE: &[i64] = &[
        0x6969,      // NFS
        0x517b,      // SMB
        0xff53_4d42, // CIFS
        0xfe53_4d42, // SMB2
        0x6573_5546, // FUSE (sshfs, rclone, s3fs, …)
        0x7375_7245, // CODA
        0x5346_414f, // AFS
        0x6b41_4653, // kAFS
        0x00c3_6400, // CEPH
        0x0102_1997, // 9P
        0x564c,      // NCP
        0x0bd0_0bd0, // Lustre
        0x0116_1970, // GFS2
        0x7461_636f, // OCFS2
        0x47504653,  // GPFS
    ];
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statfs is plain integers, for which zero is a valid value.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `fs` a statfs buffer the call fills.
    if unsafe { libc::statfs(c.as_ptr(), &mut fs) } != 0 {
        return None;
    }
    // f_type's width differs between architectures; the magics are 32-bit values.
    let magic = fs.f_type as i64 & 0xffff_ffff;
    Some(REMOTE.contains(&magic))
}

#[cfg(target_os = "macos")]
fn os_is_remote(dir: &Path) -> Option<bool> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: statfs is plain data, for which zero is a valid value.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `fs` a statfs buffer the call fills.
    if unsafe { libc::statfs(c.as_ptr(), &mut fs) } != 0 {
        return None;
    }
    // MNT_LOCAL is set for local volumes; smbfs, nfs, afpfs, webdav and macFUSE lack it.
    Some(fs.f_flags & libc::MNT_LOCAL as u32 == 0)
}

#[cfg(windows)]
fn os_is_remote(dir: &Path) -> Option<bool> {
    use std::os::windows::ffi::OsStrExt;
    use windows_sys::Win32::Storage::FileSystem::{GetDriveTypeW, GetVolumePathNameW};
    const DRIVE_REMOTE: u32 = 4;
    let wide: Vec<u16> = dir.as_os_str().encode_wide().chain(Some(0)).collect();
    let mut root = [0u16; 1024];
    // SAFETY: `wide` is NUL-terminated; `root` is writable for its whole length.
    if unsafe { GetVolumePathNameW(wide.as_ptr(), root.as_mut_ptr(), root.len() as u32) } == 0 {
        return None;
    }
    // SAFETY: GetVolumePathNameW wrote a NUL-terminated root path.
    Some(unsafe { GetDriveTypeW(root.as_ptr()) } == DRIVE_REMOTE)
}

#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
fn os_is_remote(_dir: &Path) -> Option<bool> {
    None
}

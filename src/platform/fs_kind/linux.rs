//! Linux: `statfs(2)`'s `f_type`, the file system's magic number (linux/magic.h and the file
//! systems' own headers for those outside it).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::FsKind;

/// Network, cluster and FUSE file systems: every client may cache attributes, and a change made
/// through another client is not announced here.
const REMOTE: &[(u32, &str)] = &[
    (0x6969, "nfs"),
    (0x517b, "smb"),
    (0xff53_4d42, "cifs"),
    (0xfe53_4d42, "smb2"),
    (0x6573_5546, "fuse"), // sshfs, rclone, gcsfuse, s3fs, GlusterFS, virtiofs, …
    (0x0102_1997, "9p"),
    (0x00c3_6400, "ceph"),
    (0x0bd0_0bd0, "lustre"),
    (0x4750_4653, "gpfs"),
    (0x5346_414f, "afs"),
    (0x6b41_4653, "kafs"),
    (0x7375_7245, "coda"),
    (0x0000_564c, "ncp"),
    (0x2003_0528, "orangefs"),
    (0x1983_0326, "beegfs"),
    (0xaad7_aaea, "panfs"),
    (0x786f_4256, "vboxsf"),
    (0x7461_636f, "ocfs2"),
    (0x0116_1970, "gfs2"),
];

/// Local file systems worth naming in diagnostics; any other magic is local and named in hex.
const LOCAL: &[(u32, &str)] = &[
    (0xef53, "ext4"),
    (0x5846_5342, "xfs"),
    (0x9123_683e, "btrfs"),
    (0x0102_1994, "tmpfs"),
    (0x2fc1_2fc1, "zfs"),
    (0xf2f5_2010, "f2fs"),
    (0x794c_7630, "overlay"),
    (0x9fa0, "proc"),
    (0x4d44, "vfat"),
    (0x5346_544e, "ntfs"),
];

pub fn probe(path: &Path) -> std::io::Result<FsKind> {
    let c = CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: statfs is plain old data; all-zero is a valid value for it.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid NUL-terminated path and s a writable statfs for the call.
    if unsafe { libc::statfs(c.as_ptr(), &mut s) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // f_type's width differs per architecture; the magics are 32-bit values.
    let magic = s.f_type as u32;
    if let Some((_, name)) = REMOTE.iter().find(|(m, _)| *m == magic) {
        return Ok(FsKind {
            remote: true,
            name: (*name).into(),
        });
    }
    let name = LOCAL
        .iter()
        .find(|(m, _)| *m == magic)
        .map_or_else(|| format!("0x{magic:x}"), |(_, n)| (*n).into());
    Ok(FsKind {
        remote: false,
        name,
    })
}

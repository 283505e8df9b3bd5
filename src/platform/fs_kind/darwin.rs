//! macOS: `statfs(2)`. The kernel clears `MNT_LOCAL` for network file systems (nfs, smbfs,
//! afpfs, webdav); FUSE file systems (macFUSE, FUSE-T) may claim to be local, so their type
//! names count as remote too.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::FsKind;

/// Type-name prefixes of FUSE implementations on macOS.
const FUSE_NAMES: &[&str] = &["macfuse", "osxfuse", "fusefs", "fuse"];

pub fn probe(path: &Path) -> std::io::Result<FsKind> {
    let c = CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: statfs is plain old data; all-zero is a valid value for it.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: c is a valid NUL-terminated path and s a writable statfs for the call.
    if unsafe { libc::statfs(c.as_ptr(), &mut s) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel NUL-terminates f_fstypename within its fixed-size array.
    let name = unsafe { CStr::from_ptr(s.f_fstypename.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let local = s.f_flags & libc::MNT_LOCAL as u32 != 0;
    let fuse = FUSE_NAMES.iter().any(|p| name.starts_with(p));
    Ok(FsKind {
        remote: !local || fuse,
        name,
    })
}

//! Windows: the drive type of the volume that holds the path (`GetVolumePathNameW`, then
//! `GetDriveTypeW`): mapped network drives and UNC shares are `DRIVE_REMOTE`.

use std::os::windows::ffi::OsStrExt;
use std::path::Path;

use windows_sys::Win32::Storage::FileSystem::{
    GetDriveTypeW, GetVolumeInformationW, GetVolumePathNameW,
};

use super::FsKind;

/// GetDriveTypeW's answer for a network volume (WinBase.h).
const DRIVE_REMOTE: u32 = 4;

pub fn probe(path: &Path) -> std::io::Result<FsKind> {
    let wide: Vec<u16> = path.as_os_str().encode_wide().chain(Some(0)).collect();
    let mut root = vec![0u16; wide.len().max(261) + 1];
    // SAFETY: wide is NUL-terminated; root is a writable buffer of the length passed.
    if unsafe { GetVolumePathNameW(wide.as_ptr(), root.as_mut_ptr(), root.len() as u32) } == 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: root now holds a NUL-terminated volume path.
    let remote = unsafe { GetDriveTypeW(root.as_ptr()) } == DRIVE_REMOTE;
    let mut fs_name = [0u16; 64];
    // SAFETY: root is NUL-terminated; the name buffer is writable for the length passed and
    // every other output is optional (null).
    let named = unsafe {
        GetVolumeInformationW(
            root.as_ptr(),
            std::ptr::null_mut(),
            0,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            fs_name.as_mut_ptr(),
            fs_name.len() as u32,
        )
    } != 0;
    let len = fs_name.iter().position(|&c| c == 0).unwrap_or(0);
    let name = if named && len > 0 {
        String::from_utf16_lossy(&fs_name[..len])
    } else if remote {
        "remote".into()
    } else {
        "local".into()
    };
    Ok(FsKind { remote, name })
}

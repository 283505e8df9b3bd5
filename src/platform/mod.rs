//! Operating-system primitives whose implementation differs per platform, behind one API so
//! the capability modules stay platform-neutral: [`fs`] (create modes, atomic rename, file
//! identity, timestamps, positioned reads).

#[cfg(unix)]
#[path = "fs_unix.rs"]
pub mod fs;

#[cfg(windows)]
#[path = "fs_windows.rs"]
pub mod fs;

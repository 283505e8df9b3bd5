//! Operating-system primitives whose implementation differs per platform, behind one API so
//! the capability modules stay platform-neutral: [`fs`] (create modes, atomic rename, file
//! identity, timestamps, positioned reads) and [`read_now`] (reads the JS thread may make
//! because the kernel refuses instead of waiting).

#[cfg(unix)]
#[path = "fs_unix.rs"]
pub mod fs;

#[cfg(windows)]
#[path = "fs_windows.rs"]
pub mod fs;

#[cfg(target_os = "linux")]
#[path = "read_now_linux.rs"]
pub mod read_now;

/// Where the kernel has no read that refuses instead of waiting, every read goes to the pool.
#[cfg(not(target_os = "linux"))]
pub mod read_now {
    /// What a read on the JS thread found (here: never tried).
    pub enum ReadNow {
        /// The file's bytes.
        Bytes(Vec<u8>),
        /// The file is certainly absent.
        Absent,
        /// Make the read on the pool.
        WouldBlock,
    }

    /// Nothing to learn without a non-blocking open.
    pub fn learn(_path: &str) {}

    /// Always [`ReadNow::WouldBlock`].
    pub fn read_now(_path: &str) -> ReadNow {
        ReadNow::WouldBlock
    }
}

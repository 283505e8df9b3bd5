//! Operating-system primitives whose implementation differs per platform, behind one API so
//! the capability modules stay platform-neutral: [`fs`] (create modes, atomic rename, file
//! identity, timestamps, positioned reads), [`fs_kind`] (local, or network/FUSE) and
//! [`read_now`] (reads and lookups the JS thread may make because the kernel refuses instead of
//! waiting), with [`read_sized`], the sized read both make.

#[cfg(unix)]
#[path = "fs_unix.rs"]
pub mod fs;

#[cfg(windows)]
#[path = "fs_windows.rs"]
pub mod fs;

/// A directory's identity and modification time: (device, inode, mtime in nanoseconds) on Unix;
/// on Windows (volume serial number, file index, last-write time in nanoseconds since the epoch).
pub type Stamp = (u64, u64, i128);

/// What a file is, as `fs::fresh_facts` learned it from the file server.
#[derive(Debug, Clone, Copy)]
pub struct Facts {
    /// Inode (file index on Windows; 0 where unknown).
    pub ino: u64,
    pub size: u64,
    pub is_file: bool,
}

/// A directory as one `stat` showed it: device, inode (file index on Windows), and its
/// modification and access times in nanoseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirAttrs {
    pub dev: u64,
    pub ino: u64,
    pub mtime: i128,
    pub atime: i128,
}

/// What `fs::touch_dir` did.
#[derive(Debug)]
pub enum TouchedDir {
    /// The directory was the one recognised and got its new times: as it is now.
    Done(DirAttrs),
    /// The path does not name the directory the caller recognised: nothing was touched.
    NotOurs,
    Failed(std::io::Error),
}

/// Read a file of `size` bytes (the size fstat gave) as Node's `readFile` does: up to that size,
/// stopping early at EOF, retrying interrupted reads. Not `read_to_end`, which asks the kernel for
/// the size and position again (2 more syscalls). `read(buf, offset)` fills `buf` from `offset`;
/// the reads come in order, so a cursor read may ignore `offset`.
pub fn read_sized(
    size: usize,
    mut read: impl FnMut(&mut [u8], u64) -> std::io::Result<usize>,
) -> std::io::Result<Vec<u8>> {
    let mut bytes = vec![0u8; size];
    let mut got = 0;
    while got < size {
        match read(&mut bytes[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    bytes.truncate(got);
    Ok(bytes)
}

pub mod clock;
pub mod fs_kind;

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

    /// Never known without waiting: always false.
    pub fn absent_now(_path: &str) -> bool {
        false
    }
}

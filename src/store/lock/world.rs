//! The one narrow interface between the lock's decisions ([`super::model`], [`super::hold`]) and
//! the world they act on: the file-system calls the protocol makes, each one request to the
//! file system (one syscall, one server round trip), and what came back. Production runs them
//! with real syscalls ([`super::real`]); the simulator runs them against a simulated shared
//! folder with injected faults (`super::sim`, feature `sim`). The decisions never call the
//! file system or a clock themselves: each step of a state machine names the next call and is
//! handed its reply and the time, so both worlds drive the very same code.

use std::time::Duration;

/// One path of the protocol, as the decisions name it; the world knows the strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// `<resolved target>.lock` (L1).
    Lock,
    /// The private directory a lock is prepared in before it is moved to the lock path (on
    /// folders that can move without replacing; [`Op::RenameNoReplace`]). Its name holds a
    /// random UUID: nobody else knows it, so a reply lost on it is resolved by looking.
    Pending,
    /// The store's temp file `<entry>.<pid>.<uuid>.tmp` (B19): only its writer knows its name.
    Temp,
    /// The file the lock protects (the entry), which a publish replaces or removes.
    Target,
}

/// A lock directory as one `stat` showed it. Times in nanoseconds since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attrs {
    pub dev: u64,
    pub ino: u64,
    pub mtime: i128,
    pub atime: i128,
}

/// A file-system call of the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `mkdir(path, 0o777)`: atomic, fails with EEXIST if anything is there.
    Mkdir(Which),
    /// `rmdir(path)`.
    Rmdir(Which),
    /// `stat(path)`; `fresh`: asked of the file server where the client caches attributes.
    Stat { which: Which, fresh: bool },
    /// `utimensat(path, [atime, mtime])`.
    SetTimes {
        which: Which,
        atime: i128,
        mtime: i128,
    },
    /// `renameat2(pending, lock, RENAME_NOREPLACE)` (macOS `renamex_np(RENAME_EXCL)`, Windows
    /// `MoveFileExW` without replace): moves the prepared directory to the lock path only if
    /// nothing is there. EINVAL/ENOSYS/ENOTSUP where the file system cannot.
    RenameNoReplace,
    /// A refresh through one handle of the lock directory: open it, check that it is the one
    /// `ident` names, set its mtime to `mtime` (its atime stays the token) through the handle,
    /// and check that the lock path still names that directory (SPEC L10e: a refresh that
    /// stalls in between can only touch the directory it checked).
    Touch {
        ident: super::model::Ident,
        mtime: i128,
    },
    /// `rename(temp, target)`: publish a write (B19), replacing the target.
    Rename,
    /// `unlink(target)`: publish a removal (B11/B12).
    Unlink,
}

impl Op {
    /// The syscall name Node would report for this call's failure.
    pub fn syscall(&self) -> &'static str {
        match self {
            Op::Mkdir(_) => "mkdir",
            Op::Rmdir(_) => "rmdir",
            Op::Stat { .. } => "stat",
            Op::SetTimes { .. } | Op::Touch { .. } => "utime",
            Op::RenameNoReplace | Op::Rename => "rename",
            Op::Unlink => "rm",
        }
    }

    /// The path the failure names.
    pub fn which(&self) -> Which {
        match self {
            Op::Mkdir(w)
            | Op::Rmdir(w)
            | Op::Stat { which: w, .. }
            | Op::SetTimes { which: w, .. } => *w,
            Op::RenameNoReplace => Which::Pending,
            Op::Touch { .. } => Which::Lock,
            Op::Rename => Which::Temp,
            Op::Unlink => Which::Target,
        }
    }
}

/// How the decisions read a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrKind {
    /// ENOENT (or ENOTDIR on the path): nothing there.
    NotFound,
    /// EEXIST.
    Exists,
    /// The file system cannot do this call (EINVAL/ENOSYS/ENOTSUP for a rename flag).
    Unsupported,
    /// On a network or FUSE folder, an answer that does not say whether the call was made:
    /// the reply may have been lost after the work was done (EIO, ETIMEDOUT, ENOTCONN,
    /// EAGAIN, ESTALE, and SMB's EBUSY/EACCES/EPERM for a directory being removed).
    Unknown,
    /// A definite failure: nothing was done.
    Other,
}

/// A failed call: the OS error (for the Node-shaped error the caller sees) and its reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno {
    /// The raw OS error code (errno on Unix, a Win32 code on Windows).
    pub raw: i32,
    pub kind: ErrKind,
}

/// What a call answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Done (mkdir, rmdir, setting times, the rename).
    Done,
    /// A `stat`'s answer, or what a [`Op::Touch`] left.
    Attrs(Attrs),
    /// [`Op::Touch`]: the path does not name a directory carrying the token (gone, replaced):
    /// nothing of anybody else's was touched.
    NotOurs,
    Failed(Errno),
}

/// The three clocks a decision may read, sampled by the world right before the step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clocks {
    /// Wall-clock time (ns since the epoch): mtimes are compared with it, as proper-lockfile
    /// does (L3).
    pub wall: i128,
    /// Monotonic time that stops during a suspend (`Instant`): the network rule's observation
    /// of another process's lock ages with client caches, which stop too.
    pub mono: Duration,
    /// Monotonic time that counts a suspend (CLOCK_BOOTTIME): a holder's own deadline.
    pub boot: Duration,
}

/// A world the decisions can be run against synchronously: production's [`super::real`], or
/// a test's. (The simulator drives the state machines itself, one call at a time.)
pub trait World {
    /// Make the call and return what it answered.
    fn call(&mut self, op: Op) -> Reply;
    /// The clocks now.
    fn clocks(&self) -> Clocks;
}

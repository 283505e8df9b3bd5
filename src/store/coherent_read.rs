//! Reading a file as the server has it *now*, on network and FUSE file systems (issue 34).
//!
//! Under the lock a CAS must compare against the entry at its path, not against what a client
//! cache remembers of it. Every writer replaces an entry by renaming a new file over it, so an
//! object's content never changes once written: what can be stale is which object a name
//! leads to, and the size a client believes an object has. Measured with two mounts of one
//! folder (one replacing, the other reading at once), a plain `open` + `fstat` + `read`:
//! - GlusterFS and JuiceFS lead the name to the replaced object for up to a second (the kernel's
//!   entry cache; GlusterFS's md-cache answers the kernel's revalidation from its own cache
//!   too), so the read returns the old content: 20 reads of 20;
//! - sshfs and smbnetfs open by path (the right object) but the kernel keeps the old size for a
//!   second: the new content cut at the old length, 20 of 20.
//!
//! What works on all four, and is what this module does: list the folder (a `readdir` goes to
//! the server; FUSE's READDIRPLUS replaces any cached entry that leads elsewhere, and gives the
//! inode the server has for the name), open the file, ask for its attributes with
//! `AT_STATX_FORCE_SYNC` (the size from the server), and accept the read only if the opened
//! object is the one the listing named (same inode, where the listing carries one: sshfs and
//! smbnetfs report none, and open by path anyway). A disagreement, or `ESTALE`, is tried again
//! after a short wait, for at most [`AGREE_WITHIN`]: entry caches hold names for a second by
//! default. Past that the read fails with `ERR_PI_NATIVE_INCOHERENT` rather than answer from
//! a cache. 0 stale reads of 20 on each of the four, with no retry needed.
//!
//! Used only where `platform::fs_kind` says the folder is remote: a local disk pays nothing.

use std::fs::File;
use std::time::{Duration, Instant};

use crate::fserror::FsError;
use crate::platform;

/// How long the listing and the opened file may disagree before the read fails loudly.
pub const AGREE_WITHIN: Duration = Duration::from_millis(3000);

/// Whether coherent reads are made at all. Off only with `PI_NATIVE_TEST_PLAIN_READS=1` in the
/// environment when the addon loads: a hook for `bench/netfs.js`, which measures what they cost
/// (the same calls with plain reads). Nothing else reads that variable.
pub fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("PI_NATIVE_TEST_PLAIN_READS").is_none_or(|v| v != "1"))
}

/// What a coherent read found.
#[derive(Debug)]
pub enum Current {
    /// The file's bytes.
    Bytes(Vec<u8>),
    /// No regular file readable at the path (missing, a directory, a FIFO, not permitted): B3's
    /// "absent".
    Absent,
}

/// Read `path` as the server has it now (remote folders; see the module doc).
pub fn read_current(path: &str) -> Result<Current, FsError> {
    read_verified(path, None)
}

/// [`read_current`] for a file whose folder was just listed (listEntries): `listed_ino` is the
/// inode that listing gave for it, so the first attempt needs no listing of its own.
pub fn read_listed(path: &str, listed_ino: u64) -> Result<Current, FsError> {
    read_verified(path, Some(Some(listed_ino)))
}

/// Inode numbers a listing gives when it does not know (libfuse without `use_ino`: sshfs,
/// smbnetfs): such file systems open by path, so there is nothing to compare.
fn ino_unknown(ino: u64) -> bool {
    ino == 0 || ino == 0xffff_ffff
}

/// The inode the server's listing of `path`'s folder gives for its name: Some(None) when the
/// name is not listed, None when the folder cannot be listed.
fn listed(path: &str) -> Option<Option<u64>> {
    let p = std::path::Path::new(path);
    let (dir, name) = (p.parent()?, p.file_name()?);
    let dir = if dir.as_os_str().is_empty() {
        std::path::Path::new(".")
    } else {
        dir
    };
    let rd = std::fs::read_dir(dir).ok()?;
    for e in rd {
        let Ok(e) = e else { return None };
        if e.file_name() == name {
            return Some(Some(entry_ino(&e)));
        }
    }
    Some(None)
}

#[cfg(unix)]
fn entry_ino(e: &std::fs::DirEntry) -> u64 {
    std::os::unix::fs::DirEntryExt::ino(e)
}

#[cfg(not(unix))]
fn entry_ino(_: &std::fs::DirEntry) -> u64 {
    0 // unknown: Windows shares open by path
}

/// One attempt's verdict.
enum Attempt {
    Done(Current),
    /// The listing and the opened object disagree: try again.
    Again,
    /// The client refused for the moment (ESTALE, EIO): try again.
    Refused(std::io::Error),
}

fn read_verified(path: &str, first: Option<Option<u64>>) -> Result<Current, FsError> {
    read_agreeing(path, first, AGREE_WITHIN, &listed)
}

/// Attempts until the opened object agrees with a listing (`list`), for at most `within`.
fn read_agreeing(
    path: &str,
    first: Option<Option<u64>>,
    within: Duration,
    list: &dyn Fn(&str) -> Option<Option<u64>>,
) -> Result<Current, FsError> {
    let deadline = Instant::now() + within;
    let mut refusals = super::transient::Backoff::new();
    let mut disagreements = super::transient::Backoff::within(within);
    let mut listing = match first {
        Some(l) => Some(l),
        None => list(path),
    };
    loop {
        match attempt(path, listing) {
            Attempt::Done(c) => return Ok(c),
            // A refusal lasts as long as the client's (transient::RETRY_WITHIN), then it is the
            // answer.
            Attempt::Refused(e) => {
                if !refusals.wait() {
                    return Err(FsError::io(&e, "read", path));
                }
            }
            Attempt::Again => {
                if Instant::now() >= deadline || !disagreements.wait() {
                    return Err(FsError::Incoherent {
                        path: path.to_string(),
                    });
                }
            }
        }
        listing = list(path);
    }
}

fn attempt(path: &str, listing: Option<Option<u64>>) -> Attempt {
    let file = match platform::fs::open_read_nonblocking(path) {
        Ok(f) => f,
        // Listed, yet not found: a client that leads the name to a removed object.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && matches!(listing, Some(Some(_))) => {
            return Attempt::Again
        }
        Err(e) if is_stale(&e) || transient_read(&e) => return Attempt::Refused(e),
        Err(_) => return Attempt::Done(Current::Absent),
    };
    let facts = match platform::fs::fresh_facts(&file) {
        Ok(f) => f,
        Err(e) => return after_open(e),
    };
    if !facts.is_file {
        return Attempt::Done(Current::Absent);
    }
    match listing {
        // Opened, yet not listed: a name the client still leads to a removed object.
        Some(None) => return Attempt::Again,
        Some(Some(ino)) if !ino_unknown(ino) && ino != facts.ino => return Attempt::Again,
        _ => {}
    }
    match read_to_end(file, facts.size) {
        Ok(Some(bytes)) => Attempt::Done(Current::Bytes(bytes)),
        // Over the bound of an entry read (W-B9): absent, as an unparsable file.
        Ok(None) => Attempt::Done(Current::Absent),
        Err(e) => after_open(e),
    }
}

/// What an error from a file already opened (its attributes, its content) means.
fn after_open(e: std::io::Error) -> Attempt {
    if is_stale(&e) || transient_read(&e) {
        Attempt::Refused(e)
    } else if e.kind() == std::io::ErrorKind::NotFound {
        // The object was removed since it was opened: another client renamed a new file over
        // the name (GlusterFS answers a read of the replaced file's handle with ENOENT). The
        // entry exists; what its name leads to now is read again.
        Attempt::Again
    } else {
        Attempt::Done(Current::Absent)
    }
}

fn is_stale(e: &std::io::Error) -> bool {
    super::transient::is_transient(e, super::transient::Op::Read, false)
}

fn transient_read(e: &std::io::Error) -> bool {
    super::transient::is_transient(e, super::transient::Op::Read, true)
}

/// The whole file: `size` (the server's) first, then on to the end in case it was more; None
/// past [`super::ENTRY_MAX_BYTES`].
fn read_to_end(mut f: File, size: u64) -> std::io::Result<Option<Vec<u8>>> {
    super::read_bounded(&mut f, size, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_is_there_and_absent_otherwise() {
        let dir = std::env::temp_dir().join(format!("pi-native-coherent-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("e.json");
        let p = f.to_str().unwrap();
        assert!(matches!(read_current(p).unwrap(), Current::Absent));
        std::fs::write(&f, b"{\"a\":1}\n").unwrap();
        match read_current(p).unwrap() {
            Current::Bytes(b) => assert_eq!(b, b"{\"a\":1}\n"),
            other => panic!("{other:?}"),
        }
        // The listing's inode is the one opened: accepted at once.
        let ino = listed(p).unwrap().unwrap();
        assert!(matches!(read_listed(p, ino).unwrap(), Current::Bytes(_)));
        // A directory is absent (B3), not an error.
        std::fs::create_dir(dir.join("d.json")).unwrap();
        assert!(matches!(
            read_current(dir.join("d.json").to_str().unwrap()).unwrap(),
            Current::Absent
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A listing taken before a replacement (handed in, as listEntries does): the opened object
    /// is not the listed one, so the folder is listed again and the new content read.
    #[cfg(unix)]
    #[test]
    fn a_stale_listing_is_taken_again() {
        let dir = std::env::temp_dir().join(format!("pi-native-incoherent-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("e.json");
        let p = f.to_str().unwrap();
        std::fs::write(&f, b"old").unwrap();
        let old = listed(p).unwrap().unwrap();
        std::fs::write(dir.join("n"), b"new").unwrap();
        std::fs::rename(dir.join("n"), &f).unwrap();
        let now = listed(p).unwrap().unwrap();
        assert_ne!(old, now);
        // The old listing once, then fresh ones: the retry agrees.
        match read_listed(p, old).unwrap() {
            Current::Bytes(b) => assert_eq!(b, b"new"),
            other => panic!("{other:?}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// GlusterFS answered a read of an opened file that another client had just replaced with
    /// ENOENT, and `readEntry` said undefined for an entry that existed: such an error is a
    /// reason to read the name again, not an absence. Other errors keep B3's answer.
    #[test]
    fn a_file_gone_after_its_open_is_read_again() {
        let err = |n| std::io::Error::from_raw_os_error(n);
        assert!(matches!(after_open(err(libc::ENOENT)), Attempt::Again));
        assert!(matches!(
            after_open(err(libc::EISDIR)),
            Attempt::Done(Current::Absent)
        ));
        #[cfg(unix)]
        assert!(matches!(after_open(err(libc::ESTALE)), Attempt::Refused(_)));
    }

    /// A client whose listing never agrees with what opens: the read waits for agreement, then
    /// fails loudly rather than answer with an object the folder does not name.
    #[cfg(unix)]
    #[test]
    fn a_listing_that_never_agrees_fails_loudly() {
        let dir = std::env::temp_dir().join(format!("pi-native-never-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("e.json");
        let p = f.to_str().unwrap();
        std::fs::write(&f, b"x").unwrap();
        let started = Instant::now();
        let r = read_agreeing(p, None, Duration::from_millis(300), &|_| Some(Some(12345)));
        assert_eq!(
            r.unwrap_err(),
            FsError::Incoherent {
                path: p.to_string()
            }
        );
        assert!(started.elapsed() >= Duration::from_millis(300));
        // Listed as missing while it opens: the same.
        let r = read_agreeing(p, None, Duration::from_millis(100), &|_| Some(None));
        assert!(r.is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! macOS: one thread blocked in `kevent` over `EVFILT_PROC`/`NOTE_EXIT` per watched pid and
//! `EVFILT_VNODE` per watched folder, plus an `EVFILT_USER` event that tells it to stop.
//!
//! kqueue tells that a folder's listing changed, not which name: the waiter keeps each
//! folder's last listing ([`snapshot`]) and reports the names whose file was added, removed or
//! replaced. Store writes rename a new file into place, which changes the folder; a file
//! rewritten in place (not the store's way) is not seen until the folder changes. A folder on
//! the way to the matrix folder ([`Filter::Child`]) keeps only its one child's signature, so a
//! busy folder (a temp or home folder) costs one `lstat` per change in it. Each watch has its
//! own descriptor: a path watched again after its folder was replaced is another folder. Not FSEvents:
//! it needs the CoreServices framework, and its events come with a latency. Not `notify`'s
//! kqueue backend: for a folder watched non-recursively it guesses the changed name (the first
//! file it does not watch yet) and opens a descriptor for every file it discovers.

use std::collections::HashMap;
use std::ffi::{CString, OsString};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::snapshot::{self, Sig, Snapshot};
use super::{Filter, Fired, OpenError};

/// A folder is known by the descriptor its kqueue event is registered on.
pub(crate) type DirKey = RawFd;
/// kqueue holds one event per pid: the waiter counts the watches of each pid.
pub(crate) type ExitHandle = ();
pub(crate) struct Release;

pub(crate) const DIR_MODE: &str = "kqueue";

pub(crate) fn exit_mode() -> &'static str {
    "kqueue"
}

/// Ident of the stop event.
const STOP: usize = 1;

/// What a folder's watch compares between two looks.
enum Listing {
    /// Every name (a matrix folder).
    All(Snapshot),
    /// One child's signature (a folder on the way), None while it is absent.
    Child(OsString, Option<Sig>),
}

impl Listing {
    fn take(dir: &Path, filter: &Filter) -> std::io::Result<Listing> {
        Ok(match filter {
            Filter::Entries => Listing::All(snapshot::scan(dir)?),
            Filter::Child(name) => Listing::Child(name.clone(), snapshot::stat_one(dir, name)),
        })
    }
}

struct Dir {
    path: PathBuf,
    /// Held open: the folder's event lives as long as this descriptor.
    _fd: OwnedFd,
    listing: Listing,
}

struct Shared {
    kq: OwnedFd,
    dirs: Mutex<HashMap<RawFd, Dir>>,
}

/// The running waiter: its thread, the kqueue, and the watch count of every pid.
pub(crate) struct Waiter {
    shared: Arc<Shared>,
    pids: HashMap<i32, usize>,
    thread: Option<JoinHandle<()>>,
}

fn change(kq: &OwnedFd, ident: usize, filter: i16, flags: u16, fflags: u32) -> std::io::Result<()> {
    // SAFETY: kevent is plain data; zero is a valid value for every field.
    let mut ev: libc::kevent = unsafe { std::mem::zeroed() };
    ev.ident = ident;
    ev.filter = filter;
    ev.flags = flags;
    ev.fflags = fflags;
    // SAFETY: one change from a live struct, no event list.
    let rc = unsafe {
        libc::kevent(
            kq.as_raw_fd(),
            &ev,
            1,
            std::ptr::null_mut(),
            0,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

const VNODE_FLAGS: u32 =
    libc::NOTE_WRITE | libc::NOTE_DELETE | libc::NOTE_RENAME | libc::NOTE_REVOKE | libc::NOTE_LINK;
const GONE_FLAGS: u32 = libc::NOTE_DELETE | libc::NOTE_RENAME | libc::NOTE_REVOKE;

impl Waiter {
    pub(crate) fn start() -> std::io::Result<Waiter> {
        // SAFETY: kqueue() returns a new descriptor or -1.
        let fd = unsafe { libc::kqueue() };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the descriptor was just created and is owned here alone.
        let kq = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sets close-on-exec on our own descriptor.
        unsafe { libc::fcntl(kq.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
        change(
            &kq,
            STOP,
            libc::EVFILT_USER,
            libc::EV_ADD | libc::EV_CLEAR,
            0,
        )?;
        let shared = Arc::new(Shared {
            kq,
            dirs: Mutex::new(HashMap::new()),
        });
        let for_thread = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("pi-native-supervise".into())
            .stack_size(256 * 1024)
            .spawn(move || run(for_thread))?;
        Ok(Waiter {
            shared,
            pids: HashMap::new(),
            thread: Some(thread),
        })
    }

    pub(crate) fn add_exit(&mut self, _id: u64, pid: i32) -> Result<ExitHandle, OpenError> {
        if let Some(n) = self.pids.get_mut(&pid) {
            *n += 1;
            return Ok(());
        }
        let flags = libc::EV_ADD | libc::EV_ONESHOT;
        match change(
            &self.shared.kq,
            pid as usize,
            libc::EVFILT_PROC,
            flags,
            libc::NOTE_EXIT,
        ) {
            Ok(()) => {
                self.pids.insert(pid, 1);
                Ok(())
            }
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Err(OpenError::Gone),
            Err(_) => Err(OpenError::Cannot),
        }
    }

    pub(crate) fn remove_exit(&mut self, pid: i32, _h: ExitHandle, fired: bool) -> Release {
        if let Some(n) = self.pids.get_mut(&pid) {
            *n -= 1;
            if *n == 0 {
                self.pids.remove(&pid);
                if !fired {
                    // Fails (ENOENT) when the event fired meanwhile: nothing to remove then.
                    let _ = change(
                        &self.shared.kq,
                        pid as usize,
                        libc::EVFILT_PROC,
                        libc::EV_DELETE,
                        0,
                    );
                }
            }
        }
        Release
    }

    pub(crate) fn add_dir(&mut self, dir: &Path, filter: &Filter) -> std::io::Result<DirKey> {
        let mut dirs = self.shared.dirs.lock().unwrap_or_else(|e| e.into_inner());
        let c = CString::new(dir.as_os_str().as_bytes())?;
        // SAFETY: `c` is NUL-terminated; O_EVTONLY opens for notifications only (the volume
        // can still be unmounted).
        let raw = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_EVTONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the descriptor was just opened and is owned here alone.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // The event first, then the listing: a change in between fires an event that waits
        // for the `dirs` lock held here and is compared with this listing, so it is either in
        // the listing (made during the call) or reported. Listed the other way round, a change
        // between the two would wait for the folder's next change.
        change(
            &self.shared.kq,
            raw as usize,
            libc::EVFILT_VNODE,
            libc::EV_ADD | libc::EV_CLEAR,
            VNODE_FLAGS,
        )?;
        // Closing `fd` (on failure) removes the event again.
        let listing = Listing::take(dir, filter)?;
        dirs.insert(
            raw,
            Dir {
                path: dir.to_path_buf(),
                _fd: fd,
                listing,
            },
        );
        Ok(raw)
    }

    /// A watch ended (each has its own descriptor, so it is always the last of its key).
    pub(crate) fn remove_dir(&mut self, key: &DirKey, _last: bool) {
        // Closing the descriptor removes its event.
        let mut dirs = self.shared.dirs.lock().unwrap_or_else(|e| e.into_inner());
        dirs.remove(key);
    }

    pub(crate) fn forget_dir(&mut self, key: &DirKey) {
        self.remove_dir(key, true);
    }

    pub(crate) fn stop(mut self) {
        let _ = change(
            &self.shared.kq,
            STOP,
            libc::EVFILT_USER,
            0,
            libc::NOTE_TRIGGER,
        );
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    pub(crate) fn detach(mut self) {
        drop(self.thread.take());
    }

    /// Whether the calling thread is this waiter's own.
    pub(crate) fn owns_current_thread(&self) -> bool {
        self.thread
            .as_ref()
            .is_some_and(|t| t.thread().id() == std::thread::current().id())
    }
}

pub(crate) fn release(_r: Release) {}

/// The waiter's thread: wait, collect what fired, hand it to the registry.
fn run(shared: Arc<Shared>) {
    // SAFETY: kevent is plain data; zero is a valid value.
    let mut events: [libc::kevent; 64] = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: the kqueue is open while `shared` lives; `events` has room for 64 entries.
        let n = unsafe {
            libc::kevent(
                shared.kq.as_raw_fd(),
                std::ptr::null(),
                0,
                events.as_mut_ptr(),
                events.len() as libc::c_int,
                std::ptr::null(),
            )
        };
        if n < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return;
        }
        let mut fired = Vec::new();
        for ev in &events[..n as usize] {
            match ev.filter {
                libc::EVFILT_USER => return,
                libc::EVFILT_PROC => fired.push(Fired::ExitPid(ev.ident as i32)),
                libc::EVFILT_VNODE => {
                    folder_changed(&shared, ev.ident as RawFd, ev.fflags, &mut fired)
                }
                _ => {}
            }
        }
        if !fired.is_empty() && super::dispatch(fired) {
            return;
        }
    }
}

/// A folder's event: gone, or the names whose file changed since its last listing.
fn folder_changed(shared: &Shared, fd: RawFd, fflags: u32, fired: &mut Vec<Fired>) {
    let mut dirs = shared.dirs.lock().unwrap_or_else(|e| e.into_inner());
    let Some(dir) = dirs.get_mut(&fd) else { return };
    if fflags & GONE_FLAGS != 0 {
        fired.push(Fired::Gone(fd));
        return;
    }
    match &mut dir.listing {
        Listing::All(listing) => {
            let Ok(now) = snapshot::scan(&dir.path) else {
                fired.push(Fired::Gone(fd));
                return;
            };
            for (name, structural) in snapshot::diff(listing, &now) {
                fired.push(Fired::Name(fd, name, structural));
            }
            *listing = now;
        }
        Listing::Child(name, was) => {
            let now = snapshot::stat_one(&dir.path, name);
            // Structural only: created, removed, or another folder (inode) under the name.
            if now.map(|s| s.ino) != was.map(|s| s.ino) {
                fired.push(Fired::Name(fd, name.clone(), true));
            }
            *was = now;
        }
    }
}

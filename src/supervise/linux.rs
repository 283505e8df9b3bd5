//! Linux: one thread blocked in `epoll_wait` over a pidfd per watched process (readable once
//! its process has exited, zombies included) and one inotify instance for the folders, plus an
//! eventfd that tells it to stop.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;

use inotify::{EventMask, Inotify, WatchMask, Watches};

use super::{Filter, Fired, OpenError};
use crate::liveness::pidfd_open;

/// A folder is known by its inotify watch descriptor.
pub(crate) type DirKey = inotify::WatchDescriptor;
/// A watched process is known by its pidfd (epoll's data is the watch id).
pub(crate) type ExitHandle = OwnedFd;
/// A pidfd to close outside the registry lock (closing it also leaves the epoll set).
pub(crate) struct Release(OwnedFd);

pub(crate) const DIR_MODE: &str = "inotify";

/// epoll data of the stop eventfd and of the inotify fd (watch ids count up from 1).
const STOP: u64 = u64::MAX;
const INOTIFY: u64 = u64::MAX - 1;

/// What a folder watch asks inotify for: names created, renamed in or out, deleted; the folder
/// itself deleted or moved; for entry files also written and closed. Not IN_OPEN or IN_ACCESS:
/// readers of the folder wake nobody; and a folder on the way (`Filter::Child`, often a busy
/// one such as /tmp or a home folder) is not woken by the files written in it. IN_MASK_ADD:
/// one inode watched for both uses keeps the union.
fn dir_mask(filter: &Filter) -> WatchMask {
    let structural = WatchMask::CREATE
        | WatchMask::MOVED_TO
        | WatchMask::MOVED_FROM
        | WatchMask::DELETE
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
        | WatchMask::ONLYDIR
        | WatchMask::MASK_ADD;
    match filter {
        Filter::Entries => structural | WatchMask::CLOSE_WRITE,
        Filter::Child(_) => structural,
    }
}

/// `pidfd` where the kernel has pidfd_open (Linux ≥ 5.3, not refused by a seccomp filter),
/// else `probe`.
pub(crate) fn exit_mode() -> &'static str {
    static MODE: OnceLock<&'static str> = OnceLock::new();
    MODE.get_or_init(|| {
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        match pidfd_open(me) {
            Ok(_) => "pidfd",
            Err(_) => "probe",
        }
    })
}

struct Shared {
    epoll: OwnedFd,
    stop: OwnedFd,
    watches: Watches,
}

/// The running waiter: its thread and what the registry uses to add and remove watches.
pub(crate) struct Waiter {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

fn check(rc: libc::c_int) -> std::io::Result<libc::c_int> {
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn epoll_add(epoll: &OwnedFd, fd: RawFd, events: u32, data: u64) -> std::io::Result<()> {
    let mut ev = libc::epoll_event { events, u64: data };
    // SAFETY: both fds are open; `ev` is a valid epoll_event for the duration of the call.
    check(unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) })?;
    Ok(())
}

impl Waiter {
    pub(crate) fn start() -> std::io::Result<Waiter> {
        // SAFETY: plain syscalls; each returned fd is owned at once.
        let epoll =
            unsafe { OwnedFd::from_raw_fd(check(libc::epoll_create1(libc::EPOLL_CLOEXEC))?) };
        // SAFETY: as above.
        let stop = unsafe {
            OwnedFd::from_raw_fd(check(libc::eventfd(
                0,
                libc::EFD_CLOEXEC | libc::EFD_NONBLOCK,
            ))?)
        };
        // Non-blocking and close-on-exec.
        let inotify = Inotify::init()?;
        epoll_add(&epoll, stop.as_raw_fd(), libc::EPOLLIN as u32, STOP)?;
        epoll_add(&epoll, inotify.as_raw_fd(), libc::EPOLLIN as u32, INOTIFY)?;
        let shared = Arc::new(Shared {
            epoll,
            stop,
            watches: inotify.watches(),
        });
        let for_thread = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("pi-native-supervise".into())
            .stack_size(128 * 1024)
            .spawn(move || run(for_thread, inotify))?;
        Ok(Waiter {
            shared,
            thread: Some(thread),
        })
    }

    pub(crate) fn add_exit(&mut self, id: u64, pid: i32) -> Result<ExitHandle, OpenError> {
        let fd = match pidfd_open(pid) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return Err(OpenError::Gone),
            // ENOSYS (kernel < 5.3), EPERM (seccomp), EMFILE/ENFILE, EINVAL (a thread id).
            Err(_) => return Err(OpenError::Cannot),
        };
        // One-shot: a pidfd stays readable after its process exits; the watch fires once.
        let events = (libc::EPOLLIN | libc::EPOLLONESHOT) as u32;
        epoll_add(&self.shared.epoll, fd.as_raw_fd(), events, id).map_err(|_| OpenError::Cannot)?;
        Ok(fd)
    }

    pub(crate) fn remove_exit(&mut self, _pid: i32, handle: ExitHandle, _fired: bool) -> Release {
        Release(handle)
    }

    /// inotify watches an inode once per instance: the same folder added again (by another
    /// watch) answers the same descriptor, which the registry then shares.
    pub(crate) fn add_dir(&mut self, dir: &Path, filter: &Filter) -> std::io::Result<DirKey> {
        self.shared.watches.clone().add(dir, dir_mask(filter))
    }

    /// A watch of the folder `key` ended; `last`: no other watch shares the descriptor.
    pub(crate) fn remove_dir(&mut self, key: &DirKey, last: bool) {
        if last {
            // Fails (EINVAL) for a folder already gone; nothing to do then.
            let _ = self.shared.watches.clone().remove(key.clone());
        }
    }

    /// The folder went away or moved: drop its watch (a moved folder's would keep reporting).
    pub(crate) fn forget_dir(&mut self, key: &DirKey) {
        self.remove_dir(key, true);
    }

    /// Stop the thread and wait for it (called with no watch left, outside the lock).
    pub(crate) fn stop(mut self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to the eventfd.
        unsafe { libc::write(self.shared.stop.as_raw_fd(), (&one as *const u64).cast(), 8) };
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// Let the thread end on its own (it is the caller, and returns after this).
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

pub(crate) fn release(r: Release) {
    drop(r.0);
}

/// The waiter's thread: wait, collect what fired, hand it to the registry.
fn run(shared: Arc<Shared>, mut inotify: Inotify) {
    const EMPTY: libc::epoll_event = libc::epoll_event { events: 0, u64: 0 };
    let mut events = [EMPTY; 64];
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        // SAFETY: the epoll fd is open while `shared` lives; `events` has room for 64 entries.
        let n = unsafe {
            libc::epoll_wait(
                shared.epoll.as_raw_fd(),
                events.as_mut_ptr(),
                events.len() as libc::c_int,
                -1,
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
            match ev.u64 {
                STOP => return,
                INOTIFY => {
                    if !read_inotify(&mut inotify, &mut buf, &mut fired) {
                        // Broken: stop listening to it (it would stay readable, waking us
                        // for nothing); exit watches carry on.
                        // SAFETY: both fds are open; EPOLL_CTL_DEL ignores the event pointer.
                        unsafe {
                            libc::epoll_ctl(
                                shared.epoll.as_raw_fd(),
                                libc::EPOLL_CTL_DEL,
                                inotify.as_raw_fd(),
                                std::ptr::null_mut(),
                            )
                        };
                    }
                }
                id => fired.push(Fired::Exit(id)),
            }
        }
        if !fired.is_empty() && super::dispatch(fired) {
            return;
        }
    }
}

/// Drain the inotify queue into `fired`; false when the instance failed (every folder watch is
/// told so).
fn read_inotify(inotify: &mut Inotify, buf: &mut [u8], fired: &mut Vec<Fired>) -> bool {
    loop {
        let events = match inotify.read_events(buf) {
            Ok(events) => events,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return true, // drained
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                fired.push(Fired::Broken(e.raw_os_error().unwrap_or(libc::EIO)));
                return false;
            }
        };
        let mut any = false;
        for ev in events {
            any = true;
            if ev.mask.contains(EventMask::Q_OVERFLOW) {
                fired.push(Fired::Overflow);
            } else if ev.mask.intersects(
                EventMask::DELETE_SELF
                    | EventMask::MOVE_SELF
                    | EventMask::IGNORED
                    | EventMask::UNMOUNT,
            ) {
                fired.push(Fired::Gone(ev.wd.clone()));
            } else if let Some(name) = ev.name {
                let structural = !ev.mask.contains(EventMask::CLOSE_WRITE);
                fired.push(Fired::Name(ev.wd.clone(), OsString::from(name), structural));
            }
        }
        if !any {
            return true;
        }
    }
}

//! Supervision events: the end of a process this process did not spawn, and changes
//! in a folder, told by the kernel instead of found by polling.
//!
//! One registry for the whole process holds every watch (a process exit or a folder), with the
//! JS environment that owns it and the sink its notices go to. One waiter serves all of them,
//! per OS ([`os`]):
//! - Linux: one thread blocked in `epoll_wait` over a pidfd per watched process (Linux ≥ 5.3)
//!   and one inotify instance for the folders;
//! - macOS: one thread blocked in `kevent` over `EVFILT_PROC`/`NOTE_EXIT` per process and
//!   `EVFILT_VNODE` per folder (whose changes are found by comparing listings, [`snapshot`]);
//! - Windows: `RegisterWaitForSingleObject` on a process handle per watched process (the
//!   system's wait threads multiplex up to 63 handles each) and one `notify` watcher
//!   (ReadDirectoryChangesW) for the folders.
//!
//! The waiter exists only while some watch does: the last watch removed stops its thread and
//! closes its descriptors. Nothing here polls; where the kernel cannot tell (no pidfds, a
//! process it will not open), [`watch_exit`] says [`ExitWatch::Unwatchable`] and the caller
//! probes instead (lib/contract/events.js).

pub mod snapshot;

#[cfg(target_os = "macos")]
#[path = "darwin.rs"]
mod os;
#[cfg(target_os = "linux")]
#[path = "linux.rs"]
mod os;
#[cfg(windows)]
#[path = "windows.rs"]
mod os;
#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
#[path = "unsupported.rs"]
mod os;

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::liveness::{is_same_process, probe_pid, ProcState};

/// What a watch reports to its sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// The watched process has ended (the watch is gone with this notice).
    Exited,
    /// A name in the watched folder was created, written, renamed or removed.
    Changed(String),
    /// The folder itself went away or was replaced, or notifications were lost (queue overflow):
    /// look again. The watch stays registered but may report nothing more.
    Reevaluate,
    /// The OS stopped notifying for the folder with this error (an OS error code): the watch
    /// reports nothing more.
    Failed(i32),
}

/// Where a watch's notices go: called on the waiter's thread with the watch id, never while
/// the registry is locked, and it must not block.
pub type Sink = Arc<dyn Fn(u64, Notice) + Send + Sync>;

/// Which names of a watched folder are reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Filter {
    /// Process-matrix entry files: names ending `.json` (not the `.json.lock` directories, not
    /// the `.json.<pid>.<uuid>.tmp` files of writes in progress).
    Entries,
    /// Exactly this child, when it is created, removed or renamed (not when it is only written):
    /// a folder on the watched path, whose replacement changes what the path means.
    Child(OsString),
}

impl Filter {
    /// Whether a change of `name` is reported; `structural`: it was created, removed or
    /// renamed, not only written.
    fn admits(&self, name: &std::ffi::OsStr, structural: bool) -> bool {
        match self {
            Filter::Entries => name.to_str().is_some_and(|n| n.ends_with(".json")),
            Filter::Child(c) => structural && name == c.as_os_str(),
        }
    }
}

/// The answer of [`watch_exit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitWatch {
    /// The process has already ended (or is a zombie, or the pid names another process now).
    Ended,
    /// Watched: [`Notice::Exited`] will come for this id, unless it is cancelled first.
    Watching(u64),
    /// The kernel cannot watch this one (no pidfds, the process cannot be opened): probe it.
    Unwatchable,
}

/// Why the OS could not attach an exit watch.
pub(crate) enum OpenError {
    /// No such process.
    Gone,
    /// It exists, or may, but cannot be watched this way.
    Cannot,
}

/// One raw occurrence the waiter saw, before the registry maps it to watches.
pub(crate) enum Fired {
    /// The exit watch with this id fired.
    #[cfg_attr(target_os = "macos", allow(dead_code))]
    Exit(u64),
    /// Every exit watch of this pid fired (kqueue has one watch per pid).
    #[cfg_attr(not(target_os = "macos"), allow(dead_code))]
    ExitPid(i32),
    /// `name` changed in the folder known as `key`; `true` when it was created, removed or
    /// renamed (not only written).
    Name(os::DirKey, OsString, bool),
    /// The folder known as `key` went away or was replaced: it reports nothing more.
    Gone(os::DirKey),
    /// Notifications of the folder known as `key` were lost (its buffer overflowed): its watches
    /// re-evaluate and it keeps reporting.
    #[cfg_attr(not(windows), allow(dead_code))]
    Lost(os::DirKey),
    /// Notifications were lost (inotify's queue overflowed): every folder watch re-evaluates.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Overflow,
    /// The folder known as `key` can no longer be watched (an OS error code): its watches fail.
    #[cfg_attr(not(windows), allow(dead_code))]
    Failed(os::DirKey, i32),
    /// No folder can be watched any more (an OS error code): every folder watch fails.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    Broken(i32),
}

enum Kind {
    Exit {
        pid: i32,
        handle: os::ExitHandle,
    },
    Dir {
        /// None once the folder is gone (its key may be reused by the OS).
        key: Option<os::DirKey>,
        filter: Filter,
    },
}

struct Watch {
    owner: u64,
    sink: Sink,
    kind: Kind,
}

struct Registry {
    next_id: u64,
    watches: HashMap<u64, Watch>,
    waiter: Option<os::Waiter>,
}

static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();

fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY
        .get_or_init(|| {
            Mutex::new(Registry {
                next_id: 1,
                watches: HashMap::new(),
                waiter: None,
            })
        })
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

impl Registry {
    /// The running waiter, started if needed.
    fn waiter(&mut self) -> std::io::Result<&mut os::Waiter> {
        if self.waiter.is_none() {
            self.waiter = Some(os::Waiter::start()?);
        }
        Ok(self.waiter.as_mut().expect("just started"))
    }

    fn take_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// Remove one watch and hand back its sink; what must be finished outside the lock is
    /// pushed onto `later`.
    fn remove(&mut self, id: u64, fired: bool, later: &mut Vec<os::Release>) -> Option<Sink> {
        let w = self.watches.remove(&id)?;
        match w.kind {
            Kind::Exit { pid, handle } => {
                // A waiter exists while any watch does.
                if let Some(waiter) = self.waiter.as_mut() {
                    later.push(waiter.remove_exit(pid, handle, fired));
                }
            }
            Kind::Dir { key: Some(key), .. } => {
                let shared = self
                    .watches
                    .values()
                    .any(|o| matches!(&o.kind, Kind::Dir { key: Some(k), .. } if *k == key));
                if let Some(waiter) = self.waiter.as_mut() {
                    waiter.remove_dir(&key, !shared);
                }
            }
            Kind::Dir { key: None, .. } => {}
        }
        Some(w.sink)
    }

    /// The waiter to stop once no watch is left.
    fn idle_waiter(&mut self) -> Option<os::Waiter> {
        if self.watches.is_empty() {
            self.waiter.take()
        } else {
            None
        }
    }
}

/// The exit-watch mechanism of this build and kernel: `pidfd`, `kqueue`, `process-handle`, or
/// `probe` where the kernel cannot tell (every [`watch_exit`] then answers
/// [`ExitWatch::Unwatchable`]).
pub fn exit_mode() -> &'static str {
    os::exit_mode()
}

/// The folder-notification mechanism of this build: `inotify`, `kqueue` or
/// `ReadDirectoryChangesW`.
pub fn dir_mode() -> &'static str {
    os::DIR_MODE
}

/// True once the process `pid` names has ended: dead, a zombie, or (with `start_time_ms`) a
/// different process now holds the pid.
pub fn ended_now(pid: i32, start_time_ms: Option<f64>) -> bool {
    match start_time_ms {
        Some(t) => !is_same_process(pid, t),
        None => matches!(probe_pid(pid), ProcState::Dead | ProcState::Zombie),
    }
}

/// Watch for the end of the process `pid` (a positive pid; with `start_time_ms`, the one that
/// started then), for the JS environment `owner`. The kernel watch is attached first and the
/// process looked at after, so an exit in between is never missed.
pub fn watch_exit(pid: i32, start_time_ms: Option<f64>, owner: u64, sink: Sink) -> ExitWatch {
    if pid <= 0 {
        return ExitWatch::Unwatchable;
    }
    let mut later = Vec::new();
    let (answer, idle) = {
        let mut reg = registry();
        let id = reg.take_id();
        let attached = match reg.waiter() {
            Ok(w) => w.add_exit(id, pid),
            Err(_) => Err(OpenError::Cannot),
        };
        let answer = match attached {
            Ok(handle) => {
                reg.watches.insert(
                    id,
                    Watch {
                        owner,
                        sink,
                        kind: Kind::Exit { pid, handle },
                    },
                );
                if ended_now(pid, start_time_ms) {
                    reg.remove(id, false, &mut later);
                    ExitWatch::Ended
                } else {
                    ExitWatch::Watching(id)
                }
            }
            Err(OpenError::Gone) => ExitWatch::Ended,
            Err(OpenError::Cannot) => ExitWatch::Unwatchable,
        };
        (answer, reg.idle_waiter())
    };
    finish(later, idle);
    answer
}

/// Watch the folder `dir` (which must exist) for changes of the names `filter` admits, for
/// the JS environment `owner`. Fails as the OS's watch call fails (ENOENT, ENOTDIR, limits).
/// The watch is on the folder `dir` names now, wherever it goes later: a caller that means
/// the path also watches the folders above it ([`Filter::Child`]) and looks again when one
/// of them changes.
pub fn watch_dir(dir: &Path, filter: Filter, owner: u64, sink: Sink) -> std::io::Result<u64> {
    let mut reg = registry();
    let id = reg.take_id();
    let added = reg.waiter().and_then(|w| w.add_dir(dir, &filter));
    match added {
        Ok(key) => {
            reg.watches.insert(
                id,
                Watch {
                    owner,
                    sink,
                    kind: Kind::Dir {
                        key: Some(key),
                        filter,
                    },
                },
            );
            Ok(id)
        }
        Err(e) => {
            let idle = reg.idle_waiter();
            drop(reg);
            finish(Vec::new(), idle);
            Err(e)
        }
    }
}

/// End one watch (any kind); false when it was not registered (already fired or cancelled).
/// The waiter stops when it was the last.
pub fn cancel(id: u64) -> bool {
    let mut later = Vec::new();
    let (found, idle) = {
        let mut reg = registry();
        let found = reg.remove(id, false, &mut later).is_some();
        (found, reg.idle_waiter())
    };
    finish(later, idle);
    found
}

/// End every watch of the JS environment `owner` (its teardown). When they were the last, the
/// waiter's thread has ended and its descriptors are closed when this returns.
pub fn cancel_owner(owner: u64) {
    let mut later = Vec::new();
    let idle = {
        let mut reg = registry();
        let ids: Vec<u64> = reg
            .watches
            .iter()
            .filter(|(_, w)| w.owner == owner)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            reg.remove(id, false, &mut later);
        }
        reg.idle_waiter()
    };
    finish(later, idle);
}

/// Watches registered now (all kinds, all environments).
pub fn watch_count() -> usize {
    registry().watches.len()
}

/// Whether the waiter is running (it exists exactly while some watch does).
pub fn waiter_running() -> bool {
    registry().waiter.is_some()
}

/// Times the OS said folder notifications were lost (a queue or buffer overflowed) since the
/// process started: each made the folders' watches look again.
pub fn overflow_count() -> u64 {
    OVERFLOWS.load(std::sync::atomic::Ordering::Relaxed)
}

static OVERFLOWS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn count_overflow() {
    OVERFLOWS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// Finish removals outside the lock (a Windows wait is unregistered with a blocking call that
/// waits for its callback, which takes the lock), then stop an idle waiter.
fn finish(later: Vec<os::Release>, idle: Option<os::Waiter>) {
    for r in later {
        os::release(r);
    }
    if let Some(w) = idle {
        w.stop();
    }
}

/// Called by the waiter with what it saw: deliver the notices, retire fired exit watches.
/// Returns true when no watch is left and the calling waiter thread should end (the registry
/// has already let go of it).
///
/// A waiter being stopped may still hand over what it saw just before, while a new waiter
/// already serves new watches: its folder keys (inotify watch descriptors, kqueue descriptors)
/// may then name the new waiter's folders, and kqueue's exits are by pid. So a thread that is
/// not the current waiter's is heard only for exits by watch id (never reused), and never
/// detaches the current waiter.
pub(crate) fn dispatch(fired: Vec<Fired>) -> bool {
    let mut deliver: Vec<(Sink, u64, Notice)> = Vec::new();
    let mut later = Vec::new();
    let idle = {
        let mut guard = registry();
        // One borrow of the registry whose fields (watches, waiter) are borrowed apart below.
        let reg: &mut Registry = &mut guard;
        let current = reg.waiter.as_ref().is_some_and(|w| w.owns_current_thread());
        for f in fired {
            if !current && !matches!(f, Fired::Exit(_)) {
                continue;
            }
            match f {
                Fired::Exit(id) => {
                    if let Some(sink) = reg.remove(id, true, &mut later) {
                        deliver.push((sink, id, Notice::Exited));
                    }
                }
                Fired::ExitPid(pid) => {
                    let ids: Vec<u64> = reg
                        .watches
                        .iter()
                        .filter(|(_, w)| matches!(w.kind, Kind::Exit { pid: p, .. } if p == pid))
                        .map(|(id, _)| *id)
                        .collect();
                    for id in ids {
                        if let Some(sink) = reg.remove(id, true, &mut later) {
                            deliver.push((sink, id, Notice::Exited));
                        }
                    }
                }
                Fired::Name(key, name, structural) => {
                    let Some(text) = name.to_str() else { continue }; // K2: not UTF-8
                    for (id, w) in &reg.watches {
                        if let Kind::Dir {
                            key: Some(k),
                            filter,
                        } = &w.kind
                        {
                            if *k == key && filter.admits(&name, structural) {
                                deliver.push((w.sink.clone(), *id, Notice::Changed(text.into())));
                            }
                        }
                    }
                }
                Fired::Lost(key) => {
                    count_overflow();
                    for (id, w) in &reg.watches {
                        if matches!(&w.kind, Kind::Dir { key: Some(k), .. } if *k == key) {
                            deliver.push((w.sink.clone(), *id, Notice::Reevaluate));
                        }
                    }
                }
                Fired::Failed(key, code) => {
                    for (id, w) in reg.watches.iter_mut() {
                        if let Kind::Dir { key: k, .. } = &mut w.kind {
                            if k.as_ref() == Some(&key) {
                                *k = None;
                                deliver.push((w.sink.clone(), *id, Notice::Failed(code)));
                            }
                        }
                    }
                    if let Some(waiter) = reg.waiter.as_mut() {
                        waiter.forget_dir(&key);
                    }
                }
                Fired::Broken(code) => {
                    for (id, w) in reg.watches.iter_mut() {
                        if let Kind::Dir { key: k, .. } = &mut w.kind {
                            if let Some(key) = k.take() {
                                if let Some(waiter) = reg.waiter.as_mut() {
                                    waiter.forget_dir(&key);
                                }
                                deliver.push((w.sink.clone(), *id, Notice::Failed(code)));
                            }
                        }
                    }
                }
                Fired::Gone(key) => {
                    for (id, w) in reg.watches.iter_mut() {
                        if let Kind::Dir { key: k, .. } = &mut w.kind {
                            if k.as_ref() == Some(&key) {
                                *k = None;
                                deliver.push((w.sink.clone(), *id, Notice::Reevaluate));
                            }
                        }
                    }
                    if let Some(waiter) = reg.waiter.as_mut() {
                        waiter.forget_dir(&key);
                    }
                }
                Fired::Overflow => {
                    count_overflow();
                    for (id, w) in &reg.watches {
                        if matches!(w.kind, Kind::Dir { .. }) {
                            deliver.push((w.sink.clone(), *id, Notice::Reevaluate));
                        }
                    }
                }
            }
        }
        if current {
            reg.idle_waiter()
        } else {
            None
        }
    };
    for r in later {
        os::release(r);
    }
    for (sink, id, notice) in deliver {
        sink(id, notice);
    }
    match idle {
        Some(w) => {
            w.detach();
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests;

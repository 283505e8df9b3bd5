//! Windows: a process handle per watched process, waited for with `RegisterWaitForSingleObject`
//! (the system's wait threads each wait for up to 63 handles with `WaitForMultipleObjects`: no
//! thread per process, none of ours), and one `notify` watcher (ReadDirectoryChangesW, on its
//! own thread, made with the first folder watch) for the folders, whose events a thread of ours
//! hands to the registry.
//!
//! ReadDirectoryChangesW says nothing when the watched folder itself is removed (notify then
//! drops the watch quietly), so each watched folder's parent is watched too, for that name.

use std::collections::HashMap;
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use windows_sys::Win32::Foundation::{
    CloseHandle, GetLastError, ERROR_INVALID_PARAMETER, HANDLE, INVALID_HANDLE_VALUE,
};
use windows_sys::Win32::System::Threading::{
    OpenProcess, RegisterWaitForSingleObject, UnregisterWaitEx, INFINITE,
    PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_SYNCHRONIZE, WT_EXECUTEONLYONCE,
};

use super::{Fired, OpenError};

/// A folder is known by its path (as watched).
pub(crate) type DirKey = PathBuf;

/// A process handle and the registered wait on it.
pub(crate) struct ExitHandle {
    process: HANDLE,
    wait: HANDLE,
}
// SAFETY: kernel handles may be used and closed from any thread.
unsafe impl Send for ExitHandle {}

/// A wait to unregister and a handle to close, outside the registry lock.
pub(crate) struct Release {
    handle: ExitHandle,
    fired: bool,
}

pub(crate) const DIR_MODE: &str = "ReadDirectoryChangesW";

pub(crate) fn exit_mode() -> &'static str {
    "process-handle"
}

/// The running waiter: the folder watcher (once a folder is watched) and how many watches
/// each watched path serves (a folder, or the parent of one).
pub(crate) struct Waiter {
    watcher: Option<RecommendedWatcher>,
    /// Watched paths → (folder watches of it, watched folders it is the parent of).
    paths: HashMap<PathBuf, (usize, usize)>,
}

/// The wait callback (a system wait thread): the process with this watch id has ended.
unsafe extern "system" fn exited(context: *mut c_void, _timed_out: bool) {
    let id = context as usize as u64;
    // A panic must not unwind into the system's thread pool.
    let _ = std::panic::catch_unwind(|| super::dispatch(vec![Fired::Exit(id)]));
}

/// notify's handler (its thread): names changed in watched folders, folders removed, handed
/// to the dispatching thread. Not dispatched here: notify runs this on the thread that must
/// also acknowledge a new watch, which the registry asks for while it holds its lock.
fn on_event(res: notify::Result<Event>, to_dispatch: &mpsc::Sender<Vec<Fired>>) {
    let Ok(ev) = res else { return };
    if matches!(ev.kind, EventKind::Access(_)) {
        return;
    }
    let removed = matches!(
        ev.kind,
        EventKind::Remove(_) | EventKind::Modify(notify::event::ModifyKind::Name(_))
    );
    let mut fired = Vec::new();
    for p in &ev.paths {
        let (Some(parent), Some(name)) = (p.parent(), p.file_name()) else {
            continue;
        };
        // The folder itself removed or renamed away: seen through its parent's watch.
        if removed && watched_folder(p) {
            fired.push(Fired::Gone(p.clone()));
        }
        fired.push(Fired::Name(parent.to_path_buf(), name.to_os_string()));
    }
    if !fired.is_empty() {
        let _ = to_dispatch.send(fired);
    }
}

/// The folder watcher, and the thread that dispatches its events; the thread ends when the
/// watcher (holding the channel's sender) is gone.
fn folder_watcher() -> std::io::Result<RecommendedWatcher> {
    let (tx, rx) = mpsc::channel::<Vec<Fired>>();
    std::thread::Builder::new()
        .name("pi-native-supervise".into())
        .stack_size(128 * 1024)
        .spawn(move || {
            for fired in rx {
                let _ = std::panic::catch_unwind(|| super::dispatch(fired));
            }
        })?;
    notify::recommended_watcher(move |res| on_event(res, &tx)).map_err(io_error)
}

/// Whether `p` is a folder some watch is registered for.
fn watched_folder(p: &Path) -> bool {
    WATCHED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .any(|d| d == p)
}

/// The folders with a watch (for notify's handler, which must not take the registry lock).
static WATCHED: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());

impl Waiter {
    pub(crate) fn start() -> std::io::Result<Waiter> {
        Ok(Waiter {
            watcher: None,
            paths: HashMap::new(),
        })
    }

    pub(crate) fn add_exit(&mut self, id: u64, pid: i32) -> Result<ExitHandle, OpenError> {
        let access = PROCESS_SYNCHRONIZE | PROCESS_QUERY_LIMITED_INFORMATION;
        // SAFETY: plain FFI call.
        let process = unsafe { OpenProcess(access, 0, pid as u32) };
        if process.is_null() {
            // SAFETY: reads the calling thread's last-error value.
            return Err(match unsafe { GetLastError() } {
                ERROR_INVALID_PARAMETER => OpenError::Gone,
                _ => OpenError::Cannot, // access denied (a protected process), …
            });
        }
        let mut wait: HANDLE = std::ptr::null_mut();
        // SAFETY: a valid process handle; the context is the watch id, not a pointer.
        let ok = unsafe {
            RegisterWaitForSingleObject(
                &mut wait,
                process,
                Some(exited),
                id as usize as *const c_void,
                INFINITE,
                WT_EXECUTEONLYONCE,
            )
        };
        if ok == 0 {
            // SAFETY: the handle came from OpenProcess and is closed once.
            unsafe { CloseHandle(process) };
            return Err(OpenError::Cannot);
        }
        Ok(ExitHandle { process, wait })
    }

    pub(crate) fn remove_exit(&mut self, _pid: i32, handle: ExitHandle, fired: bool) -> Release {
        Release { handle, fired }
    }

    fn watch_path(&mut self, p: &Path, as_parent: bool) -> std::io::Result<()> {
        if !self.paths.contains_key(p) {
            if self.watcher.is_none() {
                self.watcher = Some(folder_watcher()?);
            }
            let w = self.watcher.as_mut().expect("just made");
            w.watch(p, RecursiveMode::NonRecursive).map_err(io_error)?;
        }
        let n = self.paths.entry(p.to_path_buf()).or_insert((0, 0));
        if as_parent {
            n.1 += 1;
        } else {
            n.0 += 1;
        }
        Ok(())
    }

    fn unwatch_path(&mut self, p: &Path, as_parent: bool) {
        let Some(n) = self.paths.get_mut(p) else {
            return;
        };
        if as_parent {
            n.1 = n.1.saturating_sub(1);
        } else {
            n.0 = n.0.saturating_sub(1);
        }
        if *n == (0, 0) {
            self.paths.remove(p);
            if let Some(w) = self.watcher.as_mut() {
                let _ = w.unwatch(p);
            }
        }
    }

    pub(crate) fn add_dir(&mut self, dir: &Path) -> std::io::Result<DirKey> {
        // A folder watched once per registry key: further watches of it share the key.
        let already = self.paths.get(dir).is_some_and(|n| n.0 > 0);
        if !already {
            if !std::fs::metadata(dir)?.is_dir() {
                return Err(std::io::Error::from_raw_os_error(267)); // ERROR_DIRECTORY
            }
            self.watch_path(dir, false)?;
            if let Some(parent) = dir.parent() {
                // Best effort: without it a removed folder is only noticed by its entries.
                let _ = self.watch_path(parent, true);
            }
            WATCHED
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(dir.to_path_buf());
        }
        Ok(dir.to_path_buf())
    }

    pub(crate) fn remove_dir(&mut self, key: &DirKey) {
        let was = self.paths.get(key.as_path()).is_some_and(|n| n.0 > 0);
        if !was {
            return;
        }
        self.unwatch_path(key, false);
        if let Some(parent) = key.parent() {
            self.unwatch_path(parent, true);
        }
        let mut watched = WATCHED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = watched.iter().position(|d| d == key) {
            watched.remove(i);
        }
    }

    pub(crate) fn forget_dir(&mut self, key: &DirKey) {
        self.remove_dir(key);
    }

    pub(crate) fn stop(self) {
        // Dropping the watcher stops its thread; process waits are already unregistered.
        drop(self.watcher);
    }

    pub(crate) fn detach(self) {
        self.stop();
    }

    /// Notices come from the system's wait threads and the folder watcher's dispatch thread,
    /// none of which outlives the waiter with events of another's: any caller is current.
    pub(crate) fn owns_current_thread(&self) -> bool {
        true
    }
}

fn io_error(e: notify::Error) -> std::io::Error {
    match e.kind {
        notify::ErrorKind::Io(io) => io,
        notify::ErrorKind::PathNotFound => std::io::ErrorKind::NotFound.into(),
        _ => std::io::Error::other(e.to_string()),
    }
}

pub(crate) fn release(r: Release) {
    // From the wait's own callback (fired) the unregistration must not wait for it; otherwise
    // it waits for a callback under way, so none runs after the handle is closed.
    let done = if r.fired {
        std::ptr::null_mut()
    } else {
        INVALID_HANDLE_VALUE
    };
    // SAFETY: the wait and the process handle were registered and opened in `add_exit` and
    // are released exactly once, here.
    unsafe {
        UnregisterWaitEx(r.handle.wait, done);
        CloseHandle(r.handle.process);
    }
}

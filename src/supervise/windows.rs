//! Windows: a process handle per watched process, waited for with `RegisterWaitForSingleObject`
//! (the system's wait threads each wait for up to 63 handles with `WaitForMultipleObjects`: no
//! thread per process, none of ours), and for the folders one thread of ours blocked in
//! `GetQueuedCompletionStatus` on an I/O completion port, over one `ReadDirectoryChangesW`
//! request per watched folder (started with the first folder watch, gone with the waiter).
//!
//! Not the `notify` crate: its Windows backend reads a completion of zero bytes (the buffer
//! overflowed: changes were lost) as no change, unwatches a folder on any other error with only
//! a log line, and wakes its thread every 100 ms. Here an overflow makes the folder's watches
//! look again ([`Fired::Lost`]), a folder deleted is [`Fired::Gone`], and any other error ends
//! the folder's watches with that error ([`Fired::Failed`]).

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::{c_void, OsString};
use std::os::windows::ffi::{OsStrExt, OsStringExt};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

use windows_sys::Win32::Foundation::{
    CloseHandle, GetLastError, ERROR_ACCESS_DENIED, ERROR_DELETE_PENDING, ERROR_FILE_NOT_FOUND,
    ERROR_INVALID_PARAMETER, ERROR_NOTIFY_ENUM_DIR, ERROR_OPERATION_ABORTED, ERROR_PATH_NOT_FOUND,
    HANDLE, INVALID_HANDLE_VALUE,
};
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, ReadDirectoryChangesW, FILE_ACTION_MODIFIED, FILE_FLAG_BACKUP_SEMANTICS,
    FILE_FLAG_OVERLAPPED, FILE_LIST_DIRECTORY, FILE_NOTIFY_CHANGE_DIR_NAME,
    FILE_NOTIFY_CHANGE_FILE_NAME, FILE_NOTIFY_CHANGE_LAST_WRITE, FILE_NOTIFY_CHANGE_SIZE,
    FILE_NOTIFY_INFORMATION, FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE, OPEN_EXISTING,
};
use windows_sys::Win32::System::Threading::{
    OpenProcess, RegisterWaitForSingleObject, UnregisterWaitEx, INFINITE,
    PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_SYNCHRONIZE, WT_EXECUTEONLYONCE,
};
use windows_sys::Win32::System::IO::{
    CancelIoEx, CreateIoCompletionPort, GetQueuedCompletionStatus, PostQueuedCompletionStatus,
    OVERLAPPED,
};

use super::{Filter, Fired, OpenError};

/// A folder watch is known by a number unique in the process (never reused, so a stopped
/// waiter's last completions cannot name a later waiter's folder).
pub(crate) type DirKey = u64;

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

/// The wait callback (a system wait thread): the process with this watch id has ended.
unsafe extern "system" fn exited(context: *mut c_void, _timed_out: bool) {
    let id = context as usize as u64;
    // A panic must not unwind into the system's thread pool.
    let _ = std::panic::catch_unwind(|| super::dispatch(vec![Fired::Exit(id)]));
}

/// The running waiter: the folder thread and its port, once a folder is watched.
pub(crate) struct Waiter {
    folders: Option<FolderThread>,
}

struct FolderThread {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

/// Completion key of the packet that stops the folder thread.
const STOP: usize = usize::MAX;
/// Bytes of a folder's notification buffer: 64 KiB, the most a request over the network may
/// ask for.
const BUFFER_BYTES: usize = 64 * 1024;

static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

thread_local! {
    /// On a folder thread: its `Shared`'s address (0 on any other thread).
    static FOLDER_THREAD_OF: Cell<usize> = const { Cell::new(0) };
}

/// The bytes each request asks for: 64 KiB, or fewer when the test hook
/// `PI_NATIVE_TEST_DIR_BUFFER_BYTES` says so (read once, from the OS environment): it lets a
/// test overflow a folder's buffer on purpose.
fn buffer_len() -> u32 {
    static LEN: OnceLock<u32> = OnceLock::new();
    *LEN.get_or_init(|| {
        std::env::var("PI_NATIVE_TEST_DIR_BUFFER_BYTES")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .map_or(BUFFER_BYTES, |n| n.clamp(64, BUFFER_BYTES)) as u32
    })
}

/// One `ReadDirectoryChangesW` request: the OVERLAPPED the port hands back, and its buffer
/// (DWORD-aligned, as FILE_NOTIFY_INFORMATION records are).
#[repr(C)]
struct Request {
    ov: OVERLAPPED,
    buf: [u32; BUFFER_BYTES / 4],
}

/// A watched folder: its handle and request. While `reading`, the kernel owns the request: it
/// is freed only after its completion came back (or when none was started).
struct Folder {
    handle: HANDLE,
    request: Box<Request>,
    /// FILE_NOTIFY_CHANGE_* flags of this watch.
    filter: u32,
    reading: bool,
    /// Removed while reading: freed when its (cancelled) completion arrives.
    closing: bool,
}

// SAFETY: a kernel handle and a heap buffer, used under the `folders` lock only.
unsafe impl Send for Folder {}

impl Drop for Folder {
    fn drop(&mut self) {
        // SAFETY: the handle came from CreateFileW and is closed once; no request is pending.
        unsafe { CloseHandle(self.handle) };
    }
}

impl Folder {
    /// Ask for the next changes; the OS error when it refuses.
    fn read(&mut self) -> Result<(), u32> {
        // SAFETY: plain data; all-zero is the required initial state of an OVERLAPPED.
        self.request.ov = unsafe { std::mem::zeroed() };
        // SAFETY: the handle is open and bound to the port; the buffer and the OVERLAPPED live
        // in `request`, which stays where it is (boxed) until the completion comes back.
        let ok = unsafe {
            ReadDirectoryChangesW(
                self.handle,
                self.request.buf.as_mut_ptr().cast::<c_void>(),
                buffer_len(),
                0,
                self.filter,
                std::ptr::null_mut(),
                &mut self.request.ov,
                None,
            )
        };
        if ok == 0 {
            // SAFETY: reads the calling thread's last-error value.
            return Err(unsafe { GetLastError() });
        }
        self.reading = true;
        Ok(())
    }
}

struct Shared {
    port: HANDLE,
    folders: Mutex<HashMap<u64, Folder>>,
}

// SAFETY: the port handle may be used from any thread; the folders are behind their lock.
unsafe impl Send for Shared {}
// SAFETY: as above.
unsafe impl Sync for Shared {}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: the port was created in `FolderThread::start` and is closed once, last.
        unsafe { CloseHandle(self.port) };
    }
}

/// What a failed request means: the folder is gone (deleted, or being deleted), or it cannot
/// be watched any more.
fn failed(key: u64, code: u32) -> Fired {
    match code {
        ERROR_ACCESS_DENIED | ERROR_DELETE_PENDING | ERROR_FILE_NOT_FOUND
        | ERROR_PATH_NOT_FOUND => Fired::Gone(key),
        _ => Fired::Failed(key, code as i32),
    }
}

impl FolderThread {
    fn start() -> std::io::Result<FolderThread> {
        // SAFETY: creates a new port (no file yet); one thread dequeues from it.
        let port =
            unsafe { CreateIoCompletionPort(INVALID_HANDLE_VALUE, std::ptr::null_mut(), 0, 1) };
        if port.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        let shared = Arc::new(Shared {
            port,
            folders: Mutex::new(HashMap::new()),
        });
        let for_thread = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("pi-native-supervise".into())
            .stack_size(128 * 1024)
            .spawn(move || run(for_thread))?;
        Ok(FolderThread {
            shared,
            thread: Some(thread),
        })
    }

    /// Stop the thread (it cancels what is pending and waits for those completions) and join
    /// it, unless this is that thread (it ends once its dispatch returns).
    fn stop(mut self) {
        // SAFETY: posts a packet with no OVERLAPPED to our own port.
        unsafe { PostQueuedCompletionStatus(self.shared.port, 0, STOP, std::ptr::null()) };
        if let Some(t) = self.thread.take() {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

/// The folder thread: take each completion, hand what it says to the registry, ask again.
fn run(shared: Arc<Shared>) {
    FOLDER_THREAD_OF.with(|c| c.set(Arc::as_ptr(&shared) as usize));
    loop {
        let mut bytes = 0u32;
        let mut key = 0usize;
        let mut ov: *mut OVERLAPPED = std::ptr::null_mut();
        // SAFETY: our port; the out-pointers are live locals.
        let ok = unsafe {
            GetQueuedCompletionStatus(shared.port, &mut bytes, &mut key, &mut ov, INFINITE)
        };
        if ov.is_null() {
            if key == STOP || ok == 0 {
                break; // stopped (or the port failed: nothing more can come)
            }
            continue;
        }
        // SAFETY: reads the calling thread's last-error value (that of the failed request).
        let code = if ok == 0 {
            unsafe { GetLastError() }
        } else {
            0
        };
        let mut fired = Vec::new();
        {
            let mut folders = shared.folders.lock().unwrap_or_else(|e| e.into_inner());
            let key = key as u64;
            let Some(f) = folders.get_mut(&key) else {
                continue;
            };
            f.reading = false;
            if f.closing {
                folders.remove(&key);
                continue;
            }
            let again = match code {
                0 if bytes == 0 => {
                    fired.push(Fired::Lost(key)); // the buffer overflowed
                    true
                }
                0 => {
                    names(key, &f.request.buf, bytes as usize, &mut fired);
                    true
                }
                ERROR_NOTIFY_ENUM_DIR => {
                    fired.push(Fired::Lost(key));
                    true
                }
                ERROR_OPERATION_ABORTED => false,
                code => {
                    fired.push(failed(key, code));
                    false
                }
            };
            if again {
                if let Err(code) = f.read() {
                    fired.push(failed(key, code));
                }
            }
        }
        if !fired.is_empty() && super::dispatch(fired) {
            break; // no watch left: the registry let go of this waiter
        }
    }
    drain(&shared);
}

/// The thread is ending: cancel every pending request and wait for their completions (a
/// buffer the kernel may still write is never freed); 5 s at most, then what is left leaks.
fn drain(shared: &Shared) {
    {
        let mut folders = shared.folders.lock().unwrap_or_else(|e| e.into_inner());
        folders.retain(|_, f| {
            if f.reading && !f.closing {
                f.closing = true;
                // SAFETY: the handle and the pending OVERLAPPED are live.
                unsafe { CancelIoEx(f.handle, &f.request.ov) };
            }
            f.reading
        });
    }
    loop {
        if shared
            .folders
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
        {
            return;
        }
        let (mut bytes, mut key) = (0u32, 0usize);
        let mut ov: *mut OVERLAPPED = std::ptr::null_mut();
        // SAFETY: our port; the out-pointers are live locals.
        unsafe { GetQueuedCompletionStatus(shared.port, &mut bytes, &mut key, &mut ov, 5000) };
        let mut folders = shared.folders.lock().unwrap_or_else(|e| e.into_inner());
        if ov.is_null() {
            // Timed out (or the port failed): the kernel may still write these buffers.
            for (_, f) in folders.drain() {
                std::mem::forget(f);
            }
            return;
        }
        folders.remove(&(key as u64));
    }
}

/// The names of the FILE_NOTIFY_INFORMATION records in the first `len` bytes of `buf`, each
/// structural unless only its content or size changed.
fn names(key: u64, buf: &[u32], len: usize, fired: &mut Vec<Fired>) {
    // SAFETY: `buf` holds at least `len` initialised bytes (clamped to its size).
    let bytes =
        unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), len.min(buf.len() * 4)) };
    let head = std::mem::offset_of!(FILE_NOTIFY_INFORMATION, FileName);
    let mut at = 0usize;
    while at + head <= bytes.len() {
        // SAFETY: a whole record header lies at `at`; read unaligned (Wine packs records on
        // 2-byte boundaries).
        let rec = unsafe {
            std::ptr::read_unaligned(bytes.as_ptr().add(at).cast::<FILE_NOTIFY_INFORMATION>())
        };
        let end = (at + head + rec.FileNameLength as usize).min(bytes.len());
        let units: Vec<u16> = bytes[at + head..end]
            .chunks_exact(2)
            .map(|c| u16::from_ne_bytes([c[0], c[1]]))
            .collect();
        fired.push(Fired::Name(
            key,
            OsString::from_wide(&units),
            rec.Action != FILE_ACTION_MODIFIED,
        ));
        if rec.NextEntryOffset == 0 {
            break;
        }
        at += rec.NextEntryOffset as usize;
    }
}

/// What a watch asks the OS for: names created, removed, renamed; for entry files also
/// written. A folder on the way is not told of the writes in it.
fn notify_filter(filter: &Filter) -> u32 {
    let structural = FILE_NOTIFY_CHANGE_FILE_NAME | FILE_NOTIFY_CHANGE_DIR_NAME;
    match filter {
        Filter::Entries => structural | FILE_NOTIFY_CHANGE_LAST_WRITE | FILE_NOTIFY_CHANGE_SIZE,
        Filter::Child(_) => structural,
    }
}

impl Waiter {
    pub(crate) fn start() -> std::io::Result<Waiter> {
        Ok(Waiter { folders: None })
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

    /// Watch the folder `dir` with a handle and a request of its own (a path watched again
    /// after its folder was replaced is another folder).
    pub(crate) fn add_dir(&mut self, dir: &Path, filter: &Filter) -> std::io::Result<DirKey> {
        if self.folders.is_none() {
            self.folders = Some(FolderThread::start()?);
        }
        let shared = Arc::clone(&self.folders.as_ref().expect("just started").shared);
        let wide: Vec<u16> = dir.as_os_str().encode_wide().chain(Some(0)).collect();
        // SAFETY: a NUL-terminated path; the folder may still be renamed or deleted by others.
        let handle = unsafe {
            CreateFileW(
                wide.as_ptr(),
                FILE_LIST_DIRECTORY,
                FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                std::ptr::null(),
                OPEN_EXISTING,
                FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OVERLAPPED,
                std::ptr::null_mut(),
            )
        };
        if handle == INVALID_HANDLE_VALUE {
            return Err(std::io::Error::last_os_error());
        }
        let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
        let mut folder = Folder {
            handle,
            // SAFETY: plain data; all-zero is a valid Request.
            request: unsafe { Box::new(std::mem::zeroed()) },
            filter: notify_filter(filter),
            reading: false,
            closing: false,
        };
        // SAFETY: binds our open handle to our port under this watch's key.
        if unsafe { CreateIoCompletionPort(handle, shared.port, key as usize, 0) }.is_null() {
            return Err(std::io::Error::last_os_error()); // dropping `folder` closes the handle
        }
        let mut folders = shared.folders.lock().unwrap_or_else(|e| e.into_inner());
        // Not a folder, or a file system without notifications: the OS's error.
        folder
            .read()
            .map_err(|code| std::io::Error::from_raw_os_error(code as i32))?;
        folders.insert(key, folder);
        Ok(key)
    }

    /// A watch ended (each has its own handle, so it is always the last of its key).
    pub(crate) fn remove_dir(&mut self, key: &DirKey, _last: bool) {
        let Some(t) = self.folders.as_ref() else {
            return;
        };
        let mut folders = t.shared.folders.lock().unwrap_or_else(|e| e.into_inner());
        let Some(f) = folders.get_mut(key) else {
            return;
        };
        if f.reading {
            // Its completion (cancelled, or already queued) comes back to the thread, which
            // frees it then.
            f.closing = true;
            // SAFETY: the handle and the pending OVERLAPPED are live.
            unsafe { CancelIoEx(f.handle, &f.request.ov) };
        } else {
            folders.remove(key);
        }
    }

    pub(crate) fn forget_dir(&mut self, key: &DirKey) {
        self.remove_dir(key, true);
    }

    /// Stop the folder thread (process waits are already unregistered).
    pub(crate) fn stop(self) {
        if let Some(t) = self.folders {
            t.stop();
        }
    }

    /// Called from the thread that found the registry idle: a system wait thread (stops and
    /// joins the folder thread) or the folder thread itself (which ends after this returns).
    pub(crate) fn detach(self) {
        self.stop();
    }

    /// Notices come from the system's wait threads (exits, by watch id) and from folder
    /// threads: a folder thread is current only for its own waiter.
    pub(crate) fn owns_current_thread(&self) -> bool {
        let on = FOLDER_THREAD_OF.with(|c| c.get());
        on == 0
            || self
                .folders
                .as_ref()
                .is_some_and(|t| Arc::as_ptr(&t.shared) as usize == on)
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

//! Windows: the probe as libuv's `uv_kill(pid, 0)` does it, start times from
//! `GetProcessTimes`, and the host name `os.hostname()` reports.

use windows_sys::Win32::Foundation::{
    CloseHandle, GetLastError, ERROR_ACCESS_DENIED, ERROR_INVALID_PARAMETER, FILETIME, HANDLE,
    STILL_ACTIVE, WAIT_OBJECT_0, WAIT_TIMEOUT,
};
use windows_sys::Win32::System::SystemInformation::{ComputerNameDnsHostname, GetComputerNameExW};
use windows_sys::Win32::System::Threading::{
    GetCurrentProcess, GetExitCodeProcess, GetProcessTimes, OpenProcess, WaitForSingleObject,
    PROCESS_QUERY_INFORMATION, PROCESS_QUERY_LIMITED_INFORMATION, PROCESS_SYNCHRONIZE,
    PROCESS_TERMINATE,
};

use super::{KillArg, OsStat, ProbeError};

/// 100 ns intervals between 1601-01-01 (FILETIME epoch) and 1970-01-01.
const FILETIME_UNIX_OFFSET: u64 = 116_444_736_000_000_000;

/// An open process handle, closed on drop (the pseudo-handle of the own process is not).
struct Process {
    handle: HANDLE,
    own: bool,
}

impl Process {
    /// `OpenProcess(access)`, or the current-process pseudo-handle for pid 0 (libuv's rule).
    fn open(pid: i32, access: u32) -> Result<Process, u32> {
        if pid == 0 {
            // SAFETY: returns a constant pseudo-handle; no preconditions.
            let handle = unsafe { GetCurrentProcess() };
            return Ok(Process { handle, own: true });
        }
        // SAFETY: plain FFI call; a negative pid becomes a huge DWORD that fails with
        // ERROR_INVALID_PARAMETER, as in libuv.
        let handle = unsafe { OpenProcess(access, 0, pid as u32) };
        if handle.is_null() {
            // SAFETY: reads the calling thread's last-error value.
            return Err(unsafe { GetLastError() });
        }
        Ok(Process { handle, own: false })
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if !self.own {
            // SAFETY: the handle came from OpenProcess and is closed exactly once.
            unsafe { CloseHandle(self.handle) };
        }
    }
}

fn win_error(code: u32) -> ProbeError {
    match crate::fserror::win32_code_name(code) {
        "EPERM" => ProbeError::Eperm,
        name => ProbeError::Code(name),
    }
}

/// libuv's `uv_kill(pid, 0)`: open with terminate + query-information + synchronize rights
/// (access denied → EPERM, invalid parameter → ESRCH), then an exit code other than
/// STILL_ACTIVE or a signaled handle → ESRCH.
pub(super) fn raw_kill0(pid: i32) -> Result<(), ProbeError> {
    let access = PROCESS_TERMINATE | PROCESS_QUERY_INFORMATION | PROCESS_SYNCHRONIZE;
    let p = match Process::open(pid, access) {
        Ok(p) => p,
        Err(ERROR_INVALID_PARAMETER) => return Err(ProbeError::Esrch),
        Err(ERROR_ACCESS_DENIED) => return Err(ProbeError::Eperm),
        Err(e) => return Err(win_error(e)),
    };
    let mut status = 0u32;
    // SAFETY: valid process handle and a writable u32.
    if unsafe { GetExitCodeProcess(p.handle, &mut status) } == 0 {
        // SAFETY: reads the calling thread's last-error value.
        return Err(win_error(unsafe { GetLastError() }));
    }
    if status != STILL_ACTIVE as u32 {
        return Err(ProbeError::Esrch);
    }
    // SAFETY: valid process handle; a zero timeout only polls.
    match unsafe { WaitForSingleObject(p.handle, 0) } {
        WAIT_OBJECT_0 => Err(ProbeError::Esrch),
        WAIT_TIMEOUT => Ok(()),
        // SAFETY: reads the calling thread's last-error value.
        _ => Err(win_error(unsafe { GetLastError() })),
    }
}

/// Creation time of a process in epoch ms (100 ns FILETIME resolution, truncated to ms).
fn creation_time_ms(pid: i32) -> Option<f64> {
    let p = Process::open(pid, PROCESS_QUERY_LIMITED_INFORMATION).ok()?;
    let zero = FILETIME {
        dwLowDateTime: 0,
        dwHighDateTime: 0,
    };
    let (mut created, mut exited, mut kernel, mut user) = (zero, zero, zero, zero);
    // SAFETY: valid process handle and four writable FILETIMEs.
    let ok =
        unsafe { GetProcessTimes(p.handle, &mut created, &mut exited, &mut kernel, &mut user) };
    if ok == 0 {
        return None;
    }
    let ft = ((created.dwHighDateTime as u64) << 32) | created.dwLowDateTime as u64;
    let since_epoch = ft.checked_sub(FILETIME_UNIX_OFFSET)?;
    Some((since_epoch / 10_000) as f64)
}

/// C4 on win32: the creation time floored to a whole second — the number the original gets
/// by parsing PowerShell's `StartTime` text (second resolution).
pub(super) fn legacy_start_time_after_gate(pid: &KillArg, _pid_text: &str) -> Option<f64> {
    let KillArg::Pid(p) = pid else { return None };
    if *p <= 0 {
        return None;
    }
    creation_time_ms(*p).map(|ms| (ms / 1000.0).floor() * 1000.0)
}

/// Windows has no zombies: an exited process fails the probe (ESRCH) even while handles to
/// it keep its pid reserved. The start time keeps millisecond resolution.
pub(super) fn os_stat(pid: i32) -> Option<OsStat> {
    let pid = if pid == 0 {
        std::process::id() as i32
    } else {
        pid
    };
    Some(OsStat {
        zombie: false,
        start_time_ms: Some(creation_time_ms(pid)?),
    })
}

/// The string Node's `os.hostname()` returns on Windows: libuv asks `GetHostNameW`, which
/// answers the DNS host name — the same value as `GetComputerNameExW(ComputerNameDnsHostname)`.
pub fn os_hostname() -> String {
    let mut buf = [0u16; 256];
    let mut len = buf.len() as u32;
    // SAFETY: buf is writable for `len` UTF-16 units; len is updated to the written length.
    let ok = unsafe { GetComputerNameExW(ComputerNameDnsHostname, buf.as_mut_ptr(), &mut len) };
    if ok == 0 {
        return String::new();
    }
    String::from_utf16_lossy(&buf[..len as usize])
}

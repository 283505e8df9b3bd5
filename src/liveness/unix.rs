//! Linux and macOS: the kill(2) probe and gethostname(2).

use super::ProbeError;

/// `kill(pid, 0)` as libuv's `uv_kill` does it on Unix (pid 0 = own process group, −N = group N).
pub(super) fn raw_kill0(pid: i32) -> Result<(), ProbeError> {
    // SAFETY: kill with signal 0 only checks for existence and permission; no memory involved.
    let rc = unsafe { libc::kill(pid, 0) };
    if rc == 0 {
        return Ok(());
    }
    match std::io::Error::last_os_error().raw_os_error().unwrap_or(0) {
        libc::ESRCH => Err(ProbeError::Esrch),
        libc::EPERM => Err(ProbeError::Eperm),
        e => Err(ProbeError::Errno(e)),
    }
}

/// The string Node's `os.hostname()` returns (libuv `uv_os_gethostname` = gethostname(2)).
pub fn os_hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length, which is what we pass.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

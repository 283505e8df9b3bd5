//! macOS: start times (C4) and zombie state from `proc_pidinfo(PROC_PIDTBSDINFO)`.

use super::{KillArg, OsStat};

/// C4 on macOS: `pbi_start_tvsec × 1000`, the whole-second value `ps -o lstart=` yields.
pub(super) fn legacy_start_time_after_gate(pid: &KillArg, _pid_text: &str) -> Option<f64> {
    // The original shells out to `ps -o lstart=` (second resolution, epoch ms).
    let KillArg::Pid(p) = pid else { return None };
    if *p <= 0 {
        return None;
    }
    bsd::bsd_info(*p).map(|i| i.start_sec as f64 * 1000.0)
}

/// State and start time (µs resolution, truncated to ms) from `proc_pidinfo`.
pub(super) fn os_stat(pid: i32) -> Option<OsStat> {
    let info = bsd::bsd_info(pid)?;
    Some(OsStat {
        zombie: info.zombie,
        start_time_ms: Some(info.start_sec as f64 * 1000.0 + (info.start_usec / 1000) as f64),
    })
}

mod bsd {
    pub struct BsdInfo {
        pub start_sec: u64,
        pub start_usec: u64,
        pub zombie: bool,
    }

    pub fn bsd_info(pid: i32) -> Option<BsdInfo> {
        // SAFETY: proc_bsdinfo is plain old data; all-zero is a valid value.
        let mut info: libc::proc_bsdinfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::proc_bsdinfo>() as libc::c_int;
        // SAFETY: the buffer is a properly sized, writable proc_bsdinfo.
        let n = unsafe {
            libc::proc_pidinfo(
                pid,
                libc::PROC_PIDTBSDINFO,
                0,
                &mut info as *mut _ as *mut libc::c_void,
                size,
            )
        };
        if n != size {
            return None;
        }
        Some(BsdInfo {
            start_sec: info.pbi_start_tvsec,
            start_usec: info.pbi_start_tvusec,
            zombie: info.pbi_status == libc::SZOMB as u32,
        })
    }
}

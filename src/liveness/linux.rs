//! Linux: procfs-backed start times (C4) and zombie state (W-C1).

use super::{stat_field_after_comm, KillArg, OsStat};

/// pidfd_open(2): a descriptor of process `pid` (close-on-exec), for the liveness cache and
/// the supervision waiter alike.
pub(crate) fn pidfd_open(pid: i32) -> std::io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // syscall(2) reads its variadic arguments as longs, so each is passed as one.
    // SAFETY: pidfd_open(pid, flags) takes two integers and returns a new fd or -1.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_pidfd_open,
            libc::c_long::from(pid),
            0 as libc::c_long,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this fd (pidfds are close-on-exec) and nothing else owns it.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as std::os::fd::RawFd) })
}

/// C4 on Linux: `floor(ticks × 100)` from `/proc/<String(pid)>/stat` field 22.
pub(super) fn legacy_start_time_after_gate(pid: &KillArg, pid_text: &str) -> Option<f64> {
    // The canonical decimal form of a positive pid can use the cached stat handle; any other
    // spelling (" 12", "0x1f", …) is read by its literal path, exactly as the original does.
    let text = match pid {
        KillArg::Pid(p) if *p > 0 && pid_text == p.to_string() => {
            procfs::start_ticks(*p, |t| stat_field_after_comm(t, 19))?
        }
        _ => {
            let bytes = std::fs::read(format!("/proc/{pid_text}/stat")).ok()?;
            stat_field_after_comm(&String::from_utf8_lossy(&bytes), 19)
        }
    };
    let ticks = text?;
    Some((ticks * 100.0).floor())
}

/// State and true start time from `/proc/<pid>/stat` (boot time + starttime / CLK_TCK).
pub(super) fn os_stat(pid: i32) -> Option<OsStat> {
    let (zombie, ticks) = procfs::with_stat(pid, |text| {
        let close = text.rfind(')')?;
        let mut fields = text[close + 1..].split_ascii_whitespace();
        // Z = zombie, X/x = dead (seen only transiently while being reaped). The letter is the
        // leader thread's: a leader that called pthread_exit shows `Z` while its other threads
        // run, so the process has ended only when num_threads (field 20) is down to the leader.
        let leader_gone = matches!(fields.next()?, "Z" | "X" | "x");
        let threads: u64 = fields.nth(16)?.parse().ok()?;
        let ticks: u64 = fields.nth(1)?.parse().ok()?;
        Some((leader_gone && threads <= 1, ticks))
    })??;
    let start_time_ms = procfs::boot_time_ms().map(|boot| {
        let hz = procfs::clock_ticks_per_second();
        (boot + ticks * 1000 / hz) as f64
    });
    Some(OsStat {
        zombie,
        start_time_ms,
    })
}

mod procfs {
    use std::collections::HashMap;
    use std::fs::File;
    use std::os::fd::{AsRawFd, OwnedFd};
    use std::os::unix::fs::FileExt;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Mutex, OnceLock};

    /// A process's start time never changes, so C4's answer is kept per process, next to a pidfd
    /// of that process: while `pidfd_send_signal(pidfd, 0)` succeeds, the pid still names the
    /// process that was read (a pid number is only reused after its process is reaped, and then
    /// the pidfd answers ESRCH), so one syscall replaces generating and parsing the stat line.
    static STARTS: OnceLock<Mutex<HashMap<i32, Started>>> = OnceLock::new();
    /// A pidfd of the process, and what `parse` made of its stat line.
    type Started = (OwnedFd, Option<f64>);
    /// Set once pidfd_open turns out to be unavailable (kernel < 5.3, a seccomp filter).
    static NO_PIDFD: AtomicBool = AtomicBool::new(false);

    /// `parse` applied to `/proc/<pid>/stat`, answered from the per-process cache when it still
    /// holds that process; None when the process is gone (or its stat cannot be read).
    pub fn start_ticks(pid: i32, parse: impl Fn(&str) -> Option<f64>) -> Option<Option<f64>> {
        let starts = STARTS.get_or_init(|| Mutex::new(HashMap::new()));
        {
            let mut map = starts.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((fd, ticks)) = map.get(&pid) {
                if pidfd_alive(fd) {
                    return Some(*ticks);
                }
                map.remove(&pid);
            }
        }
        // The pidfd is taken before the read: if its process is still alive after the read,
        // the pid named that process all along, so the text read was its own.
        let Some(fd) = pidfd_open(pid) else {
            return with_stat(pid, parse);
        };
        let bytes = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
        let ticks = parse(&String::from_utf8_lossy(&bytes));
        if pidfd_alive(&fd) {
            let mut map = starts.lock().unwrap_or_else(|e| e.into_inner());
            if map.len() >= MAX_HANDLES {
                map.clear();
            }
            map.insert(pid, (fd, ticks));
        }
        Some(ticks)
    }

    fn pidfd_open(pid: i32) -> Option<OwnedFd> {
        if NO_PIDFD.load(Ordering::Relaxed) {
            return None;
        }
        match super::pidfd_open(pid) {
            Ok(fd) => Some(fd),
            Err(e) => {
                if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) {
                    NO_PIDFD.store(true, Ordering::Relaxed);
                }
                None
            }
        }
    }

    /// Signal 0 through the pidfd: 0 while its process exists (zombies included, as for
    /// kill(2)); ESRCH once it has been reaped.
    fn pidfd_alive(fd: &OwnedFd) -> bool {
        // SAFETY: a valid pidfd, signal 0 (no signal sent), no siginfo, no flags.
        let r = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                libc::c_long::from(fd.as_raw_fd()),
                0 as libc::c_long,
                std::ptr::null::<libc::siginfo_t>(),
                0 as libc::c_long,
            )
        };
        r == 0
    }

    /// Open `/proc/<pid>/stat` handles, re-read with pread: about half the cost of
    /// open+read+close. A handle is bound to the process it was opened for, not to the number:
    /// once that process is reaped, reads fail (ESRCH) and the entry is reopened, so a reused
    /// pid can never be answered from the old process's handle.
    static HANDLES: OnceLock<Mutex<HashMap<i32, File>>> = OnceLock::new();
    const MAX_HANDLES: usize = 64;

    /// Apply `f` to the text of `/proc/<pid>/stat`; None when the process is gone.
    pub fn with_stat<R>(pid: i32, f: impl FnOnce(&str) -> R) -> Option<R> {
        // One stat line is well under 1 KiB; 4 KiB leaves room for any comm/field widths.
        let mut buf = [0u8; 4096];
        let handles = HANDLES.get_or_init(|| Mutex::new(HashMap::new()));
        let mut map = handles.lock().unwrap_or_else(|e| e.into_inner());
        let mut n = map.get(&pid).and_then(|file| pread(file, &mut buf));
        if n.is_none() {
            map.remove(&pid);
            let file = File::open(format!("/proc/{pid}/stat")).ok()?;
            n = Some(pread(&file, &mut buf)?);
            if map.len() >= MAX_HANDLES {
                map.clear();
            }
            map.insert(pid, file);
        }
        drop(map);
        let bytes = &buf[..n?];
        Some(match std::str::from_utf8(bytes) {
            Ok(text) => f(text),
            Err(_) => f(&String::from_utf8_lossy(bytes)),
        })
    }

    fn pread(file: &File, buf: &mut [u8]) -> Option<usize> {
        match file.read_at(buf, 0) {
            Ok(0) | Err(_) => None,
            Ok(n) => Some(n),
        }
    }

    /// `btime` of /proc/stat in ms. Read once: it only moves when the wall clock is stepped,
    /// and identities compared within one process must not jitter.
    pub fn boot_time_ms() -> Option<u64> {
        static BOOT: OnceLock<Option<u64>> = OnceLock::new();
        *BOOT.get_or_init(|| {
            let text = std::fs::read_to_string("/proc/stat").ok()?;
            let line = text.lines().find(|l| l.starts_with("btime "))?;
            let secs: u64 = line[6..].trim().parse().ok()?;
            Some(secs * 1000)
        })
    }

    pub fn clock_ticks_per_second() -> u64 {
        static HZ: OnceLock<u64> = OnceLock::new();
        *HZ.get_or_init(|| {
            // SAFETY: sysconf has no memory-safety preconditions.
            let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
            if hz > 0 {
                hz as u64
            } else {
                100
            }
        })
    }
}

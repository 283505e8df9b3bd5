//! PID liveness (SPEC §1.C, §2.C): the kill-probe primitive Node's `process.kill(pid, 0)` is,
//! the four legacy predicates built on it (bit-exact), and the procfs-backed process identity
//! of the new API (zombie detection, PID-reuse detection).
//!
//! Everything here is plain Rust; the binding layer turns JS values into [`KillArg`]s first.

use crate::jsstr::{js_split_whitespace, js_string_to_number, to_int32};

/// A JS value as `process.kill` would see it: accepted iff `pid == (pid | 0)` (SPEC C0).
#[derive(Debug, Clone, PartialEq)]
pub enum KillArg {
    /// Passed the argument check; the int32 handed to `kill(2)`.
    Pid(i32),
    /// Failed the argument check: Node throws `ERR_INVALID_ARG_TYPE` with this message.
    InvalidType(String),
    /// Converting the value threw (symbol, bigint, a throwing `valueOf`).
    Uncoercible,
}

impl KillArg {
    /// Classify a JS number; `js_text` yields its JS string form (only needed for the error).
    pub fn from_number(x: f64, js_text: impl FnOnce() -> String) -> KillArg {
        let i = to_int32(x);
        // `x == (x|0)`: NaN never equals, -0 equals 0.
        if x == i as f64 {
            KillArg::Pid(i)
        } else {
            KillArg::InvalidType(invalid_pid_message(&format!("type number ({})", js_text())))
        }
    }

    /// The `undefined` argument.
    pub fn undefined() -> KillArg {
        KillArg::InvalidType(invalid_pid_message("undefined"))
    }
}

/// Node's ERR_INVALID_ARG_TYPE message for the `pid` argument; `received` is the tail Node
/// appends after "Received " (`undefined`, `null`, `type number (1.5)`, …).
pub fn invalid_pid_message(received: &str) -> String {
    format!("The \"pid\" argument must be of type number. Received {received}")
}

/// Why a kill probe failed.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbeError {
    Esrch,
    Eperm,
    /// Any other errno from kill(2); Node's message is `kill <CODE>`.
    Errno(i32),
    /// ERR_INVALID_ARG_TYPE (message as Node builds it).
    InvalidArg(String),
    /// The argument conversion itself threw.
    Uncoercible,
}

impl ProbeError {
    /// The `message` of the error `process.kill` would throw.
    pub fn message(&self) -> String {
        match self {
            ProbeError::Esrch => "kill ESRCH".to_string(),
            ProbeError::Eperm => "kill EPERM".to_string(),
            ProbeError::Errno(e) => format!("kill {}", errno_name(*e)),
            ProbeError::InvalidArg(m) => m.clone(),
            ProbeError::Uncoercible => "Cannot convert value to a number".to_string(),
        }
    }
}

fn errno_name(e: i32) -> String {
    match e {
        libc::EINVAL => "EINVAL".into(),
        libc::ESRCH => "ESRCH".into(),
        libc::EPERM => "EPERM".into(),
        libc::ENOSYS => "ENOSYS".into(),
        libc::EACCES => "EACCES".into(),
        _ => format!("Unknown system error -{e}"),
    }
}

/// `process.kill(pid, 0)` without building an exception: Ok on success.
pub fn kill_probe(arg: &KillArg) -> Result<(), ProbeError> {
    match arg {
        KillArg::Pid(pid) => raw_kill0(*pid),
        KillArg::InvalidType(m) => Err(ProbeError::InvalidArg(m.clone())),
        KillArg::Uncoercible => Err(ProbeError::Uncoercible),
    }
}

#[cfg(unix)]
fn raw_kill0(pid: i32) -> Result<(), ProbeError> {
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

#[cfg(not(unix))]
fn raw_kill0(_pid: i32) -> Result<(), ProbeError> {
    // Only unix targets are built natively; other platforms use the js/ backend.
    Err(ProbeError::Errno(libc::ENOSYS))
}

// ---------------------------------------------------------------------------------------------
// Legacy predicates (SPEC C1–C4)

/// C1 `isReloadSessionProcessAlive` for a JS number `pid` (non-numbers are false before this).
pub fn is_reload_session_process_alive(pid: f64) -> bool {
    if !pid.is_finite() || pid <= 0.0 {
        return false;
    }
    matches!(
        kill_probe(&KillArg::from_number(pid, String::new)),
        Ok(()) | Err(ProbeError::Eperm)
    )
}

/// C2 `defaultIsPidAlive` once the hostname comparison is known.
pub fn default_is_pid_alive(same_host: bool, pid: &KillArg) -> bool {
    if !same_host {
        return true;
    }
    matches!(kill_probe(pid), Ok(()) | Err(ProbeError::Eperm))
}

/// Result of C3 `checkProcessLiveness` (the `pid` property is the caller's own value).
#[derive(Debug, Clone, PartialEq)]
pub struct Liveness {
    pub alive: bool,
    pub detail: String,
}

/// C3 for a JS number (`None` = a value of any other type); `js_text` yields its JS string form.
pub fn check_process_liveness(pid: Option<f64>, js_text: impl FnOnce() -> String) -> Liveness {
    let no_pid = Liveness {
        alive: false,
        detail: "no pid recorded".into(),
    };
    let Some(x) = pid else {
        return no_pid;
    };
    if !crate::jsstr::is_integer(x) || x <= 0.0 {
        return no_pid;
    }
    match kill_probe(&KillArg::from_number(x, js_text)) {
        Ok(()) => Liveness {
            alive: true,
            detail: "process is alive".into(),
        },
        Err(ProbeError::Eperm) => Liveness {
            alive: true,
            detail: "process exists but permission is denied".into(),
        },
        Err(ProbeError::Esrch) => Liveness {
            alive: false,
            detail: "process does not exist".into(),
        },
        Err(e) => Liveness {
            alive: false,
            detail: e.message(),
        },
    }
}

/// C4 `getProcessStartTime`: `pid_text` yields the JS `String(pid)` used to build the procfs
/// path (None when that conversion throws). Linux: `floor(starttime_ticks × 100)` — a fixed
/// legacy unit, not milliseconds.
pub fn legacy_start_time(pid: &KillArg, pid_text: impl FnOnce() -> Option<String>) -> Option<f64> {
    kill_probe(pid).ok()?;
    legacy_start_time_after_gate(pid, &pid_text()?)
}

#[cfg(target_os = "linux")]
fn legacy_start_time_after_gate(pid: &KillArg, pid_text: &str) -> Option<f64> {
    // The canonical decimal form of a positive pid can use the cached stat handle; any other
    // spelling (" 12", "0x1f", …) is read by its literal path, exactly as the original does.
    let text = match pid {
        KillArg::Pid(p) if *p > 0 && pid_text == p.to_string() => {
            procfs::with_stat(*p, |t| stat_field_after_comm(t, 19))?
        }
        _ => {
            let bytes = std::fs::read(format!("/proc/{pid_text}/stat")).ok()?;
            stat_field_after_comm(&String::from_utf8_lossy(&bytes), 19)
        }
    };
    let ticks = text?;
    Some((ticks * 100.0).floor())
}

#[cfg(target_os = "macos")]
fn legacy_start_time_after_gate(pid: &KillArg, _pid_text: &str) -> Option<f64> {
    // The original shells out to `ps -o lstart=` (second resolution, epoch ms).
    let KillArg::Pid(p) = pid else { return None };
    if *p <= 0 {
        return None;
    }
    darwin::bsd_info(*p).map(|i| i.start_sec as f64 * 1000.0)
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn legacy_start_time_after_gate(_pid: &KillArg, _pid_text: &str) -> Option<f64> {
    None
}

/// The original's procfs parse: text after the LAST `)`, JS-trimmed, split on JS white space,
/// element `index` converted with JS `Number()`; non-finite or missing → None.
pub fn stat_field_after_comm(stat: &str, index: usize) -> Option<f64> {
    let close = stat.rfind(')')?;
    let v = js_string_to_number(js_split_whitespace(&stat[close + 1..]).nth(index)?);
    v.is_finite().then_some(v)
}

// ---------------------------------------------------------------------------------------------
// New API: state, identity, reuse detection

/// What a pid is, for supervision purposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcState {
    Alive,
    Dead,
    /// Exited but not reaped: answers kill(pid, 0) yet will never run again.
    Zombie,
    /// Exists, but this process may not signal it.
    Eperm,
}

impl ProcState {
    pub fn as_str(self) -> &'static str {
        match self {
            ProcState::Alive => "alive",
            ProcState::Dead => "dead",
            ProcState::Zombie => "zombie",
            ProcState::Eperm => "eperm",
        }
    }
}

/// Probe a positive pid: kill(pid, 0), then the procfs state to tell zombies apart.
pub fn probe_pid(pid: i32) -> ProcState {
    match raw_kill0(pid) {
        Err(ProbeError::Esrch) => ProcState::Dead,
        Err(ProbeError::Eperm) => refine_with_state(pid, ProcState::Eperm),
        Ok(()) => refine_with_state(pid, ProcState::Alive),
        Err(_) => ProcState::Dead,
    }
}

fn refine_with_state(pid: i32, exists: ProcState) -> ProcState {
    match os_stat(pid) {
        Some(s) if s.zombie => ProcState::Zombie,
        Some(_) => exists,
        // Vanished between the two looks (or no procfs): trust a second kill.
        None => match raw_kill0(pid) {
            Err(ProbeError::Esrch) => ProcState::Dead,
            _ => exists,
        },
    }
}

/// A process identity that survives PID reuse: the pid plus its true start time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Identity {
    pub pid: i32,
    /// Epoch milliseconds (boot time + starttime / CLK_TCK on Linux).
    pub start_time_ms: f64,
    pub state: ProcState,
}

/// Identity of a live (or zombie, or unsignalable) pid; None when it does not exist.
pub fn process_identity(pid: i32) -> Option<Identity> {
    let state = probe_pid(pid);
    if state == ProcState::Dead {
        return None;
    }
    let st = os_stat(pid)?;
    Some(Identity {
        pid,
        start_time_ms: st.start_time_ms?,
        state: if st.zombie { ProcState::Zombie } else { state },
    })
}

/// True iff `pid` still runs as the process that started at `start_time_ms`
/// (false once it died, turned zombie, or the pid was reused).
pub fn is_same_process(pid: i32, start_time_ms: f64) -> bool {
    match process_identity(pid) {
        Some(id) => {
            matches!(id.state, ProcState::Alive | ProcState::Eperm)
                && id.start_time_ms == start_time_ms
        }
        None => false,
    }
}

struct OsStat {
    zombie: bool,
    start_time_ms: Option<f64>,
}

#[cfg(target_os = "linux")]
fn os_stat(pid: i32) -> Option<OsStat> {
    let (zombie, ticks) = procfs::with_stat(pid, |text| {
        let close = text.rfind(')')?;
        let mut fields = text[close + 1..].split_ascii_whitespace();
        // Z = zombie, X/x = dead (seen only transiently while being reaped).
        let zombie = matches!(fields.next()?, "Z" | "X" | "x");
        let ticks: u64 = fields.nth(18)?.parse().ok()?;
        Some((zombie, ticks))
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

#[cfg(target_os = "linux")]
mod procfs {
    use std::collections::HashMap;
    use std::fs::File;
    use std::os::unix::fs::FileExt;
    use std::sync::{Mutex, OnceLock};

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

#[cfg(target_os = "macos")]
fn os_stat(pid: i32) -> Option<OsStat> {
    let info = darwin::bsd_info(pid)?;
    Some(OsStat {
        zombie: info.zombie,
        start_time_ms: Some(info.start_sec as f64 * 1000.0 + (info.start_usec / 1000) as f64),
    })
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn os_stat(_pid: i32) -> Option<OsStat> {
    None
}

#[cfg(target_os = "macos")]
mod darwin {
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

#[cfg(test)]
mod tests {
    use super::*;

    const SELF_STAT: &str =
        "1234 (a b) c)) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 987654 20";

    #[test]
    fn kill_arg_classification_matches_node() {
        assert_eq!(KillArg::from_number(12.0, || "12".into()), KillArg::Pid(12));
        assert_eq!(KillArg::from_number(-0.0, || "0".into()), KillArg::Pid(0));
        assert_eq!(
            KillArg::from_number(1.5, || "1.5".into()),
            KillArg::InvalidType(
                "The \"pid\" argument must be of type number. Received type number (1.5)".into()
            )
        );
        assert!(matches!(
            KillArg::from_number(2_147_483_648.0, || "2147483648".into()),
            KillArg::InvalidType(_)
        ));
        assert!(matches!(
            KillArg::from_number(f64::NAN, || "NaN".into()),
            KillArg::InvalidType(_)
        ));
        assert_eq!(
            KillArg::from_number(-2_147_483_648.0, String::new),
            KillArg::Pid(i32::MIN)
        );
    }

    #[test]
    fn stat_parse_uses_last_paren_and_field_19() {
        assert_eq!(stat_field_after_comm(SELF_STAT, 19), Some(987654.0));
        assert_eq!(stat_field_after_comm("no paren here", 19), None);
        assert_eq!(stat_field_after_comm("1 (x) S 1", 19), None);
    }

    #[test]
    fn self_is_alive_everywhere() {
        let me = std::process::id() as i32;
        assert_eq!(probe_pid(me), ProcState::Alive);
        assert!(is_reload_session_process_alive(me as f64));
        assert!(default_is_pid_alive(true, &KillArg::Pid(me)));
        let l = check_process_liveness(Some(me as f64), String::new);
        assert_eq!(l.detail, "process is alive");
        let id = process_identity(me).expect("own identity");
        assert!(is_same_process(me, id.start_time_ms));
        assert!(!is_same_process(me, id.start_time_ms - 10.0));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn legacy_start_time_is_ticks_times_100() {
        let me = std::process::id();
        let text = std::fs::read_to_string(format!("/proc/{me}/stat")).unwrap();
        let ticks = stat_field_after_comm(&text, 19).unwrap();
        let got = legacy_start_time(&KillArg::Pid(me as i32), || Some(me.to_string()));
        assert_eq!(got, Some((ticks * 100.0).floor()));
        // A gate failure wins over a readable procfs path.
        assert_eq!(
            legacy_start_time(&KillArg::undefined(), || Some("self".into())),
            None
        );
    }

    #[test]
    fn legacy_guards() {
        assert!(!is_reload_session_process_alive(0.0));
        assert!(!is_reload_session_process_alive(-1.0));
        assert!(!is_reload_session_process_alive(1.5));
        assert!(!is_reload_session_process_alive(f64::INFINITY));
        assert_eq!(
            check_process_liveness(None, String::new).detail,
            "no pid recorded"
        );
        assert_eq!(
            check_process_liveness(Some(2_147_483_648.0), || "2147483648".into()).detail,
            "The \"pid\" argument must be of type number. Received type number (2147483648)"
        );
        // Foreign host: alive without probing.
        assert!(default_is_pid_alive(false, &KillArg::undefined()));
        assert!(!default_is_pid_alive(true, &KillArg::undefined()));
        // pid 0 probes the own process group: alive, as in the original.
        assert!(default_is_pid_alive(true, &KillArg::Pid(0)));
    }

    #[test]
    fn reaped_child_is_dead_zombie_is_zombie() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        assert_eq!(probe_pid(pid), ProcState::Alive);
        child.kill().unwrap();
        // Not yet waited: a zombie (poll until the kernel has switched state).
        let mut st = probe_pid(pid);
        for _ in 0..200 {
            if st == ProcState::Zombie {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
            st = probe_pid(pid);
        }
        if cfg!(target_os = "linux") {
            assert_eq!(st, ProcState::Zombie);
            assert!(!is_same_process(pid, 0.0));
        }
        child.wait().unwrap();
        assert_eq!(probe_pid(pid), ProcState::Dead);
        assert!(process_identity(pid).is_none());
    }
}

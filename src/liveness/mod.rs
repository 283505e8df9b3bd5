//! PID liveness (SPEC §1.C, §2.C): the kill-probe primitive Node's `process.kill(pid, 0)` is,
//! the four legacy predicates built on it (bit-exact), and the procfs-backed process identity
//! of the new API (zombie detection, PID-reuse detection).
//!
//! Everything here is plain Rust; the binding layer turns JS values into [`KillArg`]s first.

use crate::jsstr::{js_split_whitespace, js_string_to_number, to_int32};

// Per-OS primitives: `raw_kill0` (the kill(pid, 0) probe as libuv does it), `os_hostname`,
// `legacy_start_time_after_gate` (C4's platform branch) and `os_stat` (zombie state, start).
#[cfg(target_os = "macos")]
mod darwin;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(target_os = "linux")]
pub(crate) use linux::pidfd_open;
#[cfg(unix)]
mod unix;
#[cfg(windows)]
mod windows;

#[cfg(target_os = "macos")]
use darwin::{legacy_start_time_after_gate, os_stat};
#[cfg(target_os = "linux")]
use linux::{legacy_start_time_after_gate, os_stat};
#[cfg(unix)]
pub use unix::os_hostname;
#[cfg(unix)]
use unix::raw_kill0;
#[cfg(windows)]
pub use windows::os_hostname;
#[cfg(windows)]
use windows::{legacy_start_time_after_gate, os_stat, raw_kill0};

/// C4 and the identity API answer "unknown" on platforms without a start-time source.
#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
fn legacy_start_time_after_gate(_pid: &KillArg, _pid_text: &str) -> Option<f64> {
    None
}

#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
fn os_stat(_pid: i32) -> Option<OsStat> {
    None
}

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
    /// Any other libuv error, by name (Windows: a translated Win32 error); `kill <CODE>`.
    Code(&'static str),
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
            ProbeError::Code(c) => format!("kill {c}"),
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

/// What the OS says about a process beyond kill(pid, 0).
struct OsStat {
    /// Exited but not reaped (never on Windows: an exited process fails the probe).
    zombie: bool,
    /// True start time in epoch ms, when the platform exposes it.
    start_time_ms: Option<f64>,
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

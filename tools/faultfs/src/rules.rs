//! Fault rules: which requests they match, what they do to them, and what they did (hit counts
//! and a log). Rules are added and removed at run time through the control channel
//! (`control.rs`); every FUSE request asks [`Rules::decide`] before it touches the backing
//! folder. The rule language is documented in docs/FAULT-LAYER.md.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Operation names a rule may name. `utimens`, `truncate`, `chmod` and `chown` are the
/// `setattr` requests that change times, size, mode or owner; `readdir` covers `readdirplus`.
pub const OPS: &[&str] = &[
    "lookup",
    "getattr",
    "setattr",
    "utimens",
    "truncate",
    "chmod",
    "chown",
    "mkdir",
    "rmdir",
    "rename",
    "unlink",
    "create",
    "open",
    "read",
    "write",
    "flush",
    "release",
    "fsync",
    "opendir",
    "readdir",
    "releasedir",
    "statfs",
    "access",
    "symlink",
    "readlink",
    "link",
    "mknod",
];

/// Errno names a rule may give (or a positive number).
const ERRNOS: &[(&str, i32)] = &[
    ("EPERM", libc::EPERM),
    ("ENOENT", libc::ENOENT),
    ("EINTR", libc::EINTR),
    ("EIO", libc::EIO),
    ("ENXIO", libc::ENXIO),
    ("EBADF", libc::EBADF),
    ("EAGAIN", libc::EAGAIN),
    ("ENOMEM", libc::ENOMEM),
    ("EACCES", libc::EACCES),
    ("EBUSY", libc::EBUSY),
    ("EEXIST", libc::EEXIST),
    ("EXDEV", libc::EXDEV),
    ("ENOTDIR", libc::ENOTDIR),
    ("EISDIR", libc::EISDIR),
    ("EINVAL", libc::EINVAL),
    ("ENFILE", libc::ENFILE),
    ("EMFILE", libc::EMFILE),
    ("EFBIG", libc::EFBIG),
    ("ENOSPC", libc::ENOSPC),
    ("EROFS", libc::EROFS),
    ("EMLINK", libc::EMLINK),
    ("ENAMETOOLONG", libc::ENAMETOOLONG),
    ("ENOLCK", libc::ENOLCK),
    ("ENOSYS", libc::ENOSYS),
    ("ENOTEMPTY", libc::ENOTEMPTY),
    ("ELOOP", libc::ELOOP),
    ("ENODATA", libc::ENODATA),
    ("ENOTSUP", libc::ENOTSUP),
    ("ECONNRESET", libc::ECONNRESET),
    ("ENOTCONN", libc::ENOTCONN),
    ("ETIMEDOUT", libc::ETIMEDOUT),
    ("ECONNREFUSED", libc::ECONNREFUSED),
    ("EHOSTDOWN", libc::EHOSTDOWN),
    ("EHOSTUNREACH", libc::EHOSTUNREACH),
    ("ESTALE", libc::ESTALE),
    ("EDQUOT", libc::EDQUOT),
    ("ECANCELED", libc::ECANCELED),
];

/// The name of an errno (`EIO`), or its number when it has none here.
pub fn errno_name(errno: i32) -> String {
    ERRNOS
        .iter()
        .find(|(_, n)| *n == errno)
        .map_or_else(|| errno.to_string(), |(name, _)| (*name).to_string())
}

/// One value or a list of them (`"op": "mkdir"` or `"op": ["mkdir", "rmdir"]`).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T: Clone> OneOrMany<T> {
    fn to_vec(&self) -> Vec<T> {
        match self {
            OneOrMany::One(x) => vec![x.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// An errno as a rule gives it: a name (`"ESTALE"`) or a number.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum ErrnoSpec {
    Name(String),
    Number(i32),
}

/// A rule as the control channel receives it (see docs/FAULT-LAYER.md).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSpec {
    /// What the rule does: `lost_reply`, `error`, `delay` or `hang`.
    pub kind: String,
    /// Operations it matches (default: every operation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<OneOrMany<String>>,
    /// A regular expression the request's path (relative to the mount root, no leading `/`)
    /// must match (unanchored: use `^…$` for a whole path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// For `rename`: a regular expression the destination path must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dest: Option<String>,
    /// Only requests made by these processes (a thread id or its process id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<OneOrMany<u32>>,
    /// Let the first `after` matching requests pass untouched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<u64>,
    /// Act on at most `count` requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// Act only for this long, counted from the first request acted on (or from the rule's
    /// addition with `"from": "now"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_ms: Option<u64>,
    /// Where `for_ms` counts from: `first` (default) or `now`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The errno of `error` and `lost_reply` (default EIO).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<ErrnoSpec>,
    /// The wait of `delay`, in milliseconds; for `lost_reply` and `error`, how long the caller
    /// waits for its answer (a client's timeout: a `lost_reply` performs at once, then answers
    /// after `ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ms: Option<u64>,
}

/// What a rule does to a request it acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Perform the operation on the backing folder, then answer the errno (the reply was lost).
    LostReply,
    /// Answer the errno without performing the operation.
    Error,
    /// Wait, then perform and answer normally.
    Delay,
    /// Wait until released (or the rule is removed), then perform and answer normally.
    Hang,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::LostReply => "lost_reply",
            Kind::Error => "error",
            Kind::Delay => "delay",
            Kind::Hang => "hang",
        }
    }
}

/// Where a hung request waits. Releasing bumps the generation: every request that started
/// hanging before goes on; later ones hang again.
#[derive(Debug, Default)]
pub struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct GateState {
    generation: u64,
    /// The rule is gone (removed, cleared, or the file system is shutting down): nothing hangs.
    open: bool,
    hanging: u64,
}

impl Gate {
    fn generation(&self) -> u64 {
        lock(&self.state).generation
    }

    /// Wait until the gate is released past `generation` or opened for good.
    pub fn wait(&self, generation: u64) {
        let mut s = lock(&self.state);
        s.hanging += 1;
        while s.generation == generation && !s.open {
            s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.hanging -= 1;
    }

    /// Let every request hanging now go on; returns how many there were.
    fn release(&self) -> u64 {
        let mut s = lock(&self.state);
        s.generation += 1;
        self.changed.notify_all();
        s.hanging
    }

    /// Let everything through, now and later.
    fn open(&self) {
        lock(&self.state).open = true;
        self.changed.notify_all();
    }

    fn hanging(&self) -> u64 {
        lock(&self.state).hanging
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Debug)]
struct Rule {
    id: u64,
    spec: RuleSpec,
    kind: Kind,
    ops: Option<Vec<String>>,
    path: Option<Regex>,
    dest: Option<Regex>,
    pids: Option<Vec<u32>>,
    errno: i32,
    /// Requests that matched the filters (those let through by `after` included).
    matched: u64,
    /// Requests acted on.
    fired: u64,
    /// Start of the `for_ms` window.
    window_start: Option<Instant>,
    gate: Arc<Gate>,
}

impl Rule {
    fn from_spec(id: u64, spec: RuleSpec) -> Result<Rule, String> {
        let kind = match spec.kind.as_str() {
            "lost_reply" => Kind::LostReply,
            "error" => Kind::Error,
            "delay" => Kind::Delay,
            "hang" => Kind::Hang,
            other => {
                return Err(format!(
                    "unknown kind {other:?} (lost_reply, error, delay, hang)"
                ))
            }
        };
        let ops = spec.op.as_ref().map(OneOrMany::to_vec);
        for op in ops.iter().flatten() {
            if !OPS.contains(&op.as_str()) {
                return Err(format!("unknown op {op:?} (one of {})", OPS.join(", ")));
            }
        }
        let regex = |what: &str, src: &Option<String>| -> Result<Option<Regex>, String> {
            src.as_deref()
                .map(|s| Regex::new(s).map_err(|e| format!("{what}: {e}")))
                .transpose()
        };
        let errno = match &spec.errno {
            None => libc::EIO,
            Some(ErrnoSpec::Number(n)) if *n > 0 => *n,
            Some(ErrnoSpec::Number(n)) => return Err(format!("errno {n} is not positive")),
            Some(ErrnoSpec::Name(name)) => ERRNOS
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| *v)
                .ok_or_else(|| format!("unknown errno {name:?}"))?,
        };
        if kind == Kind::Delay && spec.ms.is_none() {
            return Err("a delay needs ms".into());
        }
        let window_start = match spec.from.as_deref() {
            None | Some("first") => None,
            Some("now") => Some(Instant::now()),
            Some(other) => return Err(format!("unknown from {other:?} (first, now)")),
        };
        Ok(Rule {
            id,
            kind,
            ops,
            path: regex("path", &spec.path)?,
            dest: regex("dest", &spec.dest)?,
            pids: spec.pid.as_ref().map(OneOrMany::to_vec),
            errno,
            matched: 0,
            fired: 0,
            window_start,
            gate: Arc::new(Gate::default()),
            spec,
        })
    }

    fn matches(&self, call: &Call<'_>) -> bool {
        if let Some(ops) = &self.ops {
            if !ops
                .iter()
                .any(|o| o == call.op || call.aliases.contains(&o.as_str()))
            {
                return false;
            }
        }
        if let Some(re) = &self.path {
            if !re.is_match(call.path()) {
                return false;
            }
        }
        if let Some(re) = &self.dest {
            match call.dest() {
                Some(d) if re.is_match(d) => {}
                _ => return false,
            }
        }
        if let Some(pids) = &self.pids {
            if !pids.contains(&call.pid) && !pids.contains(&call.tgid()) {
                return false;
            }
        }
        true
    }

    /// Whether the rule still acts (count left, window open); `now` for the window.
    fn live(&self, now: Instant) -> bool {
        if self.spec.count.is_some_and(|c| self.fired >= c) {
            return false;
        }
        match (self.spec.for_ms, self.window_start) {
            (Some(ms), Some(start)) => now.duration_since(start) < Duration::from_millis(ms),
            _ => true,
        }
    }

    fn describe(&self) -> Value {
        json!({
            "id": self.id,
            "rule": self.spec,
            "matched": self.matched,
            "fired": self.fired,
            "hanging": self.gate.hanging(),
            "active": self.live(Instant::now()),
        })
    }
}

/// A request as the rules see it. The path (and the caller's process id) are worked out only
/// when a rule asks.
pub struct Call<'a> {
    /// Operation name (one of [`OPS`]).
    pub op: &'static str,
    /// Other names the request answers to (`setattr` that sets times: `utimens`).
    pub aliases: &'static [&'static str],
    /// The caller's thread id as FUSE reports it.
    pub pid: u32,
    path: std::cell::OnceCell<String>,
    dest: std::cell::OnceCell<Option<String>>,
    tgid: std::cell::OnceCell<u32>,
    resolve: &'a dyn Fn() -> (String, Option<String>),
}

impl<'a> Call<'a> {
    /// A request of `op` by thread `pid`; `resolve` gives its path and, for a rename, its
    /// destination.
    pub fn new(
        op: &'static str,
        aliases: &'static [&'static str],
        pid: u32,
        resolve: &'a dyn Fn() -> (String, Option<String>),
    ) -> Call<'a> {
        Call {
            op,
            aliases,
            pid,
            path: std::cell::OnceCell::new(),
            dest: std::cell::OnceCell::new(),
            tgid: std::cell::OnceCell::new(),
            resolve,
        }
    }

    fn resolve_paths(&self) {
        if self.path.get().is_none() {
            let (p, d) = (self.resolve)();
            let _ = self.path.set(p);
            let _ = self.dest.set(d);
        }
    }

    /// The path, relative to the mount root.
    pub fn path(&self) -> &str {
        self.resolve_paths();
        self.path.get().map_or("", String::as_str)
    }

    /// A rename's destination path.
    pub fn dest(&self) -> Option<&str> {
        self.resolve_paths();
        self.dest.get().and_then(|d| d.as_deref())
    }

    /// The process the calling thread belongs to (its thread id when /proc cannot say).
    pub fn tgid(&self) -> u32 {
        *self.tgid.get_or_init(|| tgid_of(self.pid))
    }

    /// What the log keeps of the request (owned: a held request finishes on another thread).
    pub fn info(&self) -> CallInfo {
        CallInfo {
            op: self.op,
            path: self.path().to_string(),
            dest: self.dest().map(str::to_string),
            pid: self.pid,
            tgid: self.tgid(),
        }
    }
}

/// A request as logged.
#[derive(Debug, Clone)]
pub struct CallInfo {
    pub op: &'static str,
    pub path: String,
    pub dest: Option<String>,
    pub pid: u32,
    pub tgid: u32,
}

/// The thread group (process) of thread `tid`, from /proc.
fn tgid_of(tid: u32) -> u32 {
    std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Tgid:").map(|v| v.trim().parse().ok()))
                .flatten()
        })
        .unwrap_or(tid)
}

/// What to do with a request.
pub enum Verdict {
    /// No rule acts: perform and answer.
    Pass,
    /// Answer `errno` (after `ms`) without performing.
    Error { rule: u64, errno: i32, ms: u64 },
    /// Perform, then answer `errno` (after `ms`).
    LostReply { rule: u64, errno: i32, ms: u64 },
    /// Wait `ms`, then perform and answer.
    Delay { rule: u64, ms: u64 },
    /// Wait at `gate` until released past `generation`, then perform and answer.
    Hang {
        rule: u64,
        gate: Arc<Gate>,
        generation: u64,
    },
}

/// One logged request.
#[derive(Debug, Clone, Serialize)]
pub struct LogEntry {
    pub seq: u64,
    /// When the request arrived (ms since the epoch).
    pub at: u64,
    pub op: &'static str,
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dest: Option<String>,
    pub pid: u32,
    pub tgid: u32,
    /// The rule that acted (none: passed through, logged with `--log-all`).
    pub rule: Option<u64>,
    /// `pass`, `error`, `lost_reply`, `delay` or `hang`.
    pub action: &'static str,
    /// What the backing folder answered (`ok`, an errno name; `-` when not performed).
    pub result: String,
    /// What the caller was answered.
    pub answered: String,
    /// How long the request was held (delay, hang), ms.
    pub held_ms: u64,
}

/// Requests kept in the log at most (the oldest go first).
const LOG_CAP: usize = 20_000;

/// The rule set of one mount, its log, and the ids it hands out.
#[derive(Default)]
pub struct Rules {
    rules: Mutex<Vec<Rule>>,
    /// How many rules there are, read without the lock on every request.
    count: AtomicUsize,
    next_id: Mutex<u64>,
    log: Mutex<(u64, VecDeque<LogEntry>)>,
    /// Log every request, not only those a rule acted on.
    pub log_all: bool,
}

impl Rules {
    /// A rule set that logs every request when `log_all`.
    pub fn new(log_all: bool) -> Rules {
        Rules {
            log_all,
            ..Rules::default()
        }
    }

    /// Add a rule; its id.
    pub fn add(&self, spec: RuleSpec) -> Result<u64, String> {
        let id = {
            let mut n = lock(&self.next_id);
            *n += 1;
            *n
        };
        let rule = Rule::from_spec(id, spec)?;
        let mut rules = lock(&self.rules);
        rules.push(rule);
        self.count.store(rules.len(), Ordering::Release);
        Ok(id)
    }

    /// Remove a rule (its hung requests go on); whether it existed.
    pub fn remove(&self, id: u64) -> bool {
        let mut rules = lock(&self.rules);
        let Some(i) = rules.iter().position(|r| r.id == id) else {
            return false;
        };
        rules.remove(i).gate.open();
        self.count.store(rules.len(), Ordering::Release);
        true
    }

    /// Let the requests rule `id` holds now go on; how many, or None for an unknown rule.
    pub fn release(&self, id: u64) -> Option<u64> {
        lock(&self.rules)
            .iter()
            .find(|r| r.id == id)
            .map(|r| r.gate.release())
    }

    /// Remove every rule (hung requests go on).
    pub fn clear(&self) {
        let mut rules = lock(&self.rules);
        for r in rules.drain(..) {
            r.gate.open();
        }
        self.count.store(0, Ordering::Release);
    }

    /// The rules with their counters.
    pub fn list(&self) -> Vec<Value> {
        lock(&self.rules).iter().map(Rule::describe).collect()
    }

    /// One rule with its counters.
    pub fn get(&self, id: u64) -> Option<Value> {
        lock(&self.rules)
            .iter()
            .find(|r| r.id == id)
            .map(Rule::describe)
    }

    /// Logged requests after `since` (a `seq`).
    pub fn log_since(&self, since: u64) -> Vec<LogEntry> {
        lock(&self.log)
            .1
            .iter()
            .filter(|e| e.seq > since)
            .cloned()
            .collect()
    }

    /// Whether requests need their paths worked out (a rule could match, or all are logged).
    pub fn watching(&self) -> bool {
        self.log_all || self.count.load(Ordering::Acquire) > 0
    }

    /// What to do with `call`: the first rule (in order of addition) that matches and still
    /// acts decides; a rule that matches but lets the request through (`after`, spent count,
    /// closed window) leaves it to the next.
    pub fn decide(&self, call: &Call<'_>) -> Verdict {
        if self.count.load(Ordering::Acquire) == 0 {
            return Verdict::Pass;
        }
        let now = Instant::now();
        let mut rules = lock(&self.rules);
        for rule in rules.iter_mut() {
            if !rule.matches(call) {
                continue;
            }
            rule.matched += 1;
            if rule.matched <= rule.spec.after.unwrap_or(0) || !rule.live(now) {
                continue;
            }
            rule.window_start.get_or_insert(now);
            rule.fired += 1;
            let id = rule.id;
            return match rule.kind {
                Kind::Error => Verdict::Error {
                    rule: id,
                    errno: rule.errno,
                    ms: rule.spec.ms.unwrap_or(0),
                },
                Kind::LostReply => Verdict::LostReply {
                    rule: id,
                    errno: rule.errno,
                    ms: rule.spec.ms.unwrap_or(0),
                },
                Kind::Delay => Verdict::Delay {
                    rule: id,
                    ms: rule.spec.ms.unwrap_or(0),
                },
                Kind::Hang => Verdict::Hang {
                    rule: id,
                    generation: rule.gate.generation(),
                    gate: rule.gate.clone(),
                },
            };
        }
        Verdict::Pass
    }

    /// Record what happened to a request.
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &self,
        call: &CallInfo,
        arrived: SystemTime,
        rule: Option<u64>,
        action: &'static str,
        result: String,
        answered: String,
        held: Duration,
    ) {
        let entry = |seq| LogEntry {
            seq,
            at: arrived
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            op: call.op,
            path: call.path.clone(),
            dest: call.dest.clone(),
            pid: call.pid,
            tgid: call.tgid,
            rule,
            action,
            result,
            answered,
            held_ms: held.as_millis() as u64,
        };
        let mut log = lock(&self.log);
        log.0 += 1;
        let e = entry(log.0);
        if log.1.len() >= LOG_CAP {
            log.1.pop_front();
        }
        log.1.push_back(e);
    }

    /// Open every gate for good (shutting down: nothing may stay hung).
    pub fn open_all(&self) {
        for r in lock(&self.rules).iter() {
            r.gate.open();
        }
    }
}

/// The action name of a verdict, for the log.
pub fn action_name(v: &Verdict) -> &'static str {
    match v {
        Verdict::Pass => "pass",
        Verdict::Error { .. } => Kind::Error.name(),
        Verdict::LostReply { .. } => Kind::LostReply.name(),
        Verdict::Delay { .. } => Kind::Delay.name(),
        Verdict::Hang { .. } => Kind::Hang.name(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(v: Value) -> RuleSpec {
        serde_json::from_value(v).unwrap()
    }

    fn call<'a>(op: &'static str, r: &'a dyn Fn() -> (String, Option<String>)) -> Call<'a> {
        Call::new(op, &[], 1, r)
    }

    #[test]
    fn after_count_and_order() {
        let rules = Rules::new(false);
        let a = rules
            .add(spec(
                json!({"kind": "error", "op": "rmdir", "path": "\\.lock$", "after": 1, "count": 2}),
            ))
            .unwrap();
        let b = rules
            .add(spec(
                json!({"kind": "delay", "ms": 5, "op": ["rmdir", "mkdir"]}),
            ))
            .unwrap();
        let p = || ("a/f.json.lock".to_string(), None);
        let kinds: Vec<_> = (0..4)
            .map(|_| match rules.decide(&call("rmdir", &p)) {
                Verdict::Error { rule, errno, .. } => {
                    assert_eq!((rule, errno), (a, libc::EIO));
                    "error"
                }
                Verdict::Delay { rule, .. } => {
                    assert_eq!(rule, b);
                    "delay"
                }
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["delay", "error", "error", "delay"]);
        let q = || ("a/f.json".to_string(), None);
        assert!(matches!(rules.decide(&call("unlink", &q)), Verdict::Pass));
    }

    #[test]
    fn bad_rules_are_refused() {
        let rules = Rules::new(false);
        for bad in [
            json!({"kind": "explode"}),
            json!({"kind": "error", "op": "mkdirs"}),
            json!({"kind": "error", "errno": "ENOPE"}),
            json!({"kind": "delay"}),
            json!({"kind": "error", "path": "("}),
            json!({"kind": "error", "colour": "red"}),
        ] {
            let parsed: Result<RuleSpec, _> = serde_json::from_value(bad.clone());
            assert!(
                parsed.map_or(true, |s| rules.add(s).is_err()),
                "accepted {bad}"
            );
        }
    }

    #[test]
    fn setattr_aliases() {
        let rules = Rules::new(false);
        rules
            .add(spec(
                json!({"kind": "error", "op": "utimens", "errno": "ESTALE"}),
            ))
            .unwrap();
        let p = || (String::new(), None);
        assert!(matches!(
            rules.decide(&Call::new("setattr", &["utimens"], 1, &p)),
            Verdict::Error { errno, .. } if errno == libc::ESTALE
        ));
        assert!(matches!(
            rules.decide(&Call::new("setattr", &["truncate"], 1, &p)),
            Verdict::Pass
        ));
    }

    #[test]
    fn hang_release() {
        let rules = Rules::new(false);
        let id = rules.add(spec(json!({"kind": "hang"}))).unwrap();
        let p = || (String::new(), None);
        let Verdict::Hang {
            gate, generation, ..
        } = rules.decide(&call("getattr", &p))
        else {
            panic!("not a hang")
        };
        let t = std::thread::spawn(move || gate.wait(generation));
        while rules.get(id).unwrap()["hanging"] != 1 {
            std::thread::yield_now();
        }
        assert_eq!(rules.release(id), Some(1));
        t.join().unwrap();
    }
}

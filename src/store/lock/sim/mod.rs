//! The deterministic simulator of the lock (docs/LOCKING.md): processes on several simulated
//! machines sharing one folder, each running pi-native's own decisions ([`client::Native`]:
//! the very state machines production drives) or proper-lockfile's rules
//! ([`client::Reference`]), against every fault of docs/FAULTS.md the model knows: replies
//! lost after the work was done, error windows (EIO, ESTALE), attribute caches (the kernel's
//! and a FUSE daemon's), renumbered inodes, whole-second times, hung replies, paused and killed
//! processes, suspended machines, skewed clocks. Single-threaded and seeded: a seed replays
//! the same run. After every step [`check::Checker`] checks the guarantees.
//!
//! Fault model: a call takes effect at the instant it is made; what a fault changes is its
//! reply (lost: an error though the work was done; hung: late) or whether it is made at all
//! (an error window). A request that waits in a network queue and takes effect later is
//! outside this model (no lock protocol without server-side fencing survives it).

pub mod check;
pub mod client;
pub mod fs;
pub mod rng;

use std::time::Duration;

use super::model::{Mutations, Rule};
use super::world::Clocks;
use check::{Checker, Who};
use client::{Action, Ctx, Input, Native, Params, Reference, Thread, Told};
use fs::{Effect, Faults, Folder, Machine, Name};
use rng::Rng;

/// One run's world, drawn from its seed.
#[derive(Debug, Clone)]
pub struct Config {
    pub seed: u64,
    pub remote: bool,
    pub natives: usize,
    pub references: usize,
    pub machines: usize,
    pub noreplace: bool,
    pub whole_seconds: bool,
    pub keeps_atime: bool,
    /// The network rule's attribute-cache bound (at least every cache of the run).
    pub cache: Duration,
    pub faults: Faults,
    /// Faults happen during the chaos; then the calm, in which locks must be taken over.
    pub chaos: Duration,
    pub calm: Duration,
    pub mutations: Mutations,
    /// Per machine: (skew, kernel attribute TTL, daemon TTL, renumbers).
    pub views: Vec<(i128, Duration, Duration, bool)>,
    /// Error windows: (machine, from, until, errno).
    pub windows: Vec<(usize, Duration, Duration, i32)>,
    /// Machine suspends: (machine, from, until).
    pub suspends: Vec<(usize, Duration, Duration)>,
    /// Process pauses (SIGSTOP … SIGCONT): (process, from, until).
    pub pauses: Vec<(usize, Duration, Duration)>,
    /// Kills: (process, at).
    pub kills: Vec<(usize, Duration)>,
    /// Keep a trace of every call (printed with a failure).
    pub trace: bool,
}

impl Config {
    /// A world drawn from `seed`.
    pub fn random(seed: u64, mutations: Mutations) -> Config {
        let mut r = Rng::new(seed ^ 0x5eed_1abe_11ed);
        let remote = r.chance(0.75);
        let machines = if remote { 1 + r.below(3) as usize } else { 1 };
        let natives = 2 + r.below(3) as usize;
        let references = if r.chance(0.4) {
            1 + r.below(2) as usize
        } else {
            0
        };
        let procs = natives + references;
        let chaos = r.ms(8_000, 30_000);
        let calm = Duration::from_secs(if remote { 30 } else { 12 });
        let whole_seconds = r.chance(0.4);
        let noreplace = remote && r.chance(0.5);
        let keeps_atime = r.chance(0.92);
        let mut views = Vec::new();
        let mut max_cache = Duration::ZERO;
        for _ in 0..machines {
            let skew = if remote && r.chance(0.5) {
                (r.below(6_000) as i128 - 3_000) * 1_000_000
            } else {
                0
            };
            let attr = if remote {
                r.ms(0, 1_000)
            } else {
                Duration::ZERO
            };
            let daemon = if remote && r.chance(0.3) {
                r.ms(0, 2_000)
            } else {
                Duration::ZERO
            };
            max_cache = max_cache.max(attr).max(daemon);
            // A folder that keeps no atime and renumbers inodes leaves nothing to recognize a
            // directory by: not supported (docs/LOCKING.md), not drawn.
            views.push((skew, attr, daemon, remote && keeps_atime && r.chance(0.3)));
        }
        let cache = max_cache + r.ms(0, 2_000);
        let faults = if remote {
            Faults {
                lost_reply: [0.0, 0.01, 0.05, 0.15][r.below(4) as usize],
                hang: [0.0, 0.002, 0.01][r.below(3) as usize],
                hang_max: r.ms(100, 4_000),
                latency: r.ms(0, 3).max(Duration::from_micros(200)),
                until: chaos,
            }
        } else {
            Faults {
                lost_reply: 0.0,
                hang: 0.0,
                hang_max: Duration::ZERO,
                latency: Duration::from_micros(20),
                until: chaos,
            }
        };
        let mut windows = Vec::new();
        let mut suspends = Vec::new();
        let mut pauses = Vec::new();
        let mut kills = Vec::new();
        let within = |r: &mut Rng, len: Duration| {
            let from = Duration::from_millis(r.below(chaos.as_millis() as u64));
            (from, (from + len).min(chaos))
        };
        if remote {
            for _ in 0..r.below(4) {
                let m = r.below(machines as u64) as usize;
                let len = r.ms(200, 4_000);
                let (a, b) = within(&mut r, len);
                windows.push((m, a, b, if r.chance(0.7) { fs::EIO } else { fs::ESTALE }));
            }
        }
        for _ in 0..r.below(3) {
            let m = r.below(machines as u64) as usize;
            let len = r.ms(500, 6_000);
            let (a, b) = within(&mut r, len);
            suspends.push((m, a, b));
        }
        for _ in 0..r.below(5) {
            let p = r.below(procs as u64) as usize;
            let len = r.ms(100, 5_000);
            let (a, b) = within(&mut r, len);
            pauses.push((p, a, b));
        }
        // Some processes may be killed; two natives always live on.
        for p in 2..procs {
            if r.chance(0.25) {
                let at = Duration::from_millis(r.below(chaos.as_millis() as u64));
                kills.push((p, at));
            }
        }
        Config {
            seed,
            remote,
            natives,
            references,
            machines,
            noreplace,
            whole_seconds,
            keeps_atime,
            cache,
            faults,
            chaos,
            calm,
            mutations,
            views,
            windows,
            suspends,
            pauses,
            kills,
            trace: false,
        }
    }

    /// The command that replays this run.
    pub fn replay(&self) -> String {
        let m = &self.mutations;
        let mut muts = Vec::new();
        for (on, name) in [
            (m.repeat_rmdir, "repeat-rmdir"),
            (m.mtime_identity, "mtime-identity"),
            (m.no_private_name, "no-private-name"),
            (m.forget_orphans, "forget-orphans"),
        ] {
            if on {
                muts.push(format!(" --mutate {name}"));
            }
        }
        format!("npm run sim -- --seed {}{}", self.seed, muts.concat())
    }
}

/// What a run found.
#[derive(Debug)]
pub struct Report {
    pub config: Config,
    /// The calls of the run, when traced (the last 400 before a failure).
    pub trace: Vec<String>,
    pub violations: Vec<String>,
    pub stats: check::Stats,
}

enum Kind {
    Native(Box<Native>),
    Reference(Reference),
}

struct Th {
    wake: Duration,
    input: Input,
}

struct Proc {
    machine: usize,
    kind: Kind,
    alive: bool,
    threads: [Th; 2],
}

const STALE: Duration = Duration::from_millis(2000);

/// The local rule's terms (L3): an mtime older than the threshold by the server's clock `now`.
fn mtime_stale(mtime: i128, now: i128) -> bool {
    mtime < now - STALE.as_nanos() as i128
}

/// Run one simulation.
pub fn run(cfg: &Config) -> Report {
    let mut rng = Rng::new(cfg.seed);
    let epoch: i128 = 1_790_000_000 * 1_000_000_000 + i128::from(rng.below(1_000_000_000));
    let mut folder = Folder::new(
        cfg.whole_seconds,
        cfg.noreplace,
        cfg.keeps_atime,
        cfg.remote,
        cfg.faults,
        epoch,
    );
    let mut machines: Vec<Machine> = cfg
        .views
        .iter()
        .map(|&(skew, attr, daemon, renumber)| Machine::new(skew, attr, daemon, renumber))
        .collect();
    for &(m, a, b, e) in &cfg.windows {
        machines[m].windows.push((a, b, e));
    }
    for &(m, a, b) in &cfg.suspends {
        machines[m].suspend(a, b);
    }
    let rule = if cfg.remote {
        Rule::Network { cache: cfg.cache }
    } else {
        Rule::Local
    };
    let params = Params {
        rule,
        remote: cfg.remote,
        stale: STALE,
        mutations: cfg.mutations,
    };
    let mut procs: Vec<Proc> = (0..cfg.natives + cfg.references)
        .map(|i| Proc {
            machine: i % cfg.machines,
            kind: if i < cfg.natives {
                Kind::Native(Box::new(Native::new(params)))
            } else {
                Kind::Reference(Reference::new(STALE))
            },
            alive: true,
            threads: [
                Th {
                    wake: Duration::from_millis(rng.below(50)),
                    input: Input::Start,
                },
                Th {
                    wake: Duration::from_millis(rng.below(250)),
                    input: Input::Timer,
                },
            ],
        })
        .collect();
    let hang = if cfg.faults.hang > 0.0 {
        cfg.faults.hang_max
    } else {
        Duration::ZERO
    };
    let calm_from = cfg.chaos + hang + Duration::from_millis(500);
    let rule_bound = match rule {
        Rule::Local => STALE + Duration::from_millis(2000),
        Rule::Network { cache } => STALE + cache + Duration::from_millis(1500),
    };
    let mut checker = Checker::new(
        STALE,
        matches!(rule, Rule::Network { .. }),
        rule_bound,
        Duration::from_millis(2000),
        cfg.remote && cfg.noreplace && cfg.keeps_atime,
        calm_from,
    );
    if !cfg.keeps_atime {
        // No tokens: nothing of one's own can be recognized (a weaker, documented mode).
        checker.own_bound = rule_bound;
    }
    let end = cfg.chaos + cfg.calm;
    let mut told = Vec::new();
    let mut trace: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    loop {
        // The thread that runs next: the earliest, once its process and machine run again.
        let mut best: Option<(Duration, usize, usize)> = None;
        for (i, p) in procs.iter().enumerate() {
            if !p.alive {
                continue;
            }
            for (j, th) in p.threads.iter().enumerate() {
                let mut w = th.wake;
                for &(q, a, b) in &cfg.pauses {
                    if q == i && a <= w && w < b {
                        w = b;
                    }
                }
                if let Some(until) = machines[p.machine].suspended_until(w) {
                    w = until;
                }
                if best.is_none_or(|(bw, _, _)| w < bw) {
                    best = Some((w, i, j));
                }
            }
        }
        let Some((t, i, j)) = best else { break };
        if t > end {
            break;
        }
        if cfg.kills.iter().any(|&(q, at)| q == i && at <= t) {
            procs[i].alive = false;
            if cfg.trace {
                trace.push_back(format!("{:9.4} p{i} killed", t.as_secs_f64()));
            }
            continue;
        }
        let m = procs[i].machine;
        let mono = t.saturating_sub(machines[m].suspended_before(t));
        let c = Clocks {
            wall: folder.now(t) + machines[m].skew,
            mono,
            boot: t,
        };
        let thread = if j == 0 {
            Thread::Main
        } else {
            Thread::Refresher
        };
        let input = procs[i].threads[j].input;
        let action = {
            let mut x = Ctx {
                p: i,
                c,
                rng: &mut rng,
                folder: &mut folder,
                now: t,
                told: &mut told,
            };
            match &mut procs[i].kind {
                Kind::Native(n) => n.step(thread, input, &mut x),
                Kind::Reference(r) => r.step(thread, input, &mut x),
            }
        };
        for Told::Published { n, ok } in told.drain(..) {
            let native = matches!(procs[i].kind, Kind::Native(_));
            checker.told(i, n, ok, native, t);
        }
        match action {
            Action::Call(op) => {
                checker.stats.calls += 1;
                let (reply, delay, effect) = {
                    let proc = &procs[i];
                    let resolve = |w| match &proc.kind {
                        Kind::Native(n) => n.resolve(i, w),
                        Kind::Reference(r) => r.resolve(i, w),
                    };
                    folder.call(&mut machines[m], &mut rng, i, t, op, resolve)
                };
                let lock = folder.at(Name::Lock).map(|o| o.id);
                let who = |q: usize| describe(&procs[q], &folder, &machines, t);
                match effect {
                    Effect::Saw(o, fetched) => {
                        let stale = matches!(rule, Rule::Local)
                            && matches!(reply, super::world::Reply::Attrs(a)
                                if mtime_stale(a.mtime, folder.now(t)));
                        checker.saw(i, o, fetched, stale)
                    }
                    Effect::LockMade { obj } => {
                        let unclaimed = matches!(op, super::world::Op::Mkdir(_))
                            && matches!(reply, super::world::Reply::Failed(_));
                        checker.lock_made(i, obj, t, unclaimed)
                    }
                    Effect::LockRemoved {
                        obj,
                        maker,
                        attrs,
                        changed,
                    } => {
                        let now = folder.now(t);
                        let stale = match rule {
                            Rule::Local => mtime_stale(attrs.mtime, now),
                            Rule::Network { .. } => now - changed >= STALE.as_nanos() as i128,
                        };
                        checker.lock_removed(i, obj, maker, attrs, stale, t, &who)
                    }
                    Effect::Published { value } => {
                        let n = match &procs[i].kind {
                            Kind::Native(n) => n.nwrite,
                            Kind::Reference(r) => r.nwrite,
                        };
                        checker.published(i, n, value, lock, t, &who);
                    }
                    Effect::EntryRemoved | Effect::None => {}
                }
                if cfg.trace {
                    if trace.len() >= 200_000 {
                        trace.pop_front();
                    }
                    trace.push_back(format!(
                        "{:9.4} p{i}.{j} m{m} {op:?} -> {reply:?} (+{:.1}ms) {effect:?}",
                        t.as_secs_f64(),
                        delay.as_secs_f64() * 1e3
                    ));
                }
                procs[i].threads[j] = Th {
                    wake: t + delay,
                    input: Input::Reply(reply),
                };
            }
            Action::SleepMono(until) => {
                procs[i].threads[j] = Th {
                    wake: t + until.saturating_sub(mono),
                    input: Input::Timer,
                };
            }
            Action::Sleep(d) => {
                procs[i].threads[j] = Th {
                    wake: t + d,
                    input: Input::Timer,
                };
            }
            Action::Die => {
                procs[i].alive = false;
                if cfg.trace {
                    trace.push_back(format!(
                        "{:9.4} p{i} dies (proper-lockfile: compromised)",
                        t.as_secs_f64()
                    ));
                }
            }
        }
        let lock = folder.at(Name::Lock).map(|o| (o.id, o.foreign));
        let who = |q: usize| describe(&procs[q], &folder, &machines, t);
        checker.after(t, lock, &who);
        if !checker.violations.is_empty() {
            break;
        }
    }
    Report {
        config: cfg.clone(),
        trace: trace.into(),
        violations: checker.violations,
        stats: checker.stats,
    }
}

/// What the checker asks of a process at time `t`.
fn describe(p: &Proc, folder: &Folder, machines: &[Machine], t: Duration) -> Who {
    let m = &machines[p.machine];
    let c = Clocks {
        wall: folder.now(t) + m.skew,
        mono: t.saturating_sub(m.suspended_before(t)),
        boot: t,
    };
    let here = folder.at(Name::Lock).map(attrs_of);
    match &p.kind {
        Kind::Native(n) => Who {
            alive: p.alive,
            native: true,
            holds: p.alive && n.holds_live(c),
            acquiring: n.is_acquiring(),
            owns_orphan: here.is_some_and(|a| n.owns_orphan(a.atime)),
            waiting: n.waiting(),
        },
        Kind::Reference(r) => Who {
            alive: p.alive,
            native: false,
            holds: p.alive && r.holds(),
            acquiring: false,
            owns_orphan: false,
            waiting: false,
        },
    }
}

fn attrs_of(o: &fs::Obj) -> super::world::Attrs {
    super::world::Attrs {
        dev: 7,
        ino: o.ino,
        mtime: o.mtime,
        atime: o.atime,
    }
}

/// Run seeds from `first` until `budget` is spent or `max_seeds` ran; stop at the first
/// failing one. Returns the reports of the runs (the last is the failing one, if any).
pub fn explore(
    first: u64,
    max_seeds: u64,
    budget: Duration,
    mutations: Mutations,
) -> (u64, Option<Report>) {
    let started = std::time::Instant::now();
    let mut ran = 0;
    for k in 0..max_seeds {
        if started.elapsed() >= budget {
            break;
        }
        let seed = first.wrapping_add(k);
        let report = run(&Config::random(seed, mutations));
        ran += 1;
        if !report.violations.is_empty() {
            return (ran, Some(report));
        }
    }
    (ran, None)
}

#[cfg(test)]
mod tests;

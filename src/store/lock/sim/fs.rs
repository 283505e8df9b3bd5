//! The simulated shared folder: one lock path, one entry file, the private directories and
//! temp files of the processes, as a file server keeps them; and, per machine, what a client
//! of it sees (attribute caches, renumbered inodes, its clock) and the faults it meets (error
//! windows in which nothing is done, replies lost after the work was done, replies that hang).
//! Every call is applied at the instant it is made; its reply arrives later.

use std::collections::HashMap;
use std::time::Duration;

use super::super::model::Ident;
use super::super::world::{Attrs, ErrKind, Errno, Op, Reply, Which};
use super::rng::Rng;

/// A name in the folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Name {
    Lock,
    Entry,
    /// A process's private directory (process, acquisition number).
    Pending(usize, u64),
    /// A process's temp file (process, write number).
    Temp(usize, u64),
}

/// An object the server keeps.
#[derive(Debug, Clone)]
pub struct Obj {
    pub id: u64,
    pub dir: bool,
    pub ino: u64,
    pub mtime: i128,
    pub atime: i128,
    /// The process whose call made it.
    pub maker: usize,
    /// For files: the counter value written.
    pub value: u64,
    /// Server time (ns) its times were last set (made, utimes, a refresh).
    pub changed: i128,
    /// Another process than its maker set its times (a stray proper-lockfile refresh).
    pub foreign: bool,
}

/// What one call did to the folder, for the checker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    None,
    /// A directory came to the lock path (made there, or moved there).
    LockMade {
        obj: u64,
    },
    /// The lock path's directory was removed.
    LockRemoved {
        obj: u64,
        maker: usize,
        attrs: Attrs,
        changed: i128,
    },
    /// A `stat` of the lock path showed this object (None: absent) as the server had it at
    /// the given instant (earlier than the call when a cache answered).
    Saw(Option<u64>, Duration),
    /// The entry was replaced (a temp renamed over it) with `value`.
    Published {
        value: u64,
    },
    EntryRemoved,
}

/// One machine's view of the folder.
#[derive(Debug, Clone)]
pub struct Machine {
    /// Wall clock minus the server's, ns.
    pub skew: i128,
    /// The kernel's attribute cache for plain `stat`s.
    pub attr_ttl: Duration,
    /// A cache even a fresh `stat` meets (a FUSE daemon's own, as sshfs keeps).
    pub daemon_ttl: Duration,
    /// Whether inode numbers change from look to look (libfuse clients that open by path).
    pub renumber: bool,
    /// Error windows: (from, until, errno): calls fail without being made.
    pub windows: Vec<(Duration, Duration, i32)>,
    /// Suspends: (from, until): nothing of this machine runs, its monotonic clock stops.
    pub suspends: Vec<(Duration, Duration)>,
    cache: HashMap<Name, (Duration, Option<(Attrs, u64)>)>,
    visible: HashMap<u64, u64>,
}

impl Machine {
    pub fn new(skew: i128, attr_ttl: Duration, daemon_ttl: Duration, renumber: bool) -> Machine {
        Machine {
            skew,
            attr_ttl,
            daemon_ttl,
            renumber,
            windows: Vec::new(),
            suspends: Vec::new(),
            cache: HashMap::new(),
            visible: HashMap::new(),
        }
    }

    /// Add a suspend, merged with any it overlaps.
    pub fn suspend(&mut self, from: Duration, until: Duration) {
        let (mut a, mut b) = (from, until);
        self.suspends.retain(|&(x, y)| {
            let overlaps = x <= b && a <= y;
            if overlaps {
                a = a.min(x);
                b = b.max(y);
            }
            !overlaps
        });
        self.suspends.push((a, b));
    }

    /// Time spent suspended before `t`.
    pub fn suspended_before(&self, t: Duration) -> Duration {
        self.suspends
            .iter()
            .map(|&(a, b)| b.min(t).saturating_sub(a.min(t)))
            .sum()
    }

    /// The end of a suspend `t` falls in, if any.
    pub fn suspended_until(&self, t: Duration) -> Option<Duration> {
        self.suspends
            .iter()
            .find(|&&(a, b)| a <= t && t < b)
            .map(|&(_, b)| b)
    }

    fn window(&self, t: Duration) -> Option<i32> {
        self.windows
            .iter()
            .find(|&&(a, b, _)| a <= t && t < b)
            .map(|&(_, _, e)| e)
    }
}

/// Fault rates of a run (per call).
#[derive(Debug, Clone, Copy)]
pub struct Faults {
    /// A mutating call is made, and its reply is lost (EIO).
    pub lost_reply: f64,
    /// A reply hangs for up to `hang_max`.
    pub hang: f64,
    pub hang_max: Duration,
    /// Base latency of a call.
    pub latency: Duration,
    /// Faults happen before this instant only (the chaos; then the calm).
    pub until: Duration,
}

/// The folder as the server keeps it.
#[derive(Debug)]
pub struct Folder {
    pub names: HashMap<Name, u64>,
    pub objs: HashMap<u64, Obj>,
    next: u64,
    pub whole_seconds: bool,
    pub noreplace: bool,
    pub keeps_atime: bool,
    /// Whether the folder is a network one (errors are ambiguous there).
    pub remote: bool,
    pub faults: Faults,
    /// Server time of the simulation's start, ns since the epoch.
    pub epoch: i128,
}

pub const EIO: i32 = 5;
pub const ENOENT: i32 = 2;
pub const EEXIST: i32 = 17;
pub const ESTALE: i32 = 116;
pub const EINVAL: i32 = 22;
pub const ENOTDIR: i32 = 20;

fn err(raw: i32, kind: ErrKind) -> Reply {
    Reply::Failed(Errno { raw, kind })
}

impl Folder {
    pub fn new(
        whole_seconds: bool,
        noreplace: bool,
        keeps_atime: bool,
        remote: bool,
        faults: Faults,
        epoch: i128,
    ) -> Folder {
        let mut f = Folder {
            names: HashMap::new(),
            objs: HashMap::new(),
            next: 1,
            whole_seconds,
            noreplace,
            keeps_atime,
            remote,
            faults,
            epoch,
        };
        let id = f.make(false, 0, 0);
        f.names.insert(Name::Entry, id);
        f
    }

    /// Server time now.
    pub fn now(&self, t: Duration) -> i128 {
        self.epoch + t.as_nanos() as i128
    }

    fn keep(&self, ns: i128) -> i128 {
        if self.whole_seconds {
            ns - ns.rem_euclid(1_000_000_000)
        } else {
            ns
        }
    }

    fn make(&mut self, dir: bool, maker: usize, t: i128) -> u64 {
        let id = self.next;
        self.next += 1;
        let now = self.keep(t);
        self.objs.insert(
            id,
            Obj {
                id,
                dir,
                ino: 1000 + id,
                mtime: now,
                atime: now,
                maker,
                value: 0,
                changed: t,
                foreign: false,
            },
        );
        id
    }

    pub fn at(&self, n: Name) -> Option<&Obj> {
        self.names.get(&n).and_then(|id| self.objs.get(id))
    }

    fn attrs(&self, m: &mut Machine, rng: &mut Rng, o: &Obj) -> Attrs {
        let ino = if m.renumber {
            let v = m.visible.entry(o.id).or_insert(o.ino);
            if rng.chance(0.2) {
                *v = 1_000_000 + rng.below(1 << 30);
            }
            *v
        } else {
            o.ino
        };
        Attrs {
            dev: 7,
            ino,
            mtime: o.mtime,
            atime: o.atime,
        }
    }

    /// The kind of an error this folder answers: on a network folder EIO and ESTALE do not
    /// tell whether the work was done.
    fn kind_of(&self, raw: i32) -> ErrKind {
        match raw {
            ENOENT | ENOTDIR => ErrKind::NotFound,
            EEXIST => ErrKind::Exists,
            EINVAL => ErrKind::Unsupported,
            EIO | ESTALE if self.remote => ErrKind::Unknown,
            _ => ErrKind::Other,
        }
    }

    /// Make `op` for process `p` on machine `m` at time `t`, naming paths with `resolve`.
    /// Returns the reply, when it arrives (latency, hangs), and what it did.
    #[allow(clippy::too_many_arguments)]
    pub fn call(
        &mut self,
        m: &mut Machine,
        rng: &mut Rng,
        p: usize,
        t: Duration,
        op: Op,
        resolve: impl Fn(Which) -> Name,
    ) -> (Reply, Duration, Effect) {
        let chaos = t < self.faults.until;
        let mut delay = self.faults.latency.mul_f64(0.5 + rng.unit());
        if chaos && rng.chance(self.faults.hang) {
            delay += self.faults.hang_max.mul_f64(rng.unit());
        }
        if let Some(e) = m.window(t) {
            return (err(e, self.kind_of(e)), delay, Effect::None);
        }
        let (mut reply, effect) = self.apply(m, rng, p, t, op, &resolve);
        let mutating = !matches!(op, Op::Stat { .. });
        if chaos
            && mutating
            && self.remote
            && reply == Reply::Done
            && rng.chance(self.faults.lost_reply)
        {
            reply = err(EIO, ErrKind::Unknown);
        }
        if mutating {
            m.cache.clear(); // a client sees its own changes
        }
        (reply, delay, effect)
    }

    fn apply(
        &mut self,
        m: &mut Machine,
        rng: &mut Rng,
        p: usize,
        t: Duration,
        op: Op,
        resolve: &impl Fn(Which) -> Name,
    ) -> (Reply, Effect) {
        let now = self.now(t);
        match op {
            Op::Mkdir(w) => {
                let n = resolve(w);
                if self.names.contains_key(&n) {
                    return (err(EEXIST, ErrKind::Exists), Effect::None);
                }
                let id = self.make(true, p, now);
                self.names.insert(n, id);
                let effect = if n == Name::Lock {
                    Effect::LockMade { obj: id }
                } else {
                    Effect::None
                };
                (Reply::Done, effect)
            }
            Op::Rmdir(w) => {
                let n = resolve(w);
                match self.at(n) {
                    None => (err(ENOENT, ErrKind::NotFound), Effect::None),
                    Some(o) if !o.dir => (err(ENOTDIR, ErrKind::Other), Effect::None),
                    Some(o) => {
                        let (id, maker, changed) = (o.id, o.maker, o.changed);
                        let attrs = Attrs {
                            dev: 7,
                            ino: o.ino,
                            mtime: o.mtime,
                            atime: o.atime,
                        };
                        self.names.remove(&n);
                        self.objs.remove(&id);
                        let effect = if n == Name::Lock {
                            Effect::LockRemoved {
                                obj: id,
                                maker,
                                attrs,
                                changed,
                            }
                        } else {
                            Effect::None
                        };
                        (Reply::Done, effect)
                    }
                }
            }
            Op::Stat { which, fresh } => {
                let n = resolve(which);
                let ttl = if fresh {
                    m.daemon_ttl
                } else {
                    m.attr_ttl.max(m.daemon_ttl)
                };
                let (seen, fetched) = match m.cache.get(&n) {
                    Some(&(at, cached)) if t < at + ttl => (cached, at),
                    _ => {
                        let now = self.at(n).cloned().map(|o| (self.attrs(m, rng, &o), o.id));
                        m.cache.insert(n, (t, now));
                        (now, t)
                    }
                };
                let effect = if n == Name::Lock {
                    Effect::Saw(seen.map(|(_, id)| id), fetched)
                } else {
                    Effect::None
                };
                (
                    seen.map_or(err(ENOENT, ErrKind::NotFound), |(a, _)| Reply::Attrs(a)),
                    effect,
                )
            }
            Op::SetTimes {
                which,
                atime,
                mtime,
            } => {
                let n = resolve(which);
                let (keep_a, keep_m) = (self.keep(atime), self.keep(mtime));
                let keeps = self.keeps_atime;
                match self.names.get(&n).and_then(|id| self.objs.get_mut(id)) {
                    None => (err(ENOENT, ErrKind::NotFound), Effect::None),
                    Some(o) => {
                        o.mtime = keep_m;
                        o.atime = if keeps { keep_a } else { keep_m };
                        o.changed = now;
                        o.foreign |= o.maker != p;
                        (Reply::Done, Effect::None)
                    }
                }
            }
            Op::Touch { ident, mtime } => {
                let Some(o) = self.at(Name::Lock).cloned() else {
                    return (Reply::NotOurs, Effect::None);
                };
                let seen = self.attrs(m, rng, &o);
                // The real touch checks through a handle: the inode the handle pins.
                let seen = Attrs { ino: o.ino, ..seen };
                let ident = match ident {
                    Ident::Stamp {
                        dev,
                        ino: Some(_),
                        mtime,
                    } => Ident::Stamp {
                        dev,
                        ino: Some(o.ino),
                        mtime,
                    },
                    i => i,
                };
                if !ident.is(&seen) {
                    return (Reply::NotOurs, Effect::None);
                }
                let keep_m = self.keep(mtime);
                let keeps = self.keeps_atime;
                let o = self.objs.get_mut(&o.id).expect("present");
                o.mtime = keep_m;
                o.changed = now;
                if !keeps {
                    o.atime = keep_m;
                }
                let after = o.clone();
                (Reply::Attrs(self.attrs(m, rng, &after)), Effect::None)
            }
            Op::RenameNoReplace => {
                if !self.noreplace {
                    return (err(EINVAL, ErrKind::Unsupported), Effect::None);
                }
                let from = resolve(Which::Pending);
                let Some(&id) = self.names.get(&from) else {
                    return (err(ENOENT, ErrKind::NotFound), Effect::None);
                };
                if self.names.contains_key(&Name::Lock) {
                    return (err(EEXIST, ErrKind::Exists), Effect::None);
                }
                self.names.remove(&from);
                self.names.insert(Name::Lock, id);
                (Reply::Done, Effect::LockMade { obj: id })
            }
            Op::Rename => {
                let from = resolve(Which::Temp);
                let Some(id) = self.names.remove(&from) else {
                    return (err(ENOENT, ErrKind::NotFound), Effect::None);
                };
                let value = self.objs[&id].value;
                if let Some(old) = self.names.insert(Name::Entry, id) {
                    self.objs.remove(&old);
                }
                (Reply::Done, Effect::Published { value })
            }
            Op::Unlink => match self.names.remove(&resolve(Which::Target)) {
                Some(id) => {
                    self.objs.remove(&id);
                    (Reply::Done, Effect::EntryRemoved)
                }
                None => (err(ENOENT, ErrKind::NotFound), Effect::None),
            },
        }
    }

    /// The entry's value as the server has it now (the coherent read under the lock).
    pub fn read_entry(&self) -> u64 {
        self.at(Name::Entry).map_or(0, |o| o.value)
    }

    /// Write a temp file holding `value` (exclusive create; the writer's private name).
    pub fn write_temp(&mut self, p: usize, n: u64, value: u64, t: Duration) {
        let now = self.now(t);
        let id = self.make(false, p, now);
        self.objs.get_mut(&id).expect("made").value = value;
        self.names.insert(Name::Temp(p, n), id);
    }

    /// Remove a temp file left by a publish that did not happen.
    pub fn drop_temp(&mut self, p: usize, n: u64) {
        if let Some(id) = self.names.remove(&Name::Temp(p, n)) {
            self.objs.remove(&id);
        }
    }
}

//! The pass-through: every FUSE request is asked of the rules (`rules.rs`), then performed on
//! the backing folder, or not, and answered as they say.
//!
//! Each inode the kernel knows is a node holding an `O_PATH` descriptor of the backing file, so
//! a node follows its file through renames and outlives its unlinking, as the server's object
//! does; requests reach the file through `/proc/self/fd/<fd>`. Node ids are the inode numbers
//! the kernel reports (fuser answers a lookup with the attributes' `ino` as node id): the
//! backing file's own inode number, or with `renumber` a number of this mount's own, new for
//! every node (libfuse's high-level file systems without `use_ino`: sshfs, GlusterFS's and
//! smbnetfs's clients), so one file has another inode number on another mount, and again
//! after the kernel forgot it.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::{File, Metadata};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fuser::{
    AccessFlags, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, Generation,
    INodeNo, InitFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags, ReplyAttr, ReplyCreate,
    ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs,
    ReplyWrite, Request, TimeOrNow, WriteFlags,
};

use crate::rules::{action_name, errno_name, Call, Rules, Verdict};
use crate::sys;

mod ops;

/// How this mount answers (its "machine": caches, timestamps, inode numbers).
#[derive(Debug, Clone)]
pub struct Options {
    /// How long the kernel may keep a file's attributes.
    pub attr_ttl: Duration,
    /// How long the kernel may keep a name → inode answer.
    pub entry_ttl: Duration,
    /// How long the kernel may keep "no such name" (zero: not at all).
    pub negative_ttl: Duration,
    /// Report and store timestamps in whole seconds (SFTP, SMB servers).
    pub whole_seconds: bool,
    /// Number inodes per mount and per lookup (see the module doc).
    pub renumber: bool,
    /// Pass a rename's flags (RENAME_NOREPLACE, RENAME_EXCHANGE, …) to the backing folder;
    /// false: answer EINVAL to any rename with flags (sshfs, SMB and GlusterFS clients).
    pub rename_flags: bool,
}

/// A file the kernel knows, through an `O_PATH` descriptor of the backing file.
struct Node {
    file: File,
    /// The backing file's device and inode.
    key: (u64, u64),
}

struct Slot {
    node: Arc<Node>,
    /// Lookups the kernel has not forgotten yet.
    nlookup: u64,
}

#[derive(Default)]
struct Table {
    by_id: HashMap<u64, Slot>,
    by_key: HashMap<(u64, u64), u64>,
    /// The next id of this mount's own (renumbering, or an inode number already taken).
    next: u64,
}

/// A directory's listing, taken at `opendir` (as sshfs and SMB clients read a whole folder).
struct Listing {
    entries: Vec<(OsString, u64, FileType)>,
}

/// The kernel's "no inode number here" in a listing (libfuse's `FUSE_UNKNOWN_INO`).
const UNKNOWN_INO: u64 = 0xffff_ffff;

/// Entries looked up for one `readdirplus` answer at most (a page holds ~25).
const PLUS_BATCH: usize = 64;

/// The file system: shared by the session's threads and the threads that hold requests.
pub struct Inner {
    backing: PathBuf,
    opts: Options,
    table: Mutex<Table>,
    files: Mutex<HashMap<u64, Arc<File>>>,
    dirs: Mutex<HashMap<u64, Arc<Listing>>>,
    next_fh: AtomicU64,
    /// The mount's fault rules and log.
    pub rules: Rules,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn errno(e: io::Error) -> Errno {
    Errno::from_i32(e.raw_os_error().unwrap_or(libc::EIO))
}

fn fd_path(f: &File) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", f.as_raw_fd()))
}

fn child_path(dir: &File, name: &OsStr) -> Result<PathBuf, Errno> {
    if name.is_empty() || name.as_bytes().contains(&b'/') {
        return Err(Errno::EINVAL);
    }
    let mut p = fd_path(dir);
    p.push(name);
    Ok(p)
}

fn file_type(mode: u32) -> FileType {
    match mode & libc::S_IFMT {
        libc::S_IFDIR => FileType::Directory,
        libc::S_IFLNK => FileType::Symlink,
        libc::S_IFIFO => FileType::NamedPipe,
        libc::S_IFSOCK => FileType::Socket,
        libc::S_IFCHR => FileType::CharDevice,
        libc::S_IFBLK => FileType::BlockDevice,
        _ => FileType::RegularFile,
    }
}

/// Seconds and nanoseconds since the epoch as a SystemTime.
fn system_time(sec: i64, nsec: i64) -> SystemTime {
    if sec >= 0 {
        UNIX_EPOCH + Duration::new(sec as u64, nsec as u32)
    } else {
        UNIX_EPOCH - Duration::from_secs(sec.unsigned_abs()) + Duration::from_nanos(nsec as u64)
    }
}

/// A SystemTime as seconds and nanoseconds since the epoch.
fn epoch_parts(t: SystemTime) -> (i64, i64) {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, i64::from(d.subsec_nanos())),
        Err(e) => {
            let d = e.duration();
            let (s, n) = (d.as_secs() as i64, i64::from(d.subsec_nanos()));
            if n == 0 {
                (-s, 0)
            } else {
                (-s - 1, 1_000_000_000 - n)
            }
        }
    }
}

/// What a request produced that a lost reply must give back (the kernel never heard of it).
pub trait Undo: Send + 'static {
    fn undo(self, fs: &Inner);
}

impl Undo for () {
    fn undo(self, _: &Inner) {}
}
impl Undo for FileAttr {
    fn undo(self, _: &Inner) {}
}
impl Undo for Vec<u8> {
    fn undo(self, _: &Inner) {}
}
impl Undo for u32 {
    fn undo(self, _: &Inner) {}
}
impl Undo for libc::statvfs {
    fn undo(self, _: &Inner) {}
}

/// A looked-up (or created) node with its attributes: one lookup the kernel would count.
pub struct Entry {
    id: u64,
    attr: FileAttr,
}
impl Undo for Entry {
    fn undo(self, fs: &Inner) {
        fs.forget(self.id, 1);
    }
}
/// `None`: no such name, to be remembered for the negative TTL.
impl Undo for Option<Entry> {
    fn undo(self, fs: &Inner) {
        if let Some(e) = self {
            e.undo(fs);
        }
    }
}

/// An opened file or directory handle.
pub struct Opened(u64);
impl Undo for Opened {
    fn undo(self, fs: &Inner) {
        lock(&fs.files).remove(&self.0);
        lock(&fs.dirs).remove(&self.0);
    }
}

impl Undo for (Entry, Opened) {
    fn undo(self, fs: &Inner) {
        self.0.undo(fs);
        self.1.undo(fs);
    }
}

/// A `readdir` answer: (offset of the next entry, name, inode number, type).
pub struct Plain(Vec<(u64, OsString, u64, FileType)>);
impl Undo for Plain {
    fn undo(self, _: &Inner) {}
}

/// A `readdirplus` answer: (offset of the next entry, name, entry if looked up).
pub struct Plus(Vec<(u64, OsString, Option<Entry>)>);
impl Undo for Plus {
    fn undo(self, fs: &Inner) {
        for (_, _, e) in self.0 {
            e.undo(fs);
        }
    }
}

/// The error answer of each reply type.
pub trait Answer: Send + 'static {
    fn fail(self, e: Errno);
}
macro_rules! answer {
    ($($t:ty),*) => {$(impl Answer for $t { fn fail(self, e: Errno) { self.error(e) } })*};
}
answer!(
    ReplyAttr,
    ReplyEntry,
    ReplyEmpty,
    ReplyData,
    ReplyOpen,
    ReplyWrite,
    ReplyCreate,
    ReplyStatfs,
    ReplyDirectory,
    ReplyDirectoryPlus
);

/// A request's operation name and the other names it answers to (rules.rs, OPS).
struct Op(&'static str, &'static [&'static str]);

/// What a request is about, for the rules' paths.
enum Subject<'a> {
    Node(u64),
    Child(u64, &'a OsStr),
    Rename(u64, &'a OsStr, u64, &'a OsStr),
}

impl Inner {
    /// The file system over `backing` (which must be a directory).
    pub fn new(backing: &Path, opts: Options, rules: Rules) -> io::Result<Inner> {
        let backing = backing.canonicalize()?;
        let root = sys::open(
            &backing,
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
            0,
        )?;
        let m = root.metadata()?;
        let mut table = Table {
            // Renumbered ids start at a place of this mount's own, so two mounts of one
            // folder number its files differently, as two clients do.
            next: if opts.renumber {
                (random_u64() % (1 << 24) + 1) << 16
            } else {
                1 << 40
            },
            ..Table::default()
        };
        table.by_key.insert((m.dev(), m.ino()), 1);
        table.by_id.insert(
            1,
            Slot {
                node: Arc::new(Node {
                    file: root,
                    key: (m.dev(), m.ino()),
                }),
                nlookup: u64::MAX / 2,
            },
        );
        Ok(Inner {
            backing,
            opts,
            table: Mutex::new(table),
            files: Mutex::new(HashMap::new()),
            dirs: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            rules,
        })
    }

    fn node(&self, id: u64) -> Result<Arc<Node>, Errno> {
        lock(&self.table)
            .by_id
            .get(&id)
            .map(|s| s.node.clone())
            .ok_or(Errno::ESTALE)
    }

    /// Count one more lookup of the file `file` (an `O_PATH` descriptor): its node, made if new.
    fn register(&self, file: File) -> Result<Entry, Errno> {
        let m = file.metadata().map_err(errno)?;
        let key = (m.dev(), m.ino());
        let mut t = lock(&self.table);
        let id = if let Some(&id) = t.by_key.get(&key) {
            if let Some(slot) = t.by_id.get_mut(&id) {
                slot.nlookup += 1;
            }
            id
        } else {
            let own = self.opts.renumber || key.1 <= 1 || t.by_id.contains_key(&key.1);
            let id = if own {
                t.next += 1;
                t.next
            } else {
                key.1
            };
            t.by_key.insert(key, id);
            t.by_id.insert(
                id,
                Slot {
                    node: Arc::new(Node { file, key }),
                    nlookup: 1,
                },
            );
            id
        };
        drop(t);
        Ok(Entry {
            id,
            attr: self.attr(id, &m),
        })
    }

    /// The kernel forgot `n` lookups of `id`.
    fn forget(&self, id: u64, n: u64) {
        if id == 1 {
            return;
        }
        let mut t = lock(&self.table);
        let Some(slot) = t.by_id.get_mut(&id) else {
            return;
        };
        slot.nlookup = slot.nlookup.saturating_sub(n);
        if slot.nlookup == 0 {
            let key = slot.node.key;
            t.by_id.remove(&id);
            if t.by_key.get(&key) == Some(&id) {
                t.by_key.remove(&key);
            }
        }
    }

    fn lookup_child(&self, parent: &Node, name: &OsStr) -> Result<Entry, Errno> {
        let f = sys::open(
            &child_path(&parent.file, name)?,
            libc::O_PATH | libc::O_NOFOLLOW,
            0,
        )
        .map_err(errno)?;
        self.register(f)
    }

    fn attr(&self, id: u64, m: &Metadata) -> FileAttr {
        let time = |s: i64, ns: i64| system_time(s, if self.opts.whole_seconds { 0 } else { ns });
        FileAttr {
            ino: INodeNo(id),
            size: m.size(),
            blocks: m.blocks(),
            atime: time(m.atime(), m.atime_nsec()),
            mtime: time(m.mtime(), m.mtime_nsec()),
            ctime: time(m.ctime(), m.ctime_nsec()),
            crtime: UNIX_EPOCH,
            kind: file_type(m.mode()),
            perm: (m.mode() & 0o7777) as u16,
            nlink: m.nlink() as u32,
            uid: m.uid(),
            gid: m.gid(),
            rdev: m.rdev() as u32,
            blksize: m.blksize() as u32,
            flags: 0,
        }
    }

    fn stat_node(&self, id: u64) -> Result<FileAttr, Errno> {
        let node = self.node(id)?;
        let m = node.file.metadata().map_err(errno)?;
        if removed_dir(&m) {
            return Err(Errno::ESTALE);
        }
        Ok(self.attr(id, &m))
    }

    /// Node `id` for a request by node without a handle: ESTALE when it is a directory removed
    /// on the server, as a network server answers a handle of an object that is gone (NFS,
    /// GlusterFS's gfid; sshfs and SMB go by path and find what is there now). The kernel then
    /// looks the name up again (its ESTALE retry) instead of acting on the removed directory
    /// through a name it still caches.
    fn live(&self, id: u64) -> Result<Arc<Node>, Errno> {
        let node = self.node(id)?;
        if removed_dir(&node.file.metadata().map_err(errno)?) {
            return Err(Errno::ESTALE);
        }
        Ok(node)
    }

    fn file(&self, fh: FileHandle) -> Result<Arc<File>, Errno> {
        lock(&self.files).get(&fh.0).cloned().ok_or(Errno::EBADF)
    }

    fn new_fh(&self) -> u64 {
        self.next_fh.fetch_add(1, Ordering::Relaxed)
    }

    /// The path of node `id` relative to the mount root (`""` for the root), as the backing
    /// folder has it now.
    fn rel_path(&self, id: u64) -> String {
        let Ok(node) = self.node(id) else {
            return format!("<stale {id}>");
        };
        let Ok(target) = std::fs::read_link(fd_path(&node.file)) else {
            return format!("<unknown {id}>");
        };
        let mut s = target.as_os_str().as_bytes();
        s = s.strip_suffix(b" (deleted)").unwrap_or(s);
        let rel = Path::new(OsStr::from_bytes(s))
            .strip_prefix(&self.backing)
            .map_or_else(
                |_| String::from_utf8_lossy(s).into_owned(),
                |r| r.to_string_lossy().into_owned(),
            );
        rel
    }

    fn join(&self, parent: u64, name: &OsStr) -> String {
        let p = self.rel_path(parent);
        let n = name.to_string_lossy();
        if p.is_empty() {
            n.into_owned()
        } else {
            format!("{p}/{n}")
        }
    }

    fn paths(&self, s: &Subject<'_>) -> (String, Option<String>) {
        match s {
            Subject::Node(id) => (self.rel_path(*id), None),
            Subject::Child(p, n) => (self.join(*p, n), None),
            Subject::Rename(p, n, np, nn) => (self.join(*p, n), Some(self.join(*np, nn))),
        }
    }

    /// Store a time as the server keeps it.
    fn stamp(&self, t: Option<TimeOrNow>) -> sys::Stamp {
        match t {
            None => sys::Stamp::Omit,
            Some(TimeOrNow::Now) if !self.opts.whole_seconds => sys::Stamp::Now,
            Some(TimeOrNow::Now) => sys::Stamp::At(epoch_parts(SystemTime::now()).0, 0),
            Some(TimeOrNow::SpecificTime(t)) => {
                let (s, ns) = epoch_parts(t);
                sys::Stamp::At(s, if self.opts.whole_seconds { 0 } else { ns })
            }
        }
    }
}

/// A directory removed from the backing folder (kept alive only by our descriptor).
fn removed_dir(m: &Metadata) -> bool {
    m.is_dir() && m.nlink() == 0
}

/// 64 random bits from the standard library's hasher seeds (no crate needed for one number).
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    );
    h.finish()
}

/// The FUSE file system (fuser's trait over the shared [`Inner`]).
pub struct FaultFs {
    inner: Arc<Inner>,
}

impl FaultFs {
    /// The file system over `inner`.
    pub fn new(inner: Arc<Inner>) -> FaultFs {
        FaultFs { inner }
    }

    /// Ask the rules about a request, then perform `act` (or not) and answer with `answer` (or
    /// an errno), on this thread or, for a held request, on a thread of its own.
    fn handle<T, R>(
        &self,
        req: &Request,
        Op(op, aliases): Op,
        subject: Subject<'_>,
        reply: R,
        act: impl FnOnce(&Inner) -> Result<T, Errno> + Send + 'static,
        answer: impl FnOnce(&Inner, T, R) + Send + 'static,
    ) where
        T: Undo,
        R: Answer,
    {
        let inner = &self.inner;
        if !inner.rules.watching() {
            finish(inner, act, answer, reply);
            return;
        }
        let arrived = SystemTime::now();
        let resolve = || inner.paths(&subject);
        let call = Call::new(op, aliases, req.pid(), &resolve);
        let verdict = inner.rules.decide(&call);
        let action = action_name(&verdict);
        if matches!(verdict, Verdict::Pass) && !inner.rules.log_all {
            finish(inner, act, answer, reply);
            return;
        }
        let info = call.info();
        match verdict {
            Verdict::Pass => {
                let (result, answered) = finish(inner, act, answer, reply);
                inner.rules.record(
                    &info,
                    arrived,
                    None,
                    action,
                    result,
                    answered,
                    Duration::ZERO,
                );
            }
            Verdict::Error { rule, errno, ms } => {
                let inner = inner.clone();
                held(ms, move || {
                    let started = Instant::now();
                    std::thread::sleep(Duration::from_millis(ms));
                    reply.fail(Errno::from_i32(errno));
                    let e = errno_name(errno);
                    let waited = started.elapsed();
                    inner
                        .rules
                        .record(&info, arrived, Some(rule), action, "-".into(), e, waited);
                });
            }
            Verdict::LostReply { rule, errno, ms } => {
                let inner = inner.clone();
                held(ms, move || {
                    let started = Instant::now();
                    let result = match act(&inner) {
                        Ok(t) => {
                            t.undo(&inner);
                            "ok".to_string()
                        }
                        Err(e) => errno_name(e.code()),
                    };
                    // The work is done; the caller hears of it (as a failure) only after `ms`.
                    std::thread::sleep(Duration::from_millis(ms));
                    reply.fail(Errno::from_i32(errno));
                    let e = errno_name(errno);
                    let waited = started.elapsed();
                    inner
                        .rules
                        .record(&info, arrived, Some(rule), action, result, e, waited);
                });
            }
            Verdict::Delay { rule, ms } => {
                let inner = inner.clone();
                std::thread::spawn(move || {
                    let started = Instant::now();
                    std::thread::sleep(Duration::from_millis(ms));
                    let (result, answered) = finish(&inner, act, answer, reply);
                    let held = started.elapsed();
                    inner
                        .rules
                        .record(&info, arrived, Some(rule), action, result, answered, held);
                });
            }
            Verdict::Hang {
                rule,
                gate,
                generation,
            } => {
                let inner = inner.clone();
                std::thread::spawn(move || {
                    let started = Instant::now();
                    gate.wait(generation);
                    let (result, answered) = finish(&inner, act, answer, reply);
                    let held = started.elapsed();
                    inner
                        .rules
                        .record(&info, arrived, Some(rule), action, result, answered, held);
                });
            }
        }
    }
}

/// Run `f` here, or on a thread of its own when it waits (`ms` > 0).
fn held(ms: u64, f: impl FnOnce() + Send + 'static) {
    if ms == 0 {
        f();
    } else {
        std::thread::spawn(f);
    }
}

/// Perform and answer; what the backing folder said and what the caller was told.
fn finish<T: Undo, R: Answer>(
    inner: &Inner,
    act: impl FnOnce(&Inner) -> Result<T, Errno>,
    answer: impl FnOnce(&Inner, T, R),
    reply: R,
) -> (String, String) {
    match act(inner) {
        Ok(t) => {
            answer(inner, t, reply);
            ("ok".into(), "ok".into())
        }
        Err(e) => {
            reply.fail(e);
            let n = errno_name(e.code());
            (n.clone(), n)
        }
    }
}

fn reply_entry(inner: &Inner, e: Entry, reply: ReplyEntry) {
    reply.entry_with_ttls(
        &inner.opts.attr_ttl,
        &inner.opts.entry_ttl,
        &e.attr,
        Generation(0),
    );
}

/// Attributes of "nothing" (node id 0), for negative entries and `.`/`..` in `readdirplus`.
fn no_attr(kind: FileType) -> FileAttr {
    FileAttr {
        ino: INodeNo(0),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 0,
        flags: 0,
    }
}

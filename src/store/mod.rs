//! The process-matrix store (SPEC §1.B, §2.B): one JSON file per agent process under
//! `<agentDir>/state/process-matrix/`, read without locks, changed only under the per-entry
//! proper-lockfile lock by atomic replace, compare-and-swap against `util.isDeepStrictEqual`.
//!
//! Files are read, parsed and validated here; the JS layer turns an accepted text into the
//! object with V8's own `JSON.parse`, so keys, numbers and strings are exactly the original's.

pub mod atomic_file;
pub mod coherent_read;
pub mod entry;
pub mod lock;
pub mod lock_watch;
pub mod transient;

use std::io::Read;

use crate::fserror::FsError;
use crate::json::{self, Json};
use crate::nodepath;
use crate::platform;
use entry::{Expected, Verdict};
use lock::{LockGuard, LockOptions};

/// B1: `path.join(agentDir, "state", "process-matrix")`.
pub fn process_matrix_dir(agent_dir: &str) -> String {
    nodepath::join(&[agent_dir, "state", "process-matrix"])
}

/// B1: `path.join(processMatrixDir(agentDir), id + ".json")`.
pub fn entry_path(agent_dir: &str, id: &str) -> String {
    nodepath::join(&[&process_matrix_dir(agent_dir), &format!("{id}.json")])
}

/// B3 + W-B9: the file's text, or None when it cannot be read as a regular file. Opened
/// non-blocking and checked with fstat, so a FIFO or device named `*.json` cannot hang a read.
/// On a network or FUSE file system the read is made again as the server has the file now
/// ([`coherent_read`]): a client cache may lead the name to a replaced object, or cut the new
/// one at an old size, and `readEntry` must not answer undefined for an entry that exists.
pub fn read_text(path: &str) -> Option<String> {
    if path.contains('\0') {
        return None;
    }
    let mut f = match platform::fs::open_read_nonblocking(path) {
        Ok(f) => f,
        // ESTALE, or (GlusterFS) ENOENT for a name another client replaced: the coherent read
        // finds what it leads to now.
        Err(e)
            if coherent_read::enabled()
                && (transient::is_transient(&e, transient::Op::Read, false)
                    || folder_is_remote(path)) =>
        {
            return read_coherent(path)
        }
        Err(_) => return None,
    };
    let meta = match f.metadata() {
        Ok(m) => m,
        Err(_) if coherent_read::enabled() && folder_is_remote(path) => return read_coherent(path),
        Err(_) => return None,
    };
    #[cfg(unix)]
    if coherent_read::enabled() && file_is_remote(path, &meta) {
        drop(f);
        return read_coherent(path);
    }
    if !meta.file_type().is_file() {
        return None;
    }
    Some(text_of(read_bounded(&mut f, meta.len(), false).ok()??))
}

/// The most an entry read takes (W-B9): a file larger than this, by its descriptor's size or by
/// what it yields where the size says nothing (procfs files report 0), reads as absent, as an
/// unparsable one does. An entry is a few KiB; 64 MiB, the session files' rule (A17), leaves
/// room for any entry a host writes and bounds what a hostile file can cost.
pub const ENTRY_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// An open regular file's bytes, read as Node's `readFile` reads them (`size` from its `fstat`,
/// then to the end when the size was 0, or with `to_end` when it was all there), but never more
/// than [`ENTRY_MAX_BYTES`]: Ok(None) past it.
pub(crate) fn read_bounded(
    f: &mut std::fs::File,
    size: u64,
    to_end: bool,
) -> std::io::Result<Option<Vec<u8>>> {
    if size > ENTRY_MAX_BYTES {
        return Ok(None);
    }
    let mut bytes = if size == 0 {
        Vec::new()
    } else {
        platform::read_sized(size as usize, |buf, _| f.read(buf))?
    };
    if size == 0 || to_end && bytes.len() as u64 == size {
        let room = ENTRY_MAX_BYTES + 1 - bytes.len() as u64;
        f.take(room).read_to_end(&mut bytes)?;
        if bytes.len() as u64 > ENTRY_MAX_BYTES {
            return Ok(None);
        }
    }
    Ok(Some(bytes))
}

/// Whether `path` (of which `meta` is an fstat) lies on a network or FUSE file system; one
/// remembered answer per folder.
#[cfg(unix)]
fn file_is_remote(path: &str, meta: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::path::Path::new(path)
        .parent()
        .is_some_and(|dir| platform::fs_kind::is_remote(dir, meta.dev()))
}

/// Whether `path`'s folder is on a network or FUSE file system, known without a `stat` of ours
/// (error paths: a local folder already read or locked answers from memory).
fn folder_is_remote(path: &str) -> bool {
    std::path::Path::new(path)
        .parent()
        .is_some_and(platform::fs_kind::is_remote_folder)
}

/// [`coherent_read::read_current`] as B3 reads: anything that cannot be read is absent.
fn read_coherent(path: &str) -> Option<String> {
    match coherent_read::read_current(path) {
        Ok(coherent_read::Current::Bytes(b)) => Some(text_of(b)),
        _ => None,
    }
}

/// The text a CAS compares under its lock: on a network or FUSE file system the entry as the
/// server has it now ([`coherent_read`]), failing loudly (`ERR_PI_NATIVE_INCOHERENT`) where
/// the client cannot be made to say; elsewhere the plain read.
fn read_locked(path: &str, guard: &LockGuard) -> Result<Option<String>, FsError> {
    if !guard.remote() || !coherent_read::enabled() || path.contains('\0') {
        return Ok(read_text(path));
    }
    Ok(match coherent_read::read_current(path)? {
        coherent_read::Current::Bytes(b) => Some(text_of(b)),
        coherent_read::Current::Absent => None,
    })
}

/// A file's bytes as `readFile(…, 'utf8')` decodes them (invalid sequences become U+FFFD).
fn text_of(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// A file that parsed and validated (possibly pending V8's word on some timestamps).
#[derive(Debug)]
pub struct Loaded {
    pub text: String,
    /// The parse of `text` ([`Loaded::value`]).
    pub tree: json::Tree,
    /// Timestamps only V8 can judge; empty when fully valid.
    pub pending: Vec<Vec<u16>>,
}

impl Loaded {
    /// The parsed value.
    pub fn value(&self) -> Json<'_> {
        self.tree.root(&self.text)
    }
}

/// B3: read, parse (G3) and validate (V1–V20); None = absent.
pub fn load(path: &str, known: &dyn Fn(&[u16]) -> Option<bool>) -> Option<Loaded> {
    accept_at(path, read_text(path)?, known)
}

/// [`accept`] of `path`'s text, remembering it ([`VALID_TEXTS`]) when it is valid by its text
/// alone: V8 was not asked about any timestamp, whose verdict on a string without an offset
/// depends on the time zone, which a process may change.
fn accept_at(path: &str, text: String, known: &dyn Fn(&[u16]) -> Option<bool>) -> Option<Loaded> {
    let asked = std::cell::Cell::new(false);
    let l = accept(text, &|s: &[u16]| {
        asked.set(true);
        known(s)
    })?;
    if l.pending.is_empty() && !asked.get() {
        remember_valid(path, &l.text);
    }
    Some(l)
}

/// The last text each entry file was found valid with by its text alone (V1–V20, every
/// timestamp in the strict ISO form with an offset), by path. That verdict depends on nothing
/// else, so a read or a CAS that finds those very bytes again knows it without parsing them: a
/// heartbeat's CAS finds the text it read (or wrote) moments before. At most
/// [`MAX_REMEMBERED`] files, texts of up to [`REMEMBER_MAX_BYTES`]; past that it starts over.
static VALID_TEXTS: std::sync::LazyLock<
    std::sync::Mutex<std::collections::HashMap<String, String>>,
> = std::sync::LazyLock::new(Default::default);
const MAX_REMEMBERED: usize = 64;
const REMEMBER_MAX_BYTES: usize = 16 * 1024;

fn remember_valid(path: &str, text: &str) {
    if text.len() > REMEMBER_MAX_BYTES {
        return;
    }
    let mut map = VALID_TEXTS.lock().unwrap_or_else(|e| e.into_inner());
    match map.get_mut(path) {
        Some(t) => {
            t.clear();
            t.push_str(text);
        }
        None => {
            if map.len() >= MAX_REMEMBERED {
                map.clear();
            }
            map.insert(path.to_string(), text.to_string());
        }
    }
}

/// Whether `text` is the text `path` was last found valid with.
fn known_valid(path: &str, text: &str) -> bool {
    VALID_TEXTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(path)
        .is_some_and(|t| t == text)
}

/// [`ReadOut`] of `path`'s text: without parsing when it is the one last found valid there.
fn read_out(path: &str, text: String) -> Option<ReadOut> {
    if known_valid(path, &text) {
        return Some(ReadOut {
            text,
            pending: Vec::new(),
        });
    }
    accept_at(path, text, &no_known).map(ReadOut::from)
}

/// B3 after the read: parse (G3) and validate (V1–V20).
fn accept(text: String, known: &dyn Fn(&[u16]) -> Option<bool>) -> Option<Loaded> {
    let doc = json::parse(&text)?;
    let pending = match entry::validate(doc.root(), known) {
        Verdict::Invalid => return None,
        Verdict::Valid => Vec::new(),
        Verdict::Pending(p) => p,
    };
    let tree = doc.into_tree();
    Some(Loaded {
        text,
        tree,
        pending,
    })
}

/// What the JS layer needs to materialize one read entry.
#[derive(Debug)]
pub struct ReadOut {
    pub text: String,
    pub pending: Vec<Vec<u16>>,
}

fn no_known(_: &[u16]) -> Option<bool> {
    None
}

/// `readEntry` core.
pub fn read_entry(path: &str) -> Option<ReadOut> {
    read_out(path, read_text(path)?)
}

impl From<Loaded> for ReadOut {
    fn from(l: Loaded) -> Self {
        ReadOut {
            text: l.text,
            pending: l.pending,
        }
    }
}

/// `readEntry` core on libuv's pool: [`read_entry`], after which the file's directory may be
/// read on the JS thread ([`read_entry_now`]).
pub fn read_entry_on_pool(path: &str) -> Option<ReadOut> {
    let out = read_entry(path);
    platform::read_now::learn(path);
    out
}

/// `readEntry` core on the JS thread: `Some(answer)` when the kernel could read the file
/// without waiting (platform::read_now), None when the read must go to the pool.
pub fn read_entry_now(path: &str) -> Option<Option<ReadOut>> {
    use platform::read_now::ReadNow;
    match platform::read_now::read_now(path) {
        ReadNow::Bytes(bytes) => Some(read_out(path, text_of(bytes))),
        ReadNow::Absent => Some(None),
        ReadNow::WouldBlock => None,
    }
}

/// `listEntries` core (B5): names ending in `.json`, in UTF-16 order, read concurrently
/// (W-B8) and returned in that order with their names; unreadable or invalid ones skipped.
pub fn list_entries(agent_dir: &str) -> Vec<(String, ReadOut)> {
    let dir = process_matrix_dir(agent_dir);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    // Names as Node's readdir decodes them (U+FFFD replacement, K2): a name that is not UTF-8
    // is read under its decoded name, as the original's readFile does, so a file carrying
    // that name is listed once per name that decodes to it, and is otherwise absent. Its
    // listed inode is not the decoded name's: it is read without the coherence check (inode 0).
    let mut names: Vec<(String, u64)> = rd
        .filter_map(|e| e.ok())
        .map(|e| match e.file_name().into_string() {
            Ok(n) => (n, listed_ino(&e)),
            Err(raw) => (raw.to_string_lossy().into_owned(), 0),
        })
        .filter(|(n, _)| n.ends_with(".json"))
        .collect();
    names.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
    // On a network or FUSE file system each file is read as the server has it, checked against
    // the inode this very listing gave for its name (coherent_read::read_listed).
    let remote = coherent_read::enabled() && dir_is_remote(&dir);
    let paths: Vec<(String, u64)> = names
        .iter()
        .map(|(n, ino)| (nodepath::join(&[&dir, n]), *ino))
        .collect();
    let workers = if paths.len() >= 64 { 4 } else { 1 };
    let mut slots: Vec<Option<ReadOut>> = Vec::with_capacity(paths.len());
    slots.resize_with(paths.len(), || None);
    let chunk = paths.len().div_ceil(workers).max(1);
    let read_chunk = |ps: &[(String, u64)], out: &mut [Option<ReadOut>]| {
        for ((p, ino), slot) in ps.iter().zip(out.iter_mut()) {
            *slot = if remote {
                read_listed_entry(p, *ino)
            } else {
                read_entry(p)
            };
        }
    };
    // The first chunk is read on this thread: a small folder (one chunk) starts no thread.
    let mut chunks = paths.chunks(chunk).zip(slots.chunks_mut(chunk));
    let first = chunks.next();
    std::thread::scope(|s| {
        for (ps, out) in chunks {
            s.spawn(move || read_chunk(ps, out));
        }
        if let Some((ps, out)) = first {
            read_chunk(ps, out);
        }
    });
    names
        .into_iter()
        .zip(slots)
        .filter_map(|((name, _), slot)| Some((name, slot?)))
        .collect()
}

#[cfg(unix)]
fn listed_ino(e: &std::fs::DirEntry) -> u64 {
    std::os::unix::fs::DirEntryExt::ino(e)
}

#[cfg(not(unix))]
fn listed_ino(_: &std::fs::DirEntry) -> u64 {
    0
}

/// Whether the folder `dir` is on a network or FUSE file system (one `stat`).
fn dir_is_remote(dir: &str) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(dir)
            .is_ok_and(|m| platform::fs_kind::is_remote(std::path::Path::new(dir), m.dev()))
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
        false
    }
}

/// [`read_entry`] on a network file system, of a file whose folder listing gave `ino`.
fn read_listed_entry(path: &str, ino: u64) -> Option<ReadOut> {
    match coherent_read::read_listed(path, ino) {
        Ok(coherent_read::Current::Bytes(b)) => read_out(path, text_of(b)),
        _ => None,
    }
}

/// What a CAS does when `expected` matches.
#[derive(Debug, Clone)]
pub enum Action {
    /// Write these bytes (None: the caller's serialization failed; report it after release).
    Write(Option<Vec<u8>>),
    Remove,
}

/// Result of a CAS attempt.
#[derive(Debug)]
pub enum CasOutcome {
    Matched,
    NotMatched,
    /// Matched, but there was nothing to write (serialization failed).
    MatchedWithoutPayload,
    /// `expected` was undefined and the current file is valid except for timestamps only V8
    /// can judge; the lock stays held until [`cas_finish`].
    NeedsTimestamps(PendingCas),
}

/// A CAS suspended under its lock while the JS thread decides whether it matched: either V8
/// judges timestamps ([`CasOutcome::NeedsTimestamps`]) or JS compares the whole file
/// ([`cas_judged`]). Dropping it releases the lock without acting.
#[derive(Debug)]
pub struct PendingCas {
    pub guard: LockGuard,
    pub file: String,
    /// The file's text when it parsed and validated (up to `pending`), else None.
    pub text: Option<String>,
    pub pending: Vec<Vec<u16>>,
    pub action: Action,
    pub durable: bool,
}

/// Options of a mutating call.
#[derive(Debug, Clone, Copy)]
pub struct WriteOptions {
    pub lock: LockOptions,
    pub durable: bool,
}

/// Write `bytes` over `file` through the lock's fence: published only while `guard` is still ours.
fn write_fenced(file: &str, bytes: &[u8], durable: bool, guard: &LockGuard) -> Result<(), FsError> {
    // The caller created the directory chain before taking the lock (B13).
    atomic_file::write_atomic_published(file, bytes, 0o666, durable, &|tmp| {
        guard.publish_rename(tmp, file)
    })
}

fn apply(
    file: &str,
    action: &Action,
    durable: bool,
    guard: &LockGuard,
) -> Result<CasOutcome, FsError> {
    match action {
        Action::Write(Some(bytes)) => {
            write_fenced(file, bytes, durable, guard)?;
            Ok(CasOutcome::Matched)
        }
        Action::Write(None) => Ok(CasOutcome::MatchedWithoutPayload),
        Action::Remove => guard.publish_unlink(file).map(|()| CasOutcome::Matched),
    }
}

/// B13: every mutating call makes the entry's folder (mkdir -p), then takes its lock. The folder
/// is made only when the lock's own `mkdir` finds it missing ([`LockOptions::create_parent`]).
fn lock_entry(file: &str, lock: LockOptions) -> Result<LockGuard, FsError> {
    let lock = LockOptions {
        create_parent: true,
        ..lock
    };
    lock::acquire(file, lock)
}

/// Take the entry's lock (B13) and run `op` under it. With `wait`, under `lock`'s policy
/// (B17/B18). Without, the fast path (ARCHITECTURE.md, "Fast path"): one attempt and no wait at
/// all; None, having done nothing, when the lock was not free at once (held by another process
/// or queued for in this one) or could not be taken for any other reason. The caller then runs
/// the whole operation again with `wait`, which also reports the errors the original would: the
/// fast attempt is one extra `mkdir` before its first.
pub fn with_entry_lock<T>(
    file: &str,
    lock: LockOptions,
    wait: bool,
    op: impl FnOnce(LockGuard) -> Result<T, FsError>,
) -> Result<Option<T>, FsError> {
    let policy = if wait {
        lock
    } else {
        LockOptions {
            retry: lock::Retry::Once,
            ..lock
        }
    };
    match lock_entry(file, policy) {
        Ok(guard) => op(guard).map(Some),
        Err(e) if wait => Err(e),
        Err(_) => Ok(None),
    }
}

/// B8 / B10 / B12: mkdir -p, lock, read + validate + compare, act on a match, release.
pub fn cas(
    file: &str,
    expected: &Expected,
    known: &dyn Fn(&[u16]) -> Option<bool>,
    action: Action,
    opts: WriteOptions,
) -> Result<CasOutcome, FsError> {
    let guard = lock_entry(file, opts.lock)?;
    cas_locked(guard, file, expected, known, action, opts.durable)
}

/// B8/B20's comparison of the current file (None: absent or not accepted) with `expected`:
/// whether it matches, or None when only V8 can tell (`expected` is undefined and the file is
/// valid but for timestamps V8 must judge: it matches iff one of them is invalid).
fn compare(current: Option<&Loaded>, expected: &Expected) -> Option<bool> {
    match current {
        // A structurally equal file would carry exactly the expected timestamps, which `known`
        // decides; pending ones therefore differ from any `expected` but undefined.
        Some(l) if !l.pending.is_empty() => (!expected.is_undefined()).then_some(false),
        current => Some(expected.matches(current.map(|l| (l.text.as_str(), l.value())))),
    }
}

/// [`cas`] under a lock already taken. Afterwards the file's directory may be read on the JS
/// thread ([`cas_mismatch_now`]), and whether it matched predicts the next CAS on the entry.
pub fn cas_locked(
    guard: LockGuard,
    file: &str,
    expected: &Expected,
    known: &dyn Fn(&[u16]) -> Option<bool>,
    action: Action,
    durable: bool,
) -> Result<CasOutcome, FsError> {
    let text = match read_locked(file, &guard) {
        Ok(t) => t,
        Err(e) => {
            let _ = guard.release();
            return Err(e);
        }
    };
    platform::read_now::learn(file);
    let mut current = None;
    let verdict = match (expected, &text) {
        // The writers' text of `expected`, last found valid here: equal without parsing either.
        (Expected::Text(t), Some(s)) if s == t && known_valid(file, s) => Some(true),
        _ => {
            current = text.and_then(|t| accept_at(file, t, known));
            compare(current.as_ref(), expected)
        }
    };
    let Some(matched) = verdict else {
        guard.awaits_js();
        return Ok(CasOutcome::NeedsTimestamps(PendingCas {
            guard,
            file: file.to_string(),
            text: None,
            pending: current.map(|l| l.pending).unwrap_or_default(),
            action,
            durable,
        }));
    };
    last_matched(file, matched);
    let outcome = if matched {
        apply(file, &action, durable, &guard)?
    } else {
        CasOutcome::NotMatched
    };
    let _ = guard.release();
    Ok(outcome)
}

/// Entries whose last CAS under the lock matched, by lock path: their next async CAS goes to the
/// pool without the JS thread's look ([`cas_mismatch_now`]). A caller that matched once (a
/// heartbeat) most likely matches again, and for a match that look is only a cost (a read,
/// ~10 µs); after a mismatch the look is made again. At most [`MAX_PREDICTED`] entries.
static MATCHED_LAST: std::sync::LazyLock<std::sync::Mutex<std::collections::HashSet<String>>> =
    std::sync::LazyLock::new(Default::default);
const MAX_PREDICTED: usize = 64;

fn last_matched(file: &str, matched: bool) {
    let (lock_path, _) = lock::lock_path_for(file);
    let mut set = MATCHED_LAST.lock().unwrap_or_else(|e| e.into_inner());
    if matched {
        if set.len() >= MAX_PREDICTED {
            set.clear();
        }
        set.insert(lock_path);
    } else {
        set.remove(&lock_path);
    }
}

fn predicted_match(lock_path: &str) -> bool {
    MATCHED_LAST
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(lock_path)
}

/// An async CAS answered on the JS thread (ARCHITECTURE.md, "CAS mismatches on the JS
/// thread"): true when it certainly does not match, which is then its answer. That is when
/// nothing of this process is under way on the entry's lock (an operation called earlier may be
/// about to take it), the entry file exists (so its folder does: the call's mkdir -p would do
/// nothing) and, read without waiting, is not equal to `expected` (B8/B20), and then the lock
/// directory is absent (so the original would neither wait, nor take over a stale lock, nor
/// fail with ELOCKED). Writers replace the file by rename, so the read saw a committed value,
/// and a CAS that reads a value unequal to `expected` answers false without writing. False,
/// having done nothing, in every other case: the CAS then runs on the pool as always. Not tried
/// at all when the entry's last CAS here matched (a caller that matched once likely matches
/// again); the lock is looked at last, so a match costs only the read.
pub fn cas_mismatch_now(
    file: &str,
    expected: &Expected,
    known: &dyn Fn(&[u16]) -> Option<bool>,
) -> bool {
    use platform::read_now::{self, ReadNow};
    let (lock_path, _) = lock::lock_path_for(file);
    if lock::busy_here(&lock_path) || predicted_match(&lock_path) {
        return false;
    }
    let ReadNow::Bytes(bytes) = read_now::read_now(file) else {
        return false;
    };
    if matches!(expected, Expected::Text(t) if t.as_bytes() == bytes) {
        return false; // the writers' text of `expected`: a match, left to the pool unparsed
    }
    compare(accept(text_of(bytes), known).as_ref(), expected) == Some(false)
        && read_now::absent_now(&lock_path)
}

/// B8 / B10 / B12 with the comparison left to JS (an `expected` whose reading runs JS code,
/// SPEC B20's exact route): mkdir -p, lock, read + validate, then suspend with the file's text
/// and the timestamps only V8 can judge. [`cas_finish`] acts on the JS verdict.
pub fn cas_judged(file: &str, action: Action, opts: WriteOptions) -> Result<PendingCas, FsError> {
    let guard = lock_entry(file, judged_lock(opts.lock))?;
    cas_judged_locked(guard, file, action, opts.durable)
}

/// The lock options of a CAS whose comparison JS makes.
pub fn judged_lock(lock: LockOptions) -> LockOptions {
    LockOptions {
        js_verdict: true,
        create_parent: true,
        ..lock
    }
}

/// The lock options of a mutating store call: its entry's folder is made when the lock's own
/// `mkdir` finds it missing (B13).
pub fn entry_lock(lock: LockOptions) -> LockOptions {
    LockOptions {
        create_parent: true,
        ..lock
    }
}

/// [`cas_judged`] once the lock is held.
pub fn cas_judged_locked(
    guard: LockGuard,
    file: &str,
    action: Action,
    durable: bool,
) -> Result<PendingCas, FsError> {
    guard.awaits_js();
    let text = match read_locked(file, &guard) {
        Ok(t) => t,
        Err(e) => {
            let _ = guard.release();
            return Err(e);
        }
    };
    let (text, pending) = match text.and_then(|t| accept_at(file, t, &no_known)) {
        Some(l) => (Some(l.text), l.pending),
        None => (None, Vec::new()),
    };
    Ok(PendingCas {
        guard,
        file: file.to_string(),
        text,
        pending,
        action,
        durable,
    })
}

/// Finish a suspended CAS with the JS verdict: act if it `matched`, then release. (With
/// `expected === undefined` a timestamp-pending file matches iff some timestamp is not finite.)
pub fn cas_finish(p: PendingCas, matched: bool) -> Result<CasOutcome, FsError> {
    let outcome = if matched {
        apply(&p.file, &p.action, p.durable, &p.guard)?
    } else {
        CasOutcome::NotMatched
    };
    let _ = p.guard.release();
    Ok(outcome)
}

/// B7 under the entry's lock ([`with_entry_lock`]): write (or nothing when serialization
/// failed), release.
pub fn write_entry(
    guard: LockGuard,
    file: &str,
    payload: Option<&[u8]>,
    durable: bool,
) -> Result<(), FsError> {
    let result = match payload {
        Some(bytes) => write_fenced(file, bytes, durable, &guard),
        None => Ok(()),
    };
    let _ = guard.release();
    result
}

/// B11 under the entry's lock ([`with_entry_lock`]): remove the file (every rm error
/// swallowed), release.
pub fn remove_entry(guard: LockGuard, file: &str) -> Result<(), FsError> {
    // Every rm error swallowed (B11); a lock lost before the removal still fails.
    match guard.publish_unlink(file) {
        Err(e @ (FsError::Compromised { .. } | FsError::Cancelled)) => {
            let _ = guard.release();
            Err(e)
        }
        _ => {
            let _ = guard.release();
            Ok(())
        }
    }
}

/// A lock's private directory (`<entry>.json.lock.<uuid>`, network folders) left by a crash is
/// removed by the sweep only once it is at least this old, whatever `min_age` says: its maker
/// cannot be told from its name, and a live one holds it for one attempt.
pub const PRIVATE_LOCK_DIR_MIN_AGE: std::time::Duration = std::time::Duration::from_secs(300);

/// W-B2 maintenance: delete `<entry>.json.<pid>.<uuid>.tmp` files in the matrix directory whose
/// writer pid is dead and which are older than `min_age`, and the empty private lock
/// directories `<entry>.json.lock.<uuid>` older than `min_age` and
/// [`PRIVATE_LOCK_DIR_MIN_AGE`]. Returns the removed paths.
pub fn sweep_orphan_temp_files(agent_dir: &str, min_age: std::time::Duration) -> Vec<String> {
    let dir = process_matrix_dir(agent_dir);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for e in rd.filter_map(|e| e.ok()) {
        let Ok(name) = e.file_name().into_string() else {
            continue;
        };
        let path = nodepath::join(&[&dir, &name]);
        let older_than = |min: std::time::Duration| {
            std::fs::symlink_metadata(&path)
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age >= min)
        };
        if let Some(pid) = orphan_temp_pid(&name) {
            let dead = crate::liveness::probe_pid(pid) == crate::liveness::ProcState::Dead;
            if older_than(min_age) && dead && std::fs::remove_file(&path).is_ok() {
                removed.push(path);
            }
        } else if private_lock_dir(&name)
            && older_than(min_age.max(PRIVATE_LOCK_DIR_MIN_AGE))
            && std::fs::remove_dir(&path).is_ok()
        {
            removed.push(path);
        }
    }
    removed
}

/// A lowercase UUID as the writers print it.
fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_digit() || (b'a'..=b'f').contains(&b),
        })
}

/// Whether `name` is a lock's private directory name, `<x>.json.lock.<uuid>`.
fn private_lock_dir(name: &str) -> bool {
    name.rsplit_once('.')
        .is_some_and(|(lock, uuid)| lock.ends_with(".json.lock") && is_uuid(uuid))
}

/// The writer pid of a temp file name `<x>.json.<pid>.<uuid>.tmp`, if it is one.
fn orphan_temp_pid(name: &str) -> Option<i32> {
    let stem = name.strip_suffix(".tmp")?;
    let (rest, uuid) = stem.rsplit_once('.')?;
    let (entry, pid) = rest.rsplit_once('.')?;
    // Digits only, as the writers print a pid (`parse` alone would take a sign).
    if !entry.ends_with(".json") || !is_uuid(uuid) || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    pid.parse::<i32>().ok().filter(|p| *p > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(process_matrix_dir("/a"), "/a/state/process-matrix");
        assert_eq!(
            entry_path("/a", "master-s"),
            "/a/state/process-matrix/master-s.json"
        );
        assert_eq!(entry_path("/a", "../../x"), "/a/x.json");
    }

    /// A new folder of this process under the temp dir, and the path of an entry file in it.
    fn temp_entry(name: &str) -> (std::path::PathBuf, String) {
        let dir = std::env::temp_dir().join(format!("pi-native-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("master-session-1.json");
        (dir, file.to_string_lossy().into_owned())
    }

    /// The JS-thread mismatch answer: only a certain mismatch, never while this process has an
    /// operation under way on the entry, never while its lock directory exists.
    #[cfg(target_os = "linux")]
    #[test]
    fn cas_mismatch_now_only_when_certain() {
        let (dir, file) = temp_entry("cas-now");
        let lock = format!("{file}.lock");
        std::fs::write(&file, entry::tests::ENTRY).unwrap();
        // Learn the directory, update the access time, and leave a cached negative dentry of
        // the lock behind (as every CAS does).
        assert!(read_entry_on_pool(&file).is_some());
        std::fs::create_dir(&lock).unwrap();
        std::fs::remove_dir(&lock).unwrap();
        let other =
            Expected::Text(entry::tests::ENTRY.replace(r#""hostname":"h""#, r#""hostname":"i""#));
        let same = Expected::Text(entry::tests::ENTRY.to_string());
        let known = |_: &[u16]| Some(true);
        if read_entry_now(&file).is_none() {
            // openat2 refused (qemu-user, an old kernel, a seccomp filter): never answered here.
            assert!(!cas_mismatch_now(&file, &other, &known));
            std::fs::remove_dir_all(&dir).unwrap();
            return;
        }
        assert!(
            cas_mismatch_now(&file, &other, &known),
            "a certain mismatch"
        );
        assert!(
            !cas_mismatch_now(&file, &same, &known),
            "a match goes to the pool"
        );
        let undefined = Expected::Value(entry::Exp::Undefined);
        assert!(
            cas_mismatch_now(&file, &undefined, &known),
            "undefined vs a valid file"
        );
        {
            let _under_way = lock::InFlight::start(&file);
            assert!(
                !cas_mismatch_now(&file, &other, &known),
                "an operation under way"
            );
        }
        std::fs::create_dir(&lock).unwrap();
        assert!(!cas_mismatch_now(&file, &other, &known), "the lock is held");
        std::fs::remove_dir(&lock).unwrap();
        assert!(cas_mismatch_now(&file, &other, &known), "released");
        // Predicted from the last CAS made on the pool: after a match, not tried.
        last_matched(&file, true);
        assert!(
            !cas_mismatch_now(&file, &other, &known),
            "the last CAS matched"
        );
        last_matched(&file, false);
        assert!(
            cas_mismatch_now(&file, &other, &known),
            "the last CAS did not match"
        );
        std::fs::write(&file, "{").unwrap();
        assert!(read_entry_on_pool(&file).is_none());
        assert!(
            !cas_mismatch_now(&file, &undefined, &known),
            "undefined vs a corrupt file"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A remembered valid text answers only for those very bytes at that path: a changed, corrupt
    /// or invalid file is parsed and judged again, a text V8 had to judge is never remembered, and
    /// a CAS whose `expected` is the remembered text matches without a parse.
    #[test]
    fn valid_texts_answer_only_for_the_same_bytes() {
        let (dir, file) = temp_entry("valid");
        let other_host = entry::tests::ENTRY.replace(r#""hostname":"h""#, r#""hostname":"i""#);
        std::fs::write(&file, entry::tests::ENTRY).unwrap();
        assert_eq!(read_entry(&file).unwrap().text, entry::tests::ENTRY);
        assert!(known_valid(&file, entry::tests::ENTRY), "remembered");
        assert!(!known_valid(&file, &other_host));
        assert!(
            !known_valid(&format!("{file}x"), entry::tests::ENTRY),
            "by path"
        );

        std::fs::write(&file, &other_host).unwrap();
        assert_eq!(read_entry(&file).unwrap().text, other_host, "changed bytes");
        let invalid = entry::tests::ENTRY.replace(r#""role":"master""#, r#""role":"boss""#);
        std::fs::write(&file, &invalid).unwrap();
        assert!(
            read_entry(&file).is_none(),
            "an invalid text is judged again"
        );
        std::fs::write(&file, "{").unwrap();
        assert!(
            read_entry(&file).is_none(),
            "a corrupt text is judged again"
        );

        // A timestamp without an offset is V8's (and the time zone's) to judge: not remembered.
        let local = entry::tests::ENTRY.replace(
            r#""heartbeatAt":"2026-07-19T00:00:00.000Z""#,
            r#""heartbeatAt":"2026-07-19T00:00:00""#,
        );
        std::fs::write(&file, &local).unwrap();
        assert!(load(&file, &|_| Some(true)).is_some());
        assert!(!known_valid(&file, &local));

        // The CAS: `expected` is the remembered text, so it matches and writes.
        std::fs::write(&file, entry::tests::ENTRY).unwrap();
        assert!(read_entry(&file).is_some());
        let opts = WriteOptions {
            lock: LockOptions::store_sync(),
            durable: false,
        };
        let out = cas(
            &file,
            &Expected::Text(entry::tests::ENTRY.to_string()),
            &no_known,
            Action::Write(Some(other_host.clone().into_bytes())),
            opts,
        )
        .unwrap();
        assert!(matches!(out, CasOutcome::Matched));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), other_host);
        // Texts past the size limit are parsed every time.
        let big = entry::tests::ENTRY.replace(
            r#""cwd":"/w""#,
            &format!(r#""cwd":"/{}""#, "w".repeat(REMEMBER_MAX_BYTES)),
        );
        std::fs::write(&file, &big).unwrap();
        assert!(read_entry(&file).is_some());
        assert!(!known_valid(&file, &big));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// W-B9: only regular files are read, and never more than ENTRY_MAX_BYTES, also when the
    /// size says nothing (procfs) or lies about what a read would cost (a sparse file).
    #[cfg(unix)]
    #[test]
    fn entry_reads_are_bounded_and_regular_only() {
        let (dir, file) = temp_entry("bounded");
        std::fs::write(&file, entry::tests::ENTRY).unwrap();
        assert_eq!(read_text(&file).as_deref(), Some(entry::tests::ENTRY));
        // At the bound, read; one byte over (by its size), absent, unread.
        let f = std::fs::File::create(&file).unwrap();
        f.set_len(ENTRY_MAX_BYTES).unwrap();
        assert_eq!(
            read_text(&file).map(|t| t.len() as u64),
            Some(ENTRY_MAX_BYTES)
        );
        f.set_len(10 * 1024 * 1024 * 1024).unwrap();
        assert_eq!(read_text(&file), None, "a 10 GiB sparse file");
        drop(f);
        std::fs::remove_file(&file).unwrap();
        for target in ["/dev/zero", "/proc/self/pagemap", "/proc/self/environ"] {
            if std::path::Path::new(target).exists() {
                std::os::unix::fs::symlink(target, &file).unwrap();
                let got = read_text(&file);
                // A character device is not regular; procfs files are, and are read to the bound.
                assert!(
                    got.as_ref()
                        .is_none_or(|t| t.len() as u64 <= ENTRY_MAX_BYTES),
                    "{target}"
                );
                if target == "/dev/zero" || target == "/proc/self/pagemap" {
                    assert_eq!(got, None, "{target}");
                }
                std::fs::remove_file(&file).unwrap();
            }
        }
        let path = std::ffi::CString::new(file.clone()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(path.as_ptr(), 0o600) }, 0);
        assert_eq!(read_text(&file), None, "a FIFO, without blocking");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn temp_names() {
        assert_eq!(
            orphan_temp_pid("master-s.json.123.0f8fad5b-d9cb-469f-a165-70867728950e.tmp"),
            Some(123)
        );
        assert_eq!(orphan_temp_pid("master-s.json.lock"), None);
        assert_eq!(orphan_temp_pid("x.json.12.notauuid.tmp"), None);
        let uuid = "0f8fad5b-d9cb-469f-a165-70867728950e";
        assert_eq!(orphan_temp_pid(&format!(".json.7.{uuid}.tmp")), Some(7));
        assert_eq!(orphan_temp_pid(&format!("x.json.+7.{uuid}.tmp")), None);
        assert_eq!(orphan_temp_pid(&format!("x.json.-7.{uuid}.tmp")), None);
    }
}

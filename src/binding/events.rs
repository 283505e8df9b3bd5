//! N-API surface of the supervision events: process-exit watches and folder watches of the
//! core ([`crate::supervise`]), delivered to the JS thread of the environment that made them.
//! The contract layer (`lib/contract/events.js`) builds the promises, the async iterables, the
//! path following, the probing fallback and the coalescing over these building blocks.
//!
//! Notices go through channels: [`ExitChannel`] and [`DirChannel`], one of each per loaded
//! copy of the JS layer (a `delete require.cache` reload, two installed copies sharing one
//! binary, a bundler's duplicate), each with the JS function its own notices call. A watch
//! belongs to the channel that made it, so no copy hears another's. A channel is freed with
//! its JS object (a copy that goes away), its watches with their environment ([`teardown`]).
//! Each channel's thread-safe function starts unreferenced: the contract layer references it
//! (`ref(true)`) while a wait or a watch that keeps the event loop alive is pending.
//!
//! Folder notices are kept in a bounded mailbox per channel, coalesced per watch and name,
//! and the JS side takes them all at once (`take()`): a JS thread that is busy for a while
//! makes no queue grow. Past [`MAIL_CAP`] names for one watch, the names are dropped for one
//! "look again" (the contract layer then lists the folder).
//!
//! The waiter thread settles nothing itself and runs at normal priority, so the lock Node-API
//! holds across a thread-safe call's wake-up (see `settle.rs`) costs nothing here.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

use super::env_data;
use super::failure::{js_error, Failure};
use crate::fserror::FsError;
use crate::platform::{fs::stamp_of, fs_kind};
use crate::supervise::{self as core, snapshot, ExitWatch, Filter, Notice, Sink};

type ExitFn = ThreadsafeFunction<f64, Unknown<'static>, f64, Status, false, true>;
/// Called with no argument: "mail is waiting" (the JS side then calls `take()`).
type MailFn = ThreadsafeFunction<(), Unknown<'static>, (), Status, false, true>;

/// Names kept for one folder watch before they are given up for one "look again".
pub const MAIL_CAP: usize = 1024;

/// Names waiting in every channel's mailbox of the process (for [`supervision_state`]).
static QUEUED: AtomicUsize = AtomicUsize::new(0);

/// Reference (keep the event loop alive) or unreference a thread-safe function. napi-rs 3
/// marks `refer`/`unref` deprecated, pointing at `clone` (which counts threads, not loop
/// references): they are still its only safe form of `napi_ref_threadsafe_function` /
/// `napi_unref_threadsafe_function`, and they keep its own `referred` flag right.
macro_rules! set_ref {
    ($env:expr, $tsfn:expr, $on:expr) => {{
        let mut t = $tsfn.write().unwrap_or_else(|e| e.into_inner());
        #[allow(deprecated)]
        if $on {
            t.refer($env)
        } else {
            t.unref($env)
        }
    }};
}

// ---- process exits ----------------------------------------------------------------------------

/// How process exits are watched here: `pidfd`, `kqueue`, `process-handle`, or `probe`.
#[napi(
    catch_unwind,
    ts_return_type = "'pidfd' | 'kqueue' | 'process-handle' | 'probe'"
)]
pub fn exit_watch_mode() -> &'static str {
    core::exit_mode()
}

/// The exit notices of one copy of the JS layer: each watch it adds calls its `onExit(id)`.
#[napi]
pub struct ExitChannel {
    tsfn: Arc<RwLock<ExitFn>>,
}

#[napi]
impl ExitChannel {
    /// A channel whose notices call `onExit` with the watch id (unreferenced to begin with).
    #[napi(
        constructor,
        catch_unwind,
        ts_args_type = "onExit: (id: number) => void"
    )]
    pub fn new(on_exit: Function<f64, Unknown<'static>>) -> Result<Self> {
        let tsfn: ExitFn = on_exit
            .build_threadsafe_function::<f64>()
            .callee_handled::<false>()
            .weak::<true>()
            .build()?;
        Ok(ExitChannel {
            tsfn: Arc::new(RwLock::new(tsfn)),
        })
    }

    /// Watch a positive int32 pid (with `startTimeMs`, that very process): the watch id (> 0),
    /// 0 when it has already ended, -1 when the kernel cannot watch it (probe it instead).
    #[napi(catch_unwind)]
    pub fn add(&self, env: &Env, pid: i32, start_time_ms: Option<f64>) -> Result<f64> {
        let owner = env_data(env)?.owner;
        let tsfn = Arc::clone(&self.tsfn);
        let sink: Sink = Arc::new(move |id, notice| {
            if notice == Notice::Exited {
                let t = tsfn.read().unwrap_or_else(|e| e.into_inner());
                t.call(id as f64, ThreadsafeFunctionCallMode::NonBlocking);
            }
        });
        Ok(match core::watch_exit(pid, start_time_ms, owner, sink) {
            ExitWatch::Ended => 0.0,
            ExitWatch::Watching(id) => id as f64,
            ExitWatch::Unwatchable => -1.0,
        })
    }

    /// Whether this channel's notices keep the event loop alive.
    #[napi(js_name = "ref", catch_unwind)]
    pub fn set_ref(&self, env: &Env, on: bool) -> Result<()> {
        set_ref!(env, self.tsfn, on)
    }
}

// ---- folders ----------------------------------------------------------------------------------

/// How folders are watched here: `inotify`, `kqueue` or `ReadDirectoryChangesW`.
#[napi(
    catch_unwind,
    ts_return_type = "'inotify' | 'kqueue' | 'ReadDirectoryChangesW' | 'none'"
)]
pub fn dir_watch_mode() -> &'static str {
    core::dir_mode()
}

/// What one folder watch has to tell since the last `take()`.
#[derive(Default)]
struct WatchMail {
    /// Changed names, in the order first noticed, each once.
    names: Vec<String>,
    seen: HashSet<String>,
    /// Look at the folder again (it went away or was replaced, notices were lost, or more
    /// than [`MAIL_CAP`] names piled up).
    look_again: bool,
    /// The watch failed: the OS error code and the folder.
    failed: Option<(i32, String)>,
}

impl WatchMail {
    /// Drop the names for one "look again" (which covers them).
    fn give_up(&mut self) {
        QUEUED.fetch_sub(self.names.len(), Ordering::Relaxed);
        self.look_again = true;
        self.names = Vec::new();
        self.seen = HashSet::new();
    }
}

#[derive(Default)]
struct Mail {
    watches: HashMap<u64, WatchMail>,
    /// Watch ids in the order their first notice came.
    order: Vec<u64>,
    /// A call to the JS side is on its way (no other is made until it takes the mail).
    called: bool,
}

impl Drop for Mail {
    /// Names never taken (their environment went away) leave the process's count.
    fn drop(&mut self) {
        let left: usize = self.watches.values().map(|w| w.names.len()).sum();
        QUEUED.fetch_sub(left, Ordering::Relaxed);
    }
}

struct DirInner {
    tsfn: RwLock<MailFn>,
    mail: Mutex<Mail>,
}

impl DirInner {
    /// Keep `notice` for watch `id` (of the folder `dir`), and tell the JS side if it is not
    /// told yet.
    fn post(&self, id: u64, notice: Notice, dir: &str) {
        let call = {
            let mut mail = self.mail.lock().unwrap_or_else(|e| e.into_inner());
            let Mail { watches, order, .. } = &mut *mail;
            let w = watches.entry(id).or_insert_with(|| {
                order.push(id);
                WatchMail::default()
            });
            match notice {
                Notice::Changed(name) if !w.look_again => {
                    if w.names.len() >= MAIL_CAP {
                        w.give_up();
                    } else if w.seen.insert(name.clone()) {
                        w.names.push(name);
                        QUEUED.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Notice::Changed(_) => {}
                Notice::Reevaluate => w.give_up(),
                Notice::Failed(code) => w.failed = Some((code, dir.to_string())),
                Notice::Exited => {}
            }
            !std::mem::replace(&mut mail.called, true)
        };
        if call {
            let t = self.tsfn.read().unwrap_or_else(|e| e.into_inner());
            t.call((), ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
}

/// What `DirChannel.take()` hands over for one watch.
#[napi(object)]
pub struct DirMail {
    pub id: f64,
    /// The changed names, or null: look at the folder again.
    pub names: Option<Vec<String>>,
    /// Set when the watch failed (it reports nothing more): what the error factory needs.
    pub failure: Option<Failure>,
}

/// The folder notices of one copy of the JS layer: when some are waiting it calls its
/// `onMail()`, which takes them with `take()`.
#[napi]
pub struct DirChannel {
    inner: Arc<DirInner>,
}

#[napi]
impl DirChannel {
    /// A channel whose notices call `onMail` (unreferenced to begin with).
    #[napi(constructor, catch_unwind, ts_args_type = "onMail: () => void")]
    pub fn new(on_mail: Function<(), Unknown<'static>>) -> Result<Self> {
        let tsfn: MailFn = on_mail
            .build_threadsafe_function::<()>()
            .callee_handled::<false>()
            .weak::<true>()
            .build()?;
        Ok(DirChannel {
            inner: Arc::new(DirInner {
                tsfn: RwLock::new(tsfn),
                mail: Mutex::new(Mail::default()),
            }),
        })
    }

    /// Watch the existing folder `dir` (an absolute path, the folder it names now): for its
    /// entry files (`*.json`), or, with `child`, for that one name being created, removed or
    /// renamed. The watch id; throws as Node's `fs.watch` does.
    #[napi(catch_unwind)]
    pub fn add(&self, env: &Env, dir: String, child: Option<String>) -> Result<f64> {
        let owner = env_data(env)?.owner;
        let inner = Arc::clone(&self.inner);
        let at = dir.clone();
        let sink: Sink = Arc::new(move |id, notice| inner.post(id, notice, &at));
        let filter = match child {
            Some(c) => Filter::Child(c.into()),
            None => Filter::Entries,
        };
        match core::watch_dir(Path::new(&dir), filter, owner, sink) {
            Ok(id) => Ok(id as f64),
            Err(e) => Err(js_error(env, &FsError::io(&e, "watch", &dir))),
        }
    }

    /// Every notice waiting, by watch, in the order they came; the next notice calls `onMail`
    /// again.
    #[napi(catch_unwind)]
    pub fn take(&self) -> Vec<DirMail> {
        let mut mail = self.inner.mail.lock().unwrap_or_else(|e| e.into_inner());
        mail.called = false;
        let mut watches = std::mem::take(&mut mail.watches);
        let order = std::mem::take(&mut mail.order);
        drop(mail);
        order
            .into_iter()
            .filter_map(|id| {
                let w = watches.remove(&id)?;
                QUEUED.fetch_sub(w.names.len(), Ordering::Relaxed);
                Some(DirMail {
                    id: id as f64,
                    names: (!w.look_again).then_some(w.names),
                    failure: w.failed.map(|(code, dir)| {
                        Failure::from(&FsError::io(
                            &std::io::Error::from_raw_os_error(code),
                            "watch",
                            &dir,
                        ))
                    }),
                })
            })
            .collect()
    }

    /// Whether this channel's notices keep the event loop alive.
    #[napi(js_name = "ref", catch_unwind)]
    pub fn set_ref(&self, env: &Env, on: bool) -> Result<()> {
        set_ref!(env, self.inner.tsfn, on)
    }
}

/// End a watch of either kind; false when it had already ended.
#[napi(catch_unwind)]
pub fn watch_cancel(id: f64) -> bool {
    id >= 1.0 && core::cancel(id as u64)
}

/// The result of `dirScan`: the entry files (`*.json`) of a folder, in UTF-16 order of their
/// names, cut into chunks.
#[napi]
pub struct ScanChunks {
    chunks: std::collections::VecDeque<String>,
}

#[napi]
impl ScanChunks {
    /// The next chunk, or null when all were taken: `name\0sig\0` for each file, `sig` the
    /// inode, size, modification and status-change times, as one comparable string (file
    /// names cannot hold NUL), or empty on a local folder (never polled).
    #[napi(catch_unwind)]
    pub fn take_chunk(&mut self) -> Option<String> {
        self.chunks.pop_front()
    }
}

/// The entry files (`*.json`) of `dir` with their signatures ([`ScanChunks`]), for polling a
/// folder whose notifications miss remote changes; none when the folder does not exist (or is
/// a file).
#[napi(catch_unwind, ts_return_type = "Promise<ScanChunks>")]
pub fn dir_scan(env: &Env, dir: String) -> Result<PromiseRaw<'_, ScanChunks>> {
    // A network folder's listing goes to its mount's lane, never libuv's pool.
    let lane = crate::lanes::of_folder(Path::new(&dir));
    super::failure::run(
        env,
        lane,
        move || match scan_signed(&dir) {
            Ok(listing) => {
                let mut files: Vec<(String, String)> = listing
                    .into_iter()
                    .filter_map(|(name, s)| {
                        let name = name.into_string().ok()?; // K2
                        name.ends_with(".json").then(|| {
                            let sig = s.map_or_else(String::new, |s| {
                                format!("{}:{}:{}:{}", s.ino, s.size, s.mtime_ns, s.ctime_ns)
                            });
                            (name, sig)
                        })
                    })
                    .collect();
                files.sort_by(|(a, _), (b, _)| a.encode_utf16().cmp(b.encode_utf16()));
                // Pieces of at most PIECE_BYTES, so the JS thread never holds the event loop
                // long (handing 200,000 files over as one array of objects took ~175 ms of it).
                let chunks = super::pieces(
                    files,
                    |(name, sig)| name.len() + sig.len() + 2,
                    ("", "", ""),
                    |chunk, (name, sig)| {
                        chunk.push_str(&name);
                        chunk.push('\0');
                        chunk.push_str(&sig);
                        chunk.push('\0');
                    },
                )
                .into_iter()
                .map(|(chunk, _)| chunk)
                .collect();
                Ok(ScanChunks { chunks })
            }
            Err(e)
                if matches!(e.kind(), std::io::ErrorKind::NotFound)
                    || e.raw_os_error() == Some(not_a_directory()) =>
            {
                Ok(ScanChunks {
                    chunks: Default::default(),
                })
            }
            Err(e) => Err(FsError::io(&e, "scandir", &dir)),
        },
        |_, v| Ok(v),
    )
}

/// `dir`'s names, each with its signature where the folder is on a network or FUSE file system
/// (the only folders whose watch polls and compares them); a local folder's names come without
/// one, saving a `stat` per file and, on the JS thread, a string per file to keep (issue 42:
/// 200,000 entries). A folder whose kind could not be probed (remembered as local only once
/// probed) is signed, as `dirIsRemote` may call it remote later.
fn scan_signed(dir: &str) -> std::io::Result<Vec<(std::ffi::OsString, Option<snapshot::Sig>)>> {
    let at = Path::new(dir);
    let local = stamp_of(dir).is_ok_and(|(dev, _, _)| {
        !fs_kind::is_remote(at, dev) && fs_kind::remembered(at) == Some((dev, false))
    });
    if !local {
        return Ok(snapshot::scan(at)?
            .into_iter()
            .map(|(name, sig)| (name, Some(sig)))
            .collect());
    }
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let Ok(entry) = entry else { continue };
        names.push((entry.file_name(), None));
    }
    Ok(names)
}

#[cfg(unix)]
fn not_a_directory() -> i32 {
    libc::ENOTDIR
}

#[cfg(windows)]
fn not_a_directory() -> i32 {
    267 // ERROR_DIRECTORY
}

/// Whether `dir` is on a network or FUSE file system, where notifications miss other
/// machines' changes (its folder watch then also polls): the lock protocol's answer
/// (`platform::fs_kind`); `null` when `dir` cannot be looked at.
#[napi(catch_unwind, ts_return_type = "Promise<boolean | null>")]
pub fn dir_is_remote(env: &Env, dir: String) -> Result<PromiseRaw<'_, Option<bool>>> {
    // Not known yet: looked at on the looking lane (a mount that stopped answering holds none
    // of libuv's threads).
    let lane = crate::lanes::of_folder(Path::new(&dir));
    super::failure::run(
        env,
        lane,
        move || {
            Ok(stamp_of(&dir)
                .ok()
                .map(|(dev, _, _)| fs_kind::is_remote(Path::new(&dir), dev)))
        },
        |_, v| Ok(v),
    )
}

/// What is being watched in the process, for tests: watches of all environments, whether
/// the waiter (its thread, its descriptors) exists, and the folder notices waiting for a JS
/// thread to take them.
#[napi(object)]
pub struct SupervisionState {
    pub watches: u32,
    pub waiter_running: bool,
    /// Changed names in every channel's mailbox (at most [`MAIL_CAP`] per folder watch).
    pub queued_names: u32,
    /// Times the OS said folder notifications were lost (each made the watches look again).
    pub overflows: u32,
}

/// The process's supervision state ([`SupervisionState`]).
#[napi(catch_unwind)]
pub fn supervision_state() -> SupervisionState {
    SupervisionState {
        watches: core::watch_count() as u32,
        waiter_running: core::waiter_running(),
        queued_names: QUEUED.load(Ordering::Relaxed) as u32,
        overflows: core::overflow_count() as u32,
    }
}

/// The environment `owner` is going away (on its own thread): end its watches, dropping the
/// sinks that hold its thread-safe functions (Node has closed those; the last references go
/// with its instance data). The waiter stops when they were the last.
pub fn teardown(owner: u64) {
    core::cancel_owner(owner);
}

//! N-API surface of the supervision events: process-exit watches and folder
//! watches of the core ([`crate::supervise`]), delivered to the JS thread of the environment
//! that made them. The contract layer (`lib/contract/events.js`) builds the promises, the
//! async iterables, the probing fallback and the coalescing over these building blocks.
//!
//! Each environment has one thread-safe function per kind, made by `exitWatchStart` /
//! `dirWatchStart` with the JS function to call (`(id)` for an exit, `(id, name | null)` for a
//! folder; `null` asks to look again), kept in its instance data ([`super::EnvData`]). They start
//! unreferenced: the contract layer references them (`exitWatchRef`, `dirWatchRef`) while a
//! wait or a watch that keeps the event loop alive is pending. Watches belong to the
//! environment: its teardown ends them ([`teardown`]), and its thread-safe functions go with its
//! instance data.
//! The waiter thread settles nothing itself and runs at normal priority, so the lock Node-API
//! holds across a thread-safe call's wake-up (see `settle.rs`) costs nothing here.

use std::path::Path;
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

use super::env_data;
use super::failure::{js_error, on_pool};
use crate::fserror::FsError;
use crate::platform::{fs::stamp_of, fs_kind};
use crate::supervise::{self as core, snapshot, ExitWatch, Filter, Notice, Sink};

type ExitFn = ThreadsafeFunction<f64, Unknown<'static>, f64, Status, false, true>;
/// `(id, name | null)`, spread into two arguments.
type DirArgs = FnArgs<(f64, Option<String>)>;
type DirFn = ThreadsafeFunction<DirArgs, Unknown<'static>, DirArgs, Status, false, true>;

/// An environment's two thread-safe functions, part of its instance data.
#[derive(Default)]
pub struct Delivery {
    exit: Option<Arc<ExitFn>>,
    dir: Option<Arc<DirFn>>,
}

fn not_started(what: &str) -> Error {
    Error::new(
        Status::GenericFailure,
        format!("pi-native: {what} called before its start function"),
    )
}

/// Reference (keep the event loop alive) or unreference a thread-safe function.
fn set_ref(env: &Env, raw: sys::napi_threadsafe_function, on: bool) -> Result<()> {
    // SAFETY: on the environment's thread, with a thread-safe function it made.
    let status = unsafe {
        if on {
            sys::napi_ref_threadsafe_function(env.raw(), raw)
        } else {
            sys::napi_unref_threadsafe_function(env.raw(), raw)
        }
    };
    check_status!(status)
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

/// Set the function this environment's exit notices call with the watch id.
#[napi(catch_unwind, ts_args_type = "onExit: (id: number) => void")]
pub fn exit_watch_start(env: &Env, on_exit: Function<f64, Unknown<'static>>) -> Result<()> {
    let data = env_data(env)?;
    let tsfn: ExitFn = on_exit
        .build_threadsafe_function::<f64>()
        .callee_handled::<false>()
        .weak::<true>()
        .build()?;
    data.events.exit = Some(Arc::new(tsfn));
    Ok(())
}

/// Watch a positive int32 pid (with `startTimeMs`, that very process): the watch id (> 0),
/// 0 when it has already ended, -1 when the kernel cannot watch it (probe it instead).
#[napi(catch_unwind)]
pub fn exit_watch_add(env: &Env, pid: i32, start_time_ms: Option<f64>) -> Result<f64> {
    let data = env_data(env)?;
    let owner = data.owner;
    let tsfn = data
        .events
        .exit
        .clone()
        .ok_or_else(|| not_started("exitWatchAdd"))?;
    let sink: Sink = Arc::new(move |id, notice| {
        if notice == Notice::Exited {
            tsfn.call(id as f64, ThreadsafeFunctionCallMode::NonBlocking);
        }
    });
    Ok(match core::watch_exit(pid, start_time_ms, owner, sink) {
        ExitWatch::Ended => 0.0,
        ExitWatch::Watching(id) => id as f64,
        ExitWatch::Unwatchable => -1.0,
    })
}

/// Whether this environment's exit notices keep its event loop alive.
#[napi(catch_unwind)]
pub fn exit_watch_ref(env: &Env, on: bool) -> Result<()> {
    match &env_data(env)?.events.exit {
        Some(t) => set_ref(env, t.raw(), on),
        None => Err(not_started("exitWatchRef")),
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

/// Set the function this environment's folder notices call: `(id, name)` for a changed name,
/// `(id, null)` to look at the folder again (gone, replaced, or notices lost).
#[napi(
    catch_unwind,
    ts_args_type = "onEvent: (id: number, name: string | null) => void"
)]
pub fn dir_watch_start(env: &Env, on_event: Function<DirArgs, Unknown<'static>>) -> Result<()> {
    let data = env_data(env)?;
    let tsfn: DirFn = on_event
        .build_threadsafe_function::<DirArgs>()
        .callee_handled::<false>()
        .weak::<true>()
        .build()?;
    data.events.dir = Some(Arc::new(tsfn));
    Ok(())
}

/// Watch the existing folder `dir` (an absolute path): for its entry files (`*.json`), or,
/// with `child`, for that one name only. The watch id; throws as Node's `fs.watch` does.
#[napi(catch_unwind)]
pub fn dir_watch_add(env: &Env, dir: String, child: Option<String>) -> Result<f64> {
    let data = env_data(env)?;
    let owner = data.owner;
    let tsfn = data
        .events
        .dir
        .clone()
        .ok_or_else(|| not_started("dirWatchAdd"))?;
    let sink: Sink = Arc::new(move |id, notice| {
        let name = match notice {
            Notice::Changed(name) => Some(name),
            Notice::Reevaluate => None,
            Notice::Exited => return,
        };
        tsfn.call(
            (id as f64, name).into(),
            ThreadsafeFunctionCallMode::NonBlocking,
        );
    });
    let filter = match child {
        Some(c) => Filter::Child(c.into()),
        None => Filter::Entries,
    };
    match core::watch_dir(Path::new(&dir), filter, owner, sink) {
        Ok(id) => Ok(id as f64),
        Err(e) => Err(js_error(env, &FsError::io(&e, "watch", &dir))),
    }
}

/// Whether this environment's folder notices keep its event loop alive.
#[napi(catch_unwind)]
pub fn dir_watch_ref(env: &Env, on: bool) -> Result<()> {
    match &env_data(env)?.events.dir {
        Some(t) => set_ref(env, t.raw(), on),
        None => Err(not_started("dirWatchRef")),
    }
}

/// End a watch of either kind; false when it had already ended.
#[napi(catch_unwind)]
pub fn watch_cancel(id: f64) -> bool {
    id >= 1.0 && core::cancel(id as u64)
}

/// One entry file of a listing: its name and what identifies this version of it.
#[napi(object)]
pub struct ScannedFile {
    pub name: String,
    /// inode, size, modification and status-change times, as one comparable string.
    pub sig: String,
}

/// The entry files (`*.json`) of `dir` with their signatures, for polling a folder whose
/// notifications miss remote changes; `[]` when the folder does not exist (or is a file).
#[napi(catch_unwind, ts_return_type = "Promise<ScannedFile[]>")]
pub fn dir_scan(env: &Env, dir: String) -> Result<PromiseRaw<'_, Vec<ScannedFile>>> {
    on_pool(
        env,
        move || match snapshot::scan(Path::new(&dir)) {
            Ok(listing) => Ok(listing
                .into_iter()
                .filter_map(|(name, s)| {
                    let name = name.into_string().ok()?; // K2
                    name.ends_with(".json").then(|| ScannedFile {
                        name,
                        sig: format!("{}:{}:{}:{}", s.ino, s.size, s.mtime_ns, s.ctime_ns),
                    })
                })
                .collect()),
            Err(e)
                if matches!(e.kind(), std::io::ErrorKind::NotFound)
                    || e.raw_os_error() == Some(not_a_directory()) =>
            {
                Ok(Vec::new())
            }
            Err(e) => Err(FsError::io(&e, "scandir", &dir)),
        },
        |_, v| Ok(v),
    )
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
    on_pool(
        env,
        move || {
            Ok(stamp_of(&dir)
                .ok()
                .map(|(dev, _, _)| fs_kind::is_remote(Path::new(&dir), dev)))
        },
        |_, v| Ok(v),
    )
}

/// What is being watched in the process, for tests: watches of all environments, and
/// whether the waiter (its thread, its descriptors) exists.
#[napi(object)]
pub struct SupervisionState {
    pub watches: u32,
    pub waiter_running: bool,
}

/// The process's supervision state ([`SupervisionState`]).
#[napi(catch_unwind)]
pub fn supervision_state() -> SupervisionState {
    SupervisionState {
        watches: core::watch_count() as u32,
        waiter_running: core::waiter_running(),
    }
}

/// The environment `owner` is going away (on its own thread): end its watches, dropping the
/// sinks that hold its thread-safe functions (Node has closed those; the last references go
/// with its instance data). The waiter stops when they were the last.
pub fn teardown(owner: u64) {
    core::cancel_owner(owner);
}

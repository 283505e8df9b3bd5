//! N-API surface of `pi-native/process-matrix-store` and `pi-native/atomic-file`: the
//! building blocks the JS wrappers in `lib/native.js` compose into the exact public contract.
//! Async operations run on blocking worker threads and resolve an [`OpResult`] envelope (the
//! wrapper turns `error` into a Node-shaped rejection); sync ones throw Node-shaped errors.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use napi::bindgen_prelude::*;
use napi::{sys, JsValue};
use napi_derive::napi;

use super::expected::{expected_timestamps, to_exp, Js};
use super::jsval::{received, to_js_string, type_error, type_of};
use crate::fserror::FsError;
use crate::lockfile::{self, HolderKind, LockGuard, LockOptions, Retry};
use crate::process_matrix::{self as core, Action, CasOutcome, PendingCas, WriteOptions};

// ---- per-environment ownership of locks -------------------------------------------------------

static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);
thread_local! {
    static OWNER: Cell<u64> = const { Cell::new(0) };
}

/// The id of the calling JS environment (one per thread: main or worker); the first call
/// registers a cleanup hook that removes the locks this environment still holds at teardown.
fn owner(env: &Env) -> Result<u64> {
    let id = OWNER.with(|o| o.get());
    if id != 0 {
        return Ok(id);
    }
    let id = NEXT_OWNER.fetch_add(1, Ordering::Relaxed);
    OWNER.with(|o| o.set(id));
    env.add_env_cleanup_hook(id, lockfile::release_all)?;
    Ok(id)
}

// ---- results and errors ------------------------------------------------------------------------

/// A Node-style error description (`message`, `code`, and `errno`/`syscall`/`path`/`dest` for
/// fs errors or `file` for lock errors).
#[napi(object)]
pub struct ErrorInfo {
    pub message: String,
    pub code: String,
    pub errno: Option<i32>,
    pub syscall: Option<String>,
    pub path: Option<String>,
    pub dest: Option<String>,
    pub file: Option<String>,
}

impl From<&FsError> for ErrorInfo {
    fn from(e: &FsError) -> Self {
        let mut info = ErrorInfo {
            message: e.to_string(),
            code: e.code().to_string(),
            errno: None,
            syscall: None,
            path: None,
            dest: None,
            file: None,
        };
        match e {
            FsError::Io {
                errno,
                syscall,
                path,
                dest,
                ..
            } => {
                info.errno = Some(*errno);
                info.syscall = Some(syscall.to_string());
                info.path = Some(path.clone());
                info.dest = dest.clone();
            }
            FsError::Locked { file } | FsError::Compromised { file } => {
                info.file = Some(file.clone())
            }
            FsError::Cancelled | FsError::Internal(_) => {}
        }
        info
    }
}

/// Envelope resolved by every async store operation.
#[napi(object)]
#[derive(Default)]
pub struct OpResult {
    pub error: Option<ErrorInfo>,
    /// readEntry: the accepted file text.
    pub text: Option<String>,
    /// Timestamps only V8 can judge (the entry is valid iff all are finite).
    pub pending: Option<Vec<Utf16String>>,
    /// CAS: whether `expected` matched.
    pub matched: Option<bool>,
    /// CAS matched but the caller's serialization had failed: reject with that error.
    pub no_payload: Option<bool>,
    /// CAS suspended under its lock: finish with `storeCasFinish(handle, valid)`.
    pub handle: Option<u32>,
}

fn failed(e: &FsError) -> OpResult {
    OpResult {
        error: Some(e.into()),
        ..Default::default()
    }
}

fn utf16_list(v: Vec<Vec<u16>>) -> Vec<Utf16String> {
    v.into_iter().map(Utf16String::from).collect()
}

/// Throw a Node-shaped error from a sync function.
fn throw_fs<T>(env: &Env, e: &FsError) -> Result<T> {
    let info = ErrorInfo::from(e);
    let mut err = env.create_error(napi::Error::new(
        Status::GenericFailure,
        info.message.clone(),
    ))?;
    err.set_named_property("code", info.code.as_str())?;
    for (k, v) in [
        ("syscall", &info.syscall),
        ("path", &info.path),
        ("dest", &info.dest),
        ("file", &info.file),
    ] {
        if let Some(v) = v {
            err.set_named_property(k, v.as_str())?;
        }
    }
    if let Some(errno) = info.errno {
        err.set_named_property("errno", errno)?;
    }
    // SAFETY: env is live and `err` an object created in it.
    unsafe { sys::napi_throw(env.raw(), err.raw()) };
    Err(Error::new(Status::PendingException, info.message))
}

/// Run blocking work on a worker thread and resolve its envelope.
fn spawn<'e, F>(env: &'e Env, work: F) -> Result<PromiseRaw<'e, OpResult>>
where
    F: FnOnce() -> OpResult + Send + 'static,
{
    env.spawn_future(async move {
        // block_in_place: run here, handing this worker's other tasks to another thread,
        // instead of a second hop to the blocking pool (each thread wake costs tens of µs).
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            tokio::task::block_in_place(work)
        }));
        Ok(outcome.unwrap_or_else(|_| OpResult {
            error: Some(internal_failure()),
            ..Default::default()
        }))
    })
}

/// What a panic on a worker thread becomes: a rejection that says so, never a wrong value.
fn internal_failure() -> ErrorInfo {
    ErrorInfo {
        message: "pi-native: internal failure in a worker thread".into(),
        code: "ERR_PI_NATIVE_INTERNAL".into(),
        errno: None,
        syscall: None,
        path: None,
        dest: None,
        file: None,
    }
}

// ---- argument conversion -----------------------------------------------------------------------

/// A path argument: a string, else Node's `ERR_INVALID_ARG_TYPE` TypeError.
fn path_arg(env: &Env, v: &Unknown, name: &str) -> Result<String> {
    if type_of(v)? == ValueType::String {
        return Ok(to_js_string(v).unwrap_or_default());
    }
    let msg = format!(
        "The \"{name}\" argument must be of type string. Received {}",
        received(v)?
    );
    env.throw_type_error(&msg, Some("ERR_INVALID_ARG_TYPE"))?;
    Err(Error::new(Status::PendingException, msg))
}

/// JS `String(v)`, through the engine's own `String` function.
fn js_string_call(env: &Env, v: &Unknown) -> Result<String> {
    let global = env.get_global()?;
    let string_fn: Function<Unknown, Unknown> = global.get_named_property("String")?;
    let s = string_fn.call(*v)?;
    Ok(to_js_string(&s).unwrap_or_default())
}

// ---- paths ------------------------------------------------------------------------------------

/// `path.join(agentDir, "state", "process-matrix")`.
#[napi(ts_args_type = "agentDir: string")]
pub fn process_matrix_dir(env: &Env, agent_dir: Unknown) -> Result<String> {
    Ok(core::process_matrix_dir(&path_arg(
        env, &agent_dir, "path",
    )?))
}

/// `path.join(processMatrixDir(agentDir), String(entryId) + ".json")` — an id with `/` or `..`
/// addresses another path, exactly as in the original.
#[napi(ts_args_type = "agentDir: string, entryId: string")]
pub fn entry_path(env: &Env, agent_dir: Unknown, entry_id: Unknown) -> Result<String> {
    let dir = path_arg(env, &agent_dir, "path")?;
    let id = js_string_call(env, &entry_id)?;
    Ok(core::entry_path(&dir, &id))
}

/// `String(role) + "-" + String(sessionId)`, without validation.
#[napi(ts_args_type = "role: 'master' | 'worker', sessionId: string")]
pub fn build_entry_id(env: &Env, role: Unknown, session_id: Unknown) -> Result<String> {
    Ok(format!(
        "{}-{}",
        js_string_call(env, &role)?,
        js_string_call(env, &session_id)?
    ))
}

// ---- store operations (building blocks) -------------------------------------------------------

fn store_opts(env: &Env, durable: bool) -> Result<WriteOptions> {
    let mut lock = LockOptions::store_async();
    lock.owner = owner(env)?;
    Ok(WriteOptions { lock, durable })
}

/// readEntry core: resolves `{ text, pending }` for an accepted file, `{}` when absent.
#[napi(ts_return_type = "Promise<OpResult>")]
pub fn store_read<'e>(env: &'e Env, file: String) -> Result<PromiseRaw<'e, OpResult>> {
    spawn(env, move || match core::read_entry(&file) {
        Some(r) => OpResult {
            text: Some(r.text),
            pending: Some(utf16_list(r.pending)),
            ..Default::default()
        },
        None => OpResult::default(),
    })
}

/// Target size of one [`ListChunk`]'s JSON text: V8 parses it in about a millisecond, so the
/// JS side can hand the event loop back between chunks (a 20,000-entry list is ~11 MB of text,
/// over 100 ms of `JSON.parse` in one piece).
const LIST_CHUNK_BYTES: usize = 128 * 1024;

/// One piece of a listing: consecutive accepted entries, in order.
#[napi(object)]
pub struct ListChunk {
    /// `[text, …]` of the entries of this chunk.
    pub json: String,
    /// Per entry of this chunk, the timestamps only V8 can judge; null when no entry has any.
    pub pending: Option<Vec<Vec<Utf16String>>>,
}

/// The result of `storeList`: the listing cut into chunks for `JSON.parse` a piece at a time.
#[napi]
pub struct ListChunks {
    chunks: std::collections::VecDeque<(String, Vec<Vec<Vec<u16>>>)>,
}

#[napi]
impl ListChunks {
    /// The next chunk, or null when all were taken.
    #[napi]
    pub fn take_chunk(&mut self) -> Option<ListChunk> {
        let (json, pending) = self.chunks.pop_front()?;
        let pending = if pending.iter().all(Vec::is_empty) {
            None
        } else {
            Some(pending.into_iter().map(utf16_list).collect())
        };
        Some(ListChunk { json, pending })
    }
}

/// Group the accepted texts into JSON arrays of about [`LIST_CHUNK_BYTES`] each.
fn list_chunks(entries: Vec<core::ReadOut>) -> ListChunks {
    let mut chunks = std::collections::VecDeque::new();
    let mut json = String::new();
    let mut pending: Vec<Vec<Vec<u16>>> = Vec::new();
    for e in entries {
        json.push(if pending.is_empty() { '[' } else { ',' });
        json.push_str(&e.text);
        pending.push(e.pending);
        if json.len() >= LIST_CHUNK_BYTES {
            json.push(']');
            chunks.push_back((std::mem::take(&mut json), std::mem::take(&mut pending)));
        }
    }
    if !pending.is_empty() {
        json.push(']');
        chunks.push_back((json, pending));
    }
    ListChunks { chunks }
}

/// listEntries core: reads, parses and validates off the JS thread; resolves the accepted
/// entries as [`ListChunks`].
#[napi(ts_return_type = "Promise<ListChunks>")]
pub fn store_list<'e>(env: &'e Env, agent_dir: String) -> Result<PromiseRaw<'e, ListChunks>> {
    env.spawn_future(async move {
        // As in `spawn`: run on this runtime thread rather than hop to the blocking pool.
        let listed = std::panic::catch_unwind(|| {
            tokio::task::block_in_place(|| core::list_entries(&agent_dir))
        });
        listed
            .map(list_chunks)
            .map_err(|_| Error::from_reason("pi-native: internal failure in a worker thread"))
    })
}

/// writeEntry core: mkdir -p, lock, write `payload` (or only lock/unlock when null), release.
#[napi(ts_return_type = "Promise<OpResult>")]
pub fn store_write<'e>(
    env: &'e Env,
    file: String,
    payload: Option<String>,
    durable: bool,
) -> Result<PromiseRaw<'e, OpResult>> {
    let opts = store_opts(env, durable)?;
    spawn(env, move || {
        match core::write_entry(&file, payload.as_deref().map(str::as_bytes), opts) {
            Ok(()) => OpResult::default(),
            Err(e) => failed(&e),
        }
    })
}

/// removeEntry core.
#[napi(ts_return_type = "Promise<OpResult>")]
pub fn store_remove<'e>(env: &'e Env, file: String) -> Result<PromiseRaw<'e, OpResult>> {
    let opts = store_opts(env, false)?;
    spawn(env, move || match core::remove_entry(&file, opts) {
        Ok(()) => OpResult::default(),
        Err(e) => failed(&e),
    })
}

fn pending_table() -> &'static Mutex<HashMap<u32, PendingCas>> {
    static T: OnceLock<Mutex<HashMap<u32, PendingCas>>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(HashMap::new()))
}
static NEXT_HANDLE: AtomicU32 = AtomicU32::new(1);

fn cas_result(outcome: std::result::Result<CasOutcome, FsError>) -> OpResult {
    match outcome {
        Ok(CasOutcome::Matched) => OpResult {
            matched: Some(true),
            ..Default::default()
        },
        Ok(CasOutcome::NotMatched) => OpResult {
            matched: Some(false),
            ..Default::default()
        },
        Ok(CasOutcome::MatchedWithoutPayload) => OpResult {
            matched: Some(true),
            no_payload: Some(true),
            ..Default::default()
        },
        Ok(CasOutcome::NeedsTimestamps(p)) => {
            let handle = NEXT_HANDLE.fetch_add(1, Ordering::Relaxed);
            let pending = utf16_list(p.pending.clone());
            pending_table()
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(handle, p);
            OpResult {
                handle: Some(handle),
                pending: Some(pending),
                ..Default::default()
            }
        }
        Err(e) => failed(&e),
    }
}

fn action(payload: Option<String>, remove: bool) -> Action {
    if remove {
        Action::Remove
    } else {
        Action::Write(payload.map(String::into_bytes))
    }
}

/// CAS core (writeEntryIfUnchanged / removeEntryIfUnchanged): `expected` is read on this thread
/// with isDeepStrictEqual's distinctions; the lock, read, comparison and write happen on a
/// worker thread.
#[napi(
    ts_args_type = "file: string, expected: unknown, payload: string | null, remove: boolean, durable: boolean",
    ts_return_type = "Promise<OpResult>"
)]
pub fn store_cas<'e>(
    env: &'e Env,
    file: String,
    expected: Unknown,
    payload: Option<String>,
    remove: bool,
    durable: bool,
) -> Result<PromiseRaw<'e, OpResult>> {
    let js = Js::new(env)?;
    let exp = to_exp(&js, expected.raw())?;
    let known = expected_timestamps(&js, &exp)?;
    let opts = store_opts(env, durable)?;
    let act = action(payload, remove);
    spawn(env, move || {
        let lookup = |s: &[u16]| known.get(s).copied();
        cas_result(core::cas(&file, &exp, &lookup, act, opts))
    })
}

/// Finish a CAS that `storeCas` suspended (its `expected` was undefined and the file's
/// timestamps needed V8): `valid` says whether all of them were finite.
#[napi(ts_return_type = "Promise<OpResult>")]
pub fn store_cas_finish<'e>(
    env: &'e Env,
    handle: u32,
    valid: bool,
) -> Result<PromiseRaw<'e, OpResult>> {
    let p = pending_table()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(&handle);
    spawn(env, move || match p {
        Some(p) => cas_result(core::cas_finish(p, valid)),
        None => OpResult {
            matched: Some(false),
            ..Default::default()
        },
    })
}

/// Sync CAS core (writeEntryIfUnchangedSync): entirely on the calling thread, usable inside
/// `process.on("exit")`. Returns 0 (no match), 1 (written), 2 (matched but `payload` is null).
#[napi(ts_args_type = "file: string, expected: unknown, payload: string | null, durable: boolean")]
pub fn store_cas_sync(
    env: &Env,
    file: String,
    expected: Unknown,
    payload: Option<String>,
    durable: bool,
) -> Result<u32> {
    let js = Js::new(env)?;
    let exp = to_exp(&js, expected.raw())?;
    let mut lock = LockOptions::store_sync();
    lock.owner = owner(env)?;
    // On the JS thread V8 can be asked directly about any timestamp.
    let known = |s: &[u16]| js.date_parse_finite(s).ok();
    match core::cas(
        &file,
        &exp,
        &known,
        action(payload, false),
        WriteOptions { lock, durable },
    ) {
        Ok(CasOutcome::Matched) => Ok(1),
        Ok(CasOutcome::MatchedWithoutPayload) => Ok(2),
        Ok(CasOutcome::NotMatched) => Ok(0),
        Ok(CasOutcome::NeedsTimestamps(p)) => {
            // Unreachable with a V8-backed `known`; finish conservatively as "valid".
            let _ = p.guard.release();
            Ok(0)
        }
        Err(e) => throw_fs(env, &e),
    }
}

/// W-B2 maintenance: remove `<entry>.json.<pid>.<uuid>.tmp` files left in the matrix directory
/// by writers that died (dead pid) at least `minAgeMs` ago (default 5 minutes). Resolves the
/// removed paths. Never runs on its own.
#[napi(
    ts_args_type = "agentDir: string, minAgeMs?: number",
    ts_return_type = "Promise<string[]>"
)]
pub fn sweep_orphan_temp_files<'e>(
    env: &'e Env,
    agent_dir: String,
    min_age_ms: Option<f64>,
) -> Result<PromiseRaw<'e, Vec<String>>> {
    let age =
        std::time::Duration::from_millis(min_age_ms.unwrap_or(300_000.0).clamp(0.0, 1e15) as u64);
    env.spawn_future(async move {
        Ok(
            tokio::task::spawn_blocking(move || core::sweep_orphan_temp_files(&agent_dir, age))
                .await
                .unwrap_or_default(),
        )
    })
}

// ---- atomic-file ------------------------------------------------------------------------------

fn content_bytes(env: &Env, v: &Unknown) -> Result<Vec<u8>> {
    if type_of(v)? == ValueType::String {
        return Ok(to_js_string(v).unwrap_or_default().into_bytes());
    }
    if v.is_buffer()? || v.is_typedarray()? {
        // SAFETY: checked to be a Buffer / typed array just above.
        let view: Uint8Array = unsafe { v.cast()? };
        return Ok(view.to_vec());
    }
    type_error(
        env,
        "The \"content\" argument must be a string, Buffer or Uint8Array",
    )
}

/// writeFileAtomic core.
#[napi(
    ts_args_type = "filePath: string, content: string | Uint8Array, mode: number, durable: boolean",
    ts_return_type = "Promise<OpResult>"
)]
pub fn atomic_write<'e>(
    env: &'e Env,
    file: Unknown,
    content: Unknown,
    mode: u32,
    durable: bool,
) -> Result<PromiseRaw<'e, OpResult>> {
    let file = path_arg(env, &file, "path")?;
    let bytes = content_bytes(env, &content)?;
    spawn(env, move || {
        match crate::atomic_file::write_atomic(&file, &bytes, mode, durable) {
            Ok(()) => OpResult::default(),
            Err(e) => failed(&e),
        }
    })
}

/// writeFileAtomicSync core (throws Node-shaped errors).
#[napi(
    ts_args_type = "filePath: string, content: string | Uint8Array, mode: number, durable: boolean"
)]
pub fn atomic_write_sync(
    env: &Env,
    file: String,
    content: Unknown,
    mode: u32,
    durable: bool,
) -> Result<()> {
    let bytes = content_bytes(env, &content)?;
    match crate::atomic_file::write_atomic(&file, &bytes, mode, durable) {
        Ok(()) => Ok(()),
        Err(e) => throw_fs(env, &e),
    }
}

/// A lock held for a `withFileLock(Sync)` callback. It belongs to the JS environment that took
/// it: `release()` gives it back, and so does the environment's teardown or the object's
/// collection (Drop) — there is no global handle table that could outlive the environment.
#[napi]
pub struct HeldLock {
    guard: Option<LockGuard>,
}

#[napi]
impl HeldLock {
    /// Release the lock. Returns false when it had been taken over while held (proper-lockfile's
    /// ECOMPROMISED; nothing is removed then). Releasing twice is a no-op that returns true.
    #[napi]
    pub fn release(&mut self) -> bool {
        self.guard.take().is_none_or(|g| g.release().is_ok())
    }
}

fn callback_lock_options(
    env: &Env,
    retries: Option<f64>,
    stale: Option<f64>,
    realpath: Option<bool>,
    sync: bool,
) -> Result<LockOptions> {
    let retries = retries
        .filter(|r| r.is_finite() && *r >= 0.0)
        .map_or(10, |r| r.min(1e6) as u32);
    Ok(LockOptions {
        retry: if sync {
            Retry::Sync { retries }
        } else {
            Retry::Async { retries }
        },
        stale_ms: lockfile::normalize_stale(stale),
        realpath: realpath.unwrap_or(false),
        kind: HolderKind::Callback,
        owner: owner(env)?,
    })
}

/// withFileLock core: acquire (off the JS thread), resolving the held lock or the error.
#[napi(
    ts_args_type = "filePath: string, retries?: number, stale?: number, realpath?: boolean",
    ts_return_type = "Promise<HeldLock | ErrorInfo>"
)]
pub fn lock_acquire<'e>(
    env: &'e Env,
    file: Unknown,
    retries: Option<f64>,
    stale: Option<f64>,
    realpath: Option<bool>,
) -> Result<PromiseRaw<'e, Either<HeldLock, ErrorInfo>>> {
    let file = path_arg(env, &file, "path")?;
    let opts = callback_lock_options(env, retries, stale, realpath, false)?;
    env.spawn_future(async move {
        let outcome = std::panic::catch_unwind(|| {
            tokio::task::block_in_place(|| lockfile::acquire(&file, opts))
        });
        Ok(match outcome {
            Ok(Ok(g)) => Either::A(HeldLock { guard: Some(g) }),
            Ok(Err(e)) => Either::B(ErrorInfo::from(&e)),
            Err(_) => Either::B(internal_failure()),
        })
    })
}

/// withFileLockSync core: acquire on this thread (blocking sleeps between attempts).
#[napi(ts_args_type = "filePath: string, retries?: number, stale?: number, realpath?: boolean")]
pub fn lock_acquire_sync(
    env: &Env,
    file: Unknown,
    retries: Option<f64>,
    stale: Option<f64>,
    realpath: Option<bool>,
) -> Result<HeldLock> {
    let file = path_arg(env, &file, "path")?;
    let opts = callback_lock_options(env, retries, stale, realpath, true)?;
    match lockfile::acquire(&file, opts) {
        Ok(g) => Ok(HeldLock { guard: Some(g) }),
        Err(e) => throw_fs(env, &e),
    }
}

/// At this environment's `exit` event: remove the locks still held for callbacks that can no
/// longer finish (registered on `process.on("exit")`; later exit listeners may still lock).
#[napi]
pub fn release_locks_at_exit(env: &Env) -> Result<()> {
    lockfile::release_callback_locks(owner(env)?);
    Ok(())
}

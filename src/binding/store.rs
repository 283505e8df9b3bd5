//! N-API surface of `pi-native/process-matrix-store` and `pi-native/atomic-file`: the
//! building blocks the JS wrappers in `lib/native.js` compose into the exact public contract.
//! Each operation returns a typed result; failures are thrown (sync) or rejected (async) as the
//! errors the environment's factory builds ([`super::failure`]). Async operations run off the
//! JS thread with one hop ([`run`]).

use std::collections::HashMap;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use super::expected::{expected_timestamps, to_exp, Js};
use super::failure::{internal, js_error, near, run, settle};
use crate::lanes::{self, Lane};
use crate::store::entry::Expected;
use crate::store::lock::{self, FsRule, HolderKind, LockGuard, LockOptions, Retry};
use crate::store::{self as core, Action, CasOutcome, PendingCas, WriteOptions};

use super::env_owner as owner;

// ---- results ----------------------------------------------------------------------------------

fn utf16_list(v: Vec<Vec<u16>>) -> Vec<Utf16String> {
    v.into_iter().map(Utf16String::from).collect()
}

// ---- store operations (building blocks) -------------------------------------------------------

/// `base` for the calling environment: owned by it, with the lock settings its `process.env`
/// asked for ([`set_lock_environment`]).
fn for_env(env: &Env, base: LockOptions) -> Result<LockOptions> {
    let d = super::env_data(env)?;
    Ok(LockOptions {
        owner: d.owner,
        fs: d.lock_fs,
        attribute_cache_ms: d.attribute_cache_ms,
        ..base
    })
}

/// The lock policy of an async store operation (B17), owned by the calling environment.
fn store_lock(env: &Env) -> Result<LockOptions> {
    for_env(env, LockOptions::store_async())
}

/// The lock settings of this environment, as lib/native.js read them from `process.env` at a
/// locking call (SPEC G10): `fs` 0 = by the file system, 1 = local rule, 2 = network rule
/// (`PI_NATIVE_LOCK_FS`); the attribute-cache bound of the network rule in ms
/// (`PI_NATIVE_ATTRIBUTE_CACHE_MS`).
#[napi(catch_unwind)]
pub fn set_lock_environment(env: &Env, fs: u32, attribute_cache_ms: f64) -> Result<()> {
    let d = super::env_data(env)?;
    d.lock_fs = match fs {
        1 => FsRule::Local,
        2 => FsRule::Network,
        _ => FsRule::Auto,
    };
    d.attribute_cache_ms = cache_ms(attribute_cache_ms);
    Ok(())
}

/// A bound in ms from JS: NaN, negative or absent values were refused there; clamp the rest.
fn cache_ms(ms: f64) -> u64 {
    if ms.is_finite() && ms >= 0.0 {
        ms.min(1e12) as u64
    } else {
        lock::DEFAULT_ATTRIBUTE_CACHE_MS
    }
}

fn store_opts(env: &Env, durable: bool) -> Result<WriteOptions> {
    Ok(WriteOptions {
        lock: store_lock(env)?,
        durable,
    })
}

/// Options of a sync store operation (the sync CAS: 2 attempts, on the calling thread).
fn store_sync_opts(env: &Env, durable: bool) -> Result<WriteOptions> {
    Ok(WriteOptions {
        lock: for_env(env, LockOptions::store_sync())?,
        durable,
    })
}

/// An accepted entry file: its text, and the timestamps only V8 can judge (valid iff all finite).
#[napi(object)]
pub struct EntryText {
    pub text: String,
    pub pending: Vec<Utf16String>,
}

fn entry_text(r: core::ReadOut) -> EntryText {
    EntryText {
        text: r.text,
        pending: utf16_list(r.pending),
    }
}

/// readEntry core: the accepted file's text, or null when absent, unreadable or invalid.
/// Takes no lock: on libuv's pool in a local folder, on the folder's lane elsewhere ([`near`]:
/// a network folder's coherent read may retry for seconds).
#[napi(catch_unwind, ts_return_type = "Promise<EntryText | null>")]
pub fn store_read<'e>(env: &'e Env, file: String) -> Result<PromiseRaw<'e, Option<EntryText>>> {
    near(
        env,
        &file.clone(),
        move || Ok(core::read_entry_on_pool(&file)),
        |_, r| Ok(r.map(entry_text)),
    )
}

/// readEntry core on the JS thread, when the kernel can read the file without waiting (Linux,
/// a local file system, everything cached): what `storeRead` would resolve, or undefined when
/// the read must go to the pool (`storeRead`).
#[napi(catch_unwind, ts_return_type = "EntryText | null | undefined")]
pub fn store_read_now(file: String) -> Either<Option<EntryText>, Undefined> {
    match core::read_entry_now(&file) {
        Some(r) => Either::A(r.map(entry_text)),
        None => Either::B(()),
    }
}

/// One piece of a listing: consecutive accepted entries, in order.
#[napi(object)]
pub struct ListChunk {
    /// `[text, …]` of the entries of this chunk.
    pub json: String,
    /// Per entry of this chunk, the timestamps only V8 can judge; null when no entry has any.
    pub pending: Option<Vec<Vec<Utf16String>>>,
    /// Per entry of this chunk, its file's name without `.json` (asked for by `storeList`'s
    /// `names`: hardened mode's id hygiene), else null.
    pub ids: Option<Vec<String>>,
}

/// The result of `storeList`: the listing cut into chunks for `JSON.parse` a piece at a time.
#[napi]
pub struct ListChunks {
    chunks: std::collections::VecDeque<Piece>,
}

/// A [`ListChunk`] before it crosses: the JSON text, the pending timestamps per entry, and the
/// file names when asked for.
type Piece = (String, Vec<Vec<Vec<u16>>>, Option<Vec<String>>);

#[napi]
impl ListChunks {
    /// The next chunk, or null when all were taken.
    #[napi(catch_unwind)]
    pub fn take_chunk(&mut self) -> Option<ListChunk> {
        let (json, pending, ids) = self.chunks.pop_front()?;
        let pending = if pending.iter().all(Vec::is_empty) {
            None
        } else {
            Some(pending.into_iter().map(utf16_list).collect())
        };
        Some(ListChunk { json, pending, ids })
    }
}

/// Group the accepted texts into JSON arrays of at most [`super::PIECE_BYTES`] each (unless one
/// text is larger): V8 parses one in well under a millisecond, so the JS side can hand the event
/// loop back between chunks (a 20,000-entry list is ~11 MB of text, over 100 ms of
/// `JSON.parse` in one piece).
fn list_chunks(entries: Vec<(String, core::ReadOut)>, names: bool) -> ListChunks {
    let mut pending: Vec<Vec<Vec<u16>>> = Vec::with_capacity(entries.len());
    let mut ids: Vec<String> = Vec::new();
    let texts = super::pieces(
        entries,
        |(_, e)| e.text.len(),
        ("[", ",", "]"),
        |json, (name, e)| {
            json.push_str(&e.text);
            pending.push(e.pending);
            if names {
                let stem = name.strip_suffix(".json").unwrap_or(&name);
                ids.push(stem.to_string());
            }
        },
    );
    let mut pending = pending.into_iter();
    let mut ids = ids.into_iter();
    let chunks = texts
        .into_iter()
        .map(|(json, n)| {
            let p = pending.by_ref().take(n).collect();
            let i = names.then(|| ids.by_ref().take(n).collect());
            (json, p, i)
        })
        .collect();
    ListChunks { chunks }
}

/// listEntries core: reads, parses and validates off the JS thread; resolves the accepted
/// entries as [`ListChunks`], with their file names when `names` asks.
#[napi(catch_unwind, ts_return_type = "Promise<ListChunks>")]
pub fn store_list<'e>(
    env: &'e Env,
    agent_dir: String,
    names: bool,
) -> Result<PromiseRaw<'e, ListChunks>> {
    let lane = lanes::of_folder(std::path::Path::new(&core::process_matrix_dir(&agent_dir)));
    run(
        env,
        lane,
        move || Ok(list_chunks(core::list_entries(&agent_dir), names)),
        |_, chunks| Ok(chunks),
    )
}

/// writeEntry core: mkdir -p, lock, write `payload` (or only lock/unlock when null), release.
/// Without `wait` (the fast path, ARCHITECTURE.md) one lock attempt on libuv's pool: resolves
/// null, having done nothing, when the lock was not free at once, and `lib/native.js` then
/// calls again with `wait`.
#[napi(catch_unwind, ts_return_type = "Promise<void | null>")]
pub fn store_write<'e>(
    env: &'e Env,
    file: String,
    payload: Option<String>,
    durable: bool,
    wait: bool,
) -> Result<PromiseRaw<'e, Option<()>>> {
    under_entry_lock(
        env,
        file,
        wait,
        move |guard, file| {
            core::write_entry(guard, file, payload.as_deref().map(str::as_bytes), durable)
        },
        |_, done| Ok(done),
    )
}

/// removeEntry core; `wait` as in [`store_write`].
#[napi(catch_unwind, ts_return_type = "Promise<void | null>")]
pub fn store_remove<'e>(
    env: &'e Env,
    file: String,
    wait: bool,
) -> Result<PromiseRaw<'e, Option<()>>> {
    under_entry_lock(env, file, wait, core::remove_entry, |_, done| Ok(done))
}

/// Run `op` off the JS thread under `file`'s entry lock (the calling environment's async
/// policy; `wait` as in [`store_write`]); `to_js` converts its outcome, None when the fast
/// path found the lock busy. The fast path (one attempt, no waiting) runs on libuv's pool, and
/// only in a folder known to be local; everything else is the async path: the acquisition's
/// waits are timers, its calls and `op` run on the folder's lane ([`crate::lanes`]).
fn under_entry_lock<'e, T: Send + 'static, V: ToNapiValue + TypeName + 'static>(
    env: &'e Env,
    file: String,
    wait: bool,
    op: impl FnOnce(LockGuard, &str) -> std::result::Result<T, crate::fserror::FsError> + Send + 'static,
    to_js: fn(&Env, Option<T>) -> Result<V>,
) -> Result<PromiseRaw<'e, V>> {
    let lock = store_lock(env)?;
    let in_flight = lock::InFlight::start(&file);
    if !wait && lanes::of_file(&file) == Lane::Local {
        return super::failure::on_pool(
            env,
            move || {
                let _in_flight = in_flight;
                core::with_entry_lock(&file, lock, false, |guard| op(guard, &file))
            },
            to_js,
        );
    }
    settle(
        env,
        async move {
            let _in_flight = in_flight;
            let guard = lock::drive::acquire_async(file.clone(), core::entry_lock(lock)).await?;
            let lane = lanes::of_file(&file);
            lanes::run(lane, move || op(guard, &file))
                .await
                .unwrap_or_else(|| Err(internal()))
                .map(Some)
        },
        to_js,
    )
}

/// A CAS suspended under its lock while the JS thread decides whether it matched: V8 judges
/// the file's timestamps (`expected` was undefined), or JS compares the whole file
/// (`storeCasJudged`). `finish` / `finishSync` complete it; `release` (or dropping it: collection,
/// the environment's teardown) gives the lock back without acting.
#[napi]
pub struct SuspendedCas {
    pending: Option<PendingCas>,
}

impl SuspendedCas {
    fn new(p: PendingCas) -> SuspendedCas {
        SuspendedCas { pending: Some(p) }
    }
}

#[napi]
impl SuspendedCas {
    /// The file's text when it parsed and validated up to `timestamps`, else null (absent or
    /// invalid; always null for a timestamp suspension of `storeCas`, and once finished).
    #[napi(catch_unwind, getter)]
    pub fn text(&self) -> Option<String> {
        self.pending.as_ref().and_then(|p| p.text.clone())
    }

    /// The timestamps to judge with `Date.parse` (the file is valid iff all are finite; empty
    /// once finished).
    #[napi(catch_unwind, getter)]
    pub fn timestamps(&self) -> Vec<Utf16String> {
        self.pending
            .as_ref()
            .map_or_else(Vec::new, |p| utf16_list(p.pending.clone()))
    }

    /// Finish with the verdict: act (write or remove) iff `matched`, off the JS thread; resolves
    /// whether it did. A second call resolves false.
    #[napi(catch_unwind, ts_return_type = "Promise<boolean>")]
    pub fn finish<'e>(&mut self, env: &'e Env, matched: bool) -> Result<PromiseRaw<'e, bool>> {
        let p = self.pending.take();
        let lane = p.as_ref().map_or(Lane::Local, |p| lanes::of_file(&p.file));
        run(
            env,
            lane,
            move || match p {
                Some(p) => core::cas_finish(p, matched).map(is_match),
                None => Ok(false),
            },
            |_, m| Ok(m),
        )
    }

    /// `finish` on the calling thread (the sync CAS).
    #[napi(catch_unwind)]
    pub fn finish_sync(&mut self, env: &Env, matched: bool) -> Result<bool> {
        match self.pending.take() {
            Some(p) => core::cas_finish(p, matched)
                .map(is_match)
                .map_err(|e| js_error(env, &e)),
            None => Ok(false),
        }
    }

    /// Give the lock back without acting (the JS comparison threw).
    #[napi(catch_unwind)]
    pub fn release(&mut self) {
        if let Some(p) = self.pending.take() {
            let _ = p.guard.release();
        }
    }
}

/// Whether a CAS matched (it then wrote or removed, or found nothing to write: the wrapper
/// throws the serialization error in that case, since it knows the payload was null).
fn is_match(o: CasOutcome) -> bool {
    matches!(o, CasOutcome::Matched | CasOutcome::MatchedWithoutPayload)
}

fn action(payload: Option<String>, remove: bool) -> Action {
    if remove {
        Action::Remove
    } else {
        Action::Write(payload.map(String::into_bytes))
    }
}

/// `expected` as the CAS compares it: the JS side's JSON text when it proved the value plain
/// JSON data (compared, or parsed, off the JS thread), else read here with every
/// isDeepStrictEqual distinction.
fn expected_of(env: &Env, expected: Unknown, text: Option<String>) -> Result<Expected> {
    Ok(match text {
        Some(t) => Expected::Text(t),
        None => Expected::Value(to_exp(&Js::new(env)?, expected)?),
    })
}

/// CAS core (writeEntryIfUnchanged / removeEntryIfUnchanged): the lock, read, comparison and
/// write happen off the JS thread. `expectedText` is the fast form of `expected` (see
/// [`expected_of`]); `validTimestamps` are the expected entry's timestamps V8 accepts (a file can
/// only equal it if its timestamps are those). Resolves whether it matched, or a
/// [`SuspendedCas`]; without `wait` (the fast path, as [`store_write`]) null, having done nothing,
/// when the lock was not free at once. Without `wait`, returns `false` itself, with no promise,
/// when the JS thread could tell without waiting that it does not match
/// ([`core::cas_mismatch_now`]).
#[napi(
    catch_unwind,
    ts_args_type = "file: string, expected: unknown, expectedText: string | null, validTimestamps: string[], payload: string | null, remove: boolean, durable: boolean, wait: boolean",
    ts_return_type = "false | Promise<boolean | SuspendedCas | null>"
)]
#[allow(clippy::too_many_arguments)]
pub fn store_cas<'e>(
    env: &'e Env,
    file: String,
    expected: Unknown,
    expected_text: Option<String>,
    valid_timestamps: Vec<Utf16String>,
    payload: Option<String>,
    remove: bool,
    durable: bool,
    wait: bool,
) -> Result<Either<bool, PromiseRaw<'e, CasResult>>> {
    let (exp, known) = cas_inputs(env, expected, expected_text, valid_timestamps)?;
    if !wait && core::cas_mismatch_now(&file, &exp, &|s: &[u16]| known.get(s).copied()) {
        return Ok(Either::A(false));
    }
    let act = action(payload, remove);
    under_entry_lock(
        env,
        file,
        wait,
        move |guard, file| {
            let lookup = |s: &[u16]| known.get(s).copied();
            core::cas_locked(guard, file, &exp, &lookup, act, durable)
        },
        |_, outcome| Ok(outcome.map(cas_to_js)),
    )
    .map(Either::B)
}

/// What an async CAS resolves: whether it matched, or the suspension V8 must finish; null when
/// the fast path found the lock busy.
type CasResult = Option<Either<bool, SuspendedCas>>;

/// `expected` as the CAS compares it, and the timestamps V8 has already judged.
fn cas_inputs(
    env: &Env,
    expected: Unknown,
    expected_text: Option<String>,
    valid_timestamps: Vec<Utf16String>,
) -> Result<(Expected, HashMap<Vec<u16>, bool>)> {
    let exp = expected_of(env, expected, expected_text)?;
    let known = match &exp {
        // Read on this thread: V8 judges its timestamps now, from the value read.
        Expected::Value(e) => expected_timestamps(&Js::new(env)?, e)?,
        Expected::Text(_) => valid_timestamps
            .iter()
            .map(|s| (s.to_vec(), true))
            .collect(),
    };
    Ok((exp, known))
}

/// The JS value of a CAS outcome: whether it matched, or the suspension V8 must finish.
fn cas_to_js(outcome: CasOutcome) -> Either<bool, SuspendedCas> {
    match outcome {
        CasOutcome::NeedsTimestamps(p) => Either::B(SuspendedCas::new(p)),
        o => Either::A(is_match(o)),
    }
}

/// Sync CAS core (writeEntryIfUnchangedSync): entirely on the calling thread, usable inside
/// `process.on("exit")`. Returns whether it matched.
#[napi(
    catch_unwind,
    ts_args_type = "file: string, expected: unknown, expectedText: string | null, payload: string | null, durable: boolean"
)]
pub fn store_cas_sync(
    env: &Env,
    file: String,
    expected: Unknown,
    expected_text: Option<String>,
    payload: Option<String>,
    durable: bool,
) -> Result<bool> {
    let exp = expected_of(env, expected, expected_text)?;
    let js = Js::new(env)?;
    let opts = store_sync_opts(env, durable)?;
    // On the JS thread V8 can be asked directly about any timestamp, so nothing is suspended.
    let known = |s: &[u16]| js.date_parse_finite(s).ok();
    let outcome = core::cas(&file, &exp, &known, action(payload, false), opts);
    match outcome {
        Ok(CasOutcome::NeedsTimestamps(p)) => {
            // Unreachable with a V8-backed `known`; finish conservatively as "valid".
            drop(p);
            Ok(false)
        }
        Ok(o) => Ok(is_match(o)),
        Err(e) => Err(js_error(env, &e)),
    }
}

/// CAS whose comparison JS makes (SPEC B20's exact route, for an `expected` whose reading would
/// run JS code: Proxies, accessors): lock and read off the JS thread, then resolve a
/// [`SuspendedCas`] holding the lock and the file's text.
#[napi(
    catch_unwind,
    ts_args_type = "file: string, payload: string | null, remove: boolean, durable: boolean",
    ts_return_type = "Promise<SuspendedCas>"
)]
pub fn store_cas_judged<'e>(
    env: &'e Env,
    file: String,
    payload: Option<String>,
    remove: bool,
    durable: bool,
) -> Result<PromiseRaw<'e, SuspendedCas>> {
    let opts = store_opts(env, durable)?;
    let act = action(payload, remove);
    let in_flight = lock::InFlight::start(&file);
    settle(
        env,
        async move {
            let _in_flight = in_flight;
            let guard =
                lock::drive::acquire_async(file.clone(), core::judged_lock(opts.lock)).await?;
            let lane = lanes::of_file(&file);
            lanes::run(lane, move || {
                core::cas_judged_locked(guard, &file, act, opts.durable)
            })
            .await
            .unwrap_or_else(|| Err(internal()))
        },
        |_, p| Ok(SuspendedCas::new(p)),
    )
}

/// `storeCasJudged` on the calling thread (the sync CAS, usable inside `process.on("exit")`).
#[napi(
    catch_unwind,
    ts_args_type = "file: string, payload: string | null, durable: boolean"
)]
pub fn store_cas_judged_sync(
    env: &Env,
    file: String,
    payload: Option<String>,
    durable: bool,
) -> Result<SuspendedCas> {
    let opts = store_sync_opts(env, durable)?;
    core::cas_judged(&file, action(payload, false), opts)
        .map(SuspendedCas::new)
        .map_err(|e| js_error(env, &e))
}

/// W-B2 maintenance: remove `<entry>.json.<pid>.<uuid>.tmp` files left in the matrix directory
/// by writers that died (dead pid) at least `minAgeMs` ago (default 5 minutes), and empty
/// private lock directories `<entry>.json.lock.<uuid>` (network folders) at least that old and
/// at least 5 minutes old. Resolves the removed paths. Never runs on its own.
#[napi(
    catch_unwind,
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
    let lane = lanes::of_folder(std::path::Path::new(&core::process_matrix_dir(&agent_dir)));
    run(
        env,
        lane,
        move || Ok(core::sweep_orphan_temp_files(&agent_dir, age)),
        |_, v| Ok(v),
    )
}

// ---- atomic-file ------------------------------------------------------------------------------

/// The bytes to write: a string's UTF-8 (lone surrogates as U+FFFD, as Node's fs writes them) or
/// a byte view (the contract layer presents every ArrayBufferView as a Uint8Array).
fn content_bytes(content: Either<String, Uint8Array>) -> Vec<u8> {
    match content {
        Either::A(s) => s.into_bytes(),
        Either::B(view) => view.to_vec(),
    }
}

/// writeFileAtomic core.
#[napi(
    catch_unwind,
    ts_args_type = "filePath: string, content: string | Uint8Array, mode: number, durable: boolean",
    ts_return_type = "Promise<void>"
)]
pub fn atomic_write<'e>(
    env: &'e Env,
    file: String,
    content: Either<String, Uint8Array>,
    mode: u32,
    durable: bool,
) -> Result<PromiseRaw<'e, ()>> {
    let bytes = content_bytes(content);
    run(
        env,
        lanes::of_file(&file),
        move || crate::store::atomic_file::write_atomic(&file, &bytes, mode, durable),
        |_, ()| Ok(()),
    )
}

/// writeFileAtomicSync core (throws Node-shaped errors).
#[napi(
    catch_unwind,
    ts_args_type = "filePath: string, content: string | Uint8Array, mode: number, durable: boolean"
)]
pub fn atomic_write_sync(
    env: &Env,
    file: String,
    content: Either<String, Uint8Array>,
    mode: u32,
    durable: bool,
) -> Result<()> {
    let bytes = content_bytes(content);
    crate::store::atomic_file::write_atomic(&file, &bytes, mode, durable)
        .map_err(|e| js_error(env, &e))
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
    #[napi(catch_unwind)]
    pub fn release(&mut self) -> bool {
        self.guard.take().is_none_or(|g| g.release().is_ok())
    }

    /// `release` off the JS thread, for the async `withFileLock`: on libuv's pool as Node's own
    /// `fs.rmdir` in a local folder, on the folder's lane elsewhere (an SMB client's EIO window
    /// may hold the release for seconds). Resolves what `release` returns.
    #[napi(catch_unwind, ts_return_type = "Promise<boolean>")]
    pub fn release_async<'e>(&mut self, env: &'e Env) -> Result<PromiseRaw<'e, bool>> {
        let guard = self.guard.take();
        let file = guard
            .as_ref()
            .map_or_else(String::new, |g| g.file().to_string());
        near(
            env,
            &file,
            move || Ok(guard.is_none_or(|g| g.release().is_ok())),
            |_, released| Ok(released),
        )
    }
}

fn callback_lock_options(
    env: &Env,
    retries: Option<f64>,
    stale: Option<f64>,
    attribute_cache_ms: Option<f64>,
    sync: bool,
) -> Result<LockOptions> {
    let retries = retries
        .filter(|r| r.is_finite() && *r >= 0.0)
        .map_or(10, |r| r.min(1e6) as u32);
    let mut opts = for_env(
        env,
        LockOptions {
            retry: if sync {
                Retry::Sync { retries }
            } else {
                Retry::Async { retries }
            },
            stale_ms: lock::normalize_stale(stale),
            kind: HolderKind::Callback,
            // B17a's mkdir of the parent happens before (lib/native.js), with its own errors.
            create_parent: false,
            js_verdict: false,
            ..LockOptions::store_async()
        },
    )?;
    if let Some(ms) = attribute_cache_ms {
        opts.attribute_cache_ms = cache_ms(ms);
    }
    Ok(opts)
}

/// withFileLock core: acquire (off the JS thread), resolving the held lock or the error.
#[napi(
    catch_unwind,
    ts_args_type = "filePath: string, retries?: number, stale?: number, attributeCacheMs?: number",
    ts_return_type = "Promise<HeldLock>"
)]
pub fn lock_acquire<'e>(
    env: &'e Env,
    file: String,
    retries: Option<f64>,
    stale: Option<f64>,
    attribute_cache_ms: Option<f64>,
) -> Result<PromiseRaw<'e, HeldLock>> {
    let opts = callback_lock_options(env, retries, stale, attribute_cache_ms, false)?;
    let in_flight = lock::InFlight::start(&file);
    settle(
        env,
        async move {
            let _in_flight = in_flight;
            lock::drive::acquire_async(file, opts).await
        },
        |_, g| Ok(HeldLock { guard: Some(g) }),
    )
}

/// withFileLockSync core: acquire on this thread (blocking sleeps between attempts).
#[napi(
    catch_unwind,
    ts_args_type = "filePath: string, retries?: number, stale?: number, attributeCacheMs?: number"
)]
pub fn lock_acquire_sync(
    env: &Env,
    file: String,
    retries: Option<f64>,
    stale: Option<f64>,
    attribute_cache_ms: Option<f64>,
) -> Result<HeldLock> {
    let opts = callback_lock_options(env, retries, stale, attribute_cache_ms, true)?;
    match lock::acquire(&file, opts) {
        Ok(g) => Ok(HeldLock { guard: Some(g) }),
        Err(e) => Err(js_error(env, &e)),
    }
}

/// At this environment's `exit` event: remove the locks still held for callbacks that can no
/// longer finish (registered on `process.on("exit")`; later exit listeners may still lock).
#[napi(catch_unwind)]
pub fn release_locks_at_exit(env: &Env) -> Result<()> {
    lock::release_callback_locks(owner(env)?);
    Ok(())
}

/// Diagnostic: folders this process watches right now for lock removals (only while some
/// acquisition waits for a lock in them; one inotify instance serves them all on Linux).
#[napi(catch_unwind)]
pub fn lock_watched_folders() -> u32 {
    crate::store::lock_watch::watched() as u32
}

/// Diagnostic: lock acquisition attempts this process made early because the held lock's
/// directory was seen removed (notified handoff) rather than at the next scheduled retry.
#[napi(catch_unwind)]
pub fn lock_notified_attempts() -> f64 {
    lock::notified_attempts() as f64
}

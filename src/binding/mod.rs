//! The N-API layer: converts JS values into the core's Rust types and results back, and hands
//! failures to the JS contract layer ([`failure`]). No capability logic lives here.

pub mod events;
pub mod expected;
pub mod failure;
pub mod liveness;
pub mod session;
pub mod settle;
pub mod store;

use std::sync::atomic::{AtomicU64, Ordering};

use napi::Env;

use crate::store::lock::{FsRule, DEFAULT_ATTRIBUTE_CACHE_MS};

static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);

/// What this addon keeps per JS environment (main thread or worker), as the environment's
/// instance data: it goes with the environment, so another environment made later on the same
/// thread (an embedder reloading, as Electron renderers do) starts afresh.
pub struct EnvData {
    /// The environment's id: locks and calls it owns are released and stopped at its teardown.
    pub owner: u64,
    /// The lock settings its `process.env` asked for (lib/native.js, `syncLockEnvironment`).
    pub lock_fs: FsRule,
    pub attribute_cache_ms: u64,
    /// The function that turns a native failure into the JS error (`setErrorFactory`).
    pub error_factory:
        Option<napi::bindgen_prelude::FunctionRef<failure::Failure, napi::Unknown<'static>>>,
}

/// The calling environment's [`EnvData`], made on first use: the teardown hook is registered
/// first and the data set only then, so no environment has an owner that nothing cleans up.
pub fn env_data(env: &Env) -> napi::Result<&'static mut EnvData> {
    if let Some(d) = env.get_instance_data::<EnvData>()? {
        return Ok(d);
    }
    let owner = NEXT_OWNER.fetch_add(1, Ordering::Relaxed);
    env.add_env_cleanup_hook(owner, teardown)?;
    let data = EnvData {
        owner,
        lock_fs: FsRule::Auto,
        attribute_cache_ms: DEFAULT_ATTRIBUTE_CACHE_MS,
        error_factory: None,
    };
    env.set_instance_data(data, (), |_| {})?;
    env.get_instance_data::<EnvData>()?
        .ok_or_else(|| napi::Error::from_reason("pi-native: instance data not kept"))
}

/// The id of the calling JS environment ([`EnvData::owner`]).
pub fn env_owner(env: &Env) -> napi::Result<u64> {
    env_data(env).map(|d| d.owner)
}

/// At the environment's teardown: the locks it still holds are removed, its recovery calls
/// stopped and its supervision watches ended (resources belong to the environment that took
/// them).
fn teardown(owner: u64) {
    crate::store::lock::release_all(owner);
    session::cancel_calls_of(owner);
    events::teardown(owner);
    settle::forget_environment();
}

/// The most bytes one piece of a large result handed to the JS thread a piece at a time
/// (`ListChunks`, `ScanChunks`) holds, unless a single item is larger. Made on a pool thread,
/// each piece is freed on the JS thread once it became a JS string, into the pool thread's
/// malloc arena; glibc consolidates an arena's fast bins when a chunk of 64 KiB or more is
/// freed into it, and after a listing those bins hold every small allocation of the listing
/// (200,000 names: 10–30 ms on the JS thread, measured). Below that size nothing is
/// consolidated on the JS thread. Pieces are allocated at their final size (no doubling).
pub const PIECE_BYTES: usize = 48 * 1024;

/// Cut `items` (their byte lengths known in advance) into strings of at most [`PIECE_BYTES`],
/// each allocated once at its size, with the number of items in each: `open` and `close` frame a
/// piece, `sep` joins its items, `put` writes one item.
pub fn pieces<T>(
    items: impl IntoIterator<Item = T>,
    len: impl Fn(&T) -> usize,
    (open, sep, close): (&str, &str, &str),
    mut put: impl FnMut(&mut String, T),
) -> Vec<(String, usize)> {
    let items: Vec<T> = items.into_iter().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < items.len() {
        // The items of this piece: at least one, as many as fit.
        let mut size = open.len() + close.len() + len(&items[i]);
        let mut end = i + 1;
        while end < items.len() && size + sep.len() + len(&items[end]) <= PIECE_BYTES {
            size += sep.len() + len(&items[end]);
            end += 1;
        }
        out.push((i, end, size));
        i = end;
    }
    let mut items = items.into_iter();
    out.into_iter()
        .map(|(start, end, size)| {
            let mut piece = String::with_capacity(size);
            piece.push_str(open);
            for k in start..end {
                if k > start {
                    piece.push_str(sep);
                }
                put(&mut piece, items.next().expect("counted"));
            }
            piece.push_str(close);
            debug_assert_eq!(piece.len(), size);
            (piece, end - start)
        })
        .collect()
}

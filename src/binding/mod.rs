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

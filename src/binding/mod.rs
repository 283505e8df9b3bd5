//! The N-API layer: converts JS values into the core's Rust types and results back, and hands
//! failures to the JS contract layer ([`failure`]). No capability logic lives here.

pub mod background;
pub mod events;
pub mod expected;
pub mod failure;
pub mod liveness;
pub mod session;
pub mod settle;
pub mod store;

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use napi::Env;

static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);
thread_local! {
    static OWNER: Cell<u64> = const { Cell::new(0) };
}

/// The id of the calling JS environment (one per thread: main or worker). The first call
/// registers a cleanup hook that, at teardown, removes the locks this environment still holds
/// and stops its recovery calls: resources belong to the environment that took them.
pub fn env_owner(env: &Env) -> napi::Result<u64> {
    let id = OWNER.with(|o| o.get());
    if id != 0 {
        return Ok(id);
    }
    let id = NEXT_OWNER.fetch_add(1, Ordering::Relaxed);
    OWNER.with(|o| o.set(id));
    env.add_env_cleanup_hook(id, teardown)?;
    Ok(id)
}

fn teardown(owner: u64) {
    crate::store::lock::release_all(owner);
    session::cancel_calls_of(owner);
    events::teardown(owner);
}

//! The lock (SPEC §3.4, L1–L10): proper-lockfile's on-disk protocol, with pi-native's own
//! decisions as pure state machines over a narrow world interface, explored by a deterministic
//! simulator (docs/LOCKING.md).

pub mod hold;
pub mod memory;
pub mod model;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
pub mod world;

mod legacy;
pub use legacy::*;

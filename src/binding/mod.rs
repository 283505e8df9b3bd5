//! The N-API layer: converts JS values into the core's Rust types and results back, and hands
//! failures to the JS contract layer ([`failure`]). No capability logic lives here.

pub mod expected;
pub mod failure;
pub mod liveness;
pub mod session;
pub mod store;

//! The N-API layer: converts JS values into the core's Rust types and results back, and maps
//! failures onto the errors the replaced JavaScript threw. No capability logic lives here.

pub mod expected;
pub mod failure;
pub mod jsval;
pub mod liveness;
pub mod process_matrix;
pub mod session_recovery;

//! pi-native: the crash-recovery and supervision core of the pi coding-agent hosts as a
//! Node-API addon. Capability modules are plain Rust; `binding` is the thin N-API layer.

#![deny(clippy::all)]

pub mod atomic_file;
pub mod binding;
pub mod entry;
pub mod fserror;
pub mod json;
pub mod jsstr;
pub mod liveness;
pub mod lockfile;
pub mod lockwatch;
pub mod nodepath;
pub mod process_matrix;
pub mod session_recovery;

//! pi-native: the crash-recovery and supervision core of the pi coding-agent hosts as a
//! Node-API addon. Capability modules are plain Rust, one per capability — `liveness` (PID
//! probes), `session` (tail-recovery of session files), `store` (process-matrix entries, the
//! proper-lockfile lock, atomic files), `supervise` (process-exit and folder events) — over
//! shared JS-semantics helpers (`json`, `jsstr`, `nodepath`, `fserror`) and the background
//! threads (`background`, and `lanes`: where async file-system calls run); `binding` is the thin N-API layer. See docs/ARCHITECTURE.md.

#![deny(clippy::all)]

pub mod background;
pub mod binding;
pub mod fserror;
pub mod json;
pub mod jsstr;
pub mod lanes;
pub mod liveness;
pub mod nodepath;
pub mod platform;
#[cfg(test)]
mod proptest_support;
pub mod session;
pub mod store;
pub mod supervise;

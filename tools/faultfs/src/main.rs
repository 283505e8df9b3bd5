//! faultfs: a FUSE pass-through of a folder that answers like a network mount (attribute and
//! entry caches, whole-second timestamps, inode numbers of its own) and injects faults into the
//! real processes that use it: replies lost after the work was done, error windows, delays,
//! hung calls. Rules come and go at run time over a Unix socket (JSON lines). Two mounts of one
//! folder are two machines: each has its own kernel caches. See docs/FAULT-LAYER.md.
//!
//! Usage: `faultfs <backing> <mountpoint> --control <socket> [options]`; prints one JSON line
//! (`{"ready":true,…}`) once mounted, unmounts on SIGTERM/SIGINT/SIGHUP, on the `unmount`
//! command, and when the process given by `--watch-pid` ends.

#[cfg(target_os = "linux")]
mod app;
#[cfg(target_os = "linux")]
mod control;
#[cfg(target_os = "linux")]
mod fs;
#[cfg(target_os = "linux")]
mod rules;
#[cfg(target_os = "linux")]
mod sys;

#[cfg(target_os = "linux")]
fn main() {
    app::main();
}

// Elsewhere it builds (so `cargo build --workspace` works on every platform the addon
// supports) but only says why it cannot run.
#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("faultfs: a FUSE file system for Linux only");
    std::process::exit(1);
}

//! Background work that must not compete with the JS thread for the CPU.

/// Lower the calling thread to nice 10 (a per-thread attribute on Linux; best effort, and
/// irreversible without privileges, so only for threads that do nothing but background work).
/// The JS thread keeps nice 0, so on a busy machine the scheduler runs it first: recovery
/// scans and listing reads then cannot open long event-loop gaps.
pub fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: a plain syscall on the calling thread; no memory is passed.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 10);
    }
}

//! Linux: CLOCK_BOOTTIME, CLOCK_MONOTONIC plus the time spent suspended.

pub fn now_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: CLOCK_BOOTTIME is a valid clock id (Linux 2.6.39+) and t is writable.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut t) };
    (t.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(t.tv_nsec as u64)
}

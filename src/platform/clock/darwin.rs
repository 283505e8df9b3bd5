//! macOS: `mach_continuous_time`, which goes on while the system sleeps (unlike
//! `mach_absolute_time`, behind std's `Instant`), in the units `mach_timebase_info` gives.

use std::sync::OnceLock;

extern "C" {
    /// libSystem (macOS 10.12+): ticks since boot, counting sleep.
    fn mach_continuous_time() -> u64;
}

pub fn now_ns() -> u64 {
    static BASE: OnceLock<(u64, u64)> = OnceLock::new();
    let &(numer, denom) = BASE.get_or_init(|| {
        let mut info = libc::mach_timebase_info { numer: 0, denom: 0 };
        // SAFETY: info is writable for the call.
        unsafe { libc::mach_timebase_info(&mut info) };
        if info.numer == 0 || info.denom == 0 {
            (1, 1)
        } else {
            (u64::from(info.numer), u64::from(info.denom))
        }
    });
    // SAFETY: no preconditions.
    let ticks = unsafe { mach_continuous_time() };
    (u128::from(ticks) * u128::from(numer) / u128::from(denom)) as u64
}

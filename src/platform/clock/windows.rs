//! Windows: `GetTickCount64`, milliseconds since boot, counting sleep and hibernation
//! (QueryUnbiasedInterruptTime and friends leave them out). A 10–16 ms resolution is ample for
//! thresholds of seconds.

use windows_sys::Win32::System::SystemInformation::GetTickCount64;

pub fn now_ns() -> u64 {
    // SAFETY: no preconditions.
    unsafe { GetTickCount64() }.saturating_mul(1_000_000)
}

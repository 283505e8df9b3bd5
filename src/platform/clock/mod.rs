//! The clock of durations that decide whether this process still owns a lock: monotonic, and
//! counting the time the machine spent suspended. `std::time::Instant` stops while a laptop or
//! VM sleeps (CLOCK_MONOTONIC on Linux, mach_absolute_time on macOS): after a resume a holder
//! would believe a lock fresh that other machines may have judged stale and taken meanwhile.
//! Linux: CLOCK_BOOTTIME (`linux.rs`); macOS: `mach_continuous_time` (`darwin.rs`); Windows:
//! `GetTickCount64`, which counts sleep and hibernation (`windows.rs`).
//!
//! Durations that decide that *another* process's lock is stale (the network rule's
//! observation) stay on `Instant`: that rule trusts an observation only as far as client caches
//! have aged, and those age on a clock that stops in suspend too, so a clock that counted the
//! sleep would run ahead of them (docs/ARCHITECTURE.md, "Clocks").

use std::time::Duration;

#[cfg(any(target_os = "linux", target_os = "android"))]
#[path = "linux.rs"]
mod os;

#[cfg(target_vendor = "apple")]
#[path = "darwin.rs"]
mod os;

#[cfg(windows)]
#[path = "windows.rs"]
mod os;

/// Elsewhere: std's monotonic clock (whatever it does across a suspend).
#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_vendor = "apple",
    windows
)))]
mod os {
    use std::sync::OnceLock;
    use std::time::Instant;

    pub fn now_ns() -> u64 {
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// A reading of the suspend-counting monotonic clock, in nanoseconds from an arbitrary origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct BootInstant(u64);

impl BootInstant {
    /// Now.
    pub fn now() -> BootInstant {
        BootInstant(os::now_ns())
    }

    /// Time from `earlier` to this reading (zero if `earlier` is later).
    pub fn duration_since(self, earlier: BootInstant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// Time since this reading.
    pub fn elapsed(self) -> Duration {
        BootInstant::now().duration_since(self)
    }

    /// This reading as a duration from the clock's origin.
    pub fn since_origin(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// This reading moved back by `d` (saturating at the origin): for tests and deadlines.
    pub fn earlier_by(self, d: Duration) -> BootInstant {
        BootInstant(
            self.0
                .saturating_sub(d.as_nanos().min(u128::from(u64::MAX)) as u64),
        )
    }
}

impl std::ops::Add<Duration> for BootInstant {
    type Output = BootInstant;
    fn add(self, d: Duration) -> BootInstant {
        BootInstant(
            self.0
                .saturating_add(d.as_nanos().min(u128::from(u64::MAX)) as u64),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advances_with_real_time() {
        let a = BootInstant::now();
        let i = std::time::Instant::now();
        std::thread::sleep(Duration::from_millis(30));
        let (boot, mono) = (a.elapsed(), i.elapsed());
        assert!(boot >= Duration::from_millis(29), "{boot:?}");
        // Without a suspend in between, both clocks agree (to scheduling noise).
        assert!(
            boot.abs_diff(mono) < Duration::from_millis(20),
            "{boot:?} vs {mono:?}"
        );
        assert!(BootInstant::now() >= a);
        assert_eq!(a.duration_since(BootInstant::now()), Duration::ZERO);
        assert_eq!(
            (a + Duration::from_secs(2)).duration_since(a),
            Duration::from_secs(2)
        );
        assert_eq!(
            a.duration_since(a.earlier_by(Duration::from_millis(5))),
            Duration::from_millis(5)
        );
    }

    /// On Linux the reading is CLOCK_BOOTTIME's, not CLOCK_MONOTONIC's (they differ by the time
    /// the machine has spent suspended, which may be zero: compare with both clocks directly).
    #[cfg(target_os = "linux")]
    #[test]
    fn linux_reads_boottime() {
        let read = |clock| {
            let mut t = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: a valid clock id and a writable timespec.
            assert_eq!(unsafe { libc::clock_gettime(clock, &mut t) }, 0);
            t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
        };
        let before = read(libc::CLOCK_BOOTTIME);
        let ours = BootInstant::now().0;
        let after = read(libc::CLOCK_BOOTTIME);
        assert!(before <= ours && ours <= after, "{before} {ours} {after}");
    }
}

//! A clock calibrated to nanoseconds.
//!
//! On x86_64 with an invariant TSC (`constant_tsc` and `nonstop_tsc` in `/proc/cpuinfo`) the clock
//! reads the TSC with `rdtsc` (about 7 ns on a recent core, no syscall, no fence: the metered code
//! runs its own atomic instructions on both sides). Elsewhere it reads `CLOCK_MONOTONIC` through the
//! vDSO and ticks are nanoseconds. Ticks become nanoseconds with one multiply and one shift
//! ([`Calibration::to_ns`]).
//!
//! Seed 000 warns "you can't trust virtualized time": the calibration is measured against
//! `CLOCK_MONOTONIC`, recorded in every profile, and re-checked over the whole run at the end.

use core::sync::atomic::{AtomicU8, Ordering::Relaxed};

/// Which source [`now`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Source {
    /// The time-stamp counter (`rdtsc`).
    Tsc = 1,
    /// `clock_gettime(CLOCK_MONOTONIC)`: ticks are nanoseconds.
    Monotonic = 2,
}

static SOURCE: AtomicU8 = AtomicU8::new(Source::Monotonic as u8);

/// Chooses the clock source for [`now`]. Call once, before metering starts.
pub fn set_source(s: Source) {
    SOURCE.store(s as u8, Relaxed);
}

/// The clock source [`now`] reads.
#[inline]
pub fn source() -> Source {
    if SOURCE.load(Relaxed) == Source::Tsc as u8 { Source::Tsc } else { Source::Monotonic }
}

/// Reads the TSC (x86_64) or the monotonic clock in ns.
#[inline(always)]
pub fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `rdtsc` has no memory effects and is available on every x86_64 CPU.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        monotonic_ns()
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds (vDSO, no syscall on Linux).
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// `CLOCK_REALTIME` in nanoseconds since the Unix epoch.
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime does not retain the pointer.
    unsafe { libc::clock_gettime(id, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

/// Reads the selected clock, in ticks.
#[inline(always)]
pub fn now() -> u64 {
    if SOURCE.load(Relaxed) == Source::Tsc as u8 { tsc() } else { monotonic_ns() }
}

/// Ticks → nanoseconds, as `ns = ticks * mult >> shift`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibration {
    /// Ticks per second of the source.
    pub hz: u64,
    /// Multiplier of the fixed-point conversion.
    pub mult: u64,
    /// Shift of the fixed-point conversion.
    pub shift: u32,
    /// Largest delta converted with 64-bit arithmetic; longer ones use 128 bits.
    pub fast_limit: u64,
}

impl Calibration {
    /// Shift used by [`Calibration::from_hz`]: a relative error below 1e-9. Deltas up to
    /// [`Calibration::fast_limit`] (seconds at GHz rates) convert with one 64-bit multiply.
    pub const SHIFT: u32 = 32;

    /// The identity conversion (ticks are ns).
    pub const fn identity() -> Self {
        Calibration {
            hz: 1_000_000_000,
            mult: 1 << Self::SHIFT,
            shift: Self::SHIFT,
            fast_limit: u64::MAX >> Self::SHIFT,
        }
    }

    /// A conversion for a source ticking at `hz`.
    pub fn from_hz(hz: u64) -> Self {
        let hz = hz.max(1);
        let mult =
            ((1_000_000_000u128 << Self::SHIFT) / hz as u128).clamp(1, u64::MAX as u128) as u64;
        Calibration { hz, mult, shift: Self::SHIFT, fast_limit: u64::MAX / mult }
    }

    /// Converts a tick delta to nanoseconds.
    #[inline(always)]
    pub fn to_ns(&self, ticks: u64) -> u64 {
        if ticks <= self.fast_limit {
            ticks.wrapping_mul(self.mult) >> self.shift
        } else {
            ((ticks as u128 * self.mult as u128) >> self.shift) as u64
        }
    }
}

/// Whether the TSC is invariant (constant rate, not stopped in idle states), per `/proc/cpuinfo`.
pub fn tsc_is_invariant() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let Ok(s) = std::fs::read_to_string("/proc/cpuinfo") else { return false };
    let flags = s.lines().find(|l| l.starts_with("flags")).unwrap_or("");
    let has = |f: &str| flags.split_whitespace().any(|w| w == f);
    has("constant_tsc") && has("nonstop_tsc")
}

/// Measures the TSC rate against `CLOCK_MONOTONIC` over about `window_ns`, by busy-waiting.
///
/// Takes the median of five windows. Uses no allocation and no lock (callable from a preload
/// constructor).
pub fn measure_tsc_hz(window_ns: u64) -> u64 {
    let mut est = [0u64; 5];
    for e in est.iter_mut() {
        let (m0, t0) = paired();
        let mut m1;
        let mut t1;
        loop {
            (m1, t1) = paired();
            if m1.wrapping_sub(m0) >= window_ns / 5 {
                break;
            }
        }
        let dm = m1.wrapping_sub(m0).max(1);
        *e = ((t1.wrapping_sub(t0) as u128 * 1_000_000_000) / dm as u128) as u64;
    }
    est.sort_unstable();
    est[2]
}

/// A (monotonic ns, tsc) pair read as close together as possible: the tsc is the midpoint of two
/// reads around the clock_gettime call, and of 8 tries the one with the tightest bracket is kept,
/// so that a preemption between the reads cannot skew the calibration.
fn paired() -> (u64, u64) {
    let mut best = (0, 0);
    let mut best_gap = u64::MAX;
    for _ in 0..8 {
        let a = tsc();
        let m = monotonic_ns();
        let b = tsc();
        let gap = b.wrapping_sub(a);
        if gap < best_gap {
            best_gap = gap;
            best = (m, a + gap / 2);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_point_conversion() {
        let c = Calibration::from_hz(3_000_000_000);
        assert_eq!(c.to_ns(3_000), 999); // 1000 ns minus fixed-point truncation
        assert!((c.to_ns(3_000_000_000) as i64 - 1_000_000_000).abs() < 10);
        let slow = Calibration::from_hz(1_000_000); // 1 MHz: large multiplier
        assert!((slow.to_ns(1_000_000_000) as i64 - 1_000_000_000_000).abs() <= 1);
        // The slow path for very long deltas agrees with the fast one.
        let big = 1u64 << 45;
        let want = (big as u128 * 1_000_000_000 / 3_000_000_000) as i64;
        assert!((c.to_ns(big) as i64 - want).abs() < want / 100_000_000); // relative error < 1e-8
        assert_eq!(Calibration::identity().to_ns(12345), 12345);
    }

    #[test]
    fn clock_moves_forward() {
        let a = now();
        let b = now();
        assert!(b >= a);
        assert!(realtime_ns() > 1_600_000_000_000_000_000);
    }

    #[test]
    fn tsc_rate_is_plausible() {
        if !tsc_is_invariant() {
            return; // nothing to measure: the monotonic clock is used instead
        }
        let hz = measure_tsc_hz(3_000_000);
        assert!(hz > 100_000_000 && hz < 10_000_000_000, "tsc hz {hz}");
    }
}

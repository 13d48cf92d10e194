//! The collector's estimate of its own cost: what it measures in the run, and the model that
//! turns that into `overhead.estimated_slowdown` (estimated metered wall / unmetered wall).
//!
//! Measured per thread with the clock the hooks already use, cheaply:
//! - the hooks' work inside critical sections (from the real lock's return to the end of the
//!   acquisition hook, and from the release hook's start to the real unlock), timed on one
//!   acquisition and one release in [`SAMPLE`], under the run's real cache traffic;
//! - the contended path: gathering a waiter's side (its stack) before it blocks, always timed (it
//!   waits anyway), and the holder's side after releasing a wanted lock, timed one time in
//!   [`SAMPLE`] and counted every time.
//!
//! A sampled interval in which the thread was preempted is left out (see [`MAX_TICKS`]).
//!
//! The model (see FORMAT.md, OVERHEAD): the pair as the run paid it is the calibrated
//! uncontended pair with its in-critical-section part replaced by the run's measurement. Work
//! outside critical sections runs in parallel, so pairs x acquisitions plus the contended path's
//! time is divided over the threads that ran at once (threads that took locks, at most the CPUs);
//! the hooks' time inside the critical section of a hold that another thread waited for delays
//! that thread directly, so holds waited for x in-critical-section time adds to wall time
//! undivided.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use lockmeter_core::Counter;
use lockmeter_core::clock;

/// One acquisition, release or holder-side capture in this many is timed.
pub(crate) const SAMPLE: u32 = 64;

/// A thread's cost measurements (single writer: the thread).
#[derive(Default)]
pub(crate) struct CostCounters {
    /// Timed acquisitions and their in-critical-section hook ticks.
    pub(crate) acq_timed: Counter,
    pub(crate) acq_ticks: Counter,
    /// Timed releases and their in-critical-section hook ticks.
    pub(crate) rel_timed: Counter,
    pub(crate) rel_ticks: Counter,
    /// Ticks spent gathering waiters' sides (every contended acquisition).
    pub(crate) gather_ticks: Counter,
    /// Holder-side captures (releases of wanted locks), timed ones, and their ticks.
    pub(crate) holding: Counter,
    pub(crate) holding_timed: Counter,
    pub(crate) holding_ticks: Counter,
}

/// Whether to time this one: true one time in [`SAMPLE`] of `counter`.
#[inline(always)]
pub(crate) fn sample(counter: &mut u32) -> bool {
    *counter = counter.wrapping_add(1);
    *counter % SAMPLE == 0
}

/// The clock now when `timed`, else 0.
#[inline(always)]
pub(crate) fn now_if(timed: bool) -> u64 {
    if timed { clock::now() } else { 0 }
}

/// Timed intervals longer than this (ticks: about 40 us at 3 GHz) are left out: the thread was
/// preempted or interrupted inside it, which one sample would multiply by [`SAMPLE`].
pub(crate) const MAX_TICKS: u64 = 1 << 17;

/// Adds one timed interval `t0..t1` (ticks) to `ticks` and `n`, unless it is longer than
/// [`MAX_TICKS`].
#[inline(always)]
pub(crate) fn add(n: &Counter, ticks: &Counter, t0: u64, t1: u64) {
    let d = t1.saturating_sub(t0);
    if d <= MAX_TICKS {
        n.add(1);
        ticks.add(d);
    }
}

/// The hooks' in-critical-section time per pair measured on the calibration pairs (hot caches,
/// no other thread), in ns x 1000; the run's own measurement is compared with it.
pub(crate) static CALIB_CS_PS: AtomicU64 = AtomicU64::new(0);

/// Keeps what the calibration pairs measured in [`CALIB_CS_PS`] and clears it from `c`, so
/// that the run's figures are the program's alone.
pub(crate) fn end_calibration(c: &CostCounters) {
    let mean = |t: &Counter, n: &Counter| {
        if n.get() == 0 { 0 } else { crate::state::ticks_to_ns(t.get() * 1000) / n.get() }
    };
    let ps = mean(&c.acq_ticks, &c.acq_timed) + mean(&c.rel_ticks, &c.rel_timed);
    if ps > 0 {
        CALIB_CS_PS.store(ps, Relaxed);
    }
    for x in [
        &c.acq_timed,
        &c.acq_ticks,
        &c.rel_timed,
        &c.rel_ticks,
        &c.gather_ticks,
        &c.holding,
        &c.holding_timed,
        &c.holding_ticks,
    ] {
        x.set(0);
    }
}

/// What the model is given, summed over the threads (ns, already converted from ticks).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Inputs {
    /// Wall time of the run so far.
    pub(crate) duration_ns: u64,
    /// The program's acquisitions.
    pub(crate) acquisitions: u64,
    /// Holds another thread wanted (waited for, or failed a trylock on).
    pub(crate) wanted_holds: u64,
    /// Calibrated uncontended lock+unlock pair.
    pub(crate) ns_per_pair: u64,
    /// Of it, the in-critical-section part measured on the calibration pairs.
    pub(crate) calib_cs_ns: f64,
    /// Mean in-critical-section hook time of one acquisition and one release (measured).
    pub(crate) cs_acq_ns: f64,
    pub(crate) cs_rel_ns: f64,
    /// Time on the contended path (measured: waiters' sides, holders' sides extrapolated).
    pub(crate) contended_ns: u64,
    /// Threads that ran at once: threads that took locks, at most the CPUs (at least 1).
    pub(crate) parallel: u64,
}

/// The estimate: (slowdown x 1000, contended-path ns, serialized ns). Slowdown 0: no duration.
pub(crate) fn estimate(i: &Inputs) -> (u64, u64, u64) {
    let cs = i.cs_acq_ns + i.cs_rel_ns;
    // The pair as the run paid it: the calibrated pair with its in-critical-section part as
    // measured in the run (cache misses on shared lines, lookups that miss the thread's cache).
    let pair = (i.ns_per_pair as f64 - i.calib_cs_ns).max(0.0) + cs;
    let pair = pair.max(i.ns_per_pair as f64);
    let serial = i.wanted_holds as f64 * cs;
    let parallel = (i.acquisitions as f64 * pair - serial).max(0.0) + i.contended_ns as f64;
    let parallel = parallel / i.parallel.max(1) as f64;
    let t = i.duration_ns as f64;
    if t <= 0.0 {
        return (0, i.contended_ns, serial as u64);
    }
    // The unmetered run cannot take less than a hundredth of the metered one in this model.
    let bare = (t - serial - parallel).max(t / 100.0);
    (((t / bare) * 1000.0).round() as u64, i.contended_ns, serial as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialized_time_is_not_divided_over_threads() {
        let base = Inputs {
            duration_ns: 1_000_000_000,
            acquisitions: 10_000_000,
            ns_per_pair: 10,
            parallel: 4,
            ..Inputs::default()
        };
        // 100 ms of uncontended pairs over 4 threads: 25 ms of a 1 s run.
        assert_eq!(estimate(&base).0, 1026);
        // Every hold waited for, 30 ns inside each critical section: 300 ms more, undivided.
        let sat = Inputs { wanted_holds: 10_000_000, cs_acq_ns: 20.0, cs_rel_ns: 10.0, ..base };
        let (x, _, serial) = estimate(&sat);
        assert_eq!(serial, 300_000_000);
        assert_eq!(x, 1481);
        // The calibration's own in-critical-section part is replaced by the run's.
        assert_eq!(estimate(&Inputs { calib_cs_ns: 5.0, ..sat }).0, 1455);
        // No duration: no estimate.
        assert_eq!(estimate(&Inputs { duration_ns: 0, ..sat }).0, 0);
        // Added time beyond the run is capped.
        assert_eq!(estimate(&Inputs { wanted_holds: 1 << 40, ..sat }).0, 100_000);
    }
}

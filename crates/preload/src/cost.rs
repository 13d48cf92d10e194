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
    /// The same sampled acquisitions' and releases' hook ticks outside the critical section:
    /// from the hook's start to the real lock call (the record's lookup), and from the real
    /// unlock's return to the hook's end (the hold's record; releases of wanted locks left out,
    /// their holder-side work is timed as `holding`).
    pub(crate) acq_out_timed: Counter,
    pub(crate) acq_out_ticks: Counter,
    pub(crate) rel_out_timed: Counter,
    pub(crate) rel_out_ticks: Counter,
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

/// Timed work outside the critical section longer than this (ticks: about 1.5 us at 3 GHz) did
/// one-time work, a lock's first use in the thread (its record made, its first-use stack
/// unwound, new memory faulted in), not the cost of a pair: left out, as one sample would
/// multiply it by [`SAMPLE`] (a thread that takes 4096 locks pays it 4096 times in all, not once
/// in 64 acquisitions).
pub(crate) const MAX_OUT_TICKS: u64 = 1 << 12;

/// [`add`] for the work outside the critical section: intervals longer than [`MAX_OUT_TICKS`]
/// are left out.
#[inline(always)]
pub(crate) fn add_out(n: &Counter, ticks: &Counter, t0: u64, t1: u64) {
    if t1.saturating_sub(t0) <= MAX_OUT_TICKS {
        add(n, ticks, t0, t1);
    }
}

/// The hooks' in-critical-section time per pair measured on the calibration pairs (hot caches,
/// no other thread), in ns x 1000; the run's own measurement is compared with it.
pub(crate) static CALIB_CS_PS: AtomicU64 = AtomicU64::new(0);

/// The same for the hooks' timed work outside the critical section.
pub(crate) static CALIB_OUT_PS: AtomicU64 = AtomicU64::new(0);

/// Keeps what the calibration pairs measured in [`CALIB_CS_PS`] and [`CALIB_OUT_PS`] (ticks
/// converted by `to_ns`) and clears it from `c`, so that the run's figures are the program's
/// alone.
pub(crate) fn end_calibration(c: &CostCounters, to_ns: impl Fn(u64) -> u64) {
    let mean = |t: &Counter, n: &Counter| {
        if n.get() == 0 { 0 } else { to_ns(t.get() * 1000) / n.get() }
    };
    let ps = mean(&c.acq_ticks, &c.acq_timed) + mean(&c.rel_ticks, &c.rel_timed);
    if ps > 0 {
        CALIB_CS_PS.store(ps, Relaxed);
    }
    let out = mean(&c.acq_out_ticks, &c.acq_out_timed) + mean(&c.rel_out_ticks, &c.rel_out_timed);
    if out > 0 {
        CALIB_OUT_PS.store(out, Relaxed);
    }
    for x in [
        &c.acq_timed,
        &c.acq_ticks,
        &c.rel_timed,
        &c.rel_ticks,
        &c.acq_out_timed,
        &c.acq_out_ticks,
        &c.rel_out_timed,
        &c.rel_out_ticks,
        &c.gather_ticks,
        &c.holding,
        &c.holding_timed,
        &c.holding_ticks,
    ] {
        x.set(0);
    }
}

pub(crate) use lockmeter_core::cost_model::{Inputs, estimate, parallelism};

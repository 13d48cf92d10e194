//! `Metered<L>`: any raw mutex of the library (or any `lock_api::RawMutex`), metered with the
//! statistics the preload records (`lockmeter_core::Stats`).
//!
//! What is recorded, per lock: acquisitions; contended acquisitions (the first `try_lock`
//! failed) with their wait time (ns, total, max, log2 histogram); hold times; owner changes;
//! failed trylocks. Every update of the single-writer [`LiveStats`] happens *while the lock is
//! held* (after acquiring, before releasing), so the lock itself serialises the writers and no
//! RMW is needed. Failed trylocks, counted outside the lock, use their own atomic counter.
//!
//! Time comes from [`lockmeter_core::clock::now`] and is converted with the calibration set by
//! [`set_calibration`] (or measured by [`calibrate`]); by default the clock is `CLOCK_MONOTONIC`
//! and ticks are ns.
//!
//! Without the `metering` feature, `Metered<L>` is a transparent wrapper: the same size as `L`,
//! every call forwarded, [`Metered::stats`] empty.
//!
//! Note: [`Clh`](crate::Clh) cannot try-lock, so under `Metered` every CLH acquisition after the
//! first counts as contended.

#[cfg(feature = "metering")]
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use lock_api::RawMutex;
#[cfg(feature = "metering")]
use lockmeter_core::clock::{self, Calibration};
#[cfg(feature = "metering")]
use lockmeter_core::hist::Log2Hist;
use lockmeter_core::{LiveStats, Stats};
#[cfg(feature = "metering")]
use std::sync::OnceLock;

#[cfg(feature = "metering")]
static CAL: OnceLock<Calibration> = OnceLock::new();

/// Sets the tick → ns conversion of every `Metered` lock (first call wins).
#[cfg(feature = "metering")]
pub fn set_calibration(c: Calibration) {
    let _ = CAL.set(c);
}

/// Switches the clock to the TSC when it is invariant, measuring its rate over ~30 ms, and sets
/// the calibration. Returns the calibration in force.
#[cfg(feature = "metering")]
pub fn calibrate() -> Calibration {
    *CAL.get_or_init(|| {
        if clock::tsc_is_invariant() {
            let hz = clock::measure_tsc_hz(30_000_000);
            clock::set_source(clock::Source::Tsc);
            Calibration::from_hz(hz)
        } else {
            Calibration::identity()
        }
    })
}

#[cfg(feature = "metering")]
#[inline]
fn to_ns(ticks: u64) -> u64 {
    match CAL.get() {
        Some(c) => c.to_ns(ticks),
        None => ticks,
    }
}

#[cfg(feature = "metering")]
#[inline]
fn thread_id() -> u64 {
    thread_local!(static ID: u8 = const { 0 });
    ID.with(|x| x as *const u8 as u64)
}

#[cfg(feature = "metering")]
#[derive(Debug)]
struct Meter {
    stats: LiveStats,
    /// The histograms live here, not attached to `stats` (which holds pointers to them): the
    /// wrapper can move, and pointers into itself would dangle.
    wait_hist: Log2Hist,
    hold_hist: Log2Hist,
    acquired_at: AtomicU64,
    owner: AtomicU64,
    try_failures: AtomicU64,
}

/// A metered raw mutex: see the [module docs](self).
#[derive(Debug)]
pub struct Metered<L> {
    inner: L,
    #[cfg(feature = "metering")]
    meter: Meter,
}

impl<L: RawMutex> Metered<L> {
    /// Wraps a raw lock.
    pub const fn new(inner: L) -> Self {
        Metered {
            inner,
            #[cfg(feature = "metering")]
            meter: Meter {
                stats: LiveStats::new(),
                wait_hist: Log2Hist::new(),
                hold_hist: Log2Hist::new(),
                acquired_at: AtomicU64::new(0),
                owner: AtomicU64::new(0),
                try_failures: AtomicU64::new(0),
            },
        }
    }

    /// The wrapped lock.
    pub fn inner(&self) -> &L {
        &self.inner
    }

    /// A snapshot of the statistics (empty without the `metering` feature). Exact when taken
    /// while no thread uses the lock; otherwise a consistent-enough live view.
    pub fn stats(&self) -> Stats {
        #[cfg(feature = "metering")]
        {
            let mut s = self.meter.stats.snapshot();
            s.trylock_failures += self.meter.try_failures.load(Relaxed);
            s.wait_hist = self.meter.wait_hist.snapshot();
            s.hold_hist = self.meter.hold_hist.snapshot();
            s
        }
        #[cfg(not(feature = "metering"))]
        {
            let _ = LiveStats::new;
            Stats::default()
        }
    }

    #[cfg(feature = "metering")]
    #[inline]
    fn acquired(&self, wait_ticks: Option<u64>, now: u64) {
        let m = &self.meter;
        m.stats.acquisitions.add(1);
        if let Some(w) = wait_ticks {
            let ns = to_ns(w);
            m.stats.record_wait(ns);
            m.wait_hist.record(ns);
        }
        let me = thread_id();
        if m.owner.load(Relaxed) != me {
            m.stats.owner_changes.add(1);
            m.owner.store(me, Relaxed);
        }
        m.acquired_at.store(now, Relaxed);
    }
}

// SAFETY: exclusion is the inner lock's; the wrapper only adds bookkeeping done under it.
unsafe impl<L: RawMutex> RawMutex for Metered<L> {
    #[allow(clippy::declare_interior_mutable_const)]
    const INIT: Self = Metered::new(L::INIT);
    type GuardMarker = L::GuardMarker;

    #[inline]
    fn lock(&self) {
        #[cfg(feature = "metering")]
        {
            let t0 = clock::now();
            if self.inner.try_lock() {
                self.acquired(None, t0);
            } else {
                self.inner.lock();
                let t1 = clock::now();
                self.acquired(Some(t1.wrapping_sub(t0)), t1);
            }
        }
        #[cfg(not(feature = "metering"))]
        self.inner.lock();
    }

    #[inline]
    fn try_lock(&self) -> bool {
        #[cfg(feature = "metering")]
        {
            if self.inner.try_lock() {
                self.acquired(None, clock::now());
                true
            } else {
                self.meter.try_failures.fetch_add(1, Relaxed);
                false
            }
        }
        #[cfg(not(feature = "metering"))]
        self.inner.try_lock()
    }

    #[inline]
    unsafe fn unlock(&self) {
        #[cfg(feature = "metering")]
        {
            let held = to_ns(clock::now().wrapping_sub(self.meter.acquired_at.load(Relaxed)));
            self.meter.stats.record_hold(held);
            self.meter.hold_hist.record(held);
        }
        // SAFETY: the caller holds the lock (this function's contract).
        unsafe { self.inner.unlock() }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.inner.is_locked()
    }
}

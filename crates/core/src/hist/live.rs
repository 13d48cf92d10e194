//! A record's live histogram: compact first, promoted to a full [`Log2Hist`] when it must.
//!
//! Most records see few values, within a narrow range (a lock's holds from one call site take
//! about as long each time). [`LiveHist`] keeps such values in 32 bytes inside the record: 15
//! `u16` counters for a window of 15 consecutive log2 buckets, placed around the first value's
//! bucket. The first value that falls outside the window, or would overflow its counter, *promotes*
//! the histogram: the compact counts are copied into the full 65-bucket histogram reserved for the
//! record (its owner passes it in: a record keeps one pointer to both of its full histograms; its
//! memory becomes resident only then) and every later value goes there. Either way every value is in exactly one bucket of the same log2
//! layout: the resolution never changes, and snapshots are exact.
//!
//! Single writer (the record's thread); any thread may [`snapshot`](LiveHist::snapshot).

use super::{BUCKETS, Log2Hist, bucket};
use core::sync::atomic::{AtomicU64, Ordering::*};

/// Buckets in the compact window.
pub const WINDOW: usize = 15;
/// Lanes below the first value's bucket in the window (the rest are above it).
const BELOW: usize = 7;
/// The state lane's value once promoted (the state lane holds `base + 1` before, 0 when empty).
const PROMOTED: u64 = 0xffff;
const LANE_MAX: u64 = 0xffff;

/// A live histogram: compact, or promoted to its full histogram (see the module docs). The full
/// histogram is not kept here but passed in by the owner (`full`: `None` when it has none), so
/// that a record keeps one pointer for both of its histograms.
#[derive(Debug, Default)]
#[repr(C)]
pub struct LiveHist {
    /// Lanes of 16 bits: 0..15 count buckets `base..base + 15`, lane 15 (the top of word 3) is the
    /// state: 0 empty, `base + 1`, or [`PROMOTED`].
    w: [AtomicU64; 4],
}

#[inline(always)]
fn lane(w: &[AtomicU64; 4], i: usize) -> u64 {
    w.get(i / 4).map_or(0, |x| (x.load(Relaxed) >> ((i % 4) * 16)) & LANE_MAX)
}

impl LiveHist {
    /// An empty histogram.
    pub const fn new() -> Self {
        LiveHist { w: [const { AtomicU64::new(0) }; 4] }
    }

    /// Whether the values now live in the full histogram.
    pub fn promoted(&self) -> bool {
        self.w[3].load(Acquire) >> 48 == PROMOTED
    }

    /// Counts one value; `full` gives the histogram to promote to (called only when the value
    /// goes there: a compact histogram's owner keeps the pointer on another cache line). Single
    /// writer only.
    #[inline(always)]
    pub fn record<'f>(&self, v: u64, full: impl FnOnce() -> Option<&'f Log2Hist>) {
        let b = bucket(v);
        let w3 = self.w[3].load(Relaxed);
        let state = w3 >> 48;
        if state == PROMOTED {
            if let Some(f) = full() {
                f.record(v);
            }
            return;
        }
        let base = if state == 0 {
            // The record's first value (once).
            core::hint::cold_path();
            let base = b.saturating_sub(BELOW);
            self.w[3].store(w3 | ((base as u64 + 1) << 48), Relaxed);
            base
        } else {
            state as usize - 1
        };
        let i = b.wrapping_sub(base);
        if i < WINDOW
            && let Some(w) = self.w.get(i / 4)
        {
            let x = w.load(Relaxed);
            let shift = (i % 4) * 16;
            if (x >> shift) & LANE_MAX != LANE_MAX {
                w.store(x + (1 << shift), Relaxed);
                return;
            }
        }
        self.promote_and_record(v, full());
    }

    #[cold]
    #[inline(never)]
    fn promote_and_record(&self, v: u64, full: Option<&Log2Hist>) {
        if let Some(f) = self.promote(full) {
            f.record(v);
        }
    }

    /// Moves the compact counts into the full histogram and marks it promoted; `None` (nothing
    /// changed) when there is none. Single writer only.
    fn promote<'f>(&self, full: Option<&'f Log2Hist>) -> Option<&'f Log2Hist> {
        let f = full?;
        if !self.promoted() {
            f.absorb_counts(&self.compact_counts(self.w[3].load(Relaxed) >> 48));
            // Release: a reader that sees the state sees the counts in the full histogram.
            self.w[3].store(PROMOTED << 48, Release);
        }
        Some(f)
    }

    /// The compact counts as full buckets, read with state lane `state` (zero when promoted or
    /// empty). Promotion leaves the compact counts as they were, so a reader that saw the state
    /// before a promotion still reads them whole.
    fn compact_counts(&self, state: u64) -> [u64; BUCKETS] {
        let mut out = [0u64; BUCKETS];
        if state == 0 || state == PROMOTED {
            return out;
        }
        let base = state as usize - 1;
        for i in 0..WINDOW {
            if let Some(o) = out.get_mut(base + i) {
                *o = lane(&self.w, i);
            }
        }
        out
    }

    /// The bucket counts (any thread); `full` is the histogram it promotes to.
    pub fn snapshot(&self, full: Option<&Log2Hist>) -> [u64; BUCKETS] {
        let state = self.w[3].load(Acquire) >> 48;
        if state == PROMOTED {
            return full.map_or([0; BUCKETS], Log2Hist::snapshot);
        }
        self.compact_counts(state)
    }

    /// Adds bucket counts `o` (another histogram's snapshot). Single writer only. Counts that fit
    /// the compact window stay compact; otherwise the histogram is promoted to `full` first.
    /// Without a full histogram, counts that do not fit are not kept (the totals beside it still
    /// are).
    pub fn absorb_counts(&self, o: &[u64; BUCKETS], full: Option<&Log2Hist>) {
        let Some(lo) = o.iter().position(|&c| c != 0) else { return };
        let hi = o.iter().rposition(|&c| c != 0).unwrap_or(lo);
        let w3 = self.w[3].load(Relaxed);
        let state = w3 >> 48;
        if state == 0 && hi - lo < WINDOW {
            // Centre the window on the values where the buckets allow.
            let spare = WINDOW - 1 - (hi - lo);
            let base = lo.saturating_sub(spare / 2).min(BUCKETS - WINDOW);
            self.w[3].store(w3 | ((base as u64 + 1) << 48), Relaxed);
        }
        let state = self.w[3].load(Relaxed) >> 48;
        if state != PROMOTED && state != 0 {
            let base = state as usize - 1;
            let fits = o.iter().enumerate().all(|(b, &c)| {
                c == 0 || (b.wrapping_sub(base) < WINDOW && c <= LANE_MAX - lane(&self.w, b - base))
            });
            if fits {
                for (b, &c) in o.iter().enumerate().filter(|(_, c)| **c != 0) {
                    let i = b - base;
                    if let Some(w) = self.w.get(i / 4) {
                        w.store(w.load(Relaxed) + (c << ((i % 4) * 16)), Relaxed);
                    }
                }
                return;
            }
        }
        if let Some(f) = self.promote(full) {
            f.absorb_counts(o);
        }
    }

    /// Empties the histogram, compact again (its full histogram `full`, zeroed, stays the one it
    /// promotes to). Single writer only.
    pub fn clear(&self, full: Option<&Log2Hist>) {
        if self.promoted()
            && let Some(f) = full
        {
            f.clear();
        }
        for w in &self.w {
            w.store(0, Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A histogram and the full histogram it promotes to.
    fn attached() -> (LiveHist, Option<&'static Log2Hist>) {
        (LiveHist::new(), Some(Box::leak(Box::new(Log2Hist::new()))))
    }

    /// The reference: a plain full histogram fed the same values.
    fn reference(vs: &[u64]) -> [u64; BUCKETS] {
        let r = Log2Hist::new();
        vs.iter().for_each(|&v| r.record(v));
        r.snapshot()
    }

    #[test]
    fn narrow_values_stay_compact_and_exact() {
        let (h, f) = attached();
        let vs: Vec<u64> = (0..5000u64).map(|i| 100 + (i * 37) % 9000).collect();
        vs.iter().for_each(|&v| h.record(v, || f));
        assert!(!h.promoted(), "7 buckets of values fit the window");
        assert_eq!(h.snapshot(f), reference(&vs));
    }

    #[test]
    fn a_value_outside_the_window_promotes_with_the_counts() {
        let (h, f) = attached();
        let mut vs = vec![1000u64; 10];
        vs.extend([3, 0, 1 << 40, 1000]);
        vs.iter().for_each(|&v| h.record(v, || f));
        assert!(h.promoted());
        assert_eq!(h.snapshot(f), reference(&vs));
        assert_eq!(h.snapshot(f).iter().sum::<u64>(), 14);
    }

    #[test]
    fn a_full_counter_promotes() {
        let (h, f) = attached();
        let n = LANE_MAX as usize + 5;
        (0..n).for_each(|_| h.record(77, || f));
        assert!(h.promoted());
        assert_eq!(h.snapshot(f)[bucket(77)], n as u64);
    }

    #[test]
    fn without_a_full_histogram_the_window_still_counts() {
        let (h, f) = (LiveHist::new(), None);
        h.record(50, || f);
        h.record(1 << 50, || f);
        assert!(!h.promoted());
        assert_eq!(h.snapshot(f)[bucket(50)], 1);
        assert_eq!(h.snapshot(f).iter().sum::<u64>(), 1);
    }

    #[test]
    fn absorb_and_clear() {
        let ((a, fa), (b, fb)) = (attached(), attached());
        let va = [10u64, 20, 30, 4000];
        let vb = [25u64, 1 << 30, 0];
        va.iter().for_each(|&v| a.record(v, || fa));
        vb.iter().for_each(|&v| b.record(v, || fb));
        a.absorb_counts(&b.snapshot(fb), fa);
        let mut all = va.to_vec();
        all.extend(vb);
        assert_eq!(a.snapshot(fa), reference(&all));
        // Into an empty histogram: compact when the range fits.
        let (c, fc) = attached();
        c.absorb_counts(&reference(&va), fc);
        assert!(!c.promoted());
        assert_eq!(c.snapshot(fc), reference(&va));
        a.clear(fa);
        assert!(!a.promoted());
        assert_eq!(a.snapshot(fa), [0; BUCKETS]);
        a.record(5, || fa);
        assert_eq!(a.snapshot(fa), reference(&[5]), "a cleared histogram starts again");
        let big = [LANE_MAX; BUCKETS];
        c.absorb_counts(&big, fc);
        let mut want = reference(&va);
        want.iter_mut().for_each(|x| *x += LANE_MAX);
        assert_eq!(c.snapshot(fc), want);
    }

    proptest::proptest! {
        /// Any sequence of values and absorbs gives exactly the full histogram's buckets.
        #[test]
        fn agrees_with_a_full_histogram(
            ops in proptest::collection::vec((0u32..64, 0u64..4, proptest::bool::weighted(0.02)), 1..3000)
        ) {
            let (h, f) = attached();
            let r = Log2Hist::new();
            for (bits, low, absorb) in ops {
                let v = if bits == 0 { low } else { (1u64 << bits) | low };
                if absorb {
                    let o = reference(&[v, v / 2]);
                    h.absorb_counts(&o, f);
                    r.absorb_counts(&o);
                } else {
                    h.record(v, || f);
                    r.record(v);
                }
            }
            proptest::prop_assert_eq!(h.snapshot(f), r.snapshot());
        }
    }
}

//! Log2 histograms.
//!
//! Bucket `i` holds values whose most significant set bit is bit `i - 1`, i.e. the range
//! `[2^(i-1), 2^i)`; bucket 0 holds the value 0. This is seed 000's histogram ("bucket = most
//! significant bit"), and the layout `lockstat -h` and bpftrace's `hist()` print.
//!
//! A record keeps its histograms as [`LiveHist`]s: 32 bytes inside the record while its values
//! fit a window of [`WINDOW`] buckets, promoted to a full [`Log2Hist`] when they do not (same
//! buckets, exact either way).

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

mod live;
pub use live::{LiveHist, WINDOW};

/// Number of buckets: enough for any `u64`.
pub const BUCKETS: usize = 65;

/// The bucket a value falls in: 0 for 0, else 1 + the index of its most significant bit.
#[inline(always)]
pub const fn bucket(v: u64) -> usize {
    (64 - v.leading_zeros()) as usize
}

/// Lower bound (inclusive) of bucket `i`.
pub const fn bucket_low(i: usize) -> u64 {
    if i == 0 { 0 } else { 1u64 << (i - 1) }
}

/// Upper bound (exclusive) of bucket `i`, saturating at `u64::MAX`.
pub const fn bucket_high(i: usize) -> u64 {
    if i == 0 {
        1
    } else if i >= 64 {
        u64::MAX
    } else {
        1u64 << i
    }
}

/// A single-writer log2 histogram (see [`crate::Counter`] for the single-writer rule).
#[derive(Debug)]
#[repr(C)]
pub struct Log2Hist {
    b: [AtomicU64; BUCKETS],
}

impl Default for Log2Hist {
    fn default() -> Self {
        Self::new()
    }
}

impl Log2Hist {
    /// An empty histogram.
    pub const fn new() -> Self {
        Log2Hist { b: [const { AtomicU64::new(0) }; BUCKETS] }
    }
    /// Counts one value. Single writer only.
    #[inline(always)]
    pub fn record(&self, v: u64) {
        // `bucket` is at most 64, always in range; `get` keeps the hot path free of panics.
        if let Some(c) = self.b.get(bucket(v)) {
            c.store(c.load(Relaxed).wrapping_add(1), Relaxed);
        }
    }
    /// Adds `o`'s counts to this histogram. Single writer (of `self`) only.
    pub fn absorb(&self, o: &Log2Hist) {
        for (d, s) in self.b.iter().zip(o.b.iter()) {
            d.store(d.load(Relaxed).wrapping_add(s.load(Relaxed)), Relaxed);
        }
    }

    /// Adds the buckets of a snapshot. Single writer (of `self`) only.
    pub fn absorb_counts(&self, o: &[u64; BUCKETS]) {
        for (d, &s) in self.b.iter().zip(o.iter()) {
            d.store(d.load(Relaxed).wrapping_add(s), Relaxed);
        }
    }

    /// Empties the histogram. Single writer only.
    pub fn clear(&self) {
        for c in &self.b {
            c.store(0, Relaxed);
        }
    }
    /// A copy of the bucket counts.
    pub fn snapshot(&self) -> [u64; BUCKETS] {
        core::array::from_fn(|i| self.b[i].load(Relaxed))
    }
}

/// Percentile (0..=100) of a log2 histogram, as the upper bound of the bucket that holds it,
/// clamped to `max` when the maximum is known. `None` when the histogram is empty.
pub fn percentile(h: &[u64], p: f64, max: Option<u64>) -> Option<u64> {
    let total: u64 = h.iter().sum();
    if total == 0 {
        return None;
    }
    let want = ((p / 100.0) * total as f64).ceil().max(1.0) as u64;
    let mut seen = 0u64;
    for (i, &c) in h.iter().enumerate() {
        seen += c;
        if seen >= want {
            let hi = bucket_high(i).saturating_sub(1).max(bucket_low(i));
            return Some(match max {
                Some(m) => hi.min(m),
                None => hi,
            });
        }
    }
    max
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_msb() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1), 1);
        assert_eq!(bucket(2), 2);
        assert_eq!(bucket(3), 2);
        assert_eq!(bucket(4), 3);
        assert_eq!(bucket(1023), 10);
        assert_eq!(bucket(1024), 11);
        assert_eq!(bucket(u64::MAX), 64);
        for i in 1..64 {
            assert_eq!(bucket(bucket_low(i)), i);
            assert_eq!(bucket(bucket_high(i) - 1), i);
        }
    }

    #[test]
    fn record_and_percentile() {
        let h = Log2Hist::new();
        for v in [0, 1, 5, 5, 100, 1000, 1000, 1000, 1 << 40] {
            h.record(v);
        }
        let s = h.snapshot();
        assert_eq!(s.iter().sum::<u64>(), 9);
        assert_eq!(s[bucket(1000)], 3);
        assert_eq!(percentile(&s, 50.0, None), Some(127));
        assert_eq!(percentile(&s, 100.0, Some(1 << 40)), Some(1 << 40));
        assert_eq!(percentile(&[0; BUCKETS], 50.0, None), None);
    }
}

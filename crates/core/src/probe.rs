//! The one probe sequence of every open-addressed table in lockmeter: the fixed table
//! ([`crate::fixed`]: the lock registry and its classes, the stack and event tables, and in the
//! preload the profile writer's id maps and the reset baselines), the record tables' index and the
//! time series' sums. Linear probing from a key's hash over a power-of-two number of slots, at
//! most a given number of slots.
//!
//! The record index and the time series keep their own slot layout (see ARCHITECTURE.md, Tables);
//! what every table shares, and what this module is the only copy of, is where a key may be.
//!
//! ```
//! use lockmeter_core::probe::Probe;
//! // A key hashing to slot 6 of 8, probing at most 4 slots: 6, 7, then around to 0, 1.
//! assert_eq!(Probe::new(14, 8, 4).collect::<Vec<_>>(), vec![6, 7, 0, 1]);
//! ```

/// The slots a key probes, in order (an iterator of slot indices, each below the capacity).
#[derive(Debug, Clone)]
pub struct Probe {
    next: usize,
    mask: usize,
    left: usize,
}

impl Probe {
    /// The slots `hash` probes in a table of `cap` slots (a power of two; 0: none), at most
    /// `limit` of them (each slot at most once). Never panics (preload hooks call it): with a
    /// capacity that is not a power of two the slots are still below `cap`, only not all reached.
    #[inline(always)]
    pub fn new(hash: u64, cap: usize, limit: usize) -> Probe {
        let mask = cap.wrapping_sub(1);
        Probe { next: hash as usize & mask, mask, left: limit.min(cap) }
    }
}

impl Iterator for Probe {
    type Item = usize;

    #[inline(always)]
    fn next(&mut self) -> Option<usize> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let i = self.next;
        self.next = (i + 1) & self.mask;
        Some(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visits_each_slot_once_from_the_hash_and_wraps() {
        for cap in [1usize, 2, 8, 64] {
            for h in [0u64, 5, 63, u64::MAX] {
                let v: Vec<usize> = Probe::new(h, cap, usize::MAX).collect();
                assert_eq!(v.len(), cap);
                assert_eq!(v[0], h as usize & (cap - 1));
                let mut s = v.clone();
                s.sort_unstable();
                assert_eq!(s, (0..cap).collect::<Vec<_>>());
                assert!(v.windows(2).all(|w| w[1] == (w[0] + 1) % cap));
            }
        }
    }

    #[test]
    fn bounded_by_the_limit_and_empty_without_slots() {
        assert_eq!(Probe::new(3, 16, 5).count(), 5);
        assert_eq!(Probe::new(3, 16, 0).count(), 0);
        assert_eq!(Probe::new(3, 0, 10).count(), 0);
    }
}

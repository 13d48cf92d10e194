//! Test-and-test-and-set lock with exponential backoff.
//!
//! State: one byte, 0 = free, 1 = held. Lock: spin with plain loads (one policy step per look)
//! until the byte reads 0, then `cmpxchg(0 → 1)`; after a failed `cmpxchg` (another waiter won
//! the race) back off exponentially before looking again (Anderson 1990; ck's `ck_backoff_eb`).
//! Unlock: a release store of 0. Waiters share the line read-only while it is held, so a
//! release costs one invalidation round instead of one per attempt. Unfair.

use crate::primitive::{Ordering::*, spin_loop};
use crate::relax::{Backoff, Relax};
use std::time::Instant;

byte_lock_type!(
    /// Test-and-test-and-set lock with exponential backoff; `P` is the policy of the read-only
    /// spin: see the [module docs](self).
    Ttas,
    Backoff
);

/// Longest backoff after a lost race: 2^10 PAUSEs.
const MAX_BACKOFF_SHIFT: u32 = 10;

impl<P: Relax> Ttas<P> {
    #[inline]
    fn acquire(&self, deadline: Option<Instant>) -> bool {
        let mut p = P::default();
        let mut shift = 0u32;
        let mut n = 0u32;
        loop {
            while self.locked.load(Relaxed) {
                p.relax();
                n = n.wrapping_add(1);
                if let Some(d) = deadline
                    && n.is_multiple_of(64)
                    && Instant::now() >= d
                {
                    return false;
                }
            }
            if self.locked.compare_exchange_weak(false, true, Acquire, Relaxed).is_ok() {
                return true;
            }
            // Lost the race: back off before looking again.
            #[cfg(not(loom))]
            for _ in 0..(1u32 << shift) {
                spin_loop();
            }
            #[cfg(loom)]
            spin_loop();
            shift = (shift + 1).min(MAX_BACKOFF_SHIFT);
        }
    }

    #[inline]
    fn raw_lock(&self) {
        if self.locked.compare_exchange_weak(false, true, Acquire, Relaxed).is_err() {
            self.acquire(None);
        }
    }

    #[inline]
    fn raw_try_lock(&self) -> bool {
        !self.locked.load(Relaxed)
            && self.locked.compare_exchange(false, true, Acquire, Relaxed).is_ok()
    }

    fn raw_lock_until(&self, deadline: Instant) -> bool {
        self.raw_try_lock() || self.acquire(Some(deadline))
    }
}

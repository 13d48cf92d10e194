//! Test-and-set byte lock.
//!
//! State: one byte, 0 = free, 1 = held. Lock: `cmpxchg(0 → 1)` until it succeeds, with one
//! policy step between attempts (a locked `cmpxchg` takes the line exclusive like `xchg`, but a
//! failed one writes nothing, which also keeps the loom model finite). Unlock: a plain release store of 0. Every attempt is a read-modify-write,
//! so the line bounces between waiters on every try; unfair (the releaser often re-acquires
//! from its own cache), but it never hands the lock to a preempted thread: in guests without PV
//! spinlocks Linux falls back to exactly this lock (`virt_spin_lock`).

use crate::primitive::Ordering::*;
use crate::relax::{Pause, Relax};
use std::time::Instant;

byte_lock_type!(
    /// Test-and-set byte lock with spin policy `P`: see the [module docs](self).
    Tas,
    Pause
);

impl<P: Relax> Tas<P> {
    #[inline]
    fn acquire(&self, deadline: Option<Instant>) -> bool {
        let mut p = P::default();
        let mut n = 0u32;
        while self.locked.compare_exchange(false, true, Acquire, Relaxed).is_err() {
            p.relax();
            n = n.wrapping_add(1);
            if let Some(d) = deadline
                && n.is_multiple_of(64)
                && Instant::now() >= d
            {
                return false;
            }
        }
        true
    }

    #[inline]
    fn raw_lock(&self) {
        self.acquire(None);
    }

    #[inline]
    fn raw_try_lock(&self) -> bool {
        self.locked.compare_exchange(false, true, Acquire, Relaxed).is_ok()
    }

    fn raw_lock_until(&self, deadline: Instant) -> bool {
        self.acquire(Some(deadline))
    }
}

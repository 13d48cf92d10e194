//! Test-and-test-and-set lock with exponential backoff.
//!
//! State: one byte, 0 = free, 1 = held. Lock: spin with plain loads (one policy step per look)
//! until the byte reads 0, then `cmpxchg(0 → 1)`; after a failed `cmpxchg` (another waiter won
//! the race) back off exponentially before looking again (Anderson 1990; ck's `ck_backoff_eb`).
//! Unlock: a release store of 0. Waiters share the line read-only while it is held, so a
//! release costs one invalidation round instead of one per attempt. Unfair.

use crate::primitive::{AtomicBool, Ordering::*, spin_loop};
use crate::relax::{Backoff, Relax};
use core::marker::PhantomData;
use core::time::Duration;
use std::time::Instant;

/// Test-and-test-and-set lock with exponential backoff; `P` is the policy of the read-only
/// spin: see the [module docs](self).
#[derive(Debug)]
#[repr(C)]
pub struct Ttas<P = Backoff> {
    locked: AtomicBool,
    _p: PhantomData<fn() -> P>,
}

impl<P> Ttas<P> {
    maybe_const_fn! {
        /// An unlocked lock.
        pub fn new() -> Self {
            Ttas { locked: AtomicBool::new(false), _p: PhantomData }
        }
    }
}

impl<P> Default for Ttas<P> {
    fn default() -> Self {
        Self::new()
    }
}

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
                if let Some(d) = deadline {
                    if n % 64 == 0 && Instant::now() >= d {
                        return false;
                    }
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
}

// SAFETY: only the thread whose cmpxchg(false → true) succeeded holds the lock; only it stores
// `false`.
unsafe impl<P: Relax> lock_api::RawMutex for Ttas<P> {
    raw_init!();
    type GuardMarker = lock_api::GuardSend;

    #[inline]
    fn lock(&self) {
        if self.locked.compare_exchange_weak(false, true, Acquire, Relaxed).is_err() {
            self.acquire(None);
        }
    }
    #[inline]
    fn try_lock(&self) -> bool {
        !self.locked.load(Relaxed)
            && self.locked.compare_exchange(false, true, Acquire, Relaxed).is_ok()
    }
    #[inline]
    unsafe fn unlock(&self) {
        self.locked.store(false, Release);
    }
    #[inline]
    fn is_locked(&self) -> bool {
        self.locked.load(Relaxed)
    }
}

// SAFETY: as for `RawMutex`; a timed-out attempt changed nothing.
unsafe impl<P: Relax> lock_api::RawMutexTimed for Ttas<P> {
    type Duration = Duration;
    type Instant = Instant;
    fn try_lock_for(&self, timeout: Duration) -> bool {
        lock_api::RawMutex::try_lock(self) || self.acquire(Some(Instant::now() + timeout))
    }
    fn try_lock_until(&self, deadline: Instant) -> bool {
        lock_api::RawMutex::try_lock(self) || self.acquire(Some(deadline))
    }
}

//! Test-and-set byte lock.
//!
//! State: one byte, 0 = free, 1 = held. Lock: `cmpxchg(0 → 1)` until it succeeds, with one
//! policy step between attempts (a locked `cmpxchg` takes the line exclusive like `xchg`, but a
//! failed one writes nothing, which also keeps the loom model finite). Unlock: a plain release store of 0. Every attempt is a read-modify-write,
//! so the line bounces between waiters on every try; unfair (the releaser often re-acquires
//! from its own cache), but it never hands the lock to a preempted thread: in guests without PV
//! spinlocks Linux falls back to exactly this lock (`virt_spin_lock`).

use crate::primitive::{AtomicBool, Ordering::*};
use crate::relax::{Pause, Relax};
use core::marker::PhantomData;
use core::time::Duration;
use std::time::Instant;

/// Test-and-set byte lock with spin policy `P`: see the [module docs](self).
#[derive(Debug)]
#[repr(C)]
pub struct Tas<P = Pause> {
    locked: AtomicBool,
    _p: PhantomData<fn() -> P>,
}

impl<P> Tas<P> {
    maybe_const_fn! {
        /// An unlocked lock.
        pub fn new() -> Self {
            Tas { locked: AtomicBool::new(false), _p: PhantomData }
        }
    }
}

impl<P> Default for Tas<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Relax> Tas<P> {
    #[inline]
    fn acquire(&self, deadline: Option<Instant>) -> bool {
        let mut p = P::default();
        let mut n = 0u32;
        while self.locked.compare_exchange(false, true, Acquire, Relaxed).is_err() {
            p.relax();
            n = n.wrapping_add(1);
            if let Some(d) = deadline {
                if n % 64 == 0 && Instant::now() >= d {
                    return false;
                }
            }
        }
        true
    }
}

// SAFETY: only the thread whose cmpxchg(false → true) succeeded holds the lock; only it stores `false`.
unsafe impl<P: Relax> lock_api::RawMutex for Tas<P> {
    raw_init!();
    type GuardMarker = lock_api::GuardSend;

    #[inline]
    fn lock(&self) {
        self.acquire(None);
    }
    #[inline]
    fn try_lock(&self) -> bool {
        self.locked.compare_exchange(false, true, Acquire, Relaxed).is_ok()
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
unsafe impl<P: Relax> lock_api::RawMutexTimed for Tas<P> {
    type Duration = Duration;
    type Instant = Instant;
    fn try_lock_for(&self, timeout: Duration) -> bool {
        self.acquire(Some(Instant::now() + timeout))
    }
    fn try_lock_until(&self, deadline: Instant) -> bool {
        self.acquire(Some(deadline))
    }
}

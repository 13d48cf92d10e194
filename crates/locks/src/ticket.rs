//! Ticket lock.
//!
//! State: two `u32` counters, `next` (the next ticket to hand out) and `serving` (the ticket
//! that holds the lock); free when `next == serving`. Lock: `my = fetch_add(next, 1)`, then spin
//! (one policy step per look) until `serving == my`. Unlock: the holder stores `serving + 1`
//! (a plain store: only the holder writes `serving`). FIFO and fair, but every waiter spins on
//! `serving`, and the lock is granted to the next ticket even when that thread is preempted
//! (lock-waiter preemption): collapse under oversubscription. No timed lock: a ticket taken
//! cannot be given back.

use crate::primitive::{AtomicU32, Ordering::*};
use crate::relax::{Pause, Relax};
use core::marker::PhantomData;

/// Ticket lock with spin policy `P`: see the [module docs](self).
#[derive(Debug)]
#[repr(C)]
pub struct Ticket<P = Pause> {
    next: AtomicU32,
    serving: AtomicU32,
    _p: PhantomData<fn() -> P>,
}

impl<P> Ticket<P> {
    maybe_const_fn! {
        /// An unlocked lock.
        pub fn new() -> Self {
            Ticket { next: AtomicU32::new(0), serving: AtomicU32::new(0), _p: PhantomData }
        }
    }
}

impl<P> Default for Ticket<P> {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: tickets are unique (fetch_add); a thread holds the lock exactly while `serving` equals
// its ticket, and only the holder advances `serving`.
unsafe impl<P: Relax> lock_api::RawMutex for Ticket<P> {
    raw_init!();
    type GuardMarker = lock_api::GuardSend;

    #[inline]
    fn lock(&self) {
        let my = self.next.fetch_add(1, Relaxed);
        let mut p = P::default();
        while self.serving.load(Acquire) != my {
            p.relax();
        }
    }
    #[inline]
    fn try_lock(&self) -> bool {
        // `next == serving` means free; if `serving` is stale, `next` is ahead of it and the
        // cmpxchg fails.
        let s = self.serving.load(Acquire);
        self.next.compare_exchange(s, s.wrapping_add(1), Acquire, Relaxed).is_ok()
    }
    #[inline]
    unsafe fn unlock(&self) {
        let s = self.serving.load(Relaxed);
        self.serving.store(s.wrapping_add(1), Release);
    }
    #[inline]
    fn is_locked(&self) -> bool {
        self.next.load(Relaxed) != self.serving.load(Relaxed)
    }
}

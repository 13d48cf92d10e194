//! CLH queue lock (Craig; Landin & Hagersten 1994).
//!
//! State: `tail`, a pointer to the last node enqueued (null: never used), and `holder`, the
//! holder's node (holder-only, for the guard-less interface). Node state: `LOCKED` (1: its owner
//! holds or waits for the lock), `RELEASED` (0), `PARKED` (2: the successor sleeps on it).
//!
//! Lock: mark my node `LOCKED`, `pred = swap(tail, me)`, and spin on the *predecessor's* node
//! until it is `RELEASED`; then recycle the predecessor's node (it is mine now). Unlock: store
//! `RELEASED` into my node, which from then on belongs to my successor (or stays in `tail`). One
//! swap and one store, no cmpxchg. The implicit queue makes a real `try_lock` impossible (one
//! cannot leave the queue): [`try_lock`](lock_api::RawMutex::try_lock) only succeeds on a lock
//! that was never taken, and fails otherwise (LiTL skips CLH for programs that use trylock).

use crate::mcs::grant;
use crate::primitive::{AtomicPtr, Ordering::*};
use crate::qnode::{PNode, pfree, pgive, ptake};
use crate::relax::{Pause, Relax};
use core::marker::PhantomData;
use core::ptr::null_mut;

const RELEASED: u32 = 0;
const LOCKED: u32 = 1;

/// CLH queue lock with wait policy `P`: see the [module docs](self).
#[derive(Debug)]
pub struct Clh<P = Pause> {
    tail: AtomicPtr<PNode>,
    holder: AtomicPtr<PNode>,
    _p: PhantomData<fn() -> P>,
}

// SAFETY: the raw pointers point to nodes shared through atomics; no thread-bound data.
unsafe impl<P> Send for Clh<P> {}
// SAFETY: as above; every shared access goes through an atomic.
unsafe impl<P> Sync for Clh<P> {}

impl<P> Clh<P> {
    maybe_const_fn! {
        /// An unlocked lock.
        pub fn new() -> Self {
            Clh { tail: AtomicPtr::new(null_mut()), holder: AtomicPtr::new(null_mut()), _p: PhantomData }
        }
    }
}

impl<P> Default for Clh<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P> Drop for Clh<P> {
    fn drop(&mut self) {
        let t = self.tail.load(Relaxed);
        if !t.is_null() {
            // SAFETY: the lock is gone, so the last node is referenced by nobody else.
            unsafe { pfree(t) };
        }
    }
}

// SAFETY: the queue order is the swap order on `tail`; a thread holds the lock from the moment
// its predecessor's node reads RELEASED (or it found the queue never used) until it releases its
// own node, which only its successor waits on.
unsafe impl<P: Relax> lock_api::RawMutex for Clh<P> {
    raw_init!();
    type GuardMarker = lock_api::GuardSend;

    fn lock(&self) {
        let me = ptake();
        // SAFETY: our own live node.
        unsafe { (*me).state.store(LOCKED, Relaxed) };
        let pred = self.tail.swap(me, AcqRel);
        if !pred.is_null() {
            // SAFETY: `pred` is owned by us from the swap on; its old owner only releases it.
            let p = unsafe { &*pred };
            // CLH waits for the predecessor's word to become RELEASED; with Park the waiter marks
            // the predecessor's node PARKED (WAITING is not used: LOCKED plays its part).
            if P::PARKS {
                // SAFETY: `p` is live until we give it back below.
                unsafe { wait_released(p) };
            } else {
                let mut r = P::default();
                while p.state.load(Acquire) != RELEASED {
                    r.relax();
                }
            }
            // SAFETY: nobody references the predecessor's node any more; recycle it.
            unsafe { pgive(pred) };
        }
        self.holder.store(me, Relaxed);
    }

    fn try_lock(&self) -> bool {
        if !self.tail.load(Relaxed).is_null() {
            return false;
        }
        let me = ptake();
        // SAFETY: our own live node.
        unsafe { (*me).state.store(LOCKED, Relaxed) };
        if self.tail.compare_exchange(null_mut(), me, AcqRel, Relaxed).is_ok() {
            self.holder.store(me, Relaxed);
            true
        } else {
            // SAFETY: never published.
            unsafe { pgive(me) };
            false
        }
    }

    unsafe fn unlock(&self) {
        let me = self.holder.swap(null_mut(), Relaxed);
        // SAFETY: our node is live; after this store it belongs to the successor.
        unsafe { grant::<P>(me, RELEASED) };
    }

    fn is_locked(&self) -> bool {
        // A heuristic, as lock_api allows: the holder publishes its node after acquiring and
        // clears it before releasing.
        !self.holder.load(Relaxed).is_null()
    }
}

/// Spin-then-park wait for a CLH predecessor: LOCKED → (PARKED) → RELEASED.
///
/// # Safety
/// `p` stays live until it reads RELEASED.
unsafe fn wait_released(p: &PNode) {
    // MCS's `wait_granted` waits WAITING(0) → GRANTED; CLH's "wait" value is LOCKED(1).
    let mut b = crate::relax::SpinBudget::new(crate::relax::Park::SPIN_NS);
    while p.state.load(Acquire) != RELEASED {
        if !b.spin() {
            if p.state.compare_exchange(LOCKED, 2, Acquire, Acquire).is_err() {
                return; // released meanwhile
            }
            while p.state.load(Acquire) != RELEASED {
                crate::futex::sys::wait(&p.state, 2, None);
            }
            return;
        }
    }
}

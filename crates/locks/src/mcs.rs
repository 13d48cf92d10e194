//! MCS queue lock (Mellor-Crummey & Scott 1991).
//!
//! State: `tail`, a pointer to the last queue node (null: free), and `holder`, the holder's node
//! (written and read only by the holder, so that the guard-less `lock_api` interface can find it
//! at unlock). Nodes come from a per-thread free list (see `qnode`), one per lock held.
//!
//! Node state: `WAITING` (0), `GRANTED` (1), `PARKED` (2: the waiter sleeps on the word).
//!
//! Lock: `pred = swap(tail, me)`; if there was a predecessor, link `pred.next = me` and wait on
//! my own node until it is `GRANTED` (local spinning; with [`Park`] the
//! waiter marks itself `PARKED` after a bounded spin and sleeps on a futex). Unlock: if no
//! successor is linked, `cmpxchg(tail, me → null)`; if that fails a successor is linking itself:
//! wait for `next`, then grant it. FIFO: lock-waiter preemption stalls the queue.

use crate::primitive::{AtomicPtr, Ordering::*, spin_loop};
use crate::qnode::{PNode, pgive, ptake};
use crate::relax::{Park, Pause, Relax, SpinBudget};
use core::marker::PhantomData;
use core::ptr::null_mut;

const WAITING: u32 = 0;
const GRANTED: u32 = 1;
const PARKED: u32 = 2;

/// MCS queue lock with wait policy `P` (spinning, or [`Park`]): see the [module docs](self).
#[derive(Debug)]
#[repr(C)]
pub struct Mcs<P = Pause> {
    tail: AtomicPtr<PNode>,
    holder: AtomicPtr<PNode>,
    _p: PhantomData<fn() -> P>,
}

// SAFETY: the raw pointers point to nodes shared through atomics; no thread-bound data.
unsafe impl<P> Send for Mcs<P> {}
// SAFETY: as above; every shared access goes through an atomic.
unsafe impl<P> Sync for Mcs<P> {}

impl<P> Mcs<P> {
    maybe_const_fn! {
        /// An unlocked lock.
        pub fn new() -> Self {
            Mcs { tail: AtomicPtr::new(null_mut()), holder: AtomicPtr::new(null_mut()), _p: PhantomData }
        }
    }
}

impl<P> Default for Mcs<P> {
    fn default() -> Self {
        Self::new()
    }
}

/// Waits until the word at `state` leaves `WAITING` (spinning under `P`, or spin-then-park).
///
/// # Safety
/// `state` stays valid until it is set to `GRANTED` by the granter.
#[inline]
pub(crate) unsafe fn wait_granted<P: Relax>(n: &PNode, free: u32) {
    // `free` is the value that means "go" (MCS: GRANTED; CLH: the predecessor's RELEASED).
    if P::PARKS {
        let mut b = SpinBudget::new(Park::SPIN_NS);
        loop {
            let s = n.state.load(Acquire);
            if s == free {
                return;
            }
            if !b.spin() {
                break;
            }
        }
        if n.state.compare_exchange(WAITING, PARKED, Acquire, Acquire).is_err() {
            return; // granted meanwhile (the only other transition)
        }
        while n.state.load(Acquire) != free {
            crate::futex::sys::wait(&n.state, PARKED, None);
        }
    } else {
        let mut p = P::default();
        while n.state.load(Acquire) != free {
            p.relax();
        }
    }
}

/// Sets a waiter's word to `value` and wakes it if it sleeps.
///
/// # Safety
/// `n` is a live node. It may be reused by its owner as soon as the store is visible, so after
/// the swap only its address is used (as the futex key).
#[inline]
pub(crate) unsafe fn grant<P: Relax>(n: *const PNode, value: u32) {
    // SAFETY: `n` is live until the swap/store below makes the grant visible.
    let state = unsafe { &(*n).state };
    if P::PARKS {
        if state.swap(value, Release) == PARKED {
            crate::futex::sys::wake_raw(state as *const _, 1);
        }
    } else {
        state.store(value, Release);
    }
}

impl<P: Relax> Mcs<P> {
    /// Takes the lock with the caller's queue node `me` (for callers that cannot allocate: the
    /// node pool of [`crate::cabi`]).
    ///
    /// # Safety
    /// `me` is a live node that nobody else uses until [`Self::unlock_node`] returns it.
    pub(crate) unsafe fn lock_node(&self, me: *mut PNode) {
        // SAFETY: `me` is a live node owned by this thread (the caller's contract).
        let n = unsafe { &*me };
        n.next.store(null_mut(), Relaxed);
        n.state.store(WAITING, Relaxed);
        let pred = self.tail.swap(me, AcqRel);
        if !pred.is_null() {
            // SAFETY: `pred` stays live until it grants us (it waits for our link first).
            unsafe { (*pred).next.store(me, Release) };
            // SAFETY: our own node, live until we give it back at unlock.
            unsafe { wait_granted::<P>(n, GRANTED) };
        }
        self.holder.store(me, Relaxed);
    }

    /// Tries to take the free lock with the caller's node `me`; on failure `me` was never
    /// published and is the caller's again.
    ///
    /// # Safety
    /// As for [`Self::lock_node`].
    pub(crate) unsafe fn try_lock_node(&self, me: *mut PNode) -> bool {
        if !self.tail.load(Relaxed).is_null() {
            return false;
        }
        // SAFETY: `me` is a live node owned by this thread.
        let n = unsafe { &*me };
        n.next.store(null_mut(), Relaxed);
        n.state.store(WAITING, Relaxed);
        if self.tail.compare_exchange(null_mut(), me, AcqRel, Relaxed).is_ok() {
            self.holder.store(me, Relaxed);
            true
        } else {
            false
        }
    }

    /// Releases the lock; returns the holder's node, which nobody references any more.
    ///
    /// # Safety
    /// The lock is held (taken through [`Self::lock_node`] or [`Self::try_lock_node`]).
    pub(crate) unsafe fn unlock_node(&self) -> *mut PNode {
        let me = self.holder.load(Relaxed);
        // SAFETY: the holder's node is live until given back by our caller.
        let n = unsafe { &*me };
        let mut next = n.next.load(Acquire);
        if next.is_null() {
            if self.tail.compare_exchange(me, null_mut(), Release, Relaxed).is_ok() {
                return me;
            }
            // A successor swapped itself in and is about to link.
            loop {
                next = n.next.load(Acquire);
                if !next.is_null() {
                    break;
                }
                spin_loop();
            }
        }
        // SAFETY: `next` is a live waiting node.
        unsafe { grant::<P>(next, GRANTED) };
        me
    }
}

// SAFETY: a thread holds the lock from the moment it swaps itself into an empty queue, or its
// node is GRANTED, until it grants its successor or empties the queue; grants go to one node.
unsafe impl<P: Relax> lock_api::RawMutex for Mcs<P> {
    raw_init!();
    type GuardMarker = lock_api::GuardSend;

    fn lock(&self) {
        // SAFETY: a fresh node from this thread's pool, given back at unlock.
        unsafe { self.lock_node(ptake()) }
    }

    fn try_lock(&self) -> bool {
        if !self.tail.load(Relaxed).is_null() {
            return false;
        }
        let me = ptake();
        // SAFETY: a fresh node from this thread's pool.
        if unsafe { self.try_lock_node(me) } {
            true
        } else {
            // SAFETY: never published.
            unsafe { pgive(me) };
            false
        }
    }

    unsafe fn unlock(&self) {
        // SAFETY: the caller holds the lock (the RawMutex contract).
        let me = unsafe { self.unlock_node() };
        // SAFETY: the successor only touches its own node from now on.
        unsafe { pgive(me) };
    }

    fn is_locked(&self) -> bool {
        !self.tail.load(Relaxed).is_null()
    }
}

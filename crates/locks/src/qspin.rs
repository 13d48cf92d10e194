//! A qspinlock-style 4-byte queued lock (Linux `kernel/locking/qspinlock.c`, without PV).
//!
//! State: one `u32`:
//!
//! ```text
//!  31            16 15     9  8  7        0
//! +----------------+--------+---+----------+
//! | tail (node+1)  |   0    | P |  locked  |
//! +----------------+--------+---+----------+
//! ```
//!
//! - `locked` (1): the lock is held.
//! - `P`, pending: the *first* contender waits here, spinning on the lock word, without a node.
//! - `tail`: index + 1 of the last node of an MCS queue of further contenders (0: no queue).
//!   Nodes live in a process-wide arena so that the tail fits 16 bits (see `qnode`).
//!
//! Lock: `cmpxchg(0 → locked)`. Otherwise, if nobody is pending or queued, set pending, wait for
//! the holder to leave, then turn pending into locked. Otherwise queue: swap the tail, link
//! behind the previous tail and spin on the own node until it becomes the queue head; the head
//! spins on the lock word until both `locked` and `pending` are clear, takes the lock (clearing
//! the tail if it is the last), and makes its successor the head. A thread needs its node only
//! while it waits: it gives it back before `lock` returns.
//!
//! Unlock: `fetch_sub(locked)`. The kernel stores a 0 byte into the locked byte; Rust's memory
//! model does not allow mixed-size atomic accesses, so this is one RMW instead of one store.

use crate::primitive::{AtomicU32, Ordering::*, spin_loop};
use crate::qnode::{ArenaPool, HEAD, Pool};
use crate::relax::{Pause, Relax};
use core::marker::PhantomData;

const LOCKED: u32 = 1;
const LOCKED_MASK: u32 = 0xff;
const PENDING: u32 = 1 << 8;
const TAIL_SHIFT: u32 = 16;
const TAIL_MASK: u32 = 0xffff << TAIL_SHIFT;
/// How long a newcomer waits for a pending → locked transition in flight (x86's value).
const PENDING_LOOPS: u32 = 1 << 9;

/// The 4-byte queued spinlock with spin policy `P`: see the [module docs](self).
#[derive(Debug)]
pub struct QSpin<P = Pause> {
    w: Word<ArenaPool, P>,
}

impl<P> QSpin<P> {
    maybe_const_fn! {
        /// An unlocked lock.
        pub fn new() -> Self {
            QSpin { w: Word::new() }
        }
    }
}

impl<P> Default for QSpin<P> {
    fn default() -> Self {
        Self::new()
    }
}

/// The lock word and the algorithm, over the node pool `N` and spin policy `P`: [`QSpin`] (the
/// arena's nodes) and the C-ABI `QSpinC` (`cabi_queue.rs`, nodes in a mapped array) are this.
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct Word<N, P> {
    val: AtomicU32,
    _p: PhantomData<fn() -> (N, P)>,
}

impl<N, P> Word<N, P> {
    maybe_const_fn! {
        /// An unlocked word.
        pub(crate) fn new() -> Self {
            Word { val: AtomicU32::new(0), _p: PhantomData }
        }
    }
}

impl<N: Pool, P: Relax> Word<N, P> {
    #[inline]
    pub(crate) fn lock(&self) {
        if let Err(v) = self.val.compare_exchange(0, LOCKED, Acquire, Relaxed) {
            self.lock_slow(v);
        }
    }

    #[inline]
    pub(crate) fn try_lock(&self) -> bool {
        self.val.compare_exchange(0, LOCKED, Acquire, Relaxed).is_ok()
    }

    /// Releases the lock (held, by any thread).
    #[inline]
    pub(crate) fn unlock(&self) {
        self.val.fetch_sub(LOCKED, Release);
    }

    #[inline]
    pub(crate) fn is_locked(&self) -> bool {
        self.val.load(Relaxed) & LOCKED_MASK != 0
    }

    #[cold]
    fn lock_slow(&self, mut val: u32) {
        let mut r = P::default();
        // A pending → locked hand-over in progress: wait a bounded while for it to finish.
        if val == PENDING {
            let mut n = PENDING_LOOPS;
            while val == PENDING && n > 0 {
                spin_loop();
                val = self.val.load(Relaxed);
                n -= 1;
            }
        }
        if val & !LOCKED_MASK == 0 {
            // Nobody pending or queued: try to become the pending waiter.
            let old = self.val.fetch_or(PENDING, Acquire);
            if old & !LOCKED_MASK == 0 {
                if old & LOCKED_MASK != 0 {
                    while self.val.load(Acquire) & LOCKED_MASK != 0 {
                        r.relax();
                    }
                }
                // pending,0 → 0,locked (the tail may have changed meanwhile).
                self.val.fetch_sub(PENDING - LOCKED, Acquire);
                return;
            }
            // Someone else is pending or queued: undo our bit if we set it, then queue.
            if old & PENDING == 0 {
                self.val.fetch_and(!PENDING, Relaxed);
            }
        }
        self.lock_queued();
    }

    fn lock_queued(&self) {
        let mut r = P::default();
        let idx = N::take();
        let node = N::node(idx);
        if self.val.load(Relaxed) == 0 && self.try_lock() {
            N::give(idx);
            return;
        }
        let tail = (idx + 1) << TAIL_SHIFT;
        // xchg_tail: publish our node as the new tail, keeping locked and pending.
        let mut cur = self.val.load(Relaxed);
        let old = loop {
            match self.val.compare_exchange_weak(cur, (cur & !TAIL_MASK) | tail, AcqRel, Relaxed) {
                Ok(v) => break v,
                Err(v) => cur = v,
            }
        };
        if old & TAIL_MASK != 0 {
            let prev = N::node((old >> TAIL_SHIFT) - 1);
            prev.next.store(idx + 1, Release);
            while node.state.load(Acquire) != HEAD {
                r.relax();
            }
        }
        // Queue head: wait for the holder and any pending waiter to leave.
        let mut val;
        loop {
            val = self.val.load(Acquire);
            if val & (LOCKED_MASK | PENDING) == 0 {
                break;
            }
            r.relax();
        }
        // Last in the queue: take the lock and clear the tail in one go. If that fails, someone
        // queued behind us (or set pending, saw the tail, and is queueing behind us).
        if val & TAIL_MASK == tail
            && self.val.compare_exchange(val, LOCKED, Acquire, Relaxed).is_ok()
        {
            N::give(idx);
            return;
        }
        self.val.fetch_or(LOCKED, Acquire);
        let next = loop {
            let n = node.next.load(Acquire);
            if n != 0 {
                break n;
            }
            spin_loop();
        };
        N::node(next - 1).state.store(HEAD, Release);
        N::give(idx);
    }
}

// SAFETY: the lock is held exactly while the locked byte is set; it is set only by a cmpxchg or
// fetch_or/fetch_sub from a state where no one else holds it (the pending waiter and the queue
// head wait for the byte to clear first, and only one of them can be pending or head).
unsafe impl<P: Relax> lock_api::RawMutex for QSpin<P> {
    raw_init!();
    type GuardMarker = lock_api::GuardSend;

    #[inline]
    fn lock(&self) {
        self.w.lock()
    }
    #[inline]
    fn try_lock(&self) -> bool {
        self.w.try_lock()
    }
    #[inline]
    unsafe fn unlock(&self) {
        self.w.unlock()
    }
    #[inline]
    fn is_locked(&self) -> bool {
        self.w.is_locked()
    }
}

//! Seed 002's unfair queued spinlock (Waiman Long's 2014 `CONFIG_PARAVIRT_UNFAIR_LOCKS`
//! series): a queued lock whose waiters may *steal* the lock, with a chance that falls with
//! their distance from the queue head; with seed 002's statistics (`lsteal_cnts`,
//! `trylock_cnt`).
//!
//! State:
//! - `locked` (`u32`, 0/1): the lock itself. Every acquisition is a `cmpxchg(0 → 1)` on it, which
//!   is all mutual exclusion rests on; the queue only decides who looks at it how often.
//! - `tail` (`u32`): index + 1 of the last queue node (0: empty queue). Nodes live in the
//!   process-wide arena (see `qnode`), because a node that stole the lock stays in the queue
//!   after its thread has left `lock`.
//! - `head_seq` (`u64`): the enqueue sequence number of the current queue head. A node's queue
//!   position is `1 + its seq - head_seq` (1 = head).
//!
//! Node state: `WAITING` → `HEAD` (made head by its predecessor) or `WAITING` → `STOLEN` (its
//! thread stole the lock and left). The head spins on `locked` and takes it when free, then makes
//! its successor the head. A waiter at position p ≥ 2 tries to steal every `2^min(3 + p - 2, 10)`
//! spins (the 2014 patch's `lsteal_mask`: 2^3-1 doubling per position up to 2^10-1). A thread
//! that steals marks its node `STOLEN` and returns; whoever later makes that node head skips it
//! (frees it and moves on to its successor). Arriving threads try once before queueing: position
//! 0 of the statistics ("steals before entering the queue").
//!
//! Unlock: a release store of 0 to `locked`.

use crate::primitive::{AtomicU32, AtomicU64, Ordering::*, spin_loop};
use crate::qnode::{ArenaPool, HEAD, Pool, STOLEN, WAITING};
use crate::relax::{Pause, Relax};
use core::marker::PhantomData;
use core::sync::atomic::AtomicU64 as StatU64;

/// Number of queue positions the statistics distinguish (the last one collects the rest).
pub const STEAL_POSITIONS: usize = 12;

/// Seed 002's statistics: steals by queue position, and trylock attempts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StealStats {
    /// `lsteal_cnts`: steals by queue position. Index 0: on arrival, before queueing (including
    /// fast-path acquisitions that overtook a non-empty queue); index p ≥ 2: by the waiter at
    /// position p (1 is the head, which never steals); the last index counts all positions from
    /// there on.
    pub steals: [u64; STEAL_POSITIONS],
    /// `trylock_cnt`: steal attempts (a `cmpxchg` on a lock that looked free) outside the head.
    pub trylocks: u64,
    /// Threads that entered the queue.
    pub queued: u64,
    /// Acquisitions by the queue head (not steals).
    pub head_acquisitions: u64,
}

#[derive(Debug, Default)]
struct Counters {
    steals: [StatU64; STEAL_POSITIONS],
    trylocks: StatU64,
    queued: StatU64,
    head: StatU64,
}

/// Whether `s` counts anything (a constant of its type).
#[inline(always)]
fn counts<S: Steals>(_: &S) -> bool {
    S::COUNTS
}

#[inline]
fn bump(c: &StatU64) {
    c.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
}

/// What the algorithm tells its statistics: [`UnfairQ`]'s counters, or nothing (`()`: the C-ABI
/// lock, which has no room for them).
pub(crate) trait Steals {
    /// Whether anything is counted (the fast path then checks for a queue it overtook).
    const COUNTS: bool;
    /// A steal attempt: a `cmpxchg` on a lock that looked free, outside the head.
    fn trylock(&self) {}
    /// A steal at queue position `pos` (0: on arrival).
    fn steal(&self, pos: u64) {
        let _ = pos;
    }
    /// A thread entered the queue.
    fn queued(&self) {}
    /// An acquisition by the queue head.
    fn head(&self) {}
}

impl Steals for () {
    const COUNTS: bool = false;
}

impl Steals for Counters {
    const COUNTS: bool = true;
    fn trylock(&self) {
        bump(&self.trylocks)
    }
    fn steal(&self, pos: u64) {
        bump(&self.steals[(pos as usize).min(STEAL_POSITIONS - 1)])
    }
    fn queued(&self) {
        bump(&self.queued)
    }
    fn head(&self) {
        bump(&self.head)
    }
}

/// The unfair queued lock with spin policy `P`: see the [module docs](self).
#[derive(Debug)]
pub struct UnfairQ<P = Pause> {
    q: Queue<ArenaPool, P>,
    stats: Counters,
}

impl<P> UnfairQ<P> {
    maybe_const_fn! {
        /// An unlocked lock.
        pub fn new() -> Self {
            UnfairQ {
                q: Queue::new(),
                stats: Counters {
                    steals: [const { StatU64::new(0) }; STEAL_POSITIONS],
                    trylocks: StatU64::new(0),
                    queued: StatU64::new(0),
                    head: StatU64::new(0),
                },
            }
        }
    }

    /// A copy of the steal statistics.
    pub fn steal_stats(&self) -> StealStats {
        let l = |c: &StatU64| c.load(core::sync::atomic::Ordering::Relaxed);
        StealStats {
            steals: core::array::from_fn(|i| l(&self.stats.steals[i])),
            trylocks: l(&self.stats.trylocks),
            queued: l(&self.stats.queued),
            head_acquisitions: l(&self.stats.head),
        }
    }
}

impl<P> Default for UnfairQ<P> {
    fn default() -> Self {
        Self::new()
    }
}

/// Spins between steal attempts at queue position `pos` (≥ 2), minus one: `lsteal_mask`.
#[inline]
fn steal_mask(pos: u64) -> u32 {
    let shift = (3 + pos.saturating_sub(2)).min(10) as u32;
    (1u32 << shift) - 1
}

/// The lock's state and the algorithm, over the node pool `N` and spin policy `P`: [`UnfairQ`]
/// (the arena's nodes, with statistics) and the C-ABI `UnfairC` (`cabi_queue.rs`, nodes in a
/// mapped array, no statistics) are this.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Queue<N, P> {
    locked: AtomicU32,
    tail: AtomicU32,
    head_seq: AtomicU64,
    _p: PhantomData<fn() -> (N, P)>,
}

impl<N, P> Queue<N, P> {
    maybe_const_fn! {
        /// An unlocked lock.
        pub(crate) fn new() -> Self {
            Queue {
                locked: AtomicU32::new(0),
                tail: AtomicU32::new(0),
                head_seq: AtomicU64::new(0),
                _p: PhantomData,
            }
        }
    }
}

impl<N: Pool, P: Relax> Queue<N, P> {
    #[inline]
    pub(crate) fn try_lock(&self) -> bool {
        self.locked.compare_exchange(0, 1, Acquire, Relaxed).is_ok()
    }

    #[inline]
    pub(crate) fn lock(&self, s: &impl Steals) {
        if self.try_lock() {
            if counts(s) && self.tail.load(Relaxed) != 0 {
                s.steal(0);
            }
            return;
        }
        self.lock_slow(s);
    }

    /// Releases the lock (held, by any thread).
    #[inline]
    pub(crate) fn unlock(&self) {
        self.locked.store(0, Release);
    }

    #[inline]
    pub(crate) fn is_locked(&self) -> bool {
        self.locked.load(Relaxed) != 0
    }

    #[cold]
    fn lock_slow(&self, s: &impl Steals) {
        let mut r = P::default();
        s.trylock();
        if self.locked.load(Relaxed) == 0 && self.try_lock() {
            s.steal(0);
            return;
        }
        s.queued();
        let idx = N::take();
        let node = N::node(idx);
        let pred = self.tail.swap(idx + 1, AcqRel);
        if pred == 0 {
            let seq = self.head_seq.load(Relaxed).wrapping_add(1);
            node.seq.store(seq, Relaxed);
            self.head_seq.store(seq, Relaxed);
        } else {
            let p = N::node(pred - 1);
            // `p` cannot be freed before we link: whoever skips it waits for its `next`.
            node.seq.store(p.seq.load(Relaxed).wrapping_add(1), Relaxed);
            p.next.store(idx + 1, Release);
            let mut spins = 0u32;
            loop {
                if node.state.load(Acquire) == HEAD {
                    break;
                }
                spins = spins.wrapping_add(1);
                let pos = node
                    .seq
                    .load(Relaxed)
                    .wrapping_sub(self.head_seq.load(Relaxed))
                    .wrapping_add(1);
                if pos >= 2 && spins & steal_mask(pos) == 0 && self.locked.load(Relaxed) == 0 {
                    s.trylock();
                    if self.try_lock() {
                        if node.state.compare_exchange(WAITING, STOLEN, AcqRel, Acquire).is_ok() {
                            s.steal(pos);
                            return; // our node stays queued; whoever passes over it gives it back
                        }
                        // Made head meanwhile: we hold the lock, so just pass headship on.
                        s.head();
                        self.pass_on(idx);
                        return;
                    }
                }
                r.relax();
            }
        }
        // Queue head: spin on the lock word.
        loop {
            if self.locked.load(Relaxed) == 0 && self.try_lock() {
                break;
            }
            r.relax();
        }
        s.head();
        self.pass_on(idx);
    }

    /// Node `idx` leaves the head of the queue: make the next non-stolen node the head.
    fn pass_on(&self, idx: u32) {
        let mut cur = idx;
        loop {
            let c = N::node(cur);
            let mut nx = c.next.load(Acquire);
            if nx == 0 {
                if self.tail.compare_exchange(cur + 1, 0, AcqRel, Relaxed).is_ok() {
                    N::give(cur);
                    return;
                }
                loop {
                    nx = c.next.load(Acquire);
                    if nx != 0 {
                        break;
                    }
                    spin_loop();
                }
            }
            N::give(cur);
            let m = N::node(nx - 1);
            self.head_seq.store(m.seq.load(Relaxed), Relaxed);
            if m.state.compare_exchange(WAITING, HEAD, AcqRel, Acquire).is_ok() {
                return;
            }
            // `m` stole the lock and left: skip it (its state is STOLEN; we now own it).
            debug_assert_eq!(m.state.load(Relaxed), STOLEN);
            cur = nx - 1;
        }
    }
}

// SAFETY: every acquisition is a cmpxchg(0 → 1) of `locked`; only the holder stores 0.
unsafe impl<P: Relax> lock_api::RawMutex for UnfairQ<P> {
    raw_init!();
    type GuardMarker = lock_api::GuardSend;

    #[inline]
    fn lock(&self) {
        self.q.lock(&self.stats)
    }
    #[inline]
    fn try_lock(&self) -> bool {
        self.q.try_lock()
    }
    #[inline]
    unsafe fn unlock(&self) {
        self.q.unlock()
    }
    #[inline]
    fn is_locked(&self) -> bool {
        self.q.is_locked()
    }
}

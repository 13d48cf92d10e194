//! The lab's locks as C-ABI lock states, for swapping them in under unmodified programs
//! (`lockmeter run --lock ALGO`, the preload's `swap` module).
//!
//! Every state here fits in [`STATE_BYTES`] bytes aligned to 8 (it lives inside the caller's
//! `pthread_mutex_t`), all-zero bytes mean "unlocked" (so `PTHREAD_MUTEX_INITIALIZER` works),
//! and no operation allocates: the MCS and CLH queue nodes come from a fixed per-thread pool of
//! [`NODES_PER_THREAD`] nodes (one per queue lock the thread holds at once), mapped with `mmap`
//! at the thread's first queue lock and kept after the thread exits (8 KiB per such thread).
//!
//! | [`Algo`] | state | type |
//! |---|---|---|
//! | `tas` | 1 byte | [`Tas<Pause>`](crate::Tas) |
//! | `ttas` | 1 byte | [`Ttas<Backoff>`](crate::Ttas) |
//! | `ticket` | 2 × u32 | [`Ticket<Pause>`](crate::Ticket) |
//! | `mcs`, `mcs:park` | 2 pointers (tail, holder's node) | [`Mcs<Pause>`](crate::Mcs), [`Mcs<Park>`](crate::Mcs) |
//! | `futex` | u32 | [`FutexMutex`] |
//! | `adaptive` | u32 + u64 | [`Adaptive`] |
//! | `qrwlock` ([`rw`]) | u32 + ticket | [`QRwLock<Pause>`](crate::QRwLock) |
//!
//! | `clh` | 2 pointers (tail, holder's node) | [`ClhC`]: CLH whose empty queue is a null tail |
//!
//! Not here (yet): `qspin` and `unfair-q` (their nodes live in an arena that allocates).

pub use crate::cabi_queue::{QSpinC, QUEUE_NODES, UnfairC};
use crate::qnode::PNode;
use crate::relax::{Backoff, Park, Pause};
use crate::{Adaptive, FutexMutex, Mcs, QRwLock, Tas, Ticket, Ttas};
use core::sync::atomic::{AtomicBool, Ordering::*};
use lock_api::{RawMutex, RawRwLock};

/// Bytes a state may take (aligned to 8).
pub const STATE_BYTES: usize = 16;
/// Queue nodes per thread: how many MCS- or CLH-swapped locks one thread can hold at once.
pub const NODES_PER_THREAD: usize = 32;

/// A swappable algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Algo {
    /// Test-and-set.
    Tas = 1,
    /// Test-and-test-and-set with exponential backoff.
    Ttas = 2,
    /// Ticket lock.
    Ticket = 3,
    /// MCS queue lock, spinning.
    Mcs = 4,
    /// MCS queue lock, spin-then-park.
    McsPark = 5,
    /// Drepper's futex mutex.
    Futex = 6,
    /// Spin-then-park with eventual fairness.
    Adaptive = 7,
    /// CLH queue lock ([`ClhC`]), spinning.
    Clh = 8,
    /// Linux-style 4-byte queued spinlock ([`QSpinC`]).
    QSpin = 9,
    /// Seed 002's unfair queued lock ([`UnfairC`]): waiters may steal.
    UnfairQ = 10,
}

/// Every algorithm, in the order help text lists them.
pub const ALGOS: [Algo; 10] = [
    Algo::Tas,
    Algo::Ttas,
    Algo::Ticket,
    Algo::Mcs,
    Algo::McsPark,
    Algo::Futex,
    Algo::Adaptive,
    Algo::Clh,
    Algo::QSpin,
    Algo::UnfairQ,
];

impl Algo {
    /// The name `--lock` takes (the bench registry's name).
    pub const fn name(self) -> &'static str {
        match self {
            Algo::Tas => "tas",
            Algo::Ttas => "ttas",
            Algo::Ticket => "ticket",
            Algo::Mcs => "mcs",
            Algo::McsPark => "mcs:park",
            Algo::Futex => "futex",
            Algo::Adaptive => "adaptive",
            Algo::Clh => "clh",
            Algo::QSpin => "qspin",
            Algo::UnfairQ => "unfair-q",
        }
    }

    /// The algorithm named `b` (no allocation).
    pub fn from_name(b: &[u8]) -> Option<Algo> {
        ALGOS.iter().copied().find(|a| a.name().as_bytes() == b)
    }

    /// The algorithm whose `as u8` is `v`.
    pub fn from_u8(v: u8) -> Option<Algo> {
        ALGOS.iter().copied().find(|&a| a as u8 == v)
    }
}

const _: () = {
    use core::mem::{align_of, size_of};
    assert!(size_of::<Tas<Pause>>() <= STATE_BYTES && align_of::<Tas<Pause>>() <= 8);
    assert!(size_of::<Ttas<Backoff>>() <= STATE_BYTES && align_of::<Ttas<Backoff>>() <= 8);
    assert!(size_of::<Ticket<Pause>>() <= STATE_BYTES && align_of::<Ticket<Pause>>() <= 8);
    assert!(size_of::<Mcs<Pause>>() <= STATE_BYTES && align_of::<Mcs<Pause>>() <= 8);
    assert!(size_of::<Mcs<Park>>() <= STATE_BYTES && align_of::<Mcs<Park>>() <= 8);
    assert!(size_of::<FutexMutex>() <= STATE_BYTES && align_of::<FutexMutex>() <= 8);
    assert!(size_of::<Adaptive>() <= STATE_BYTES && align_of::<Adaptive>() <= 8);
    assert!(size_of::<QRwLock<Pause>>() <= STATE_BYTES && align_of::<QRwLock<Pause>>() <= 8);
    assert!(size_of::<ClhC>() <= STATE_BYTES && align_of::<ClhC>() <= 8);
    assert!(size_of::<QSpinC>() <= STATE_BYTES && align_of::<QSpinC>() <= 8);
    assert!(size_of::<UnfairC>() <= STATE_BYTES && align_of::<UnfairC>() <= 8);
};

/// A CLH queue lock whose empty queue is a null tail, so that all-zero bytes are unlocked and no
/// dummy node is needed (the lab's [`Clh`](crate::Clh) starts with one).
///
/// Lock: take a pool node marked `LOCKED`, `pred = swap(tail, me)`; with no predecessor the lock
/// is ours; otherwise spin on the predecessor's node until it is `RELEASED`, then give that node
/// back to its pool (nobody else references it: its owner let go of it by releasing). Unlock:
/// `cmpxchg(tail, me → null)` and give my node back when nobody queued behind me; otherwise
/// store `RELEASED` into my node, which my successor gives back. A real `try_lock`: it only
/// enters an empty queue (`cmpxchg(tail, null → me)`). FIFO, local spinning.
#[derive(Debug)]
#[repr(C)]
pub struct ClhC {
    tail: core::sync::atomic::AtomicPtr<PNode>,
    holder: core::sync::atomic::AtomicPtr<PNode>,
}

const CLH_RELEASED: u32 = 0;
const CLH_LOCKED: u32 = 1;

impl ClhC {
    fn lock(&self) {
        let me = take_node();
        // SAFETY: a node of our pool, ours until released.
        unsafe { (*me).state.store(CLH_LOCKED, Relaxed) };
        let pred = self.tail.swap(me, AcqRel);
        if !pred.is_null() {
            // SAFETY: the predecessor's node stays live until we give it back below (its owner
            // lets go of it by storing RELEASED, and only we wait on it).
            let ps = unsafe { &(*pred).state };
            while ps.load(Acquire) != CLH_RELEASED {
                core::hint::spin_loop();
            }
            // SAFETY: released, and referenced by nobody else.
            unsafe { give_node(pred) };
        }
        self.holder.store(me, Relaxed);
    }

    fn try_lock(&self) -> bool {
        if !self.tail.load(Relaxed).is_null() {
            return false;
        }
        let me = take_node();
        // SAFETY: a node of our pool.
        unsafe { (*me).state.store(CLH_LOCKED, Relaxed) };
        if self.tail.compare_exchange(core::ptr::null_mut(), me, AcqRel, Relaxed).is_ok() {
            self.holder.store(me, Relaxed);
            true
        } else {
            // SAFETY: never published.
            unsafe { give_node(me) };
            false
        }
    }

    /// # Safety
    /// The lock is held.
    unsafe fn unlock(&self) {
        let me = self.holder.load(Relaxed);
        if self.tail.compare_exchange(me, core::ptr::null_mut(), Release, Relaxed).is_ok() {
            // SAFETY: nobody queued behind us: the node is referenced by nobody.
            unsafe { give_node(me) };
        } else {
            // SAFETY: the holder's node; from this store on it belongs to the successor.
            unsafe { (*me).state.store(CLH_RELEASED, Release) };
        }
    }

    fn is_locked(&self) -> bool {
        !self.tail.load(Relaxed).is_null()
    }
}

/// A pool node: the queue node and whether it is free (set by whichever thread unlocks).
#[repr(C)]
struct Slot {
    node: PNode,
    taken: AtomicBool,
}

struct Pool([Slot; NODES_PER_THREAD]);

thread_local! {
    // The thread's pool, mapped at its first MCS or CLH lock: a static TLS block this large
    // would come out of every thread's stack (glibc carves static TLS from it). Never unmapped:
    // a node may still be referenced after its thread exits (a CLH successor gives it back).
    static POOL: core::cell::Cell<*const Pool> = const { core::cell::Cell::new(core::ptr::null()) };
}

/// This thread's pool, mapped on first use (all-zero bytes: every node free).
fn pool() -> Option<&'static Pool> {
    let p = POOL.try_with(|c| {
        if c.get().is_null() {
            // SAFETY: an anonymous private mapping; no memory of ours is affected.
            let m = unsafe {
                libc::mmap(
                    core::ptr::null_mut(),
                    core::mem::size_of::<Pool>(),
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                )
            };
            if m != libc::MAP_FAILED {
                c.set(m as *const Pool);
            }
        }
        c.get()
    });
    // SAFETY: a mapping of a whole `Pool`, zero-filled (all-zero is a valid `Pool`: atomics and
    // null pointers), page-aligned (enough for the nodes' 128), never unmapped.
    p.ok().filter(|p| !p.is_null()).map(|p| unsafe { &*p })
}

/// A free node of this thread's pool, marked taken. Aborts the process, with a message, when the
/// thread holds more than [`NODES_PER_THREAD`] MCS or CLH locks at once (or its pool cannot be
/// mapped).
fn take_node() -> *mut PNode {
    let n = pool().and_then(|p| {
        p.0.iter()
            .find(|s| !s.taken.load(Relaxed) && !s.taken.swap(true, Acquire))
            .map(|s| &s.node as *const PNode as *mut PNode)
    });
    match n {
        Some(n) => n,
        None => {
            const MSG: &[u8] = b"lockmeter: a thread holds more swapped MCS/CLH locks at once than its node pool has (32), or its pool cannot be mapped; use another --lock\n";
            // SAFETY: writing a static buffer to stderr, then aborting.
            unsafe {
                libc::write(2, MSG.as_ptr().cast(), MSG.len());
                libc::abort();
            }
        }
    }
}

/// Gives back a node from [`take_node`] (from any thread: a lock may be unlocked by another
/// thread than the one that locked it).
///
/// # Safety
/// `n` came from [`take_node`] and nobody references it any more.
unsafe fn give_node(n: *mut PNode) {
    // SAFETY: `node` is the first field of a `repr(C)` `Slot`, so `n` points at its slot, which
    // lives in the taking thread's pool.
    let slot = unsafe { &*(n as *const Slot) };
    slot.taken.store(false, Release);
}

/// # Safety
/// `p` points at [`STATE_BYTES`] bytes aligned to 8 that only ever hold this lock's state
/// (zero-initialized, then used by one algorithm only), valid as long as the returned reference.
unsafe fn at<'a, T>(p: *mut u8) -> &'a T {
    // SAFETY: the caller's contract; every field of the lock types is an atomic (interior
    // mutability), and all-zero bytes are their unlocked value.
    unsafe { &*(p as *const T) }
}

/// Takes the lock at `p`.
///
/// # Safety
/// See `at`: `p` is a state of `algo` (or all zeros).
pub unsafe fn lock(algo: Algo, p: *mut u8) {
    // SAFETY: the caller's contract, for every arm.
    unsafe {
        match algo {
            Algo::Tas => at::<Tas<Pause>>(p).lock(),
            Algo::Ttas => at::<Ttas<Backoff>>(p).lock(),
            Algo::Ticket => at::<Ticket<Pause>>(p).lock(),
            Algo::Mcs => at::<Mcs<Pause>>(p).lock_node(take_node()),
            Algo::McsPark => at::<Mcs<Park>>(p).lock_node(take_node()),
            Algo::Futex => at::<FutexMutex>(p).lock(),
            Algo::Adaptive => at::<Adaptive>(p).lock(),
            Algo::Clh => at::<ClhC>(p).lock(),
            Algo::QSpin => at::<QSpinC>(p).lock(),
            Algo::UnfairQ => at::<UnfairC>(p).lock(),
        }
    }
}

/// Tries to take the lock at `p`.
///
/// # Safety
/// As for [`lock`].
pub unsafe fn try_lock(algo: Algo, p: *mut u8) -> bool {
    /// MCS: a node only when the lock looks free.
    ///
    /// # Safety
    /// As for [`lock`].
    unsafe fn mcs<P: crate::relax::Relax>(p: *mut u8) -> bool {
        // SAFETY: the caller's contract.
        let l = unsafe { at::<Mcs<P>>(p) };
        if l.is_locked() {
            return false;
        }
        let n = take_node();
        // SAFETY: a node of our pool, ours until given back.
        let ok = unsafe { l.try_lock_node(n) };
        if !ok {
            // SAFETY: never published.
            unsafe { give_node(n) };
        }
        ok
    }
    // SAFETY: the caller's contract, for every arm.
    unsafe {
        match algo {
            Algo::Tas => at::<Tas<Pause>>(p).try_lock(),
            Algo::Ttas => at::<Ttas<Backoff>>(p).try_lock(),
            Algo::Ticket => at::<Ticket<Pause>>(p).try_lock(),
            Algo::Mcs => mcs::<Pause>(p),
            Algo::McsPark => mcs::<Park>(p),
            Algo::Futex => at::<FutexMutex>(p).try_lock(),
            Algo::Adaptive => at::<Adaptive>(p).try_lock(),
            Algo::Clh => at::<ClhC>(p).try_lock(),
            Algo::QSpin => at::<QSpinC>(p).try_lock(),
            Algo::UnfairQ => at::<UnfairC>(p).try_lock(),
        }
    }
}

/// Releases the lock at `p`.
///
/// # Safety
/// As for [`lock`], and the lock is held (by any thread: the caller releases it for the holder).
pub unsafe fn unlock(algo: Algo, p: *mut u8) {
    // SAFETY: the caller's contract, for every arm; an MCS holder's node is given back once
    // the successor was granted (nobody references it then).
    unsafe {
        match algo {
            Algo::Tas => at::<Tas<Pause>>(p).unlock(),
            Algo::Ttas => at::<Ttas<Backoff>>(p).unlock(),
            Algo::Ticket => at::<Ticket<Pause>>(p).unlock(),
            Algo::Mcs => give_node(at::<Mcs<Pause>>(p).unlock_node()),
            Algo::McsPark => give_node(at::<Mcs<Park>>(p).unlock_node()),
            Algo::Futex => at::<FutexMutex>(p).unlock(),
            Algo::Adaptive => at::<Adaptive>(p).unlock(),
            Algo::Clh => at::<ClhC>(p).unlock(),
            Algo::QSpin => at::<QSpinC>(p).unlock(),
            Algo::UnfairQ => at::<UnfairC>(p).unlock(),
        }
    }
}

/// Whether the lock at `p` is held.
///
/// # Safety
/// As for [`lock`].
pub unsafe fn is_locked(algo: Algo, p: *mut u8) -> bool {
    // SAFETY: the caller's contract, for every arm.
    unsafe {
        match algo {
            Algo::Tas => at::<Tas<Pause>>(p).is_locked(),
            Algo::Ttas => at::<Ttas<Backoff>>(p).is_locked(),
            Algo::Ticket => at::<Ticket<Pause>>(p).is_locked(),
            Algo::Mcs => at::<Mcs<Pause>>(p).is_locked(),
            Algo::McsPark => at::<Mcs<Park>>(p).is_locked(),
            Algo::Futex => at::<FutexMutex>(p).is_locked(),
            Algo::Adaptive => at::<Adaptive>(p).is_locked(),
            Algo::Clh => at::<ClhC>(p).is_locked(),
            Algo::QSpin => at::<QSpinC>(p).is_locked(),
            Algo::UnfairQ => at::<UnfairC>(p).is_locked(),
        }
    }
}

/// The reader-writer lock `--rwlock qrwlock` swaps in: [`QRwLock<Pause>`](crate::QRwLock) (12
/// bytes, zero = unlocked, no allocation). Fair (FIFO behind a waiting writer): a thread that
/// takes a read lock it already holds while a writer waits deadlocks, which glibc's default
/// (reader-preferring) rwlock allows.
pub mod rw {
    use super::*;

    /// Takes the lock at `p` shared (`write` false) or exclusive.
    ///
    /// # Safety
    /// As for [`lock`](super::lock), for a reader-writer state.
    pub unsafe fn lock(p: *mut u8, write: bool) {
        // SAFETY: the caller's contract.
        let l = unsafe { at::<QRwLock<Pause>>(p) };
        if write { l.lock_exclusive() } else { l.lock_shared() }
    }

    /// Tries to take the lock at `p` shared or exclusive.
    ///
    /// # Safety
    /// As for [`lock`].
    pub unsafe fn try_lock(p: *mut u8, write: bool) -> bool {
        // SAFETY: the caller's contract.
        let l = unsafe { at::<QRwLock<Pause>>(p) };
        if write { l.try_lock_exclusive() } else { l.try_lock_shared() }
    }

    /// Releases the caller's hold of the lock at `p`: the writer's when it is write-locked (no
    /// reader can hold it then), else one reader's.
    ///
    /// # Safety
    /// As for [`lock`], and the caller holds the lock.
    pub unsafe fn unlock(p: *mut u8) {
        // SAFETY: the caller's contract.
        let l = unsafe { at::<QRwLock<Pause>>(p) };
        // SAFETY: the caller holds it, exclusively exactly when it is write-locked.
        unsafe { if l.is_locked_exclusive() { l.unlock_exclusive() } else { l.unlock_shared() } }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::UnsafeCell;

    /// A zeroed, 8-aligned state, as inside a `PTHREAD_MUTEX_INITIALIZER` mutex.
    #[repr(C, align(8))]
    struct State(UnsafeCell<[u8; STATE_BYTES]>);
    // SAFETY: only accessed through the atomics of the lock types.
    unsafe impl Sync for State {}

    #[test]
    fn zeroed_rwlock_excludes_writers_and_counts_readers() {
        let s = State(UnsafeCell::new([0; STATE_BYTES]));
        let count = UnsafeCell::new(0u64);
        struct Shared<'a>(&'a UnsafeCell<u64>);
        // SAFETY: written under the write lock, read under the read lock.
        unsafe impl Sync for Shared<'_> {}
        let c = Shared(&count);
        std::thread::scope(|sc| {
            for t in 0..3u64 {
                let (s, c) = (&s, &c);
                sc.spawn(move || {
                    let p = s.0.get() as *mut u8;
                    for i in 0..5000u64 {
                        // SAFETY: a zeroed state used as a reader-writer lock only.
                        unsafe {
                            let write = (i + t) % 3 == 0;
                            if i % 11 == 0 {
                                while !rw::try_lock(p, write) {
                                    std::hint::spin_loop();
                                }
                            } else {
                                rw::lock(p, write);
                            }
                            if write {
                                *c.0.get() += 1;
                            } else {
                                core::hint::black_box(*c.0.get());
                            }
                            rw::unlock(p);
                        }
                    }
                });
            }
        });
        let writes: u64 =
            (0..3u64).map(|t| (0..5000u64).filter(|i| (i + t) % 3 == 0).count() as u64).sum();
        assert_eq!(count.into_inner(), writes);
    }

    #[test]
    fn names_round_trip() {
        for a in ALGOS {
            assert_eq!(Algo::from_name(a.name().as_bytes()), Some(a));
            assert_eq!(Algo::from_u8(a as u8), Some(a));
        }
        assert_eq!(Algo::from_name(b"pthread"), None);
        let names: Vec<&str> = ALGOS.iter().map(|a| a.name()).collect();
        assert_eq!(lockmeter_core::settings::SWAP_LOCKS[1..], names[..], "--lock's list");
    }

    /// Mutual exclusion on zeroed memory: a non-atomic counter incremented under the lock, with
    /// trylocks mixed in, and nested locks (MCS takes two nodes at once).
    #[test]
    fn zeroed_states_exclude_exactly() {
        const THREADS: u64 = 3;
        const N: u64 = 5_000;
        for a in ALGOS {
            let s = State(UnsafeCell::new([0; STATE_BYTES]));
            let inner = State(UnsafeCell::new([0; STATE_BYTES]));
            let count = UnsafeCell::new(0u64);
            struct Shared<'a>(&'a UnsafeCell<u64>);
            // SAFETY: only touched under the lock.
            unsafe impl Sync for Shared<'_> {}
            let c = Shared(&count);
            std::thread::scope(|sc| {
                for t in 0..THREADS {
                    let (s, inner, c) = (&s, &inner, &c);
                    sc.spawn(move || {
                        let p = s.0.get() as *mut u8;
                        let q = inner.0.get() as *mut u8;
                        for i in 0..N {
                            // SAFETY: zeroed states used by `a` only.
                            unsafe {
                                if (i + t) % 7 == 0 {
                                    while !try_lock(a, p) {
                                        std::hint::spin_loop();
                                    }
                                } else {
                                    lock(a, p);
                                }
                                lock(a, q);
                                *c.0.get() += 1;
                                unlock(a, q);
                                unlock(a, p);
                            }
                        }
                    });
                }
            });
            assert_eq!(count.into_inner(), THREADS * N, "{}", a.name());
            // SAFETY: as above.
            assert!(!unsafe { is_locked(a, s.0.get() as *mut u8) }, "{}", a.name());
        }
    }
}

//! The index-queued lab locks as C-ABI states, for [`cabi`](crate::cabi): `qspin` ([`QSpinC`],
//! 4 bytes) and `unfair-q` ([`UnfairC`], 16 bytes). All-zero bytes are unlocked; nothing
//! allocates.
//!
//! Their queue nodes are named by index (the qspinlock's tail has 16 bits), in one process-wide
//! array of [`QUEUE_NODES`] nodes mapped with `mmap` at the first queued wait (8 MiB of address
//! space, backed only where touched) and never unmapped. Thread number k (in order of its first
//! queued wait) owns nodes `4k .. 4k+3` in the common case, one per nesting depth (a signal
//! handler that waits for a lock while its thread waits for another), as the kernel's per-CPU
//! `qnodes[4]`; a node is claimed by a swap of its `taken` flag, so a thread whose nodes are busy
//! (more than 16383 threads, deeper nesting) takes the next free one, and any thread can give a
//! node back (the unfair lock's stolen nodes are freed by whoever passes over them).
//!
//! The algorithms are those of [`QSpin`](crate::QSpin) and [`UnfairQ`](crate::UnfairQ) (read
//! their docs), with this node pool instead of the arena of `qnode` (which allocates) and, for
//! `unfair-q`, without the steal statistics (they do not fit in a mutex).

use crate::relax::{Pause, Relax};
use core::hint::spin_loop;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering::*};

/// Nodes in the process-wide array: an index + 1 fits the qspinlock's 16-bit tail.
pub const QUEUE_NODES: usize = 0xffff;
/// Nodes a thread owns in the common case (one per nesting depth).
const PER_THREAD: u32 = 4;

const WAITING: u32 = 2;
const HEAD: u32 = 3;
const STOLEN: u32 = 4;

#[repr(C, align(128))]
struct QNode {
    /// Index + 1 of the successor (0: none).
    next: AtomicU32,
    state: AtomicU32,
    /// Enqueue sequence number (unfair lock: queue position = seq - head's seq).
    seq: AtomicU64,
    taken: AtomicBool,
}

static NODES: AtomicPtr<QNode> = AtomicPtr::new(core::ptr::null_mut());
static THREADS: AtomicU32 = AtomicU32::new(0);

thread_local! {
    // The first node this thread looks at (u32::MAX: not numbered yet).
    static HOME: core::cell::Cell<u32> = const { core::cell::Cell::new(u32::MAX) };
}

fn die() -> ! {
    const MSG: &[u8] = b"lockmeter: the swapped qspin/unfair-q locks ran out of queue nodes (65535 waiters at once), or they cannot be mapped; use another --lock\n";
    // SAFETY: writing a static buffer to stderr, then aborting.
    unsafe {
        libc::write(2, MSG.as_ptr().cast(), MSG.len());
        libc::abort();
    }
}

/// The node array, mapped on first use.
fn nodes() -> &'static [QNode] {
    let mut p = NODES.load(Acquire);
    if p.is_null() {
        let len = QUEUE_NODES * core::mem::size_of::<QNode>();
        // SAFETY: an anonymous private mapping; no memory of ours is affected.
        let m = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if m == libc::MAP_FAILED {
            die();
        }
        p = match NODES.compare_exchange(core::ptr::null_mut(), m.cast(), AcqRel, Acquire) {
            Ok(_) => m.cast(),
            Err(other) => {
                // SAFETY: our own mapping, never published.
                unsafe { libc::munmap(m, len) };
                other
            }
        };
    }
    // SAFETY: a zero-filled mapping of QUEUE_NODES nodes (all-zero is a valid free node),
    // page-aligned (enough for 128), never unmapped.
    unsafe { core::slice::from_raw_parts(p, QUEUE_NODES) }
}

#[inline]
fn node(i: u32) -> &'static QNode {
    // Indices come from `take` (or from a tail/next that holds one + 1): always in range.
    &nodes()[i as usize % QUEUE_NODES]
}

/// A free node, marked taken, its `next` cleared and its state `WAITING`.
fn take() -> u32 {
    let all = nodes();
    let home = HOME
        .try_with(|h| {
            if h.get() == u32::MAX {
                let k = THREADS.fetch_add(1, Relaxed);
                h.set(k.wrapping_mul(PER_THREAD) % QUEUE_NODES as u32);
            }
            h.get()
        })
        .unwrap_or(0);
    for k in 0..QUEUE_NODES as u32 {
        let i = (home + k) % QUEUE_NODES as u32;
        let n = &all[i as usize];
        if !n.taken.load(Relaxed) && !n.taken.swap(true, Acquire) {
            n.next.store(0, Relaxed);
            n.state.store(WAITING, Relaxed);
            return i;
        }
    }
    die()
}

/// Gives node `i` back (from any thread): nobody references it any more.
#[inline]
fn give(i: u32) {
    node(i).taken.store(false, Release);
}

const LOCKED: u32 = 1;
const LOCKED_MASK: u32 = 0xff;
const PENDING: u32 = 1 << 8;
const TAIL_SHIFT: u32 = 16;
const TAIL_MASK: u32 = 0xffff << TAIL_SHIFT;
const PENDING_LOOPS: u32 = 1 << 9;

/// The 4-byte qspinlock ([`QSpin`](crate::QSpin)): locked byte, pending bit, 16-bit tail =
/// node index + 1.
#[derive(Debug)]
#[repr(C)]
pub struct QSpinC {
    val: AtomicU32,
}

impl QSpinC {
    pub(crate) fn lock(&self) {
        if let Err(v) = self.val.compare_exchange(0, LOCKED, Acquire, Relaxed) {
            self.lock_slow(v);
        }
    }

    pub(crate) fn try_lock(&self) -> bool {
        self.val.compare_exchange(0, LOCKED, Acquire, Relaxed).is_ok()
    }

    /// Releases the lock (held, by any thread).
    pub(crate) fn unlock(&self) {
        self.val.fetch_sub(LOCKED, Release);
    }

    pub(crate) fn is_locked(&self) -> bool {
        self.val.load(Relaxed) & LOCKED_MASK != 0
    }

    #[cold]
    fn lock_slow(&self, mut val: u32) {
        let mut r = Pause;
        if val == PENDING {
            let mut n = PENDING_LOOPS;
            while val == PENDING && n > 0 {
                spin_loop();
                val = self.val.load(Relaxed);
                n -= 1;
            }
        }
        if val & !LOCKED_MASK == 0 {
            let old = self.val.fetch_or(PENDING, Acquire);
            if old & !LOCKED_MASK == 0 {
                if old & LOCKED_MASK != 0 {
                    while self.val.load(Acquire) & LOCKED_MASK != 0 {
                        r.relax();
                    }
                }
                self.val.fetch_sub(PENDING - LOCKED, Acquire);
                return;
            }
            if old & PENDING == 0 {
                self.val.fetch_and(!PENDING, Relaxed);
            }
        }
        self.lock_queued();
    }

    fn lock_queued(&self) {
        let mut r = Pause;
        let idx = take();
        let me = node(idx);
        if self.val.load(Relaxed) == 0 && self.try_lock() {
            give(idx);
            return;
        }
        let tail = (idx + 1) << TAIL_SHIFT;
        let mut cur = self.val.load(Relaxed);
        let old = loop {
            match self.val.compare_exchange_weak(cur, (cur & !TAIL_MASK) | tail, AcqRel, Relaxed) {
                Ok(v) => break v,
                Err(v) => cur = v,
            }
        };
        if old & TAIL_MASK != 0 {
            node((old >> TAIL_SHIFT) - 1).next.store(idx + 1, Release);
            while me.state.load(Acquire) != HEAD {
                r.relax();
            }
        }
        let mut val;
        loop {
            val = self.val.load(Acquire);
            if val & (LOCKED_MASK | PENDING) == 0 {
                break;
            }
            r.relax();
        }
        if val & TAIL_MASK == tail
            && self.val.compare_exchange(val, LOCKED, Acquire, Relaxed).is_ok()
        {
            give(idx);
            return;
        }
        self.val.fetch_or(LOCKED, Acquire);
        let next = loop {
            let n = me.next.load(Acquire);
            if n != 0 {
                break n;
            }
            spin_loop();
        };
        node(next - 1).state.store(HEAD, Release);
        give(idx);
    }
}

/// Seed 002's unfair queued lock ([`UnfairQ`](crate::UnfairQ)) without its statistics:
/// `locked`, `tail` (node index + 1) and the head's sequence number.
#[derive(Debug)]
#[repr(C)]
pub struct UnfairC {
    locked: AtomicU32,
    tail: AtomicU32,
    head_seq: AtomicU64,
}

/// Spins between steal attempts at queue position `pos` (≥ 2), minus one (`lsteal_mask`).
#[inline]
fn steal_mask(pos: u64) -> u32 {
    let shift = (3 + pos.saturating_sub(2)).min(10) as u32;
    (1u32 << shift) - 1
}

impl UnfairC {
    #[inline]
    fn cas_lock(&self) -> bool {
        self.locked.compare_exchange(0, 1, Acquire, Relaxed).is_ok()
    }

    pub(crate) fn lock(&self) {
        if !self.cas_lock() {
            self.lock_slow();
        }
    }

    pub(crate) fn try_lock(&self) -> bool {
        self.cas_lock()
    }

    /// Releases the lock (held, by any thread).
    pub(crate) fn unlock(&self) {
        self.locked.store(0, Release);
    }

    pub(crate) fn is_locked(&self) -> bool {
        self.locked.load(Relaxed) != 0
    }

    #[cold]
    fn lock_slow(&self) {
        let mut r = Pause;
        if self.locked.load(Relaxed) == 0 && self.cas_lock() {
            return;
        }
        let idx = take();
        let me = node(idx);
        let pred = self.tail.swap(idx + 1, AcqRel);
        if pred == 0 {
            let seq = self.head_seq.load(Relaxed).wrapping_add(1);
            me.seq.store(seq, Relaxed);
            self.head_seq.store(seq, Relaxed);
        } else {
            let p = node(pred - 1);
            // `p` cannot be given back before we link: whoever skips it waits for its `next`.
            me.seq.store(p.seq.load(Relaxed).wrapping_add(1), Relaxed);
            p.next.store(idx + 1, Release);
            let mut spins = 0u32;
            loop {
                if me.state.load(Acquire) == HEAD {
                    break;
                }
                spins = spins.wrapping_add(1);
                let pos = 1 + me.seq.load(Relaxed).wrapping_sub(self.head_seq.load(Relaxed));
                if pos >= 2
                    && spins & steal_mask(pos) == 0
                    && self.locked.load(Relaxed) == 0
                    && self.cas_lock()
                {
                    if me.state.compare_exchange(WAITING, STOLEN, AcqRel, Acquire).is_ok() {
                        return; // our node stays queued; whoever passes over it gives it back
                    }
                    // Made head meanwhile: we hold the lock, so pass headship on.
                    self.pass_on(idx);
                    return;
                }
                r.relax();
            }
        }
        loop {
            if self.locked.load(Relaxed) == 0 && self.cas_lock() {
                break;
            }
            r.relax();
        }
        self.pass_on(idx);
    }

    /// Node `idx` leaves the head of the queue: make the next non-stolen node the head.
    fn pass_on(&self, idx: u32) {
        let mut cur = idx;
        loop {
            let c = node(cur);
            let mut nx = c.next.load(Acquire);
            if nx == 0 {
                if self.tail.compare_exchange(cur + 1, 0, AcqRel, Relaxed).is_ok() {
                    give(cur);
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
            give(cur);
            let m = node(nx - 1);
            self.head_seq.store(m.seq.load(Relaxed), Relaxed);
            if m.state.compare_exchange(WAITING, HEAD, AcqRel, Acquire).is_ok() {
                return;
            }
            // `m` stole the lock and left: skip it (it is ours to give back now).
            cur = nx - 1;
        }
    }
}

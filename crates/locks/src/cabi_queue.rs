//! The index-queued lab locks as C-ABI states, for [`cabi`](crate::cabi): `qspin` ([`QSpinC`],
//! 4 bytes) and `unfair-q` ([`UnfairC`], 16 bytes). All-zero bytes are unlocked; nothing
//! allocates.
//!
//! Their queue nodes are named by index (the qspinlock's tail has 16 bits), in one process-wide
//! array of [`QUEUE_NODES`] nodes mapped with `mmap` at the first queued wait (8 MiB of address
//! space, backed only where touched) and never unmapped. Thread number k (in order of its first
//! queued wait) owns nodes `4k .. 4k+3` in the common case, one per nesting depth (a signal
//! handler that waits for a lock while its thread waits for another), as the kernel's per-CPU
//! `qnodes[4]`; a node is claimed by a compare-and-swap of its state from `FREE` (0), so a thread whose nodes are busy
//! (more than 16383 threads, deeper nesting) takes the next free one, and any thread can give a
//! node back (the unfair lock's stolen nodes are freed by whoever passes over them).
//!
//! The algorithms are those of [`QSpin`](crate::QSpin) and [`UnfairQ`](crate::UnfairQ), the
//! very code their loom models check (`qspin::Word`, `unfair::Queue`), over this node pool
//! ([`Mapped`]) instead of the arena of `qnode` (which allocates) and, for `unfair-q`, without
//! the steal statistics (they do not fit in a mutex).

use crate::qnode::{BUSY, FREE, INode, Pool, WAITING};
use crate::relax::Pause;
use crate::{qspin, unfair};
use core::sync::atomic::{AtomicPtr, AtomicU32, Ordering::*};

/// Nodes in the process-wide array: an index + 1 fits the qspinlock's 16-bit tail.
pub const QUEUE_NODES: usize = 0xffff;
/// Nodes a thread owns in the common case (one per nesting depth).
const PER_THREAD: u32 = 4;

static NODES: AtomicPtr<INode> = AtomicPtr::new(core::ptr::null_mut());
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
fn nodes() -> &'static [INode] {
    let mut p = NODES.load(Acquire);
    if p.is_null() {
        let len = QUEUE_NODES * core::mem::size_of::<INode>();
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
fn node(i: u32) -> &'static INode {
    // Indices come from `take` (or from a tail/next that holds one + 1): always in range.
    &nodes()[i as usize % QUEUE_NODES]
}

/// A free node, marked `BUSY`, its `next` cleared and its state `WAITING`.
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
        if n.state.load(Relaxed) == FREE
            && n.state.compare_exchange(FREE, BUSY, Acquire, Relaxed).is_ok()
        {
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
    node(i).state.store(FREE, Release);
}

/// The C-ABI locks' node pool: the mapped array above.
#[derive(Debug)]
pub(crate) struct Mapped;

impl Pool for Mapped {
    #[inline]
    fn take() -> u32 {
        take()
    }
    #[inline]
    fn node(i: u32) -> &'static INode {
        node(i)
    }
    #[inline]
    fn give(i: u32) {
        give(i)
    }
}

/// A C-ABI state type over one of the shared algorithms, its operations forwarded (`lock` by
/// `$lock` on the algorithm's state `$w`).
macro_rules! c_abi_lock {
    ($(#[$m:meta])* $name:ident($inner:ty), |$w:ident| $lock:expr) => {
        $(#[$m])*
        #[derive(Debug)]
        #[repr(transparent)]
        pub struct $name($inner);

        impl $name {
            pub(crate) fn lock(&self) {
                let $w = &self.0;
                $lock
            }

            pub(crate) fn try_lock(&self) -> bool {
                self.0.try_lock()
            }

            /// Releases the lock (held, by any thread).
            pub(crate) fn unlock(&self) {
                self.0.unlock()
            }

            pub(crate) fn is_locked(&self) -> bool {
                self.0.is_locked()
            }
        }
    };
}

c_abi_lock! {
    /// The 4-byte qspinlock ([`QSpin`](crate::QSpin)'s algorithm): locked byte, pending bit,
    /// 16-bit tail = node index + 1.
    QSpinC(qspin::Word<Mapped, Pause>), |w| w.lock()
}

c_abi_lock! {
    /// Seed 002's unfair queued lock ([`UnfairQ`](crate::UnfairQ)'s algorithm) without its
    /// statistics: `locked`, `tail` (node index + 1) and the head's sequence number.
    UnfairC(unfair::Queue<Mapped, Pause>), |w| w.lock(&())
}

//! Queue nodes for the queued locks.
//!
//! - [`PNode`]s (pointer-linked, for MCS and CLH) come from a per-thread free list of boxed
//!   nodes: `take` pops one (or allocates), `give` pushes it back. A node a thread gives back is
//!   no longer referenced by anyone (the algorithms guarantee it), so a thread's list is freed
//!   when the thread exits. Under loom every `take` allocates and every `give` frees.
//! - [`INode`]s (index-linked, for the 4-byte qspinlock whose tail must fit in 16 bits, and the
//!   unfair queued lock whose stolen nodes outlive the `lock` call) live in a process-wide arena
//!   that is never freed. A thread keeps the indices it owns; a node is reusable when its state
//!   is `FREE` again, which another thread may set (the unfair lock's pass-through of a stolen
//!   node). At thread exit the indices go to a shared recycle list.

use crate::primitive::{AtomicPtr, AtomicU32, AtomicU64, Ordering::*};

/// A pointer-linked queue node, alone on its cache lines.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct PNode {
    pub(crate) next: AtomicPtr<PNode>,
    pub(crate) state: AtomicU32,
}

impl PNode {
    maybe_const_fn! {
        /// A free node.
        pub(crate) fn new() -> Self {
            PNode { next: AtomicPtr::new(core::ptr::null_mut()), state: AtomicU32::new(0) }
        }
    }
}

#[cfg(not(loom))]
mod ppool {
    use super::PNode;
    use std::cell::RefCell;

    thread_local! {
        // Boxed: a node's address is shared with other threads and must not move.
        #[allow(clippy::vec_box)]
        static POOL: RefCell<Vec<Box<PNode>>> = const { RefCell::new(Vec::new()) };
    }

    pub(crate) fn take() -> *mut PNode {
        let b = POOL.try_with(|p| p.borrow_mut().pop()).ok().flatten();
        Box::into_raw(b.unwrap_or_else(|| Box::new(PNode::new())))
    }

    /// # Safety
    /// `n` came from [`take`] and nobody references it any more.
    pub(crate) unsafe fn give(n: *mut PNode) {
        // SAFETY: per the contract, `n` is a live node from `Box::into_raw` owned by the caller.
        let mut b = Some(unsafe { Box::from_raw(n) });
        let _ = POOL.try_with(|p| {
            if let Some(b) = b.take() {
                p.borrow_mut().push(b)
            }
        });
        drop(b); // thread exiting: free it
    }
}

#[cfg(loom)]
mod ppool {
    use super::PNode;
    pub(crate) fn take() -> *mut PNode {
        Box::into_raw(Box::new(PNode::new()))
    }
    /// # Safety
    /// `n` came from [`take`] and nobody references it any more.
    pub(crate) unsafe fn give(n: *mut PNode) {
        // SAFETY: per the contract, `n` is a live node from `Box::into_raw` owned by the caller.
        drop(unsafe { Box::from_raw(n) });
    }
}

pub(crate) use ppool::{give as pgive, take as ptake};

/// Frees a node that is owned by a lock being dropped.
///
/// # Safety
/// `n` came from [`ptake`] and nobody references it any more.
pub(crate) unsafe fn pfree(n: *mut PNode) {
    // SAFETY: per the contract.
    drop(unsafe { Box::from_raw(n) });
}

/// Index node states.
pub(crate) const FREE: u32 = 0;
pub(crate) const BUSY: u32 = 1;
pub(crate) const WAITING: u32 = 2;
pub(crate) const HEAD: u32 = 3;
pub(crate) const STOLEN: u32 = 4;

/// An index-linked queue node, alone on its cache lines. `next` holds `index + 1` (0: none).
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct INode {
    pub(crate) next: AtomicU32,
    pub(crate) state: AtomicU32,
    /// Enqueue sequence number (unfair lock: queue position = seq - head's seq).
    pub(crate) seq: AtomicU64,
}

impl INode {
    fn new() -> Self {
        INode { next: AtomicU32::new(0), state: AtomicU32::new(FREE), seq: AtomicU64::new(0) }
    }
}

/// Arena capacity: indices must fit the qspinlock's 16-bit tail (index + 1 ≤ 65535).
#[cfg(not(loom))]
const CAP: usize = 1 << 14;
#[cfg(loom)]
const CAP: usize = 16;

struct Arena {
    nodes: Box<[INode]>,
    bump: AtomicU32,
    #[cfg(not(loom))]
    recycled: std::sync::Mutex<Vec<u32>>,
}

impl Arena {
    fn new() -> Self {
        Arena {
            nodes: (0..CAP).map(|_| INode::new()).collect(),
            bump: AtomicU32::new(0),
            #[cfg(not(loom))]
            recycled: std::sync::Mutex::new(Vec::new()),
        }
    }
    fn fresh(&self) -> u32 {
        let i = self.bump.fetch_add(1, Relaxed);
        assert!((i as usize) < CAP, "lockmeter-locks: more than {CAP} queue nodes in use");
        i
    }
}

#[cfg(not(loom))]
fn arena() -> &'static Arena {
    static A: std::sync::OnceLock<Arena> = std::sync::OnceLock::new();
    A.get_or_init(Arena::new)
}

#[cfg(loom)]
loom::lazy_static! {
    static ref ARENA: Arena = Arena::new();
}
#[cfg(loom)]
fn arena() -> &'static Arena {
    &ARENA
}

/// The node at index `i`.
#[inline]
pub(crate) fn inode(i: u32) -> &'static INode {
    &arena().nodes[i as usize]
}

#[cfg(not(loom))]
mod ipool {
    use super::*;
    use std::cell::RefCell;

    struct Owned(Vec<u32>);
    impl Drop for Owned {
        fn drop(&mut self) {
            if let Ok(mut r) = arena().recycled.lock() {
                r.append(&mut self.0);
            }
        }
    }

    thread_local! {
        static OWNED: RefCell<Owned> = const { RefCell::new(Owned(Vec::new())) };
    }

    fn claim(i: u32) -> u32 {
        inode(i).state.store(BUSY, Relaxed);
        i
    }

    /// A node in state `BUSY`, owned by the calling thread until it is `FREE` again.
    pub(crate) fn take() -> u32 {
        let own = OWNED.try_with(|o| {
            let o = o.borrow();
            o.0.iter().copied().find(|&i| inode(i).state.load(Acquire) == FREE)
        });
        if let Ok(Some(i)) = own {
            return claim(i);
        }
        let a = arena();
        let reused = a.recycled.lock().ok().and_then(|mut r| {
            let pos = r.iter().position(|&i| inode(i).state.load(Acquire) == FREE)?;
            Some(r.swap_remove(pos))
        });
        let i = reused.unwrap_or_else(|| a.fresh());
        let kept = OWNED.try_with(|o| o.borrow_mut().0.push(i)).is_ok();
        if !kept {
            // Thread exiting: hand the node straight to the recycle list once it is free again.
            if let Ok(mut r) = a.recycled.lock() {
                r.push(i);
            }
        }
        claim(i)
    }
}

#[cfg(loom)]
mod ipool {
    use super::*;
    /// A fresh node in state `BUSY` (loom: never reused).
    pub(crate) fn take() -> u32 {
        let i = arena().fresh();
        inode(i).state.store(BUSY, Relaxed);
        i
    }
}

pub(crate) use ipool::take as itake;

/// Returns a node: it becomes reusable by its owner.
#[inline]
pub(crate) fn igive(i: u32) {
    inode(i).state.store(FREE, Release);
}

/// Where an index-queued lock ([`QSpin`](crate::QSpin), [`UnfairQ`](crate::UnfairQ)) gets its
/// nodes: the arena here ([`ArenaPool`]), or the C-ABI locks' mapped array (`cabi_queue.rs`),
/// so that both are built from one algorithm, the one the loom models check.
pub(crate) trait Pool {
    /// A node for the caller: its `next` cleared and its state `WAITING`.
    fn take() -> u32;
    /// The node at index `i` (one `take` returned).
    fn node(i: u32) -> &'static INode;
    /// Gives node `i` back (from any thread): nobody references it any more.
    fn give(i: u32);
}

/// The arena's nodes (see [`itake`]).
#[derive(Debug)]
pub(crate) struct ArenaPool;

impl Pool for ArenaPool {
    #[inline]
    fn take() -> u32 {
        let i = itake();
        let n = inode(i);
        n.next.store(0, Relaxed);
        n.state.store(WAITING, Relaxed);
        i
    }
    #[inline]
    fn node(i: u32) -> &'static INode {
        inode(i)
    }
    #[inline]
    fn give(i: u32) {
        igive(i)
    }
}

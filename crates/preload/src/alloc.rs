//! The preload's global allocator: the system's (`malloc`), except while `pthread_create` builds
//! unwind caches (`unwind::top_up`). framehop's caches allocate with `Box` inside their
//! constructors, and a failed `Box` aborts the process; under an address-space limit the program's
//! own `pthread_create` would have returned `EAGAIN` instead. So the builder first maps a region
//! for the caches it builds ([`Region::map`], an `mmap` that can fail: then no cache is built and
//! the program's call goes on as it would have), and its allocations are carved from that region
//! while it builds ([`PER_CACHE`] each, ample: what would not fit goes to `malloc`). The caches
//! are never freed.

use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::alloc::{GlobalAlloc, Layout, System};

/// Bytes reserved per cache: one framehop cache takes about 31 KiB (its parts, 24 848 and 6 144
/// bytes on x86_64, and its box).
pub(crate) const PER_CACHE: usize = 64 << 10;

/// The thread building into the region (its `pthread_self`), 0 when none.
static OWNER: AtomicUsize = AtomicUsize::new(0);
/// The last region: start, next free byte and end.
static START: AtomicUsize = AtomicUsize::new(0);
static NEXT: AtomicUsize = AtomicUsize::new(0);
static END: AtomicUsize = AtomicUsize::new(0);

/// The allocator (`#[global_allocator]` in `lib.rs`).
pub(crate) struct Alloc;

fn me() -> usize {
    // SAFETY: pthread_self has no preconditions.
    unsafe { libc::pthread_self() as usize }
}

// SAFETY: every block is either `System`'s, with its contract, or a fresh aligned range of a
// region that is handed out once and never freed.
unsafe impl GlobalAlloc for Alloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let owner = OWNER.load(Relaxed);
        if owner != 0 && owner == me() {
            let next = NEXT.load(Relaxed);
            let at = next.next_multiple_of(l.align());
            if at.checked_add(l.size()).is_some_and(|e| e <= END.load(Relaxed)) {
                NEXT.store(at + l.size(), Relaxed);
                return at as *mut u8;
            }
        }
        // SAFETY: the caller's layout, forwarded.
        unsafe { System.alloc(l) }
    }

    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        let a = p as usize;
        if (START.load(Relaxed)..END.load(Relaxed)).contains(&a) {
            return; // a block of the last region: regions are never freed (nor their caches)
        }
        // SAFETY: a block `System` handed out, with its layout.
        unsafe { System.dealloc(p, l) }
    }
}

/// A region the calling thread's allocations come from while it lives.
pub(crate) struct Region;

impl Region {
    /// Maps `len` bytes and routes the calling thread's allocations there; `None` when the
    /// mapping is refused (out of memory or address space). One builder at a time (the caller
    /// holds `unwind`'s `BUILDING`). Leaves errno as it found it.
    pub(crate) fn map(len: usize) -> Option<Region> {
        let saved = crate::sys::errno();
        let p = crate::shared::map_anon(len, libc::MAP_PRIVATE);
        crate::sys::set_errno(saved);
        if p.is_null() {
            return None;
        }
        START.store(p as usize, Relaxed);
        NEXT.store(p as usize, Relaxed);
        END.store(p as usize + len, Relaxed);
        OWNER.store(me(), Relaxed);
        Some(Region)
    }
}

impl Drop for Region {
    /// Back to `malloc` for everything; the region's unused pages are never touched.
    fn drop(&mut self) {
        OWNER.store(0, Relaxed);
    }
}

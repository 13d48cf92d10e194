//! Where the growable record tables (`table.rs`) get their memory: the [`Memory`]
//! trait (the preload maps its own with `mmap`, under its memory cap) and [`HeapMemory`], the
//! process heap with a cap, for tests and tools.

use core::sync::atomic::{AtomicUsize, Ordering::*};

/// The page size mappings are rounded to.
pub(crate) const PAGE: usize = 4096;

/// `n` rounded up to whole pages.
pub(crate) const fn page_up(n: usize) -> usize {
    (n + PAGE - 1) & !(PAGE - 1)
}

/// Where a table's memory comes from.
///
/// # Safety
/// [`Memory::map`] must return null or a pointer to `bytes` zeroed bytes, aligned to 4096, valid
/// for reads and writes until it is passed to [`Memory::unmap`], and not handed out twice.
pub unsafe trait Memory: Sync {
    /// Maps `bytes` zeroed bytes (page-aligned); null when refused. `bytes` is a multiple of 4096.
    fn map(&self, bytes: usize) -> *mut u8;
    /// Unmaps what [`Memory::map`] returned.
    ///
    /// # Safety
    /// `p` and `bytes` are a mapping returned by `map` on `self`, no longer referenced.
    unsafe fn unmap(&self, p: *mut u8, bytes: usize);
    /// Charges one new record's `bytes` (at most `table::RECORD_BYTES`: its counters, both histograms
    /// once used, its share of the index) against a cap; false refuses the record. Mappings are
    /// reserved, resident only as records fill them, so a cap on what is resident counts records,
    /// not mappings. The default charges nothing.
    fn charge(&self, bytes: usize) -> bool {
        let _ = bytes;
        true
    }
    /// Gives back what [`Memory::charge`] took for records that are gone (`Table::clear`: their
    /// memory stays mapped and is what the next records use). The default does nothing.
    fn refund(&self, bytes: usize) {
        let _ = bytes;
    }
}

/// A [`Memory`] on the process heap with a cap on the bytes it has out, for tests and tools (the
/// preload maps its own with `mmap`).
#[derive(Debug)]
pub struct HeapMemory {
    cap: usize,
    used: AtomicUsize,
}

impl HeapMemory {
    /// A heap memory that hands out at most `cap` bytes at once.
    pub const fn new(cap: usize) -> Self {
        HeapMemory { cap, used: AtomicUsize::new(0) }
    }
    /// Bytes handed out now.
    pub fn used(&self) -> usize {
        self.used.load(Relaxed)
    }
}

// SAFETY: `map` returns zeroed, 4096-aligned allocations of the asked size, each its own.
unsafe impl Memory for HeapMemory {
    fn map(&self, bytes: usize) -> *mut u8 {
        let Ok(layout) = std::alloc::Layout::from_size_align(bytes.max(1), PAGE) else {
            return core::ptr::null_mut();
        };
        if self.used.fetch_add(bytes, Relaxed).saturating_add(bytes) > self.cap {
            self.used.fetch_sub(bytes, Relaxed);
            return core::ptr::null_mut();
        }
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        if p.is_null() {
            self.used.fetch_sub(bytes, Relaxed);
        }
        p
    }
    unsafe fn unmap(&self, p: *mut u8, bytes: usize) {
        self.used.fetch_sub(bytes, Relaxed);
        if let Ok(layout) = std::alloc::Layout::from_size_align(bytes.max(1), PAGE) {
            // SAFETY: `p` came from `map` with this layout (the caller's contract).
            unsafe { std::alloc::dealloc(p, layout) };
        }
    }
}

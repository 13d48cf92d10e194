//! The work inside and outside the critical section, and the shared state it touches.

use core::hint::black_box;
use crossbeam_utils::CachePadded;
use std::cell::UnsafeCell;

/// Data protected by the benchmark lock: a checked counter plus a few words the critical
/// section updates, on their own cache lines.
pub struct Protected {
    cell: CachePadded<UnsafeCell<[u64; 8]>>,
}

// SAFETY: only accessed under the benchmark's lock (the counter check verifies it).
unsafe impl Sync for Protected {}

impl Default for Protected {
    fn default() -> Self {
        Protected { cell: CachePadded::new(UnsafeCell::new([0; 8])) }
    }
}

impl Protected {
    /// The critical section: count one, then `len` dependent updates of the protected words.
    ///
    /// # Safety
    /// The caller holds the lock that protects `self`.
    #[inline(always)]
    pub unsafe fn critical(&self, len: u32) {
        // SAFETY: exclusive access per the contract.
        let d = unsafe { &mut *self.cell.get() };
        d[0] += 1;
        let mut x = d[1];
        for i in 0..len {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407 ^ i as u64);
        }
        d[1] = x;
    }
    /// The counter (after every thread joined).
    pub fn count(&self) -> u64 {
        // SAFETY: called when no thread runs critical sections any more.
        unsafe { (*self.cell.get())[0] }
    }
}

/// `len` iterations of thread-local work outside the lock.
#[inline(always)]
pub fn outside(len: u32, seed: &mut u64) {
    let mut x = *seed;
    for _ in 0..len {
        x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
    }
    *seed = x;
}

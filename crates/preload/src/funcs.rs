//! Which function a code address is in, from the binary search table of each loaded object's
//! `.eh_frame_hdr` (one entry per FDE, sorted by the start address of the code it describes):
//! the function of an address is the last FDE starting at or before it. No allocation, no lock,
//! no system call: a search of memory the loader mapped.
//!
//! The holder's stack uses it (`meter::holding`): a stack captured at an unlock made by a tail
//! call (`return pthread_mutex_unlock(m)` compiled to a jump) no longer has the function that
//! held the lock, whose acquisition site is then put back as the innermost frame.

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering::*};

/// Most objects remembered (later ones are not searched: their addresses have no function).
const MAX_OBJECTS: usize = 512;

/// One loaded object: its code range and its table (`count` entries of two `i32` each, relative
/// to the header's address `base`).
struct Object {
    lo: AtomicU64,
    hi: AtomicU64,
    base: AtomicU64,
    table: AtomicU64,
    count: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Object = Object {
    lo: AtomicU64::new(0),
    hi: AtomicU64::new(0),
    base: AtomicU64::new(0),
    table: AtomicU64::new(0),
    count: AtomicU64::new(0),
};
static OBJECTS: [Object; MAX_OBJECTS] = [EMPTY; MAX_OBJECTS];
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// Remembers an object mapped at `lo..hi` whose `.eh_frame_hdr` is `hdr` (constructor only, from
/// `dl_iterate_phdr`).
pub(crate) fn add(lo: u64, hi: u64, hdr: &'static [u8]) {
    let base = hdr.as_ptr() as u64;
    let Some((table, count)) = lockmeter_core::ehframe::table_of(hdr) else { return };
    let i = COUNT.load(Relaxed);
    let Some(o) = OBJECTS.get(i) else { return };
    o.lo.store(lo, Relaxed);
    o.hi.store(hi, Relaxed);
    o.base.store(base, Relaxed);
    o.table.store(hdr.as_ptr() as u64 + table as u64, Relaxed);
    o.count.store(count, Relaxed);
    COUNT.store(i + 1, Release);
}

/// The start of the function that code address `pc` is in; `None` when no object's table
/// covers it.
pub(crate) fn start_of(pc: u64) -> Option<u64> {
    let n = COUNT.load(Acquire).min(MAX_OBJECTS);
    let o = OBJECTS
        .get(..n)?
        .iter()
        .find(|o| (o.lo.load(Relaxed)..o.hi.load(Relaxed)).contains(&pc))?;
    let (base, table, count) = (o.base.load(Relaxed), o.table.load(Relaxed), o.count.load(Relaxed));
    let start = |i: u64| -> u64 {
        // SAFETY: `i < count` (`last_at_or_before` asks no other entry), and `table_of` checked that the `count` entries of 8 bytes lie
        // inside the mapped `.eh_frame_hdr` (never unmapped: the objects known at start-up stay).
        let rel = unsafe { core::ptr::read_unaligned((table + i * 8) as *const i32) };
        base.wrapping_add(rel as i64 as u64)
    };
    lockmeter_core::ehframe::last_at_or_before(count, start, pc)
}

/// Whether return addresses `a` and `b` are in the same function (the instruction before each:
/// a call that ends a function returns past its end). False when either is unknown.
pub(crate) fn same_function(a: u64, b: u64) -> bool {
    match (start_of(a.wrapping_sub(1)), start_of(b.wrapping_sub(1))) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

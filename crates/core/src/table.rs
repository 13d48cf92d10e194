//! A growable, single-writer table of [`LiveStats`] records.
//!
//! One table per thread (the thread's *shard*): only that thread inserts and updates, any thread
//! may read (the profile writer merges all shards at the end). Keys are two `u64`s; the first must
//! be non-zero.
//!
//! The table grows on demand and never moves a record, so a `&Entry` stays valid (and keeps its
//! counts) for the life of the table; callers cache them:
//!
//! - **Records** are appended to *segments* of geometrically growing size (segment `s` holds
//!   `base << s` records), mapped from a [`Memory`] when the previous ones are full: one mapping per
//!   doubling, never a `malloc`.
//! - **Histograms**: a record keeps its wait and hold histograms compact, inside the record (32
//!   bytes each, see [`crate::hist::LiveHist`]), and promotes one to a full 65-bucket log2
//!   histogram (520 bytes) when its values spread past 15 buckets or one bucket passes 65,535.
//!   The full histograms live beside the records of their segment in two arrays of their own. A
//!   [`Memory`] maps them reserved and uncommitted (`MAP_NORESERVE`), so their pages cost memory
//!   only once a record promotes: a record costs its 192 bytes (three cache lines) of counters,
//!   compact histograms and key, whatever the timing options.
//! - **The index** (key hash → record number, 8 bytes a slot, at most half full) is open-addressed
//!   with linear probing and doubles by rehashing into a new mapping. Only the writer reads it;
//!   readers iterate the records themselves, in insertion order.
//!
//! When a mapping is refused (the [`Memory`]'s cap is reached, or the kernel has no memory),
//! [`Table::get`] returns `None` and the caller counts the acquisition as dropped: data is lost
//! visibly, never corrupted (seed 001).
//!
//! ```
//! use lockmeter_core::table::{HeapMemory, Table};
//! let mem = HeapMemory::new(usize::MAX);
//! let t = Table::new(&mem, 16);
//! t.get(1, 0x401000).unwrap().stats.acquisitions.add(1);
//! assert_eq!(t.get(1, 0x401000).unwrap().stats.acquisitions.get(), 1);
//! assert_eq!(t.len(), 1);
//! ```

use crate::hist::Log2Hist;
use crate::memory::page_up;
pub use crate::memory::{HeapMemory, Memory};
use crate::mix64;
use crate::probe::Probe;
use crate::stats::{LiveStats, hold_offset};
use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering::*};

/// Most segments: far more records than a `u32` record number can name.
const SEGMENTS: usize = 32;

/// One record of a [`Table`]: 192 bytes, three cache lines of its own (64-byte aligned), the
/// statistics first, so that what an uncontended acquisition and release write is one line (see
/// [`LiveStats`]); the key, read only when a lookup misses the caller's cache, last.
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub struct Entry {
    /// The record's statistics.
    pub stats: LiveStats,
    k1: AtomicU64,
    k2: AtomicU64,
    /// A word the writer keeps beside the record (the preload: which lock identity the counts
    /// belong to, when the key names only the registry slot); 0 in a new record.
    pub tag: AtomicU64,
}

const _: () = assert!(size_of::<Entry>() == 192 && core::mem::offset_of!(Entry, stats) == 0);

impl Entry {
    /// The entry's key, `(0, _)` when unused.
    pub fn key(&self) -> (u64, u64) {
        (self.k1.load(Acquire), self.k2.load(Relaxed))
    }
}

/// Bytes one record costs at most: counters, both histograms, its share of the index.
pub const RECORD_BYTES: usize = size_of::<Entry>() + 2 * size_of::<Log2Hist>() + 16;

/// A growable single-writer table (see the module docs).
pub struct Table<'m> {
    mem: &'m dyn Memory,
    /// Records in segment 0 (a power of two).
    base: usize,
    segs: [AtomicPtr<u8>; SEGMENTS],
    /// Records published (readers iterate `0..len`).
    len: AtomicUsize,
    /// The index: `(tag << 32) | (record + 1)` per slot, 0 when empty. Writer only.
    index: AtomicPtr<AtomicU64>,
    index_cap: AtomicUsize,
    /// Bytes mapped for this table.
    mapped: AtomicU64,
}

impl core::fmt::Debug for Table<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Table")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("mapped_bytes", &self.mapped_bytes())
            .finish()
    }
}

/// Byte layout of segment `s`: (records, offset of wait hists, offset of hold hists, total). The
/// hold histograms lie [`hold_offset`] of the records' number after the wait ones, so that a
/// record keeps one pointer for both (see [`LiveStats::attach`]).
const fn seg_layout(base: usize, s: usize) -> (usize, usize, usize, usize) {
    let n = base << s;
    let wait = page_up(n * size_of::<Entry>());
    let hold = wait + hold_offset(n);
    (n, wait, hold, hold + hold_offset(n))
}

impl<'m> Table<'m> {
    /// An empty table drawing on `mem`, whose first segment holds `initial` records (rounded up to
    /// a power of two, at least 16). Nothing is mapped before the first insert.
    pub const fn new(mem: &'m dyn Memory, initial: usize) -> Self {
        let base = if initial <= 16 { 16 } else { initial.next_power_of_two() };
        Table {
            mem,
            base,
            segs: [const { AtomicPtr::new(core::ptr::null_mut()) }; SEGMENTS],
            len: AtomicUsize::new(0),
            index: AtomicPtr::new(core::ptr::null_mut()),
            index_cap: AtomicUsize::new(0),
            mapped: AtomicU64::new(0),
        }
    }

    /// Number of records in use.
    #[inline]
    pub fn len(&self) -> usize {
        self.len.load(Acquire)
    }

    /// Whether no record is in use.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Records the mapped segments hold (the table grows past it on demand).
    pub fn capacity(&self) -> usize {
        let mapped = self.segs.iter().take_while(|s| !s.load(Acquire).is_null()).count();
        self.base * ((1usize << mapped) - 1)
    }

    /// Bytes mapped for this table (records, histograms reserved, index).
    pub fn mapped_bytes(&self) -> u64 {
        self.mapped.load(Relaxed)
    }

    /// Record number `n`'s segment and offset in it.
    #[inline(always)]
    fn locate(&self, n: usize) -> (usize, usize) {
        let q = n / self.base + 1;
        let s = (usize::BITS - 1 - q.leading_zeros()) as usize;
        (s, n - self.base * ((1usize << s) - 1))
    }

    /// Record `n` (below `len`, or being inserted by the writer).
    #[inline(always)]
    fn record(&self, n: usize) -> Option<&Entry> {
        let (s, off) = self.locate(n);
        let p = self.segs.get(s)?.load(Acquire);
        if p.is_null() || off >= self.base << s {
            return None;
        }
        // SAFETY: segment `s` holds `base << s` entries (checked above), mapped zeroed (a valid
        // Entry: atomics and null pointers) and never unmapped while the table lives.
        Some(unsafe { &*(p as *const Entry).add(off) })
    }

    /// The record for `(k1, k2)`, inserted if absent; `None` if it cannot be mapped or `k1 == 0`.
    /// Only the table's single writer may call this.
    #[inline]
    pub fn get(&self, k1: u64, k2: u64) -> Option<&Entry> {
        if k1 == 0 {
            return None;
        }
        let h = mix64(k1 ^ k2.rotate_left(29));
        let tag = h >> 32;
        let idx = self.index.load(Relaxed);
        let cap = self.index_cap.load(Relaxed);
        if !idx.is_null() {
            for i in Probe::new(h, cap, cap) {
                // SAFETY: the index holds `cap` (a power of two) slots; a probe is below `cap`.
                let v = unsafe { &*idx.add(i) }.load(Relaxed);
                if v == 0 {
                    break;
                }
                if v >> 32 == tag {
                    let e = self.record((v & 0xffff_ffff) as usize - 1)?;
                    if e.k1.load(Relaxed) == k1 && e.k2.load(Relaxed) == k2 {
                        return Some(e);
                    }
                }
            }
        }
        self.insert(k1, k2, h)
    }

    #[cold]
    #[inline(never)]
    fn insert(&self, k1: u64, k2: u64, h: u64) -> Option<&Entry> {
        let n = self.len.load(Relaxed);
        if n >= u32::MAX as usize - 1 {
            return None;
        }
        if !self.mem.charge(RECORD_BYTES) {
            return None;
        }
        // Room in the index (at most half full) and in the segments, or nothing changes (but
        // the charge: the kernel refused a mapping, and the record is counted as dropped).
        if (n + 1) * 2 > self.index_cap.load(Relaxed) && !self.grow_index() {
            return None;
        }
        let (s, off) = self.locate(n);
        let seg = self.segs.get(s)?;
        if seg.load(Relaxed).is_null() && !self.map_segment(s) {
            return None;
        }
        let p = seg.load(Relaxed);
        let (segn, wait, _, _) = seg_layout(self.base, s);
        let e = self.record(n)?;
        // SAFETY: the histogram arrays of segment `s` hold `segn` (a power of two) entries each,
        // the hold array `hold_offset(segn)` after the wait array; `off` is below `segn`.
        unsafe { e.stats.attach((p.add(wait) as *const Log2Hist).add(off), segn) }
        e.k2.store(k2, Relaxed);
        e.k1.store(k1, Release);
        self.index_put(h, n);
        // Release: a reader that sees the new length sees the record's key and histograms.
        self.len.store(n + 1, Release);
        Some(e)
    }

    /// Puts record `n` (hash `h`) into the index, which has room.
    fn index_put(&self, h: u64, n: usize) {
        let idx = self.index.load(Relaxed);
        let cap = self.index_cap.load(Relaxed);
        for i in Probe::new(h, cap, cap) {
            // SAFETY: as in `get`.
            let slot = unsafe { &*idx.add(i) };
            if slot.load(Relaxed) == 0 {
                slot.store(((h >> 32) << 32) | (n as u64 + 1), Relaxed);
                return;
            }
        }
    }

    fn map_segment(&self, s: usize) -> bool {
        let (_, _, _, bytes) = seg_layout(self.base, s);
        let p = self.mem.map(bytes);
        if p.is_null() {
            return false;
        }
        self.mapped.fetch_add(bytes as u64, Relaxed);
        if let Some(seg) = self.segs.get(s) {
            seg.store(p, Release);
        }
        true
    }

    /// Doubles the index (or maps the first one), rehashing every record.
    fn grow_index(&self) -> bool {
        let old = self.index.load(Relaxed);
        let old_cap = self.index_cap.load(Relaxed);
        let cap = if old_cap == 0 { (self.base * 2).max(64) } else { old_cap * 2 };
        let bytes = page_up(cap * 8);
        let p = self.mem.map(bytes) as *mut AtomicU64;
        if p.is_null() {
            return false;
        }
        self.mapped.fetch_add(bytes as u64, Relaxed);
        self.index.store(p, Relaxed);
        self.index_cap.store(cap, Relaxed);
        for n in 0..self.len.load(Relaxed) {
            if let Some(e) = self.record(n) {
                let (k1, k2) = (e.k1.load(Relaxed), e.k2.load(Relaxed));
                self.index_put(mix64(k1 ^ k2.rotate_left(29)), n);
            }
        }
        if !old.is_null() {
            let old_bytes = page_up(old_cap * 8);
            self.mapped.fetch_sub(old_bytes as u64, Relaxed);
            // SAFETY: the old index came from `map` with this size; only the writer (us) reads
            // the index, and it now uses the new one.
            unsafe { self.mem.unmap(old.cast(), old_bytes) };
        }
        true
    }

    /// Empties the table: every record in use is unpublished and zeroed; the memory stays mapped
    /// for the records to come. Only the table's single writer may call this; a concurrent reader
    /// may see a record vanish, never a torn key.
    pub fn clear(&self) {
        let n = self.len.load(Relaxed);
        self.len.store(0, Release);
        self.mem.refund(n * RECORD_BYTES);
        for i in 0..n {
            if let Some(e) = self.record(i) {
                e.k1.store(0, Release);
                e.k2.store(0, Relaxed);
                e.tag.store(0, Relaxed);
                e.stats.clear();
            }
        }
        let idx = self.index.load(Relaxed);
        for i in 0..self.index_cap.load(Relaxed) {
            // SAFETY: `i` is below the index's capacity.
            unsafe { &*idx.add(i) }.store(0, Relaxed);
        }
    }

    /// The records in use, in insertion order (any thread), with their keys and tags.
    pub fn entries(&self) -> impl Iterator<Item = &Entry> + '_ {
        (0..self.len()).filter_map(|n| self.record(n)).filter(|e| e.key().0 != 0)
    }

    /// The records in use, in insertion order (any thread).
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64, &LiveStats)> + '_ {
        (0..self.len()).filter_map(|n| {
            let e = self.record(n)?;
            let (k1, k2) = e.key();
            (k1 != 0).then_some((k1, k2, &e.stats))
        })
    }
}

impl Drop for Table<'_> {
    fn drop(&mut self) {
        for (s, seg) in self.segs.iter().enumerate() {
            let p = seg.load(Relaxed);
            if !p.is_null() {
                // SAFETY: mapped by `map_segment` with this layout; `&mut self`: no reference into
                // the table is alive.
                unsafe { self.mem.unmap(p, seg_layout(self.base, s).3) };
            }
        }
        let idx = self.index.load(Relaxed);
        if !idx.is_null() {
            // SAFETY: mapped by `grow_index` with this size.
            unsafe { self.mem.unmap(idx.cast(), page_up(self.index_cap.load(Relaxed) * 8)) };
        }
    }
}

#[cfg(test)]
mod tests;

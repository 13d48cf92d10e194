//! A fixed-capacity, single-writer, open-addressed table of [`LiveStats`] records.
//!
//! One table per thread (the thread's *shard*): only that thread inserts and updates, any thread
//! may read (the profile writer merges all shards at the end). Keys are two `u64`s; the first must
//! be non-zero (zero marks an empty entry, so zeroed memory, e.g. fresh `mmap` pages, is a valid
//! empty table).
//!
//! When a key does not fit (the table is 7/8 full or the probe sequence is exhausted), [`Table::get`]
//! returns `None` and the caller counts the acquisition as dropped: data is lost visibly, never
//! corrupted (seed 001).
//!
//! ```
//! use lockmeter_core::table::{Entry, Table};
//! let mem: Vec<Entry> = (0..64).map(|_| Entry::new()).collect();
//! let t = Table::new(&mem);
//! t.get(1, 0x401000).unwrap().stats.acquisitions.add(1);
//! assert_eq!(t.get(1, 0x401000).unwrap().stats.acquisitions.get(), 1);
//! assert_eq!(t.len(), 1);
//! ```

use crate::stats::LiveStats;
use crate::{Counter, mix64};
use core::sync::atomic::{AtomicU64, Ordering};

/// Longest probe sequence before giving up.
const MAX_PROBE: usize = 64;

/// One record of a [`Table`].
#[derive(Debug, Default)]
#[repr(C)]
pub struct Entry {
    k1: AtomicU64,
    k2: AtomicU64,
    /// The record's statistics.
    pub stats: LiveStats,
}

impl Entry {
    /// An empty entry (all zero).
    pub const fn new() -> Self {
        Entry { k1: AtomicU64::new(0), k2: AtomicU64::new(0), stats: LiveStats::new() }
    }
    /// The entry's key, `(0, _)` when empty.
    pub fn key(&self) -> (u64, u64) {
        (self.k1.load(Ordering::Acquire), self.k2.load(Ordering::Relaxed))
    }
}

/// A single-writer table over borrowed entries (see the module docs).
#[derive(Debug)]
pub struct Table<'a> {
    entries: &'a [Entry],
    mask: usize,
    limit: u64,
    len: Counter,
}

impl<'a> Table<'a> {
    /// A table over `entries`, which must be empty (zeroed). The usable capacity is the largest
    /// power of two not above `entries.len()`.
    pub fn new(entries: &'a [Entry]) -> Self {
        let cap = crate::pow2_floor(entries.len());
        Table {
            entries: &entries[..cap],
            mask: cap.wrapping_sub(1),
            limit: (cap as u64 * 7) / 8,
            len: Counter::new(),
        }
    }

    /// Number of records in use.
    #[inline]
    pub fn len(&self) -> usize {
        self.len.get() as usize
    }

    /// Whether no record is in use.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Capacity in records.
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// The record for `(k1, k2)`, inserted if absent; `None` if it does not fit or `k1 == 0`.
    /// Only the table's single writer may call this.
    #[inline]
    pub fn get(&self, k1: u64, k2: u64) -> Option<&'a Entry> {
        if k1 == 0 || self.entries.is_empty() {
            return None;
        }
        let mut i = mix64(k1 ^ k2.rotate_left(29)) as usize;
        for _ in 0..MAX_PROBE.min(self.entries.len()) {
            let e = self.entries.get(i & self.mask)?;
            // Relaxed suffices for the writer: it is the only thread that ever stores keys.
            let ek1 = e.k1.load(Ordering::Relaxed);
            if ek1 == k1 && e.k2.load(Ordering::Relaxed) == k2 {
                return Some(e);
            }
            if ek1 == 0 {
                if self.len.get() >= self.limit {
                    return None;
                }
                e.k2.store(k2, Ordering::Relaxed);
                // Release: a reader that sees k1 also sees k2.
                e.k1.store(k1, Ordering::Release);
                self.len.add(1);
                return Some(e);
            }
            i = i.wrapping_add(1);
        }
        None
    }

    /// Empties the table: every record in use is unpublished and zeroed. Only the table's single
    /// writer may call this; a concurrent reader may see a record vanish, never a torn key.
    pub fn clear(&self) {
        for e in self.entries {
            if e.k1.load(Ordering::Relaxed) != 0 {
                e.k1.store(0, Ordering::Release);
                e.k2.store(0, Ordering::Relaxed);
                e.stats.clear();
            }
        }
        self.len.set(0);
    }

    /// The records in use, in table order (any thread).
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64, &'a LiveStats)> + 'a {
        self.entries.iter().filter_map(|e| {
            let (k1, k2) = e.key();
            (k1 != 0).then_some((k1, k2, &e.stats))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem(n: usize) -> Vec<Entry> {
        (0..n).map(|_| Entry::new()).collect()
    }

    #[test]
    fn insert_find_and_iterate() {
        let m = mem(256);
        let t = Table::new(&m);
        for k in 1..=100u64 {
            t.get(k, k * 7).unwrap().stats.acquisitions.add(k);
        }
        for k in 1..=100u64 {
            assert_eq!(t.get(k, k * 7).unwrap().stats.acquisitions.get(), k);
        }
        assert_eq!(t.len(), 100);
        let sum: u64 = t.iter().map(|(_, _, s)| s.acquisitions.get()).sum();
        assert_eq!(sum, 5050);
        assert!(t.get(0, 1).is_none());
    }

    #[test]
    fn overflow_is_refused_not_corrupting() {
        let m = mem(100); // usable capacity 64, limit 56
        let t = Table::new(&m);
        assert_eq!(t.capacity(), 64);
        let mut ok = 0;
        for k in 1..=1000u64 {
            if let Some(e) = t.get(k, 0) {
                e.stats.acquisitions.add(1);
                ok += 1;
            }
        }
        assert_eq!(ok, 56);
        assert_eq!(t.len(), 56);
        // Existing keys are still found and intact.
        let found = (1..=1000u64).filter(|&k| t.get(k, 0).is_some()).count();
        assert_eq!(found, 56);
        assert_eq!(t.iter().map(|(_, _, s)| s.acquisitions.get()).sum::<u64>(), 56);
    }

    #[test]
    fn clear_empties_and_the_table_refills() {
        let m = mem(64);
        let t = Table::new(&m);
        for k in 1..=56u64 {
            t.get(k, 3).unwrap().stats.acquisitions.add(k);
        }
        assert!(t.get(57, 3).is_none(), "full");
        t.clear();
        assert_eq!(t.len(), 0);
        assert_eq!(t.iter().count(), 0);
        let e = t.get(9, 4).unwrap();
        assert_eq!(e.stats.acquisitions.get(), 0, "a reused record starts at zero");
        e.stats.acquisitions.add(1);
        assert_eq!(t.iter().map(|(_, _, s)| s.acquisitions.get()).sum::<u64>(), 1);
    }

    #[test]
    fn empty_table_refuses() {
        let t = Table::new(&[]);
        assert!(t.get(1, 1).is_none());
        assert_eq!(t.capacity(), 0);
    }
}

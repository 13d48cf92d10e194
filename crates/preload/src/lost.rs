//! Acquisitions not recorded, told apart by lock and call site.
//!
//! When a thread's record table cannot grow (the collector's memory cap, `--max-memory`, is
//! reached), the acquisition is counted in the thread's `dropped` counter, and here against the
//! lock identity (its event key: registry slot, generation, class, kind, mode) and the call site,
//! so that the profile says which locks and sites lost what (the LOST records), never only how
//! much. The table is fixed (`.bss`, resident only where touched) and shared by every thread:
//! entries are claimed with a compare-and-swap and counted with `fetch_add`, on a path that has
//! already lost its record, never on a recorded one. A loss that finds no entry (the table is
//! full) is still in the `dropped` counters, and counted here as not itemized.

use core::sync::atomic::{AtomicU64, Ordering::*};

/// Entries: (lock, site, mode) combinations told apart.
const CAP: usize = 4096;
/// Probes before a loss is left not itemized.
const PROBES: usize = 64;

struct Entry {
    /// The lock's event key (`classes::event_key`), 0 while free.
    key: AtomicU64,
    /// The call site + 1, 0 until the claimer wrote it.
    site: AtomicU64,
    count: AtomicU64,
}

static TABLE: [Entry; CAP] =
    [const { Entry { key: AtomicU64::new(0), site: AtomicU64::new(0), count: AtomicU64::new(0) } };
        CAP];
/// Losses that found no entry.
static NOT_ITEMIZED: AtomicU64 = AtomicU64::new(0);
/// Claims tried: while 0, the table is not read (it is in the preload's data, shared with the
/// watcher, where reading a page never written allocates it: 96 KiB in each process that lost
/// nothing).
static CLAIMED: AtomicU64 = AtomicU64::new(0);

/// Counts one acquisition of lock `key` (an event key, never 0) at `site` that was not recorded.
/// Never blocks, allocates or panics. Two threads that claim entries for the same (lock, site)
/// at once may make two entries; the profile writer adds them up.
pub(crate) fn note(key: u64, site: u64) {
    let h = lockmeter_core::mix64(key ^ site.rotate_left(23)) as usize;
    let want = site.wrapping_add(1);
    for i in 0..PROBES {
        let Some(e) = TABLE.get((h.wrapping_add(i)) % CAP) else { break };
        let mut k = e.key.load(Acquire);
        if k == 0 {
            // Counted before the claim (a claim lost to another thread counts too): a reader
            // that finds 0 finds no entry.
            CLAIMED.fetch_add(1, Release);
            match e.key.compare_exchange(0, key, AcqRel, Acquire) {
                Ok(_) => {
                    e.count.fetch_add(1, Relaxed);
                    e.site.store(want, Release);
                    return;
                }
                Err(cur) => k = cur,
            }
        }
        if k == key && e.site.load(Acquire) == want {
            e.count.fetch_add(1, Relaxed);
            return;
        }
    }
    NOT_ITEMIZED.fetch_add(1, Relaxed);
}

/// Calls `f(key, site, count)` for each (lock, site) with losses (any thread; the counts are
/// those at the time of reading).
pub(crate) fn for_each(mut f: impl FnMut(u64, u64, u64)) {
    if CLAIMED.load(Acquire) == 0 {
        return;
    }
    for e in &TABLE {
        let site = e.site.load(Acquire);
        let key = e.key.load(Acquire);
        let n = e.count.load(Relaxed);
        if key != 0 && site != 0 && n > 0 {
            f(key, site - 1, n);
        }
    }
}

/// Entries in use (an upper bound on the (lock, site) pairs [`for_each`] calls back with).
pub(crate) fn entries() -> usize {
    if CLAIMED.load(Acquire) == 0 {
        return 0;
    }
    TABLE.iter().filter(|e| e.key.load(Relaxed) != 0).count()
}

/// Losses that are in the `dropped` counters but not told apart by lock.
pub(crate) fn not_itemized() -> u64 {
    NOT_ITEMIZED.load(Relaxed)
}

/// Forgets every loss (a fork child starts a fresh profile).
pub(crate) fn reset_for_child() {
    if CLAIMED.swap(0, Relaxed) == 0 {
        NOT_ITEMIZED.store(0, Relaxed);
        return;
    }
    for e in &TABLE {
        if e.key.load(Relaxed) != 0 {
            e.count.store(0, Relaxed);
            e.site.store(0, Relaxed);
            e.key.store(0, Relaxed);
        }
    }
    NOT_ITEMIZED.store(0, Relaxed);
}

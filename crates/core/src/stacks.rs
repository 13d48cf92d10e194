//! Call stacks and who-waited-on-whom, per thread, in fixed memory.
//!
//! - [`StackStore`]: interned call stacks (up to [`MAX_FRAMES`] return addresses), keyed by a
//!   hash of their frames. Stacks are recorded only off the uncontended path (contended
//!   acquisitions, sampled acquisitions, a lock's first use), so the store stays small.
//! - [`EventTable`]: aggregated events keyed by (lock record key, kind, stack, holder site, holder
//!   stack): how many, and the wait they cost. For a contended acquisition, the *holder* is the
//!   thread that held the lock when the waiter found it held: its call site, and its stack when
//!   that acquisition recorded one. So a report can say "site W waited T ns on lock L held from
//!   site H".
//!
//! Both are single-writer (the owning thread) and readable by any thread, like
//! [`crate::table::Table`]; what does not fit is refused, and the caller counts it.

use crate::fixed::{Entry, FixedTable, entry_head};
use crate::{Counter, mix64};
use core::sync::atomic::{AtomicU64, Ordering};

/// Most frames a stack keeps.
pub const MAX_FRAMES: usize = 64;
const MAX_PROBE: usize = 32;

/// Hash of a stack's frames (never 0).
pub fn stack_hash(frames: &[u64]) -> u64 {
    let mut h = 0x243f_6a88_85a3_08d3u64 ^ frames.len() as u64;
    for &f in frames {
        h = mix64(h ^ f).rotate_left(7);
    }
    h | 1
}

/// One interned stack.
#[derive(Debug)]
#[repr(C)]
pub struct StackEntry {
    hash: AtomicU64,
    len: AtomicU64,
    frames: [AtomicU64; MAX_FRAMES],
}

impl StackEntry {
    /// An empty entry.
    pub const fn new() -> Self {
        StackEntry {
            hash: AtomicU64::new(0),
            len: AtomicU64::new(0),
            frames: [const { AtomicU64::new(0) }; MAX_FRAMES],
        }
    }
}

impl Default for StackEntry {
    fn default() -> Self {
        Self::new()
    }
}

impl Entry for StackEntry {
    entry_head!(u64, hash, true);
    #[inline(always)]
    fn tag(hash: &u64) -> u64 {
        *hash
    }
    #[inline(always)]
    fn hash(hash: &u64) -> u64 {
        *hash
    }
}

/// A thread's table over `entries`: a key probes at most [`MAX_PROBE`] entries, and 7/8 of them
/// are used at most.
fn thread_table<E: Entry>(entries: &[E]) -> FixedTable<'_, E> {
    FixedTable::new(entries, MAX_PROBE, crate::pow2_floor(entries.len()) * 7 / 8)
}

/// Interned stacks over borrowed, zeroed entries.
#[derive(Debug)]
pub struct StackStore<'a> {
    table: FixedTable<'a, StackEntry>,
}

impl<'a> StackStore<'a> {
    /// A store over `entries` (zeroed); capacity is the largest power of two not above the length.
    pub fn new(entries: &'a [StackEntry]) -> Self {
        StackStore { table: thread_table(entries) }
    }

    /// Interns `frames` (truncated to [`MAX_FRAMES`]); returns its hash, or `None` if it does not
    /// fit. Single writer only.
    pub fn intern(&self, frames: &[u64]) -> Option<u64> {
        let frames = frames.get(..frames.len().min(MAX_FRAMES))?;
        let h = stack_hash(frames);
        self.table.insert_one(&h, |e| {
            for (d, &f) in e.frames.iter().zip(frames) {
                d.store(f, Ordering::Relaxed);
            }
            e.len.store(frames.len() as u64, Ordering::Relaxed);
        })?;
        Some(h)
    }

    /// The table of stacks (capacity, number, refusals).
    pub fn table(&self) -> &FixedTable<'a, StackEntry> {
        &self.table
    }

    /// Empties the store. Single writer only.
    pub fn clear(&self) {
        self.table.clear_one(|e| {
            e.len.store(0, Ordering::Relaxed);
            for f in &e.frames {
                f.store(0, Ordering::Relaxed);
            }
        });
    }

    /// Every stack: (hash, frames copied into `buf`, count). Any thread.
    pub fn for_each(&self, mut f: impl FnMut(u64, &[u64])) {
        let mut buf = [0u64; MAX_FRAMES];
        self.table.for_each(|_, e| {
            let h = e.hash.load(Ordering::Relaxed);
            let n = (e.len.load(Ordering::Relaxed) as usize).min(MAX_FRAMES);
            for (d, s) in buf.iter_mut().zip(e.frames.iter()).take(n) {
                *d = s.load(Ordering::Relaxed);
            }
            f(h, buf.get(..n).unwrap_or(&[]));
        });
    }
}

/// What an event counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum EventKind {
    /// A contended acquisition (weight: wait time).
    Contended = 1,
    /// A sampled acquisition, contended or not (weight: count).
    Sampled = 2,
    /// The first acquisition of a lock identity: where a heap lock comes from.
    FirstUse = 3,
    /// A release of a lock that other threads wanted: the holder's stack (captured after the
    /// release, so the hold is not lengthened) and its hold time (in `wait_ns`).
    Holding = 4,
}

impl EventKind {
    /// The kind from its code.
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            1 => EventKind::Contended,
            2 => EventKind::Sampled,
            3 => EventKind::FirstUse,
            4 => EventKind::Holding,
            _ => return None,
        })
    }
}

/// One aggregated event.
#[derive(Debug, Default)]
#[repr(C)]
pub struct EventEntry {
    k_lock: AtomicU64,
    k_kind: AtomicU64,
    k_stack: AtomicU64,
    k_holder_site: AtomicU64,
    k_holder_stack: AtomicU64,
    /// Events.
    pub count: Counter,
    /// Total wait (ns).
    pub wait_ns: Counter,
    /// Longest wait (ns).
    pub wait_ns_max: Counter,
}

impl EventEntry {
    /// An empty entry.
    pub const fn new() -> Self {
        EventEntry {
            k_lock: AtomicU64::new(0),
            k_kind: AtomicU64::new(0),
            k_stack: AtomicU64::new(0),
            k_holder_site: AtomicU64::new(0),
            k_holder_stack: AtomicU64::new(0),
            count: Counter::new(),
            wait_ns: Counter::new(),
            wait_ns_max: Counter::new(),
        }
    }
}

/// The key of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventKey {
    /// The record key of the lock (identity and mode, as the collector packs it; never 0).
    pub lock: u64,
    /// Event kind.
    pub kind: EventKind,
    /// Hash of the waiter's (acquirer's) stack, in the same thread's [`StackStore`].
    pub stack: u64,
    /// Call site of the holder (contended events), else 0.
    pub holder_site: u64,
    /// Stack hash of the holder's acquisition when it recorded one, else 0.
    pub holder_stack: u64,
}

impl Entry for EventEntry {
    entry_head!(EventKey, k_lock, false);
    #[inline(always)]
    fn tag(k: &EventKey) -> u64 {
        k.lock
    }
    #[inline(always)]
    fn hash(k: &EventKey) -> u64 {
        mix64(
            k.lock
                ^ (k.kind as u64).rotate_left(40)
                ^ mix64(k.stack ^ k.holder_site.rotate_left(17) ^ k.holder_stack.rotate_left(31)),
        )
    }
    #[inline(always)]
    fn matches(&self, k: &EventKey) -> bool {
        self.k_kind.load(Ordering::Relaxed) == k.kind as u64
            && self.k_stack.load(Ordering::Relaxed) == k.stack
            && self.k_holder_site.load(Ordering::Relaxed) == k.holder_site
            && self.k_holder_stack.load(Ordering::Relaxed) == k.holder_stack
    }
    #[inline(always)]
    fn write(&self, k: &EventKey) {
        self.k_kind.store(k.kind as u64, Ordering::Relaxed);
        self.k_stack.store(k.stack, Ordering::Relaxed);
        self.k_holder_site.store(k.holder_site, Ordering::Relaxed);
        self.k_holder_stack.store(k.holder_stack, Ordering::Relaxed);
    }
}

/// Aggregated events over borrowed, zeroed entries.
#[derive(Debug)]
pub struct EventTable<'a> {
    table: FixedTable<'a, EventEntry>,
}

impl<'a> EventTable<'a> {
    /// A table over `entries` (zeroed).
    pub fn new(entries: &'a [EventEntry]) -> Self {
        EventTable { table: thread_table(entries) }
    }

    /// The entry for `k`, inserted if absent; `None` if it does not fit. Single writer only.
    pub fn get(&self, k: &EventKey) -> Option<&'a EventEntry> {
        if k.lock == 0 {
            return None;
        }
        self.table.insert_one(k, |_| {}).map(|(_, e)| e)
    }

    /// The table of events (capacity, number, refusals).
    pub fn table(&self) -> &FixedTable<'a, EventEntry> {
        &self.table
    }

    /// Empties the table. Single writer only.
    pub fn clear(&self) {
        self.table.clear_one(|e| {
            for c in [&e.k_kind, &e.k_stack, &e.k_holder_site, &e.k_holder_stack] {
                c.store(0, Ordering::Relaxed);
            }
            e.count.set(0);
            e.wait_ns.set(0);
            e.wait_ns_max.set(0);
        });
    }

    /// Every event with its key. Any thread.
    pub fn for_each(&self, mut f: impl FnMut(EventKey, &EventEntry)) {
        self.table.for_each(|_, e| {
            let Some(kind) = EventKind::from_u8(e.k_kind.load(Ordering::Relaxed) as u8) else {
                return;
            };
            let key = EventKey {
                lock: e.k_lock.load(Ordering::Relaxed),
                kind,
                stack: e.k_stack.load(Ordering::Relaxed),
                holder_site: e.k_holder_site.load(Ordering::Relaxed),
                holder_stack: e.k_holder_stack.load(Ordering::Relaxed),
            };
            f(key, e);
        });
    }
}

/// Whether a module (a file name, e.g. `libc.so.6`) is one whose frames do not say where a
/// program takes a lock: the C library, the dynamic loader, lockmeter's own collector.
pub fn is_system_library(file_name: &str) -> bool {
    ["libc.so", "libc-", "libpthread", "ld-linux", "ld64.so", "liblockmeter_preload"]
        .iter()
        .any(|p| file_name.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stacks_intern_once_and_read_back() {
        let mem: Vec<StackEntry> = (0..16).map(|_| StackEntry::new()).collect();
        let s = StackStore::new(&mem);
        let a = s.intern(&[1, 2, 3]).unwrap();
        assert_eq!(s.intern(&[1, 2, 3]), Some(a));
        let b = s.intern(&[1, 2]).unwrap();
        assert_ne!(a, b);
        assert_eq!(s.table().len(), 2);
        let mut seen = Vec::new();
        s.for_each(|h, f| seen.push((h, f.to_vec())));
        seen.sort();
        let mut want = vec![(a, vec![1, 2, 3]), (b, vec![1, 2])];
        want.sort();
        assert_eq!(seen, want);
        // 7/8 of 16 fit, then refusal.
        let n = (10..100u64).filter(|&i| s.intern(&[i]).is_some()).count();
        assert_eq!(n + 2, 14);
    }

    #[test]
    fn events_aggregate_by_full_key() {
        let mem: Vec<EventEntry> = (0..64).map(|_| EventEntry::new()).collect();
        let t = EventTable::new(&mem);
        let k = EventKey {
            lock: 1 << 63 | 5,
            kind: EventKind::Contended,
            stack: 7,
            holder_site: 0x40,
            holder_stack: 0,
        };
        for w in [10, 30] {
            let e = t.get(&k).unwrap();
            e.count.add(1);
            e.wait_ns.add(w);
            e.wait_ns_max.max(w);
        }
        let k2 = EventKey { holder_site: 0x80, ..k };
        t.get(&k2).unwrap().count.add(1);
        let k3 = EventKey { kind: EventKind::FirstUse, ..k };
        t.get(&k3).unwrap().count.add(1);
        let mut got = Vec::new();
        t.for_each(|key, e| {
            got.push((
                key.kind,
                key.holder_site,
                e.count.get(),
                e.wait_ns.get(),
                e.wait_ns_max.get(),
            ))
        });
        got.sort_by_key(|g| (g.0, g.1));
        assert_eq!(
            got,
            vec![
                (EventKind::Contended, 0x40, 2, 40, 30),
                (EventKind::Contended, 0x80, 1, 0, 0),
                (EventKind::FirstUse, 0x40, 1, 0, 0)
            ]
        );
    }

    #[test]
    fn clear_empties_stacks_and_events() {
        let mem: Vec<StackEntry> = (0..16).map(|_| StackEntry::new()).collect();
        let s = StackStore::new(&mem);
        for i in 1..=14u64 {
            s.intern(&[i, i + 1]).unwrap();
        }
        assert!(s.intern(&[99]).is_none(), "full");
        s.clear();
        assert_eq!(s.table().len(), 0);
        let mut n = 0;
        s.for_each(|_, _| n += 1);
        assert_eq!(n, 0);
        let h = s.intern(&[5]).unwrap();
        let mut seen = Vec::new();
        s.for_each(|hh, f| seen.push((hh, f.to_vec())));
        assert_eq!(seen, vec![(h, vec![5])]);

        let mem: Vec<EventEntry> = (0..16).map(|_| EventEntry::new()).collect();
        let t = EventTable::new(&mem);
        let k = EventKey {
            lock: 3,
            kind: EventKind::Contended,
            stack: 1,
            holder_site: 2,
            holder_stack: 4,
        };
        t.get(&k).unwrap().count.add(7);
        t.clear();
        assert_eq!(t.table().len(), 0);
        let mut n = 0;
        t.for_each(|_, _| n += 1);
        assert_eq!(n, 0);
        assert_eq!(t.get(&k).unwrap().count.get(), 0, "a reused entry starts at zero");
    }
}

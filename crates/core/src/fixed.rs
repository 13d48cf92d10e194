//! The one fixed-capacity concurrent table of lockmeter: open addressing ([`crate::probe`]) over
//! a slot array the caller provides (a `Vec` in tests, mmapped or static memory in the preload:
//! the table never allocates), with insert, lookup and an overflow count.
//!
//! Each entry publishes itself through one atomic word ([`Entry::word`]): 0 while the entry is
//! empty, the key's *tag* ([`Entry::tag`], never 0) once it holds a key. The other fields of the
//! key, when the tag is not the whole key, and the entry's value are the entry type's own.
//!
//! - **One writer** ([`FixedTable::insert_one`]): the owning thread writes the key's fields and
//!   initial value with relaxed stores, then the tag with a release store; a reader on any other
//!   thread loads the tag with acquire, so it never sees a key half written. No read-modify-write:
//!   it costs what a hand-written single-writer table costs.
//! - **Many writers** ([`FixedTable::insert`]): the tag must be the whole key
//!   ([`Entry::TAG_IS_KEY`]); a new key claims an empty entry with one compare-and-swap of the
//!   tag, so two threads inserting the same key get the same entry, and a reader never sees a key
//!   that is not whole. The value starts as the empty entry's (zero); `init` runs after the
//!   claim, so readers may see what it sets only later.
//!
//! - **Deletion** ([`Entry::TOMBSTONES`], many writers only): [`FixedTable::retire`] turns an
//!   entry's word into [`TOMBSTONE`]; lookups probe past it, and [`FixedTable::insert`] puts a new
//!   key in the first tombstone of its probe sequence (else the empty entry that ends it), retrying
//!   the whole probe after a lost compare-and-swap. The choice is a constant of the entry type, so
//!   a table without deletion compiles to the code it had: no tombstone test anywhere.
//!
//! Lookups ([`FixedTable::find`], [`FixedTable::for_each`]) never write and never wait. A key
//! that does not fit (the probe limit passed, or the fill limit reached) is refused and counted
//! ([`FixedTable::overflow`]).
//!
//! ```
//! use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
//! use lockmeter_core::fixed::{Entry, FixedTable};
//! #[derive(Debug, Default)]
//! struct Hits { key: AtomicU64, n: AtomicU64 }
//! impl Entry for Hits {
//!     type Key = u64;
//!     type Word = AtomicU64;
//!     const TAG_IS_KEY: bool = true;
//!     fn word(&self) -> &AtomicU64 { &self.key }
//!     fn tag(k: &u64) -> u64 { *k }
//! }
//! let mem: Vec<Hits> = (0..8).map(|_| Hits::default()).collect();
//! let t = FixedTable::new(&mem, 8, 8);
//! t.insert(&42, |_| {}).unwrap().1.n.fetch_add(1, Relaxed);
//! assert_eq!(t.find(&42).unwrap().n.load(Relaxed), 1);
//! assert!(t.find(&7).is_none());
//! ```

use crate::probe::Probe;
use core::sync::atomic::{AtomicU64, Ordering};

/// The word of a retired entry of a table with [`Entry::TOMBSTONES`] (no key's tag is 1 there).
pub const TOMBSTONE: u64 = 1;

/// How many times an insert into a table with tombstones probes again after losing an entry to
/// another thread's key.
const RETRIES: usize = 4;

/// The atomic word an entry publishes itself through: `core`'s `AtomicU64`, or in loom models
/// loom's.
pub trait Word {
    /// Loads the word.
    fn load(&self, o: Ordering) -> u64;
    /// Stores the word.
    fn store(&self, v: u64, o: Ordering);
    /// Compare-and-swap (acquire-release on success, acquire on failure).
    fn claim(&self, cur: u64, new: u64) -> Result<u64, u64>;
}

impl Word for AtomicU64 {
    #[inline(always)]
    fn load(&self, o: Ordering) -> u64 {
        AtomicU64::load(self, o)
    }
    #[inline(always)]
    fn store(&self, v: u64, o: Ordering) {
        AtomicU64::store(self, v, o)
    }
    #[inline(always)]
    fn claim(&self, cur: u64, new: u64) -> Result<u64, u64> {
        self.compare_exchange(cur, new, Ordering::AcqRel, Ordering::Acquire)
    }
}

#[cfg(loom)]
impl Word for loom::sync::atomic::AtomicU64 {
    fn load(&self, o: Ordering) -> u64 {
        loom::sync::atomic::AtomicU64::load(self, o)
    }
    fn store(&self, v: u64, o: Ordering) {
        loom::sync::atomic::AtomicU64::store(self, v, o)
    }
    fn claim(&self, cur: u64, new: u64) -> Result<u64, u64> {
        self.compare_exchange(cur, new, Ordering::AcqRel, Ordering::Acquire)
    }
}

/// One entry of a [`FixedTable`] (see the module docs).
pub trait Entry {
    /// What the table is keyed by.
    type Key;
    /// The publishing word's type.
    type Word: Word;
    /// Whether the tag is the whole key (then [`Entry::matches`] is never asked, and the table
    /// may have many writers).
    const TAG_IS_KEY: bool;
    /// Whether entries can be retired ([`FixedTable::retire`]), leaving a [`TOMBSTONE`] that a
    /// later key reuses. Only with [`Entry::TAG_IS_KEY`], and then no key's tag may be 1.
    const TOMBSTONES: bool = false;
    /// The word that publishes the entry: 0 while empty, the key's tag once it holds one.
    fn word(&self) -> &Self::Word;
    /// The key's tag: never 0. Keys with equal tags are told apart by [`Entry::matches`].
    fn tag(key: &Self::Key) -> u64;
    /// Where the key's probe sequence starts (by default a mix of the tag).
    #[inline(always)]
    fn hash(key: &Self::Key) -> u64 {
        crate::mix64(Self::tag(key))
    }
    /// Whether this published entry, whose tag equals the key's, holds `key` (its fields besides
    /// the word, read relaxed after the word's acquire load). Entries whose tag is the whole key
    /// keep the default (never asked).
    #[inline(always)]
    fn matches(&self, key: &Self::Key) -> bool {
        let _ = key;
        true
    }
    /// Writes the key's fields besides the word and resets the value, before the entry is
    /// published by its only writer ([`FixedTable::insert_one`]; never called by
    /// [`FixedTable::insert`]). The default writes nothing.
    #[inline(always)]
    fn write(&self, key: &Self::Key) {
        let _ = key;
    }
}

/// The head of an [`Entry`] impl of this crate whose word is its `AtomicU64` field `$word`:
/// `Key`, `Word`, `TAG_IS_KEY` and `word`.
macro_rules! entry_head {
    ($key:ty, $word:ident, $tag_is_key:expr) => {
        type Key = $key;
        type Word = core::sync::atomic::AtomicU64;
        const TAG_IS_KEY: bool = $tag_is_key;
        #[inline(always)]
        fn word(&self) -> &core::sync::atomic::AtomicU64 {
            &self.$word
        }
    };
}
pub(crate) use entry_head;

/// A fixed-capacity open-addressed table over borrowed entries (see the module docs).
#[derive(Debug)]
pub struct FixedTable<'a, E> {
    entries: &'a [E],
    max_probe: usize,
    limit: u64,
    len: AtomicU64,
    overflow: AtomicU64,
}

impl<'a, E: Entry> FixedTable<'a, E> {
    /// A table over `entries` (empty: every word 0). Its capacity is the largest power of two not
    /// above their number; a key probes at most `max_probe` entries, and at most `limit` entries
    /// are used (headroom keeps probe sequences short).
    pub const fn new(entries: &'a [E], max_probe: usize, limit: usize) -> Self {
        let cap = crate::pow2_floor(entries.len());
        FixedTable {
            entries: entries.split_at(cap).0,
            max_probe,
            limit: if limit < cap { limit } else { cap } as u64,
            len: AtomicU64::new(0),
            overflow: AtomicU64::new(0),
        }
    }

    /// The published entry of `key`: `Ok(entry)`, or `Err(index)` of the empty entry where it
    /// would go (`Err(None)`: nowhere, the probe limit passed).
    #[inline(always)]
    fn probe(&self, key: &E::Key) -> Result<(usize, &'a E), Option<usize>> {
        let tag = E::tag(key);
        for i in Probe::new(E::hash(key), self.entries.len(), self.max_probe) {
            let Some(e) = self.entries.get(i) else { break };
            match e.word().load(Ordering::Acquire) {
                0 => return Err(Some(i)),
                t if t == tag && (E::TAG_IS_KEY || e.matches(key)) => return Ok((i, e)),
                _ => {}
            }
        }
        Err(None)
    }

    /// The entry of `key` if it is in the table. Any thread; never writes.
    #[inline]
    pub fn find(&self, key: &E::Key) -> Option<&'a E> {
        self.find_index(key).map(|(_, e)| e)
    }

    /// The entry of `key` and its index if it is in the table. Any thread; never writes.
    #[inline]
    pub fn find_index(&self, key: &E::Key) -> Option<(usize, &'a E)> {
        // Held in a local: the acquire loads would make the compiler reload a field.
        let entries: &'a [E] = self.entries;
        let tag = E::tag(key);
        for i in Probe::new(E::hash(key), entries.len(), self.max_probe) {
            let e = entries.get(i)?;
            // The key first: a hit is the common case.
            match e.word().load(Ordering::Acquire) {
                t if t == tag && (E::TAG_IS_KEY || e.matches(key)) => return Some((i, e)),
                0 => return None,
                _ => {}
            }
        }
        None
    }

    /// The entry of `key` and its index, inserted if absent (its key written, then `init` on it,
    /// then published); `None` when it does not fit (counted). **Only one thread may insert.**
    #[inline]
    pub fn insert_one(&self, key: &E::Key, init: impl FnOnce(&E)) -> Option<(usize, &'a E)> {
        match self.probe(key) {
            Ok(found) => Some(found),
            Err(Some(i)) if self.len.load(Ordering::Relaxed) < self.limit => {
                let e = self.entries.get(i)?;
                e.write(key);
                init(e);
                e.word().store(E::tag(key), Ordering::Release);
                self.len.store(self.len.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                Some((i, e))
            }
            Err(_) => self.refuse(),
        }
    }

    /// The entry of `key` and its index, inserted if absent (claimed by one compare-and-swap, then `init` run
    /// on it by the thread that claimed it; its value is what the empty entry held, zero, since
    /// other threads may update it as soon as it is claimed); `None` when it does not fit
    /// (counted). Any number of threads; lock-free. Only for entries whose tag is the key.
    #[inline]
    pub fn insert(&self, key: &E::Key, init: impl FnOnce(&E)) -> Option<(usize, &'a E)> {
        const { assert!(E::TAG_IS_KEY, "many writers need the tag to be the whole key") };
        if E::TOMBSTONES {
            return self.insert_reusing(key, init);
        }
        let tag = E::tag(key);
        for i in Probe::new(E::hash(key), self.entries.len(), self.max_probe) {
            let Some(e) = self.entries.get(i) else { break };
            let mut cur = e.word().load(Ordering::Acquire);
            if cur == 0 {
                if self.len.load(Ordering::Relaxed) >= self.limit {
                    break;
                }
                match e.word().claim(0, tag) {
                    Ok(_) => {
                        self.len.fetch_add(1, Ordering::Relaxed);
                        init(e);
                        return Some((i, e));
                    }
                    Err(now) => cur = now,
                }
            }
            if cur == tag {
                return Some((i, e));
            }
        }
        self.refuse()
    }

    /// [`FixedTable::insert`] into a table with tombstones: the key goes into the first tombstone
    /// of its probe sequence, else the empty entry that ends it (both probed past by lookups), so
    /// two threads inserting one key pick the same entry; a lost claim to another key probes
    /// again from the start, at most [`RETRIES`] times.
    #[inline(always)]
    fn insert_reusing(&self, key: &E::Key, init: impl FnOnce(&E)) -> Option<(usize, &'a E)> {
        let entries: &'a [E] = self.entries;
        let tag = E::tag(key);
        let probes = self.max_probe.min(entries.len());
        'retry: for _ in 0..RETRIES {
            let mut tomb = None;
            for (n, i) in Probe::new(E::hash(key), entries.len(), probes).enumerate() {
                let Some(e) = entries.get(i) else { break 'retry };
                let w = e.word().load(Ordering::Acquire);
                if w == tag {
                    return Some((i, e));
                }
                if w == TOMBSTONE && tomb.is_none() {
                    tomb = Some((i, e));
                }
                if w == 0 || (n + 1 == probes && tomb.is_some()) {
                    // Absent: it would be here. Take the first tombstone passed, if any.
                    let ((i, e), expect) = match tomb {
                        Some(t) => (t, TOMBSTONE),
                        None => ((i, e), 0),
                    };
                    if self.len.load(Ordering::Relaxed) >= self.limit {
                        break 'retry;
                    }
                    match e.word().claim(expect, tag) {
                        Ok(_) => {
                            init(e);
                            self.len.fetch_add(1, Ordering::Relaxed);
                            return Some((i, e));
                        }
                        Err(cur) if cur == tag => return Some((i, e)),
                        Err(_) => continue 'retry,
                    }
                }
            }
            break;
        }
        self.refuse()
    }

    /// Retires `e`, the entry of `key` (found by [`FixedTable::find`]): its word becomes a
    /// [`TOMBSTONE`] unless another thread retired it first. Returns whether this call did. Only
    /// for entries with [`Entry::TOMBSTONES`].
    pub fn retire(&self, e: &E, key: &E::Key) -> bool {
        const { assert!(E::TOMBSTONES, "retire needs a table with tombstones") };
        let done = e.word().claim(E::tag(key), TOMBSTONE).is_ok();
        if done {
            self.len.fetch_sub(1, Ordering::Relaxed);
        }
        done
    }

    /// Whether a word publishes a key (neither empty nor a tombstone).
    #[inline(always)]
    fn published(w: u64) -> bool {
        w != 0 && !(E::TOMBSTONES && w == TOMBSTONE)
    }

    #[cold]
    fn refuse<T>(&self) -> Option<T> {
        self.overflow.fetch_add(1, Ordering::Relaxed);
        None
    }

    /// Every published entry, with its index. Any thread; never writes.
    pub fn for_each(&self, mut f: impl FnMut(usize, &'a E)) {
        for (i, e) in self.iter() {
            f(i, e);
        }
    }

    /// Every published entry, with its index. Any thread; never writes.
    pub fn iter(&self) -> impl Iterator<Item = (usize, &'a E)> + 'a {
        let entries: &'a [E] = self.entries;
        entries
            .iter()
            .enumerate()
            .filter(|(_, e)| Self::published(e.word().load(Ordering::Acquire)))
    }

    /// Every entry, published or not (what the table was built over, cut to its capacity).
    #[inline]
    pub fn entries(&self) -> &'a [E] {
        self.entries
    }

    /// Entry `i`, if it is published.
    #[inline]
    pub fn at(&self, i: usize) -> Option<&'a E> {
        self.entries.get(i).filter(|e| Self::published(e.word().load(Ordering::Acquire)))
    }

    /// Empties the table: `reset` on each published entry after its word is cleared. **Only the
    /// table's one writer, and only a table with one writer.**
    pub fn clear_one(&self, mut reset: impl FnMut(&E)) {
        for e in self.entries {
            if e.word().load(Ordering::Relaxed) != 0 {
                e.word().store(0, Ordering::Release);
                reset(e);
            }
        }
        self.len.store(0, Ordering::Relaxed);
    }

    /// Capacity in entries.
    pub fn capacity(&self) -> usize {
        self.entries.len()
    }

    /// Entries in use.
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed) as usize
    }

    /// Whether no entry is in use.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Insertions refused because the key did not fit.
    pub fn overflow(&self) -> u64 {
        self.overflow.load(Ordering::Relaxed)
    }
}

//! Lock classes: each lock identity's class is the call site of its `*_init`, or for a lock never
//! initialized by a call (a static initializer), the site of its first use, as the kernel's
//! lockdep classes do. The collector folds the statistics of dead identities into their class.
//!
//! [`Classes`] is a [`FixedTable`] with many writers (any thread meeting a new class inserts
//! it): the key `(site, kind, origin)` is packed into the entry's one published word, so two
//! threads interning the same class get one entry.

use crate::fixed::{Entry, FixedTable, entry_head};
use crate::stats::LockKind;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering::*};

const MAX_PROBE: usize = 128;
/// Sites are below 2^56 (user-space addresses on Linux); the key's top byte is the class's tag.
const SITE_BITS: u32 = 56;
const SITE_MASK: u64 = (1 << SITE_BITS) - 1;

/// How a class's locks came to be: the site of their `*_init`, or of their first use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ClassOrigin {
    /// Initialized by a call (`pthread_mutex_init`, `sem_init`, ...) at the class's site.
    Init = 1,
    /// Never initialized by a call (a static initializer): first used at the class's site.
    FirstUse = 2,
}

/// One lock class: `(site, kind, origin)`, and how many identities of it ended.
#[derive(Debug, Default)]
pub struct Class {
    /// `site | (kind | origin << 4) << 56`; 0 while the entry is free.
    key: AtomicU64,
    /// Address of the first lock of the class (to tell its storage).
    sample: AtomicU64,
    /// Identities of this class that ended (destroyed or initialized again).
    ended: AtomicU64,
    /// First-use stacks taken for identities of this class ([`Class::take_first_use`]).
    first_uses: AtomicU32,
}

impl Entry for Class {
    entry_head!(u64, key, true);
    #[inline(always)]
    fn tag(key: &u64) -> u64 {
        *key
    }
}

impl Class {
    /// A free entry.
    pub const fn new() -> Self {
        Class {
            key: AtomicU64::new(0),
            sample: AtomicU64::new(0),
            ended: AtomicU64::new(0),
            first_uses: AtomicU32::new(0),
        }
    }
    /// Whether one more identity of this class may have its first-use stack taken: true for the
    /// first `max`. A class initialized at one site is named by that site; the first uses of a
    /// million identities of it would name nothing more.
    pub fn take_first_use(&self, max: u32) -> bool {
        self.first_uses.load(Relaxed) < max && self.first_uses.fetch_add(1, Relaxed) < max
    }
    /// The class's call site.
    pub fn site(&self) -> u64 {
        self.key.load(Acquire) & SITE_MASK
    }
    fn tag(&self) -> u8 {
        (self.key.load(Acquire) >> SITE_BITS) as u8
    }
    /// Its locks' kind.
    pub fn kind(&self) -> Option<LockKind> {
        LockKind::from_u8(self.tag() & 15)
    }
    /// How its locks came to be.
    pub fn origin(&self) -> ClassOrigin {
        if self.tag() >> 4 == ClassOrigin::Init as u8 {
            ClassOrigin::Init
        } else {
            ClassOrigin::FirstUse
        }
    }
    /// Address of the first lock seen of this class.
    pub fn sample_address(&self) -> u64 {
        self.sample.load(Relaxed)
    }
    /// Identities of this class that ended.
    pub fn ended(&self) -> u64 {
        self.ended.load(Relaxed)
    }
}

/// The lock classes over borrowed, free entries: insert-only, lock-free. Class ids are 1-based
/// (0: no class). When it is full, or for a site at or above 2^56 (none on Linux: user-space
/// addresses are below), [`Classes::intern`] answers 0 and the identities stay without a class
/// (the collector folds them by kind).
#[derive(Debug)]
pub struct Classes<'a> {
    table: FixedTable<'a, Class>,
}

impl<'a> Classes<'a> {
    /// The classes over `entries` (free; at most 2^15 are used: ids have 15 bits). `const`, so
    /// that a collector can keep them in a `static` over a static array.
    pub const fn new(entries: &'a [Class]) -> Self {
        let n = if entries.len() < 1 << 15 { entries.len() } else { 1 << 15 };
        let entries = entries.split_at(n).0;
        Classes { table: FixedTable::new(entries, MAX_PROBE, n) }
    }

    /// The id of class `(site, kind, origin)`, inserted if absent, with `addr` as its sample
    /// address; 0 when the table is full. Lock-free (one CAS per new class), no allocation.
    pub fn intern(&self, site: u64, kind: LockKind, origin: ClassOrigin, addr: u64) -> u32 {
        if site > SITE_MASK {
            return 0;
        }
        let tag = (kind as u8 & 15) | ((origin as u8) << 4);
        let key = site | (tag as u64) << SITE_BITS;
        match self.table.insert(&key, |e| e.sample.store(addr, Relaxed)) {
            Some((i, _)) => i as u32 + 1,
            None => 0,
        }
    }

    /// Class `id` (1-based).
    pub fn get(&self, id: u32) -> Option<&'a Class> {
        self.table.at((id as usize).checked_sub(1)?)
    }

    /// Counts one ended identity of class `id` (nothing for 0).
    pub fn ended(&self, id: u32) {
        if let Some(e) = self.get(id) {
            e.ended.fetch_add(1, Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_class_is_its_site_kind_and_origin() {
        let m: Vec<Class> = std::iter::repeat_with(Class::new).take(16).collect();
        let c = Classes::new(&m);
        let k = c.intern(0x401000, LockKind::Mutex, ClassOrigin::Init, 0x5000);
        assert_eq!(c.intern(0x401000, LockKind::Mutex, ClassOrigin::Init, 0x6000), k);
        assert_ne!(c.intern(0x401000, LockKind::Mutex, ClassOrigin::FirstUse, 0), k);
        assert_ne!(c.intern(0x401000, LockKind::RwLock, ClassOrigin::Init, 0), k);
        let e = c.get(k).unwrap();
        assert_eq!(
            (e.site(), e.kind(), e.origin(), e.sample_address()),
            (0x401000, Some(LockKind::Mutex), ClassOrigin::Init, 0x5000)
        );
        c.ended(k);
        assert_eq!(c.get(k).unwrap().ended(), 1);
        assert!(c.get(0).is_none() && c.get(99).is_none());
        assert_eq!(c.intern(1 << 56, LockKind::Mutex, ClassOrigin::Init, 0), 0);
    }

    #[test]
    fn a_full_class_table_answers_zero() {
        let m: Vec<Class> = std::iter::repeat_with(Class::new).take(4).collect();
        let c = Classes::new(&m);
        let ids: Vec<u32> =
            (1..=6u64).map(|n| c.intern(n * 16, LockKind::Mutex, ClassOrigin::Init, 0)).collect();
        assert_eq!(ids.iter().filter(|&&i| i != 0).count(), 4);
        assert_eq!(ids[4..], [0, 0]);
    }

    #[test]
    fn threads_interning_one_class_get_one_id() {
        let m: Vec<Class> = std::iter::repeat_with(Class::new).take(64).collect();
        let c = Classes::new(&m);
        let ids: Vec<Vec<u32>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        (1..=40u64)
                            .map(|n| c.intern(n * 16, LockKind::Mutex, ClassOrigin::Init, n))
                            .collect()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(ids.iter().all(|v| v == &ids[0] && v.iter().all(|&i| i != 0)));
        let mut uniq = ids[0].clone();
        uniq.sort_unstable();
        uniq.dedup();
        assert_eq!(uniq.len(), 40);
    }
}

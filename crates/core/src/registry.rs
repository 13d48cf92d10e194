//! The process-wide lock registry.
//!
//! Maps a lock's address to its identity and to the small shared state that needs more than one
//! thread's view: the previous owner (for owner changes), the site that holds the lock now (for
//! holder attribution), and whether another thread wanted the lock during the current hold
//! (FreeBSD's `cnt_hold`).
//!
//! Identity is `(slot, generation)`: `*_init` and `*_destroy` bump the generation, so an address
//! reused for a new lock starts a new identity and the old statistics are never mixed in.
//!
//! The table is a [`FixedTable`] of [`Slot`]s (caller-provided zeroed memory, many writers,
//! lock-free: one CAS per new address, keyed by the address itself), with deletion
//! ([`Entry::TOMBSTONES`]) and 1/16 of it kept free so probe sequences stay short. Each slot is a
//! cache line of its own. A destroyed lock's slot is retired
//! ([`Registry::retire`]): it becomes a tombstone that a later new address reuses, so a program
//! that creates and destroys millions of locks never fills the registry; its generation keeps
//! counting, so nothing cached for the old identity matches the new one. When the table is full,
//! new addresses are refused; their number is estimated (HyperLogLog), so the report can say how
//! many locks went unrecorded.
//!
//! Each identity has a *class* ([`Classes`], in `classes.rs`): the call site of its `*_init`, or
//! for a lock never initialized by a call (a static initializer), the site of its first use.

pub use crate::classes::{Class, ClassOrigin, Classes};
pub use crate::fixed::TOMBSTONE;
use crate::fixed::{Entry, FixedTable};
use crate::mix64;
use crate::stats::LockKind;
use core::sync::atomic::Ordering::*;
// In loom models (`tests/loom.rs`) the registry runs on loom's atomics.
#[cfg(not(loom))]
use core::sync::atomic::{AtomicU8, AtomicU32, AtomicU64};
#[cfg(loom)]
use loom::sync::atomic::{AtomicU8, AtomicU32, AtomicU64};

const MAX_PROBE: usize = 128;
/// HyperLogLog precision: 2^12 registers, a standard error of about 1.6%.
#[cfg(not(loom))]
const HLL_P: u32 = 12;
/// Loom models build a registry per execution: a few registers (they model no estimate).
#[cfg(loom)]
const HLL_P: u32 = 4;
const HLL_M: usize = 1 << HLL_P;

/// One lock's shared state.
#[derive(Debug, Default)]
#[repr(C, align(64))]
pub struct Slot {
    addr: AtomicU64,
    gen_: AtomicU32,
    kind: AtomicU8,
    /// Thread index (1-based) of the last exclusive owner; 0 if none yet.
    pub last_owner: AtomicU32,
    /// Set by a thread that found the lock held; cleared by the next acquirer.
    pub wanted: AtomicU32,
    /// Call site (return address) of the current exclusive holder.
    pub holder_site: AtomicU64,
    /// Thread index of the last exclusive holder to publish itself, 0 when none; a release
    /// clears it only when another thread waits.
    pub holder_thread: AtomicU32,
    /// When the current exclusive holder acquired the lock, packed by
    /// [`pack_time`](crate::reservoir::pack_time) (0: unknown). It fills the padding after
    /// `holder_thread`: a slot stays 64 bytes.
    pub holder_t_acq: AtomicU32,
    /// Stack hash of the current holder's acquisition when it recorded one, else 0.
    pub holder_stack: AtomicU64,
    /// Generation + 1 of the identity whose first use was recorded.
    pub first_use: AtomicU32,
    /// Bumped by every release that ends no hold of the releasing thread (a semaphore posted by a
    /// thread that did not take it) and by every new identity: a hold recorded under an older
    /// value has been ended elsewhere.
    pub epoch: AtomicU32,
    /// Class id ([`Classes`]) of the current identity; 0 while it has none yet.
    pub class: AtomicU32,
    /// Generation + 1 of the last identity the program gave a name to (named identities keep
    /// rows of their own when they end).
    pub named: AtomicU32,
}

#[cfg(not(loom))]
const _: () = assert!(core::mem::size_of::<Slot>() == 64);

impl Slot {
    /// An empty slot (`const` but under loom, whose atomics cannot be built in const context).
    #[cfg(loom)]
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty slot.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Slot {
            addr: AtomicU64::new(0),
            gen_: AtomicU32::new(0),
            kind: AtomicU8::new(0),
            last_owner: AtomicU32::new(0),
            wanted: AtomicU32::new(0),
            holder_site: AtomicU64::new(0),
            holder_thread: AtomicU32::new(0),
            holder_t_acq: AtomicU32::new(0),
            holder_stack: AtomicU64::new(0),
            first_use: AtomicU32::new(0),
            epoch: AtomicU32::new(0),
            class: AtomicU32::new(0),
            named: AtomicU32::new(0),
        }
    }
    /// The lock's address (0 for an empty slot, [`TOMBSTONE`] for a retired one).
    #[inline]
    pub fn addr(&self) -> u64 {
        self.addr.load(Acquire)
    }
    /// Whether the slot holds a lock now (neither empty nor retired).
    #[inline]
    pub fn in_use(&self) -> bool {
        self.addr() > TOMBSTONE
    }
    /// The current generation.
    #[inline]
    pub fn generation(&self) -> u32 {
        self.gen_.load(Relaxed)
    }
    /// The kind last seen for this address.
    #[inline]
    pub fn kind(&self) -> Option<LockKind> {
        LockKind::from_u8(self.kind.load(Relaxed))
    }
}

/// A slot is published by its lock's address (never 0 or 1: [`TOMBSTONE`]).
impl Entry for Slot {
    type Key = u64;
    type Word = AtomicU64;
    const TAG_IS_KEY: bool = true;
    const TOMBSTONES: bool = true;
    #[inline(always)]
    fn word(&self) -> &AtomicU64 {
        &self.addr
    }
    #[inline(always)]
    fn tag(addr: &u64) -> u64 {
        *addr
    }
}

/// The registry (see the module docs).
#[derive(Debug)]
pub struct Registry<'a> {
    table: FixedTable<'a, Slot>,
    unrecorded: [AtomicU8; HLL_M],
}

impl<'a> Registry<'a> {
    /// A registry over `slots` (zeroed); capacity is the largest power of two not above the length.
    pub fn new(slots: &'a [Slot]) -> Self {
        let cap = crate::pow2_floor(slots.len());
        Registry {
            // Keep a little headroom so probe sequences stay short.
            table: FixedTable::new(slots, MAX_PROBE, cap * 15 / 16),
            #[cfg(not(loom))]
            unrecorded: [const { AtomicU8::new(0) }; HLL_M],
            #[cfg(loom)]
            unrecorded: core::array::from_fn(|_| AtomicU8::new(0)),
        }
    }

    /// Capacity in locks.
    pub fn capacity(&self) -> usize {
        self.table.capacity()
    }

    /// Number of addresses registered now (retired ones not counted).
    pub fn len(&self) -> usize {
        self.table.len()
    }

    /// Whether no lock was registered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The slot (and its index) for `addr`, registering it as `kind` if absent (in the first
    /// retired slot of its probe sequence, else an empty one). `None` when the registry is full;
    /// the refusal is counted.
    #[inline]
    pub fn lookup(&self, addr: u64, kind: LockKind) -> Option<(u32, &'a Slot)> {
        if addr <= TOMBSTONE {
            return None;
        }
        match self.table.insert(&addr, |s| s.kind.store(kind as u8, Relaxed)) {
            Some((idx, s)) => Some((idx as u32, s)),
            None => {
                self.note_unrecorded(addr);
                None
            }
        }
    }

    /// The slot of `addr` if it is registered (never registers it).
    pub fn find(&self, addr: u64) -> Option<(u32, &'a Slot)> {
        if addr <= TOMBSTONE {
            return None;
        }
        self.table.find_index(&addr).map(|(idx, s)| (idx as u32, s))
    }

    /// A new lock is initialized, or an old one destroyed, at `addr`: starts a new identity.
    /// Returns the new generation (or `None` when the registry is full).
    pub fn renew(&self, addr: u64, kind: LockKind) -> Option<u32> {
        let (_, s) = self.lookup(addr, kind)?;
        Some(self.renew_slot(s, kind))
    }

    /// A lock of class `class` is initialized at `addr`: starts a new identity of that class.
    /// Returns the class of the identity this ends (0: none, or the registry is full).
    pub fn begin(&self, addr: u64, kind: LockKind, class: u32) -> u32 {
        let Some((_, s)) = self.lookup(addr, kind) else { return 0 };
        let ended = s.class.load(Relaxed);
        self.renew_slot(s, kind);
        s.class.store(class, Relaxed);
        ended
    }

    fn renew_slot(&self, s: &Slot, kind: LockKind) -> u32 {
        s.kind.store(kind as u8, Relaxed);
        s.last_owner.store(0, Relaxed);
        s.wanted.store(0, Relaxed);
        s.holder_thread.store(0, Relaxed);
        s.holder_t_acq.store(0, Relaxed);
        s.holder_site.store(0, Relaxed);
        s.holder_stack.store(0, Relaxed);
        s.class.store(0, Relaxed);
        s.epoch.fetch_add(1, Relaxed);
        s.gen_.fetch_add(1, Relaxed).wrapping_add(1)
    }

    /// The lock at `addr` was destroyed: ends its identity and frees its slot for another address
    /// (the generation goes on counting). Returns the class the ended identity had (0: none).
    pub fn retire(&self, addr: u64) -> u32 {
        let Some((_, s)) = self.find(addr) else { return 0 };
        let class = s.class.load(Relaxed);
        self.renew_slot(s, s.kind().unwrap_or(LockKind::Mutex));
        self.table.retire(s, &addr);
        class
    }

    /// Notes that an acquisition of lock `key` (an address, or an address mixed with a
    /// generation) was not recorded, so that [`Registry::unrecorded_locks_estimate`] counts it.
    pub fn note_unrecorded(&self, key: u64) {
        let h = mix64(key ^ 0x9e37_79b9_7f4a_7c15);
        let idx = (h >> (64 - HLL_P)) as usize;
        let rank = ((h << HLL_P) | (1 << (HLL_P - 1))).leading_zeros() as u8 + 1;
        if let Some(r) = self.unrecorded.get(idx)
            && r.load(Relaxed) < rank
        {
            r.fetch_max(rank, Relaxed);
        }
    }

    /// Lookups refused because the registry was full.
    pub fn refused_lookups(&self) -> u64 {
        self.table.overflow()
    }

    /// Estimated number of distinct locks refused or noted unrecorded (HyperLogLog, with linear
    /// counting for small numbers; about 1.6% standard error).
    pub fn unrecorded_locks_estimate(&self) -> u64 {
        let m = HLL_M as f64;
        let mut sum = 0.0;
        let mut zeros = 0usize;
        for r in &self.unrecorded {
            let v = r.load(Relaxed);
            if v == 0 {
                zeros += 1;
            }
            sum += 1.0 / (1u64 << v) as f64;
        }
        if zeros == HLL_M {
            return 0;
        }
        let alpha = 0.7213 / (1.0 + 1.079 / m);
        let raw = alpha * m * m / sum;
        let est = if raw <= 2.5 * m && zeros > 0 { m * (m / zeros as f64).ln() } else { raw };
        est.round().max(1.0) as u64
    }

    /// Slot `idx`.
    #[inline]
    pub fn slot(&self, idx: u32) -> Option<&'a Slot> {
        self.table.entries().get(idx as usize)
    }

    /// The index of `slot`, a slot of this registry (None for any other).
    pub fn index_of(&self, slot: &Slot) -> Option<u32> {
        let slots = self.table.entries();
        let base = slots.as_ptr() as usize;
        let off = (slot as *const Slot as usize).wrapping_sub(base);
        let idx = off / core::mem::size_of::<Slot>();
        (off.is_multiple_of(core::mem::size_of::<Slot>()) && idx < slots.len())
            .then_some(idx as u32)
    }

    /// Every registered slot with its index.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &'a Slot)> + 'a {
        self.table.iter().map(|(i, s)| (i as u32, s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem(n: usize) -> Vec<Slot> {
        (0..n).map(|_| Slot::new()).collect()
    }

    #[test]
    fn lookup_is_stable_and_renew_bumps_generation() {
        let m = mem(64);
        let r = Registry::new(&m);
        let (i, s) = r.lookup(0x1000, LockKind::Mutex).unwrap();
        assert_eq!(s.generation(), 0);
        assert_eq!(r.lookup(0x1000, LockKind::Mutex).unwrap().0, i);
        let epoch = s.epoch.load(Relaxed);
        assert_eq!(r.renew(0x1000, LockKind::RwLock), Some(1));
        assert_eq!(s.kind(), Some(LockKind::RwLock));
        assert_ne!(s.epoch.load(Relaxed), epoch, "a new identity ends the old one's holds");
        assert_eq!(r.len(), 1);
        assert!(r.lookup(0, LockKind::Mutex).is_none());
    }

    #[test]
    fn index_of_finds_the_lookup_index() {
        let m = mem(64);
        let r = Registry::new(&m);
        let (i, s) = r.lookup(0x2000, LockKind::Mutex).unwrap();
        assert_eq!(r.index_of(s), Some(i));
        let other = Slot::new();
        assert_eq!(r.index_of(&other), None);
    }

    #[test]
    fn full_registry_refuses_and_estimates() {
        let m = mem(64); // 60 usable
        let r = Registry::new(&m);
        let ok = (1..=1000u64).filter(|a| r.lookup(a * 64, LockKind::Mutex).is_some()).count();
        assert_eq!(ok, 60);
        assert_eq!(r.iter().count(), 60);
        let est = r.unrecorded_locks_estimate();
        assert!((850..=1030).contains(&est), "estimate {est} for 940 refused locks");
        assert_eq!(r.refused_lookups(), 940);
    }

    #[test]
    fn unrecorded_estimate_does_not_saturate() {
        let m = mem(16);
        let r = Registry::new(&m);
        assert_eq!(r.unrecorded_locks_estimate(), 0);
        for n in 1..=1_000_000u64 {
            r.note_unrecorded(n * 64);
            r.note_unrecorded(n * 64); // repeats do not count
            if n == 100 || n == 10_000 || n == 1_000_000 {
                let est = r.unrecorded_locks_estimate() as f64;
                let err = (est - n as f64).abs() / n as f64;
                assert!(err < 0.06, "estimate {est} for {n} locks");
            }
        }
    }

    #[test]
    fn concurrent_inserts_agree() {
        let m = mem(4096);
        let r = Registry::new(&m);
        std::thread::scope(|sc| {
            for _ in 0..4 {
                sc.spawn(|| {
                    for a in 1..=1000u64 {
                        r.lookup(a * 8, LockKind::Mutex).unwrap();
                    }
                });
            }
        });
        assert_eq!(r.len(), 1000);
        assert_eq!(r.iter().count(), 1000);
    }

    #[test]
    fn retired_slots_are_reused_and_generations_go_on() {
        let m = mem(64); // 60 usable
        let r = Registry::new(&m);
        let mut gens = std::collections::HashMap::new();
        for n in 1..=10_000u64 {
            let a = n * 64;
            let (i, s) = r.lookup(a, LockKind::Mutex).expect("retired slots are reused");
            assert!(s.in_use());
            let g = s.generation();
            if let Some(&old) = gens.get(&i) {
                assert!(g > old, "slot {i}: generation {g} after {old}");
            }
            gens.insert(i, g);
            assert_eq!(r.find(a).map(|(j, _)| j), Some(i));
            r.retire(a);
            assert!(r.find(a).is_none());
        }
        assert_eq!(r.len(), 0);
        assert_eq!(r.refused_lookups(), 0);
        assert_eq!(r.iter().count(), 0);
    }

    #[test]
    fn lookup_finds_an_address_past_a_tombstone() {
        let m = mem(64);
        let r = Registry::new(&m);
        // Fill enough that probe sequences overlap, retire every other one, look all up again.
        let addrs: Vec<u64> = (1..=40u64).map(|n| n * 8).collect();
        let idx: Vec<u32> =
            addrs.iter().map(|&a| r.lookup(a, LockKind::Mutex).unwrap().0).collect();
        for a in addrs.iter().step_by(2) {
            r.retire(*a);
        }
        for (k, a) in addrs.iter().enumerate().skip(1).step_by(2) {
            assert_eq!(r.lookup(*a, LockKind::Mutex).unwrap().0, idx[k], "no duplicate for {a}");
        }
        assert_eq!(r.len(), 20);
    }

    #[test]
    fn begin_sets_the_class_and_retire_returns_it() {
        let m = mem(64);
        let r = Registry::new(&m);
        let k = 3; // a class id (see classes.rs)
        assert_eq!(r.begin(0x5000, LockKind::Mutex, k), 0);
        assert_eq!(r.find(0x5000).unwrap().1.class.load(Relaxed), k);
        assert_eq!(r.begin(0x5000, LockKind::Mutex, k), k, "a second init ends the first");
        assert_eq!(r.retire(0x5000), k);
        assert_eq!(r.retire(0x5000), 0, "retired: no class");
    }
}

//! Record keys and lock identities: how the collector packs a record's key and tag, and how the
//! records of lock identities that ended join their class (pure: no hooks, no globals; the
//! preload's `classes.rs` calls it with its calibration lock).
//!
//! A thread's record of a lock is keyed by the lock's registry slot (not its generation), and its
//! `tag` says which identity (generation) and class the counts belong to. When the thread next
//! uses the slot for another identity (the lock was destroyed, another lock took the slot), it
//! first folds the record into its class's record (key [`class_key`]) and starts it afresh
//! ([`Idents::retag`]): the tables hold one record per slot, site and mode, however many locks lived in
//! the slot. Records still tagged with an identity that ended are folded the same way when the
//! profile is written ([`Idents::resolve`]), whichever thread destroyed the lock. An identity the program
//! named keeps a row of its own (key `own_row_key`).
//!
//! Event keys stay per identity ([`event_key`]: slot, low generation bits, class); the profile
//! writer folds those of identities that ended ([`Idents::resolve_event`]).

use crate::registry::Registry;
use crate::table::{Entry, Table};
use crate::{LockKind, Mode};
use core::sync::atomic::Ordering::Relaxed;

/// Packs a record key: valid bit, registry slot, generation, kind, mode.
#[inline(always)]
pub fn key(slot: u32, gen_: u32, kind: LockKind, mode: Mode) -> u64 {
    (1u64 << 63)
        | ((slot as u64 & 0x7ff_ffff) << 36)
        | ((gen_ as u64 & 0x7fff_ffff) << 5)
        | ((kind as u64 & 7) << 2)
        | (mode as u64 & 3)
}

/// Unpacks a record key into (slot, generation, kind, mode).
pub fn unkey(k: u64) -> (u32, u32, u8, u8) {
    (
        ((k >> 36) & 0x7ff_ffff) as u32,
        ((k >> 5) & 0x7fff_ffff) as u32,
        ((k >> 2) & 7) as u8,
        (k & 3) as u8,
    )
}

/// The slot field of a class record's key (no registry slot has this index).
pub const CLASS_SLOT: u32 = 0x7ff_ffff;

/// The key of the record of class `class` (0: identities that got no class).
#[inline]
pub fn class_key(class: u32, kind: u8, mode: u8) -> u64 {
    (1u64 << 63)
        | ((CLASS_SLOT as u64) << 36)
        | ((class as u64 & 0x7fff_ffff) << 5)
        | ((kind as u64 & 7) << 2)
        | (mode as u64 & 3)
}

/// A record's tag: the identity's generation and class (never 0), and whether the program named
/// the identity before its first use here ([`NAMED`]).
#[inline(always)]
pub fn tag(gen_: u32, class: u32) -> u64 {
    ((gen_ as u64) << 32) | (1 << 31) | (class as u64 & 0x7fff)
}

/// Tag bit of an identity the program named: it keeps a row of its own when it ends.
pub const NAMED: u64 = 1 << 30;

/// Generation field bit of the key of a named identity that ended ([`Idents::retag`] moved its counts
/// there): its own row, however the slot is used since.
const OWN_ROW: u32 = 1 << 30;

/// Whether the identity of a record tagged `t` (key `k1`) keeps a row of its own when it ends: the
/// program named it (before its first use here, or it is still the slot's last named identity).
fn keeps_row(reg: Option<&Registry<'_>>, k1: u64, t: u64) -> bool {
    if t & NAMED != 0 {
        return true;
    }
    let (slot_idx, _, _, _) = unkey(k1);
    let (gen_, _) = untag(t);
    reg.and_then(|r| r.slot(slot_idx))
        .is_some_and(|s| s.named.load(Relaxed) == gen_.wrapping_add(1))
}

/// The key of the row of its own that an ended named identity keeps.
fn own_row_key(slot_idx: u32, gen_: u32, kind: u8, mode: u8) -> u64 {
    (1u64 << 63)
        | ((slot_idx as u64 & 0x7ff_ffff) << 36)
        | (((gen_ & (OWN_ROW - 1)) | OWN_ROW) as u64) << 5
        | ((kind as u64 & 7) << 2)
        | (mode as u64 & 3)
}

/// (generation, class) of a tag.
#[inline]
pub fn untag(t: u64) -> (u32, u32) {
    ((t >> 32) as u32, (t & 0x7fff) as u32)
}

/// The key of a lock identity in event keys: slot, the low 16 bits of the generation and the
/// class (events stay keyed by identity; the profile writer folds those of dead identities).
#[inline(always)]
pub fn event_key(slot: u32, gen_: u32, class: u32, kind: LockKind, mode: Mode) -> u64 {
    key(slot, ((class & 0x7fff) << 16) | (gen_ & 0xffff), kind, mode)
}

/// What a record or event's lock is, when the profile is written.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Ident {
    /// A row of its own, `(slot << 32) | generation`: a live identity, or a named one that ended.
    Live(u64),
    /// A class (an identity that ended, or a class record).
    Class(u32),
    /// The collector's calibration lock, or a record not yet tagged: left out.
    Skip,
}

/// What the profile writer and the collector's slow paths resolve identities against: the
/// registry (if any) and the collector's calibration lock, `(slot << 32) | generation`, whose
/// counts are left out.
#[derive(Clone, Copy, Debug)]
pub struct Idents<'r> {
    /// The lock registry.
    pub reg: Option<&'r Registry<'r>>,
    /// The calibration lock's identity (`u64::MAX`: none).
    pub calib: u64,
}

impl Idents<'_> {
    /// The identity of record `k1` with tag `t`.
    pub fn resolve(&self, k1: u64, t: u64) -> Ident {
        let (slot_idx, g, _, _) = unkey(k1);
        if slot_idx == CLASS_SLOT {
            return Ident::Class(g);
        }
        if g & OWN_ROW != 0 {
            return Ident::Live(((slot_idx as u64) << 32) | (g & (OWN_ROW - 1)) as u64);
        }
        if t == 0 {
            return Ident::Skip;
        }
        let (gen_, class) = untag(t);
        let pair = ((slot_idx as u64) << 32) | gen_ as u64;
        if pair == self.calib {
            return Ident::Skip;
        }
        let live = is_live(self.reg, pair);
        if live || keeps_row(self.reg, k1, t) { Ident::Live(pair) } else { Ident::Class(class) }
    }

    /// The identity of event key `k` (see [`event_key`]).
    pub fn resolve_event(&self, k: u64) -> Ident {
        let (slot_idx, g, _, _) = unkey(k);
        let (gen16, class) = (g & 0xffff, g >> 16);
        if self.calib >> 32 == slot_idx as u64 && self.calib & 0xffff == gen16 as u64 {
            return Ident::Skip;
        }
        match self.reg.and_then(|r| r.slot(slot_idx)) {
            Some(s)
                if s.in_use()
                    && s.generation() & 0xffff == gen16
                    && s.class.load(Relaxed) & 0x7fff == class =>
            {
                Ident::Live(((slot_idx as u64) << 32) | s.generation() as u64)
            }
            _ => Ident::Class(class),
        }
    }

    /// Makes record `e` (of `table`, key `k1`, call site `site`) the record of the identity
    /// tagged `t`: if it holds counts of another identity, they go to that identity's class
    /// record first (the calibration lock's go nowhere). False if they could not (the class
    /// record did not fit): the caller counts them as dropped.
    #[cold]
    #[inline(never)]
    pub fn retag(&self, table: &Table<'_>, e: &Entry, k1: u64, site: u64, t: u64) -> bool {
        let old = e.tag.load(Relaxed);
        if old != 0 {
            let (slot_idx, _, _, _) = unkey(k1);
            let (gen_, _) = untag(old);
            let to = self.fold_key(k1, old);
            if ((slot_idx as u64) << 32) | gen_ as u64 != self.calib {
                match table.get(to, site) {
                    Some(c) => c.stats.absorb(&e.stats),
                    None => return false,
                }
            }
        }
        e.stats.clear();
        e.tag.store(t, Relaxed);
        true
    }

    /// The record that the counts of record `k1`, tagged `old`, go to when its identity ends: the
    /// identity's class record, or the row of its own of a named identity.
    fn fold_key(&self, k1: u64, old: u64) -> u64 {
        let (slot_idx, _, kind, mode) = unkey(k1);
        let (gen_, class) = untag(old);
        if keeps_row(self.reg, k1, old) {
            own_row_key(slot_idx, gen_, kind, mode)
        } else {
            class_key(class, kind, mode)
        }
    }

    /// Where the counts that record `k1` held when it was tagged `then` went, now that it is
    /// tagged `now`: `None` while it still holds that identity's counts (same generation, or not
    /// a record of a registry slot); else the key of the record [`Idents::retag`] folded them
    /// into in the same table. A reset's baseline of the record is owed by that one.
    pub fn folded_to(&self, k1: u64, then: u64, now: u64) -> Option<u64> {
        let (slot_idx, g, _, _) = unkey(k1);
        if slot_idx == CLASS_SLOT || g != 0 || then == 0 || untag(then).0 == untag(now).0 {
            return None;
        }
        Some(self.fold_key(k1, then))
    }

    /// Adds record `e` into `dst` (a table of exited threads, written by one thread only): into
    /// the record of the same identity while it lives, of its class once it ended. False if it
    /// did not fit.
    pub fn merge_record(&self, dst: &Table<'_>, e: &Entry) -> bool {
        let (k1, site) = e.key();
        let t = e.tag.load(Relaxed);
        let (_, _, kind, mode) = unkey(k1);
        let (k, t) = match self.resolve(k1, t) {
            Ident::Skip => return true,
            Ident::Class(c) => (class_key(c, kind, mode), 0),
            // A named identity that ended keeps its row, under a key of its own.
            Ident::Live(pair) if t != 0 && !is_live(self.reg, pair) => {
                (own_row_key((pair >> 32) as u32, pair as u32, kind, mode), 0)
            }
            Ident::Live(_) => (k1, t),
        };
        let Some(d) = dst.get(k, site) else { return false };
        if t != 0 && d.tag.load(Relaxed) != t && !self.retag(dst, d, k, site, t) {
            return false;
        }
        d.stats.absorb(&e.stats);
        true
    }
}

/// Whether record `k1` may hold the counts of identities that ended ([`Idents::folded_to`]).
pub fn is_fold_target(k1: u64) -> bool {
    let (slot_idx, g, _, _) = unkey(k1);
    slot_idx == CLASS_SLOT || g & OWN_ROW != 0
}

/// Whether identity `pair` (`(slot << 32) | generation`) is the one in its slot now.
fn is_live(reg: Option<&Registry<'_>>, pair: u64) -> bool {
    reg.and_then(|r| r.slot((pair >> 32) as u32))
        .is_some_and(|s| s.in_use() && s.generation() == pair as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Slot;
    use crate::table::HeapMemory;

    fn ids<'r>(reg: Option<&'r Registry<'r>>, calib: u64) -> Idents<'r> {
        Idents { reg, calib }
    }
    const CALIB_NONE: u64 = u64::MAX;

    #[test]
    fn keys_and_tags_pack_and_unpack() {
        for (slot, gen_, kind, mode) in [
            (0, 0, LockKind::Mutex, Mode::Exclusive),
            (5, 77, LockKind::RwLock, Mode::Read),
            (0x7ff_fffe, 0x7fff_ffff, LockKind::SpinLock, Mode::Write),
        ] {
            let k = key(slot, gen_, kind, mode);
            assert_ne!(k, 0, "a key is never 0 (the valid bit)");
            assert_eq!(unkey(k), (slot, gen_, kind as u8, mode as u8));
        }
        assert_eq!(unkey(class_key(9, 1, 2)), (CLASS_SLOT, 9, 1, 2));
        assert_eq!(untag(tag(41, 3)), (41, 3));
        assert_ne!(tag(0, 0), 0);
        assert_eq!(tag(1, 2) & NAMED, 0);
        let (slot, g, _, _) = unkey(event_key(7, 0x1_2345, 3, LockKind::Mutex, Mode::Exclusive));
        assert_eq!((slot, g & 0xffff, g >> 16), (7, 0x2345, 3), "low generation bits and class");
    }

    /// `f(registry, slot, generation)` with one lock registered at `addr`.
    fn with_lock(addr: u64, f: impl FnOnce(&Registry<'_>, u32, u32)) {
        let m: Vec<Slot> = (0..64).map(|_| Slot::new()).collect();
        let r = Registry::new(&m);
        let (i, s) = r.lookup(addr, LockKind::Mutex).unwrap();
        f(&r, i, s.generation());
    }

    #[test]
    fn resolve_names_live_ended_named_class_and_calibration_identities() {
        with_lock(0x1000, |r, i, g| {
            let k1 = key(i, 0, LockKind::Mutex, Mode::Exclusive);
            let live = Ident::Live(((i as u64) << 32) | g as u64);
            assert_eq!(ids(Some(r), CALIB_NONE).resolve(k1, tag(g, 4)), live);
            assert_eq!(ids(Some(r), CALIB_NONE).resolve(k1, 0), Ident::Skip, "not tagged yet");
            assert_eq!(
                ids(Some(r), ((i as u64) << 32) | g as u64).resolve(k1, tag(g, 4)),
                Ident::Skip
            );
            // Another generation (the lock ended): its class; named before, a row of its own.
            assert_eq!(ids(Some(r), CALIB_NONE).resolve(k1, tag(g + 1, 4)), Ident::Class(4));
            let named = tag(g + 1, 4) | NAMED;
            assert_eq!(
                ids(Some(r), CALIB_NONE).resolve(k1, named),
                Ident::Live(((i as u64) << 32) | (g + 1) as u64)
            );
            r.retire(0x1000);
            assert_eq!(ids(Some(r), CALIB_NONE).resolve(k1, tag(g, 4)), Ident::Class(4));
            assert_eq!(
                ids(None, CALIB_NONE).resolve(k1, tag(g, 4)),
                Ident::Class(4),
                "no registry"
            );
            assert_eq!(
                ids(None, CALIB_NONE).resolve(class_key(6, 0, 0), 0),
                Ident::Class(6),
                "a class record"
            );
            assert_eq!(
                ids(None, CALIB_NONE).resolve(own_row_key(3, 8, 0, 0), 0),
                Ident::Live((3 << 32) | 8),
                "an ended named identity's row"
            );
        });
    }

    #[test]
    fn resolve_event_matches_generation_and_class() {
        let m: Vec<Slot> = (0..64).map(|_| Slot::new()).collect();
        let r = Registry::new(&m);
        r.begin(0x2000, LockKind::Mutex, 5);
        let (i, s) = r.find(0x2000).unwrap();
        let g = s.generation();
        let ek = event_key(i, g, 5, LockKind::Mutex, Mode::Exclusive);
        let live = Ident::Live(((i as u64) << 32) | g as u64);
        assert_eq!(ids(Some(&r), CALIB_NONE).resolve_event(ek), live);
        let other_class = event_key(i, g, 6, LockKind::Mutex, Mode::Exclusive);
        assert_eq!(ids(Some(&r), CALIB_NONE).resolve_event(other_class), Ident::Class(6));
        let older = event_key(i, g.wrapping_sub(1), 5, LockKind::Mutex, Mode::Exclusive);
        assert_eq!(ids(Some(&r), CALIB_NONE).resolve_event(older), Ident::Class(5));
        assert_eq!(ids(Some(&r), ((i as u64) << 32) | g as u64).resolve_event(ek), Ident::Skip);
    }

    #[test]
    fn retag_folds_the_old_identity_into_its_class_or_own_row() {
        let mem = HeapMemory::new(usize::MAX);
        let t = Table::new(&mem, 16);
        let k1 = key(2, 0, LockKind::Mutex, Mode::Exclusive);
        let e = t.get(k1, 0x40).unwrap();
        // A new record: tagged, nothing moved.
        assert!(ids(None, CALIB_NONE).retag(&t, e, k1, 0x40, tag(1, 7)));
        e.stats.acquisitions.add(3);
        // The slot's next identity: the 3 go to class 7's record.
        assert!(ids(None, CALIB_NONE).retag(&t, e, k1, 0x40, tag(2, 7)));
        assert_eq!(e.stats.acquisitions.get(), 0);
        let c = t.get(class_key(7, LockKind::Mutex as u8, 0), 0x40).unwrap();
        assert_eq!(c.stats.acquisitions.get(), 3);
        // A named identity keeps a row of its own.
        e.tag.store(tag(2, 7) | NAMED, Relaxed);
        e.stats.acquisitions.add(5);
        assert!(ids(None, CALIB_NONE).retag(&t, e, k1, 0x40, tag(3, 7)));
        let own = t.get(own_row_key(2, 2, LockKind::Mutex as u8, 0), 0x40).unwrap();
        assert_eq!(own.stats.acquisitions.get(), 5);
        assert_eq!(
            ids(None, CALIB_NONE).resolve(own_row_key(2, 2, 0, 0), 0),
            Ident::Live((2 << 32) | 2)
        );
        // The calibration lock's counts go nowhere.
        e.stats.acquisitions.add(9);
        assert!(ids(None, (2 << 32) | 3).retag(&t, e, k1, 0x40, tag(4, 7)));
        assert_eq!(c.stats.acquisitions.get(), 3);
        assert_eq!(e.tag.load(Relaxed), tag(4, 7));
    }

    #[test]
    fn merge_record_keeps_live_identities_and_folds_ended_ones() {
        with_lock(0x3000, |r, i, g| {
            let (src_mem, dst_mem) = (HeapMemory::new(usize::MAX), HeapMemory::new(usize::MAX));
            let (src, dst) = (Table::new(&src_mem, 16), Table::new(&dst_mem, 16));
            let k_live = key(i, 0, LockKind::Mutex, Mode::Exclusive);
            let e = src.get(k_live, 0x10).unwrap();
            e.tag.store(tag(g, 2), Relaxed);
            e.stats.acquisitions.add(4);
            let k_dead = key(i + 1, 0, LockKind::Mutex, Mode::Exclusive);
            let d = src.get(k_dead, 0x10).unwrap();
            d.tag.store(tag(0, 2), Relaxed);
            d.stats.acquisitions.add(6);
            for e in src.entries() {
                assert!(ids(Some(r), CALIB_NONE).merge_record(&dst, e));
            }
            let got: Vec<(u64, u64, u64)> =
                dst.iter().map(|(k1, k2, st)| (k1, k2, st.acquisitions.get())).collect();
            assert_eq!(
                got,
                vec![(k_live, 0x10, 4), (class_key(2, LockKind::Mutex as u8, 0), 0x10, 6)],
                "the live identity keeps its record, the dead one goes to its class"
            );
        });
    }
}

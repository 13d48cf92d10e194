//! Lock classes: how the records of lock identities that ended join their class.
//!
//! A thread's record of a lock is keyed by the lock's registry slot (not its generation), and its
//! `tag` says which identity (generation) and class the counts belong to. When the thread next
//! uses the slot for another identity (the lock was destroyed, another lock took the slot), it
//! first folds the record into its class's record (key [`class_key`]) and starts it afresh
//! ([`retag`]): the tables hold one record per slot, site and mode, however many locks lived in
//! the slot. Records still tagged with an identity that ended are folded the same way when the
//! profile is written ([`resolve`]), whichever thread destroyed the lock. An identity the program
//! named keeps a row of its own (key [`own_row_key`]).
//!
//! Event keys stay per identity ([`event_key`]: slot, low generation bits, class); the profile
//! writer folds those of identities that ended ([`resolve_event`]).

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use lockmeter_core::registry::{Class, Classes, Registry};
use lockmeter_core::table::{Entry, Table};
use lockmeter_core::{LockKind, Mode};

/// Registry slot and generation of the calibration lock, left out of the profile.
pub(crate) static CALIB_KEY: AtomicU64 = AtomicU64::new(u64::MAX);

/// Packs a record key: valid bit, registry slot, generation, kind, mode.
#[inline(always)]
pub(crate) fn key(slot: u32, gen_: u32, kind: LockKind, mode: Mode) -> u64 {
    (1u64 << 63)
        | ((slot as u64 & 0x7ff_ffff) << 36)
        | ((gen_ as u64 & 0x7fff_ffff) << 5)
        | ((kind as u64 & 7) << 2)
        | (mode as u64 & 3)
}

/// Unpacks a record key into (slot, generation, kind, mode).
pub(crate) fn unkey(k: u64) -> (u32, u32, u8, u8) {
    (
        ((k >> 36) & 0x7ff_ffff) as u32,
        ((k >> 5) & 0x7fff_ffff) as u32,
        ((k >> 2) & 7) as u8,
        (k & 3) as u8,
    )
}

/// The slot field of a class record's key (no registry slot has this index).
pub(crate) const CLASS_SLOT: u32 = 0x7ff_ffff;

/// The lock classes of this process (see `lockmeter_core::registry::Classes`).
pub(crate) static CLASSES: Classes<'static> = Classes::new(&CLASS_ENTRIES);
static CLASS_ENTRIES: [Class; 4096] = [const { Class::new() }; 4096];

/// The key of the record of class `class` (0: identities that got no class).
#[inline]
pub(crate) fn class_key(class: u32, kind: u8, mode: u8) -> u64 {
    (1u64 << 63)
        | ((CLASS_SLOT as u64) << 36)
        | ((class as u64 & 0x7fff_ffff) << 5)
        | ((kind as u64 & 7) << 2)
        | (mode as u64 & 3)
}

/// A record's tag: the identity's generation and class (never 0), and whether the program named
/// the identity before its first use here ([`NAMED`]).
#[inline(always)]
pub(crate) fn tag(gen_: u32, class: u32) -> u64 {
    ((gen_ as u64) << 32) | (1 << 31) | (class as u64 & 0x7fff)
}

/// Tag bit of an identity the program named: it keeps a row of its own when it ends.
pub(crate) const NAMED: u64 = 1 << 30;

/// Generation field bit of the key of a named identity that ended ([`retag`] moved its counts
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
pub(crate) fn untag(t: u64) -> (u32, u32) {
    ((t >> 32) as u32, (t & 0x7fff) as u32)
}

/// The key of a lock identity in event keys: slot, the low 16 bits of the generation and the
/// class (events stay keyed by identity; the profile writer folds those of dead identities).
#[inline(always)]
pub(crate) fn event_key(slot: u32, gen_: u32, class: u32, kind: LockKind, mode: Mode) -> u64 {
    key(slot, ((class & 0x7fff) << 16) | (gen_ & 0xffff), kind, mode)
}

/// What a record or event's lock is, when the profile is written.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Ident {
    /// A row of its own, `(slot << 32) | generation`: a live identity, or a named one that ended.
    Live(u64),
    /// A class (an identity that ended, or a class record).
    Class(u32),
    /// The collector's calibration lock, or a record not yet tagged: left out.
    Skip,
}

/// The identity of record `k1` with tag `t`.
pub(crate) fn resolve(reg: Option<&Registry<'_>>, k1: u64, t: u64) -> Ident {
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
    if pair == CALIB_KEY.load(Relaxed) {
        return Ident::Skip;
    }
    let live =
        reg.and_then(|r| r.slot(slot_idx)).is_some_and(|s| s.in_use() && s.generation() == gen_);
    if live || keeps_row(reg, k1, t) { Ident::Live(pair) } else { Ident::Class(class) }
}

/// The identity of event key `k` (see [`event_key`]).
pub(crate) fn resolve_event(reg: Option<&Registry<'_>>, k: u64) -> Ident {
    let (slot_idx, g, _, _) = unkey(k);
    let (gen16, class) = (g & 0xffff, g >> 16);
    let calib = CALIB_KEY.load(Relaxed);
    if calib >> 32 == slot_idx as u64 && calib & 0xffff == gen16 as u64 {
        return Ident::Skip;
    }
    match reg.and_then(|r| r.slot(slot_idx)) {
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

/// Makes record `e` (of `table`, key `k1`, call site `site`) the record of the identity tagged
/// `t`: if it holds counts of another identity, they go to that identity's class record first.
/// False if they could not (the class record did not fit): the caller counts them as dropped.
#[cold]
#[inline(never)]
pub(crate) fn retag(
    reg: Option<&Registry<'_>>,
    table: &Table<'static>,
    e: &Entry,
    k1: u64,
    site: u64,
    t: u64,
) -> bool {
    let old = e.tag.load(Relaxed);
    let mut ok = true;
    if old != 0 {
        let (slot_idx, _, kind, mode) = unkey(k1);
        let (gen_, class) = untag(old);
        let to = if keeps_row(reg, k1, old) {
            own_row_key(slot_idx, gen_, kind, mode)
        } else {
            class_key(class, kind, mode)
        };
        if ((slot_idx as u64) << 32) | gen_ as u64 != CALIB_KEY.load(Relaxed) {
            match table.get(to, site) {
                Some(c) => c.stats.absorb(&e.stats),
                None => ok = false,
            }
        }
    }
    if !ok {
        return false;
    }
    e.stats.clear();
    e.tag.store(t, Relaxed);
    true
}

/// Adds record `e` into `dst` (a table of exited threads, written by one thread only): into the
/// record of the same identity while it lives, of its class once it ended. False if it did not
/// fit.
pub(crate) fn merge_record(reg: Option<&Registry<'_>>, dst: &Table<'static>, e: &Entry) -> bool {
    let (k1, site) = e.key();
    let t = e.tag.load(Relaxed);
    let (_, _, kind, mode) = unkey(k1);
    let (k, t) = match resolve(reg, k1, t) {
        Ident::Skip => return true,
        Ident::Class(c) => (class_key(c, kind, mode), 0),
        // A named identity that ended keeps its row, under a key of its own.
        Ident::Live(pair) if t != 0 && !is_live(reg, pair) => {
            (own_row_key((pair >> 32) as u32, pair as u32, kind, mode), 0)
        }
        Ident::Live(_) => (k1, t),
    };
    let Some(d) = dst.get(k, site) else { return false };
    if t != 0 && d.tag.load(Relaxed) != t && !retag(reg, dst, d, k, site, t) {
        return false;
    }
    d.stats.absorb(&e.stats);
    true
}

/// Whether identity `pair` (`(slot << 32) | generation`) is the one in its slot now.
fn is_live(reg: Option<&Registry<'_>>, pair: u64) -> bool {
    reg.and_then(|r| r.slot((pair >> 32) as u32))
        .is_some_and(|s| s.in_use() && s.generation() == pair as u32)
}

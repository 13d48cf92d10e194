//! Lock classes: how the records of lock identities that ended join their class. The logic is
//! `lockmeter_core::idents` (pure, unit-tested there); this file holds the process's class table
//! and calibration lock, and hands the latter to it.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use lockmeter_core::idents;
pub(crate) use lockmeter_core::idents::{
    CLASS_SLOT, Ident, NAMED, class_key, event_key, key, tag, unkey, untag,
};
use lockmeter_core::registry::{Class, Classes, Registry};
use lockmeter_core::table::{Entry, Table};

/// Registry slot and generation of the calibration lock, left out of the profile.
pub(crate) static CALIB_KEY: AtomicU64 = AtomicU64::new(u64::MAX);

/// The lock classes of this process (see `lockmeter_core::registry::Classes`).
pub(crate) static CLASSES: Classes<'static> = Classes::new(&CLASS_ENTRIES);
static CLASS_ENTRIES: [Class; 4096] = [const { Class::new() }; 4096];

/// The identity of record `k1` with tag `t` (`idents::resolve`).
pub(crate) fn resolve(reg: Option<&Registry<'_>>, k1: u64, t: u64) -> Ident {
    idents::resolve(reg, k1, t, CALIB_KEY.load(Relaxed))
}

/// The identity of event key `k` (`idents::resolve_event`).
pub(crate) fn resolve_event(reg: Option<&Registry<'_>>, k: u64) -> Ident {
    idents::resolve_event(reg, k, CALIB_KEY.load(Relaxed))
}

/// Makes record `e` the record of the identity tagged `t` (`idents::retag`).
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
    idents::retag(reg, table, e, k1, site, t, CALIB_KEY.load(Relaxed))
}

/// Adds record `e` into `dst` (`idents::merge_record`).
pub(crate) fn merge_record(reg: Option<&Registry<'_>>, dst: &Table<'static>, e: &Entry) -> bool {
    idents::merge_record(reg, dst, e, CALIB_KEY.load(Relaxed))
}

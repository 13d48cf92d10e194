//! Lock classes: how the records of lock identities that ended join their class. The logic is
//! `lockmeter_core::idents` (pure, unit-tested there); this file holds the process's class table
//! and calibration lock.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use lockmeter_core::idents::Idents;
pub(crate) use lockmeter_core::idents::{
    CLASS_SLOT, Ident, NAMED, class_key, event_key, is_fold_target, key, tag, unkey, untag,
};
use lockmeter_core::registry::{Class, Classes, Registry};

/// Registry slot and generation of the calibration lock, left out of the profile.
pub(crate) static CALIB_KEY: AtomicU64 = AtomicU64::new(u64::MAX);

/// The lock classes of this process (see `lockmeter_core::registry::Classes`).
pub(crate) static CLASSES: Classes<'static> = Classes::new(&CLASS_ENTRIES);
static CLASS_ENTRIES: [Class; 4096] = [const { Class::new() }; 4096];

/// Identities resolved against `reg` and this process's calibration lock (resolve, retag, merge:
/// see `lockmeter_core::idents::Idents`).
#[inline]
pub(crate) fn idents<'r>(reg: Option<&'r Registry<'r>>) -> Idents<'r> {
    Idents { reg, calib: CALIB_KEY.load(Relaxed) }
}

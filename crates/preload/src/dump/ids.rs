//! Naming and id mapping: dense lock ids in a scratch table (`IdMap`, no allocator), the
//! key of a lock class's row (`class_pair`), and the lock and class records with the name the
//! program gave.

use super::Enc;
use crate::state;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use lockmeter_core::LockKind;
use lockmeter_core::fixed::{Entry, FixedTable};

/// Writes a lock identity, with the name the program gave it.
pub(super) fn write_lock(
    enc: &mut Enc,
    reg: &lockmeter_core::registry::Registry<'static>,
    names: &IdMap,
    id: u32,
    slot_idx: u32,
    gen_: u32,
    kind: LockKind,
) -> Result<(), lockmeter_format::EncodeError> {
    // An identity that ended (a named one keeps its row) may have left its slot to another lock.
    let addr =
        reg.slot(slot_idx).filter(|s| s.in_use() && s.generation() == gen_).map_or(0, |s| s.addr());
    let name = names
        .find(((slot_idx as u64) << 32) | gen_ as u64)
        .and_then(|off| crate::names::name_at(off.wrapping_sub(1)));
    enc.lock(id, addr, gen_, kind, name)
}

/// The lock-id map key of class `class` of kind `kind` (no identity has slot `CLASS_SLOT`).
pub(super) fn class_pair(class: u32, kind: u8) -> u64 {
    ((crate::classes::CLASS_SLOT as u64) << 32) | ((class as u64) << 8) | kind as u64
}

/// Writes a class's lock: address and generation 0, and what the class is.
pub(super) fn write_class(
    enc: &mut Enc,
    id: u32,
    class: u32,
    kind: LockKind,
) -> Result<(), lockmeter_format::EncodeError> {
    enc.lock(id, 0, 0, kind, None)?;
    let c = crate::classes::CLASSES.get(class);
    enc.lock_class(&lockmeter_format::LockClass {
        lock: id,
        site: c.map_or(0, |c| c.site()),
        initialized: c.is_some_and(|c| c.origin() == lockmeter_core::registry::ClassOrigin::Init),
        lifetimes: c.map_or(0, |c| c.ended()),
        sample_address: c.map_or(0, |c| c.sample_address()),
    })
}

/// One entry of an [`IdMap`]: key `pair + 1` (0: empty), value.
#[repr(C)]
struct IdEntry {
    key: AtomicU64,
    val: AtomicU32,
}

impl Entry for IdEntry {
    type Key = u64;
    type Word = AtomicU64;
    const TAG_IS_KEY: bool = true;
    fn word(&self) -> &AtomicU64 {
        &self.key
    }
    fn tag(k: &u64) -> u64 {
        *k
    }
}

/// (slot, generation) -> dense lock id, in a scratch mapping (no allocator): a
/// `lockmeter_core::fixed::FixedTable` with this thread its only user.
pub(super) struct IdMap {
    table: FixedTable<'static, IdEntry>,
    mem: *mut u8,
    bytes: usize,
    next: core::cell::Cell<u32>,
}

impl IdMap {
    pub(super) fn new(n: usize) -> Self {
        let cap = (n.max(1) * 2).next_power_of_two();
        let bytes = cap * size_of::<IdEntry>();
        let mem = state::map_zeroed(bytes);
        let entries: &'static [IdEntry] = if mem.is_null() {
            &[]
        } else {
            // SAFETY: `bytes` zeroed bytes, page-aligned, hold `cap` entries (zeroed atomics are
            // valid); the mapping lives until `free` consumes the map and its table.
            unsafe { core::slice::from_raw_parts(mem as *const IdEntry, cap) }
        };
        IdMap {
            table: FixedTable::new(entries, cap, cap),
            mem,
            bytes,
            next: core::cell::Cell::new(0),
        }
    }

    /// The id of `pair` if it has one.
    pub(super) fn find(&self, pair: u64) -> Option<u32> {
        self.table.find(&pair.wrapping_add(1)).map(|e| e.val.load(Relaxed))
    }

    /// Sets the value of `pair` (inserting it), so that `find` returns `val`.
    pub(super) fn set(&self, pair: u64, val: u32) {
        if let Some((_, e)) = self.table.insert_one(&pair.wrapping_add(1), |_| {}) {
            e.val.store(val, Relaxed);
        }
    }

    /// The id of `pair`, and whether it was just assigned. `None` when the map could not be
    /// mapped or is full.
    pub(super) fn get(&self, pair: u64) -> Option<(u32, bool)> {
        let id = self.next.get();
        let mut new = false;
        let (_, e) = self.table.insert_one(&pair.wrapping_add(1), |e| {
            e.val.store(id, Relaxed);
            new = true;
        })?;
        if new {
            self.next.set(id + 1);
            return Some((id, true));
        }
        Some((e.val.load(Relaxed), false))
    }

    pub(super) fn free(self) {
        if !self.mem.is_null() {
            // SAFETY: the mapping made in `new`; its table goes with `self`.
            unsafe { libc::munmap(self.mem.cast(), self.bytes) };
        }
    }
}

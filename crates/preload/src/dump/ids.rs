//! Naming and id mapping: dense lock ids in a scratch hash map (`IdMap`, no allocator), the
//! key of a lock class's row (`class_pair`), and the lock and class records with the name the
//! program gave.

use super::Enc;
use crate::state;
use lockmeter_core::LockKind;
use lockmeter_core::probe::Probe;

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

/// (slot, generation) -> dense lock id, in a scratch mapping (no allocator).
pub(super) struct IdMap {
    keys: *mut u64,
    vals: *mut u32,
    cap: usize,
    bytes: usize,
    next: core::cell::Cell<u32>,
}

impl IdMap {
    pub(super) fn new(n: usize) -> Self {
        let cap = (n.max(1) * 2).next_power_of_two();
        let bytes = cap * 12;
        let mem = state::map_zeroed(bytes);
        let vals = if mem.is_null() {
            core::ptr::null_mut()
        } else {
            // SAFETY: in bounds of the mapping (cap * 8 < bytes).
            let v = unsafe { mem.add(cap * 8) };
            v.cast()
        };
        IdMap { keys: mem.cast(), vals, cap, bytes, next: core::cell::Cell::new(0) }
    }

    /// The slot of `pair` (key 0 marks an empty slot; keys are `pair + 1`): its key and value
    /// pointers and whether `pair` is there (false: the empty slot it would take). `None` when
    /// the map could not be mapped or is full.
    fn slot(&self, pair: u64) -> Option<(*mut u64, *mut u32, bool)> {
        if self.keys.is_null() {
            return None;
        }
        let k = pair.wrapping_add(1);
        for i in Probe::new(lockmeter_core::mix64(k), self.cap, self.cap) {
            // SAFETY: i < cap; both arrays have cap elements inside the mapping.
            let (kp, vp) = unsafe { (self.keys.add(i), self.vals.add(i)) };
            // SAFETY: as above; only this thread uses the map.
            match unsafe { *kp } {
                cur if cur == k => return Some((kp, vp, true)),
                0 => return Some((kp, vp, false)),
                _ => {}
            }
        }
        None
    }

    /// The id of `pair` if it has one.
    pub(super) fn find(&self, pair: u64) -> Option<u32> {
        match self.slot(pair)? {
            // SAFETY: a slot of the mapping; only this thread uses the map.
            (_, vp, true) => Some(unsafe { *vp }),
            _ => None,
        }
    }

    /// Sets the value of `pair` (inserting it), so that `find` returns `val`.
    pub(super) fn set(&self, pair: u64, val: u32) {
        if let Some((kp, vp, _)) = self.slot(pair) {
            // SAFETY: a slot of the mapping; only this thread uses the map.
            unsafe {
                *kp = pair.wrapping_add(1);
                *vp = val;
            }
        }
    }

    /// The id of `pair`, and whether it was just assigned.
    pub(super) fn get(&self, pair: u64) -> Option<(u32, bool)> {
        let (kp, vp, found) = self.slot(pair)?;
        if found {
            // SAFETY: a slot of the mapping; only this thread uses the map.
            return Some((unsafe { *vp }, false));
        }
        let id = self.next.get();
        self.next.set(id + 1);
        // SAFETY: as above.
        unsafe {
            *kp = pair.wrapping_add(1);
            *vp = id;
        }
        Some((id, true))
    }

    pub(super) fn free(self) {
        if !self.keys.is_null() {
            // SAFETY: the mapping made in `new`, no longer used.
            unsafe { libc::munmap(self.keys.cast(), self.bytes) };
        }
    }
}

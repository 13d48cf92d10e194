//! Names the program gives its locks: `lockmeter_name_lock(lock, name)` (see `include/lockmeter.h`).
//!
//! A name belongs to the lock identity (address and generation) it was given to, so the name of
//! a lock that was destroyed long before the end still appears in the profile. Names are appended
//! to an arena mapped at start-up as `[len u8][valid u8][slot u32][generation u32][bytes]`
//! entries: a writer reserves its entry with one atomic add, writes `len` first (so a reader can
//! step over an entry still being written) and sets `valid` last. The last name given to an
//! identity wins. The profile writer indexes the arena once ([`for_each`]).

use core::ffi::{c_char, c_void};
use core::sync::atomic::{AtomicPtr, AtomicU8, AtomicUsize, Ordering::*};
use lockmeter_core::LockKind;

/// Arena size: room for thousands of names.
const ARENA: usize = 1 << 20;
/// Longest name kept (bytes).
const MAX_NAME: usize = 127;
/// Bytes before the name in an entry.
const ENTRY_HEAD: usize = 10;

static BASE: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());
/// Bytes reserved so far.
static USED: AtomicUsize = AtomicUsize::new(0);

/// Maps the arena (constructor).
pub(crate) fn init() {
    let p = crate::state::map_counted(ARENA);
    if !p.is_null() {
        BASE.store(p, Release);
    }
}

/// Calls `f(slot, generation, offset)` for every complete entry, in the order names were given
/// (so a later call for the same identity is the later name). `offset` goes to [`name_at`].
pub(crate) fn for_each(mut f: impl FnMut(u32, u32, u32)) {
    let base = BASE.load(Acquire);
    if base.is_null() {
        return;
    }
    let used = USED.load(Acquire).min(ARENA);
    let mut pos = 0;
    while pos + ENTRY_HEAD <= used {
        // SAFETY: `pos + ENTRY_HEAD <= used <= ARENA`: inside the mapped arena.
        let len = unsafe { (*(base.add(pos) as *const AtomicU8)).load(Acquire) } as usize;
        if len == 0 {
            break; // reserved, length not written yet: nothing after it can be stepped over
        }
        // SAFETY: as above.
        let valid = unsafe { (*(base.add(pos + 1) as *const AtomicU8)).load(Acquire) };
        if valid == 1 && pos + ENTRY_HEAD + len <= used {
            // SAFETY: the entry is complete (valid was stored with Release after its fields).
            let head = unsafe { core::slice::from_raw_parts(base.add(pos), ENTRY_HEAD) };
            let slot = u32::from_le_bytes([head[2], head[3], head[4], head[5]]);
            let generation = u32::from_le_bytes([head[6], head[7], head[8], head[9]]);
            f(slot, generation, pos as u32);
        }
        pos += ENTRY_HEAD + len;
    }
}

/// The name of the entry at `offset` (from [`for_each`]).
pub(crate) fn name_at(offset: u32) -> Option<&'static [u8]> {
    let base = BASE.load(Acquire);
    let pos = offset as usize;
    if base.is_null() || pos + ENTRY_HEAD > ARENA {
        return None;
    }
    // SAFETY: inside the arena; the entry is complete (for_each checked `valid`).
    let len = unsafe { *base.add(pos) } as usize;
    if pos + ENTRY_HEAD + len > ARENA {
        return None;
    }
    // SAFETY: as above.
    Some(unsafe { core::slice::from_raw_parts(base.add(pos + ENTRY_HEAD), len) })
}

/// Gives the lock at `lock` a name for the reports. Harmless on any pointer; a null or empty
/// name is ignored.
///
/// # Safety
/// `name` is null or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn lockmeter_name_lock(lock: *const c_void, name: *const c_char) {
    let saved = crate::sys::errno();
    // SAFETY: forwarded contract.
    unsafe { name_lock(lock, name) };
    crate::sys::set_errno(saved);
}

/// # Safety
/// `name` is null or a NUL-terminated string.
unsafe fn name_lock(lock: *const c_void, name: *const c_char) {
    // A `_Fork` child shares its parent's tables, and a fork child copies them first.
    if name.is_null() || !crate::fork::own_or_start() {
        return;
    }
    let Some(reg) = crate::state::registry() else { return };
    let Some((idx, slot)) = reg.lookup(lock as u64, LockKind::Mutex) else { return };
    // SAFETY: the caller passes a NUL-terminated string.
    let bytes = unsafe { core::ffi::CStr::from_ptr(name) }.to_bytes();
    let bytes = bytes.get(..bytes.len().min(MAX_NAME)).unwrap_or(&[]);
    let base = BASE.load(Acquire);
    if bytes.is_empty() || base.is_null() {
        return;
    }
    slot.named.store(slot.generation().wrapping_add(1), Relaxed);
    let need = ENTRY_HEAD + bytes.len();
    let off = USED.fetch_add(need, Relaxed);
    if off + need > ARENA {
        return;
    }
    // SAFETY: [off, off + need) is inside the arena and reserved for us by the fetch_add. The
    // length goes first (readers step over an unfinished entry), `valid` last, with Release.
    unsafe {
        (*(base.add(off) as *const AtomicU8)).store(bytes.len() as u8, Release);
        let entry = core::slice::from_raw_parts_mut(base.add(off + 2), need - 2);
        entry[0..4].copy_from_slice(&idx.to_le_bytes());
        entry[4..8].copy_from_slice(&slot.generation().to_le_bytes());
        entry[8..].copy_from_slice(bytes);
        (*(base.add(off + 1) as *const AtomicU8)).store(1, Release);
    }
}

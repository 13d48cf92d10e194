//! Names the program gives its locks: `lockmeter_name_lock(lock, name)` (see `include/lockmeter.h`).
//!
//! A name belongs to the lock identity (address and generation) it was given to, so the name of
//! a lock that was destroyed long before the end still appears in the profile. Names are appended
//! to an arena mapped at start-up as `[slot u32][generation u32][len u8][bytes]` entries; the
//! last name given to an identity wins.

use core::ffi::{c_char, c_void};
use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::*};
use lockmeter_core::LockKind;

/// Arena size: room for thousands of names.
const ARENA: usize = 1 << 20;
/// Longest name kept (bytes).
const MAX_NAME: usize = 127;
/// Bytes before the name in an entry.
const ENTRY_HEAD: usize = 9;

static BASE: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());
/// Bytes reserved so far.
static USED: AtomicUsize = AtomicUsize::new(0);
/// Bytes of complete entries (readers stop here).
static DONE: AtomicUsize = AtomicUsize::new(0);

/// Maps the arena (constructor).
pub(crate) fn init() {
    let p = crate::state::map_zeroed(ARENA);
    if !p.is_null() {
        crate::state::MAPPED_BYTES.fetch_add(ARENA as u64, Relaxed);
        BASE.store(p, Release);
    }
}

/// The last name given to lock identity (`slot`, `generation`), if any.
pub(crate) fn get(slot: u32, generation: u32) -> Option<&'static [u8]> {
    let base = BASE.load(Acquire);
    if base.is_null() {
        return None;
    }
    let done = DONE.load(Acquire).min(ARENA);
    // SAFETY: the arena is mapped for the life of the process; [0, done) holds complete entries.
    let arena = unsafe { core::slice::from_raw_parts(base, done) };
    let mut found = None;
    let mut pos = 0;
    while let Some(head) = arena.get(pos..pos + ENTRY_HEAD) {
        let s = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
        let g = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
        let len = head[8] as usize;
        if len == 0 {
            break; // a reserved entry whose writer has not finished
        }
        let name = arena.get(pos + ENTRY_HEAD..pos + ENTRY_HEAD + len)?;
        if s == slot && g == generation {
            found = Some(name);
        }
        pos += ENTRY_HEAD + len;
    }
    found
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
    if name.is_null() {
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
    let need = ENTRY_HEAD + bytes.len();
    let off = USED.fetch_add(need, Relaxed);
    if off + need > ARENA {
        return;
    }
    // SAFETY: [off, off + need) is inside the arena and reserved for us by the fetch_add.
    let entry = unsafe { core::slice::from_raw_parts_mut(base.add(off), need) };
    entry[0..4].copy_from_slice(&idx.to_le_bytes());
    entry[4..8].copy_from_slice(&slot.generation().to_le_bytes());
    entry[ENTRY_HEAD..].copy_from_slice(bytes);
    entry[8] = bytes.len() as u8;
    // Publish in order: entries before ours are complete first (names are given rarely, so
    // this waits briefly at most; bounded, in case an earlier writer never finishes).
    for _ in 0..10_000_000u32 {
        if DONE.compare_exchange_weak(off, off + need, AcqRel, Relaxed).is_ok() {
            break;
        }
        core::hint::spin_loop();
    }
}

//! Names the program gives its locks: `lockmeter_name_lock(lock, name)` (see `include/lockmeter.h`).
//!
//! Names are copied into an append-only arena mapped at start-up; a registry slot keeps the
//! offset. A name belongs to the lock identity it was given to: `*_init` and `*_destroy` start a
//! new identity and clear it.

use core::ffi::{c_char, c_void};
use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::*};
use lockmeter_core::LockKind;

/// Arena size: room for thousands of names.
const ARENA: usize = 1 << 20;
/// Longest name kept (bytes, without the NUL).
const MAX_NAME: usize = 127;

static BASE: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());
static USED: AtomicUsize = AtomicUsize::new(0);

/// Maps the arena (constructor).
pub(crate) fn init() {
    let p = crate::state::map_zeroed(ARENA);
    if !p.is_null() {
        crate::state::MAPPED_BYTES.fetch_add(ARENA as u64, Relaxed);
        BASE.store(p, Release);
    }
}

/// The name stored at `off` (an offset + 1 from a registry slot), if any.
pub(crate) fn get(off: u32) -> Option<&'static [u8]> {
    let base = BASE.load(Acquire);
    let off = (off as usize).checked_sub(1)?;
    if base.is_null() || off >= ARENA {
        return None;
    }
    // SAFETY: the arena is mapped for the life of the process and `off` is inside it; names are
    // written completely before their offset is published (Release in `name_lock`).
    let tail = unsafe { core::slice::from_raw_parts(base.add(off), ARENA - off) };
    let n = tail.iter().position(|&c| c == 0).unwrap_or(0);
    tail.get(..n)
}

/// Gives the lock at `lock` a name for the reports. Harmless on any pointer; a null or empty name
/// clears it.
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

unsafe fn name_lock(lock: *const c_void, name: *const c_char) {
    let Some(reg) = crate::state::registry() else { return };
    let Some((_, slot)) = reg.lookup(lock as u64, LockKind::Mutex) else { return };
    if name.is_null() {
        slot.name.store(0, Release);
        return;
    }
    // SAFETY: the caller passes a NUL-terminated string.
    let bytes = unsafe { core::ffi::CStr::from_ptr(name) }.to_bytes();
    let bytes = bytes.get(..bytes.len().min(MAX_NAME)).unwrap_or(&[]);
    if bytes.is_empty() {
        slot.name.store(0, Release);
        return;
    }
    let base = BASE.load(Acquire);
    let need = bytes.len() + 1;
    let off = USED.fetch_add(need, Relaxed);
    if base.is_null() || off + need > ARENA {
        return;
    }
    // SAFETY: [off, off + need) is inside the arena and reserved for us by the fetch_add.
    unsafe {
        core::ptr::copy_nonoverlapping(bytes.as_ptr(), base.add(off), bytes.len());
        *base.add(off + bytes.len()) = 0;
    }
    slot.name.store(off as u32 + 1, Release);
}

//! `dlopen`: after a library is loaded, the program's maps are copied where its watcher sees them
//! (`dump::note_loaded`), so that a profile the watcher writes names the library's locks and
//! sites. The call itself is the program's, unchanged.

use crate::real;
use core::ffi::{c_char, c_int, c_void};

/// Interposed `dlopen`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dlopen(file: *const c_char, mode: c_int) -> *mut c_void {
    // SAFETY: forwarded with the caller's arguments and contract.
    let h = unsafe { real::dlopen(file, mode) };
    if !h.is_null() {
        crate::dump::note_loaded();
    }
    h
}

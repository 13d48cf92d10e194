//! `pthread_create`: keeps the pool of unwind caches ahead of the threads the program creates
//! (`crate::unwind::top_up`), so that a new thread finds a cache without any allocation in a
//! lock hook. The thread is created exactly as the program asked, and `errno` is left as the real
//! call leaves it.

use crate::real;
use core::ffi::{c_int, c_void};

/// Interposed `pthread_create`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_create(
    t: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    f: extern "C" fn(*mut c_void) -> *mut c_void,
    arg: *mut c_void,
) -> c_int {
    // A `_Fork` or raw `clone` child shares the pool with its parent: it must not fill it.
    if crate::state::own_process() {
        let saved = crate::sys::errno();
        crate::unwind::thread_created();
        crate::unwind::top_up();
        crate::sys::set_errno(saved);
    }
    // SAFETY: forwarded with the caller's arguments and contract.
    unsafe { real::thread_create(t, attr, f, arg) }
}

//! The condition variable hooks: the waits (the mutex released at entry and re-acquired at
//! return), signal and broadcast.
//!
//! These are cancellation points: glibc cancels by forced unwinding, which passes through these
//! frames. Nothing with a destructor is alive across the real call, and no bookkeeping state is
//! held (the busy flag is clear), so an unwind leaves everything consistent.

use crate::state::{enter, leave};
use crate::{meter, real, swap, swap_cond};
use core::ffi::c_int;
use libc::{clockid_t, pthread_cond_t, pthread_mutex_t, timespec};
use lockmeter_core::clock;

/// The mutex is released at entry and re-acquired at return; the time in between is condvar wait.
#[inline(always)]
pub(super) fn cond_common(m: usize, site: usize, wait: impl FnOnce() -> c_int) -> c_int {
    let Some(cx) = enter() else { return wait() };
    let t0 = clock::now();
    // The release and re-acquisition are recorded after the call, and only if glibc did them:
    // a wait that fails (EPERM, EINVAL) neither released nor re-acquired the mutex.
    meter::cond_begin(&cx, m, site, t0);
    leave(cx);
    let r = wait();
    let t1 = clock::now();
    if let Some(cx) = enter() {
        meter::cond_end(&cx);
        if r == 0 || r == libc::ETIMEDOUT || r == libc::EOWNERDEAD {
            meter::cond_reacquired(&cx, m, site, t0, t1);
        }
        leave(cx);
    }
    r
}

trampoline!("C-unwind" fn pthread_cond_wait(_c: *mut pthread_cond_t, _m: *mut pthread_mutex_t) -> c_int; x86 "rdx", arm "x2" => imp_cond_wait);
unsafe extern "C-unwind" fn imp_cond_wait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    site: usize,
) -> c_int {
    // SAFETY: forwarded with the caller's arguments; a swapped mutex waits on the swapped condvar.
    cond_common(m as usize, site, || unsafe {
        match swap::existing(m) {
            Some(s) => swap_cond::cond_wait(s, c, None, core::ptr::null()),
            None => real::cond_wait(c, m),
        }
    })
}

trampoline!("C-unwind" fn pthread_cond_timedwait(_c: *mut pthread_cond_t, _m: *mut pthread_mutex_t, _t: *const timespec) -> c_int; x86 "rcx", arm "x3" => imp_cond_timedwait);
unsafe extern "C-unwind" fn imp_cond_timedwait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    t: *const timespec,
    site: usize,
) -> c_int {
    // SAFETY: as in `imp_cond_wait`.
    cond_common(m as usize, site, || unsafe {
        match swap::existing(m) {
            Some(s) => swap_cond::cond_wait(s, c, None, t),
            None => real::cond_timedwait(c, m, t),
        }
    })
}

trampoline!("C-unwind" fn pthread_cond_clockwait(_c: *mut pthread_cond_t, _m: *mut pthread_mutex_t, _k: clockid_t, _t: *const timespec) -> c_int; x86 "r8", arm "x4" => imp_cond_clockwait);
unsafe extern "C-unwind" fn imp_cond_clockwait(
    c: *mut pthread_cond_t,
    m: *mut pthread_mutex_t,
    k: clockid_t,
    t: *const timespec,
    site: usize,
) -> c_int {
    // SAFETY: as in `imp_cond_wait`.
    cond_common(m as usize, site, || unsafe {
        match swap::existing(m) {
            Some(s) => swap_cond::cond_wait(s, c, Some(k), t),
            None => real::cond_clockwait(c, m, k, t),
        }
    })
}

/// Interposed `pthread_cond_signal`: wakes a waiter of the swapped condvar (when lock swapping
/// is on and one waits), then runs glibc's signal (a no-op without glibc waiters).
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_cond_signal(c: *mut pthread_cond_t) -> c_int {
    // SAFETY: the caller's condvar; forwarded with the caller's arguments.
    unsafe {
        swap_cond::cond_wake(c, false);
        real::cond_signal(c)
    }
}

/// Interposed `pthread_cond_broadcast`: as [`pthread_cond_signal`], waking every waiter.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_cond_broadcast(c: *mut pthread_cond_t) -> c_int {
    // SAFETY: as above.
    unsafe {
        swap_cond::cond_wake(c, true);
        real::cond_broadcast(c)
    }
}

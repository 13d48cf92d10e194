//! The POSIX semaphore hooks: the waits (blocking, try, timed, clock), `sem_post`, init and
//! destroy.
//!
//! `sem_wait` and `sem_timedwait` act on a pending cancellation request before anything else
//! (glibc calls `__pthread_testcancel` first, even when a token is free), so their hooks do the
//! same before their `sem_trywait` could take a token. The waits are cancellation points: their
//! trampolines and implementations are "C-unwind", and nothing with a destructor is alive across
//! the real call (see `meter::sem_wait_with`). Arguments that glibc refuses before trying the
//! semaphore (a bad `tv_nsec`, an unsupported clock) go straight to the real call.

use crate::{meter, real};
use core::ffi::c_int;
use libc::{clockid_t, sem_t, timespec};
use lockmeter_core::LockKind;

unsafe extern "C-unwind" {
    /// glibc's `pthread_testcancel` (not in the `libc` crate for Linux): may unwind the thread.
    fn pthread_testcancel();
}

/// Whether glibc would try the semaphore with this deadline (it answers EINVAL first otherwise).
///
/// # Safety
/// `t` is null or points at a readable `timespec` (the caller's argument, which glibc reads).
#[inline(always)]
unsafe fn deadline_ok(t: *const timespec) -> bool {
    // SAFETY: the caller's contract; a null deadline is passed to the real call as it is.
    !t.is_null() && (0..1_000_000_000).contains(&unsafe { (*t).tv_nsec })
}

trampoline!("C-unwind" fn sem_wait(_s: *mut sem_t) -> c_int; x86 "rsi", arm "x1" => imp_sem_wait);
unsafe extern "C-unwind" fn imp_sem_wait(s: *mut sem_t, site: usize) -> c_int {
    // SAFETY: no preconditions; a cancellation unwinds from here, before any bookkeeping.
    unsafe { pthread_testcancel() };
    meter::sem_wait_with(
        s as usize,
        site,
        true,
        // SAFETY: forwarded with the caller's arguments.
        || unsafe { real::sem_trywait(s) },
        // SAFETY: as above.
        || unsafe { real::sem_wait(s) },
    )
}

trampoline!("C" fn sem_trywait(_s: *mut sem_t) -> c_int; x86 "rsi", arm "x1" => imp_sem_trywait);
unsafe extern "C" fn imp_sem_trywait(s: *mut sem_t, site: usize) -> c_int {
    // SAFETY: forwarded with the caller's arguments.
    meter::sem_trywait_with(s as usize, site, || unsafe { real::sem_trywait(s) })
}

trampoline!("C-unwind" fn sem_timedwait(_s: *mut sem_t, _t: *const timespec) -> c_int; x86 "rdx", arm "x2" => imp_sem_timedwait);
unsafe extern "C-unwind" fn imp_sem_timedwait(
    s: *mut sem_t,
    t: *const timespec,
    site: usize,
) -> c_int {
    // SAFETY: `t` is the caller's deadline argument.
    let probe = unsafe { deadline_ok(t) };
    if probe {
        // SAFETY: as in `imp_sem_wait`.
        unsafe { pthread_testcancel() };
    }
    meter::sem_wait_with(
        s as usize,
        site,
        probe,
        // SAFETY: forwarded with the caller's arguments.
        || unsafe { real::sem_trywait(s) },
        // SAFETY: as above.
        || unsafe { real::sem_timedwait(s, t) },
    )
}

trampoline!("C-unwind" fn sem_clockwait(_s: *mut sem_t, _c: clockid_t, _t: *const timespec) -> c_int; x86 "rcx", arm "x3" => imp_sem_clockwait);
unsafe extern "C-unwind" fn imp_sem_clockwait(
    s: *mut sem_t,
    c: clockid_t,
    t: *const timespec,
    site: usize,
) -> c_int {
    // glibc checks the clock and the deadline, then tries the semaphore (no cancellation test).
    let clock_ok = c == libc::CLOCK_REALTIME || c == libc::CLOCK_MONOTONIC;
    // SAFETY: `t` is the caller's deadline argument.
    let probe = clock_ok && unsafe { deadline_ok(t) };
    meter::sem_wait_with(
        s as usize,
        site,
        probe,
        // SAFETY: forwarded with the caller's arguments.
        || unsafe { real::sem_trywait(s) },
        // SAFETY: as above.
        || unsafe { real::sem_clockwait(s, c, t) },
    )
}

lock_trio! {
    sem_t, LockKind::Semaphore, errno kept;
    unlock sem_post(s) {
        // SAFETY: forwarded with the caller's arguments.
        meter::sem_post_with(s as usize, || unsafe { real::sem_post(s) })
    }
    init sem_init(s, pshared: c_int, value: core::ffi::c_uint; site) x86 "rcx", arm "x3" => imp_sem_init {
        // SAFETY: forwarded with the caller's arguments.
        unsafe { real::sem_init(s, pshared, value) }
    }
    destroy sem_destroy(s) -> c_int {
        // SAFETY: forwarded with the caller's arguments.
        unsafe { real::sem_destroy(s) }
    }
}

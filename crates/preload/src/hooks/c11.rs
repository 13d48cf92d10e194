//! The C11 `<threads.h>` hooks: `mtx_*` and `cnd_wait`/`cnd_timedwait`.
//!
//! glibc's `mtx_lock` and friends call its internal `__pthread_mutex_lock` (and so on) directly,
//! not through the PLT, so the pthread hooks never see them: they get hooks of their own. Each
//! forwards to the real C11 function; its `thrd_*` result is carried through the meter as an
//! errno-like code (`thrd_busy` as EBUSY, `thrd_timedout` as ETIMEDOUT, anything else as a
//! negative code the meter treats as a failure) and turned back, so the caller gets exactly what
//! the real function returned. `mtx_t` and `cnd_t` are opaque here.

use super::cond::cond_common;
use crate::{meter, real};
use core::ffi::c_int;
use libc::timespec;
use lockmeter_core::{LockKind, Mode};

/// glibc's `thrd_success`, `thrd_busy` and `thrd_timedout` (`<threads.h>`).
const THRD_SUCCESS: c_int = 0;
const THRD_BUSY: c_int = 1;
const THRD_TIMEDOUT: c_int = 4;

/// A `thrd_*` result as the meter reads results (0, EBUSY, ETIMEDOUT, else a failure).
#[inline(always)]
fn thrd_to_errno(r: c_int) -> c_int {
    match r {
        THRD_SUCCESS => 0,
        THRD_BUSY => libc::EBUSY,
        THRD_TIMEDOUT => libc::ETIMEDOUT,
        other => -1 - other,
    }
}

/// The inverse of [`thrd_to_errno`].
#[inline(always)]
fn errno_to_thrd(r: c_int) -> c_int {
    match r {
        0 => THRD_SUCCESS,
        libc::EBUSY => THRD_BUSY,
        libc::ETIMEDOUT => THRD_TIMEDOUT,
        other => -1 - other,
    }
}

type MtxT = core::ffi::c_void;
type CndT = core::ffi::c_void;

trampoline!("C" fn mtx_lock(_m: *mut MtxT) -> c_int; x86 "rsi", arm "x1" => imp_mtx_lock);
unsafe extern "C" fn imp_mtx_lock(m: *mut MtxT, site: usize) -> c_int {
    // SAFETY: forwarded with the caller's arguments (an initialized `mtx_t`).
    mtx_acquire(m, site, || unsafe { real::mtx_lock(m) })
}

/// A metered C11 mutex acquisition: the real `mtx_trylock` first, then `blocking` (the real
/// call that waits), results carried through the meter as errno-like codes.
#[inline(always)]
fn mtx_acquire(m: *mut MtxT, site: usize, blocking: impl FnOnce() -> c_int) -> c_int {
    errno_to_thrd(meter::lock_with(
        m as usize,
        LockKind::Mutex,
        Mode::Exclusive,
        site,
        // SAFETY: forwarded with the caller's `mtx_t` (the hooks' callers pass an initialized one).
        || thrd_to_errno(unsafe { real::mtx_trylock(m) }),
        || thrd_to_errno(blocking()),
    ))
}

trampoline!("C" fn mtx_timedlock(_m: *mut MtxT, _t: *const timespec) -> c_int; x86 "rdx", arm "x2" => imp_mtx_timedlock);
unsafe extern "C" fn imp_mtx_timedlock(m: *mut MtxT, t: *const timespec, site: usize) -> c_int {
    // SAFETY: forwarded with the caller's arguments.
    mtx_acquire(m, site, || unsafe { real::mtx_timedlock(m, t) })
}

trampoline!("C" fn mtx_trylock(_m: *mut MtxT) -> c_int; x86 "rsi", arm "x1" => imp_mtx_trylock);
unsafe extern "C" fn imp_mtx_trylock(m: *mut MtxT, site: usize) -> c_int {
    errno_to_thrd(meter::trylock_with(m as usize, LockKind::Mutex, Mode::Exclusive, site, || {
        // SAFETY: forwarded with the caller's arguments.
        thrd_to_errno(unsafe { real::mtx_trylock(m) })
    }))
}

lock_trio! {
    MtxT, LockKind::Mutex, errno kept;
    unlock mtx_unlock(m) {
        // SAFETY: forwarded with the caller's arguments.
        errno_to_thrd(meter::unlock_with(m as usize, || thrd_to_errno(unsafe { real::mtx_unlock(m) })))
    }
    init mtx_init(m, kind: c_int; site) x86 "rdx", arm "x2" => imp_mtx_init {
        // SAFETY: forwarded with the caller's arguments.
        unsafe { real::mtx_init(m, kind) }
    }
    destroy mtx_destroy(m) -> () {
        // SAFETY: forwarded with the caller's arguments.
        unsafe { real::mtx_destroy(m) };
    }
}

trampoline!("C-unwind" fn cnd_wait(_c: *mut CndT, _m: *mut MtxT) -> c_int; x86 "rdx", arm "x2" => imp_cnd_wait);
unsafe extern "C-unwind" fn imp_cnd_wait(c: *mut CndT, m: *mut MtxT, site: usize) -> c_int {
    // SAFETY: forwarded with the caller's arguments.
    errno_to_thrd(cond_common(m as usize, site, || thrd_to_errno(unsafe { real::cnd_wait(c, m) })))
}

trampoline!("C-unwind" fn cnd_timedwait(_c: *mut CndT, _m: *mut MtxT, _t: *const timespec) -> c_int; x86 "rcx", arm "x3" => imp_cnd_timedwait);
unsafe extern "C-unwind" fn imp_cnd_timedwait(
    c: *mut CndT,
    m: *mut MtxT,
    t: *const timespec,
    site: usize,
) -> c_int {
    errno_to_thrd(cond_common(m as usize, site, || {
        // SAFETY: forwarded with the caller's arguments.
        thrd_to_errno(unsafe { real::cnd_timedwait(c, m, t) })
    }))
}

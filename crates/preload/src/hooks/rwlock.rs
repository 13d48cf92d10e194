//! The rwlock hooks: read and write locks (blocking, try, timed, clock), unlock, init and
//! destroy; a swapped rwlock (`run --rwlock`) runs on its lab lock.

use crate::{meter, real, swap_rw};
use core::ffi::c_int;
use libc::{clockid_t, pthread_rwlock_t, timespec};
use lockmeter_core::{LockKind, Mode};

macro_rules! rw_blocking {
    ($name:ident, $imp:ident, $mode:expr, $try:ident, $lock:ident) => {
        trampoline!("C" fn $name(_l: *mut pthread_rwlock_t) -> c_int; x86 "rsi", arm "x1" => $imp);
        unsafe extern "C" fn $imp(l: *mut pthread_rwlock_t, site: usize) -> c_int {
            // SAFETY: the caller's rwlock (the libc contract).
            if let Some(s) = unsafe { swap_rw::rw_for_lock(l) } {
                let w = matches!($mode, Mode::Write);
                return meter::lock_with(l as usize, LockKind::RwLock, $mode, site, || s.try_lock(w), || s.lock(w));
            }
            meter::lock_with(
                l as usize,
                LockKind::RwLock,
                $mode,
                site,
                // SAFETY: forwarded with the caller's arguments.
                || unsafe { real::$try(l) },
                // SAFETY: as above.
                || unsafe { real::$lock(l) },
            )
        }
    };
}
rw_blocking!(pthread_rwlock_rdlock, imp_rwlock_rdlock, Mode::Read, rwlock_tryrdlock, rwlock_rdlock);
rw_blocking!(
    pthread_rwlock_wrlock,
    imp_rwlock_wrlock,
    Mode::Write,
    rwlock_trywrlock,
    rwlock_wrlock
);

macro_rules! rw_try {
    ($name:ident, $imp:ident, $mode:expr, $try:ident) => {
        trampoline!("C" fn $name(_l: *mut pthread_rwlock_t) -> c_int; x86 "rsi", arm "x1" => $imp);
        unsafe extern "C" fn $imp(l: *mut pthread_rwlock_t, site: usize) -> c_int {
            // SAFETY: the caller's rwlock (the libc contract).
            if let Some(s) = unsafe { swap_rw::rw_for_lock(l) } {
                let w = matches!($mode, Mode::Write);
                return meter::trylock_with(l as usize, LockKind::RwLock, $mode, site, || s.try_lock(w));
            }
            // SAFETY: forwarded with the caller's arguments.
            meter::trylock_with(l as usize, LockKind::RwLock, $mode, site, || unsafe { real::$try(l) })
        }
    };
}
rw_try!(pthread_rwlock_tryrdlock, imp_rwlock_tryrdlock, Mode::Read, rwlock_tryrdlock);
rw_try!(pthread_rwlock_trywrlock, imp_rwlock_trywrlock, Mode::Write, rwlock_trywrlock);

/// A metered rwlock acquisition in `mode` with deadline `t` on clock `c` (`deadline`): on the
/// swapped lock when `l` is one (an unknown clock refused first when `check_clock`, as glibc
/// does for the `clock*` calls), else the real `real_try` then `real_lock`.
///
/// # Safety
/// `l` points at the caller's initialized rwlock, `deadline.1` at its deadline.
#[inline(always)]
unsafe fn rw_deadline(
    l: *mut pthread_rwlock_t,
    mode: Mode,
    site: usize,
    (c, t): (clockid_t, *const timespec),
    check_clock: bool,
    real_try: impl FnOnce() -> c_int,
    real_lock: impl FnOnce() -> c_int,
) -> c_int {
    // SAFETY: the caller's rwlock (the caller's contract).
    if let Some(s) = unsafe { swap_rw::rw_for_lock(l) } {
        if check_clock && c != libc::CLOCK_REALTIME && c != libc::CLOCK_MONOTONIC {
            return libc::EINVAL; // glibc checks the clock first
        }
        let w = matches!(mode, Mode::Write);
        // SAFETY: `t` is the caller's deadline.
        let timed = || unsafe { s.timed_lock(w, c, t) };
        return meter::lock_with(l as usize, LockKind::RwLock, mode, site, || s.try_lock(w), timed);
    }
    meter::lock_with(l as usize, LockKind::RwLock, mode, site, real_try, real_lock)
}

macro_rules! rw_timed {
    ($name:ident, $imp:ident, $mode:expr, $try:ident, $lock:ident) => {
        trampoline!("C" fn $name(_l: *mut pthread_rwlock_t, _t: *const timespec) -> c_int; x86 "rdx", arm "x2" => $imp);
        unsafe extern "C" fn $imp(l: *mut pthread_rwlock_t, t: *const timespec, site: usize) -> c_int {
            // SAFETY: forwarded with the caller's arguments (the libc contract).
            let real_try = || unsafe { real::$try(l) };
            // SAFETY: as above.
            let real_lock = || unsafe { real::$lock(l, t) };
            // SAFETY: as above.
            unsafe { rw_deadline(l, $mode, site, (libc::CLOCK_REALTIME, t), false, real_try, real_lock) }
        }
    };
}
rw_timed!(
    pthread_rwlock_timedrdlock,
    imp_rwlock_timedrdlock,
    Mode::Read,
    rwlock_tryrdlock,
    rwlock_timedrdlock
);
rw_timed!(
    pthread_rwlock_timedwrlock,
    imp_rwlock_timedwrlock,
    Mode::Write,
    rwlock_trywrlock,
    rwlock_timedwrlock
);

macro_rules! rw_clock {
    ($name:ident, $imp:ident, $mode:expr, $try:ident, $lock:ident) => {
        trampoline!("C" fn $name(_l: *mut pthread_rwlock_t, _c: clockid_t, _t: *const timespec) -> c_int; x86 "rcx", arm "x3" => $imp);
        unsafe extern "C" fn $imp(l: *mut pthread_rwlock_t, c: clockid_t, t: *const timespec, site: usize) -> c_int {
            // SAFETY: forwarded with the caller's arguments (the libc contract).
            let real_try = || unsafe { real::$try(l) };
            // SAFETY: as above.
            let real_lock = || unsafe { real::$lock(l, c, t) };
            // SAFETY: as above.
            unsafe { rw_deadline(l, $mode, site, (c, t), true, real_try, real_lock) }
        }
    };
}
rw_clock!(
    pthread_rwlock_clockrdlock,
    imp_rwlock_clockrdlock,
    Mode::Read,
    rwlock_tryrdlock,
    rwlock_clockrdlock
);
rw_clock!(
    pthread_rwlock_clockwrlock,
    imp_rwlock_clockwrlock,
    Mode::Write,
    rwlock_trywrlock,
    rwlock_clockwrlock
);

lock_trio! {
    pthread_rwlock_t, LockKind::RwLock, errno as_is;
    unlock pthread_rwlock_unlock(l) {
        // SAFETY: the caller's rwlock (the libc contract).
        if let Some(s) = unsafe { swap_rw::rw_existing(l) } {
            return meter::unlock_with(l as usize, || s.unlock());
        }
        // SAFETY: forwarded with the caller's arguments.
        meter::unlock_with(l as usize, || unsafe { real::rwlock_unlock(l) })
    }
    init pthread_rwlock_init(l, a: *const libc::pthread_rwlockattr_t; site) x86 "rdx", arm "x2" => imp_rwlock_init {
        // SAFETY: forwarded with the caller's arguments.
        unsafe { real::rwlock_init(l, a) }
    }
    destroy pthread_rwlock_destroy(l) -> c_int {
        // SAFETY: the caller's rwlock (the libc contract); forwarded with the caller's arguments.
        unsafe {
            match swap_rw::rw_existing(l) {
                Some(s) => s.destroy(l),
                None => real::rwlock_destroy(l),
            }
        }
    }
}

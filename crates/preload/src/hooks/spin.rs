//! The spinlock hooks: lock, trylock, unlock, init and destroy.

use super::{begin, end};
use crate::{meter, real};
use core::ffi::c_int;
use libc::pthread_spinlock_t;
use lockmeter_core::{LockKind, Mode};

trampoline!("C" fn pthread_spin_lock(_l: *mut pthread_spinlock_t) -> c_int; x86 "rsi", arm "x1" => imp_spin_lock);
unsafe extern "C" fn imp_spin_lock(l: *mut pthread_spinlock_t, site: usize) -> c_int {
    meter::lock_with(
        l as usize,
        LockKind::SpinLock,
        Mode::Exclusive,
        site,
        // SAFETY: forwarded with the caller's arguments.
        || unsafe { real::spin_trylock(l) },
        // SAFETY: as above.
        || unsafe { real::spin_lock(l) },
    )
}

trampoline!("C" fn pthread_spin_trylock(_l: *mut pthread_spinlock_t) -> c_int; x86 "rsi", arm "x1" => imp_spin_trylock);
unsafe extern "C" fn imp_spin_trylock(l: *mut pthread_spinlock_t, site: usize) -> c_int {
    // SAFETY: forwarded with the caller's arguments.
    meter::trylock_with(l as usize, LockKind::SpinLock, Mode::Exclusive, site, || unsafe {
        real::spin_trylock(l)
    })
}

/// Interposed `pthread_spin_unlock`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_spin_unlock(l: *mut pthread_spinlock_t) -> c_int {
    // SAFETY: forwarded with the caller's arguments.
    meter::unlock_with(l as usize, || unsafe { real::spin_unlock(l) })
}

trampoline!("C" fn pthread_spin_init(_l: *mut pthread_spinlock_t, _pshared: c_int) -> c_int; x86 "rdx", arm "x2" => imp_spin_init);
unsafe extern "C" fn imp_spin_init(
    l: *mut pthread_spinlock_t,
    pshared: c_int,
    site: usize,
) -> c_int {
    begin(l as usize, LockKind::SpinLock, site);
    // SAFETY: forwarded with the caller's arguments.
    unsafe { real::spin_init(l, pshared) }
}

/// Interposed `pthread_spin_destroy`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_spin_destroy(l: *mut pthread_spinlock_t) -> c_int {
    // SAFETY: forwarded with the caller's arguments.
    let r = unsafe { real::spin_destroy(l) };
    if r == 0 {
        end(l as usize);
    }
    r
}

//! The spinlock hooks: lock, trylock, unlock, init and destroy.

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

lock_trio! {
    pthread_spinlock_t, LockKind::SpinLock, errno as_is;
    unlock pthread_spin_unlock(l) {
        // SAFETY: forwarded with the caller's arguments.
        meter::unlock_with(l as usize, || unsafe { real::spin_unlock(l) })
    }
    init pthread_spin_init(l, pshared: c_int; site) x86 "rdx", arm "x2" => imp_spin_init {
        // SAFETY: forwarded with the caller's arguments.
        unsafe { real::spin_init(l, pshared) }
    }
    destroy pthread_spin_destroy(l) -> c_int {
        // SAFETY: forwarded with the caller's arguments.
        unsafe { real::spin_destroy(l) }
    }
}

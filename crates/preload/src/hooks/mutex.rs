//! The mutex hooks: lock, trylock, timed and clock locks (robust mutexes read contention from
//! the lock word), unlock, init and destroy; a swapped mutex (`run --lock`) runs on its lab lock.

use crate::{meter, real, swap};
use core::ffi::c_int;
use libc::{clockid_t, pthread_mutex_t, timespec};
use lockmeter_core::{LockKind, Mode};

/// glibc's `PTHREAD_MUTEX_ROBUST_NORMAL_NP` bit of `__kind`.
const ROBUST: c_int = 16;
/// `FUTEX_TID_MASK`: the owner's tid in a robust mutex's lock word.
const TID_MASK: u32 = 0x3fff_ffff;

/// `m`'s `__kind` (glibc layout: the `int` at offset 16 on x86_64 and aarch64).
///
/// # Safety
/// `m` points at an initialized `pthread_mutex_t`.
#[inline(always)]
unsafe fn kind(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: the caller passes an initialized mutex; __kind is at offset 16 (both 64-bit ABIs).
    unsafe { core::ptr::read_volatile((m as *const c_int).add(4)) }
}

/// Whether `m` is a robust mutex.
///
/// # Safety
/// `m` points at an initialized `pthread_mutex_t`.
#[inline(always)]
unsafe fn is_robust(m: *mut pthread_mutex_t) -> bool {
    // SAFETY: the caller's contract.
    let kind = unsafe { kind(m) };
    kind & ROBUST != 0
}

/// glibc's `PTHREAD_MUTEX_KIND_MASK_NP | PTHREAD_MUTEX_ELISION_NP`: the type its trylock and
/// unlock go by.
const UNLOCK_TYPE: c_int = 0x17f;

/// Whether glibc's unlock of `m` cannot fail: a normal (`PTHREAD_MUTEX_TIMED_NP`) or adaptive
/// mutex, not robust, priority-inheriting or -protecting, nor elided, whose unlock returns 0
/// without checking the owner (glibc `__pthread_mutex_unlock_usercnt`).
///
/// # Safety
/// `m` points at an initialized `pthread_mutex_t`.
#[inline(always)]
unsafe fn unlock_cannot_fail(m: *mut pthread_mutex_t) -> bool {
    // SAFETY: the caller's contract.
    let kind = unsafe { kind(m) } & UNLOCK_TYPE;
    // PTHREAD_MUTEX_TIMED_NP (the default, = PTHREAD_MUTEX_NORMAL) and PTHREAD_MUTEX_ADAPTIVE_NP.
    kind == 0 || kind == 3
}

/// `pthread_mutex_trylock(m)` as glibc does it for a default mutex (`PTHREAD_MUTEX_TIMED_NP`:
/// not robust, priority-inheriting or -protecting, process-shared nor elided), inline: the lock
/// word read, 0 -> 1 by compare-and-swap, then the owner's tid and one user more recorded, as
/// glibc's trylock and lock both record them (its unlock undoes them). Any other mutex, or a
/// thread with no shard yet (no tid kept), goes to glibc's. Inline, because glibc's trylock
/// dispatches on the type through a jump table and saves five registers: 5 ns of the metered
/// pair on an Intel VM, where its lock + unlock takes 7.3 and its trylock + unlock 12.3.
///
/// # Safety
/// `m` points at an initialized `pthread_mutex_t`.
#[inline(always)]
pub(crate) unsafe fn mutex_trylock(m: *mut pthread_mutex_t) -> c_int {
    let tid = crate::state::thread_tid();
    // SAFETY: the caller's contract.
    if unsafe { kind(m) } & UNLOCK_TYPE != 0 || tid == 0 {
        core::hint::cold_path();
        // SAFETY: the caller's contract.
        return unsafe { real::mutex_trylock(m) };
    }
    // SAFETY: __lock, the mutex's first int, is accessed atomically by glibc too.
    let word = unsafe { &*(m as *const core::sync::atomic::AtomicI32) };
    if word.load(core::sync::atomic::Ordering::Relaxed) != 0
        || word
            .compare_exchange(
                0,
                1,
                core::sync::atomic::Ordering::Acquire,
                core::sync::atomic::Ordering::Relaxed,
            )
            .is_err()
    {
        return libc::EBUSY;
    }
    // SAFETY: we hold the mutex now: __owner (offset 8) and __nusers (offset 12) are the
    // holder's to write, as glibc's trylock writes them.
    unsafe {
        let owner = (m as *mut c_int).add(2);
        let users = (m as *mut u32).add(3);
        core::ptr::write_volatile(users, core::ptr::read_volatile(users).wrapping_add(1));
        core::ptr::write_volatile(owner, tid as c_int);
    }
    0
}

/// A blocking mutex acquisition through `lock`: trylock first, except for robust mutexes (whose
/// trylock has side effects), where contention is read from the lock word.
///
/// # Safety
/// `m` points at an initialized `pthread_mutex_t`; `lock` is a real lock call on it.
#[inline(always)]
unsafe fn mutex_acquire(
    m: *mut pthread_mutex_t,
    site: usize,
    lock: impl FnOnce() -> c_int,
) -> c_int {
    // SAFETY: the caller's contract.
    if unsafe { is_robust(m) } {
        core::hint::cold_path();
        // SAFETY: as above.
        return unsafe { robust_acquire(m, site, lock) };
    }
    meter::lock_with(
        m as usize,
        LockKind::Mutex,
        Mode::Exclusive,
        site,
        // SAFETY: as above.
        move || unsafe { mutex_trylock(m) },
        lock,
    )
}

/// [`mutex_acquire`] of a robust mutex (out of line: the usual mutex's path stays short).
///
/// # Safety
/// As for [`mutex_acquire`], and `m` is robust.
#[inline(never)]
unsafe fn robust_acquire(
    m: *mut pthread_mutex_t,
    site: usize,
    lock: impl FnOnce() -> c_int,
) -> c_int {
    meter::lock_peek(
        m as usize,
        LockKind::Mutex,
        Mode::Exclusive,
        site,
        // SAFETY: the caller's contract.
        |me| unsafe { robust_held_by_other(m, me) },
        lock,
    )
}

/// Whether another thread than `me` holds the robust mutex `m` (its lock word holds the owner's
/// tid).
///
/// # Safety
/// `m` points at an initialized robust `pthread_mutex_t`.
#[inline(always)]
unsafe fn robust_held_by_other(m: *mut pthread_mutex_t, me: u32) -> bool {
    // SAFETY: the lock word is the first int of the mutex; a racy read is fine (it is a hint).
    let word = unsafe { core::ptr::read_volatile(m as *const u32) } & TID_MASK;
    word != 0 && word != me
}

trampoline!(hot "C" fn pthread_mutex_lock(_m: *mut pthread_mutex_t) -> c_int; x86 "rsi", arm "x1" => imp_mutex_lock);
#[unsafe(link_section = ".text.hot.lockmeter")]
unsafe extern "C" fn imp_mutex_lock(m: *mut pthread_mutex_t, site: usize) -> c_int {
    if swap::active() {
        core::hint::cold_path();
        // SAFETY: the caller's mutex (the libc contract).
        return unsafe { lock_swap_on(m, site) };
    }
    // SAFETY: forwarded with the caller's arguments (the libc contract): `m` is an
    // initialized mutex and the closure is the real lock call on it.
    let lock = move || unsafe { real::mutex_lock(m) };
    // SAFETY: as above.
    unsafe { mutex_acquire(m, site, lock) }
}

/// `pthread_mutex_lock` while swapping is on (`run --lock`; out of line, as [`unlock_swap_on`]:
/// the usual path's code stays short, a few cache lines).
///
/// # Safety
/// As for `pthread_mutex_lock`.
#[inline(never)]
unsafe fn lock_swap_on(m: *mut pthread_mutex_t, site: usize) -> c_int {
    // SAFETY: the caller's mutex (the libc contract).
    if let Some(s) = unsafe { swap::for_lock(m, site) } {
        return swapped_lock(m, site, s);
    }
    // SAFETY: as in `imp_mutex_lock`.
    let lock = move || unsafe { real::mutex_lock(m) };
    // SAFETY: as above.
    unsafe { mutex_acquire(m, site, lock) }
}

trampoline!("C" fn pthread_mutex_trylock(_m: *mut pthread_mutex_t) -> c_int; x86 "rsi", arm "x1" => imp_mutex_trylock);
unsafe extern "C" fn imp_mutex_trylock(m: *mut pthread_mutex_t, site: usize) -> c_int {
    // SAFETY: the caller's mutex (the libc contract).
    if let Some(s) = unsafe { swap::for_lock(m, site) } {
        return meter::trylock_with(m as usize, LockKind::Mutex, Mode::Exclusive, site, || {
            s.try_lock()
        });
    }
    // SAFETY: forwarded with the caller's arguments.
    meter::trylock_with(m as usize, LockKind::Mutex, Mode::Exclusive, site, move || unsafe {
        real::mutex_trylock(m)
    })
}

trampoline!("C" fn pthread_mutex_timedlock(_m: *mut pthread_mutex_t, _t: *const timespec) -> c_int; x86 "rdx", arm "x2" => imp_mutex_timedlock);
unsafe extern "C" fn imp_mutex_timedlock(
    m: *mut pthread_mutex_t,
    t: *const timespec,
    site: usize,
) -> c_int {
    // SAFETY: the caller's mutex (the libc contract).
    if let Some(s) = unsafe { swap::for_lock(m, site) } {
        // SAFETY: `t` is the caller's deadline.
        return swapped_acquire(m, site, s, || unsafe { s.timed_lock(libc::CLOCK_REALTIME, t) });
    }
    // SAFETY: forwarded with the caller's arguments (the libc contract): `m` is an
    // initialized mutex and the closure is the real lock call on it.
    let lock = move || unsafe { real::mutex_timedlock(m, t) };
    // SAFETY: as above.
    unsafe { mutex_acquire(m, site, lock) }
}

trampoline!("C" fn pthread_mutex_clocklock(_m: *mut pthread_mutex_t, _c: clockid_t, _t: *const timespec) -> c_int; x86 "rcx", arm "x3" => imp_mutex_clocklock);
unsafe extern "C" fn imp_mutex_clocklock(
    m: *mut pthread_mutex_t,
    c: clockid_t,
    t: *const timespec,
    site: usize,
) -> c_int {
    // SAFETY: the caller's mutex (the libc contract).
    if let Some(s) = unsafe { swap::for_lock(m, site) } {
        if c != libc::CLOCK_REALTIME && c != libc::CLOCK_MONOTONIC {
            return libc::EINVAL; // glibc checks the clock first
        }
        // SAFETY: `t` is the caller's deadline.
        return swapped_acquire(m, site, s, || unsafe { s.timed_lock(c, t) });
    }
    // SAFETY: forwarded with the caller's arguments (the libc contract): `m` is an
    // initialized mutex and the closure is the real lock call on it.
    let lock = move || unsafe { real::mutex_clocklock(m, c, t) };
    // SAFETY: as above.
    unsafe { mutex_acquire(m, site, lock) }
}

lock_trio! {
    pthread_mutex_t, LockKind::Mutex, errno as_is;
    unlock #[unsafe(link_section = ".text.hot.lockmeter")] pthread_mutex_unlock(m) {
        if swap::active() {
            // SAFETY: the caller's mutex (the libc contract).
            return unsafe { unlock_swap_on(m) };
        }
        // SAFETY: the caller's mutex (the libc contract).
        unsafe { unlock_glibc(m) }
    }
    init pthread_mutex_init(m, a: *const libc::pthread_mutexattr_t; site) x86 "rdx", arm "x2" => imp_mutex_init {
        // SAFETY: forwarded with the caller's arguments.
        let r = unsafe { real::mutex_init(m, a) };
        if r == 0 {
            // SAFETY: `m` was just initialized.
            unsafe { swap::at_init(m, site) };
        }
        r
    }
    destroy pthread_mutex_destroy(m) -> c_int {
        // SAFETY: the caller's mutex (the libc contract); forwarded with the caller's arguments.
        unsafe {
            match swap::existing(m) {
                Some(s) => s.destroy(m),
                None => real::mutex_destroy(m),
            }
        }
    }
}

/// `pthread_mutex_lock` of swapped mutex `m` (out of line: the usual mutex's path stays short).
#[inline(never)]
fn swapped_lock(m: *mut pthread_mutex_t, site: usize, s: swap::Swapped) -> c_int {
    swapped_acquire(m, site, s, || s.lock())
}

/// `pthread_mutex_unlock` of a mutex that is glibc's (not swapped). Its usual path (an untimed
/// hold of a mutex whose unlock cannot fail) calls nothing but the real unlock, as its last call:
/// the hook then saves no register.
///
/// # Safety
/// `m` is the caller's mutex (the libc contract).
#[inline(always)]
unsafe fn unlock_glibc(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: the caller's mutex (the libc contract).
    let infallible = unsafe { unlock_cannot_fail(m) };
    // SAFETY: forwarded with the caller's arguments.
    let unlock = move || unsafe { real::mutex_unlock(m) };
    match meter::unlock_mutex_with(m as usize, infallible, unlock) {
        Some(r) => r,
        // SAFETY: as above; the hook's last call.
        None => unsafe { real::mutex_unlock(m) },
    }
}

/// `pthread_mutex_unlock` while swapping is on (`run --lock`; out of line, as
/// [`swapped_lock`]).
///
/// # Safety
/// As for [`unlock_glibc`].
#[inline(never)]
unsafe fn unlock_swap_on(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: the caller's mutex (the libc contract).
    if let Some(s) = unsafe { swap::existing(m) } {
        return swapped_unlock(m, s);
    }
    // SAFETY: as above.
    unsafe { unlock_glibc(m) }
}

/// `pthread_mutex_unlock` of swapped mutex `m` (out of line, as [`swapped_lock`]).
#[inline(never)]
fn swapped_unlock(m: *mut pthread_mutex_t, s: swap::Swapped) -> c_int {
    meter::unlock_with(m as usize, || s.unlock())
}

/// A blocking acquisition of swapped mutex `m`: the lab lock's trylock, then `lock`.
#[inline(always)]
pub(super) fn swapped_acquire(
    m: *mut pthread_mutex_t,
    site: usize,
    s: swap::Swapped,
    lock: impl FnOnce() -> c_int,
) -> c_int {
    meter::lock_with(m as usize, LockKind::Mutex, Mode::Exclusive, site, || s.try_lock(), lock)
}

//! The exported functions: exactly the libc names, nothing else.
//!
//! Each lock function that needs its call site is a naked trampoline that passes its own return
//! address (the caller's call site) as one extra argument and tail-jumps to the implementation:
//! exact, free, and independent of frame pointers. The implementations only forward to
//! [`crate::meter`], which returns exactly what the real function returned and leaves `errno` as
//! the real function left it.

use crate::meter;
use crate::real;
use crate::state::{enter, leave};
use crate::swap;
use crate::swap_cond;
use crate::swap_rw;
use core::ffi::{c_char, c_int};
use libc::{
    clockid_t, pthread_cond_t, pthread_mutex_t, pthread_rwlock_t, pthread_spinlock_t, sem_t,
    timespec,
};
use lockmeter_core::{LockKind, Mode, clock};

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("lockmeter-preload supports x86_64 and aarch64");

/// A naked trampoline: `$name(args)` -> `$imp(args, return_address)`.
macro_rules! trampoline {
    ($abi:literal fn $name:ident($($a:ident: $t:ty),*) -> $r:ty; x86 $x86:literal, arm $arm:literal => $imp:ident) => {
        #[doc = concat!("Interposed `", stringify!($name), "`.")]
        ///
        /// # Safety
        /// The contract of the libc function of the same name.
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        pub unsafe extern $abi fn $name($($a: $t),*) -> $r {
            #[cfg(target_arch = "x86_64")]
            core::arch::naked_asm!(concat!("mov ", $x86, ", [rsp]"), "jmp {}", sym $imp);
            #[cfg(target_arch = "aarch64")]
            core::arch::naked_asm!(concat!("mov ", $arm, ", x30"), "b {}", sym $imp);
        }
    };
}

// ---- mutexes ----

/// glibc's `PTHREAD_MUTEX_ROBUST_NORMAL_NP` bit of `__kind`.
const ROBUST: c_int = 16;
/// `FUTEX_TID_MASK`: the owner's tid in a robust mutex's lock word.
const TID_MASK: u32 = 0x3fff_ffff;

/// Whether `m` is a robust mutex (glibc layout: `__kind` is the `int` at offset 16 on x86_64 and
/// aarch64).
///
/// # Safety
/// `m` points at an initialized `pthread_mutex_t`.
#[inline(always)]
unsafe fn is_robust(m: *mut pthread_mutex_t) -> bool {
    // SAFETY: the caller passes an initialized mutex; __kind is at offset 16 (both 64-bit ABIs).
    let kind = unsafe { core::ptr::read_volatile((m as *const c_int).add(4)) };
    kind & ROBUST != 0
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
        return meter::lock_peek(
            m as usize,
            LockKind::Mutex,
            Mode::Exclusive,
            site,
            // SAFETY: as above.
            |me| unsafe { robust_held_by_other(m, me) },
            lock,
        );
    }
    meter::lock_with(
        m as usize,
        LockKind::Mutex,
        Mode::Exclusive,
        site,
        // SAFETY: as above.
        || unsafe { real::mutex_trylock(m) },
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

trampoline!("C" fn pthread_mutex_lock(_m: *mut pthread_mutex_t) -> c_int; x86 "rsi", arm "x1" => imp_mutex_lock);
unsafe extern "C" fn imp_mutex_lock(m: *mut pthread_mutex_t, site: usize) -> c_int {
    // SAFETY: the caller's mutex (the libc contract).
    if let Some(s) = unsafe { swap::for_lock(m, site) } {
        return swapped_acquire(m, site, s, || s.lock());
    }
    // SAFETY: forwarded with the caller's arguments (the libc contract): `m` is an
    // initialized mutex and the closure is the real lock call on it.
    let lock = || unsafe { real::mutex_lock(m) };
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
    meter::trylock_with(m as usize, LockKind::Mutex, Mode::Exclusive, site, || unsafe {
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
    let lock = || unsafe { real::mutex_timedlock(m, t) };
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
    let lock = || unsafe { real::mutex_clocklock(m, c, t) };
    // SAFETY: as above.
    unsafe { mutex_acquire(m, site, lock) }
}

/// Interposed `pthread_mutex_unlock`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_mutex_unlock(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: the caller's mutex (the libc contract).
    if let Some(s) = unsafe { swap::existing(m) } {
        return meter::unlock_with(m as usize, || s.unlock());
    }
    // SAFETY: forwarded with the caller's arguments.
    meter::unlock_with(m as usize, || unsafe { real::mutex_unlock(m) })
}

// `pthread_mutex_init`: a new lock identity at this address, of the class of this call site.
trampoline!("C" fn pthread_mutex_init(_m: *mut pthread_mutex_t, _a: *const libc::pthread_mutexattr_t) -> c_int; x86 "rdx", arm "x2" => imp_mutex_init);
unsafe extern "C" fn imp_mutex_init(
    m: *mut pthread_mutex_t,
    a: *const libc::pthread_mutexattr_t,
    site: usize,
) -> c_int {
    begin(m as usize, LockKind::Mutex, site);
    // SAFETY: forwarded with the caller's arguments.
    let r = unsafe { real::mutex_init(m, a) };
    if r == 0 {
        // SAFETY: `m` was just initialized.
        unsafe { swap::at_init(m, site) };
    }
    r
}

/// Interposed `pthread_mutex_destroy`: ends this lock identity.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_mutex_destroy(m: *mut pthread_mutex_t) -> c_int {
    // SAFETY: the caller's mutex (the libc contract); forwarded with the caller's arguments.
    let r = unsafe {
        match swap::existing(m) {
            Some(s) => s.destroy(m),
            None => real::mutex_destroy(m),
        }
    };
    if r == 0 {
        end(m as usize);
    }
    r
}

/// A blocking acquisition of swapped mutex `m`: the lab lock's trylock, then `lock`.
#[inline(always)]
fn swapped_acquire(
    m: *mut pthread_mutex_t,
    site: usize,
    s: swap::Swapped,
    lock: impl FnOnce() -> c_int,
) -> c_int {
    meter::lock_with(m as usize, LockKind::Mutex, Mode::Exclusive, site, || s.try_lock(), lock)
}

/// A lock is initialized at `addr` by a call at `site`: a new identity, of that site's class.
/// Bounded and lock-free: a class table probe (one CAS for a new class) and a registry lookup.
fn begin(addr: usize, kind: LockKind, site: usize) {
    if let Some(cx) = enter() {
        if let Some(r) = crate::state::registry() {
            let class = crate::classes::CLASSES.intern(
                site as u64,
                kind,
                lockmeter_core::registry::ClassOrigin::Init,
                addr as u64,
            );
            crate::classes::CLASSES.ended(r.begin(addr as u64, kind, class));
        }
        leave(cx);
    }
}

/// The lock at `addr` was destroyed: its identity ends (its class counts one more lifetime) and
/// its registry slot is freed for another lock. The records of the identity, in any thread's
/// table, are folded into its class by their threads or when the profile is written.
fn end(addr: usize) {
    if let Some(cx) = enter() {
        if let Some(r) = crate::state::registry() {
            crate::classes::CLASSES.ended(r.retire(addr as u64));
        }
        leave(cx);
    }
}

// ---- rwlocks ----

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

macro_rules! rw_timed {
    ($name:ident, $imp:ident, $mode:expr, $try:ident, $lock:ident) => {
        trampoline!("C" fn $name(_l: *mut pthread_rwlock_t, _t: *const timespec) -> c_int; x86 "rdx", arm "x2" => $imp);
        unsafe extern "C" fn $imp(l: *mut pthread_rwlock_t, t: *const timespec, site: usize) -> c_int {
            // SAFETY: the caller's rwlock (the libc contract).
            if let Some(s) = unsafe { swap_rw::rw_for_lock(l) } {
                let w = matches!($mode, Mode::Write);
                // SAFETY: `t` is the caller's deadline.
                let timed = || unsafe { s.timed_lock(w, libc::CLOCK_REALTIME, t) };
                return meter::lock_with(l as usize, LockKind::RwLock, $mode, site, || s.try_lock(w), timed);
            }
            meter::lock_with(
                l as usize,
                LockKind::RwLock,
                $mode,
                site,
                // SAFETY: forwarded with the caller's arguments.
                || unsafe { real::$try(l) },
                // SAFETY: as above.
                || unsafe { real::$lock(l, t) },
            )
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
            // SAFETY: the caller's rwlock (the libc contract).
            if let Some(s) = unsafe { swap_rw::rw_for_lock(l) } {
                if c != libc::CLOCK_REALTIME && c != libc::CLOCK_MONOTONIC {
                    return libc::EINVAL; // glibc checks the clock first
                }
                let w = matches!($mode, Mode::Write);
                // SAFETY: `t` is the caller's deadline.
                let timed = || unsafe { s.timed_lock(w, c, t) };
                return meter::lock_with(l as usize, LockKind::RwLock, $mode, site, || s.try_lock(w), timed);
            }
            meter::lock_with(
                l as usize,
                LockKind::RwLock,
                $mode,
                site,
                // SAFETY: forwarded with the caller's arguments.
                || unsafe { real::$try(l) },
                // SAFETY: as above.
                || unsafe { real::$lock(l, c, t) },
            )
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

/// Interposed `pthread_rwlock_unlock`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_unlock(l: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: the caller's rwlock (the libc contract).
    if let Some(s) = unsafe { swap_rw::rw_existing(l) } {
        return meter::unlock_with(l as usize, || s.unlock());
    }
    // SAFETY: forwarded with the caller's arguments.
    meter::unlock_with(l as usize, || unsafe { real::rwlock_unlock(l) })
}

trampoline!("C" fn pthread_rwlock_init(_l: *mut pthread_rwlock_t, _a: *const libc::pthread_rwlockattr_t) -> c_int; x86 "rdx", arm "x2" => imp_rwlock_init);
unsafe extern "C" fn imp_rwlock_init(
    l: *mut pthread_rwlock_t,
    a: *const libc::pthread_rwlockattr_t,
    site: usize,
) -> c_int {
    begin(l as usize, LockKind::RwLock, site);
    // SAFETY: forwarded with the caller's arguments.
    unsafe { real::rwlock_init(l, a) }
}

/// Interposed `pthread_rwlock_destroy`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pthread_rwlock_destroy(l: *mut pthread_rwlock_t) -> c_int {
    // SAFETY: the caller's rwlock (the libc contract); forwarded with the caller's arguments.
    let r = unsafe {
        match swap_rw::rw_existing(l) {
            Some(s) => s.destroy(l),
            None => real::rwlock_destroy(l),
        }
    };
    if r == 0 {
        end(l as usize);
    }
    r
}

// ---- spinlocks ----

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

// ---- condition variables ----
//
// These are cancellation points: glibc cancels by forced unwinding, which passes through these
// frames. Nothing with a destructor is alive across the real call, and no bookkeeping state is
// held (the busy flag is clear), so an unwind leaves everything consistent.

/// The mutex is released at entry and re-acquired at return; the time in between is condvar wait.
#[inline(always)]
fn cond_common(m: usize, site: usize, wait: impl FnOnce() -> c_int) -> c_int {
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

// ---- POSIX semaphores ----
//
// `sem_wait` and `sem_timedwait` act on a pending cancellation request before anything else
// (glibc calls `__pthread_testcancel` first, even when a token is free), so their hooks do the
// same before their `sem_trywait` could take a token. The waits are cancellation points: their
// trampolines and implementations are "C-unwind", and nothing with a destructor is alive across
// the real call (see `meter::sem_wait_with`). Arguments that glibc refuses before trying the
// semaphore (a bad `tv_nsec`, an unsupported clock) go straight to the real call.

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

/// Interposed `sem_post`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sem_post(s: *mut sem_t) -> c_int {
    // SAFETY: forwarded with the caller's arguments.
    meter::sem_post_with(s as usize, || unsafe { real::sem_post(s) })
}

trampoline!("C" fn sem_init(_s: *mut sem_t, _pshared: c_int, _value: core::ffi::c_uint) -> c_int; x86 "rcx", arm "x3" => imp_sem_init);
unsafe extern "C" fn imp_sem_init(
    s: *mut sem_t,
    pshared: c_int,
    value: core::ffi::c_uint,
    site: usize,
) -> c_int {
    let e = crate::sys::errno();
    begin(s as usize, LockKind::Semaphore, site);
    crate::sys::set_errno(e);
    // SAFETY: forwarded with the caller's arguments.
    unsafe { real::sem_init(s, pshared, value) }
}

/// Interposed `sem_destroy`: ends this lock identity.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn sem_destroy(s: *mut sem_t) -> c_int {
    // SAFETY: forwarded with the caller's arguments.
    let r = unsafe { real::sem_destroy(s) };
    if r == 0 {
        let e = crate::sys::errno();
        end(s as usize);
        crate::sys::set_errno(e);
    }
    r
}

// ---- C11 <threads.h> mutexes and condition variables ----
//
// glibc's `mtx_lock` and friends call its internal `__pthread_mutex_lock` (and so on) directly,
// not through the PLT, so the pthread hooks never see them: they get hooks of their own. Each
// forwards to the real C11 function; its `thrd_*` result is carried through the meter as an
// errno-like code (`thrd_busy` as EBUSY, `thrd_timedout` as ETIMEDOUT, anything else as a
// negative code the meter treats as a failure) and turned back, so the caller gets exactly what
// the real function returned. `mtx_t` and `cnd_t` are opaque here.

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
    errno_to_thrd(meter::lock_with(
        m as usize,
        LockKind::Mutex,
        Mode::Exclusive,
        site,
        // SAFETY: forwarded with the caller's arguments (an initialized `mtx_t`).
        || thrd_to_errno(unsafe { real::mtx_trylock(m) }),
        // SAFETY: as above.
        || thrd_to_errno(unsafe { real::mtx_lock(m) }),
    ))
}

trampoline!("C" fn mtx_timedlock(_m: *mut MtxT, _t: *const timespec) -> c_int; x86 "rdx", arm "x2" => imp_mtx_timedlock);
unsafe extern "C" fn imp_mtx_timedlock(m: *mut MtxT, t: *const timespec, site: usize) -> c_int {
    errno_to_thrd(meter::lock_with(
        m as usize,
        LockKind::Mutex,
        Mode::Exclusive,
        site,
        // SAFETY: forwarded with the caller's arguments.
        || thrd_to_errno(unsafe { real::mtx_trylock(m) }),
        // SAFETY: as above.
        || thrd_to_errno(unsafe { real::mtx_timedlock(m, t) }),
    ))
}

trampoline!("C" fn mtx_trylock(_m: *mut MtxT) -> c_int; x86 "rsi", arm "x1" => imp_mtx_trylock);
unsafe extern "C" fn imp_mtx_trylock(m: *mut MtxT, site: usize) -> c_int {
    errno_to_thrd(meter::trylock_with(m as usize, LockKind::Mutex, Mode::Exclusive, site, || {
        // SAFETY: forwarded with the caller's arguments.
        thrd_to_errno(unsafe { real::mtx_trylock(m) })
    }))
}

/// Interposed `mtx_unlock`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mtx_unlock(m: *mut MtxT) -> c_int {
    // SAFETY: forwarded with the caller's arguments.
    errno_to_thrd(meter::unlock_with(m as usize, || thrd_to_errno(unsafe { real::mtx_unlock(m) })))
}

// `mtx_init`: a new lock identity at this address, of the class of this call site.
trampoline!("C" fn mtx_init(_m: *mut MtxT, _k: c_int) -> c_int; x86 "rdx", arm "x2" => imp_mtx_init);
unsafe extern "C" fn imp_mtx_init(m: *mut MtxT, kind: c_int, site: usize) -> c_int {
    let e = crate::sys::errno();
    begin(m as usize, LockKind::Mutex, site);
    crate::sys::set_errno(e);
    // SAFETY: forwarded with the caller's arguments.
    unsafe { real::mtx_init(m, kind) }
}

/// Interposed `mtx_destroy`: ends this lock identity.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mtx_destroy(m: *mut MtxT) {
    // SAFETY: forwarded with the caller's arguments.
    unsafe { real::mtx_destroy(m) };
    let e = crate::sys::errno();
    end(m as usize);
    crate::sys::set_errno(e);
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

// ---- process exits and image changes: write the profile first ----

/// Interposed `_exit`: writes the profile, then exits.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _exit(status: c_int) -> ! {
    crate::dump::write_profile(crate::dump::End::UnderscoreExit);
    // SAFETY: forwarded.
    unsafe { real::exit_(status) };
    // SAFETY: _exit does not return; if the real one somehow did, end the process by syscall.
    unsafe { libc::syscall(libc::SYS_exit_group, status) };
    #[allow(clippy::empty_loop)]
    loop {}
}

/// Interposed `_Exit`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _Exit(status: c_int) -> ! {
    crate::dump::write_profile(crate::dump::End::UnderscoreExit);
    // SAFETY: forwarded.
    unsafe { real::exit_upper(status) };
    // SAFETY: as in `_exit`.
    unsafe { libc::syscall(libc::SYS_exit_group, status) };
    #[allow(clippy::empty_loop)]
    loop {}
}

/// Runs an exec call with the profile written first; if the exec fails, the written profile is
/// withdrawn and metering goes on, with `errno` as the exec left it. `f` gets the environment to
/// pass: `envp` plus `LOCKMETER_IMAGE_SEQ`, so that the new image knows its place in the pid.
fn exec_common(envp: *const *const c_char, f: impl FnOnce(*const *const c_char) -> c_int) -> c_int {
    let token = crate::dump::before_exec();
    let env = crate::dump::env_with_image_seq(envp);
    let r = f(env);
    let e = crate::sys::errno();
    crate::dump::exec_failed(token);
    crate::sys::set_errno(e);
    r
}

unsafe extern "C" {
    static environ: *const *const c_char;
}

/// The process environment.
fn current_env() -> *const *const c_char {
    // SAFETY: reading the libc global `environ` (a pointer), as exec* itself does.
    unsafe { environ }
}

/// Interposed `execve`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execve(
    p: *const c_char,
    a: *const *const c_char,
    e: *const *const c_char,
) -> c_int {
    // SAFETY: forwarded with the caller's arguments.
    exec_common(e, |e| unsafe { real::execve(p, a, e) })
}

/// Interposed `execv`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execv(p: *const c_char, a: *const *const c_char) -> c_int {
    // SAFETY: forwarded with the caller's arguments; execv is execve with `environ`.
    exec_common(current_env(), |e| unsafe { real::execve(p, a, e) })
}

/// Interposed `execvp`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execvp(p: *const c_char, a: *const *const c_char) -> c_int {
    // SAFETY: forwarded with the caller's arguments; execvp is execvpe with `environ`.
    exec_common(current_env(), |e| unsafe { real::execvpe(p, a, e) })
}

/// Interposed `execvpe`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execvpe(
    p: *const c_char,
    a: *const *const c_char,
    e: *const *const c_char,
) -> c_int {
    // SAFETY: forwarded with the caller's arguments.
    exec_common(e, |e| unsafe { real::execvpe(p, a, e) })
}

/// Interposed `fexecve`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fexecve(
    fd: c_int,
    a: *const *const c_char,
    e: *const *const c_char,
) -> c_int {
    // SAFETY: forwarded with the caller's arguments.
    exec_common(e, |e| unsafe { real::fexecve(fd, a, e) })
}

/// Interposed `execveat`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execveat(
    fd: c_int,
    p: *const c_char,
    a: *const *const c_char,
    e: *const *const c_char,
    f: c_int,
) -> c_int {
    // SAFETY: forwarded with the caller's arguments.
    exec_common(e, |e| unsafe { real::execveat(fd, p, a, e, f) })
}

// ---- execl, execlp, execle: variadic, so a trampoline spills the argument registers ----
//
// On entry: rdi = path, rsi = arg0, rdx/rcx/r8/r9 = the next arguments, [rsp] = return address,
// [rsp+8..] = the remaining arguments. The trampoline pushes the six argument registers so that
// they sit right below the return address, passes a pointer to them, and returns what the Rust
// side returns (it only returns when the exec failed).

#[cfg(target_arch = "x86_64")]
macro_rules! execl_trampoline {
    ($name:ident => $imp:ident) => {
        #[doc = concat!("Interposed `", stringify!($name), "` (variadic).")]
        ///
        /// # Safety
        /// The libc contract: a NULL-terminated list of `char *` arguments.
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name() -> c_int {
            core::arch::naked_asm!(
                "push r9",
                "push r8",
                "push rcx",
                "push rdx",
                "push rsi",
                "push rdi",
                "mov rdi, rsp",
                "sub rsp, 8",
                "call {}",
                "add rsp, 56",
                "ret",
                sym $imp
            );
        }
    };
}

#[cfg(target_arch = "x86_64")]
execl_trampoline!(execl => imp_execl);
#[cfg(target_arch = "x86_64")]
execl_trampoline!(execlp => imp_execlp);
#[cfg(target_arch = "x86_64")]
execl_trampoline!(execle => imp_execle);

/// Most arguments an `execl*` call may pass (the kernel's own limit is far above any real use).
#[cfg(target_arch = "x86_64")]
const EXECL_MAX_ARGS: usize = 4096;

/// The variadic arguments saved by the trampoline: slots 0..6 are the registers (path first),
/// slot 6 the return address, slots 7.. the arguments passed on the stack.
#[cfg(target_arch = "x86_64")]
struct VaArgs(*const usize);

#[cfg(target_arch = "x86_64")]
impl VaArgs {
    /// Argument `i` (0 = path).
    ///
    /// # Safety
    /// `i` must not go past the argument list the caller passed.
    unsafe fn get(&self, i: usize) -> usize {
        let slot = if i < 6 { i } else { i + 1 };
        // SAFETY: the trampoline saved six registers below the return address, and the caller's
        // stack arguments follow it; the caller guarantees `i` is within the list.
        unsafe { *self.0.add(slot) }
    }
}

/// Collects `arg0, arg1, ..., NULL` into `argv`; returns the index after the NULL, or None when
/// the list is longer than `argv`.
///
/// # Safety
/// `va` must be the trampoline's save area of an `execl*` call.
#[cfg(target_arch = "x86_64")]
unsafe fn collect_args(
    va: &VaArgs,
    argv: &mut [*const c_char; EXECL_MAX_ARGS + 1],
) -> Option<usize> {
    for (n, slot) in argv.iter_mut().enumerate() {
        // SAFETY: arguments are read up to and including the terminating NULL.
        let a = unsafe { va.get(n + 1) };
        *slot = a as *const c_char;
        if a == 0 {
            return Some(n + 2);
        }
    }
    None
}

#[cfg(target_arch = "x86_64")]
fn e2big() -> c_int {
    crate::sys::set_errno(libc::E2BIG);
    -1
}

#[cfg(target_arch = "x86_64")]
unsafe extern "C" fn imp_execl(regs: *const usize) -> c_int {
    let va = VaArgs(regs);
    let mut argv = [core::ptr::null(); EXECL_MAX_ARGS + 1];
    // SAFETY: `regs` is the trampoline's save area.
    if unsafe { collect_args(&va, &mut argv) }.is_none() {
        return e2big();
    }
    // SAFETY: slot 0 is the path argument.
    let path = unsafe { va.get(0) } as *const c_char;
    // SAFETY: a NULL-terminated argument vector built from the caller's arguments.
    exec_common(current_env(), |e| unsafe { real::execve(path, argv.as_ptr(), e) })
}

#[cfg(target_arch = "x86_64")]
unsafe extern "C" fn imp_execlp(regs: *const usize) -> c_int {
    let va = VaArgs(regs);
    let mut argv = [core::ptr::null(); EXECL_MAX_ARGS + 1];
    // SAFETY: `regs` is the trampoline's save area.
    if unsafe { collect_args(&va, &mut argv) }.is_none() {
        return e2big();
    }
    // SAFETY: slot 0 is the file argument.
    let file = unsafe { va.get(0) } as *const c_char;
    // SAFETY: as in `imp_execl`.
    exec_common(current_env(), |e| unsafe { real::execvpe(file, argv.as_ptr(), e) })
}

#[cfg(target_arch = "x86_64")]
unsafe extern "C" fn imp_execle(regs: *const usize) -> c_int {
    let va = VaArgs(regs);
    let mut argv = [core::ptr::null(); EXECL_MAX_ARGS + 1];
    // SAFETY: `regs` is the trampoline's save area.
    let Some(after) = (unsafe { collect_args(&va, &mut argv) }) else { return e2big() };
    // SAFETY: execle passes envp right after the NULL that ends the arguments.
    let envp = unsafe { va.get(after) } as *const *const c_char;
    // SAFETY: slot 0 is the path argument.
    let path = unsafe { va.get(0) } as *const c_char;
    // SAFETY: as in `imp_execl`.
    exec_common(envp, |e| unsafe { real::execve(path, argv.as_ptr(), e) })
}

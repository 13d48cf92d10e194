//! The real pthread functions, resolved with `dlsym(RTLD_NEXT)` (`dlvsym` for the condvar family,
//! which exists twice on x86_64: `@GLIBC_2.2.5` compat and `@@GLIBC_2.3.2`).
//!
//! The C11 `mtx_*` and `cnd_*` functions exist twice as well (`@GLIBC_2.28`, from libpthread, and
//! `@@GLIBC_2.34`), at one address: the default version is the real function for either.
//!
//! The semaphore functions exist twice too, since glibc 2.34 moved them from libpthread into libc:
//! `sem_*@GLIBC_2.2.5` (aarch64: `@GLIBC_2.17`; `sem_clockwait@GLIBC_2.30`), which programs built
//! against an older glibc bind to, and `sem_*@@GLIBC_2.34`. On x86_64 and aarch64 both versions
//! are the same code (`objdump -T libc.so.6` shows one address for both; the old, different
//! `sem_*@GLIBC_2.0` implementation exists only on 32-bit targets), so the default version that
//! `dlsym` finds is the real function for a caller of either. The hooks are unversioned
//! definitions, which the dynamic linker binds to references of any version.
//!
//! Everything is resolved in the constructor. A hook that runs earlier resolves its function
//! inline; if that happens on a thread that is already inside `dlsym` (dlsym may allocate, and an
//! allocator may lock a mutex), the mutex and rwlock functions fall back to glibc's exported
//! `__pthread_*` aliases, which need no resolution.

use core::cell::Cell;
use core::ffi::{c_char, c_int, c_void};
use core::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use libc::{
    clockid_t, pthread_cond_t, pthread_mutex_t, pthread_rwlock_t, pthread_spinlock_t, sem_t,
    timespec,
};

#[cfg(target_arch = "x86_64")]
const COND_VERSION: &[u8] = b"GLIBC_2.3.2\0";
#[cfg(target_arch = "aarch64")]
const COND_VERSION: &[u8] = b"GLIBC_2.17\0";
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const COND_VERSION: &[u8] = b"\0";

thread_local! {
    static RESOLVING: Cell<bool> = const { Cell::new(false) };
}

unsafe extern "C" {
    #[link_name = "__pthread_mutex_lock"]
    fn fallback_mutex_lock(m: *mut pthread_mutex_t) -> c_int;
    #[link_name = "__pthread_mutex_trylock"]
    fn fallback_mutex_trylock(m: *mut pthread_mutex_t) -> c_int;
    #[link_name = "__pthread_mutex_unlock"]
    fn fallback_mutex_unlock(m: *mut pthread_mutex_t) -> c_int;
    #[link_name = "__pthread_mutex_init"]
    fn fallback_mutex_init(m: *mut pthread_mutex_t, a: *const libc::pthread_mutexattr_t) -> c_int;
    #[link_name = "__pthread_mutex_destroy"]
    fn fallback_mutex_destroy(m: *mut pthread_mutex_t) -> c_int;
    #[link_name = "__pthread_rwlock_rdlock"]
    fn fallback_rwlock_rdlock(l: *mut pthread_rwlock_t) -> c_int;
    #[link_name = "__pthread_rwlock_wrlock"]
    fn fallback_rwlock_wrlock(l: *mut pthread_rwlock_t) -> c_int;
    #[link_name = "__pthread_rwlock_tryrdlock"]
    fn fallback_rwlock_tryrdlock(l: *mut pthread_rwlock_t) -> c_int;
    #[link_name = "__pthread_rwlock_trywrlock"]
    fn fallback_rwlock_trywrlock(l: *mut pthread_rwlock_t) -> c_int;
    #[link_name = "__pthread_rwlock_unlock"]
    fn fallback_rwlock_unlock(l: *mut pthread_rwlock_t) -> c_int;
    #[link_name = "__pthread_rwlock_init"]
    fn fallback_rwlock_init(
        l: *mut pthread_rwlock_t,
        a: *const libc::pthread_rwlockattr_t,
    ) -> c_int;
    #[link_name = "__pthread_rwlock_destroy"]
    fn fallback_rwlock_destroy(l: *mut pthread_rwlock_t) -> c_int;
}

/// Looks `name` up in the objects after this one.
fn lookup(name: &[u8], version: Option<&[u8]>) -> usize {
    let was = RESOLVING.try_with(|r| r.replace(true)).unwrap_or(true);
    let mut p = match version {
        // SAFETY: `name` and `version` are NUL-terminated literals; dlvsym only reads them.
        Some(v) if v.len() > 1 => unsafe {
            libc::dlvsym(
                libc::RTLD_NEXT,
                name.as_ptr() as *const c_char,
                v.as_ptr() as *const c_char,
            )
        },
        _ => core::ptr::null_mut(),
    };
    if p.is_null() {
        // SAFETY: as above.
        p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr() as *const c_char) };
    }
    let _ = RESOLVING.try_with(|r| r.set(was));
    p as usize
}

fn resolving() -> bool {
    RESOLVING.try_with(|r| r.get()).unwrap_or(true)
}

/// The type of a real function: `extern "C"`, or the ABI given (`"C-unwind"` for cancellation
/// points, whose forced unwinding must be allowed to pass through the hook).
macro_rules! real_sig {
    (; ($($t:ty),*) -> $r:ty) => { unsafe extern "C" fn($($t),*) -> $r };
    ($abi:literal; ($($t:ty),*) -> $r:ty) => { unsafe extern $abi fn($($t),*) -> $r };
}

/// Where a real function's address is kept: its own word, or (`in FIELD`) the field of
/// `state::HOT` of that name (the uncontended pair's functions, in the line of the other words
/// it reads).
macro_rules! real_slot {
    ($fn_name:ident) => {
        pub(super) static $fn_name: AtomicUsize = AtomicUsize::new(0);
    };
    ($fn_name:ident $hot:ident) => {
        pub(super) static $fn_name: &AtomicUsize = &crate::state::HOT.$hot;
    };
}

macro_rules! reals {
    ($( $(#[$m:meta])* $fn_name:ident = $sym:literal $(@ $ver:ident)? $(| $fb:ident)?
        $(in $hot:ident)? : $(extern $abi:literal)? fn($($a:ident : $t:ty),*) -> $r:ty; )*) => {
        #[allow(non_upper_case_globals)]
        mod slot {
            use super::*;
            $( real_slot!($fn_name $($hot)?); )*
        }

        /// Resolves every real function (from the constructor).
        pub(crate) fn resolve_all() {
            $( {
                #[allow(unused_mut, unused_assignments)]
                let mut ver: Option<&[u8]> = None;
                $( ver = Some($ver); )?
                let p = lookup(concat!($sym, "\0").as_bytes(), ver);
                if p != 0 { slot::$fn_name.store(p, Relaxed); }
            } )*
        }

        $(
            $(#[$m])*
            /// Calls the real function.
            ///
            /// # Safety
            /// The same contract as the libc function of that name.
            #[inline(always)]
            #[allow(dead_code)]
            pub(crate) unsafe fn $fn_name($($a: $t),*) -> $r {
                type Sig = real_sig!($($abi)?; ($($t),*) -> $r);
                let p = slot::$fn_name.load(Relaxed);
                if p != 0 {
                    // SAFETY: `p` is the address dlsym returned for this symbol, whose C
                    // signature is the one declared here.
                    let f: Sig = unsafe { core::mem::transmute(p) };
                    // SAFETY: forwarded with the caller's arguments and contract.
                    return unsafe { f($($a),*) };
                }
                // SAFETY: the caller's contract.
                return unsafe { resolve_and_call($($a),*) };

                /// The call before the constructor resolved the function (out of line: the
                /// hooks' usual path is a load and a tail call).
                #[cold]
                #[inline(never)]
                unsafe fn resolve_and_call($($a: $t),*) -> $r {
                    type Sig = real_sig!($($abi)?; ($($t),*) -> $r);
                    #[allow(unused_mut, unused_assignments)]
                    let mut fb: Option<Sig> = None;
                    $( fb = Some($fb as Sig); )?
                    if let (true, Some(f)) = (resolving(), fb) {
                        // SAFETY: forwarded with the caller's arguments and contract.
                        return unsafe { f($($a),*) };
                    }
                    #[allow(unused_mut, unused_assignments)]
                    let mut ver: Option<&[u8]> = None;
                    $( ver = Some($ver); )?
                    let p = lookup(concat!($sym, "\0").as_bytes(), ver);
                    if p == 0 {
                        if let Some(f) = fb {
                            // SAFETY: as above.
                            return unsafe { f($($a),*) };
                        }
                        crate::sys::fatal(concat!("lockmeter: cannot find the real ", $sym, "\n"));
                    }
                    slot::$fn_name.store(p, Relaxed);
                    // SAFETY: `p` is the address dlsym returned for this symbol, whose C
                    // signature is the one declared here.
                    let f: Sig = unsafe { core::mem::transmute(p) };
                    // SAFETY: forwarded with the caller's arguments and contract.
                    unsafe { f($($a),*) }
                }
            }
        )*
    };
}

reals! {
    mutex_lock = "pthread_mutex_lock" | fallback_mutex_lock: fn(m: *mut pthread_mutex_t) -> c_int;
    mutex_trylock = "pthread_mutex_trylock" | fallback_mutex_trylock in mutex_trylock: fn(m: *mut pthread_mutex_t) -> c_int;
    mutex_timedlock = "pthread_mutex_timedlock": fn(m: *mut pthread_mutex_t, t: *const timespec) -> c_int;
    mutex_clocklock = "pthread_mutex_clocklock": fn(m: *mut pthread_mutex_t, c: clockid_t, t: *const timespec) -> c_int;
    mutex_unlock = "pthread_mutex_unlock" | fallback_mutex_unlock in mutex_unlock: fn(m: *mut pthread_mutex_t) -> c_int;
    mutex_init = "pthread_mutex_init" | fallback_mutex_init: fn(m: *mut pthread_mutex_t, a: *const libc::pthread_mutexattr_t) -> c_int;
    mutex_destroy = "pthread_mutex_destroy" | fallback_mutex_destroy: fn(m: *mut pthread_mutex_t) -> c_int;
    rwlock_rdlock = "pthread_rwlock_rdlock" | fallback_rwlock_rdlock: fn(l: *mut pthread_rwlock_t) -> c_int;
    rwlock_tryrdlock = "pthread_rwlock_tryrdlock" | fallback_rwlock_tryrdlock: fn(l: *mut pthread_rwlock_t) -> c_int;
    rwlock_timedrdlock = "pthread_rwlock_timedrdlock": fn(l: *mut pthread_rwlock_t, t: *const timespec) -> c_int;
    rwlock_clockrdlock = "pthread_rwlock_clockrdlock": fn(l: *mut pthread_rwlock_t, c: clockid_t, t: *const timespec) -> c_int;
    rwlock_wrlock = "pthread_rwlock_wrlock" | fallback_rwlock_wrlock: fn(l: *mut pthread_rwlock_t) -> c_int;
    rwlock_trywrlock = "pthread_rwlock_trywrlock" | fallback_rwlock_trywrlock: fn(l: *mut pthread_rwlock_t) -> c_int;
    rwlock_timedwrlock = "pthread_rwlock_timedwrlock": fn(l: *mut pthread_rwlock_t, t: *const timespec) -> c_int;
    rwlock_clockwrlock = "pthread_rwlock_clockwrlock": fn(l: *mut pthread_rwlock_t, c: clockid_t, t: *const timespec) -> c_int;
    rwlock_unlock = "pthread_rwlock_unlock" | fallback_rwlock_unlock: fn(l: *mut pthread_rwlock_t) -> c_int;
    rwlock_init = "pthread_rwlock_init" | fallback_rwlock_init: fn(l: *mut pthread_rwlock_t, a: *const libc::pthread_rwlockattr_t) -> c_int;
    rwlock_destroy = "pthread_rwlock_destroy" | fallback_rwlock_destroy: fn(l: *mut pthread_rwlock_t) -> c_int;
    spin_lock = "pthread_spin_lock": fn(l: *mut pthread_spinlock_t) -> c_int;
    spin_trylock = "pthread_spin_trylock": fn(l: *mut pthread_spinlock_t) -> c_int;
    spin_unlock = "pthread_spin_unlock": fn(l: *mut pthread_spinlock_t) -> c_int;
    spin_init = "pthread_spin_init": fn(l: *mut pthread_spinlock_t, pshared: c_int) -> c_int;
    spin_destroy = "pthread_spin_destroy": fn(l: *mut pthread_spinlock_t) -> c_int;
    cond_wait = "pthread_cond_wait" @ COND_VERSION: fn(c: *mut pthread_cond_t, m: *mut pthread_mutex_t) -> c_int;
    cond_timedwait = "pthread_cond_timedwait" @ COND_VERSION: fn(c: *mut pthread_cond_t, m: *mut pthread_mutex_t, t: *const timespec) -> c_int;
    cond_signal = "pthread_cond_signal" @ COND_VERSION: fn(c: *mut pthread_cond_t) -> c_int;
    cond_broadcast = "pthread_cond_broadcast" @ COND_VERSION: fn(c: *mut pthread_cond_t) -> c_int;
    cond_clockwait = "pthread_cond_clockwait": fn(c: *mut pthread_cond_t, m: *mut pthread_mutex_t, k: clockid_t, t: *const timespec) -> c_int;
    thread_create = "pthread_create": fn(t: *mut libc::pthread_t, a: *const libc::pthread_attr_t, f: extern "C" fn(*mut c_void) -> *mut c_void, arg: *mut c_void) -> c_int;
    dlopen = "dlopen": fn(file: *const c_char, mode: c_int) -> *mut c_void;
    wait4 = "wait4": fn(pid: libc::pid_t, status: *mut c_int, options: c_int, usage: *mut libc::rusage) -> libc::pid_t;
    waitpid = "waitpid": fn(pid: libc::pid_t, status: *mut c_int, options: c_int) -> libc::pid_t;
    waitid = "waitid": fn(idtype: libc::idtype_t, id: libc::id_t, info: *mut libc::siginfo_t, options: c_int) -> c_int;
    exit_ = "_exit": fn(status: c_int) -> ();
    exit_upper = "_Exit": fn(status: c_int) -> ();
    execve = "execve": fn(p: *const c_char, a: *const *const c_char, e: *const *const c_char) -> c_int;
    execv = "execv": fn(p: *const c_char, a: *const *const c_char) -> c_int;
    execvp = "execvp": fn(p: *const c_char, a: *const *const c_char) -> c_int;
    execvpe = "execvpe": fn(p: *const c_char, a: *const *const c_char, e: *const *const c_char) -> c_int;
    fexecve = "fexecve": fn(fd: c_int, a: *const *const c_char, e: *const *const c_char) -> c_int;
    execveat = "execveat": fn(fd: c_int, p: *const c_char, a: *const *const c_char, e: *const *const c_char, f: c_int) -> c_int;
    sem_wait = "sem_wait": extern "C-unwind" fn(s: *mut sem_t) -> c_int;
    sem_trywait = "sem_trywait": fn(s: *mut sem_t) -> c_int;
    sem_timedwait = "sem_timedwait": extern "C-unwind" fn(s: *mut sem_t, t: *const timespec) -> c_int;
    sem_clockwait = "sem_clockwait": extern "C-unwind" fn(s: *mut sem_t, c: clockid_t, t: *const timespec) -> c_int;
    sem_post = "sem_post": fn(s: *mut sem_t) -> c_int;
    sem_init = "sem_init": fn(s: *mut sem_t, pshared: c_int, value: core::ffi::c_uint) -> c_int;
    sem_destroy = "sem_destroy": fn(s: *mut sem_t) -> c_int;
    mtx_lock = "mtx_lock": fn(m: *mut c_void) -> c_int;
    mtx_trylock = "mtx_trylock": fn(m: *mut c_void) -> c_int;
    mtx_timedlock = "mtx_timedlock": fn(m: *mut c_void, t: *const timespec) -> c_int;
    mtx_unlock = "mtx_unlock": fn(m: *mut c_void) -> c_int;
    mtx_init = "mtx_init": fn(m: *mut c_void, kind: c_int) -> c_int;
    mtx_destroy = "mtx_destroy": fn(m: *mut c_void) -> ();
    cnd_wait = "cnd_wait": extern "C-unwind" fn(c: *mut c_void, m: *mut c_void) -> c_int;
    cnd_timedwait = "cnd_timedwait": extern "C-unwind" fn(c: *mut c_void, m: *mut c_void, t: *const timespec) -> c_int;
}

/// Address of a symbol in the objects after this one, or null (used for `__rseq_offset`).
pub(crate) fn data_symbol(name: &[u8]) -> *const c_void {
    lookup(name, None) as *const c_void
}

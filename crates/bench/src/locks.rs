//! The locks a benchmark can run, by their CLI names, and one interface to drive them all.
//!
//! Library locks take an optional spin policy suffix: `tas:tight`, `ttas:delay`, `mcs:park`
//! (see [`lockmeter_locks::relax`]). Baselines: glibc `pthread_mutex` (normal and adaptive),
//! `std::sync::Mutex`, `parking_lot::Mutex`.

use anyhow::{Result, bail};
use lock_api::{RawMutex, RawRwLock};
use lockmeter_locks::relax::{Backoff, Delay, Park, Pause, Tight};
use lockmeter_locks::{
    Adaptive, Clh, FutexMutex, Mcs, Metered, QRwLock, QSpin, Tas, Ticket, Ttas, UnfairQ,
};
use std::cell::UnsafeCell;

/// A lock as the benchmarks see it: build one, run a closure under it.
pub trait BenchLock: Send + Sync + 'static {
    /// A new, unlocked lock.
    fn create() -> Self;
    /// Runs `f` with the lock held.
    fn with<T>(&self, f: impl FnOnce() -> T) -> T;
}

/// Any `lock_api` raw mutex.
#[derive(Debug)]
pub struct Raw<R>(R);
impl<R: RawMutex + Send + Sync + 'static> BenchLock for Raw<R> {
    fn create() -> Self {
        Raw(R::INIT)
    }
    #[inline(always)]
    fn with<T>(&self, f: impl FnOnce() -> T) -> T {
        self.0.lock();
        let r = f();
        // SAFETY: locked just above.
        unsafe { self.0.unlock() };
        r
    }
}

/// The write side of a raw rwlock.
#[derive(Debug)]
pub struct Writer<R>(R);
impl<R: RawRwLock + Send + Sync + 'static> BenchLock for Writer<R> {
    fn create() -> Self {
        Writer(R::INIT)
    }
    #[inline(always)]
    fn with<T>(&self, f: impl FnOnce() -> T) -> T {
        self.0.lock_exclusive();
        let r = f();
        // SAFETY: locked just above.
        unsafe { self.0.unlock_exclusive() };
        r
    }
}

/// `std::sync::Mutex<()>`.
#[derive(Debug)]
pub struct StdMutex(std::sync::Mutex<()>);
impl BenchLock for StdMutex {
    fn create() -> Self {
        StdMutex(std::sync::Mutex::new(()))
    }
    #[inline(always)]
    fn with<T>(&self, f: impl FnOnce() -> T) -> T {
        let _g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f()
    }
}

/// glibc `pthread_mutex_t`, normal (`ADAPTIVE = false`) or `PTHREAD_MUTEX_ADAPTIVE_NP`.
pub struct Pthread<const ADAPTIVE: bool>(Box<UnsafeCell<libc::pthread_mutex_t>>);
// SAFETY: a pthread mutex is made to be shared between threads; it never moves (boxed).
unsafe impl<const A: bool> Send for Pthread<A> {}
// SAFETY: as above.
unsafe impl<const A: bool> Sync for Pthread<A> {}

/// glibc's `PTHREAD_MUTEX_ADAPTIVE_NP` (not exported by the `libc` crate).
const PTHREAD_MUTEX_ADAPTIVE_NP: libc::c_int = 3;

impl<const A: bool> BenchLock for Pthread<A> {
    fn create() -> Self {
        let m = Box::new(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
        if A {
            // SAFETY: `attr` is initialised before use and destroyed after; `m` is a valid,
            // boxed (never moving), unused mutex.
            unsafe {
                let mut attr: libc::pthread_mutexattr_t = core::mem::zeroed();
                libc::pthread_mutexattr_init(&mut attr);
                libc::pthread_mutexattr_settype(&mut attr, PTHREAD_MUTEX_ADAPTIVE_NP);
                libc::pthread_mutex_init(m.get(), &attr);
                libc::pthread_mutexattr_destroy(&mut attr);
            }
        }
        Pthread(m)
    }
    #[inline(always)]
    fn with<T>(&self, f: impl FnOnce() -> T) -> T {
        // SAFETY: the mutex is initialised and lives as long as `self`.
        unsafe { libc::pthread_mutex_lock(self.0.get()) };
        let r = f();
        // SAFETY: locked by this thread just above.
        unsafe { libc::pthread_mutex_unlock(self.0.get()) };
        r
    }
}

impl<const A: bool> std::fmt::Debug for Pthread<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pthread<adaptive={A}>")
    }
}

impl<const A: bool> Drop for Pthread<A> {
    fn drop(&mut self) {
        // SAFETY: no thread uses the mutex any more.
        unsafe { libc::pthread_mutex_destroy(self.0.get()) };
    }
}

/// Something to run with a concrete lock type: the benchmarks are generic, so every lock gets
/// its own monomorphised loop (no dynamic dispatch on the measured path).
pub trait Visit {
    /// What the visit returns.
    type Out;
    /// Runs with lock type `L`.
    fn visit<L: BenchLock>(self) -> Self::Out;
}

/// Every lock of the default suite, library first, baselines last.
pub const ALL: &[&str] = &[
    "tas",
    "ttas",
    "ticket",
    "mcs",
    "clh",
    "qspin",
    "unfair-q",
    "futex",
    "adaptive",
    "qrwlock",
    "pthread",
    "pthread-adaptive",
    "std",
    "parking-lot",
];

/// The baselines.
pub const BASELINES: &[&str] = &["pthread", "pthread-adaptive", "std", "parking-lot"];

/// Extra names accepted besides `ALL` (policy variants and the metered adaptive mutex).
pub const EXTRA: &[&str] = &[
    "tas:tight",
    "tas:backoff",
    "tas:delay",
    "ttas:pause",
    "ttas:tight",
    "ttas:delay",
    "ticket:tight",
    "ticket:backoff",
    "ticket:delay",
    "mcs:park",
    "mcs:delay",
    "clh:park",
    "qspin:backoff",
    "unfair-q:backoff",
    "metered-adaptive",
];

macro_rules! policies {
    ($v:expr, $lock:ident, $pol:expr, $default:ident) => {
        match $pol {
            None => $v.visit::<Raw<$lock<$default>>>(),
            Some("tight") => $v.visit::<Raw<$lock<Tight>>>(),
            Some("pause") => $v.visit::<Raw<$lock<Pause>>>(),
            Some("backoff") => $v.visit::<Raw<$lock<Backoff>>>(),
            Some("delay") => $v.visit::<Raw<$lock<Delay>>>(),
            Some(p) => bail!(
                "lock {:?} takes the policies tight, pause, backoff, delay, not {p:?}",
                stringify!($lock)
            ),
        }
    };
}

/// Runs `v` with the lock called `name`.
pub fn visit<V: Visit>(name: &str, v: V) -> Result<V::Out> {
    let (base, pol) = match name.split_once(':') {
        Some((b, p)) => (b, Some(p)),
        None => (name, None),
    };
    Ok(match base {
        "tas" => policies!(v, Tas, pol, Pause),
        "ttas" => policies!(v, Ttas, pol, Backoff),
        "ticket" => policies!(v, Ticket, pol, Pause),
        "qspin" => policies!(v, QSpin, pol, Pause),
        "unfair-q" => policies!(v, UnfairQ, pol, Pause),
        "mcs" => match pol {
            Some("park") => v.visit::<Raw<Mcs<Park>>>(),
            _ => policies!(v, Mcs, pol, Pause),
        },
        "clh" => match pol {
            Some("park") => v.visit::<Raw<Clh<Park>>>(),
            _ => policies!(v, Clh, pol, Pause),
        },
        "qrwlock" if pol.is_none() => v.visit::<Writer<QRwLock<Pause>>>(),
        "futex" if pol.is_none() => v.visit::<Raw<FutexMutex>>(),
        "adaptive" if pol.is_none() => v.visit::<Raw<Adaptive>>(),
        "metered-adaptive" if pol.is_none() => v.visit::<Raw<Metered<Adaptive>>>(),
        "pthread" if pol.is_none() => v.visit::<Pthread<false>>(),
        "pthread-adaptive" if pol.is_none() => v.visit::<Pthread<true>>(),
        "std" if pol.is_none() => v.visit::<StdMutex>(),
        "parking-lot" if pol.is_none() => v.visit::<Raw<parking_lot::RawMutex>>(),
        _ => bail!(
            "unknown lock {name:?}: choose from {} (spin locks also take :tight, :pause, :backoff, :delay; mcs and clh :park)",
            ALL.join(",")
        ),
    })
}

/// Checks a list of lock names (so that bad input fails before any run).
pub fn check(names: &[String]) -> Result<()> {
    struct Nop;
    impl Visit for Nop {
        type Out = ();
        fn visit<L: BenchLock>(self) {}
    }
    if names.is_empty() {
        bail!("empty lock list: give --locks a,b,c (from {})", ALL.join(","));
    }
    for n in names {
        visit(n, Nop)?;
    }
    Ok(())
}

//! A futex mutex: Drepper's "mutex3" from *Futexes Are Tricky*, the blueprint of glibc's
//! `lll_lock` and Rust's `std::sync::Mutex`.
//!
//! State: one `u32`.
//!
//! | value | meaning |
//! |---|---|
//! | 0 | unlocked |
//! | 1 | locked, no waiter |
//! | 2 | locked, and some thread may be asleep in `FUTEX_WAIT` |
//!
//! Lock: `cmpxchg(0 → 1)`; on failure `swap(2)` and `FUTEX_WAIT(2)` until the swap returns 0.
//! Unlock: `swap(0)`; if the old value was 2, `FUTEX_WAKE(1)`. A thread that slept takes the lock
//! with 2 (it cannot know whether others still sleep), so an unlock may wake nobody: a spurious
//! syscall, never a lost wake-up. No spinning, barging (a woken thread competes with newcomers).
//!
//! [`sys`] holds the two futex calls every parking lock of the crate uses; under loom they are
//! emulated with a mutex and a condition variable.

use crate::primitive::{AtomicU32, Ordering::*};
use core::time::Duration;
use std::time::Instant;

/// The futex system calls (or, under loom, their emulation).
pub mod sys {
    use super::*;

    /// Sleeps while `*a == expected`, at most `timeout`. Returns `false` on timeout; may return
    /// `true` spuriously (the caller re-checks its condition).
    #[cfg(not(loom))]
    pub fn wait(a: &AtomicU32, expected: u32, timeout: Option<Duration>) -> bool {
        let ts = timeout.map(|d| libc::timespec {
            tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        });
        let tsp = ts.as_ref().map_or(core::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: `a` is a valid, aligned u32 for the duration of the call; the kernel only reads
        // it (and compares it with `expected`); `tsp` is null or points to a live timespec.
        let r = unsafe {
            libc::syscall(
                libc::SYS_futex,
                a.as_ptr(),
                libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
                expected,
                tsp,
            )
        };
        !(r == -1 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ETIMEDOUT))
    }

    /// Wakes up to `n` threads sleeping on `a`; returns how many were woken.
    #[cfg(not(loom))]
    pub fn wake(a: &AtomicU32, n: i32) -> usize {
        // SAFETY: FUTEX_WAKE only uses the address as a key; `a` is valid for the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_futex,
                a.as_ptr(),
                libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
                n,
            )
        };
        r.max(0) as usize
    }

    /// [`wake`] by address: for a word that may be reused as soon as the waker's store is
    /// visible. The kernel only uses the address as a key (a stale one wakes nobody, or causes a
    /// spurious wake-up that waiters tolerate).
    #[cfg(not(loom))]
    pub(crate) fn wake_raw(a: *const AtomicU32, n: i32) -> usize {
        // SAFETY: FUTEX_WAKE never dereferences the address in user space; the kernel looks it
        // up and returns EFAULT for an unmapped one.
        let r = unsafe {
            libc::syscall(libc::SYS_futex, a, libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, n)
        };
        r.max(0) as usize
    }

    /// Loom: see the non-loom version.
    #[cfg(loom)]
    pub(crate) fn wake_raw(_a: *const AtomicU32, n: i32) -> usize {
        let g = EMU.0.lock().unwrap();
        let sleeping = *g;
        EMU.1.notify_all();
        sleeping.min(n.max(0) as usize)
    }

    #[cfg(loom)]
    loom::lazy_static! {
        static ref EMU: (loom::sync::Mutex<usize>, loom::sync::Condvar) =
            (loom::sync::Mutex::new(0), loom::sync::Condvar::new());
    }

    /// Loom emulation of `FUTEX_WAIT`: the value is checked under the emulation's mutex, and
    /// wakers take the same mutex, so no wake-up is lost. Timeouts are not modelled.
    #[cfg(loom)]
    pub fn wait(a: &AtomicU32, expected: u32, _timeout: Option<Duration>) -> bool {
        let mut g = EMU.0.lock().unwrap();
        if a.load(SeqCst) != expected {
            return true;
        }
        *g += 1;
        let mut g = EMU.1.wait(g).unwrap();
        *g -= 1;
        true
    }

    /// Loom emulation of `FUTEX_WAKE`: wakes every emulated sleeper (they re-check), and reports
    /// one woken if any slept.
    #[cfg(loom)]
    pub fn wake(_a: &AtomicU32, n: i32) -> usize {
        let g = EMU.0.lock().unwrap();
        let sleeping = *g;
        EMU.1.notify_all();
        sleeping.min(n.max(0) as usize)
    }
}

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;
const CONTENDED: u32 = 2;

/// Drepper's futex mutex (mutex3): see the [module docs](self).
#[derive(Debug)]
#[repr(transparent)]
pub struct FutexMutex {
    state: AtomicU32,
}

impl FutexMutex {
    maybe_const_fn! {
        /// An unlocked mutex.
        pub fn new() -> Self {
            FutexMutex { state: AtomicU32::new(UNLOCKED) }
        }
    }

    #[cold]
    fn lock_slow(&self, deadline: Option<Instant>) -> bool {
        // Take the lock as CONTENDED: we cannot know whether other sleepers remain.
        while self.state.swap(CONTENDED, Acquire) != UNLOCKED {
            let timeout = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(t) if !t.is_zero() => Some(t),
                    _ => return false,
                },
                None => None,
            };
            sys::wait(&self.state, CONTENDED, timeout);
        }
        true
    }
}

impl Default for FutexMutex {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: the state word admits one holder at a time: only a successful cmpxchg(0→1) or a swap
// that returned 0 enters, and only the holder stores 0.
unsafe impl lock_api::RawMutex for FutexMutex {
    raw_init!();
    type GuardMarker = lock_api::GuardSend;

    #[inline]
    fn lock(&self) {
        if self.state.compare_exchange(UNLOCKED, LOCKED, Acquire, Relaxed).is_err() {
            self.lock_slow(None);
        }
    }

    #[inline]
    fn try_lock(&self) -> bool {
        self.state.compare_exchange(UNLOCKED, LOCKED, Acquire, Relaxed).is_ok()
    }

    #[inline]
    unsafe fn unlock(&self) {
        if self.state.swap(UNLOCKED, Release) == CONTENDED {
            sys::wake(&self.state, 1);
        }
    }

    #[inline]
    fn is_locked(&self) -> bool {
        self.state.load(Relaxed) != UNLOCKED
    }
}

// SAFETY: as for `RawMutex`; a timed-out attempt leaves the state as it found it or as
// CONTENDED (a possible spurious wake later, never a lost one).
unsafe impl lock_api::RawMutexTimed for FutexMutex {
    type Duration = Duration;
    type Instant = Instant;

    fn try_lock_for(&self, timeout: Duration) -> bool {
        self.try_lock_until(Instant::now() + timeout)
    }

    fn try_lock_until(&self, deadline: Instant) -> bool {
        lock_api::RawMutex::try_lock(self) || self.lock_slow(Some(deadline))
    }
}

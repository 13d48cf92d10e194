//! Condvars on swapped mutexes (`lockmeter run --lock ALGO`): glibc's `pthread_cond_wait`
//! relocks the mutex through internal calls that cannot be interposed, so a wait on a swapped
//! mutex runs on a futex sequence-number condvar built on the swapped lock (as in LiTL). See
//! `swap.rs` for which condvar words it uses and why glibc leaves them alone.
//!
//! Every function here leaves `errno` as it found it.

use crate::swap::{ALGO, Swapped, keep_errno};
use core::ffi::c_int;
use core::sync::atomic::{AtomicU32, Ordering::*};
use libc::{clockid_t, pthread_cond_t, timespec};

const SEQ_OFFSET: usize = 40;
const WAITERS_OFFSET: usize = 44;
const WREFS_OFFSET: usize = 36;

/// The condvar's words: sequence number, waiters, and glibc's `__wrefs` (bit 0: process-shared,
/// bit 1: monotonic clock).
///
/// # Safety
/// `c` points at a `pthread_cond_t`.
unsafe fn cond_words(c: *mut pthread_cond_t) -> (&'static AtomicU32, &'static AtomicU32, u32) {
    let b = c as *mut u8;
    // SAFETY: offsets 36, 40, 44 are 4-aligned u32 fields inside the 48-byte condvar.
    unsafe {
        (
            &*(b.add(SEQ_OFFSET) as *const AtomicU32),
            &*(b.add(WAITERS_OFFSET) as *const AtomicU32),
            (*(b.add(WREFS_OFFSET) as *const AtomicU32)).load(Relaxed),
        )
    }
}

/// A condvar wait on swapped mutex `m` (held by the caller): read the sequence number, count
/// ourselves as a waiter, unlock, sleep while the number is unchanged (until the absolute
/// deadline `t` on `clock` if given), relock. Returns 0, or ETIMEDOUT (the mutex relocked), or
/// EINVAL for a bad deadline (the mutex still held).
///
/// # Safety
/// `c` points at a condvar; `t` is null or points at a readable `timespec`.
pub(crate) unsafe fn cond_wait(
    s: Swapped,
    c: *mut pthread_cond_t,
    clock: Option<clockid_t>,
    t: *const timespec,
) -> c_int {
    // SAFETY: the caller's contract.
    let (seq, waiters, wrefs) = unsafe { cond_words(c) };
    let clock = if t.is_null() {
        None
    } else {
        Some(clock.unwrap_or(if wrefs & 2 != 0 {
            libc::CLOCK_MONOTONIC
        } else {
            libc::CLOCK_REALTIME
        }))
    };
    if let Some(k) = clock {
        // SAFETY: the caller's contract.
        let ns = unsafe { (*t).tv_nsec };
        if (k != libc::CLOCK_REALTIME && k != libc::CLOCK_MONOTONIC)
            || !(0..1_000_000_000).contains(&ns)
        {
            return libc::EINVAL;
        }
    }
    keep_errno(|| {
        let v = seq.load(Acquire);
        waiters.fetch_add(1, SeqCst);
        s.unlock();
        let mut op = libc::FUTEX_WAIT_BITSET;
        if wrefs & 1 == 0 {
            op |= libc::FUTEX_PRIVATE_FLAG;
        }
        if clock == Some(libc::CLOCK_REALTIME) {
            op |= libc::FUTEX_CLOCK_REALTIME;
        }
        let tp = if clock.is_some() { t } else { core::ptr::null() };
        let mut timed_out = false;
        // One sleep: a change of the number (a signal), a spurious wake-up or an interruption
        // all end the wait (POSIX allows spurious wake-ups).
        // SAFETY: `seq` is a live u32; `tp` is null or the caller's absolute deadline.
        let r = unsafe {
            libc::syscall(libc::SYS_futex, seq.as_ptr(), op, v, tp, core::ptr::null::<u32>(), !0u32)
        };
        if r == -1 && crate::sys::errno() == libc::ETIMEDOUT {
            timed_out = true;
        }
        waiters.fetch_sub(1, SeqCst);
        s.lock();
        if timed_out { libc::ETIMEDOUT } else { 0 }
    })
}

/// Our half of `pthread_cond_signal` / `broadcast` (the caller runs glibc's too): bumps the
/// sequence number and wakes one or all sleepers, when any swapped waiter is counted.
///
/// # Safety
/// `c` points at a condvar.
pub(crate) unsafe fn cond_wake(c: *mut pthread_cond_t, all: bool) {
    if ALGO.load(Relaxed) == 0 {
        return;
    }
    // SAFETY: the caller's contract.
    let (seq, waiters, wrefs) = unsafe { cond_words(c) };
    if waiters.load(SeqCst) == 0 {
        return;
    }
    keep_errno(|| {
        seq.fetch_add(1, SeqCst);
        let mut op = libc::FUTEX_WAKE;
        if wrefs & 1 == 0 {
            op |= libc::FUTEX_PRIVATE_FLAG;
        }
        let n: c_int = if all { c_int::MAX } else { 1 };
        // SAFETY: FUTEX_WAKE only uses the address as a key.
        unsafe { libc::syscall(libc::SYS_futex, seq.as_ptr(), op, n) };
    });
}

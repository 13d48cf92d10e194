//! Rwlock swapping (`lockmeter run --rwlock qrwlock`): the program's rwlocks run on the lab's
//! `QRwLock` (`lockmeter_locks::cabi::rw`), decided once per rwlock as mutexes are (`swap.rs`).
//!
//! Every function here leaves `errno` as it found it.

use crate::swap::{SWAPPED, Writer, keep_errno, poll_until};
use core::ffi::c_int;
use core::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering::*};
use libc::{clockid_t, pthread_rwlock_t, timespec};
use lockmeter_locks::cabi;

// glibc's `pthread_rwlock_t` (56 bytes): the mode word at offset 40 (`__pad2`, never written by
// glibc but by init's memset), the lab lock's state at 0..16 once swapped (`__readers`,
// `__writers` and the two futex words, which glibc no longer touches then). Process-shared
// rwlocks (`__shared`, offset 28) and rwlocks glibc holds when first seen (readers or the
// write-locked bit in `__readers`, or `__cur_writer` at 24) stay glibc's.

/// Whether rwlocks are swapped (`LOCKMETER_RWLOCK=qrwlock`).
pub(crate) static RW_ON: AtomicU8 = AtomicU8::new(0);
const RW_MODE_OFFSET: usize = 40;
static RW_SWAPPED_COUNT: AtomicU64 = AtomicU64::new(0);
/// Not swapped: process-shared, held through glibc when first seen.
static RW_NOT_SWAPPED: [AtomicU64; 2] = [const { AtomicU64::new(0) }; 2];

/// Reads `LOCKMETER_RWLOCK` (constructor); an unknown value stops the program with a message.
pub(crate) fn init_rw(raw: Option<&[u8]>) {
    match raw {
        None | Some(b"") | Some(b"pthread") => {}
        Some(b"qrwlock") => RW_ON.store(1, Relaxed),
        Some(_) => {
            crate::sys::fatal("lockmeter: unknown LOCKMETER_RWLOCK; use pthread or qrwlock\n")
        }
    }
}

/// A swapped rwlock.
#[derive(Clone, Copy)]
pub(crate) struct SwappedRw {
    state: *mut u8,
}

/// The mode word of rwlock `l`.
///
/// # Safety
/// `l` points at a `pthread_rwlock_t`.
#[inline(always)]
unsafe fn rw_mode(l: *mut pthread_rwlock_t) -> &'static AtomicU32 {
    // SAFETY: offset 40 is inside the 56-byte, 8-aligned rwlock.
    unsafe { &*((l as *mut u8).add(RW_MODE_OFFSET) as *const AtomicU32) }
}

/// The swapped lock of `l`, deciding now when undecided (for the lock calls).
///
/// # Safety
/// `l` points at an initialized `pthread_rwlock_t`.
#[inline(always)]
pub(crate) unsafe fn rw_for_lock(l: *mut pthread_rwlock_t) -> Option<SwappedRw> {
    if RW_ON.load(Relaxed) == 0 {
        return None;
    }
    // SAFETY: the caller's contract.
    let w = unsafe { rw_mode(l) };
    let v = match w.load(Acquire) {
        // SAFETY: as above.
        0 => unsafe { rw_decide(l, w) },
        v => v,
    };
    (v == SWAPPED).then_some(SwappedRw { state: l as *mut u8 })
}

/// The swapped lock of `l` if it was swapped (unlock, destroy).
///
/// # Safety
/// `l` points at a `pthread_rwlock_t`.
#[inline(always)]
pub(crate) unsafe fn rw_existing(l: *mut pthread_rwlock_t) -> Option<SwappedRw> {
    if RW_ON.load(Relaxed) == 0 {
        return None;
    }
    // SAFETY: the caller's contract.
    let v = unsafe { rw_mode(l) }.load(Acquire);
    (v == SWAPPED).then_some(SwappedRw { state: l as *mut u8 })
}

/// Decides the mode of undecided rwlock `l` (one CAS, as for mutexes).
///
/// # Safety
/// `l` points at an initialized `pthread_rwlock_t`; `w` is its mode word.
#[cold]
#[inline(never)]
unsafe fn rw_decide(l: *mut pthread_rwlock_t, w: &AtomicU32) -> u32 {
    let b = l as *const u8;
    // SAFETY: `__readers` (u32 at 0), `__cur_writer` (int at 24), `__shared` (int at 28); racy
    // reads that only choose what the CAS proposes.
    let (readers, writer, shared) = unsafe {
        (
            core::ptr::read_volatile(b as *const u32),
            core::ptr::read_volatile(b.add(24) as *const c_int),
            core::ptr::read_volatile(b.add(28) as *const c_int),
        )
    };
    let reason = if shared != 0 {
        Some(0)
    } else if readers >> 3 != 0 || readers & 1 != 0 || writer != 0 {
        Some(1)
    } else {
        None
    };
    crate::swap::settle(w, reason, &RW_NOT_SWAPPED, &RW_SWAPPED_COUNT)
}

impl SwappedRw {
    /// `pthread_rwlock_rdlock` / `wrlock`.
    #[inline(always)]
    pub(crate) fn lock(self, write: bool) -> c_int {
        // SAFETY: a swapped rwlock's state.
        keep_errno(|| unsafe { cabi::rw::lock(self.state, write) });
        0
    }

    /// `pthread_rwlock_tryrdlock` / `trywrlock`: 0 or EBUSY.
    #[inline(always)]
    pub(crate) fn try_lock(self, write: bool) -> c_int {
        // SAFETY: as in `lock`.
        if unsafe { cabi::rw::try_lock(self.state, write) } { 0 } else { libc::EBUSY }
    }

    /// `pthread_rwlock_unlock`.
    #[inline(always)]
    pub(crate) fn unlock(self) -> c_int {
        // SAFETY: as in `lock`; the caller holds it (else the program's error).
        keep_errno(|| unsafe { cabi::rw::unlock(self.state) });
        0
    }

    /// The timed and clock variants.
    ///
    /// # Safety
    /// `t` points at a readable `timespec`.
    pub(crate) unsafe fn timed_lock(
        self,
        write: bool,
        clock: clockid_t,
        t: *const timespec,
    ) -> c_int {
        // SAFETY: the caller's contract.
        unsafe { poll_until(clock, t, || self.try_lock(write) == 0) }
    }

    /// `pthread_rwlock_destroy`: clears the state, then glibc's destroy (a no-op).
    ///
    /// # Safety
    /// `l` is the rwlock of this state, which nobody uses during the destroy.
    pub(crate) unsafe fn destroy(self, l: *mut pthread_rwlock_t) -> c_int {
        // SAFETY: the caller's contract.
        unsafe {
            core::ptr::write_bytes(self.state, 0, cabi::STATE_BYTES);
            crate::real::rwlock_destroy(l)
        }
    }
}

/// Writes the note about rwlock swapping into `buf`; returns its length (0 when it was off).
pub(crate) fn rw_note(buf: &mut [u8]) -> usize {
    if RW_ON.load(Relaxed) == 0 {
        return 0;
    }
    let mut w = Writer { buf, len: 0 };
    w.put(b"rwlock swapping: ");
    w.num(RW_SWAPPED_COUNT.load(Relaxed));
    w.put(b" rwlocks ran on qrwlock; ");
    let (a, b) = (RW_NOT_SWAPPED[0].load(Relaxed), RW_NOT_SWAPPED[1].load(Relaxed));
    w.num(a + b);
    w.put(b" kept glibc's implementation");
    if a + b > 0 {
        w.put(b" (");
        w.num(a);
        w.put(b" process-shared, ");
        w.num(b);
        w.put(b" held through glibc when first seen)");
    }
    w.len
}

/// After `fork`: the child counts only the decisions it makes itself.
pub(crate) fn reset_for_child() {
    RW_SWAPPED_COUNT.store(0, Relaxed);
    for c in RW_NOT_SWAPPED.iter() {
        c.store(0, Relaxed);
    }
}

//! A fair reader-writer lock in the style of Linux's qrwlock (`kernel/locking/qrwlock.c`).
//!
//! State: `cnts` (`u32`) plus `wait_lock`, a FIFO [`Ticket`] lock that orders everyone who
//! could not get in at once:
//!
//! ```text
//!  31                 9  8   7       0
//! +--------------------+---+---------+
//! |   reader count     | W | wlocked |
//! +--------------------+---+---------+
//! ```
//!
//! - `wlocked` (0xff): a writer holds the lock. `W` (0x100): a writer waits for readers to drain.
//! - Readers add `1 << 9`. A reader that finds the writer bits clear is in; otherwise it takes
//!   its bias back and queues on `wait_lock`, so readers cannot starve a waiting writer.
//! - A writer takes `0 → wlocked` directly, or queues on `wait_lock`, sets `W`, waits for the
//!   readers to leave, and turns `W` into `wlocked`.
//!
//! The lock is as fair as `wait_lock`: FIFO among everyone who had to wait.

use crate::primitive::{AtomicU32, Ordering::*};
use crate::relax::{Pause, Relax};
use crate::ticket::Ticket;
use lock_api::RawMutex as _;

const QW_LOCKED: u32 = 0xff;
const QW_WAITING: u32 = 0x100;
const QW_WMASK: u32 = QW_LOCKED | QW_WAITING;
const QR_BIAS: u32 = 1 << 9;

/// A qrwlock-style fair reader-writer lock with spin policy `P`: see the [module docs](self).
#[derive(Debug)]
#[repr(C)]
pub struct QRwLock<P = Pause> {
    cnts: AtomicU32,
    wait_lock: Ticket<P>,
}

impl<P> QRwLock<P> {
    maybe_const_fn! {
        /// An unlocked lock.
        pub fn new() -> Self {
            QRwLock { cnts: AtomicU32::new(0), wait_lock: Ticket::new() }
        }
    }
}

impl<P> Default for QRwLock<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Relax> QRwLock<P> {
    #[cold]
    fn read_slow(&self) {
        self.cnts.fetch_sub(QR_BIAS, Relaxed);
        self.wait_lock.lock();
        self.cnts.fetch_add(QR_BIAS, Acquire);
        let mut r = P::default();
        while self.cnts.load(Acquire) & QW_LOCKED != 0 {
            r.relax();
        }
        // SAFETY: we locked `wait_lock` above.
        unsafe { self.wait_lock.unlock() };
    }

    #[cold]
    fn write_slow(&self) {
        self.wait_lock.lock();
        if self.cnts.load(Relaxed) == 0
            && self.cnts.compare_exchange(0, QW_LOCKED, Acquire, Relaxed).is_ok()
        {
            // SAFETY: we locked `wait_lock` above.
            unsafe { self.wait_lock.unlock() };
            return;
        }
        self.cnts.fetch_or(QW_WAITING, Relaxed);
        let mut r = P::default();
        loop {
            if self.cnts.load(Relaxed) == QW_WAITING
                && self.cnts.compare_exchange(QW_WAITING, QW_LOCKED, Acquire, Relaxed).is_ok()
            {
                break;
            }
            r.relax();
        }
        // SAFETY: we locked `wait_lock` above.
        unsafe { self.wait_lock.unlock() };
    }
}

// SAFETY: a writer holds the lock exactly while `wlocked` is set, which it sets only from 0 or
// from `W` alone (no readers, no writer); readers are in only while their bias is counted and
// the writer bits were clear when they added it (or, queued, once `wlocked` cleared while they
// held `wait_lock`, which excludes a waiting writer).
unsafe impl<P: Relax> lock_api::RawRwLock for QRwLock<P> {
    raw_init!();
    type GuardMarker = lock_api::GuardSend;

    #[inline]
    fn lock_shared(&self) {
        if self.cnts.fetch_add(QR_BIAS, Acquire) & QW_WMASK != 0 {
            self.read_slow();
        }
    }
    #[inline]
    fn try_lock_shared(&self) -> bool {
        if self.cnts.load(Relaxed) & QW_WMASK == 0 {
            if self.cnts.fetch_add(QR_BIAS, Acquire) & QW_WMASK == 0 {
                return true;
            }
            self.cnts.fetch_sub(QR_BIAS, Relaxed);
        }
        false
    }
    #[inline]
    unsafe fn unlock_shared(&self) {
        self.cnts.fetch_sub(QR_BIAS, Release);
    }
    #[inline]
    fn lock_exclusive(&self) {
        if self.cnts.compare_exchange(0, QW_LOCKED, Acquire, Relaxed).is_err() {
            self.write_slow();
        }
    }
    #[inline]
    fn try_lock_exclusive(&self) -> bool {
        self.cnts.load(Relaxed) == 0
            && self.cnts.compare_exchange(0, QW_LOCKED, Acquire, Relaxed).is_ok()
    }
    #[inline]
    unsafe fn unlock_exclusive(&self) {
        self.cnts.fetch_sub(QW_LOCKED, Release);
    }
    #[inline]
    fn is_locked(&self) -> bool {
        self.cnts.load(Relaxed) != 0
    }
    #[inline]
    fn is_locked_exclusive(&self) -> bool {
        self.cnts.load(Relaxed) & QW_LOCKED != 0
    }
}

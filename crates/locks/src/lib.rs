//! lockmeter's lock laboratory: the lock algorithms of the literature, each behind the
//! [`lock_api`] traits, each in one module whose top comment describes its state.
//!
//! ## Algorithms
//!
//! | Module | Lock | Traits | Fair? | Waiting |
//! |---|---|---|---|---|
//! | [`tas`] | [`Tas`]: test-and-set byte lock | `RawMutex`, `RawMutexTimed` | no | spin (policy) |
//! | [`ttas`] | [`Ttas`]: test-and-test-and-set + exponential backoff | `RawMutex`, `RawMutexTimed` | no | spin (policy) |
//! | [`ticket`] | [`Ticket`]: ticket lock | `RawMutex` | FIFO | spin (policy) |
//! | [`mcs`] | [`Mcs`]: MCS queue lock | `RawMutex` | FIFO | spin or spin-then-park |
//! | [`clh`] | [`Clh`]: CLH queue lock | `RawMutex` (try_lock: see module) | FIFO | spin or spin-then-park |
//! | [`qspin`] | [`QSpin`]: 4-byte qspinlock (pending bit + MCS tail) | `RawMutex` | FIFO after the pending slot | spin (policy) |
//! | [`unfair`] | [`UnfairQ`]: seed 002's unfair queued lock with steal statistics | `RawMutex` | no (steals) | spin (policy) |
//! | [`futex`] | [`FutexMutex`]: Drepper's mutex3 (0/1/2) | `RawMutex`, `RawMutexTimed` | no (barging) | park |
//! | [`adaptive`] | [`Adaptive`]: spin-then-park, time-bounded spinning, ~1 ms fair handoff | `RawMutex`, `RawMutexTimed` | eventually | spin, then park |
//! | [`qrwlock`] | [`QRwLock`]: qrwlock-style fair reader-writer lock | `RawRwLock` | FIFO (wait queue) | spin (policy) |
//!
//! Spin locks take a spin-wait policy from [`relax`] as a type parameter: [`relax::Tight`],
//! [`relax::Pause`], [`relax::Backoff`], [`relax::Delay`] (seed 003's delayed spin loop) and,
//! for the queued locks whose waiters each have their own word, [`relax::Park`].
//!
//! [`Metered<L>`](metered::Metered) meters any lock of the library with `lockmeter-core`'s
//! statistics; without the `metering` feature it is a transparent wrapper.
//!
//! ```
//! use lockmeter_locks::{Mutex, Adaptive};
//! let m: Mutex<Adaptive, u32> = Mutex::new(0);
//! *m.lock() += 1;
//! assert_eq!(*m.lock(), 1);
//! ```
//!
//! ## Correctness
//! Every algorithm has a loom model (`RUSTFLAGS="--cfg loom" cargo test -p lockmeter-locks
//! --release --test loom`), a checked-counter stress test, and the fair and adaptive locks an
//! oversubscription test that fails when a thread starves.

/// `const fn` normally; a plain `fn` under loom, whose atomics cannot be built in const context.
macro_rules! maybe_const_fn {
    ($(#[$m:meta])* $vis:vis fn $name:ident() -> Self $body:block) => {
        #[cfg(not(loom))]
        $(#[$m])*
        $vis const fn $name() -> Self $body
        #[cfg(loom)]
        $(#[$m])*
        $vis fn $name() -> Self $body
    };
}

/// `RawMutex::INIT` / `RawRwLock::INIT` from `new()`; under loom `INIT` cannot exist (loom
/// models build locks with `new()`).
macro_rules! raw_init {
    () => {
        #[allow(clippy::declare_interior_mutable_const)]
        #[cfg(not(loom))]
        const INIT: Self = Self::new();
        #[allow(clippy::declare_interior_mutable_const)]
        #[cfg(loom)]
        const INIT: Self = panic!("under loom, build locks with new()");
    };
}

/// A one-byte lock type `$name<P = $policy>` (0 free, 1 held, spin policy `P`): its unlocked
/// `new()`, `Default`, and `lock_api`'s `RawMutex` and `RawMutexTimed` over three methods the type
/// defines (`raw_lock`, `raw_try_lock`, `raw_lock_until`, each taking the lock with a
/// `cmpxchg(0 → 1)`): [`tas::Tas`] and [`ttas::Ttas`].
macro_rules! byte_lock_type {
    ($(#[$m:meta])* $name:ident, $policy:ty) => {
        $(#[$m])*
        #[derive(Debug)]
        #[repr(C)]
        pub struct $name<P = $policy> {
            locked: $crate::primitive::AtomicBool,
            _p: core::marker::PhantomData<fn() -> P>,
        }

        impl<P> $name<P> {
            maybe_const_fn! {
                /// An unlocked lock.
                pub fn new() -> Self {
                    $name {
                        locked: $crate::primitive::AtomicBool::new(false),
                        _p: core::marker::PhantomData,
                    }
                }
            }
        }

        impl<P> Default for $name<P> {
            fn default() -> Self {
                Self::new()
            }
        }

        // SAFETY: only the thread whose cmpxchg(false → true) succeeded (in `raw_lock`,
        // `raw_try_lock` or `raw_lock_until`) holds the lock; only it stores `false`.
        unsafe impl<P: $crate::relax::Relax> lock_api::RawMutex for $name<P> {
            raw_init!();
            type GuardMarker = lock_api::GuardSend;

            #[inline]
            fn lock(&self) {
                self.raw_lock()
            }
            #[inline]
            fn try_lock(&self) -> bool {
                self.raw_try_lock()
            }
            #[inline]
            unsafe fn unlock(&self) {
                self.locked.store(false, $crate::primitive::Ordering::Release);
            }
            #[inline]
            fn is_locked(&self) -> bool {
                self.locked.load($crate::primitive::Ordering::Relaxed)
            }
        }

        // SAFETY: as for `RawMutex`; a timed-out attempt changed nothing.
        unsafe impl<P: $crate::relax::Relax> lock_api::RawMutexTimed for $name<P> {
            type Duration = core::time::Duration;
            type Instant = std::time::Instant;
            fn try_lock_for(&self, timeout: core::time::Duration) -> bool {
                self.raw_lock_until(std::time::Instant::now() + timeout)
            }
            fn try_lock_until(&self, deadline: std::time::Instant) -> bool {
                self.raw_lock_until(deadline)
            }
        }
    };
}

mod primitive;

pub mod adaptive;
#[cfg(not(loom))]
pub mod cabi;
#[cfg(not(loom))]
mod cabi_queue;
pub mod clh;
pub mod futex;
pub mod mcs;
#[cfg(not(loom))]
pub mod metered;
mod qnode;
pub mod qrwlock;
pub mod qspin;
pub mod relax;
pub mod tas;
pub mod ticket;
pub mod ttas;
pub mod unfair;

pub use adaptive::Adaptive;
pub use clh::Clh;
pub use futex::FutexMutex;
pub use mcs::Mcs;
#[cfg(not(loom))]
pub use metered::Metered;
pub use qrwlock::QRwLock;
pub use qspin::QSpin;
pub use tas::Tas;
pub use ticket::Ticket;
pub use ttas::Ttas;
pub use unfair::UnfairQ;

/// A mutex over any raw lock of this crate (`lock_api::Mutex`).
pub type Mutex<R, T> = lock_api::Mutex<R, T>;
/// A reader-writer lock over a raw rwlock of this crate (`lock_api::RwLock`).
pub type RwLock<R, T> = lock_api::RwLock<R, T>;

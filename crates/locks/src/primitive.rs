//! The primitives every algorithm is written against, swapped for loom's under `--cfg loom`
//! (crossbeam's pattern), so that the same code runs in the model checker.

#[cfg(loom)]
mod imp {
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64};
    /// One step of a spin loop (under loom: a yield, so the model checker can switch threads).
    #[inline(always)]
    pub(crate) fn spin_loop() {
        loom::hint::spin_loop();
    }
}

#[cfg(not(loom))]
mod imp {
    pub(crate) use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64};
    /// One step of a spin loop: PAUSE on x86, ISB/YIELD on aarch64.
    #[inline(always)]
    pub(crate) fn spin_loop() {
        core::hint::spin_loop();
    }
}

pub(crate) use core::sync::atomic::Ordering;
pub(crate) use imp::*;

/// Nanoseconds of `CLOCK_MONOTONIC` (vDSO). Under loom time does not move.
#[inline]
pub(crate) fn now_ns() -> u64 {
    #[cfg(loom)]
    {
        0
    }
    #[cfg(not(loom))]
    {
        lockmeter_core::clock::monotonic_ns()
    }
}

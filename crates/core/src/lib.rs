//! The metering engine of lockmeter.
//!
//! Everything a collector needs to meter locks without disturbing them:
//!
//! - [`clock`]: a TSC clock calibrated to nanoseconds (falls back to `CLOCK_MONOTONIC` where the
//!   TSC is not invariant), converted to ns with one multiply and one shift.
//! - [`hist`]: log2 histograms, bucket = most significant bit of the value (seed 000).
//! - [`stats`]: the per-record statistics ([`Stats`], plain and mergeable) and their single-writer
//!   live form ([`LiveStats`]), updated with plain relaxed loads and stores, never an RMW.
//! - [`table`]: a growable, single-writer table of records (one per thread: the shard) over
//!   memory mapped through a [`table::Memory`] (the preload's caps what it maps). Records never
//!   move; what cannot be mapped is counted, never corrupting what is kept.
//! - [`fixed`]: the one fixed-capacity concurrent table (insert, lookup, overflow count) over
//!   caller-provided entries: one writer or many, lock-free lookups. The stack, event and class
//!   tables are built on it.
//! - [`stacks`]: interned call stacks and aggregated contention events (who waited on whom).
//! - [`settings`]: every collector setting, defined once (variable, `run` flag, default, help).
//! - [`timeline`]: a bounded time series of per-lock sums (`run --interval`), merging neighbours
//!   when full.
//! - [`registry`]: the process-wide lock registry: lock address → identity (slot, generation,
//!   kind) plus the shared state that owner changes and holder attribution need. Lock-free.
//! - [`idents`]: the preload's record keys and tags, and how records of ended lock identities
//!   fold into their class (pure logic of the collector, tested here).
//! - [`ehframe`]: the `.eh_frame_hdr` search table: which function a code address is in.
//! - [`procstat`]: the `/proc/PID/stat` fields parser (the CLI's guardians, the kernel collector).
//! - [`classes`]: lock classes (init or first-use site), on [`fixed`] with many writers.
//!
//! Nothing here allocates, locks, or makes a syscall on the hot path: memory is handed in by the
//! collector (the preload maps it with `mmap`; a table asks for more on its slow path, when it
//! grows), and every update is a relaxed atomic access.
//!
//! ```
//! use lockmeter_core::hist::Log2Hist;
//! let h = Log2Hist::new();
//! h.record(1000); // 1000 ns falls in bucket 10: [512, 1024)
//! assert_eq!(h.snapshot()[10], 1);
//! ```

pub mod classes;
pub mod clock;
pub mod cost_model;
pub mod ehframe;
pub mod fixed;
pub mod hist;
pub mod idents;
mod memory;
pub mod probe;
pub mod procstat;
pub mod registry;
pub mod reservoir;
pub mod settings;
pub mod stacks;
pub mod stats;
pub mod table;
pub mod timeline;

pub use stats::{LiveStats, LockKind, Mode, Stats};

/// A single-writer counter: only one thread ever writes it, any thread may read it.
///
/// `add` is a relaxed load and store, not a locked read-modify-write: on x86_64 it compiles to a
/// plain `add` to memory, and readers on other threads never see a torn value.
#[derive(Debug, Default)]
#[repr(transparent)]
pub struct Counter(core::sync::atomic::AtomicU64);

impl Counter {
    /// A zero counter.
    pub const fn new() -> Self {
        Counter(core::sync::atomic::AtomicU64::new(0))
    }
    /// Adds `v`. Must only be called by the counter's single writer.
    #[inline(always)]
    pub fn add(&self, v: u64) {
        use core::sync::atomic::Ordering::Relaxed;
        self.0.store(self.0.load(Relaxed).wrapping_add(v), Relaxed);
    }
    /// Raises the counter to `v` if `v` is larger. Single writer only.
    #[inline(always)]
    pub fn max(&self, v: u64) {
        use core::sync::atomic::Ordering::Relaxed;
        if v > self.0.load(Relaxed) {
            self.0.store(v, Relaxed);
        }
    }
    /// Sets the counter. Single writer only.
    #[inline(always)]
    pub fn set(&self, v: u64) {
        self.0.store(v, core::sync::atomic::Ordering::Relaxed);
    }
    /// Reads the counter (from any thread).
    #[inline(always)]
    pub fn get(&self) -> u64 {
        self.0.load(core::sync::atomic::Ordering::Relaxed)
    }
}

/// The largest power of two not above `n` (0 for 0): the usable capacity of the fixed-size,
/// open-addressed tables of this crate, which index with a mask.
#[inline]
pub(crate) const fn pow2_floor(n: usize) -> usize {
    if n == 0 { 0 } else { 1usize << (usize::BITS - 1 - n.leading_zeros()) }
}

/// The name every collector guardian gives itself (`prctl(PR_SET_NAME)`, the preload's
/// `guard.rs`): how `run` tells lockmeter's own guardian processes from the program's.
pub const GUARDIAN_NAME: &core::ffi::CStr = c"lockmeter-guard";

/// A fast, well-mixing 64-bit hash (the `fmix64` finalizer of MurmurHash3).
#[inline(always)]
pub const fn mix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

#[cfg(test)]
mod tests {
    #[test]
    fn pow2_floor() {
        for (n, want) in [
            (0, 0),
            (1, 1),
            (2, 2),
            (3, 2),
            (64, 64),
            (100, 64),
            (usize::MAX, 1 << (usize::BITS - 1)),
        ] {
            assert_eq!(super::pow2_floor(n), want, "pow2_floor({n})");
        }
    }
}

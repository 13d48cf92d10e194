//! Global and per-thread state.
//!
//! - The state machine `Uninit -> Ready <-> Paused -> Dumping/Disabled`: hooks meter only in `Ready` and pass
//!   every call straight through otherwise (before the constructor, after the profile was written,
//!   when disabled by configuration or failure).
//! - The lock registry (shared) and one shard per thread (private), both in `mmap`ed memory.
//! - The per-thread TLS block: a `const`-initialized cell block without a destructor, so it is
//!   usable at any point of a thread's life, even during TLS teardown.
//! - Shard recycling: a thread's exit (a pthread key destructor) marks its shard *retiring*; once
//!   every index of the pool is taken, a new thread takes a retiring shard over, only once the kernel no longer knows the old thread's tid
//!   (so none of its hooks can still run: not in a later TLS destructor, nor anywhere else). The
//!   taker folds the old thread's records into the shard's *exited* accumulation (written into the
//!   profile as one "[N exited threads]" row, counts exact), empties the tables and starts afresh
//!   under the same index with a new owner id.
//!
//! This file holds the state machine and the limits; `config.rs` the configuration, the registry
//! and the memory, `shards.rs` the shards and their recycling, `tls.rs` the TLS block and the
//! way in and out of metering.

mod config;
mod shards;
mod tls;

pub(crate) use config::{
    CFG, MAPPED_BYTES, MAX_MEMORY, SCRATCH, init_registry, map_counted, map_kept, map_zeroed,
    registry, ticks_to_ns, unmap_kept,
};
pub(crate) use shards::{
    ACQ_NO_SHARD, Cached, CpuCounters, Held, NEXT_THREAD, Private, SHARDS, Shard, SiteStack,
    THREADS_REFUSED, grow_lookups, init_recycling, shards,
};
pub(crate) use tls::{
    Cx, enter, init_own, leave, own_again, own_process, reset_thread, set_busy, unmetered,
};

use core::sync::atomic::AtomicU8;

/// Hooks pass through: not initialized yet.
pub(crate) const UNINIT: u8 = 0;

/// Hooks meter.
pub(crate) const READY: u8 = 1;

/// The profile is being (or was) written: hooks pass through.
pub(crate) const DONE: u8 = 2;

/// Disabled by configuration or after a failure.
pub(crate) const DISABLED: u8 = 3;

/// Paused on request (`lockmeter ctl PID pause`, `--delay`, `--duration`): hooks pass through.
pub(crate) const PAUSED: u8 = 4;

pub(crate) static STATE: AtomicU8 = AtomicU8::new(UNINIT);

/// Set while the constructor meters its calibration lock (no first-use stacks for it).
pub(crate) static CALIBRATING: core::sync::atomic::AtomicBool =
    core::sync::atomic::AtomicBool::new(false);

/// Most threads that get a shard (hard limit of `LOCKMETER_THREADS`).
pub(crate) const MAX_THREADS: usize = lockmeter_core::settings::MAX_THREADS as usize;

/// CPUs counted per shard.
pub(crate) const MAX_CPUS: usize = 1024;

/// Depth of the per-thread stack of held locks.
pub(crate) const HELD_MAX: usize = 64;

/// The per-thread lookup cache, two-way set-associative by (lock, call site, mode): at most `1 <<
/// LOOKUP_BITS` lines of 32 bytes reserved in the thread's shard mapping (256 KiB), of which the
/// thread uses `1 << Private::lookup_bits`: from `1 << LOOKUP_MIN_BITS` (one page), doubled
/// whenever its record table holds more than half as many records as the cache has lines (and
/// `--max-memory` leaves room for them: the lines in use are charged as mapped memory), so the
/// memory it commits follows the locks the thread takes (at most 64 bytes per record). A thread
/// that takes thousands of locks finds the record and registry slot of each in one probe, without
/// touching the shared registry's hash chains or its record table's index.
pub(crate) const LOOKUP_BITS: u32 = 13;
pub(crate) const LOOKUP_MIN_BITS: u32 = 7;

/// Entries of the per-thread cache of stacks by call site (a power of two).
pub(crate) const SITE_STACKS: usize = 64;

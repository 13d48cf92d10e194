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
    ACQ_NO_SHARD, Cached, Held, NEXT_THREAD, Private, SHARDS, Shard, SiteStack, THREADS_REFUSED,
    grow_lookups, init_recycling, shards,
};
pub(crate) use tls::{
    Cx, Entered, Here, OWN_PENDING, enter, enter_quick, fork_pending, init_own, init_tls_offset,
    leave, own_again, own_page, own_process, reset_thread, set_busy, thread_tid, unmetered,
};

use core::sync::atomic::{AtomicI32, AtomicIsize, AtomicPtr, AtomicU8, AtomicU64, AtomicUsize};

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

pub(crate) static STATE: &AtomicU8 = &HOT.state;

/// The process-wide words a metered uncontended lock+unlock pair reads, in one cache line (in a
/// real program the hooks' data is evicted between lock calls: each line is a miss). Each keeps
/// its own name where it is used, a `&'static` to its field here (a constant the compiler folds:
/// no load through it).
#[repr(C, align(64))]
pub(crate) struct Hot {
    /// [`STATE`].
    pub(crate) state: AtomicU8,
    /// `sys::CPU_MODE`.
    pub(crate) cpu_mode: AtomicU8,
    /// `swap::ALGO`.
    pub(crate) swap_algo: AtomicU8,
    /// Nonzero when the clock is the TSC (`lockmeter_core::clock::source`, copied: see [`now`]).
    pub(crate) clock_tsc: AtomicU8,
    /// `sys::RSEQ_OFFSET`.
    pub(crate) rseq_offset: AtomicI32,
    /// `tls::OWN`.
    pub(crate) own: AtomicPtr<AtomicU8>,
    /// `real::mutex_trylock`'s and `real::mutex_unlock`'s function pointers.
    pub(crate) mutex_trylock: AtomicUsize,
    pub(crate) mutex_unlock: AtomicUsize,
    /// `live::RESUMED_TICKS`.
    pub(crate) resumed_ticks: AtomicU64,
    /// The TLS block's offset from the thread pointer (`tls::init_tls_offset`).
    pub(crate) tls_off: AtomicIsize,
    /// `CFG`: its leading fields (`hold_every`, `stack_sample`, `calib_mult`) in this line.
    pub(crate) cfg: config::Config,
}

pub(crate) static HOT: Hot = Hot {
    state: AtomicU8::new(UNINIT),
    cpu_mode: AtomicU8::new(0),
    swap_algo: AtomicU8::new(0),
    clock_tsc: AtomicU8::new(0),
    rseq_offset: AtomicI32::new(0),
    own: AtomicPtr::new(&tls::ALWAYS_OWN as *const AtomicU8 as *mut AtomicU8),
    mutex_trylock: AtomicUsize::new(0),
    mutex_unlock: AtomicUsize::new(0),
    resumed_ticks: AtomicU64::new(0),
    tls_off: AtomicIsize::new(0),
    cfg: config::Config::new(),
};

/// Makes the TSC the clock (constructor): `lockmeter_core::clock`'s and [`now`]'s.
pub(crate) fn use_tsc() {
    lockmeter_core::clock::set_source(lockmeter_core::clock::Source::Tsc);
    HOT.clock_tsc.store(1, core::sync::atomic::Ordering::Relaxed);
}

/// `lockmeter_core::clock::now`, the same clock, its choice read from [`HOT`]'s line (the
/// core's word is a line more, reached through the GOT).
#[inline(always)]
pub(crate) fn now() -> u64 {
    if HOT.clock_tsc.load(core::sync::atomic::Ordering::Relaxed) != 0 {
        lockmeter_core::clock::tsc()
    } else {
        lockmeter_core::clock::monotonic_ns()
    }
}

const _: () = {
    use core::mem::offset_of;
    assert!(offset_of!(Hot, cfg) + offset_of!(config::Config, calib_mult) + 8 <= 64);
    assert!(offset_of!(Hot, cfg) + offset_of!(config::Config, stack_sample) + 4 <= 64);
    assert!(offset_of!(Hot, cfg) + offset_of!(config::Config, hold_every) + 4 <= 64);
};

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
/// LOOKUP_BITS` lines of 32 bytes reserved in the thread's shard mapping (1 MiB), of which the
/// thread uses `1 << Private::lookup_bits`: from `1 << LOOKUP_MIN_BITS` (one page), doubled
/// whenever its record table holds more than a quarter as many records as the cache has lines
/// (and `--max-memory` leaves room for them: the lines in use are charged as mapped memory), so
/// the memory it commits follows the locks the thread takes (at most 128 bytes per record). A
/// thread that takes thousands of locks finds the record and registry slot of each in one probe,
/// without touching the shared registry's hash chains or its record table's index. (At half as
/// many lines, a two-way cache of memcached's ~5,000 (lock, site) pairs per worker thread missed
/// on one acquisition in 20, mostly two keys evicting each other from a set; at a quarter, one
/// in 90.)
pub(crate) const LOOKUP_BITS: u32 = 15;
pub(crate) const LOOKUP_MIN_BITS: u32 = 7;

/// Entries of the per-thread cache of stacks by call site (a power of two).
pub(crate) const SITE_STACKS: usize = 64;

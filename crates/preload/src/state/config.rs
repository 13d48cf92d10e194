//! The run's configuration (`CFG`, set once by the constructor), the lock registry, and the
//! collector's memory: counted mappings, the growing record tables' memory (`MEM`, bounded by
//! `--max-memory`) and the profile writer's uncounted scratch memory.

use crate::sys;
use core::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering::*};
use lockmeter_core::clock::Calibration;
use lockmeter_core::registry::{Registry, Slot};
use lockmeter_core::settings;
use lockmeter_core::table::Memory;

/// Run-time configuration (set once in the constructor). `repr(C)`: the fields the uncontended
/// pair reads come first, in the cache line of `state::HOT` (which holds `CFG`).
#[repr(C)]
pub(crate) struct Config {
    /// 0 = time every hold, 1 = never, N >= 2 = one hold in N.
    pub(crate) hold_every: AtomicU32,
    /// Record the stack of one acquisition in N (0: only contended ones).
    pub(crate) stack_sample: AtomicU32,
    pub(crate) calib_mult: AtomicU64,
    pub(crate) records_per_thread: AtomicU64,
    pub(crate) max_threads: AtomicU32,
    /// Frames recorded per stack (0: no stacks).
    pub(crate) frames: AtomicU32,
    pub(crate) calib_hz: AtomicU64,
    pub(crate) stacks_per_thread: AtomicU64,
    pub(crate) events_per_thread: AtomicU64,
}

impl Config {
    /// The defaults (the constructor sets the run's).
    pub(crate) const fn new() -> Self {
        Config {
            hold_every: AtomicU32::new(0),
            stack_sample: AtomicU32::new(0),
            calib_mult: AtomicU64::new(1 << Calibration::SHIFT),
            records_per_thread: AtomicU64::new(settings::RECORDS.default_count()),
            max_threads: AtomicU32::new(settings::THREADS.default_count() as u32),
            frames: AtomicU32::new(settings::FRAMES.default_count() as u32),
            calib_hz: AtomicU64::new(1_000_000_000),
            stacks_per_thread: AtomicU64::new(settings::STACKS.default_count()),
            events_per_thread: AtomicU64::new(settings::EVENTS.default_count()),
        }
    }
}

pub(crate) static CFG: &Config = &super::HOT.cfg;

/// Ticks to ns with the calibration in force.
#[inline(always)]
pub(crate) fn ticks_to_ns(t: u64) -> u64 {
    let mult = CFG.calib_mult.load(Relaxed);
    // One widening multiply (x86_64: `mul`, `shrd`), no branch.
    ((t as u128 * mult as u128) >> Calibration::SHIFT) as u64
}

static REGISTRY: AtomicPtr<Registry<'static>> = AtomicPtr::new(core::ptr::null_mut());

/// The lock registry (after start-up).
#[inline(always)]
pub(crate) fn registry() -> Option<&'static Registry<'static>> {
    // SAFETY: the pointer is either null or points at a Registry written once in `init_registry`
    // into memory that is never unmapped.
    unsafe { REGISTRY.load(Acquire).as_ref() }
}

/// Maps `n` zeroed bytes (never freed). Null on failure.
pub(crate) fn map_zeroed(n: usize) -> *mut u8 {
    // SAFETY: an anonymous private mapping has no preconditions.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            n,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED { core::ptr::null_mut() } else { p.cast() }
}

/// Maps `n` zeroed bytes of a long-lived table (never freed, or given back with [`unmap_kept`]):
/// from the memory shared with the watcher when there is some, so that it sees the table too
/// (see `shared.rs`); else privately. Null on failure.
pub(crate) fn map_kept(n: usize) -> *mut u8 {
    crate::shared::map(n).unwrap_or_else(|| map_zeroed(n))
}

/// Gives back a table of `n` bytes mapped by [`map_kept`].
///
/// # Safety
/// `p` came from `map_kept(n)` and nothing uses it any more.
pub(crate) unsafe fn unmap_kept(p: *mut u8, n: usize) {
    if !crate::shared::release(p, n) {
        // SAFETY: a private mapping of this size (the caller's contract).
        unsafe { libc::munmap(p.cast(), n) };
    }
}

/// The collector's memory (reported as its memory cost, and what `--max-memory` caps): its fixed
/// structures (the registry, the names arena, one header per thread) at their mapped size, and
/// each record at the most it can have resident, [`lockmeter_core::table::RECORD_BYTES`] (record
/// tables are mapped reserved and touched only as records fill them). The profile writer's
/// scratch mappings at exit are not counted.
pub(crate) static MAPPED_BYTES: AtomicU64 = AtomicU64::new(0);

/// Most bytes `MAPPED_BYTES` may reach with records (`--max-memory`).
pub(crate) static MAX_MEMORY: AtomicU64 = AtomicU64::new(settings::MAX_MEMORY.default_count());

/// Maps `n` zeroed bytes of a fixed structure, counted in `MAPPED_BYTES`, never refused by the
/// cap. Null when the kernel refuses.
pub(crate) fn map_counted(n: usize) -> *mut u8 {
    let p = map_kept(n);
    if !p.is_null() {
        MAPPED_BYTES.fetch_add(n as u64, Relaxed);
        crate::resident::note(p, n);
    }
    p
}

/// The memory of the growing record tables: reserved mappings, each record charged to
/// `MAPPED_BYTES` within `--max-memory`.
pub(crate) struct Mapped;

/// The memory of the threads' record tables.
pub(crate) static MEM: Mapped = Mapped;

// SAFETY: `map` returns fresh anonymous mappings (zeroed, page-aligned, each its own) or null.
unsafe impl Memory for Mapped {
    /// Leaves `errno` as it found it: hooks call it when a table grows.
    fn map(&self, bytes: usize) -> *mut u8 {
        let saved = sys::errno();
        let p = map_kept(bytes);
        if !p.is_null() {
            crate::resident::note(p, bytes);
        }
        sys::set_errno(saved);
        p
    }
    unsafe fn unmap(&self, p: *mut u8, bytes: usize) {
        let saved = sys::errno();
        crate::resident::forget(p);
        // SAFETY: a mapping made by `map` with this size (the caller's contract).
        unsafe { unmap_kept(p, bytes) };
        sys::set_errno(saved);
    }
    fn charge(&self, bytes: usize) -> bool {
        let b = bytes as u64;
        if MAPPED_BYTES.fetch_add(b, Relaxed).saturating_add(b) > MAX_MEMORY.load(Relaxed) {
            MAPPED_BYTES.fetch_sub(b, Relaxed);
            return false;
        }
        true
    }
    fn refund(&self, bytes: usize) {
        MAPPED_BYTES.fetch_sub(bytes as u64, Relaxed);
    }
}

/// Uncounted memory for the profile writer's scratch tables at exit (freed when written).
pub(crate) struct Scratch;

/// See [`Scratch`].
pub(crate) static SCRATCH: Scratch = Scratch;

// SAFETY: as for `Mapped`.
unsafe impl Memory for Scratch {
    fn map(&self, bytes: usize) -> *mut u8 {
        map_zeroed(bytes)
    }
    unsafe fn unmap(&self, p: *mut u8, bytes: usize) {
        // SAFETY: a mapping made by `map` with this size (the caller's contract).
        unsafe { libc::munmap(p.cast(), bytes) };
    }
}

/// Creates the registry with `capacity` slots. Called once from the constructor.
pub(crate) fn init_registry(capacity: usize) -> bool {
    let slots_bytes = capacity * size_of::<Slot>();
    let total = slots_bytes + size_of::<Registry<'static>>() + 64;
    let mem = map_counted(total);
    if mem.is_null() {
        return false;
    }
    // SAFETY: `mem` is a fresh zeroed mapping of `total` bytes, page-aligned; zeroed memory is a
    // valid `Slot` (all atomics). The Registry value is written after the slots, 64-aligned.
    unsafe {
        let slots = core::slice::from_raw_parts(mem as *const Slot, capacity);
        let rp = mem.add((slots_bytes + 63) & !63) as *mut Registry<'static>;
        rp.write(Registry::new(slots));
        REGISTRY.store(rp, Release);
    }
    true
}

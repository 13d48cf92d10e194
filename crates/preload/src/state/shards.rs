//! One shard per thread: its tables, its private part (held stack, caches) and per-CPU
//! counters; their creation, and their recycling: a new thread takes over the shard of a thread
//! the kernel no longer knows, folding the dead thread's records into the shard's exited
//! accumulation.

use super::config::{CFG, MAPPED_BYTES, MEM, map_counted, map_kept, registry};
use super::{HELD_MAX, LOOKUP_BITS, LOOKUP_MIN_BITS, MAX_CPUS, MAX_THREADS, SITE_STACKS};
use crate::sys;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicU32, AtomicU64, Ordering::*};
use lockmeter_core::Counter;
use lockmeter_core::registry::Slot;
use lockmeter_core::stacks::{EventEntry, EventTable, StackEntry, StackStore};
use lockmeter_core::table::Table;

/// One held lock, on the holder's stack. `repr(C)`: the eBPF collector reads `addr` of the top
/// entry of a preempted thread (see [`lockmeter_thread_held`]).
#[derive(Clone, Copy)]
#[repr(C)]
pub(crate) struct Held {
    pub(crate) addr: usize,
    pub(crate) entry: *const lockmeter_core::LiveStats,
    pub(crate) slot: *const Slot,
    /// Acquisition time in ticks; 0 when this hold is not timed.
    pub(crate) t_acq: u64,
    pub(crate) mode: u8,
    /// A semaphore hold, which another thread can end (by posting the semaphore).
    pub(crate) sem: bool,
    /// The slot's `epoch` when a semaphore was taken: the hold is over once it moved on.
    pub(crate) epoch: u32,
}

/// A lookup-cache line: (lock, site and mode) -> record, registry slot and generation. 32 bytes,
/// all-zero when unused.
#[derive(Clone, Copy)]
#[repr(C)]
pub(crate) struct Cached {
    pub(crate) addr: usize,
    /// The call site, with the mode in bits 56 and up (code addresses stay below 2^56).
    pub(crate) site_mode: usize,
    pub(crate) entry: *const lockmeter_core::table::Entry,
    /// The registry slot's index (high half) and the identity's generation (low half).
    pub(crate) slot_gen: u64,
}

const _: () = assert!(size_of::<Cached>() == 32);

/// Where a shard's lookup cache lies in its mapping: right after the shard (page-aligned), at the
/// same offset in every shard, so that a hook finds it without a load.
pub(crate) const LOOKUP_OFF: usize = (size_of::<Shard>() + 4095) & !4095;

/// Bytes of the lookup cache's lines in use at first (one page).
const LOOKUP_MIN_BYTES: usize = (1 << LOOKUP_MIN_BITS) * size_of::<Cached>();

/// Doubles the lines of the calling thread's lookup cache from `1 << bits` if `--max-memory`
/// leaves room for the lines added (charged as mapped memory; they stay charged for the life of
/// the shard). Whether it did.
pub(crate) fn grow_lookups(bits: u32) -> bool {
    use lockmeter_core::table::Memory;
    bits < LOOKUP_BITS && MEM.charge((1 << bits) * size_of::<Cached>())
}

/// Bytes of a thread's lookup cache (a whole number of pages).
const LOOKUP_BYTES: usize = (1 << LOOKUP_BITS) * size_of::<Cached>();

/// A line of the cache of stacks by call site: the stack (interned in the thread's stack store)
/// last unwound through `key`, how many times the line was used since, and the event entry last
/// found for (`event_lock`, that stack) (null: none).
#[derive(Clone, Copy)]
pub(crate) struct SiteStack {
    pub(crate) key: usize,
    pub(crate) hash: u64,
    pub(crate) uses: u32,
    pub(crate) event_lock: u64,
    pub(crate) event: *const lockmeter_core::stacks::EventEntry,
}

/// The part of a shard only its thread touches. `repr(C)` with `held` first: the eBPF collector
/// reads it and `held_len` (at the offset given to [`lockmeter_thread_held`]).
///
/// 64-byte aligned, so that `held` is a whole number of cache lines and the words an uncontended
/// lock+unlock pair reads and writes besides `held[0]` (`held_len` through `owner`) share the one
/// line after it (checked below): with `held[0]`, two lines of the thread's own.
#[repr(C, align(64))]
pub(crate) struct Private {
    pub(crate) held: [Held; HELD_MAX],
    pub(crate) held_len: usize,
    /// Acquisitions to come that no sampling decision is due for, the countdowns below already
    /// advanced over them (see `meter::record::refill`): the fast path only counts this down.
    pub(crate) quiet: u32,
    /// Lines of the thread's lookup cache in use: `1 << lookup_bits` ([`LOOKUP_MIN_BITS`] when the
    /// shard is made) of the `1 << LOOKUP_BITS` reserved at [`LOOKUP_OFF`] in the shard's mapping
    /// (see [`Shard::lookups`] and `meter::lookup`).
    pub(crate) lookup_bits: u32,
    /// The registry's first slot, set when the first line is placed: a line's slot index is an
    /// offset from it.
    pub(crate) slot_base: *const Slot,
    /// The condvar wait this thread is in: (mutex, call site, start ticks); addr 0 when none.
    /// Left set when the wait is cancelled: glibc re-acquires the mutex before unwinding, and the
    /// cleanup handler's unlock then finds it here instead of on the held stack.
    pub(crate) cond_addr: usize,
    /// Count acquisitions, releases and holder-side captures for cost sampling (see `cost`).
    pub(crate) cost_acq: u32,
    pub(crate) cost_rel: u32,
    /// Counts acquisitions for stack sampling.
    pub(crate) stack_sample: u32,
    pub(crate) sample: u32,
    /// [`Shard::owner`], the thread's owner id in the registry, as the fast path reads it (set
    /// with it by `Shard::set_thread`, on the thread itself).
    pub(crate) owner: u32,
    /// The thread's per-CPU acquisition count kept in this line rather than in
    /// [`Shard::cpus`] (a line more per acquisition): the CPU it last counted on
    /// (`u32::MAX`: none) and how many acquisitions on it are not yet added to that CPU's
    /// counter, added when the CPU changes (`meter::fast::count_cpu`). Atomic: readers of the
    /// per-CPU counts on other threads fold it in ([`Shard::cpu_acquisitions`]).
    pub(crate) cpu_last: AtomicU32,
    pub(crate) cpu_pending: AtomicU64,
    pub(crate) cost_holding: u32,
    /// The cost estimate's countdown of lock initializations and destructions (`cost::Lifetime`).
    pub(crate) cost_life: u32,
    pub(crate) cond_site: usize,
    pub(crate) cond_t0: u64,
    pub(crate) cond_wanted: bool,
    /// This thread's unwind cache (null: no stacks for this thread).
    pub(crate) unwind_cache: *mut crate::unwind::TheCache,
    /// Stacks by call site (see `meter::site_stack`); zeroed with the stack store.
    pub(crate) site_stacks: [SiteStack; SITE_STACKS],
}

// The uncontended pair's words (`held_len` .. `owner`) in the one line after `held`.
const _: () = {
    use core::mem::offset_of;
    assert!(offset_of!(Private, held_len) % 64 == 0);
    assert!(offset_of!(Private, owner) + 4 <= offset_of!(Private, held_len) + 64);
    assert!(offset_of!(Private, cond_addr) + 8 <= offset_of!(Private, held_len) + 64);
    assert!(offset_of!(Private, cpu_last) + 4 <= offset_of!(Private, held_len) + 64);
    assert!(offset_of!(Private, cpu_pending) + 8 <= offset_of!(Private, held_len) + 64);
};

/// Per-CPU counters of one thread.
#[derive(Default)]
pub(crate) struct CpuCounters {
    pub(crate) acquisitions: Counter,
    pub(crate) contended: Counter,
    pub(crate) wait_ns: Counter,
}

/// What the dead threads that used a shard before its current thread left behind (see the module
/// docs). Written only by the shard's current owner, when it takes the shard over.
pub(crate) struct Exited {
    /// Threads folded in.
    pub(crate) threads: Counter,
    pub(crate) table: Table<'static>,
    pub(crate) stacks: StackStore<'static>,
    pub(crate) events: EventTable<'static>,
}

/// `Shard::life`: its thread runs.
const LIVE: u32 = 0;

/// `Shard::life`: its thread's exit began (its pthread key destructor ran).
const RETIRING: u32 = 1;

/// `Shard::life`: a new thread is taking it over.
const TAKING: u32 = 2;

/// One thread's statistics. Lives in `mmap`ed memory for the life of the process.
pub(crate) struct Shard {
    /// 1-based thread index (the thread's row in the profile).
    pub(crate) index: u32,
    /// The owner id in the registry: `index` for the shard's first thread, a fresh id above
    /// `MAX_THREADS` for each later one (so an owner change between them is seen).
    pub(crate) owner: AtomicU32,
    pub(crate) tid: AtomicU32,
    /// Thread name at the time of its first lock.
    pub(crate) name: [AtomicU8; 16],
    /// `LIVE`, `RETIRING` or `TAKING`.
    life: AtomicU32,
    /// Dead threads' records (null until the shard is first taken over).
    pub(crate) exited: AtomicPtr<Exited>,
    /// Acquisitions not recorded because the table was full.
    pub(crate) dropped: Counter,
    /// Acquisitions not recorded because the lock registry was full.
    pub(crate) dropped_registry: Counter,
    /// Holds not timed because `held` was full.
    pub(crate) held_overflow: Counter,
    pub(crate) table: Table<'static>,
    /// Interned call stacks of this thread.
    pub(crate) stacks: StackStore<'static>,
    /// Contention events (waiter stack x holder) and first uses.
    pub(crate) events: EventTable<'static>,
    /// Stacks or events that did not fit.
    pub(crate) stacks_dropped: Counter,
    /// What the hooks cost this thread, measured (see `cost`).
    pub(crate) cost: crate::cost::CostCounters,
    /// Upper bound of this thread's stack (stack reads never go at or above it).
    pub(crate) stack_top: AtomicU64,
    pub(crate) cpus: [CpuCounters; MAX_CPUS],
    pub(crate) private: UnsafeCell<Private>,
}

// SAFETY: the shared fields are atomics (`Counter`, `Table`); `private` is only accessed by the
// owning thread, inside a hook, with the thread's `busy` flag set (so never re-entrantly).
unsafe impl Sync for Shard {}

pub(crate) static SHARDS: [AtomicPtr<Shard>; MAX_THREADS] =
    [const { AtomicPtr::new(core::ptr::null_mut()) }; MAX_THREADS];

pub(crate) static NEXT_THREAD: AtomicU32 = AtomicU32::new(0);

/// Threads refused a shard, and their acquisitions.
pub(crate) static THREADS_REFUSED: AtomicU64 = AtomicU64::new(0);

pub(crate) static ACQ_NO_SHARD: AtomicU64 = AtomicU64::new(0);

/// The next owner id of a taken-over shard.
static NEXT_OWNER: AtomicU32 = AtomicU32::new(MAX_THREADS as u32 + 1);

/// The pthread key whose destructor marks a thread's shard retiring, when recycling is on.
static EXIT_KEY: AtomicU32 = AtomicU32::new(0);

static RECYCLE: AtomicBool = AtomicBool::new(false);

impl Shard {
    /// The thread's lookup cache: `1 << LOOKUP_BITS` lines at [`LOOKUP_OFF`] in the shard's
    /// mapping (its address exposed when the shard was made). Only the shard's thread uses it,
    /// inside its hooks.
    #[inline(always)]
    pub(crate) fn lookups(&self) -> *mut Cached {
        core::ptr::with_exposed_provenance_mut(self as *const Shard as usize + LOOKUP_OFF)
    }

    /// The acquisitions counted on `cpu`: its counter in [`Shard::cpus`] plus the count
    /// [`Private::cpu_pending`] holds for it ([`Private::cpu_last`] being `cpu`). Exact once
    /// the thread is quiet; while it runs, a live reader may be off by the pending count while
    /// it moves to its counter ([`Shard::flush_cpu_pending`]).
    pub(crate) fn cpu_acquisitions(&self, cpu: usize) -> u64 {
        let counted = self.cpus.get(cpu).map_or(0, |c| c.acquisitions.get());
        let (last, pending) = self.cpu_words();
        if last.load(Relaxed) as usize == cpu { counted + pending.load(Relaxed) } else { counted }
    }

    /// [`Private::cpu_last`] and [`Private::cpu_pending`], reached from any thread.
    fn cpu_words(&self) -> (&AtomicU32, &AtomicU64) {
        let p = self.private.get();
        // SAFETY: only the two atomic words are reached, through raw pointers to them (no
        // reference to the rest of `private`); their thread writes them only atomically.
        unsafe { (&*core::ptr::addr_of!((*p).cpu_last), &*core::ptr::addr_of!((*p).cpu_pending)) }
    }

    /// Moves the count [`Private::cpu_pending`] holds to its CPU's counter in [`Shard::cpus`]
    /// and leaves none pending, for no CPU. The words are cleared first, so that a reader
    /// meanwhile misses the count rather than counting it twice. Called by the shard's thread,
    /// or by the thread taking the shard over once its thread is gone (one writer).
    pub(crate) fn flush_cpu_pending(&self) {
        let (last, pending) = self.cpu_words();
        let cpu = last.load(Relaxed);
        last.store(u32::MAX, Relaxed);
        let n = pending.load(Relaxed);
        pending.store(0, Relaxed);
        if let Some(c) = self.cpus.get(cpu as usize) {
            c.acquisitions.add(n);
        }
    }

    /// Clears the per-CPU counts (the constructor's calibration, before any other thread meters).
    pub(crate) fn clear_cpus(&self) {
        self.flush_cpu_pending();
        for c in self.cpus.iter() {
            c.acquisitions.set(0);
            c.contended.set(0);
            c.wait_ns.set(0);
        }
    }

    /// The thread's name as recorded at its first lock.
    pub(crate) fn name(&self) -> ([u8; 16], usize) {
        let n: [u8; 16] = core::array::from_fn(|i| self.name[i].load(Relaxed));
        let len = n.iter().position(|&c| c == 0).unwrap_or(n.len());
        (n, len)
    }

    /// Records the calling thread as this shard's thread.
    fn set_thread(&self, owner: u32) {
        let mut name = [0u8; 16];
        // SAFETY: PR_GET_NAME writes at most 16 bytes into `name`.
        unsafe { libc::prctl(libc::PR_GET_NAME, name.as_mut_ptr()) };
        for (d, s) in self.name.iter().zip(name) {
            d.store(s, Relaxed);
        }
        self.tid.store(sys::gettid(), Relaxed);
        self.stack_top.store(thread_stack_top(), Relaxed);
        self.owner.store(owner, Relaxed);
        // SAFETY: called on the shard's own thread, inside its hooks' bookkeeping (busy flag set)
        // or before the shard is published: no other reference to `private` is live.
        unsafe { (*self.private.get()).owner = owner };
    }
}

/// The pthread key destructor: the thread is exiting. Its shard is only marked: hooks of this
/// thread may still run (in later destructors) and keep using it until the thread is gone.
extern "C" fn on_thread_exit(p: *mut core::ffi::c_void) {
    // SAFETY: the key's value is only ever set (in `publish`) to a shard, never unmapped.
    if let Some(sh) = unsafe { (p as *const Shard).as_ref() } {
        sh.life.store(RETIRING, Release);
    }
}
/// Creates the thread-exit key (constructor only). Recycling stays off unless the key is one of
/// the first 32, whose values glibc keeps inside the thread (so setting it never allocates).
pub(crate) fn init_recycling() {
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: `key` is a valid out-pointer; the destructor is a plain extern "C" function.
    if unsafe { libc::pthread_key_create(&mut key, Some(on_thread_exit)) } == 0 && key < 32 {
        EXIT_KEY.store(key, Relaxed);
        RECYCLE.store(true, Release);
    }
}

/// Whether the kernel no longer knows thread `tid` of this process: it has exited and runs no
/// more code. A tid taken by a newer thread reads as alive (the shard just waits longer).
fn thread_gone(tid: u32) -> bool {
    // SAFETY: signal 0 only checks that the thread exists; nothing is sent.
    let r = unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid as libc::pid_t, 0) };
    r == -1 && sys::errno() == libc::ESRCH
}

const _: () = assert!(core::mem::offset_of!(Private, held) == 0);

const _: () = assert!(core::mem::offset_of!(Held, addr) == 0);

/// Called once for each thread that gets a shard, with where its stack of held locks lives: the
/// array of [`Held`] at `held`, its length (a `usize`) at `held + len_offset`, `entry_size` bytes
/// per entry. It does nothing: `lockmeter run --kernel` puts a uprobe here, and when a thread is
/// preempted, reads which lock it held (lock-holder preemption), without any cost to the hooks.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn lockmeter_thread_held(held: *const u8, len_offset: usize, entry_size: usize) {
    core::hint::black_box((held, len_offset, entry_size));
}
/// Gives the calling thread a shard: a new one while the pool has room (so that threads keep rows
/// of their own), else a dead thread's (null when refused).
pub(super) fn new_shard() -> *const Shard {
    let saved = sys::errno();
    let mut sp = create_shard();
    if sp.is_null() {
        sp = take_dead_shard().unwrap_or(core::ptr::null());
    }
    if sp.is_null() {
        THREADS_REFUSED.fetch_add(1, Relaxed);
    } else {
        if RECYCLE.load(Acquire) {
            // SAFETY: a key created by `init_recycling` (one of the first 32: no allocation).
            unsafe { libc::pthread_setspecific(EXIT_KEY.load(Relaxed), sp.cast()) };
        }
        // SAFETY: `sp` is a published shard; only the address of its private part is taken.
        let private = unsafe { (*sp).private.get() } as *const u8;
        lockmeter_thread_held(
            private,
            core::mem::offset_of!(Private, held_len),
            core::mem::size_of::<Held>(),
        );
    }
    sys::set_errno(saved);
    sp
}

/// Takes over the shard of a thread that has exited, if there is one (see the module docs).
fn take_dead_shard() -> Option<*const Shard> {
    if !RECYCLE.load(Acquire) {
        return None;
    }
    let max = (CFG.max_threads.load(Relaxed) as usize).min(MAX_THREADS);
    let n = (NEXT_THREAD.load(Acquire) as usize).min(max);
    for p in SHARDS.iter().take(n) {
        // SAFETY: non-null pointers are published shards, never unmapped.
        let Some(sh) = (unsafe { p.load(Acquire).as_ref() }) else { continue };
        if sh.life.load(Acquire) != RETIRING || !thread_gone(sh.tid.load(Relaxed)) {
            continue;
        }
        if sh.life.compare_exchange(RETIRING, TAKING, Acquire, Relaxed).is_err() {
            continue;
        }
        // The old thread is gone (the kernel released its tid after its last instruction), and
        // we won the shard: we are its only writer from here on.
        if take_over(sh) {
            sh.life.store(LIVE, Release);
            return Some(sh as *const Shard);
        }
        sh.life.store(RETIRING, Release);
        return None;
    }
    None
}

/// Maps an [`Exited`] accumulation sized like `sh`'s tables. Null on failure.
fn new_exited(sh: &Shard) -> *mut Exited {
    let nstacks = sh.stacks.table().capacity();
    let nevents = sh.events.table().capacity();
    let head = (size_of::<Exited>() + 127) & !127;
    let stacks_off = head;
    let events_off = stacks_off + nstacks * size_of::<StackEntry>();
    let total = events_off + nevents * size_of::<EventEntry>();
    let mem = map_counted(total);
    if mem.is_null() {
        return core::ptr::null_mut();
    }
    let ep = mem as *mut Exited;
    // SAFETY: `mem` is a fresh zeroed mapping of `total` bytes, page-aligned: the header first,
    // then the zeroed entries of the stack and event tables (zeroed memory is a valid empty
    // entry). The record table maps its own memory as it grows.
    unsafe {
        let stacks = core::slice::from_raw_parts(mem.add(stacks_off) as *const StackEntry, nstacks);
        let events = core::slice::from_raw_parts(mem.add(events_off) as *const EventEntry, nevents);
        ep.write(Exited {
            threads: Counter::new(),
            table: Table::new(&MEM, CFG.records_per_thread.load(Relaxed) as usize),
            stacks: StackStore::new(stacks),
            events: EventTable::new(events),
        });
    }
    ep
}

/// Folds the dead thread's records of `sh` into its exited accumulation, empties its tables and
/// makes the calling thread its owner. The caller won `sh` (`TAKING`). False when the
/// accumulation cannot be mapped (the shard is left as it was).
fn take_over(sh: &Shard) -> bool {
    let mut ep = sh.exited.load(Acquire);
    if ep.is_null() {
        ep = new_exited(sh);
        if ep.is_null() {
            return false;
        }
        sh.exited.store(ep, Release);
    }
    // SAFETY: published above or by an earlier owner; never unmapped.
    let ex = unsafe { &*ep };
    for e in sh.table.entries() {
        // By identity while it lives, by class once it ended (see `meter`'s lock classes).
        if !crate::classes::idents(registry()).merge_record(&ex.table, e) {
            // Counted like any acquisition that found its table full.
            sh.dropped.add(e.stats.acquisitions.get());
        }
    }
    sh.stacks.for_each(|_, frames| {
        if ex.stacks.intern(frames).is_none() {
            sh.stacks_dropped.add(1);
        }
    });
    sh.events.for_each(|k, e| match ex.events.get(&k) {
        Some(d) => {
            d.count.add(e.count.get());
            d.wait_ns.add(e.wait_ns.get());
            d.wait_ns_max.max(e.wait_ns_max.get());
        }
        None => sh.stacks_dropped.add(1),
    });
    ex.threads.add(1);
    sh.table.clear();
    sh.stacks.clear();
    sh.events.clear();
    // The old thread's acquisitions pending for its last CPU go to that CPU's counter first.
    sh.flush_cpu_pending();
    // SAFETY: the old thread is gone and we own the shard now: nobody else touches `private`.
    // Everything but the unwind cache (valid for any thread of the process) starts afresh; the
    // lookup cache's lines pointed into the records just cleared: emptied, kept where it is.
    unsafe {
        let p = sh.private.get();
        let cache = (*p).unwind_cache;
        // The lines in use keep their size (and their charge, see `grow_lookups`).
        let bits = (*p).lookup_bits;
        let used = 1usize << bits.clamp(LOOKUP_MIN_BITS, LOOKUP_BITS);
        core::ptr::write_bytes(p, 0, 1);
        (*p).unwind_cache = cache;
        (*p).lookup_bits = bits;
        core::ptr::write_bytes(sh.lookups(), 0, used);
    }
    // Ids wrap after 2^32 take-overs; a collision then can only hide one owner change.
    let owner = NEXT_OWNER.fetch_add(1, Relaxed).max(MAX_THREADS as u32 + 1);
    sh.set_thread(owner);
    true
}

/// Creates a shard for the calling thread at the next free index (null when none is left).
fn create_shard() -> *const Shard {
    let max = (CFG.max_threads.load(Relaxed) as usize).min(MAX_THREADS);
    // Checked first, so that the index overshoots `max` by at most the threads racing here, however
    // many threads come later.
    if NEXT_THREAD.load(Relaxed) as usize >= max {
        return core::ptr::null();
    }
    let idx = NEXT_THREAD.fetch_add(1, Relaxed) as usize;
    if idx >= max {
        return core::ptr::null();
    }
    let records = CFG.records_per_thread.load(Relaxed) as usize;
    let with_stacks = CFG.frames.load(Relaxed) > 0;
    let nstacks = if with_stacks { CFG.stacks_per_thread.load(Relaxed) as usize } else { 0 };
    let nevents = if with_stacks { CFG.events_per_thread.load(Relaxed) as usize } else { 0 };
    let head = LOOKUP_OFF + LOOKUP_BYTES;
    let stacks_off = head;
    let events_off = stacks_off + nstacks * size_of::<StackEntry>();
    let total = events_off + nevents * size_of::<EventEntry>();
    let mem = map_kept(total);
    if mem.is_null() {
        return core::ptr::null();
    }
    // Counted as mapped (what `--max-memory` caps) but the lookup cache's lines beyond the first
    // page, charged as the thread comes to use them (`grow_lookups`).
    MAPPED_BYTES.fetch_add((total - LOOKUP_BYTES + LOOKUP_MIN_BYTES) as u64, Relaxed);
    crate::resident::note(mem, total);
    // The lookup cache is reached from the shard's address (see `Shard::lookups`).
    let _ = mem.expose_provenance();
    let sp = mem as *mut Shard;
    // SAFETY: `mem` is a fresh zeroed mapping of `total` bytes. Zeroed memory is valid for every
    // field of Shard except the tables (they hold references), which are written here before the
    // shard is published. The lookup cache lives right after the page-aligned header, the stack
    // and event entries after it; the record table maps its own memory as it grows.
    unsafe {
        core::ptr::addr_of_mut!((*sp).table).write(Table::new(&MEM, records));
        let stacks = core::slice::from_raw_parts(mem.add(stacks_off) as *const StackEntry, nstacks);
        core::ptr::addr_of_mut!((*sp).stacks).write(StackStore::new(stacks));
        let events = core::slice::from_raw_parts(mem.add(events_off) as *const EventEntry, nevents);
        core::ptr::addr_of_mut!((*sp).events).write(EventTable::new(events));
        if with_stacks {
            (*(*sp).private.get()).unwind_cache = crate::unwind::take_cache();
        }
        (*(*sp).private.get()).lookup_bits = LOOKUP_MIN_BITS;
        core::ptr::addr_of_mut!((*sp).index).write(idx as u32 + 1);
        (*sp).set_thread(idx as u32 + 1);
    }
    if let Some(s) = SHARDS.get(idx) {
        s.store(sp, Release);
    }
    sp
}

/// The upper bound of the calling thread's stack: the main thread's `[stack]` mapping, or, for
/// other threads, glibc's thread descriptor, which sits right above the thread's stack.
fn thread_stack_top() -> u64 {
    // SAFETY: getpid has no preconditions.
    if sys::gettid() == unsafe { libc::getpid() } as u32 {
        crate::unwind::MAIN_STACK_TOP.load(Relaxed)
    } else {
        // SAFETY: pthread_self has no preconditions.
        unsafe { libc::pthread_self() as u64 }
    }
}

/// Every shard created so far.
pub(crate) fn shards() -> impl Iterator<Item = &'static Shard> {
    let n = (NEXT_THREAD.load(Acquire) as usize).min(MAX_THREADS);
    SHARDS.iter().take(n).filter_map(|p| {
        // SAFETY: non-null pointers are published shards, never unmapped.
        unsafe { p.load(Acquire).as_ref() }
    })
}

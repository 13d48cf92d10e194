//! The longest contended waits of each thread (`run --longest-waits N`), one by one with their
//! holders, for `lockmeter export --perfetto`.
//!
//! One mapping made at start-up holds a reservoir of N slots ([`lockmeter_core::reservoir`])
//! per thread table (shard index). A contended acquisition offers its wait to its thread's
//! reservoir after it has recorded the wait (no allocation, no lock: a scan of N slots); the
//! profile writer reads every reservoir. A wait that finds no reservoir (the mapping failed, or a
//! shard index past it) is counted as lost; a wait shorter than a full reservoir's shortest is
//! not kept, which is not a loss.

use crate::state::{self, Cx, ticks_to_ns};
use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering::*};
use lockmeter_core::reservoir::{self, Wait, WaitSlot};

/// Slots per reservoir (0: off).
static PER: AtomicUsize = AtomicUsize::new(0);
/// Reservoirs mapped (shard indexes 0..THREADS).
static THREADS: AtomicUsize = AtomicUsize::new(0);
static BASE: AtomicPtr<WaitSlot> = AtomicPtr::new(core::ptr::null_mut());
/// Contended waits that found no reservoir.
static LOST: AtomicU64 = AtomicU64::new(0);

/// Maps `per` slots for each of `threads` thread tables (constructor, and a fork child). False
/// when the mapping failed (the waits are then counted as lost).
pub(crate) fn init(per: usize, threads: usize) -> bool {
    PER.store(per, Relaxed);
    LOST.store(0, Relaxed);
    if per == 0 {
        return true;
    }
    // Shard indexes are 1-based and may overshoot the thread limit by the threads racing for
    // the last one: some room is left for them.
    let threads = threads + 65;
    let bytes = per.saturating_mul(threads).saturating_mul(size_of::<WaitSlot>());
    let p = state::map_counted(bytes);
    BASE.store(p.cast(), Release);
    THREADS.store(if p.is_null() { 0 } else { threads }, Release);
    !p.is_null()
}

/// The reservoir of shard index `i`.
fn reservoir(i: usize) -> Option<&'static [WaitSlot]> {
    let per = PER.load(Relaxed);
    let base = BASE.load(Acquire);
    if per == 0 || base.is_null() || i >= THREADS.load(Acquire) {
        return None;
    }
    // SAFETY: the mapping holds `per * THREADS` zeroed slots (all-zero is a valid empty slot)
    // and is never unmapped; `i < THREADS`.
    Some(unsafe { core::slice::from_raw_parts(base.add(i * per), per) })
}

/// Reservoirs that a shard may have written: indexes up to the last shard handed out (never
/// more than were mapped). Reading the others would fault in pages nothing wrote (shared memory
/// allocates a page on a read).
fn in_use() -> usize {
    (state::NEXT_THREAD.load(Acquire) as usize + 1).min(THREADS.load(Acquire))
}

/// Whether waits are kept.
#[inline(always)]
pub(crate) fn on() -> bool {
    PER.load(Relaxed) != 0
}

/// Offers a contended wait of this thread to its reservoir.
#[cold]
#[inline(never)]
pub(crate) fn offer(cx: &Cx, w: &Wait) {
    match reservoir(cx.shard.index as usize) {
        Some(r) => {
            reservoir::offer(r, w);
        }
        None => {
            LOST.fetch_add(1, Relaxed);
        }
    }
}

/// Empties every reservoir (a fork child: the parent's waits are not its own).
pub(crate) fn reset_for_child() {
    LOST.store(0, Relaxed);
    for i in 0..in_use() {
        for s in reservoir(i).unwrap_or(&[]) {
            if reservoir::read(s).is_some() {
                reservoir::clear(core::slice::from_ref(s));
            }
        }
    }
}

/// The lock of a kept wait (its event key resolved by the writer), with its mode.
pub(crate) struct Resolved {
    /// LOCK id.
    pub(crate) lock: u32,
    /// How it was taken.
    pub(crate) mode: lockmeter_core::Mode,
}

/// Writes the LONG_WAITS record and one LONG_WAIT per kept wait whose lock and stacks the
/// profile lists (`lock` resolves an event key, `stack` a stack hash; `start` is the profile's
/// start in ticks). Nothing when off.
pub(crate) fn write<S: lockmeter_format::Sink>(
    enc: &mut lockmeter_format::Encoder<S>,
    start: u64,
    lock: impl Fn(u64) -> Option<Resolved>,
    stack: impl Fn(u64) -> Option<u32>,
) -> Option<()> {
    let (per, lost) = (PER.load(Relaxed) as u32, LOST.load(Relaxed));
    if per == 0 {
        return Some(());
    }
    enc.long_waits(per, lost).ok()?;
    let ns = |t: u64| ticks_to_ns(t.saturating_sub(start));
    let mut failed = false;
    for i in 0..in_use() {
        let Some(r) = reservoir(i) else { continue };
        // The shard's current thread, when the wait is its own (else an exited thread's).
        let sh = state::shards().find(|s| s.index as usize == i);
        for w in r.iter().filter_map(reservoir::read) {
            let Some(l) = lock(w.lock) else { continue };
            let thread = match sh {
                Some(s) if s.owner.load(Relaxed) == w.waiter => s.index,
                _ => 0,
            };
            let lw = lockmeter_format::LongWait {
                thread,
                lock: l.lock,
                mode: l.mode,
                start_ns: ns(w.start),
                // The wait as the record's statistics have it (at least 1 ns).
                end_ns: ns(w.start).saturating_add(ticks_to_ns(w.len).max(1)),
                stack: if w.stack == 0 { None } else { stack(w.stack) },
                holder_thread: thread_of(w.holder),
                holder_site: w.holder_site,
                holder_stack: if w.holder_stack == 0 { None } else { stack(w.holder_stack) },
                holder_acquired_ns: (w.holder_acq != 0).then(|| ns(w.holder_acq)),
            };
            failed |= enc.long_wait(&lw).is_err();
        }
    }
    (!failed).then_some(())
}

/// The thread index (as the profile's THREADs) of owner id `owner`: the shard it owns now (0 if
/// none: unknown, or the thread exited and its table was taken over).
fn thread_of(owner: u32) -> u32 {
    if owner == 0 {
        return 0;
    }
    state::shards().find(|s| s.owner.load(Relaxed) == owner).map_or(0, |s| s.index)
}

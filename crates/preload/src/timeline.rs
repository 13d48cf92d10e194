//! The time series of `run --interval DUR`: per interval and per lock, acquisitions, contended
//! acquisitions, wait and hold time ([`lockmeter_core::timeline`] keeps it, in memory mapped
//! here once at start-up).
//!
//! The hooks do nothing for it. The control thread (`control.rs`) samples every record's counters
//! once per period (`dump::sample`), summed per lock; the profile writer computes the last,
//! partial interval from the very figures it writes in the profile's records, so the intervals of
//! a lock always add up exactly to its totals.
//!
//! All of it is touched only by the holder of the profile writer's lock (`dump/`'s DUMP flag),
//! so never concurrently.

use crate::state;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU64, Ordering::*};
use lockmeter_core::Stats;
use lockmeter_core::timeline::{Row, Slot, Timeline};
use lockmeter_format::{Encoder, IntervalLock, Sink};

/// Most (interval, lock) rows kept before neighbours are merged.
const ROWS: usize = 1 << 16;
/// Most distinct lock identities the per-lock sums can hold (half their slots).
const MAX_LOCKS: usize = 1 << 18;

/// The sampling period in ns (0: no time series), for the control thread's timer; it doubles
/// when intervals are merged.
pub(crate) static PERIOD_NS: AtomicU64 = AtomicU64::new(0);

struct Shared(UnsafeCell<Option<Timeline<'static>>>);
// SAFETY: only the holder of the profile writer's lock touches it (see the module docs), or the
// constructor before any other thread of ours runs.
unsafe impl Sync for Shared {}
static TL: Shared = Shared(UnsafeCell::new(None));

/// The time series, for the holder of the writer's lock.
///
/// # Safety
/// The caller holds the profile writer's lock (or is the process's only thread), and keeps no
/// other reference from this function alive.
unsafe fn tl() -> Option<&'static mut Timeline<'static>> {
    // SAFETY: by the caller's contract.
    unsafe { (*TL.0.get()).as_mut() }
}

/// A zeroed array of `n` `T`s in fresh memory (never freed); zeroed memory is a valid `T`.
fn zeroed_slice<T>(n: usize) -> Option<&'static mut [T]> {
    let bytes = n * size_of::<T>();
    let mem = state::map_kept(bytes);
    if mem.is_null() {
        return None;
    }
    state::MAPPED_BYTES.fetch_add(bytes as u64, Relaxed);
    // SAFETY: a fresh page-aligned zeroed mapping of `n` `T`s, owned by the caller from now on;
    // the callers' types (Slot, Row, u32) are plain integers, valid when zero.
    Some(unsafe { core::slice::from_raw_parts_mut(mem.cast(), n) })
}

/// Maps the tables for a period of `period_ns`, sized for `locks` lock identities
/// (constructor). False when out of memory.
pub(crate) fn init(period_ns: u64, locks: usize) -> bool {
    let cap = (locks.max(8) * 2).next_power_of_two().min(MAX_LOCKS * 2);
    let (Some(s1), Some(u1), Some(s2), Some(u2), Some(r1), Some(r2)) = (
        zeroed_slice::<Slot>(cap),
        zeroed_slice::<u32>(cap),
        zeroed_slice::<Slot>(cap),
        zeroed_slice::<u32>(cap),
        zeroed_slice::<Row>(ROWS),
        zeroed_slice::<Row>(ROWS),
    ) else {
        return false;
    };
    // SAFETY: the constructor runs before any other thread of ours.
    unsafe { *TL.0.get() = Some(Timeline::new(s1, u1, s2, u2, r1, r2, period_ns)) };
    PERIOD_NS.store(period_ns, Relaxed);
    true
}

/// Starts summing the records' raw figures per lock (a sample, the writer, or a reset).
///
/// # Safety
/// As [`tl`].
pub(crate) unsafe fn begin_sums() {
    // SAFETY: by the caller's contract.
    if let Some(t) = unsafe { tl() } {
        t.begin_sums();
    }
}

/// Adds one record's raw (not reset-subtracted) statistics to lock `pair`'s sums; `heir` is the
/// row its figures join when its lock ends (its class), 0 for none.
///
/// # Safety
/// As [`tl`].
pub(crate) unsafe fn add(pair: u64, heir: u64, st: &Stats) {
    // SAFETY: by the caller's contract.
    if let Some(t) = unsafe { tl() } {
        t.add(pair, heir, [st.acquisitions, st.contended, st.wait_ns_total, st.hold_ns_total]);
    }
}

/// A reset at `now_ns`: the intervals so far are forgotten and the sums just made (from the same
/// reading as the reset's baseline) are the new base.
///
/// # Safety
/// As [`tl`].
pub(crate) unsafe fn reset(now_ns: u64) {
    // SAFETY: by the caller's contract.
    if let Some(t) = unsafe { tl() } {
        t.reset(now_ns);
    }
}

/// Closes the open interval at `now_ns` with the sums just made (a sample).
///
/// # Safety
/// As [`tl`].
pub(crate) unsafe fn close_interval(now_ns: u64) {
    // SAFETY: by the caller's contract.
    if let Some(t) = unsafe { tl() } {
        t.close_interval(now_ns);
        PERIOD_NS.store(t.period_ns(), Relaxed);
    }
}

/// Writes the time series: the closed intervals, then the open one up to `now_ns` from the sums
/// of the records just written. Locks without an id (nothing written for them) are left out.
/// Returns how many rows did not fit (0 without a time series).
///
/// # Safety
/// As [`tl`].
pub(crate) unsafe fn write<S: Sink>(
    enc: &mut Encoder<S>,
    now_ns: u64,
    id_of: impl Fn(u64) -> Option<u32>,
) -> Option<u64> {
    // SAFETY: by the caller's contract.
    let Some(t) = (unsafe { tl() }) else { return Some(0) };
    let row = |pair: u64, v: [u64; 4]| {
        id_of(pair).map(|lock| IntervalLock {
            lock,
            acquisitions: v[0],
            contended: v[1],
            wait_ns: v[2],
            hold_ns: v[3],
        })
    };
    let mut index = 0u32;
    for (start, end, rows) in t.intervals() {
        enc.interval(index, start, end).ok()?;
        for r in rows {
            if let Some(l) = row(r.pair, r.v) {
                enc.interval_lock(index, &l).ok()?;
            }
        }
        index += 1;
    }
    let open = t.open_start_ns();
    enc.interval(index, open, now_ns.max(open)).ok()?;
    let mut failed = false;
    t.open_deltas(|pair, d| {
        if let Some(l) = row(pair, d) {
            failed |= enc.interval_lock(index, &l).is_err();
        }
    });
    if failed {
        return None;
    }
    Some(t.lost())
}

/// In a fork child: a fresh time series (the parent's counts are not the child's).
///
/// # Safety
/// Only the process's single thread (fork child).
pub(crate) unsafe fn reset_for_child(now_ns: u64) {
    // SAFETY: by the caller's contract.
    if let Some(t) = unsafe { tl() } {
        t.clear(now_ns);
    }
}

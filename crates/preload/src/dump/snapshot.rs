//! Snapshots and resets while the program runs (the control thread): the writer's lock
//! (`DUMP_LIVE`), a snapshot profile on the control socket, the reset baseline (`crate::live`)
//! and the time series' sums (`crate::timeline`).

use super::file::{FdSink, send_all};
use super::merge::{Merged, record_row, row_owner, rows};
use super::{BUFS, DUMP, DUMP_IDLE, DUMP_LIVE, End, PID, START_MONO_NS, encode};
use crate::state::{self, STATE};
use core::ffi::c_int;
use core::sync::atomic::Ordering::*;
use lockmeter_core::clock;

/// Takes the writer's lock for a snapshot or reset; false while the final profile is written
/// (or was), or another snapshot runs.
fn begin_live() -> bool {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    let st = STATE.load(Acquire);
    pid == PID.load(Relaxed)
        && (st == state::READY || st == state::PAUSED)
        && DUMP.compare_exchange(DUMP_IDLE, DUMP_LIVE, AcqRel, Acquire).is_ok()
}

fn end_live() {
    DUMP.store(DUMP_IDLE, Release);
}

/// Why a snapshot or reset was refused.
pub(crate) const BUSY: &[u8] = b"error: the program is writing its final profile (it is exiting)\n";

/// Writes `ok\n` and then a snapshot profile of everything measured so far (less the reset
/// baseline) on the connected socket `fd`; hooks keep metering meanwhile. On refusal, writes
/// the reason instead.
pub(crate) fn snapshot(fd: c_int) -> bool {
    if !begin_live() {
        send_all(fd, BUSY);
        return false;
    }
    crate::resident::measure(true);
    // SAFETY: we own DUMP (DUMP_LIVE); no other thread touches BUFS until we release it.
    let b = unsafe { &mut *BUFS.0.get() };
    let ok = send_all(fd, b"ok\n")
        && encode(b, FdSink { fd, socket: true }, PID.load(Relaxed), End::Snapshot);
    end_live();
    ok
}

/// Resets the counts: records every record's statistics (and the per-CPU sums) as the baseline
/// that snapshots and the final profile subtract. False when refused or out of memory.
pub(crate) fn reset() -> Result<(), &'static [u8]> {
    if !begin_live() {
        return Err(BUSY);
    }
    let r = take_baseline();
    end_live();
    r
}

fn take_baseline() -> Result<(), &'static [u8]> {
    const NOMEM: &[u8] = b"error: cannot map memory for the reset baseline\n";
    let merged = Merged::of_exited();
    let rows = || rows(&merged);
    let n: usize = rows().map(|r| r.table.len()).sum();
    // SAFETY: we hold the writer's lock (DUMP_LIVE), as for each call below.
    let mapped = unsafe { crate::live::begin(n) };
    if !mapped {
        merged.free();
        return Err(NOMEM);
    }
    // The time series restarts too, from the same reading of the records.
    let reg = state::registry();
    // SAFETY: as above.
    unsafe { crate::timeline::begin_sums() };
    for row in rows() {
        let owner = row_owner(&row);
        for e in row.table.entries() {
            let ((k1, site), live) = (e.key(), &e.stats);
            let Some(r) = reg.and_then(|reg| record_row(reg, k1, e.tag.load(Relaxed))) else {
                continue;
            };
            let st = live.snapshot();
            // SAFETY: as above.
            unsafe { crate::live::put(owner, k1, site, e.tag.load(Relaxed), &st) };
            // SAFETY: as above.
            unsafe { crate::timeline::add(r.row, r.heir, &st) };
        }
    }
    merged.free();
    let now = clock::monotonic_ns().saturating_sub(START_MONO_NS.load(Relaxed));
    // SAFETY: we hold the writer's lock (DUMP_LIVE).
    unsafe { crate::timeline::reset(now) };
    for sh in state::shards() {
        for (cpu, c) in sh.cpus.iter().enumerate() {
            let a = sh.cpu_acquisitions(cpu);
            if a > 0 {
                // SAFETY: as above.
                unsafe { crate::live::put_cpu(cpu, a, c.contended.get(), c.wait_ns.get()) };
            }
        }
    }
    Ok(())
}

/// Sums every record per lock for the time series (the caller holds the writer's lock).
fn sum_records() {
    let reg = state::registry();
    let merged = Merged::of_exited();
    // SAFETY: the caller holds the writer's lock.
    unsafe { crate::timeline::begin_sums() };
    for row in rows(&merged) {
        for e in row.table.entries() {
            let (k1, _) = e.key();
            if let Some(r) = reg.and_then(|reg| record_row(reg, k1, e.tag.load(Relaxed))) {
                // SAFETY: as above.
                unsafe { crate::timeline::add(r.row, r.heir, &e.stats.snapshot()) };
            }
        }
    }
    merged.free();
}

/// Closes an interval of the time series (the control thread, once per period). False when
/// the final profile is being written.
pub(crate) fn sample() -> bool {
    if !begin_live() {
        return false;
    }
    sum_records();
    let now = clock::monotonic_ns().saturating_sub(START_MONO_NS.load(Relaxed));
    // SAFETY: we hold the writer's lock (DUMP_LIVE).
    unsafe { crate::timeline::close_interval(now) };
    end_live();
    true
}

//! Encoding the records of the profile: the header, the maps, the locks and their statistics
//! (records of ended identities folded by class), the stacks and events, the longest waits, the
//! time series, the per-CPU totals, what was dropped and the collector's cost.

use super::ids::{IdMap, class_pair, write_class, write_lock};
use super::maps::write_maps;
use super::merge::{Merged, Row, Who, record_row, row_owner, rows};
use super::{
    Bufs, CMDLINE_LEN, Enc, End, IMAGE_SEQ, NS_PER_PAIR, NS_PER_STACK, PPID_SEEN, START_MONO_NS,
    START_TICKS, START_UNIX_NS,
};
use crate::state::{self, CFG};
use crate::sys;
use core::sync::atomic::Ordering::*;
use lockmeter_core::table::Table;
use lockmeter_core::{LockKind, Mode, clock};
use lockmeter_format::{ClockInfo, CpuStats, Dropped, EndReason, HeaderRef, HoldTiming, Overhead};

pub(super) fn write_records(b: &mut Bufs, enc: &mut Enc, pid: u32, end: End) -> Option<()> {
    let end_mono = clock::monotonic_ns();
    let end_ticks = clock::now();
    // The run's CPU time, read before the writer's own work adds to it.
    let cpu_ns = match crate::cost::process_cpu_ns(pid) {
        0 => 0,
        now => now.saturating_sub(crate::cost::START_CPU_NS.load(Relaxed)),
    };
    let sys_ns = (cpu_ns as f64 * crate::cost::process_sys_share(pid)) as u64;
    let start_mono = START_MONO_NS.load(Relaxed);
    let duration = end_mono.saturating_sub(start_mono);
    let hz = CFG.calib_hz.load(Relaxed);
    let hz_run = if duration > 100_000_000 && clock::source() == clock::Source::Tsc {
        ((end_ticks.wrapping_sub(START_TICKS.load(Relaxed)) as u128 * 1_000_000_000)
            / duration as u128) as u64
    } else {
        0
    };
    let cmdline = match CMDLINE_LEN.load(Relaxed) {
        0 => sys::read_file(c"/proc/self/cmdline", &mut b.cmdline),
        n => b.cmdline.get(..n).unwrap_or(&[]),
    };
    // SAFETY: the path is NUL-terminated and `exe` is a writable buffer of the given size.
    let n = unsafe {
        libc::readlink(c"/proc/self/exe".as_ptr(), b.exe.as_mut_ptr().cast(), b.exe.len())
    };
    let exe = b.exe.get(..n.max(0) as usize).unwrap_or(&[]);
    // SAFETY: sysconf has no preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u32;
    let hold_timing = match CFG.hold_every.load(Relaxed) {
        0 => HoldTiming::On,
        1 => HoldTiming::Off,
        n => HoldTiming::Sampled(n),
    };
    let end_reason = match end {
        End::Exit(c) => EndReason::Exit(Some(c & 0xff)),
        End::UnderscoreExit(c) => EndReason::UnderscoreExit(Some(c & 0xff)),
        End::Signal(s) => EndReason::Signal(s),
        End::Exec => EndReason::Exec,
        End::Snapshot => EndReason::Snapshot,
        End::Killed(s) => EndReason::Killed(s),
        End::ExitGroup(c) => EndReason::ExitGroup(c),
        End::Vanished => EndReason::Vanished,
        End::OomKilled => EndReason::OomKilled,
    };
    enc.header(&HeaderRef {
        collector: "preload",
        lockmeter_version: env!("CARGO_PKG_VERSION"),
        pid,
        ppid: match PPID_SEEN.load(Relaxed) {
            // SAFETY: getppid has no preconditions.
            0 => (unsafe { libc::getppid() }) as u32,
            p => p,
        },
        image_seq: IMAGE_SEQ.load(Relaxed),
        cmdline,
        exe,
        start_unix_ns: START_UNIX_NS.load(Relaxed),
        end_unix_ns: clock::realtime_ns(),
        duration_ns: duration,
        clock: ClockInfo { source: clock::source() as u8, hz, hz_run },
        cpu_count: cpus,
        hold_timing,
        end_reason,
    })
    .ok()?;

    write_maps(b, enc)?;

    // Locks and records, with dense lock ids assigned in a scratch map.
    let reg = state::registry()?;
    // The dead threads whose shards were taken over, merged into one row.
    let merged = Merged::of_exited();
    let rows = || rows(&merged);
    let total: usize = rows().map(|r| r.table.len() + r.events.table().len()).sum::<usize>()
        + crate::lost::entries();
    let ids = IdMap::new(total);
    // The names the program gave, indexed once: (slot, generation) -> arena offset (+1).
    let mut nnames = 0usize;
    crate::names::for_each(|_, _, _| nnames += 1);
    let names = IdMap::new(nnames);
    crate::names::for_each(|slot, generation, off| {
        names.set(((slot as u64) << 32) | generation as u64, off + 1)
    });
    // Threads written so far (a thread is listed with its first record or event).
    let listed_threads = IdMap::new(rows().count());
    let mut lost_to_fold = 0u64;
    // SAFETY: the caller holds the writer's lock (DUMP).
    unsafe { crate::timeline::begin_sums() };
    for sh in rows() {
        let owner = row_owner(&sh);
        // The records of identities that ended, folded by class (see `meter`'s lock classes).
        let folded = Table::new(&state::SCRATCH, 64);
        // SAFETY: the caller holds the writer's lock (DUMP), as for each use of the baseline.
        let since_reset = unsafe { crate::live::is_set() };
        // What the records that identities were folded into since the reset owe: those
        // identities' baselines (their counts before the reset came with them).
        let owed = Table::new(&state::SCRATCH, 16);
        if since_reset {
            for e in sh.table.entries() {
                let ((k1, site), now) = (e.key(), e.tag.load(Relaxed));
                // SAFETY: as above.
                let Some((then, o)) = (unsafe { crate::live::baseline(owner, k1, site) }) else {
                    continue;
                };
                // (A scratch table refuses only when the kernel has no memory left: the record
                // then keeps the counts from before the reset.)
                if let Some(to) = crate::classes::idents(Some(reg)).folded_to(k1, then, now)
                    && let Some(d) = owed.get(to, site)
                {
                    d.stats.absorb_stats(o);
                }
            }
        }
        for e in sh.table.entries() {
            let ((k1, site), live) = (e.key(), &e.stats);
            let now = e.tag.load(Relaxed);
            let Some(r) = record_row(reg, k1, now) else { continue };
            let mut st = live.snapshot();
            // The time series sums the raw figures (a reset's are in its base too).
            // SAFETY: the caller holds the writer's lock (DUMP).
            unsafe { crate::timeline::add(r.row, r.heir, &st) };
            if since_reset {
                // SAFETY: as above.
                if let Some((then, o)) = unsafe { crate::live::baseline(owner, k1, site) }
                    && crate::classes::idents(Some(reg)).folded_to(k1, then, now).is_none()
                {
                    crate::live::subtract(&mut st, o);
                }
                if crate::classes::is_fold_target(k1)
                    && let Some(d) = owed.get(k1, site)
                {
                    crate::live::subtract(&mut st, &d.stats.snapshot());
                }
                if crate::live::is_zero(&st) {
                    continue; // nothing since the last reset
                }
            }
            let (kind, mode) = (r.kind, r.mode);
            let (pair, slot_idx) = match r.ident {
                crate::classes::Ident::Live(pair) => (pair, (pair >> 32) as u32),
                crate::classes::Ident::Skip => continue,
                crate::classes::Ident::Class(c) => {
                    match folded.get(crate::classes::class_key(c, kind as u8, mode as u8), site) {
                        Some(f) => f.stats.absorb_stats(&st),
                        None => lost_to_fold += st.acquisitions,
                    }
                    continue;
                }
            };
            if matches!(listed_threads.get(sh.index as u64), Some((_, true))) {
                write_thread(b, enc, &sh)?;
            }
            let (id, new) = ids.get(pair)?;
            if new {
                write_lock(enc, reg, &names, id, slot_idx, (pair & 0xffff_ffff) as u32, kind)
                    .ok()?;
            }
            enc.stats(sh.index, id, site, mode, &st).ok()?;
        }
        for (k1, site, live) in folded.iter() {
            let (_, class, kind, mode) = crate::classes::unkey(k1);
            let (Some(kind), Some(mode)) = (LockKind::from_u8(kind), Mode::from_u8(mode)) else {
                continue;
            };
            if matches!(listed_threads.get(sh.index as u64), Some((_, true))) {
                write_thread(b, enc, &sh)?;
            }
            let (id, new) = ids.get(class_pair(class, kind as u8))?;
            if new {
                write_class(enc, id, class, kind).ok()?;
            }
            enc.stats(sh.index, id, site, mode, &live.snapshot()).ok()?;
        }
    }
    // Acquisitions not recorded, by lock and site; a lock that lost them all is listed too.
    let mut lost_ok = true;
    crate::lost::for_each(|k, site, n| {
        let (slot_idx, _, kind, mode) = crate::classes::unkey(k);
        let (Some(kind_e), Some(mode)) = (LockKind::from_u8(kind), Mode::from_u8(mode)) else {
            return;
        };
        let (pair, class) = match crate::classes::idents(Some(reg)).resolve_event(k) {
            crate::classes::Ident::Live(pair) => (pair, None),
            crate::classes::Ident::Skip => return,
            crate::classes::Ident::Class(c) => (class_pair(c, kind), Some(c)),
        };
        let Some((id, new)) = ids.get(pair).filter(|_| lost_ok) else {
            lost_ok = false;
            return;
        };
        if new {
            let w = match class {
                Some(c) => write_class(enc, id, c, kind_e),
                None => write_lock(enc, reg, &names, id, slot_idx, pair as u32, kind_e),
            };
            lost_ok &= w.is_ok();
        }
        let l = lockmeter_format::Lost { lock: id, site, mode, acquisitions: n };
        lost_ok &= enc.lost(&l).is_ok();
    });
    if !lost_ok {
        return None;
    }
    if crate::lost::not_itemized() > 0 {
        b.scratch.clear().push_u64(crate::lost::not_itemized());
        b.scratch.push(
            b" acquisitions not recorded are not told apart by lock (too many locks lost some)",
        );
        enc.note(b.scratch.bytes()).ok()?;
    }
    // Stacks, deduplicated across threads, then the events that use them.
    let nstacks: usize = rows().map(|s| s.stacks.table().len()).sum();
    let stack_ids = IdMap::new(nstacks);
    let mut ok = true;
    // An empty table is not scanned: a scan reads its whole capacity (hundreds of µs in each
    // process of a launcher that took no lock).
    for sh in rows().filter(|sh| !sh.stacks.table().is_empty()) {
        sh.stacks.for_each(|hash, frames| {
            if let Some((id, true)) = stack_ids.get(hash) {
                ok &= enc.stack(id, frames).is_ok();
            }
        });
    }
    if !ok {
        return None;
    }
    for sh in rows().filter(|sh| !sh.events.table().is_empty()) {
        let mut failed = false;
        sh.events.for_each(|k, e| {
            if failed {
                return;
            }
            let (_, _, kind, mode) = crate::classes::unkey(k.lock);
            let Some(mode) = Mode::from_u8(mode) else { return };
            let pair = match crate::classes::idents(Some(reg)).resolve_event(k.lock) {
                crate::classes::Ident::Live(pair) => pair,
                crate::classes::Ident::Skip => return,
                // A class is named by its site: the first uses of its identities are left out.
                crate::classes::Ident::Class(_)
                    if k.kind == lockmeter_core::stacks::EventKind::FirstUse =>
                {
                    return;
                }
                crate::classes::Ident::Class(c) => class_pair(c, kind),
            };
            let Some(stack) = stack_ids.find(k.stack) else { return };
            // Only locks with recorded acquisitions are listed; the others are counted as
            // dropped, and their events (a first use, say) go with them.
            let Some(id) = ids.find(pair) else { return };
            if matches!(listed_threads.get(sh.index as u64), Some((_, true))) {
                failed |= write_thread(b, enc, &sh).is_none();
            }
            let ev = lockmeter_format::Event {
                thread: sh.index,
                lock: id,
                mode,
                kind: k.kind,
                stack,
                holder_site: k.holder_site,
                holder_stack: if k.holder_stack == 0 {
                    None
                } else {
                    stack_ids.find(k.holder_stack)
                },
                count: e.count.get(),
                wait_ns: e.wait_ns.get(),
                wait_ns_max: e.wait_ns_max.get(),
            };
            failed |= enc.event(&ev).is_err();
        });
        if failed {
            return None;
        }
    }
    crate::longest::write(
        enc,
        START_TICKS.load(Relaxed),
        |k| {
            let (_, _, _, mode) = crate::classes::unkey(k);
            let pair = match crate::classes::idents(Some(reg)).resolve_event(k) {
                crate::classes::Ident::Live(pair) => pair,
                crate::classes::Ident::Skip => return None,
                crate::classes::Ident::Class(c) => class_pair(c, crate::classes::unkey(k).2),
            };
            Some(crate::longest::Resolved { lock: ids.find(pair)?, mode: Mode::from_u8(mode)? })
        },
        |h| stack_ids.find(h),
    )?;
    // SAFETY: the caller holds the writer's lock (DUMP).
    let lost = unsafe { crate::timeline::write(enc, duration, |pair| ids.find(pair)) }?;
    if lost > 0 {
        b.scratch.clear().push(b"the time series (--interval) lost ").push_u64(lost);
        b.scratch.push(b" lock rows that did not fit its tables: its sums fall short");
        enc.note(b.scratch.bytes()).ok()?;
    }
    stack_ids.free();
    ids.free();
    listed_threads.free();
    names.free();

    // Per-CPU totals.
    for cpu in 0..state::MAX_CPUS {
        let mut c = CpuStats { cpu: cpu as u32, ..Default::default() };
        for sh in state::shards() {
            if let Some(x) = sh.cpus.get(cpu) {
                c.acquisitions += sh.cpu_acquisitions(cpu);
                c.contended += x.contended.get();
                c.wait_ns += x.wait_ns.get();
            }
        }
        // SAFETY: the caller holds the writer's lock (DUMP).
        unsafe {
            crate::live::subtract_cpu(cpu, &mut c.acquisitions, &mut c.contended, &mut c.wait_ns)
        };
        if c.acquisitions > 0 {
            enc.cpu(&c).ok()?;
        }
    }

    let mut d = Dropped {
        locks: reg.unrecorded_locks_estimate(),
        threads: state::THREADS_REFUSED.load(Relaxed),
        stacks: merged.lost_stacks,
        acquisitions_no_thread: state::ACQ_NO_SHARD.load(Relaxed),
        acquisitions_table_full: merged.lost_acquisitions + lost_to_fold,
        ..Dropped::default()
    };
    let mut acquisitions = 0u64;
    for sh in state::shards() {
        d.acquisitions_table_full += sh.dropped.get();
        d.acquisitions_registry_full += sh.dropped_registry.get();
        d.holds += sh.held_overflow.get();
        d.stacks += sh.stacks_dropped.get();
    }
    // The program's acquisitions only: the collector's own calibration pairs are not its cost.
    let (mut wanted_holds, mut threads, mut wait_ns) = (0u64, 0u64, 0u64);
    let (mut hold_ns, mut holds_timed) = (0u64, 0u64);
    for sh in rows() {
        let before = acquisitions;
        for e in sh.table.entries() {
            if crate::classes::idents(Some(reg)).resolve(e.key().0, e.tag.load(Relaxed))
                != crate::classes::Ident::Skip
            {
                acquisitions += e.stats.acquisitions.get();
                wanted_holds += e.stats.cnt_hold.get();
                wait_ns = wait_ns.saturating_add(e.stats.wait_ns_total.get());
                hold_ns = hold_ns.saturating_add(e.stats.hold_ns_total.get());
                holds_timed += e.stats.holds_timed.get();
            }
        }
        threads += u64::from(acquisitions > before);
    }
    merged.free();
    d.acquisitions =
        d.acquisitions_no_thread + d.acquisitions_table_full + d.acquisitions_registry_full;
    enc.dropped(&d).ok()?;
    let mut note = [0u8; 512];
    for write in [crate::swap::note, crate::swap_rw::rw_note] {
        let n = write(&mut note);
        if n > 0 {
            enc.note(&note[..n]).ok()?;
        }
    }
    let per_pair = NS_PER_PAIR.load(Relaxed);
    let mut inputs = cost_inputs(
        duration,
        cpu_ns,
        acquisitions,
        wanted_holds,
        per_pair,
        crate::cost::parallelism(threads, u64::from(cpus), duration, wait_ns),
    );
    inputs.sys_ns = sys_ns;
    if holds_timed > 0 {
        inputs.hold_ns = hold_ns as f64 / holds_timed as f64;
    }
    let est = crate::cost::estimate(&inputs);
    let (start_ns, end_ns) = (super::START_COST_NS.load(Relaxed), super::end_cost_ns());
    enc.overhead(&Overhead {
        ns_per_pair: per_pair,
        estimated_total_ns: per_pair.saturating_mul(acquisitions),
        memory_bytes: crate::resident::at_dump(),
        ns_per_stack: NS_PER_STACK.load(Relaxed),
        // What starting and ending cost the process is part of its metered wall time too.
        estimated_slowdown_milli: lockmeter_core::cost_model::with_fixed(
            est.slowdown_milli,
            duration,
            start_ns.saturating_add(end_ns),
        ),
        contended_ns: est.contended_ns,
        serialized_ns: est.serialized_ns,
        cpu_ns,
        hooks_ns: est.hooks_ns,
        start_ns,
        end_ns,
        // Only `run` knows the other images of its run: it fills these in the run file.
        other_images: 0,
        other_fixed_ns: 0,
    })
    .ok()?;
    Some(())
}

/// The cost model's inputs: the given totals, and what every thread measured (see `cost`).
fn cost_inputs(
    duration_ns: u64,
    cpu_ns: u64,
    acquisitions: u64,
    wanted_holds: u64,
    ns_per_pair: u64,
    parallel: f64,
) -> crate::cost::Inputs {
    let mut sum = [0u64; 23];
    for sh in state::shards() {
        let c = &sh.cost;
        let v = [
            c.acq_timed.get(),
            c.acq_ticks.get(),
            c.rel_timed.get(),
            c.rel_ticks.get(),
            c.gather_ticks.get(),
            c.holding.get(),
            c.holding_timed.get(),
            c.holding_ticks.get(),
            c.acq_out_timed.get(),
            c.acq_out_ticks.get(),
            c.rel_out_timed.get(),
            c.rel_out_ticks.get(),
            c.acq_real_timed.get(),
            c.acq_real_ticks.get(),
            c.acq_moved.get(),
            c.rel_real_timed.get(),
            c.rel_real_ticks.get(),
            c.slow.get(),
            c.slow_timed.get(),
            c.slow_ticks.get(),
            c.life.get(),
            c.life_timed.get(),
            c.life_ticks.get(),
        ];
        for (s, x) in sum.iter_mut().zip(v) {
            *s = s.saturating_add(x);
        }
    }
    let [
        acq_n,
        acq_t,
        rel_n,
        rel_t,
        gather_t,
        holding,
        holding_n,
        holding_t,
        acq_out_n,
        acq_out_t,
        rel_out_n,
        rel_out_t,
        acq_real_n,
        acq_real_t,
        acq_moved_n,
        rel_real_n,
        rel_real_t,
        slow,
        slow_n,
        slow_t,
        life,
        life_n,
        life_t,
    ] = sum;
    let ns = |t: u64| state::ticks_to_ns(t) as f64;
    let mean = |t: u64, n: u64| if n == 0 { 0.0 } else { ns(t) / n as f64 };
    let contended = ns(gather_t) + mean(holding_t, holding_n) * holding as f64;
    crate::cost::Inputs {
        duration_ns,
        acquisitions,
        wanted_holds,
        ns_per_pair,
        calib_cs_ns: crate::cost::CALIB_CS_PS.load(Relaxed) as f64 / 1000.0,
        cs_acq_ns: mean(acq_t, acq_n),
        cs_rel_ns: mean(rel_t, rel_n),
        calib_out_ns: crate::cost::CALIB_OUT_PS.load(Relaxed) as f64 / 1000.0,
        out_ns: mean(acq_out_t, acq_out_n) + mean(rel_out_t, rel_out_n),
        calib_real_ns: crate::cost::CALIB_REAL_PS.load(Relaxed) as f64 / 1000.0,
        moved_share: if acq_moved_n == 0 {
            0.0
        } else {
            acq_moved_n as f64 / (acq_moved_n + acq_real_n) as f64
        },
        real_ns: mean(acq_real_t, acq_real_n) + mean(rel_real_t, rel_real_n),
        slow_ns: (mean(slow_t, slow_n) * slow as f64) as u64,
        life_ns: (mean(life_t, life_n) * life as f64) as u64,
        contended_ns: contended as u64,
        cpu_ns,
        sys_ns: 0,
        hold_ns: 0.0,
        parallel,
        raw_pair_ns: crate::cost::RAW_PAIR_PS.load(Relaxed) as f64 / 1000.0,
    }
}

/// Writes a thread's record (only threads with records are listed: the constructor's
/// calibration leaves the main thread with none of its own).
fn write_thread(b: &mut Bufs, enc: &mut Enc, row: &Row<'_>) -> Option<()> {
    let sh = match row.who {
        Who::Thread(sh) => sh,
        Who::Exited(n) => {
            b.scratch.clear().push(b"[").push_u64(n);
            b.scratch.push(if n == 1 { b" exited thread]" } else { b" exited threads]" });
            return enc.thread(row.index, 0, b.scratch.bytes()).ok();
        }
    };
    let tid = sh.tid.load(Relaxed);
    b.scratch.clear().push(b"/proc/self/task/").push_u64(tid as u64).push(b"/comm");
    // SAFETY: `scratch` is NUL-terminated and outlives the call.
    let path = unsafe { core::ffi::CStr::from_ptr(b.scratch.as_ptr()) };
    let comm = sys::read_file(path, &mut b.comm);
    let comm = comm.strip_suffix(b"\n").unwrap_or(comm);
    let (own, n) = sh.name();
    let name: &[u8] = if comm.is_empty() { own.get(..n).unwrap_or(&[]) } else { comm };
    enc.thread(sh.index, tid, name).ok()
}

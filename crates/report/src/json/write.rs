//! Fills the schema's types from an [`Analysis`] and writes them: [`json`].

use std::io::{self, Write};

use lockmeter_format::model::{EndReason, HoldTiming, LockKind};

use crate::analysis::{Agg, Analysis, LockAgg, PairAgg, SiteAgg, StackAgg, ThreadAgg};
use crate::options::ReportOptions;
use crate::symbolize::Frame;

use super::{
    ClockOut, CountsOut, CpuOut, Doc, DroppedOut, FilterOut, FrameOut, HeaderOut, Headline,
    HolderOut, InlinedOut, IntervalLockOut, IntervalOut, LockOut, OverheadOut, PairOut, ProcessOut,
    SCHEMA_VERSION, SiteOut, StatsOut, ThreadOut, TotalsOut, WaiterOut,
};

/// The share (%) of an interval of `width` ns that an exclusive lock was held, from its timed
/// holds: holds of one lock never overlap, so their sum is the time it was held. A hold counts in
/// the interval it ends in, so one that began earlier can push a value past 100: capped. `None`
/// for shared-mode locks (read holds overlap) and when not every hold was timed.
fn held_pct(
    kind: Option<LockKind>,
    every_hold_timed: bool,
    hold_ns: u64,
    width: u64,
) -> Option<f64> {
    let exclusive =
        matches!(kind, Some(LockKind::Mutex | LockKind::SpinLock | LockKind::Semaphore));
    (exclusive && every_hold_timed && width > 0)
        .then(|| (hold_ns as f64 * 100.0 / width as f64).min(100.0))
}

/// A histogram with its trailing zero buckets removed (`[]` when empty).
fn trim(h: &[u64]) -> Vec<u64> {
    let n = h.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
    h[..n].to_vec()
}

fn counts_out(g: &Agg) -> CountsOut {
    CountsOut {
        acquisitions: g.stats.acquisitions,
        read_acquisitions: g.read_acquisitions,
        write_acquisitions: g.write_acquisitions,
        contended: g.stats.contended,
        contention_pct: g.contention_pct(),
        trylock_failures: g.stats.trylock_failures,
    }
}

fn stats_out(g: &Agg) -> StatsOut {
    let s = &g.stats;
    StatsOut {
        counts: counts_out(g),
        wait_ns_total: s.wait_ns_total,
        wait_ns_max: s.wait_ns_max,
        wait_ns_avg: g.wait_avg_ns(),
        wait_ns_p50: g.wait_percentile_ns(50.0),
        wait_ns_p90: g.wait_percentile_ns(90.0),
        wait_ns_p99: g.wait_percentile_ns(99.0),
        hold_ns_total: s.hold_ns_total,
        hold_ns_max: s.hold_ns_max,
        hold_ns_avg: g.hold_avg_ns(),
        hold_ns_p50: g.hold_percentile_ns(50.0),
        hold_ns_p90: g.hold_percentile_ns(90.0),
        hold_ns_p99: g.hold_percentile_ns(99.0),
        holds_timed: s.holds_timed,
        owner_changes: s.owner_changes,
        cnt_hold: s.cnt_hold,
        cnt_lock: s.cnt_lock,
        cond_waits: s.cond_waits,
        cond_wait_ns: s.cond_wait_ns,
        wait_hist_log2_ns: trim(&s.wait_hist),
        hold_hist_log2_ns: trim(&s.hold_hist),
    }
}

fn hex(a: u64) -> String {
    format!("{a:#x}")
}

fn inlined_out(f: &Frame) -> Vec<InlinedOut<'_>> {
    f.inlined
        .iter()
        .map(|i| InlinedOut {
            function: i.function.as_deref(),
            file: i.file.as_deref(),
            line: i.line,
        })
        .collect()
}

fn frame_out(f: &Frame) -> FrameOut<'_> {
    FrameOut {
        address: hex(f.address),
        name: f.to_string(),
        function: f.function.as_deref(),
        function_offset: f
            .function
            .as_ref()
            .filter(|_| !f.function_offset_unknown)
            .map(|_| hex(f.function_offset)),
        module: f.module.as_deref(),
        module_offset: f.module.as_ref().map(|_| hex(f.module_offset)),
        file: f.file.as_deref(),
        line: f.line,
        inlined: inlined_out(f),
    }
}

fn stack_out(frames: &[Frame]) -> Vec<FrameOut<'_>> {
    frames.iter().map(frame_out).collect()
}

fn waiter_out(s: &StackAgg) -> WaiterOut<'_> {
    WaiterOut {
        stack: stack_out(&s.frames),
        count: s.count,
        wait_ns: s.ns_total,
        wait_ns_max: s.ns_max,
    }
}

fn holder_out(s: &StackAgg) -> HolderOut<'_> {
    HolderOut {
        stack: stack_out(&s.frames),
        count: s.count,
        hold_ns: s.ns_total,
        hold_ns_max: s.ns_max,
    }
}

fn pair_out(p: &PairAgg) -> PairOut<'_> {
    let known = p.holder.address != 0;
    PairOut {
        lock_id: p.lock,
        lock_name: &p.lock_name,
        waiter_site: p.waiter.to_string(),
        waiter_function: p.waiter.function.as_deref(),
        waiter: frame_out(&p.waiter),
        holder_site: known.then(|| p.holder.to_string()),
        holder_function: p.holder.function.as_deref(),
        holder: known.then(|| frame_out(&p.holder)),
        count: p.count,
        wait_ns: p.wait_ns,
        wait_ns_max: p.wait_ns_max,
    }
}

fn site_out(s: &SiteAgg) -> SiteOut<'_> {
    SiteOut {
        function: &s.function,
        module: s.frame.module.as_deref(),
        address: hex(s.address),
        file: s.frame.file.as_deref(),
        line: s.frame.line,
        inlined: inlined_out(&s.frame),
        stats: stats_out(&s.agg),
    }
}

fn lock_out<'a>(l: &'a LockAgg, opts: &ReportOptions) -> LockOut<'a> {
    let mut pairs: Vec<&PairAgg> = l.pairs.iter().collect();
    pairs.sort_by(|a, b| PairAgg::compare(opts.sort, a, b));
    LockOut {
        id: l.id,
        kind: l.kind.as_str(),
        origin: l.kind.origin(),
        name: l.name.as_deref(),
        name_source: l.name_source.as_str(),
        display_name: l.display_name(),
        address: hex(l.address),
        generation: l.generation,
        threads: l.threads,
        stats: stats_out(&l.agg),
        dropped_acquisitions: (l.lost > 0).then_some(l.lost),
        sites: l.sorted_sites(opts.sort).into_iter().map(site_out).collect(),
        first_use: l.first_use.as_deref().map(stack_out),
        kernel_sleeps: l.sleep.as_ref().map(|s| s.sleeps),
        kernel_sleep_ns: l.sleep.as_ref().map(|s| s.sleep_ns),
        kernel_sleep_ns_max: l.sleep.as_ref().map(|s| s.sleep_ns_max),
        preempted_holds: l.sleep.as_ref().map(|s| s.preempted_holds),
        preempted_ns: l.sleep.as_ref().map(|s| s.preempted_ns),
        preempted_wait_ns: l.sleep.as_ref().map(|s| s.preempted_wait_ns),
        waiters: l.waiters.iter().map(waiter_out).collect(),
        holders: l.holders.iter().map(holder_out).collect(),
        pairs: pairs.into_iter().map(pair_out).collect(),
    }
}

fn thread_out(t: &ThreadAgg) -> ThreadOut<'_> {
    ThreadOut {
        index: t.index,
        tid: t.tid,
        name: &t.name,
        locks: t.locks,
        stats: stats_out(&t.agg),
    }
}

/// Writes the JSON report (pretty-printed, newline-terminated). `opts.sort` orders `locks[]`,
/// their `sites[]` and `pairs[]`, `threads[]` and the top-level `pairs[]`; `opts.top`, when
/// given, keeps that many `locks[]`, `threads[]` and `pairs[]` (totals cover the whole
/// profile, or the filter's selection); `opts.by` does not apply.
pub fn json(a: &Analysis, opts: &ReportOptions, w: &mut dyn Write) -> io::Result<()> {
    let h = &a.header;
    let t = &a.totals.agg;
    let top = opts.top.unwrap_or(usize::MAX);
    let wait_ms_per_s =
        (h.duration_ns > 0).then(|| t.stats.wait_ns_total as f64 / h.duration_ns as f64 * 1000.0);
    let kinds: std::collections::HashMap<u32, LockKind> =
        a.locks.iter().map(|l| (l.id, l.kind)).collect();
    let doc = Doc {
        schema_version: SCHEMA_VERSION,
        generator: concat!("lockmeter-report ", env!("CARGO_PKG_VERSION")),
        header: HeaderOut {
            collector: &h.collector,
            lockmeter_version: &h.lockmeter_version,
            pid: h.pid,
            ppid: h.ppid,
            image_seq: h.image_seq,
            cmdline: &h.cmdline,
            exe: &h.exe,
            start_unix_ns: h.start_unix_ns,
            end_unix_ns: h.end_unix_ns,
            duration_ns: h.duration_ns,
            cpu_count: h.cpu_count,
            hold_timing: match h.hold_timing {
                HoldTiming::On => "on",
                HoldTiming::Off => "off",
                HoldTiming::Sampled(_) => "sampled",
            },
            hold_sample_every: match h.hold_timing {
                HoldTiming::Sampled(n) => Some(n),
                _ => None,
            },
            end_reason: match h.end_reason {
                EndReason::Exit(_) => "exit",
                EndReason::UnderscoreExit(_) => "_exit",
                EndReason::Signal(_) => "signal",
                EndReason::Exec => "exec",
                EndReason::Snapshot => "snapshot",
                EndReason::Killed(_) => "killed",
                EndReason::ExitGroup(_) => "exit_group",
                EndReason::Vanished => "vanished",
                EndReason::OomKilled => "oom_killed",
            },
            end_signal: match h.end_reason {
                EndReason::Signal(s) | EndReason::Killed(s) => Some(s),
                EndReason::OomKilled => Some(9),
                _ => None,
            },
            end_exit_code: match h.end_reason {
                EndReason::ExitGroup(c) => Some(c),
                EndReason::Exit(c) | EndReason::UnderscoreExit(c) => c,
                _ => None,
            },
            clock: ClockOut {
                source: match h.clock.source {
                    1 => "tsc",
                    2 => "monotonic",
                    _ => "unknown",
                },
                hz: h.clock.hz,
                hz_run: h.clock.hz_run,
            },
        },
        headline: Headline {
            threads_waiting_avg: wait_ms_per_s.map(|v| v / 1000.0),
            wait_ms_per_s,
            available_ms_per_s: u64::from(h.cpu_count) * 1000,
            cpu_time_pct: wait_ms_per_s
                .filter(|_| h.cpu_count > 0)
                .map(|v| v / (f64::from(h.cpu_count) * 1000.0) * 100.0),
        },
        totals: TotalsOut {
            counts: counts_out(t),
            wait_ns: t.stats.wait_ns_total,
            wait_ns_max: t.stats.wait_ns_max,
            hold_ns: t.stats.hold_ns_total,
            hold_ns_max: t.stats.hold_ns_max,
            holds_timed: t.stats.holds_timed,
            owner_changes: t.stats.owner_changes,
            cond_waits: t.stats.cond_waits,
            cond_wait_ns: t.stats.cond_wait_ns,
            dropped: a.dropped.acquisitions,
            locks: a.totals.locks,
            sites: a.totals.sites,
            threads: a.totals.threads,
        },
        overhead: OverheadOut {
            ns_per_pair: a.overhead.ns_per_pair,
            estimated_total_ns: a.overhead.estimated_total_ns,
            estimated_slowdown: a.overhead.estimated_slowdown(),
            contended_ns: a.overhead.contended_ns,
            serialized_ns: a.overhead.serialized_ns,
            cpu_ns: a.overhead.cpu_ns,
            hooks_ns: a.overhead.hooks_ns,
            start_ns: a.overhead.start_ns,
            end_ns: a.overhead.end_ns,
            other_images: a.overhead.other_images,
            other_fixed_ns: a.overhead.other_fixed_ns,
            memory_bytes: a.overhead.memory_bytes,
        },
        dropped: DroppedOut {
            acquisitions: a.dropped.acquisitions,
            locks: a.dropped.locks,
            threads: a.dropped.threads,
            holds: a.dropped.holds,
            stacks: a.dropped.stacks,
            acquisitions_no_thread: a.dropped.acquisitions_no_thread,
            acquisitions_table_full: a.dropped.acquisitions_table_full,
            acquisitions_registry_full: a.dropped.acquisitions_registry_full,
        },
        sort: opts.sort.as_str(),
        top: opts.top,
        filter: FilterOut {
            lock: a.filter.lock.as_deref(),
            function: a.filter.function.as_deref(),
            locks_before: a.unfiltered_locks,
        },
        notes: &a.notes,
        locks: a.sorted_locks(opts.sort).into_iter().take(top).map(|l| lock_out(l, opts)).collect(),
        threads: a.sorted_threads(opts.sort).into_iter().take(top).map(thread_out).collect(),
        processes: a
            .sorted_processes(opts.sort)
            .into_iter()
            .map(|p| ProcessOut {
                pid: p.pid,
                ppid: p.ppid,
                name: &p.name,
                images: p.images,
                threads: p.threads,
                locks: p.locks,
                stats: stats_out(&p.agg),
            })
            .collect(),
        cpus: a
            .cpus
            .iter()
            .map(|c| CpuOut {
                cpu: c.cpu,
                acquisitions: c.acquisitions,
                contended: c.contended,
                contention_pct: crate::analysis::ratio_pct(c.contended, c.acquisitions),
                wait_ns: c.wait_ns,
            })
            .collect(),
        pairs: a.sorted_pairs(opts.sort).into_iter().take(top).map(pair_out).collect(),
        timeline: a
            .timeline
            .iter()
            .map(|iv| IntervalOut {
                pid: iv.pid,
                start_ns: iv.start_ns,
                end_ns: iv.end_ns,
                locks: iv
                    .locks
                    .iter()
                    .map(|l| IntervalLockOut {
                        id: l.lock,
                        acquisitions: l.acquisitions,
                        contended: l.contended,
                        wait_ns: l.wait_ns,
                        hold_ns: l.hold_ns,
                        held_pct: held_pct(
                            kinds.get(&l.lock).copied(),
                            a.header.hold_timing == HoldTiming::On,
                            l.hold_ns,
                            iv.end_ns.saturating_sub(iv.start_ns),
                        ),
                    })
                    .collect(),
            })
            .collect(),
    };
    serde_json::to_writer_pretty(&mut *w, &doc).map_err(io::Error::other)?;
    writeln!(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_share_of_an_interval() {
        let m = Some(LockKind::Mutex);
        assert_eq!(held_pct(m, true, 250, 1000), Some(25.0));
        // A hold that began in an earlier interval counts where it ends: capped.
        assert_eq!(held_pct(m, true, 1500, 1000), Some(100.0));
        // Read holds overlap; sampled or untimed holds do not add up to the time held.
        assert_eq!(held_pct(Some(LockKind::RwLock), true, 250, 1000), None);
        assert_eq!(held_pct(m, false, 250, 1000), None);
        assert_eq!(held_pct(m, true, 0, 0), None);
    }
}

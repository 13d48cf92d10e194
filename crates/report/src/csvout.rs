//! CSV output: a header row, then one row per entry of the chosen view, with the JSON field
//! names (histograms left out). Absent values (`null` in JSON) are empty cells.

use std::io::{self, Write};

use crate::analysis::{Agg, Analysis, LockAgg, ratio_pct};
use crate::options::{By, ReportOptions};

/// The statistics columns every lock, site and thread row carries.
const STATS: [&str; 24] = [
    "acquisitions",
    "read_acquisitions",
    "write_acquisitions",
    "contended",
    "contention_pct",
    "trylock_failures",
    "wait_ns_total",
    "wait_ns_max",
    "wait_ns_avg",
    "wait_ns_p50",
    "wait_ns_p90",
    "wait_ns_p99",
    "hold_ns_total",
    "hold_ns_max",
    "hold_ns_avg",
    "hold_ns_p50",
    "hold_ns_p90",
    "hold_ns_p99",
    "holds_timed",
    "owner_changes",
    "cnt_hold",
    "cnt_lock",
    "cond_waits",
    "cond_wait_ns",
];

fn opt(v: Option<u64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

fn stats_cells(g: &Agg) -> Vec<String> {
    let s = &g.stats;
    vec![
        s.acquisitions.to_string(),
        g.read_acquisitions.to_string(),
        g.write_acquisitions.to_string(),
        s.contended.to_string(),
        g.contention_pct().to_string(),
        s.trylock_failures.to_string(),
        s.wait_ns_total.to_string(),
        s.wait_ns_max.to_string(),
        opt(g.wait_avg_ns()),
        opt(g.wait_percentile_ns(50.0)),
        opt(g.wait_percentile_ns(90.0)),
        opt(g.wait_percentile_ns(99.0)),
        s.hold_ns_total.to_string(),
        s.hold_ns_max.to_string(),
        opt(g.hold_avg_ns()),
        opt(g.hold_percentile_ns(50.0)),
        opt(g.hold_percentile_ns(90.0)),
        opt(g.hold_percentile_ns(99.0)),
        s.holds_timed.to_string(),
        s.owner_changes.to_string(),
        s.cnt_hold.to_string(),
        s.cnt_lock.to_string(),
        s.cond_waits.to_string(),
        s.cond_wait_ns.to_string(),
    ]
}

/// One field, quoted when it holds a comma, a quote or a line break.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

fn row<S: AsRef<str>>(w: &mut dyn Write, cells: &[S]) -> io::Result<()> {
    let line: Vec<String> = cells.iter().map(|c| field(c.as_ref())).collect();
    writeln!(w, "{}", line.join(","))
}

fn hex(a: u64) -> String {
    format!("{a:#x}")
}

/// A header of `head` and the statistics columns, then one row per `(cells, stats)`.
fn stats_rows<'a>(
    w: &mut dyn Write,
    head: &[&str],
    rows: impl Iterator<Item = (Vec<String>, &'a Agg)>,
) -> io::Result<()> {
    let mut h = head.to_vec();
    h.extend(STATS);
    row(w, &h)?;
    for (mut r, agg) in rows {
        r.extend(stats_cells(agg));
        row(w, &r)?;
    }
    Ok(())
}

/// The columns that say which lock a row is: id, kind, name, address, generation.
fn lock_cells(l: &LockAgg) -> Vec<String> {
    vec![
        l.id.to_string(),
        l.kind.as_str().into(),
        l.name.clone().unwrap_or_default(),
        hex(l.address),
        l.generation.to_string(),
    ]
}

/// Writes the CSV report. `opts.by` picks the rows, `opts.sort` their order, `opts.top`
/// (when given) their number; without it every row is written.
pub fn csv(a: &Analysis, opts: &ReportOptions, w: &mut dyn Write) -> io::Result<()> {
    let top = opts.top.unwrap_or(usize::MAX);
    match opts.by {
        By::Lock => stats_rows(
            w,
            &["id", "kind", "name", "address", "generation", "threads", "sites"],
            a.sorted_locks(opts.sort).into_iter().take(top).map(|l| {
                let mut r = lock_cells(l);
                r.extend([l.threads.to_string(), l.sites.len().to_string()]);
                (r, &l.agg)
            }),
        )?,
        By::Site => stats_rows(
            w,
            &[
                "lock_id",
                "lock_kind",
                "lock_name",
                "lock_address",
                "lock_generation",
                "function",
                "module",
                "address",
                "file",
                "line",
            ],
            a.sorted_sites(opts.sort).into_iter().take(top).map(|(l, s)| {
                let mut r = lock_cells(l);
                r.extend([
                    s.function.clone(),
                    s.frame.module.clone().unwrap_or_default(),
                    hex(s.address),
                    s.frame.file.clone().unwrap_or_default(),
                    s.frame.line.map(|l| l.to_string()).unwrap_or_default(),
                ]);
                (r, &s.agg)
            }),
        )?,
        By::Thread => stats_rows(
            w,
            &["index", "tid", "name", "locks"],
            a.sorted_threads(opts.sort).into_iter().take(top).map(|t| {
                let r = vec![
                    t.index.to_string(),
                    t.tid.to_string(),
                    t.name.clone(),
                    t.locks.to_string(),
                ];
                (r, &t.agg)
            }),
        )?,
        By::Process => stats_rows(
            w,
            &["pid", "ppid", "name", "images", "threads", "locks"],
            a.sorted_processes(opts.sort).into_iter().take(top).map(|p| {
                let r = vec![
                    p.pid.to_string(),
                    p.ppid.to_string(),
                    p.name.clone(),
                    p.images.to_string(),
                    p.threads.to_string(),
                    p.locks.to_string(),
                ];
                (r, &p.agg)
            }),
        )?,
        By::Pair => {
            row(
                w,
                &[
                    "lock_id",
                    "lock_name",
                    "waiter_site",
                    "waiter_function",
                    "waiter_file",
                    "waiter_line",
                    "waiter_address",
                    "holder_site",
                    "holder_function",
                    "holder_file",
                    "holder_line",
                    "holder_address",
                    "count",
                    "wait_ns",
                    "wait_ns_max",
                ],
            )?;
            for p in a.sorted_pairs(opts.sort).into_iter().take(top) {
                let known = p.holder.address != 0;
                let opt_s = |v: Option<&str>| v.unwrap_or_default().to_owned();
                let opt_l = |v: Option<u32>| v.map(|l| l.to_string()).unwrap_or_default();
                row(
                    w,
                    &[
                        p.lock.to_string(),
                        p.lock_name.clone(),
                        p.waiter.to_string(),
                        opt_s(p.waiter.function.as_deref()),
                        opt_s(p.waiter.file.as_deref()),
                        opt_l(p.waiter.line),
                        hex(p.waiter.address),
                        if known { p.holder.to_string() } else { String::new() },
                        opt_s(p.holder.function.as_deref()),
                        opt_s(p.holder.file.as_deref()),
                        opt_l(p.holder.line),
                        if known { hex(p.holder.address) } else { String::new() },
                        p.count.to_string(),
                        p.wait_ns.to_string(),
                        p.wait_ns_max.to_string(),
                    ],
                )?;
            }
        }
        By::Cpu => {
            row(w, &["cpu", "acquisitions", "contended", "contention_pct", "wait_ns"])?;
            for c in a.sorted_cpus(opts.sort).into_iter().take(top) {
                row(
                    w,
                    &[
                        c.cpu.to_string(),
                        c.acquisitions.to_string(),
                        c.contended.to_string(),
                        ratio_pct(c.contended, c.acquisitions).to_string(),
                        c.wait_ns.to_string(),
                    ],
                )?;
            }
        }
    }
    Ok(())
}

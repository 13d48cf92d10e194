//! The human-readable report.

use std::io::{self, Write};

use lockmeter_format::model::{EndReason, HoldTiming, LockKind};

use crate::analysis::{Agg, Analysis, LockAgg, PairAgg, StackAgg, hist_rows, ratio_pct};
use crate::options::{By, DEFAULT_TOP, ReportOptions, SortKey};
use crate::symbolize::{Frame, short_location};
use crate::units::{Align, Table, fmt_bytes, fmt_ns, fmt_opt_ns, fmt_pct};

mod header;
mod summary;

use header::{header, nothing_recorded};
pub use header::{headline, printable};
use summary::kernel_sleeps_table;
pub use summary::{SUMMARY_PAIRS, summary};

/// Call sites shown beneath each lock in the by-lock view.
pub const SITES_PER_LOCK: usize = 5;

/// Locks detailed by `--hist` and `--stacks` when no `--top` is given.
pub const DETAIL_LOCKS: usize = 5;

/// Waiter stacks and holder stacks shown per lock by `--stacks`.
pub const STACKS_PER_LOCK: usize = 3;

/// Waiter–holder pairs shown per lock by `--stacks`.
pub const PAIRS_PER_LOCK: usize = 5;

/// Width of the `@` bar of histogram tables.
const BAR: usize = 30;

/// Writes the text report: header, then the table of the chosen view, then (with `hist` or
/// `stacks`) the details of the top locks.
pub fn text(a: &Analysis, opts: &ReportOptions, w: &mut dyn Write) -> io::Result<()> {
    header(a, w)?;
    if a.filter.is_active() {
        writeln!(
            w,
            "filter:   {}: {} of {} locks; totals and views cover the selection{}",
            a.filter.describe(),
            a.locks.len(),
            a.unfiltered_locks,
            if opts.by == By::Cpu { " (per-CPU totals cannot be filtered)" } else { "" }
        )?;
    }
    let top = opts.top.unwrap_or(DEFAULT_TOP);
    writeln!(w)?;
    match opts.by {
        By::Lock => locks_table(a, opts.sort, top, SITES_PER_LOCK, w)?,
        By::Site => sites_table(a, opts.sort, top, w)?,
        By::Thread => threads_table(a, opts.sort, top, w)?,
        By::Cpu => cpus_table(a, opts.sort, top, w)?,
        By::Pair => pairs_table(a, opts.sort, top, w)?,
        By::Process => processes_table(a, opts.sort, top, w)?,
    }
    if opts.by == By::Lock {
        kernel_sleeps_table(a, opts.sort, top, w)?;
    }
    if opts.hist || opts.stacks {
        let n = opts.top.unwrap_or(DETAIL_LOCKS);
        for l in a.sorted_locks(opts.sort).into_iter().take(n) {
            writeln!(w)?;
            lock_details(l, opts, w)?;
        }
    }
    Ok(())
}

/// `function+0xOFF (file:line)`, or the frame alone without a location.
fn site_with_location(f: &Frame) -> String {
    match f.short_location() {
        Some(loc) => format!("{f} ({loc})"),
        None => f.to_string(),
    }
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn pairs_table(a: &Analysis, key: SortKey, top: usize, w: &mut dyn Write) -> io::Result<()> {
    let pairs = a.sorted_pairs(key);
    if pairs.is_empty() {
        return writeln!(
            w,
            "no waiter-holder pairs: no contended acquisition recorded a stack (or the profile predates holder attribution)"
        );
    }
    let key = match key {
        SortKey::Hold | SortKey::HoldMax => SortKey::Wait,
        SortKey::Acquisitions | SortKey::ContentionRate => SortKey::Contended,
        k => k,
    };
    let shown = top.min(pairs.len());
    heading(w, "waiter-holder pairs", key, shown, pairs.len())?;
    pair_rows(&pairs[..shown], true, "", w)
}

/// The table of waiter–holder pairs (with a LOCK column when `lock_column`).
fn pair_rows(
    pairs: &[&PairAgg],
    lock_column: bool,
    indent: &str,
    w: &mut dyn Write,
) -> io::Result<()> {
    let all: u64 = pairs.iter().map(|p| p.wait_ns).sum();
    let mut cols = vec![
        ("WAIT-TOTAL", Align::Right),
        ("CONTENDED", Align::Right),
        ("WAIT-MAX", Align::Right),
        ("WAIT-AVG", Align::Right),
        ("SHARE", Align::Right),
    ];
    if lock_column {
        cols.push(("LOCK", Align::Left));
    }
    cols.push(("WAITER SITE", Align::Left));
    cols.push(("HELD FROM", Align::Left));
    let mut t = Table::new(&cols);
    for p in pairs {
        let mut row = vec![
            fmt_ns(p.wait_ns),
            p.count.to_string(),
            fmt_ns(p.wait_ns_max),
            fmt_opt_ns((p.count > 0).then(|| p.wait_ns / p.count)),
            fmt_pct(ratio_pct(p.wait_ns, all)),
        ];
        if lock_column {
            row.push(p.lock_name.clone());
        }
        row.push(site_with_location(&p.waiter));
        row.push(if p.holder.address == 0 {
            "[unknown]".into()
        } else {
            site_with_location(&p.holder)
        });
        t.row(row);
    }
    t.write(indent, w)
}

/// A lock's details: histograms (`hist`) and waiter/holder stacks and pairs (`stacks`).
fn lock_details(l: &LockAgg, opts: &ReportOptions, w: &mut dyn Write) -> io::Result<()> {
    let s = &l.agg.stats;
    writeln!(
        w,
        "lock {} ({} at {:#x}): {} acquisitions, {} contended ({}), wait {}, hold {}",
        printable(&l.display_name(), usize::MAX),
        l.kind.as_str(),
        l.address,
        s.acquisitions,
        s.contended,
        fmt_pct(l.agg.contention_pct()),
        fmt_ns(s.wait_ns_total),
        hold_total(&l.agg)
    )?;
    if opts.hist {
        writeln!(w)?;
        let pcts = |f: &dyn Fn(f64) -> Option<u64>, max: u64| {
            format!(
                "p50 {}, p90 {}, p99 {}, max {}",
                fmt_opt_ns(f(50.0)),
                fmt_opt_ns(f(90.0)),
                fmt_opt_ns(f(99.0)),
                fmt_ns(max)
            )
        };
        if s.contended == 0 && s.wait_hist.iter().all(|&c| c == 0) {
            writeln!(w, "  wait time: no contended acquisition")?;
        } else {
            writeln!(
                w,
                "  wait time of {}: {}",
                plural(s.contended, "contended acquisition", "contended acquisitions"),
                pcts(&|p| l.agg.wait_percentile_ns(p), s.wait_ns_max)
            )?;
            hist_table(&s.wait_hist, w)?;
        }
        writeln!(w)?;
        if s.holds_timed == 0 && s.hold_hist.iter().all(|&c| c == 0) {
            writeln!(w, "  hold time: not measured")?;
        } else {
            writeln!(
                w,
                "  hold time of {}: {}",
                plural(s.holds_timed, "timed hold", "timed holds"),
                pcts(&|p| l.agg.hold_percentile_ns(p), s.hold_ns_max)
            )?;
            hist_table(&s.hold_hist, w)?;
        }
    }
    if opts.stacks {
        writeln!(w)?;
        let wait: u64 = l.waiters.iter().map(|x| x.ns_total).sum();
        if l.waiters.is_empty() {
            writeln!(w, "  waiters: no stack recorded")?;
        } else {
            writeln!(
                w,
                "  waiters ({}, by wait):",
                shown_of(STACKS_PER_LOCK.min(l.waiters.len()), l.waiters.len(), "stack", "stacks")
            )?;
            for (i, st) in l.waiters.iter().take(STACKS_PER_LOCK).enumerate() {
                writeln!(
                    w,
                    "    #{} {}, wait {} ({} of the lock's), max {}",
                    i + 1,
                    plural(st.count, "contended acquisition", "contended acquisitions"),
                    fmt_ns(st.ns_total),
                    fmt_pct(ratio_pct(st.ns_total, wait)),
                    fmt_ns(st.ns_max)
                )?;
                stack_lines(st, w)?;
            }
        }
        let hold: u64 = l.holders.iter().map(|x| x.ns_total).sum();
        if l.holders.is_empty() {
            writeln!(w, "  holders while others waited: no stack recorded")?;
        } else {
            writeln!(
                w,
                "  holders while others waited ({}, by hold time):",
                shown_of(STACKS_PER_LOCK.min(l.holders.len()), l.holders.len(), "stack", "stacks")
            )?;
            for (i, st) in l.holders.iter().take(STACKS_PER_LOCK).enumerate() {
                writeln!(
                    w,
                    "    #{} {}, hold {} ({} of the lock's), max {}",
                    i + 1,
                    plural(st.count, "hold", "holds"),
                    fmt_ns(st.ns_total),
                    fmt_pct(ratio_pct(st.ns_total, hold)),
                    fmt_ns(st.ns_max)
                )?;
                stack_lines(st, w)?;
            }
        }
        if !l.pairs.is_empty() {
            let pairs: Vec<&PairAgg> = l.pairs.iter().take(PAIRS_PER_LOCK).collect();
            writeln!(
                w,
                "  who waited on whom ({}, by wait):",
                shown_of(pairs.len(), l.pairs.len(), "pair", "pairs")
            )?;
            pair_rows(&pairs, false, "    ", w)?;
        }
    }
    Ok(())
}

fn shown_of(shown: usize, total: usize, one: &str, many: &str) -> String {
    if shown < total {
        format!("top {shown} of {total} {many}")
    } else {
        plural(total as u64, one, many)
    }
}

/// Names longer than this have their generic arguments elided in stacks (`f<…>`).
const LONG_NAME: usize = 60;

/// Names are aligned in stacks up to this width; longer ones push their location right.
const NAME_COLUMN: usize = 72;

/// `name` with the generic arguments (`<...>` nested inside another `<...>` or after a name)
/// elided when it is longer than [`LONG_NAME`]: `catch_unwind<u64, F>` → `catch_unwind<…>`. A
/// leading qualified-path `<T as Trait>` is kept, with its own arguments elided.
pub(crate) fn shorten(name: &str) -> String {
    if name.chars().count() <= LONG_NAME {
        return name.to_owned();
    }
    let mut out = String::with_capacity(name.len());
    let mut depth = 0usize;
    // Depth at which arguments are elided: 1 for `f<...>`, 2 inside a leading `<T as U>`.
    let elide_at = if name.starts_with('<') { 2 } else { 1 };
    for c in name.chars() {
        match c {
            '<' => {
                depth += 1;
                if depth == elide_at {
                    out.push_str("<…");
                } else if depth < elide_at {
                    out.push('<');
                }
            }
            '>' => {
                if depth <= elide_at {
                    out.push('>');
                }
                depth = depth.saturating_sub(1);
            }
            _ if depth < elide_at => out.push(c),
            _ => {}
        }
    }
    out
}

/// The frames of a stack, one per line, inlined functions first, locations aligned.
fn stack_lines(st: &StackAgg, w: &mut dyn Write) -> io::Result<()> {
    let mut lines: Vec<(String, String)> = Vec::new();
    for f in &st.frames {
        for i in &f.inlined {
            let name = shorten(i.function.as_deref().unwrap_or("??"));
            let loc = short_location(i.file.as_deref(), i.line).unwrap_or_default();
            lines.push((format!("{name} [inlined]"), loc));
        }
        let loc = match (f.short_location(), &f.module) {
            (Some(l), _) => l,
            (None, Some(m)) if f.function.is_some() => format!("({m})"),
            _ => String::new(),
        };
        lines.push((shorten(&f.to_string()), loc));
    }
    if lines.is_empty() {
        return writeln!(w, "          [stack not recorded]");
    }
    let width = lines.iter().map(|(n, _)| n.chars().count()).max().unwrap_or(0).min(NAME_COLUMN);
    for (name, loc) in lines {
        let line = format!("          {name:<width$}  {loc}");
        writeln!(w, "{}", line.trim_end())?;
    }
    Ok(())
}

/// A log2 histogram as a table: range of each bucket, count, %, cumulative %, and a bar.
fn hist_table(h: &[u64], w: &mut dyn Write) -> io::Result<()> {
    let rows = hist_rows(h);
    let peak = rows.iter().map(|r| r.count).max().unwrap_or(0);
    let mut t = Table::new(&[
        ("FROM", Align::Right),
        ("", Align::Left),
        ("TO", Align::Right),
        ("COUNT", Align::Right),
        ("%", Align::Right),
        ("CUM%", Align::Right),
        ("DISTRIBUTION", Align::Left),
    ]);
    for r in rows {
        let bar = if peak == 0 {
            0
        } else {
            ((r.count as f64 / peak as f64) * BAR as f64).round() as usize
        };
        let bar = if r.count > 0 { bar.max(1) } else { 0 };
        t.row(vec![
            fmt_ns(r.low),
            "..".into(),
            if r.bucket == 0 { fmt_ns(0) } else { format!("< {}", fmt_ns(r.high)) },
            r.count.to_string(),
            fmt_pct(r.pct),
            fmt_pct(r.cum_pct),
            format!("|{}", "@".repeat(bar)),
        ]);
    }
    t.write("    ", w)
}

/// A hold total, `-` when no hold was timed.
fn hold_total(g: &Agg) -> String {
    if g.stats.holds_timed == 0 && g.stats.hold_ns_total == 0 {
        "-".into()
    } else {
        fmt_ns(g.stats.hold_ns_total)
    }
}

fn hold_max(g: &Agg) -> String {
    if g.stats.holds_timed == 0 && g.stats.hold_ns_max == 0 {
        "-".into()
    } else {
        fmt_ns(g.stats.hold_ns_max)
    }
}

/// The statistics columns, what matters most first: the time lost waiting, then how often.
const STAT_COLS: [(&str, Align); 8] = [
    ("WAIT-TOTAL", Align::Right),
    ("CONTENDED", Align::Right),
    ("CON%", Align::Right),
    ("ACQUIRED", Align::Right),
    ("WAIT-MAX", Align::Right),
    ("WAIT-AVG", Align::Right),
    ("HOLD-TOTAL", Align::Right),
    ("HOLD-MAX", Align::Right),
];

fn stat_cells(g: &Agg) -> Vec<String> {
    let s = &g.stats;
    vec![
        fmt_ns(s.wait_ns_total),
        s.contended.to_string(),
        fmt_pct(g.contention_pct()),
        s.acquisitions.to_string(),
        fmt_ns(s.wait_ns_max),
        fmt_opt_ns(g.wait_avg_ns()),
        hold_total(g),
        hold_max(g),
    ]
}

fn heading(
    w: &mut dyn Write,
    what: &str,
    key: SortKey,
    shown: usize,
    total: usize,
) -> io::Result<()> {
    if shown < total {
        writeln!(w, "{what} by {} (top {shown} of {total}):", key.describe())
    } else {
        writeln!(w, "{what} by {} ({total}):", key.describe())
    }
}

fn locks_table(
    a: &Analysis,
    key: SortKey,
    top: usize,
    sites: usize,
    w: &mut dyn Write,
) -> io::Result<()> {
    if a.locks.is_empty() {
        return writeln!(w, "{}", nothing_recorded(a));
    }
    // With no contention at all, wait and contention keys tie everywhere: acquisitions say more.
    let uncontended =
        matches!(
            key,
            SortKey::Wait | SortKey::WaitMax | SortKey::Contended | SortKey::ContentionRate
        ) && a.locks.iter().all(|l| l.agg.stats.wait_ns_total == 0 && l.agg.stats.contended == 0);
    let key = if uncontended { SortKey::Acquisitions } else { key };
    let locks = a.sorted_locks(key);
    let shown = top.min(locks.len());
    if uncontended {
        let n = if shown < locks.len() {
            format!("top {shown} of {} locks", locks.len())
        } else {
            plural(locks.len() as u64, "lock", "locks")
        };
        writeln!(w, "no contention: sorted by acquisitions ({n}):")?;
    } else {
        heading(w, "locks", key, shown, locks.len())?;
    }
    let mut cols = STAT_COLS.to_vec();
    cols.push(("KIND", Align::Left));
    cols.push(("NAME/ADDRESS", Align::Left));
    let mut t = Table::new(&cols);
    for l in locks.iter().take(shown) {
        let mut row = stat_cells(&l.agg);
        row.push(l.kind.as_str().into());
        row.push(printable(&l.display_name(), usize::MAX));
        t.row(row);
        for s in l.sorted_sites(key).into_iter().take(sites) {
            let mut row = stat_cells(&s.agg);
            row.push(String::new());
            row.push(format!("  at {}", s.function));
            t.row(row);
        }
        if l.sites.len() > sites && sites > 0 {
            let rest = l.sites.len() - sites;
            let mut row = vec![String::new(); STAT_COLS.len() + 1];
            row.push(format!("  ... {rest} more site{}", if rest == 1 { "" } else { "s" }));
            t.row(row);
        }
    }
    t.write(" ", w)
}

fn sites_table(a: &Analysis, key: SortKey, top: usize, w: &mut dyn Write) -> io::Result<()> {
    let sites = a.sorted_sites(key);
    if sites.is_empty() {
        return writeln!(w, "no lock acquisitions were recorded");
    }
    let shown = top.min(sites.len());
    heading(w, "call sites", key, shown, sites.len())?;
    let mut cols = STAT_COLS.to_vec();
    cols.push(("LOCK", Align::Left));
    cols.push(("SITE", Align::Left));
    let mut t = Table::new(&cols);
    for (l, s) in sites.iter().take(shown) {
        let mut row = stat_cells(&s.agg);
        row.push(printable(&l.display_name(), usize::MAX));
        row.push(s.function.clone());
        t.row(row);
    }
    t.write(" ", w)
}

fn threads_table(a: &Analysis, key: SortKey, top: usize, w: &mut dyn Write) -> io::Result<()> {
    let threads = a.sorted_threads(key);
    if threads.is_empty() {
        return writeln!(w, "no thread took a lock");
    }
    let shown = top.min(threads.len());
    heading(w, "threads", key, shown, threads.len())?;
    let mut cols = STAT_COLS.to_vec();
    cols.push(("LOCKS", Align::Right));
    cols.push(("TID", Align::Right));
    cols.push(("NAME", Align::Left));
    let mut t = Table::new(&cols);
    for th in threads.iter().take(shown) {
        let mut row = stat_cells(&th.agg);
        row.push(th.locks.to_string());
        row.push(th.tid.to_string());
        row.push(printable(&th.name, usize::MAX));
        t.row(row);
    }
    t.write(" ", w)
}

fn processes_table(a: &Analysis, key: SortKey, top: usize, w: &mut dyn Write) -> io::Result<()> {
    let procs = a.sorted_processes(key);
    let shown = top.min(procs.len());
    heading(w, "processes", key, shown, procs.len())?;
    let mut cols = STAT_COLS.to_vec();
    cols.extend([
        ("LOCKS", Align::Right),
        ("PID", Align::Right),
        ("PARENT", Align::Right),
        ("PROCESS", Align::Left),
    ]);
    let mut t = Table::new(&cols);
    for p in procs.iter().take(shown) {
        let mut row = stat_cells(&p.agg);
        row.push(p.locks.to_string());
        row.push(p.pid.to_string());
        row.push(p.ppid.to_string());
        row.push(printable(&p.name, usize::MAX));
        t.row(row);
    }
    t.write(" ", w)
}

fn cpus_table(a: &Analysis, key: SortKey, top: usize, w: &mut dyn Write) -> io::Result<()> {
    let cpus = a.sorted_cpus(key);
    if cpus.is_empty() {
        return writeln!(w, "no per-CPU data in this profile");
    }
    let shown = top.min(cpus.len());
    // CPUs carry no hold or max data; those keys sort by total wait.
    let key = match key {
        SortKey::WaitMax | SortKey::Hold | SortKey::HoldMax => SortKey::Wait,
        k => k,
    };
    heading(w, "CPUs", key, shown, cpus.len())?;
    cpu_rows(a, &cpus[..shown], w)
}

fn cpu_rows(
    a: &Analysis,
    cpus: &[&lockmeter_format::model::CpuStats],
    w: &mut dyn Write,
) -> io::Result<()> {
    let all_wait: u64 = a.cpus.iter().map(|c| c.wait_ns).sum();
    let mut t = Table::new(&[
        ("WAIT-TOTAL", Align::Right),
        ("CONTENDED", Align::Right),
        ("CON%", Align::Right),
        ("ACQUIRED", Align::Right),
        ("WAIT-AVG", Align::Right),
        ("WAIT-SHARE", Align::Right),
        ("CPU", Align::Right),
    ]);
    for c in cpus {
        t.row(vec![
            fmt_ns(c.wait_ns),
            c.contended.to_string(),
            fmt_pct(ratio_pct(c.contended, c.acquisitions)),
            c.acquisitions.to_string(),
            fmt_opt_ns((c.contended > 0).then(|| c.wait_ns / c.contended)),
            fmt_pct(ratio_pct(c.wait_ns, all_wait)),
            c.cpu.to_string(),
        ]);
    }
    t.write(" ", w)
}

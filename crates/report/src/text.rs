//! The human-readable report.

use std::io::{self, Write};

use lockmeter_format::model::{EndReason, HoldTiming};

use crate::analysis::{Agg, Analysis, ratio_pct};
use crate::options::{By, DEFAULT_TOP, ReportOptions, SortKey};
use crate::units::{Align, Table, fmt_bytes, fmt_ns, fmt_opt_ns, fmt_pct};

/// Call sites shown beneath each lock in the by-lock view.
pub const SITES_PER_LOCK: usize = 5;

/// Writes the text report: header, then the table of the chosen view.
pub fn text(a: &Analysis, opts: &ReportOptions, w: &mut dyn Write) -> io::Result<()> {
    header(a, w)?;
    let top = opts.top.unwrap_or(DEFAULT_TOP);
    writeln!(w)?;
    match opts.by {
        By::Lock => locks_table(a, opts.sort, top, SITES_PER_LOCK, w),
        By::Site => sites_table(a, opts.sort, top, w),
        By::Thread => threads_table(a, opts.sort, top, w),
        By::Cpu => cpus_table(a, opts.sort, top, w),
    }
}

/// The short report `lockmeter run` prints at exit: the header and the `top` locks by total
/// wait, without their sites.
pub fn summary(a: &Analysis, top: usize, w: &mut dyn Write) -> io::Result<()> {
    header(a, w)?;
    writeln!(w)?;
    locks_table(a, SortKey::Wait, top, 0, w)
}

/// The "wait: W ms/s of N x 1000 ms/s available (P% of CPU time)" headline, Lockmeter's
/// measure of how much of the machine lock waiting consumed.
pub fn headline(a: &Analysis) -> String {
    let wait = a.totals.agg.stats.wait_ns_total;
    let d = a.header.duration_ns;
    let n = a.header.cpu_count;
    if d == 0 {
        return format!("wait: {} in total (run duration unknown)", fmt_ns(wait));
    }
    let ms_per_s = wait as f64 / d as f64 * 1000.0;
    let pct = if n == 0 { 0.0 } else { ms_per_s / (n as f64 * 1000.0) * 100.0 };
    format!("wait: {ms_per_s:.1} ms/s of {n} x 1000 ms/s available ({} of CPU time)", fmt_pct(pct))
}

fn end_reason(r: EndReason) -> String {
    match r {
        EndReason::Exit => "exit".into(),
        EndReason::UnderscoreExit => "_exit".into(),
        EndReason::Signal(s) => match signal_name(s) {
            Some(n) => format!("signal {s} ({n})"),
            None => format!("signal {s}"),
        },
        EndReason::Exec => "exec".into(),
        EndReason::Snapshot => "snapshot (still running)".into(),
    }
}

fn signal_name(s: i32) -> Option<&'static str> {
    Some(match s {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        6 => "SIGABRT",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        _ => return None,
    })
}

/// Program, headline, totals, profiler cost, warnings.
fn header(a: &Analysis, w: &mut dyn Write) -> io::Result<()> {
    let h = &a.header;
    let cmd = if h.cmdline.is_empty() { h.exe.clone() } else { h.cmdline.join(" ") };
    let cmd = if cmd.is_empty() { "?".to_owned() } else { cmd };
    writeln!(
        w,
        "lockmeter: {cmd} (pid {}), ran {} on {} CPU{}, ended by {}",
        h.pid,
        fmt_ns(h.duration_ns),
        h.cpu_count,
        if h.cpu_count == 1 { "" } else { "s" },
        end_reason(h.end_reason)
    )?;
    writeln!(w, "{}", headline(a))?;
    writeln!(w)?;

    let s = &a.totals.agg.stats;
    let t = &a.totals;
    writeln!(
        w,
        "totals:   {} acquisitions, {} contended ({}), {} trylock failures",
        s.acquisitions,
        s.contended,
        fmt_pct(a.totals.agg.contention_pct()),
        s.trylock_failures
    )?;
    let rw = if t.agg.read_acquisitions + t.agg.write_acquisitions > 0 {
        format!(" ({} read, {} write)", t.agg.read_acquisitions, t.agg.write_acquisitions)
    } else {
        String::new()
    };
    writeln!(
        w,
        "          wait {}, hold {}; {} locks, {} sites, {} threads{rw}",
        fmt_ns(s.wait_ns_total),
        hold_total(&t.agg),
        t.locks,
        t.sites,
        t.threads
    )?;
    if s.cond_waits > 0 {
        writeln!(
            w,
            "          {} condvar waits asleep {} (not counted as lock wait)",
            s.cond_waits,
            fmt_ns(s.cond_wait_ns)
        )?;
    }
    let o = &a.overhead;
    if o.ns_per_pair > 0 || o.estimated_total_ns > 0 || o.memory_bytes > 0 {
        let mut line = format!("profiler: {} ns per lock+unlock", o.ns_per_pair);
        if h.duration_ns > 0 {
            line += &format!(
                ", ~{} in total ({} of run time)",
                fmt_ns(o.estimated_total_ns),
                fmt_pct(ratio_pct(o.estimated_total_ns, h.duration_ns))
            );
        } else {
            line += &format!(", ~{} in total", fmt_ns(o.estimated_total_ns));
        }
        line += &format!(", {} memory", fmt_bytes(o.memory_bytes));
        writeln!(w, "{line}")?;
    }

    let d = &a.dropped;
    if d.acquisitions > 0 || d.locks > 0 || d.threads > 0 {
        writeln!(w)?;
        writeln!(
            w,
            "!!! WARNING: {} acquisitions on ~{} locks not recorded: tables full; raise LOCKMETER_LOCKS / LOCKMETER_RECORDS",
            d.acquisitions, d.locks
        )?;
        if d.threads > 0 {
            writeln!(
                w,
                "!!! WARNING: {} threads got no table and were not metered (thread pool exhausted)",
                d.threads
            )?;
        }
        writeln!(w, "!!! The numbers below undercount.")?;
    }
    if d.holds > 0 {
        writeln!(
            w,
            "note: {} holds not timed (too many locks held at once by one thread)",
            d.holds
        )?;
    }
    let (hz, hz_run) = (h.clock.hz, h.clock.hz_run);
    if hz > 0 && hz_run > 0 && (hz_run as f64 / hz as f64 - 1.0).abs() > 0.05 {
        writeln!(
            w,
            "note: the clock ran at {:.3} GHz over the run but ticks were converted at {:.3} GHz: times are off by a factor of ~{:.2}",
            hz_run as f64 / 1e9,
            hz as f64 / 1e9,
            hz_run as f64 / hz as f64
        )?;
    }
    match h.hold_timing {
        HoldTiming::On => {}
        HoldTiming::Off => writeln!(w, "note: hold timing was off: hold times were not measured")?,
        HoldTiming::Sampled(n) => {
            writeln!(w, "note: hold timing sampled 1 in {n}: hold totals cover timed holds only")?
        }
    }
    Ok(())
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

const STAT_COLS: [(&str, Align); 8] = [
    ("CON%", Align::Right),
    ("ACQUIRED", Align::Right),
    ("CONTENDED", Align::Right),
    ("WAIT-TOTAL", Align::Right),
    ("WAIT-MAX", Align::Right),
    ("WAIT-AVG", Align::Right),
    ("HOLD-TOTAL", Align::Right),
    ("HOLD-MAX", Align::Right),
];

fn stat_cells(g: &Agg) -> Vec<String> {
    let s = &g.stats;
    vec![
        fmt_pct(g.contention_pct()),
        s.acquisitions.to_string(),
        s.contended.to_string(),
        fmt_ns(s.wait_ns_total),
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
        return writeln!(w, "no lock acquisitions were recorded");
    }
    let locks = a.sorted_locks(key);
    let shown = top.min(locks.len());
    heading(w, "locks", key, shown, locks.len())?;
    let mut cols = STAT_COLS.to_vec();
    cols.push(("KIND", Align::Left));
    cols.push(("NAME/ADDRESS", Align::Left));
    let mut t = Table::new(&cols);
    for l in locks.iter().take(shown) {
        let mut row = stat_cells(&l.agg);
        row.push(l.kind.as_str().into());
        row.push(l.display_name());
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
        row.push(l.display_name());
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
        row.push(th.name.clone());
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
        ("CON%", Align::Right),
        ("ACQUIRED", Align::Right),
        ("CONTENDED", Align::Right),
        ("WAIT-TOTAL", Align::Right),
        ("WAIT-AVG", Align::Right),
        ("WAIT-SHARE", Align::Right),
        ("CPU", Align::Right),
    ]);
    for c in cpus {
        t.row(vec![
            fmt_pct(ratio_pct(c.contended, c.acquisitions)),
            c.acquisitions.to_string(),
            c.contended.to_string(),
            fmt_ns(c.wait_ns),
            fmt_opt_ns((c.contended > 0).then(|| c.wait_ns / c.contended)),
            fmt_pct(ratio_pct(c.wait_ns, all_wait)),
            c.cpu.to_string(),
        ]);
    }
    t.write(" ", w)
}

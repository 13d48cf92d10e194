//! The human-readable report.

use std::io::{self, Write};

use lockmeter_format::model::{EndReason, HoldTiming, LockKind};

use crate::analysis::{Agg, Analysis, LockAgg, PairAgg, StackAgg, hist_rows, ratio_pct};
use crate::options::{By, DEFAULT_TOP, ReportOptions, SortKey};
use crate::symbolize::{Frame, short_location};
use crate::units::{Align, Table, fmt_bytes, fmt_ns, fmt_opt_ns, fmt_pct};

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

/// Locks of the summary that get a line naming their top waiting site and its holder.
pub const SUMMARY_PAIRS: usize = 3;

/// The short report `lockmeter run` prints at exit: the header, the `top` locks by total wait
/// without their sites, then for each of the top [`SUMMARY_PAIRS`] locks by wait its top
/// waiter–holder pair: the waiting site and the site that held the lock meanwhile that together
/// account for most of its wait.
pub fn summary(a: &Analysis, top: usize, w: &mut dyn Write) -> io::Result<()> {
    header(a, w)?;
    writeln!(w)?;
    locks_table(a, SortKey::Wait, top, 0, w)?;
    who_waited(a, SUMMARY_PAIRS, w)?;
    kernel_sleeps_table(a, SortKey::Wait, top, w)?;
    advice_lines(a, w)
}

/// The advice of [`crate::advice`] for the top locks by wait: each a hypothesis and the
/// `lockmeter compare` command that tests it.
fn advice_lines(a: &Analysis, w: &mut dyn Write) -> io::Result<()> {
    let v = crate::advice::advice(a, SUMMARY_PAIRS);
    if v.is_empty() {
        return Ok(());
    }
    writeln!(w)?;
    writeln!(w, "advice (hypotheses from these measurements; each command tests one):")?;
    for x in v {
        writeln!(w, "  {}: {}", printable(&x.lock, usize::MAX), x.hypothesis)?;
        writeln!(w, "    {}", x.command)?;
    }
    Ok(())
}

/// `function (file:line)`, else the frame as the tables show it (`function+0xOFF`,
/// `module+0xOFF`).
fn site_in_words(f: &Frame) -> String {
    match (f.short_location(), &f.function) {
        (Some(loc), Some(func)) => format!("{func} ({loc})"),
        (Some(loc), None) => format!("{f} ({loc})"),
        (None, _) => f.to_string(),
    }
}

/// One line for each of the top `n` locks by wait: its top waiter–holder pair as a sentence,
/// "W (file:line) waited on L held from H (file:line): P of the lock's wait".
fn who_waited(a: &Analysis, n: usize, w: &mut dyn Write) -> io::Result<()> {
    let locks: Vec<&LockAgg> = a
        .sorted_locks(SortKey::Wait)
        .into_iter()
        .filter(|l| l.agg.stats.wait_ns_total > 0)
        .take(n)
        .collect();
    if locks.is_empty() {
        return Ok(());
    }
    writeln!(w)?;
    if locks.iter().all(|l| l.pairs.is_empty()) {
        return writeln!(
            w,
            "who waited on whom: not recorded in this profile (no waiting site of a contended acquisition)"
        );
    }
    writeln!(
        w,
        "who waited on whom, for the top {} by wait (the top waiting site, the site that held the lock meanwhile):",
        plural(locks.len() as u64, "lock", "locks")
    )?;
    for l in locks {
        let name = printable(&l.display_name(), usize::MAX);
        let Some(p) = l.pairs.first() else {
            writeln!(w, "  {name}: its waiting sites were not recorded")?;
            continue;
        };
        let held = if p.holder.address == 0 && l.kind == LockKind::RwLock {
            "while its holder's site was unknown (an rwlock's readers are not tracked)".to_owned()
        } else if p.holder.address == 0 {
            "while its holder's site was unknown".to_owned()
        } else {
            format!("held from {}", site_in_words(&p.holder))
        };
        writeln!(
            w,
            "  {} waited on {name} {held}: {} of the lock's wait",
            site_in_words(&p.waiter),
            fmt_pct(ratio_pct(p.wait_ns, l.agg.stats.wait_ns_total).min(100.0))
        )?;
    }
    Ok(())
}

/// `run --kernel`: for the user-space locks the kernel saw too, their futex waits (sleeps in the
/// kernel) and how long they took, beside the contended acquisitions and wait the preload
/// measured. Nothing when no lock has it.
fn kernel_sleeps_table(
    a: &Analysis,
    key: SortKey,
    top: usize,
    w: &mut dyn Write,
) -> io::Result<()> {
    let locks: Vec<&LockAgg> =
        a.sorted_locks(key).into_iter().filter(|l| l.sleep.is_some()).take(top).collect();
    if locks.is_empty() {
        return Ok(());
    }
    writeln!(w)?;
    writeln!(
        w,
        "the kernel's view (run --kernel): waits that slept in the kernel (futex waits on the lock's words; an acquisition may wait more than once), and holders switched out while holding it (lock-holder preemption) with the waiters' sleep meanwhile:"
    )?;
    let mut t = Table::new(&[
        ("WAIT-TOTAL", Align::Right),
        ("CONTENDED", Align::Right),
        ("FUTEX-WAITS", Align::Right),
        ("SLEEP-TOTAL", Align::Right),
        ("SLEEP-MAX", Align::Right),
        ("PREEMPTED", Align::Right),
        ("PREEMPTED-TIME", Align::Right),
        ("WAIT-IN-THEM", Align::Right),
        ("NAME", Align::Left),
    ]);
    for l in locks {
        let Some(s) = &l.sleep else { continue };
        t.row(vec![
            fmt_ns(l.agg.stats.wait_ns_total),
            l.agg.stats.contended.to_string(),
            s.sleeps.to_string(),
            fmt_ns(s.sleep_ns),
            fmt_ns(s.sleep_ns_max),
            s.preempted_holds.to_string(),
            fmt_ns(s.preempted_ns),
            fmt_ns(s.preempted_wait_ns),
            printable(&l.display_name(), usize::MAX),
        ]);
    }
    t.write(" ", w)
}

/// The headline: how many threads were waiting for a lock on average (total wait / run
/// duration), of how many threads that took locks. Wait is summed over threads, so it is said
/// as a number of threads, never as a share of CPU time: a waiting thread mostly sleeps.
pub fn headline(a: &Analysis) -> String {
    let s = &a.totals.agg.stats;
    let (wait, d, n) = (s.wait_ns_total, a.header.duration_ns, a.totals.threads as u64);
    let of = if n == 1 {
        "the 1 thread that took locks was".to_owned()
    } else {
        format!("the {n} threads that took locks were")
    };
    if wait == 0 && s.contended == 0 {
        return format!(
            "wait: no thread waited for a lock ({} took locks)",
            plural(n, "thread", "threads")
        );
    }
    if d == 0 {
        return format!("wait: {} of waiting in total (run duration unknown)", fmt_ns(wait));
    }
    format!(
        "wait: on average {} of {of} waiting for one ({} of waiting, summed over threads, in a {} run: time spent waiting, not CPU time)",
        fmt_threads(wait as f64 / d as f64),
        fmt_ns(wait),
        fmt_ns(d)
    )
}

/// An average number of threads with two significant digits (at least one decimal): `1.6`,
/// `0.37`, `0.0021`, `12.5`.
fn fmt_threads(x: f64) -> String {
    if !x.is_finite() || x <= 0.0 {
        return "0".into();
    }
    // The decimal exponent of `x` rounded to two significant digits ("1.6e0", "3.7e-1").
    let sci = format!("{x:.1e}");
    let exp: i32 = sci.rsplit('e').next().and_then(|e| e.parse().ok()).unwrap_or(0);
    let decimals = (1 - exp).max(1) as usize;
    format!("{x:.decimals$}")
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

/// `s` fit for one line of a table: control characters escaped (`\n`, `\t`, `\u{1b}`), cut to
/// `max` characters with `...` (program-given names and command lines can contain anything).
fn printable(s: &str, max: usize) -> String {
    let mut out = String::with_capacity(s.len().min(max.saturating_add(8)));
    for (n, c) in s.chars().enumerate() {
        if n >= max {
            out.push_str("...");
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Program, headline, totals, profiler cost, warnings.
fn header(a: &Analysis, w: &mut dyn Write) -> io::Result<()> {
    let h = &a.header;
    let cmd = if h.cmdline.is_empty() { h.exe.clone() } else { h.cmdline.join(" ") };
    let cmd = if cmd.is_empty() { "?".to_owned() } else { printable(&cmd, 200) };
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
        line += &format!(", {} resident memory", fmt_bytes(o.memory_bytes));
        writeln!(w, "{line}")?;
    }

    let d = &a.dropped;
    if d.acquisitions > 0 || d.locks > 0 || d.threads > 0 {
        writeln!(w)?;
        writeln!(
            w,
            "!!! WARNING: {} acquisitions on ~{} locks not recorded: {}",
            d.acquisitions,
            d.locks,
            dropped_causes(d, &a.header.collector)
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
    for n in &a.notes {
        writeln!(w, "note: {n}")?;
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

/// The `run` option of a setting (its variable if it has none).
fn option_of(s: &lockmeter_core::settings::Setting) -> &'static str {
    use lockmeter_core::settings::Cli;
    match s.cli {
        Cli::Flag(f) | Cli::Own(f) => f,
        Cli::None => s.env,
    }
}

/// Why acquisitions were dropped, each cause with the `run` option that makes room for it.
fn dropped_causes(d: &lockmeter_format::model::Dropped, collector: &str) -> String {
    use lockmeter_core::settings::{LOCKS, MAX_MEMORY, THREADS};
    let mut parts = Vec::new();
    for (n, what, setting) in [
        (d.acquisitions_no_thread, "by threads that got no table", &THREADS),
        (d.acquisitions_table_full, "with the collector's memory cap reached", &MAX_MEMORY),
        (d.acquisitions_registry_full, "with the lock registry full", &LOCKS),
    ] {
        if n > 0 {
            parts.push(format!("{n} {what} (raise {} {})", option_of(setting), setting.value_name));
        }
    }
    let told = d.acquisitions_no_thread + d.acquisitions_table_full + d.acquisitions_registry_full;
    let rest = d.acquisitions.saturating_sub(told);
    if rest > 0 || parts.is_empty() {
        // Profiles that do not tell the causes apart (older files, the kernel collector's maps).
        parts.push(if collector == "preload" && d.threads > 0 {
            format!(
                "{rest} by threads that got no table or with tables full (raise {} N, {} SIZE or {} N)",
                option_of(&THREADS),
                option_of(&MAX_MEMORY),
                option_of(&LOCKS)
            )
        } else if collector == "preload" {
            format!(
                "{rest} with tables full (raise {} SIZE or {} N)",
                option_of(&MAX_MEMORY),
                option_of(&LOCKS)
            )
        } else {
            format!("{rest} with tables full")
        });
    }
    parts.join("; ")
}

/// The line for a profile without lock acquisitions. The preload collector sees pthread locks
/// only: it says what sees the rest.
fn nothing_recorded(a: &Analysis) -> &'static str {
    if a.header.collector == "preload" {
        "no lock acquisitions were recorded: this run saw pthread locks only; locks not built on pthread (Rust std, Go, static binaries, hand-made futexes) and kernel locks need `sudo lockmeter record -- PROGRAM`"
    } else {
        "no lock acquisitions were recorded"
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

#[cfg(test)]
mod tests {
    use super::{fmt_threads, shorten};

    #[test]
    fn thread_averages_keep_two_significant_digits() {
        assert_eq!(fmt_threads(1.58), "1.6");
        assert_eq!(fmt_threads(15.84), "15.8");
        assert_eq!(fmt_threads(0.37), "0.37");
        assert_eq!(fmt_threads(0.01), "0.010");
        assert_eq!(fmt_threads(0.0999), "0.10");
        assert_eq!(fmt_threads(0.00213), "0.0021");
        assert_eq!(fmt_threads(0.0), "0");
    }

    #[test]
    fn long_names_lose_their_generic_arguments() {
        assert_eq!(shorten("main"), "main");
        assert_eq!(shorten("catch_unwind<u64>"), "catch_unwind<u64>", "short names stay");
        let long = "catch_unwind<u64, core::panic::unwind_safe::AssertUnwindSafe<std::thread::X>>";
        assert_eq!(shorten(long), "catch_unwind<…>");
        let qualified = "<alloc::boxed::Box<dyn core::ops::function::FnOnce<(), Output = ()> + Send> as core::ops::function::FnOnce<()>>::call_once";
        assert_eq!(
            shorten(qualified),
            "<alloc::boxed::Box<…> as core::ops::function::FnOnce<…>>::call_once"
        );
    }
}

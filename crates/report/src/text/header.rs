//! The report's header: what ran, how it ended, what the collector cost and could not record.

use super::*;

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
        EndReason::Exit(None) => "exit".into(),
        EndReason::Exit(Some(c)) => format!("exit {c}"),
        EndReason::UnderscoreExit(None) => "_exit".into(),
        EndReason::UnderscoreExit(Some(c)) => format!("_exit {c}"),
        EndReason::Signal(s) => match signal_name(s) {
            Some(n) => format!("signal {s} ({n})"),
            None => format!("signal {s}"),
        },
        EndReason::Exec => "exec".into(),
        EndReason::Snapshot => "snapshot (still running)".into(),
        EndReason::Killed(s) => match signal_name(s) {
            Some(n) => {
                format!("signal {s} ({n}), no handler ran; profile written by lockmeter's guardian")
            }
            None => format!("signal {s}, no handler ran; profile written by lockmeter's guardian"),
        },
        EndReason::ExitGroup(c) => {
            format!("exit_group({c}), no exit handler ran; profile written by lockmeter's guardian")
        }
        EndReason::OomKilled => "killed by the OOM killer (signal 9, SIGKILL); profile written by \
             lockmeter's watcher"
            .into(),
        EndReason::Vanished => {
            "an end no handler saw (how is unknown); profile written by lockmeter's guardian".into()
        }
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
pub fn printable(s: &str, max: usize) -> String {
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
pub(super) fn header(a: &Analysis, w: &mut dyn Write) -> io::Result<()> {
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
        if let Some(x) = o.estimated_slowdown() {
            line += &format!("; estimated slowdown {x:.2}x");
            if o.hooks_ns > 0 && o.cpu_ns > 0 {
                line += &format!(
                    " (the hooks took ~{} of the run's {} CPU time)",
                    fmt_ns(o.hooks_ns),
                    fmt_ns(o.cpu_ns)
                );
            }
            // Starting and ending each process (its tables, the watcher, the profile's writing)
            // counts where it is a visible part of the run: launchers, shell scripts, builds;
            // the run's images that took no lock (left out of the file) included.
            let fixed = o.start_ns.saturating_add(o.end_ns).saturating_add(o.other_fixed_ns);
            if h.duration_ns > 0 && fixed * 100 >= h.duration_ns {
                let n = a.processes.len().max(1) + o.other_images as usize;
                line += &format!(
                    "; starting and ending {n} process{} took ~{}",
                    if n == 1 { "" } else { "es" },
                    fmt_ns(fixed)
                );
            }
        }
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
        let mut lost: Vec<&crate::analysis::LockAgg> =
            a.locks.iter().filter(|l| l.lost > 0).collect();
        if !lost.is_empty() {
            lost.sort_by(|x, y| y.lost.cmp(&x.lost).then_with(|| x.address.cmp(&y.address)));
            let shown: Vec<String> =
                lost.iter().take(5).map(|l| format!("{} ({})", l.display_name(), l.lost)).collect();
            let more = match lost.len() {
                n if n > 5 => format!(", and {} more locks", n - 5),
                _ => String::new(),
            };
            let itemized: u64 = lost.iter().map(|l| l.lost).sum();
            writeln!(
                w,
                "!!! not recorded, by lock ({itemized} of them): {}{more}",
                shown.join(", ")
            )?;
        }
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
pub(super) fn nothing_recorded(a: &Analysis) -> &'static str {
    if a.header.collector == "preload" {
        "no lock acquisitions were recorded: this run saw pthread locks only; locks not built on pthread (Rust std, Go, static binaries, hand-made futexes) and kernel locks need `sudo lockmeter record -- PROGRAM`"
    } else {
        "no lock acquisitions were recorded"
    }
}

#[cfg(test)]
mod tests {
    use super::fmt_threads;
    use crate::text::shorten;

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

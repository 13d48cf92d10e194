//! Output: text tables (streamed as each scenario ends), one JSON document, or CSV blocks; and
//! the SVG plots.

use crate::machine::Machine;
use crate::summary::Summary;
use crate::{Common, Format, contention, interference, latency, steal, uncontended};
use anyhow::{Context, Result};
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;

mod plot;

pub(crate) use plot::plot;

/// One scenario's results.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "scenario", content = "rows", rename_all = "lowercase")]
pub enum Data {
    /// `uncontended`.
    Uncontended(Vec<uncontended::Row>),
    /// `contention`.
    Contention {
        /// The baseline of the ratio column.
        baseline: String,
        /// Rows.
        rows: Vec<contention::Row>,
    },
    /// `latency`.
    Latency(Vec<latency::Row>),
    /// `steal`.
    Steal(Vec<steal::Row>),
    /// `interference`.
    Interference(Vec<interference::Row>),
}

impl Data {
    fn name(&self) -> &'static str {
        match self {
            Data::Uncontended(_) => "uncontended",
            Data::Contention { .. } => "contention",
            Data::Latency(_) => "latency",
            Data::Steal(_) => "steal",
            Data::Interference(_) => "interference",
        }
    }
}

#[derive(Debug, Serialize)]
struct Section {
    #[serde(flatten)]
    data: Data,
    /// Hypervisor steal time during the scenario, % of all CPU time.
    steal_pct: Option<f64>,
    /// Wall time of the scenario, s.
    wall_s: f64,
}

#[derive(Debug, Serialize)]
struct Report<'a> {
    tool: &'static str,
    machine: &'a Machine,
    pinning: crate::Pin,
    sections: &'a [Section],
}

pub(crate) struct Out {
    format: Format,
    plot: Option<PathBuf>,
    pin: crate::Pin,
    machine: Machine,
    sink: Box<dyn Write>,
    sections: Vec<Section>,
}

impl Out {
    pub(crate) fn new(c: &Common, machine: Machine) -> Result<Out> {
        let sink: Box<dyn Write> = match &c.output {
            Some(p) => Box::new(std::io::BufWriter::new(
                std::fs::File::create(p)
                    .with_context(|| format!("cannot create {}", p.display()))?,
            )),
            None => Box::new(std::io::stdout()),
        };
        let mut o = Out {
            format: c.format,
            plot: c.plot.clone(),
            pin: c.pin,
            machine,
            sink,
            sections: Vec::new(),
        };
        if o.format == Format::Text {
            writeln!(o.sink, "{}", o.machine.line())?;
            writeln!(
                o.sink,
                "pinning: {:?} (auto: thread i on CPU i when threads <= CPUs, unpinned when oversubscribed)",
                o.pin
            )?;
            if c.quick {
                writeln!(
                    o.sink,
                    "--quick: smoke run, tiny counts; the numbers are not meaningful"
                )?;
            }
        }
        Ok(o)
    }

    pub(crate) fn section(
        &mut self,
        data: Data,
        steal_pct: Option<f64>,
        wall_s: f64,
        suite: bool,
    ) -> Result<()> {
        if let Some(p) = &self.plot {
            let path = if suite {
                let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or("bench");
                p.with_file_name(format!("{stem}-{}.svg", data.name()))
            } else {
                p.clone()
            };
            plot(&data, &path)?;
        }
        let s = Section { data, steal_pct, wall_s };
        if self.format == Format::Text {
            let t = text(&s, self.machine.tsc_hz);
            self.sink.write_all(t.as_bytes())?;
            self.sink.flush()?;
        }
        self.sections.push(s);
        Ok(())
    }

    pub(crate) fn finish(mut self) -> Result<()> {
        match self.format {
            Format::Text => {}
            Format::Json => {
                let r = Report {
                    tool: "lockmeter bench",
                    machine: &self.machine,
                    pinning: self.pin,
                    sections: &self.sections,
                };
                serde_json::to_writer_pretty(&mut self.sink, &r)?;
                writeln!(self.sink)?;
            }
            Format::Csv => {
                for s in &self.sections {
                    self.sink.write_all(csv(s, &self.machine).as_bytes())?;
                    writeln!(self.sink)?;
                }
            }
        }
        self.sink.flush()?;
        Ok(())
    }
}

/// A text table: first column left-aligned, the rest right-aligned.
fn table(head: &[&str], rows: &[Vec<String>]) -> String {
    let mut w: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if i < w.len() {
                w[i] = w[i].max(c.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            let pad = w[i].saturating_sub(c.chars().count());
            if i == 0 {
                s.push_str(c);
                s.push_str(&" ".repeat(pad));
            } else {
                s.push_str("  ");
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(head.to_vec());
    out.push_str(&line(
        w.iter().map(|&n| "-".repeat(n)).collect::<Vec<_>>().iter().map(|s| s.as_str()).collect(),
    ));
    for r in rows {
        out.push_str(&line(r.iter().map(|s| s.as_str()).collect()));
    }
    out
}

fn f(x: f64, d: usize) -> String {
    format!("{x:.d$}")
}

fn ns(x: u64) -> String {
    match x {
        0..10_000 => format!("{x}"),
        10_000..10_000_000 => format!("{:.1}u", x as f64 / 1e3),
        _ => format!("{:.1}m", x as f64 / 1e6),
    }
}

fn mean_sd(s: &Summary, d: usize) -> String {
    format!("{} ±{}", f(s.mean, d), f(s.stddev, d))
}

fn med_range(s: &Summary, d: usize) -> String {
    format!("{} [{}-{}]", f(s.median, d), f(s.min, d), f(s.max, d))
}

fn text(s: &Section, tsc_hz: u64) -> String {
    let mut o = String::new();
    let steal = s.steal_pct.map_or("unknown".into(), |p| format!("{p:.2}%"));
    let mut notes = Vec::new();
    match &s.data {
        Data::Uncontended(rows) => {
            o += "\n== uncontended: ns per lock+unlock pair (+ counter increment), one thread; fastest of 20 batches per run ==\n";
            let r: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    if r.noisy {
                        notes.push(format!(
                            "{}: runs disagree ({:.0}% spread)",
                            r.lock,
                            100.0 * r.ns.rel_spread()
                        ));
                    }
                    vec![
                        r.lock.clone() + if r.noisy { " !" } else { "" },
                        med_range(&r.ns, 2),
                        f(r.vs_parking_lot, 2),
                        f(r.vs_std, 2),
                        f(r.vs_pthread, 2),
                    ]
                })
                .collect();
            o += &table(
                &["lock", "ns/pair median [min-max]", "x parking_lot", "x std", "x pthread"],
                &r,
            );
        }
        Data::Contention { baseline, rows } => {
            o += "\n== contention: fixed lock-unlock pairs per thread (time-capped) ==\n";
            if let Some(r0) = rows.first() {
                o += &format!(
                    "{} pairs/thread, latency sampled 1 in 16; fairness = per-thread counts when the first thread finished\n",
                    r0.iters
                );
            }
            let r: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    if r.noisy {
                        notes.push(format!(
                            "{} t={} cs={} out={}: runs disagree ({:.0}% spread)",
                            r.lock,
                            r.threads,
                            r.cs,
                            r.outside,
                            100.0 * r.mops.rel_spread()
                        ));
                    }
                    if r.capped_runs > 0 {
                        notes.push(format!(
                            "{} t={}: {}/{} runs hit the time cap (collapse)",
                            r.lock, r.threads, r.capped_runs, r.mops.n
                        ));
                    }
                    vec![
                        r.lock.clone() + if r.noisy { " !" } else { "" },
                        r.threads.to_string(),
                        format!("{}/{}", r.cs, r.outside),
                        mean_sd(&r.time_ms, 1) + if r.capped_runs > 0 { " cap" } else { "" },
                        med_range(&r.mops, 2),
                        r.vs_baseline.map_or("-".into(), |v| f(v, 2)),
                        f(r.jain.median, 3),
                        f(r.min_max, 2),
                        r.starved.to_string(),
                        ns(r.p50_ns),
                        ns(r.p99_ns),
                        ns(r.max_ns),
                    ]
                })
                .collect();
            o += &table(
                &[
                    "lock",
                    "thr",
                    "cs/out",
                    "time ms (mean ±sd)",
                    "Mops/s median [min-max]",
                    &format!("x {baseline}"),
                    "Jain",
                    "min/max",
                    "starved",
                    "p50 ns",
                    "p99 ns",
                    "max ns",
                ],
                &r,
            );
        }
        Data::Latency(rows) => {
            o += "\n== latency: acquire time, every acquisition timed ==\n";
            let r: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    vec![
                        r.lock.clone(),
                        r.load.to_string(),
                        r.samples.to_string(),
                        ns(r.p50_ns),
                        ns(r.p90_ns),
                        ns(r.p99_ns),
                        ns(r.p999_ns),
                        ns(r.max_ns),
                        f(r.over_2_20_pct, 3),
                        f(r.mops.median, 2),
                    ]
                })
                .collect();
            o += &table(
                &[
                    "lock",
                    "load",
                    "samples",
                    "p50 ns",
                    "p90",
                    "p99",
                    "p99.9",
                    "max",
                    "% >= 2^20 cyc",
                    "Mops/s",
                ],
                &r,
            );
            // Seed 000's table: cumulative % per log2 bucket of cycles, one column per lock/load.
            let lo = rows
                .iter()
                .filter_map(|r| r.hist_cycles.iter().position(|&c| c > 0))
                .min()
                .unwrap_or(0);
            let hi = rows
                .iter()
                .filter_map(|r| r.hist_cycles.iter().rposition(|&c| c > 0))
                .max()
                .unwrap_or(0);
            if hi >= lo && !rows.is_empty() {
                o += "\nCDF: % of acquisitions below 2^k TSC cycles\n";
                let head: Vec<String> = ["cycles".to_string(), "≈ ns".to_string()]
                    .into_iter()
                    .chain(rows.iter().map(|r| format!("{}@{}", r.lock, r.load)))
                    .collect();
                let mut cum = vec![0u64; rows.len()];
                let mut t = Vec::new();
                for b in lo..=hi {
                    let ns_b = if tsc_hz == 0 {
                        0
                    } else {
                        ((1u128 << b) * 1_000_000_000 / tsc_hz as u128) as u64
                    };
                    let mut line = vec![format!("< 2^{b}"), ns(ns_b)];
                    for (i, r) in rows.iter().enumerate() {
                        cum[i] += r.hist_cycles[b];
                        line.push(f(100.0 * cum[i] as f64 / r.samples.max(1) as f64, 2));
                    }
                    t.push(line);
                }
                o += &table(&head.iter().map(|s| s.as_str()).collect::<Vec<_>>(), &t);
            }
        }
        Data::Steal(rows) => {
            o += "\n== steal: unfair byte lock (tas) vs unfair queued lock ==\n";
            let r: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    if r.capped_runs > 0 {
                        notes.push(format!(
                            "t={}: {} runs hit the time cap",
                            r.threads, r.capped_runs
                        ));
                    }
                    vec![
                        r.threads.to_string(),
                        mean_sd(&r.tas_ms, 1),
                        mean_sd(&r.unfair_q_ms, 1),
                        r.steals.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(" "),
                        r.trylocks.to_string(),
                        r.queued.to_string(),
                    ]
                })
                .collect();
            o += &table(
                &[
                    "threads",
                    "tas ms (mean ±sd)",
                    "unfair-q ms (mean ±sd)",
                    "lsteal_cnts (pos 0, 1, 2, ...)",
                    "trylock_cnt",
                    "queued",
                ],
                &r,
            );
            o += "position 0: steals on arrival, before queueing; 1: the queue head (never steals); p >= 2: waiters p-1 places behind the head\n";
        }
        Data::Interference(rows) => {
            o += "\n== interference: an active thread beside spinning threads ==\n";
            let r: Vec<Vec<String>> = rows
                .iter()
                .map(|r| {
                    if r.noisy {
                        notes.push(format!(
                            "{} + {} x {}: runs disagree",
                            r.workload, r.spinners, r.policy
                        ));
                    }
                    vec![
                        r.workload.clone() + if r.noisy { " !" } else { "" },
                        r.spinners.to_string(),
                        r.policy.clone(),
                        f(r.alone_ms.median, 1),
                        f(r.with_ms.median, 1),
                        f(r.slowdown_pct, 1),
                        ns(r.handoff_p50_ns),
                        ns(r.handoff_p99_ns),
                    ]
                })
                .collect();
            o += &table(
                &[
                    "workload",
                    "spinners",
                    "policy",
                    "alone ms",
                    "with ms",
                    "slowdown %",
                    "handoff p50 ns",
                    "p99 ns",
                ],
                &r,
            );
        }
    }
    o += &format!("steal time during the scenario: {steal}; wall {:.1} s\n", s.wall_s);
    if s.steal_pct.is_some_and(|p| p > 1.0) {
        o += "warning: the hypervisor stole more than 1% of CPU time: expect noise\n";
    }
    for n in notes {
        o += &format!("warning: {n}\n");
    }
    o
}

fn csv(s: &Section, m: &Machine) -> String {
    let esc = |x: &str| {
        if x.contains([',', '"', '\n']) {
            format!("\"{}\"", x.replace('"', "\"\""))
        } else {
            x.to_string()
        }
    };
    let mut o = format!(
        "# scenario={} cpu={} cpus={} hypervisor={} kernel={} steal_pct={}\n",
        s.data.name(),
        esc(&m.cpu_model),
        m.cpus,
        esc(&m.hypervisor),
        esc(&m.kernel),
        s.steal_pct.map_or("".into(), |p| format!("{p:.3}"))
    );
    match &s.data {
        Data::Uncontended(rows) => {
            o += "lock,ns_median,ns_min,ns_max,runs,vs_parking_lot,vs_std,vs_pthread,noisy\n";
            for r in rows {
                o += &format!(
                    "{},{:.3},{:.3},{:.3},{},{:.4},{:.4},{:.4},{}\n",
                    esc(&r.lock),
                    r.ns.median,
                    r.ns.min,
                    r.ns.max,
                    r.ns.n,
                    r.vs_parking_lot,
                    r.vs_std,
                    r.vs_pthread,
                    r.noisy
                );
            }
        }
        Data::Contention { rows, .. } => {
            o += "lock,threads,cs,outside,iters,runs,time_ms_mean,time_ms_sd,mops_median,mops_min,mops_max,vs_baseline,jain_median,min_max,starved,capped_runs,p50_ns,p99_ns,max_ns,noisy\n";
            for r in rows {
                o += &format!(
                    "{},{},{},{},{},{},{:.3},{:.3},{:.4},{:.4},{:.4},{},{:.4},{:.4},{},{},{},{},{},{}\n",
                    esc(&r.lock),
                    r.threads,
                    r.cs,
                    r.outside,
                    r.iters,
                    r.mops.n,
                    r.time_ms.mean,
                    r.time_ms.stddev,
                    r.mops.median,
                    r.mops.min,
                    r.mops.max,
                    r.vs_baseline.map_or("".into(), |v| format!("{v:.4}")),
                    r.jain.median,
                    r.min_max,
                    r.starved,
                    r.capped_runs,
                    r.p50_ns,
                    r.p99_ns,
                    r.max_ns,
                    r.noisy
                );
            }
        }
        Data::Latency(rows) => {
            o += "lock,load,bucket,cycles_low,count,cumulative_pct\n";
            for r in rows {
                let mut cum = 0;
                for (b, &c) in r.hist_cycles.iter().enumerate() {
                    cum += c;
                    if c > 0 {
                        o += &format!(
                            "{},{},{},{},{},{:.4}\n",
                            esc(&r.lock),
                            r.load,
                            b,
                            lockmeter_core::hist::bucket_low(b),
                            c,
                            100.0 * cum as f64 / r.samples.max(1) as f64
                        );
                    }
                }
            }
        }
        Data::Steal(rows) => {
            o += "threads,tas_ms_mean,tas_ms_sd,unfair_q_ms_mean,unfair_q_ms_sd,trylock_cnt,queued,lsteal_cnts\n";
            for r in rows {
                o += &format!(
                    "{},{:.3},{:.3},{:.3},{:.3},{},{},{}\n",
                    r.threads,
                    r.tas_ms.mean,
                    r.tas_ms.stddev,
                    r.unfair_q_ms.mean,
                    r.unfair_q_ms.stddev,
                    r.trylocks,
                    r.queued,
                    r.steals.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(" ")
                );
            }
        }
        Data::Interference(rows) => {
            o += "workload,spinners,policy,alone_ms_median,with_ms_median,slowdown_pct,handoff_p50_ns,handoff_p99_ns,noisy\n";
            for r in rows {
                o += &format!(
                    "{},{},{},{:.3},{:.3},{:.2},{},{},{}\n",
                    r.workload,
                    r.spinners,
                    r.policy,
                    r.alone_ms.median,
                    r.with_ms.median,
                    r.slowdown_pct,
                    r.handoff_p50_ns,
                    r.handoff_p99_ns,
                    r.noisy
                );
            }
        }
    }
    o
}

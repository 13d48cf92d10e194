//! `lockmeter compare`: runs a program under several lock algorithms (`run --lock`), interleaved,
//! and compares them: median wall time and its spread, a metric read from the program's output,
//! the top lock's wait and hold, the speedup over glibc's mutex; plus a figure.

use anyhow::{Context, Result, bail};
use lockmeter_core::settings;
use lockmeter_report::export::compare_plot::{CompareBar, compare_to_file};
use lockmeter_report::units::{Align, Table, fmt_ns};
use lockmeter_report::{Analysis, SymbolizeOptions};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use crate::settings_args::CollectorArgs;

/// Options of `lockmeter compare`.
#[derive(Debug, clap::Args)]
pub(crate) struct CompareArgs {
    /// The lock algorithms to compare, comma-separated (`pthread`: glibc's own mutex; the others
    /// are swapped in as with `run --lock`).
    #[arg(long, value_delimiter = ',', default_value = "pthread,mcs,ticket,adaptive")]
    pub(crate) locks: Vec<String>,
    /// Runs per algorithm; run i of every algorithm comes before run i+1 of any (interleaved,
    /// the order rotated each round), so that a drift of the machine hits all alike.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub(crate) runs: u32,
    /// A regular expression matched against the program's standard output: the number in its
    /// first group (or the whole match) is the program's own metric, compared like wall time.
    #[arg(long, value_name = "REGEX")]
    pub(crate) metric: Option<String>,
    /// Directory for the runs' profiles and outputs (default: a new lockmeter-compare-N).
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: Option<PathBuf>,
    /// The figure to write, .svg or .png (default: compare.svg in the directory).
    #[arg(long, value_name = "FILE")]
    pub(crate) plot: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) program: crate::run::Program,
}

/// One run's measurements.
struct RunResult {
    wall_s: f64,
    metric: Option<f64>,
    /// The lock with the most total wait: name, total wait (ns), total hold (ns).
    top: Option<(String, u64, u64)>,
}

/// The median of `v` (the mean of the middle two for an even count).
fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)))
}

/// A new directory `lockmeter-compare-N` (never an existing one).
fn new_dir(given: Option<&Path>) -> Result<PathBuf> {
    if let Some(d) = given {
        std::fs::create_dir(d).with_context(|| {
            format!("cannot create {} (give --dir a new directory)", d.display())
        })?;
        return Ok(d.to_path_buf());
    }
    for n in 1..10_000 {
        let d = PathBuf::from(format!("lockmeter-compare-{n}"));
        match std::fs::create_dir(&d) {
            Ok(()) => return Ok(d),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => bail!("cannot create {} here: {e} (give --dir DIR)", d.display()),
        }
    }
    bail!("no free lockmeter-compare-N name here: give --dir DIR")
}

/// The number `re` finds in `text`: its first group, else the whole match.
fn metric_in(re: &regex_automata::meta::Regex, text: &str) -> Option<f64> {
    let mut caps = re.create_captures();
    re.captures(text, &mut caps);
    let span = caps.get_group(1).or_else(|| caps.get_match().map(|m| m.span()))?;
    text[span.start..span.end].trim().parse().ok()
}

/// The lock with the most total wait in the profile at `path`.
fn top_lock(path: &Path) -> Result<Option<(String, u64, u64)>> {
    let (profile, mut sym) = lockmeter_report::open(path, &SymbolizeOptions::default())?;
    let a = Analysis::with_symbolizer(&profile, &mut sym);
    Ok(a.locks
        .iter()
        .max_by_key(|l| (l.agg.stats.wait_ns_total, l.agg.stats.acquisitions))
        .map(|l| (l.display_name(), l.agg.stats.wait_ns_total, l.agg.stats.hold_ns_total)))
}

pub(crate) fn compare(args: CompareArgs) -> Result<()> {
    for l in &args.locks {
        if !settings::SWAP_LOCKS.contains(&l.as_str()) {
            bail!("--locks: unknown lock '{l}': use {}", settings::SWAP_LOCKS.join(", "));
        }
    }
    if args.locks.is_empty() {
        bail!("--locks: name at least one lock, e.g. --locks pthread,mcs");
    }
    let re = match &args.metric {
        Some(m) => Some(
            regex_automata::meta::Regex::new(m)
                .map_err(|e| anyhow::anyhow!("--metric: not a regular expression: {e}"))?,
        ),
        None => None,
    };
    let Some(prog) = args.program.command.first() else {
        bail!("no program given: lockmeter compare --locks pthread,mcs -- PROGRAM [ARGS...]")
    };
    crate::run::resolve_program(prog)?;
    let lib = crate::run::find_preload()?;
    let dir = new_dir(args.dir.as_deref())?;
    let dir = std::path::absolute(&dir).unwrap_or(dir);
    let total = args.locks.len() as u32 * args.runs;
    let mut results: Vec<Vec<RunResult>> = args.locks.iter().map(|_| Vec::new()).collect();
    let mut done = 0;
    for r in 0..args.runs {
        let n = args.locks.len();
        for j in 0..n {
            let i = (j + r as usize) % n;
            let algo = &args.locks[i];
            let stem = format!("{}-run{}", algo.replace(':', "-"), r + 1);
            let profile = dir.join(format!("{stem}.lmp"));
            let out_path = dir.join(format!("{stem}.out"));
            let collector = CollectorArgs::with(&[(&settings::LOCK, algo.as_str())]);
            let mut cmd =
                crate::run::metered_command(&args.program.command, &lib, &profile, &collector)?;
            let out = std::fs::File::create_new(&out_path)
                .with_context(|| format!("cannot create {}", out_path.display()))?;
            let err = std::fs::File::create_new(dir.join(format!("{stem}.err")))
                .with_context(|| format!("cannot create {stem}.err in {}", dir.display()))?;
            cmd.stdin(Stdio::null()).stdout(out).stderr(err);
            done += 1;
            eprint!("lockmeter: [{done}/{total}] {algo}, run {}/{} ... ", r + 1, args.runs);
            let t0 = Instant::now();
            let status =
                cmd.status().with_context(|| format!("cannot run '{}'", prog.to_string_lossy()))?;
            let wall_s = t0.elapsed().as_secs_f64();
            eprintln!("{wall_s:.3} s");
            if !status.success() {
                bail!(
                    "the program failed under --lock {algo} ({status}): see {} and its .err",
                    out_path.display()
                );
            }
            let metric = match &re {
                Some(re) => {
                    let text = std::fs::read_to_string(&out_path).unwrap_or_default();
                    Some(metric_in(re, &text).with_context(|| {
                        format!(
                            "--metric matched no number in the output of {} (see {})",
                            algo,
                            out_path.display()
                        )
                    })?)
                }
                None => None,
            };
            let top = if profile.is_file() { top_lock(&profile)? } else { None };
            results[i].push(RunResult { wall_s, metric, top });
        }
    }

    let cmdline: Vec<String> =
        args.program.command.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let base = args.locks.iter().position(|l| l == "pthread");
    let base_wall = base.map(|b| median(&results[b].iter().map(|r| r.wall_s).collect::<Vec<_>>()));
    let mut cols = vec![
        ("lock", Align::Left),
        ("runs", Align::Right),
        ("wall (median)", Align::Right),
        ("spread", Align::Right),
    ];
    if re.is_some() {
        cols.push(("metric (median)", Align::Right));
        cols.push(("spread", Align::Right));
    }
    cols.extend([
        ("top lock (by wait)", Align::Left),
        ("its wait", Align::Right),
        ("its hold", Align::Right),
        ("speedup vs pthread", Align::Right),
    ]);
    let mut t = Table::new(&cols);
    let mut bars = Vec::new();
    for (algo, rs) in args.locks.iter().zip(&results) {
        let walls: Vec<f64> = rs.iter().map(|r| r.wall_s).collect();
        let (lo, hi) = min_max(&walls);
        let med = median(&walls);
        let mut row = vec![
            algo.clone(),
            rs.len().to_string(),
            format!("{med:.3} s"),
            format!("{lo:.3}..{hi:.3}"),
        ];
        if re.is_some() {
            let ms: Vec<f64> = rs.iter().filter_map(|r| r.metric).collect();
            let (mlo, mhi) = min_max(&ms);
            row.push(format!("{}", median(&ms)));
            row.push(format!("{mlo}..{mhi}"));
        }
        let tops: Vec<&(String, u64, u64)> = rs.iter().filter_map(|r| r.top.as_ref()).collect();
        match tops.first() {
            Some((name, _, _)) => {
                let w: Vec<f64> = tops.iter().map(|t| t.1 as f64).collect();
                let h: Vec<f64> = tops.iter().map(|t| t.2 as f64).collect();
                row.push(name.clone());
                row.push(fmt_ns(median(&w) as u64));
                row.push(fmt_ns(median(&h) as u64));
            }
            None => row.extend(["-".into(), "-".into(), "-".into()]),
        }
        row.push(match base_wall {
            Some(b) if med > 0.0 => format!("{:.2}x", b / med),
            _ => "-".into(),
        });
        t.row(row);
        bars.push(CompareBar { label: algo.clone(), median_s: med, min_s: lo, max_s: hi });
    }
    println!("lockmeter compare: {} ({} runs each, interleaved)", cmdline.join(" "), args.runs);
    t.write("  ", &mut std::io::stdout())?;
    println!(
        "  wall: the program's run time under the collector, median and min..max; top lock: the lock with the most total wait in each run (named from the first), its median total wait and hold"
    );
    let plot = args.plot.clone().unwrap_or_else(|| dir.join("compare.svg"));
    let title = format!("{} ({} runs each)", cmdline.join(" "), args.runs);
    compare_to_file(&title, &bars, &plot)?;
    eprintln!("lockmeter: figure written to {}", plot.display());
    eprintln!("lockmeter: profiles and outputs of every run in {}", dir.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_spread() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(min_max(&[3.0, 1.0, 2.0]), (1.0, 3.0));
    }

    #[test]
    fn metric_takes_the_first_group_or_the_match() {
        let re =
            regex_automata::meta::Regex::new(r"transactions:\s+\d+\s+\(([0-9.]+) per sec").unwrap();
        let out = "    transactions:                        1000   (4985.51 per sec.)\n";
        assert_eq!(metric_in(&re, out), Some(4985.51));
        let re = regex_automata::meta::Regex::new(r"[0-9]+ ops").unwrap();
        assert_eq!(metric_in(&re, "x 12 ops"), None, "'12 ops' is not a number");
        let re = regex_automata::meta::Regex::new(r"[0-9]+").unwrap();
        assert_eq!(metric_in(&re, "ops: 12"), Some(12.0));
    }
}

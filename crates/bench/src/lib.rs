//! `lockmeter bench`: the lock laboratory's benchmark scenarios.
//!
//! The main binary mounts [`BenchArgs`] as its `bench` subcommand and calls [`run`]. Plain
//! `lockmeter bench` runs the default suite (uncontended, contention, latency, steal,
//! interference) in about a minute on 2 CPUs and prints a readable summary; each scenario can be
//! run alone with its own options:
//!
//! ```text
//! lockmeter bench [--locks a,b] [--runs R] [--format text|json|csv] [--plot F.svg] [--quick]
//!                 [contention|latency|interference|uncontended|steal] [scenario options]
//! ```
//!
//! CI smoke: `lockmeter bench --quick` ([`smoke_args`]), about 15 s on 2 CPUs.
//!
//! Honesty about noise: every configuration is run R times with the locks interleaved; tables
//! show medians and spread (min-max or stddev) and flag (`!`) configurations whose runs disagree
//! by more than 20%; each scenario records the hypervisor's steal time, and the machine (CPU,
//! CPUs, SMT, hypervisor, kernel, TSC rate) heads every output.

pub mod contention;
pub mod interference;
pub mod latency;
pub mod locks;
pub mod machine;
mod output;
pub mod steal;
pub mod summary;
pub mod uncontended;
mod work;

use anyhow::{Result, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use lockmeter_core::clock::Calibration;
use std::path::PathBuf;

pub use contention::ContentionArgs;
pub use interference::InterferenceArgs;
pub use latency::LatencyArgs;
pub use steal::StealArgs;
pub use uncontended::UncontendedArgs;

/// `lockmeter bench`: arguments (a `clap::Args`, mounted by the main binary).
#[derive(Debug, Clone, clap::Args)]
#[command(about = "Benchmark the lock laboratory's locks against glibc, std and parking_lot")]
pub struct BenchArgs {
    /// The scenario to run (default: the whole suite).
    #[command(subcommand)]
    pub scenario: Option<Scenario>,
    /// Options shared by every scenario.
    #[command(flatten)]
    pub common: Common,
}

/// Options shared by every scenario (accepted before or after the scenario name).
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// Locks to run, comma-separated (default: every lock the scenario knows). Names: tas, ttas,
    /// ticket, mcs, clh, qspin, unfair-q, futex, adaptive, qrwlock, pthread, pthread-adaptive,
    /// std, parking-lot; spin locks take a policy suffix (ttas:delay, mcs:park, ...).
    #[arg(long, short = 'l', value_delimiter = ',', global = true)]
    pub locks: Option<Vec<String>>,
    /// Runs per configuration (default: 3; uncontended 5).
    #[arg(long, short = 'r', global = true)]
    pub runs: Option<usize>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text, global = true)]
    pub format: Format,
    /// Also draw an SVG plot (contention: throughput by threads; latency: CDF). With the suite,
    /// one file per scenario: F-contention.svg, F-latency.svg.
    #[arg(long, global = true, value_name = "F.svg")]
    pub plot: Option<PathBuf>,
    /// Write the output to a file instead of stdout.
    #[arg(long, short = 'o', global = true)]
    pub output: Option<PathBuf>,
    /// Pin benchmark threads to CPUs: auto (when threads <= CPUs), on, off.
    #[arg(long, value_enum, default_value_t = Pin::Auto, global = true)]
    pub pin: Pin,
    /// Quick smoke run (CI): tiny counts, one run, every scenario; numbers are not meaningful.
    #[arg(long, global = true)]
    pub quick: bool,
}

impl Default for Common {
    fn default() -> Self {
        Common {
            locks: None,
            runs: None,
            format: Format::Text,
            plot: None,
            output: None,
            pin: Pin::Auto,
            quick: false,
        }
    }
}

/// The scenarios.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum Scenario {
    /// Threads x locks x critical section x outside work: throughput, fairness, latency.
    Contention(ContentionArgs),
    /// Acquire time: log2 histogram and CDF of the time to acquire, with and without competing
    /// load.
    Latency(LatencyArgs),
    /// Interference: slowdown of an active thread beside spinning threads, per spin policy.
    Interference(InterferenceArgs),
    /// ns per lock+unlock pair on one thread, as ratios to the baselines.
    Uncontended(UncontendedArgs),
    /// Lock stealing: the unfair queued lock's steals by queue position, against the TAS lock.
    Steal(StealArgs),
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Tables for people.
    Text,
    /// One JSON document.
    Json,
    /// CSV, one block per scenario.
    Csv,
}

/// Thread pinning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Pin {
    /// Pin thread i to CPU i when threads <= CPUs (the prior-art protocol); never when
    /// oversubscribed.
    Auto,
    /// Always pin (thread i to CPU i mod CPUs).
    On,
    /// Never pin.
    Off,
}

/// The quick smoke configuration CI runs: equivalent to `lockmeter bench --quick`.
pub fn smoke_args() -> BenchArgs {
    BenchArgs { scenario: None, common: Common { quick: true, ..Common::default() } }
}

/// What every scenario needs: tick conversion, pinning, progress.
#[derive(Debug)]
pub struct Ctx {
    cal: Calibration,
    pin: Pin,
    cpus: usize,
    progress: bool,
}

impl Ctx {
    /// TSC ticks → ns.
    pub fn ticks_to_ns(&self, t: u64) -> u64 {
        self.cal.to_ns(t)
    }
    /// Whether to pin a run of `threads` threads.
    pub fn pin_for(&self, threads: usize) -> bool {
        match self.pin {
            Pin::On => true,
            Pin::Off => false,
            Pin::Auto => threads <= self.cpus,
        }
    }
    /// A progress bar on stderr (hidden when stderr is not a terminal, or for machine output).
    pub fn progress(&self, n: u64, name: &str) -> ProgressBar {
        if !self.progress {
            return ProgressBar::hidden();
        }
        let pb = ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr());
        if let Ok(st) =
            ProgressStyle::with_template("{prefix:>12} [{bar:30}] {pos}/{len} {elapsed} {msg}")
        {
            pb.set_style(st.progress_chars("=> "));
        }
        pb.set_prefix(name.to_string());
        pb
    }
}

/// Runs `lockmeter bench`.
pub fn run(args: BenchArgs) -> Result<()> {
    let c = &args.common;
    if let Some(0) = c.runs {
        bail!("--runs: give at least 1 run, e.g. --runs 5");
    }
    if let Some(l) = &c.locks {
        locks::check(l)?;
    }
    if let Some(p) = &c.plot
        && p.extension().and_then(|e| e.to_str()) != Some("svg")
    {
        bail!("--plot: give a file name ending in .svg, e.g. --plot bench.svg");
    }
    let machine = machine::Machine::probe();
    let cal = if machine.tsc_hz > 0 {
        Calibration::from_hz(machine.tsc_hz)
    } else {
        Calibration::identity()
    };
    if machine.tsc_hz > 0 {
        // `Metered` locks (metered-adaptive) read the same clock as the preload: the TSC.
        lockmeter_core::clock::set_source(lockmeter_core::clock::Source::Tsc);
        lockmeter_locks::metered::set_calibration(cal);
    }
    let ctx = Ctx { cal, pin: c.pin, cpus: machine.cpus, progress: true };
    let mut out = output::Out::new(&args.common, machine)?;
    let scenarios: Vec<Scenario> = match &args.scenario {
        Some(s) => vec![quickened(s.clone(), c.quick)],
        None => vec![
            Scenario::Uncontended(UncontendedArgs::default()),
            Scenario::Contention(ContentionArgs::default()),
            Scenario::Latency(LatencyArgs::default()),
            Scenario::Steal(StealArgs::default()),
            Scenario::Interference(InterferenceArgs::default()),
        ]
        .into_iter()
        .map(|s| quickened(s, c.quick))
        .collect(),
    };
    let suite = args.scenario.is_none();
    let runs = |default: usize| if c.quick { 1 } else { c.runs.unwrap_or(default) };
    let chosen = |default: &[&str]| -> Vec<String> {
        c.locks.clone().unwrap_or_else(|| default.iter().map(|s| s.to_string()).collect())
    };
    for s in scenarios {
        let steal = machine::StealMeter::start();
        let t0 = std::time::Instant::now();
        let section = match &s {
            Scenario::Uncontended(a) => {
                let mut l = chosen(locks::ALL);
                if c.locks.is_none() {
                    l.push("metered-adaptive".into());
                }
                output::Data::Uncontended(uncontended::run(a, &l, runs(5), &ctx)?)
            }
            Scenario::Contention(a) => output::Data::Contention {
                baseline: a.baseline.clone(),
                rows: contention::run(a, &chosen(locks::ALL), runs(3), &ctx)?,
            },
            Scenario::Latency(a) => output::Data::Latency(latency::run(
                a,
                &chosen(latency::DEFAULT_LOCKS),
                runs(3),
                &ctx,
            )?),
            Scenario::Steal(a) => output::Data::Steal(steal::run(a, runs(3), &ctx)?),
            Scenario::Interference(a) => {
                output::Data::Interference(interference::run(a, runs(3), &ctx)?)
            }
        };
        out.section(section, steal.percent(), t0.elapsed().as_secs_f64(), suite)?;
    }
    out.finish()
}

/// The `--quick` version of a scenario: small counts, few configurations.
fn quickened(s: Scenario, quick: bool) -> Scenario {
    if !quick {
        return s;
    }
    match s {
        Scenario::Uncontended(mut a) => {
            a.iters = a.iters.min(200_000);
            Scenario::Uncontended(a)
        }
        Scenario::Contention(mut a) => {
            a.threads = vec![2, 8];
            a.iters = a.iters.min(5_000);
            a.cap = a.cap.min(0.1);
            Scenario::Contention(a)
        }
        Scenario::Latency(mut a) => {
            a.iters = a.iters.min(5_000);
            a.cap = a.cap.min(0.2);
            Scenario::Latency(a)
        }
        Scenario::Steal(mut a) => {
            a.threads = vec![2, 4];
            a.iters = a.iters.min(10_000);
            a.cap = a.cap.min(0.2);
            Scenario::Steal(a)
        }
        Scenario::Interference(mut a) => {
            a.scale = a.scale.min(0.1);
            a.workloads = vec!["qsort".into()];
            Scenario::Interference(a)
        }
    }
}

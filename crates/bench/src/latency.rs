//! `latency`: seed 000's experiment. The acquire time of every lock operation (TSC ticks from
//! before the first attempt to inside the critical section), as a log2 histogram in cycles and
//! ns with its CDF, with and without `--load N` busy threads competing for the CPUs. With load,
//! lock holders get preempted: the spin locks' tail grows by the scheduler's time slice
//! (lock-holder and, for FIFO locks, lock-waiter preemption).

use crate::Ctx;
use crate::contention::{RunCfg, run_named};
use crate::summary::Summary;
use anyhow::{Result, bail};
use lockmeter_core::hist::{BUCKETS, percentile};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

/// Options of the `latency` scenario.
#[derive(Debug, Clone, clap::Args)]
pub struct LatencyArgs {
    /// Threads taking the lock.
    #[arg(long, short = 't', default_value_t = 2)]
    pub threads: usize,
    /// Busy threads competing for the CPUs (comma-separated list of counts to compare).
    #[arg(long, value_delimiter = ',', default_value = "0,2")]
    pub load: Vec<usize>,
    /// Lock-unlock pairs per thread.
    #[arg(long, short = 'n', default_value_t = 50_000)]
    pub iters: u64,
    /// Critical-section length.
    #[arg(long, default_value_t = 10)]
    pub cs: u32,
    /// Work outside the lock.
    #[arg(long, default_value_t = 100)]
    pub outside: u32,
    /// Time cap per run, seconds.
    #[arg(long, default_value_t = 1.0)]
    pub cap: f64,
}

impl Default for LatencyArgs {
    fn default() -> Self {
        LatencyArgs { threads: 2, load: vec![0, 2], iters: 50_000, cs: 10, outside: 100, cap: 1.0 }
    }
}

/// The default locks of the scenario: one of each family plus two baselines.
pub const DEFAULT_LOCKS: &[&str] =
    &["tas", "ticket", "mcs", "futex", "adaptive", "std", "parking-lot"];

/// One (lock, load) result.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Lock.
    pub lock: String,
    /// Busy threads.
    pub load: usize,
    /// Acquisitions timed.
    pub samples: u64,
    /// Log2 histogram of acquire time in TSC cycles (bucket i: [2^(i-1), 2^i)).
    pub hist_cycles: Vec<u64>,
    /// p50 / p90 / p99 / p99.9 / max, ns.
    pub p50_ns: u64,
    /// See `p50_ns`.
    pub p90_ns: u64,
    /// See `p50_ns`.
    pub p99_ns: u64,
    /// See `p50_ns`.
    pub p999_ns: u64,
    /// See `p50_ns`.
    pub max_ns: u64,
    /// Share of acquisitions that took 2^20 cycles or more (≈ 0.4 ms at 2.6 GHz): preemptions.
    pub over_2_20_pct: f64,
    /// Throughput over the runs (M pairs/s).
    pub mops: Summary,
}

fn busy(stop: &AtomicBool) {
    let mut x = 1u64;
    while !stop.load(Relaxed) {
        for _ in 0..1000 {
            x = core::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

/// Runs the scenario.
pub fn run(a: &LatencyArgs, locks: &[String], runs: usize, ctx: &Ctx) -> Result<Vec<Row>> {
    if a.threads == 0 || a.threads > 4096 || a.load.iter().any(|&l| l > 4096) {
        bail!(
            "--threads / --load: give counts between 1 and 4096 (load may be 0), e.g. --threads 2 --load 0,2"
        );
    }
    if !(a.cap > 0.0 && a.cap.is_finite()) || a.iters == 0 {
        bail!("--cap and --iters must be positive, e.g. --cap 1 --iters 50000");
    }
    let pb = ctx.progress((a.load.len() * runs * locks.len()) as u64, "latency");
    let mut rows = Vec::new();
    for &load in &a.load {
        let stop = AtomicBool::new(false);
        let res: Result<Vec<Row>> = std::thread::scope(|s| {
            for _ in 0..load {
                s.spawn(|| busy(&stop));
            }
            let cfg = RunCfg {
                threads: a.threads,
                iters: a.iters,
                cs: a.cs,
                outside: a.outside,
                cap: Duration::from_secs_f64(a.cap),
                pin: load == 0 && ctx.pin_for(a.threads),
                sample: 1,
            };
            let mut outs = vec![Vec::new(); locks.len()];
            let r = (|| -> Result<()> {
                for r in 0..runs {
                    for (i, l) in locks.iter().enumerate() {
                        pb.set_message(format!("{l} load={load} run {}/{runs}", r + 1));
                        outs[i].push(run_named(l, cfg)?);
                        pb.inc(1);
                    }
                }
                Ok(())
            })();
            stop.store(true, Relaxed);
            r?;
            Ok(locks
                .iter()
                .zip(outs)
                .map(|(l, o)| {
                    let mut h = [0u64; BUCKETS];
                    let mut max = 0;
                    for r in &o {
                        for (a, b) in h.iter_mut().zip(r.hist) {
                            *a += b;
                        }
                        max = max.max(r.max);
                    }
                    let n: u64 = h.iter().sum();
                    let p = |q| ctx.ticks_to_ns(percentile(&h, q, Some(max)).unwrap_or(0));
                    let over: u64 = h[21..].iter().sum();
                    Row {
                        lock: l.clone(),
                        load,
                        samples: n,
                        hist_cycles: h.to_vec(),
                        p50_ns: p(50.0),
                        p90_ns: p(90.0),
                        p99_ns: p(99.0),
                        p999_ns: p(99.9),
                        max_ns: ctx.ticks_to_ns(max),
                        over_2_20_pct: if n == 0 { 0.0 } else { 100.0 * over as f64 / n as f64 },
                        mops: Summary::of(
                            &o.iter().map(|r| r.ops as f64 / r.secs / 1e6).collect::<Vec<_>>(),
                        ),
                    }
                })
                .collect())
        });
        rows.extend(res?);
    }
    pb.finish_and_clear();
    Ok(rows)
}

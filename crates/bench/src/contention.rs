//! `contention`: threads × locks × critical-section length × outside work.
//!
//! Every thread does a fixed count of lock-unlock pairs (seed 002's 1M-pair loop; default
//! 100 000), behind a start barrier, with a time cap per run so that collapsing locks (FIFO spin
//! locks under oversubscription) cannot stall the suite: a capped run says so. Locks run in
//! interleaved order, run after run. Reported per configuration, over R runs: run time (mean,
//! stddev: seed 002's columns), throughput (median, min-max), per-thread fairness (Jain's index
//! and min/max of the acquisitions each thread had made when the first thread finished, and
//! threads with none: starved), acquire latency (p50/p99/max, sampled one acquisition in 16),
//! and the ratio of the median throughput to a baseline lock.

use crate::locks::{BenchLock, Visit, visit};
use crate::summary::{Summary, jain};
use crate::work::{Protected, outside};
use crate::{Ctx, Pin};
use anyhow::{Result, bail};
use crossbeam_utils::CachePadded;
use lockmeter_core::hist::{BUCKETS, bucket, percentile};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

/// One run's measurements.
#[derive(Debug, Clone)]
pub struct RunOut {
    /// Wall time from the barrier to the last thread's end (s).
    pub secs: f64,
    /// Lock-unlock pairs done, all threads.
    pub ops: u64,
    /// Per-thread acquisitions when the first thread finished.
    pub snapshot: Vec<u64>,
    /// Acquire-latency histogram (TSC ticks), sampled.
    pub hist: [u64; BUCKETS],
    /// Longest sampled acquire (ticks).
    pub max: u64,
    /// Whether the time cap stopped the run.
    pub capped: bool,
}

/// Parameters of one run.
#[derive(Debug, Clone, Copy)]
pub struct RunCfg {
    /// Threads.
    pub threads: usize,
    /// Pairs per thread.
    pub iters: u64,
    /// Critical-section length (work iterations).
    pub cs: u32,
    /// Work outside the lock (iterations).
    pub outside: u32,
    /// Time cap.
    pub cap: Duration,
    /// Pin threads (thread i on CPU i mod CPUs).
    pub pin: bool,
    /// Time one acquisition in `sample` (power of two); 0: none.
    pub sample: u64,
}

struct Runner(RunCfg);

impl Visit for Runner {
    type Out = Result<RunOut>;
    fn visit<L: BenchLock>(self) -> Result<RunOut> {
        run_one::<L>(self.0)
    }
}

/// Runs one configuration with a new lock `L`.
pub fn run_one<L: BenchLock>(c: RunCfg) -> Result<RunOut> {
    run_with(&*CachePadded::new(L::create()), c)
}

/// Runs one configuration with `lock`.
pub fn run_with<L: BenchLock>(lock: &L, c: RunCfg) -> Result<RunOut> {
    let data = Protected::default();
    let stop = AtomicBool::new(false);
    let first = AtomicBool::new(false);
    let counts: Vec<CachePadded<AtomicU64>> =
        (0..c.threads).map(|_| CachePadded::new(AtomicU64::new(0))).collect();
    let snapshot = Mutex::new(Vec::new());
    let barrier = Barrier::new(c.threads + 1);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mask = c.sample.saturating_sub(1);
    let (hist, max, ends, start) = std::thread::scope(|s| {
        let hs: Vec<_> = (0..c.threads)
            .map(|t| {
                let (data, stop, first, counts, snapshot, barrier) =
                    (&data, &stop, &first, &counts, &snapshot, &barrier);
                s.spawn(move || {
                    if c.pin {
                        crate::machine::pin_to(t % cpus);
                    }
                    let mut hist = [0u64; BUCKETS];
                    let mut max = 0u64;
                    let mut seed = t as u64 + 1;
                    barrier.wait();
                    let begin = Instant::now();
                    let mut i = 0u64;
                    while i < c.iters {
                        // Every pair: a collapsing FIFO lock may take milliseconds per handoff.
                        if stop.load(Relaxed) {
                            break;
                        }
                        if c.sample != 0 && i & mask == 0 {
                            let a = lockmeter_core::clock::tsc();
                            lock.with(|| {
                                let w = lockmeter_core::clock::tsc().wrapping_sub(a);
                                // SAFETY: under the lock.
                                unsafe { data.critical(c.cs) };
                                hist[bucket(w)] += 1;
                                max = max.max(w);
                            });
                        } else {
                            // SAFETY: under the lock.
                            lock.with(|| unsafe { data.critical(c.cs) });
                        }
                        outside(c.outside, &mut seed);
                        i += 1;
                        counts[t].store(i, Relaxed);
                    }
                    let end = Instant::now();
                    if !first.swap(true, Relaxed) {
                        let snap: Vec<u64> = counts.iter().map(|x| x.load(Relaxed)).collect();
                        *snapshot.lock().unwrap_or_else(|e| e.into_inner()) = snap;
                    }
                    (hist, max, begin, end)
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        // Watchdog: stop the run at the cap (the threads look every 256 pairs).
        let (counts, stop) = (&counts, &stop);
        let watchdog = s.spawn(move || {
            let deadline = start + c.cap;
            while !hs_done(counts, c.iters) {
                let now = Instant::now();
                if now >= deadline {
                    stop.store(true, Relaxed);
                    return true;
                }
                std::thread::sleep((deadline - now).min(Duration::from_millis(2)));
            }
            false
        });
        let mut hist = [0u64; BUCKETS];
        let mut max = 0;
        let mut ends = Vec::new();
        let mut begins = Vec::new();
        for h in hs {
            let (h1, m1, b, e) = h.join().expect("benchmark thread panicked");
            begins.push(b);
            for (a, b) in hist.iter_mut().zip(h1) {
                *a += b;
            }
            max = max.max(m1);
            ends.push(e);
        }
        let _ = watchdog.join();
        // The run starts when the first thread leaves the barrier.
        (hist, max, ends, begins.into_iter().min().unwrap_or(start))
    });
    let capped = stop.load(Relaxed);
    let end = ends.into_iter().max().unwrap_or(start);
    let ops: u64 = counts.iter().map(|c| c.load(Relaxed)).sum();
    if data.count() != ops {
        bail!("correctness violation: counter {} != {} lock-unlock pairs", data.count(), ops);
    }
    let snapshot = snapshot.into_inner().unwrap_or_else(|e| e.into_inner());
    Ok(RunOut { secs: (end - start).as_secs_f64(), ops, snapshot, hist, max, capped })
}

fn hs_done(counts: &[CachePadded<AtomicU64>], iters: u64) -> bool {
    counts.iter().all(|c| c.load(Relaxed) >= iters)
}

/// Runs lock `name` once.
pub fn run_named(name: &str, c: RunCfg) -> Result<RunOut> {
    visit(name, Runner(c))?
}

/// One row of the contention table.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Lock name.
    pub lock: String,
    /// Threads.
    pub threads: usize,
    /// Critical-section length.
    pub cs: u32,
    /// Outside work.
    pub outside: u32,
    /// Pairs per thread asked for.
    pub iters: u64,
    /// Run time (ms) over the runs.
    pub time_ms: Summary,
    /// Throughput (M pairs/s) over the runs.
    pub mops: Summary,
    /// Jain's index at the first thread's finish, over the runs.
    pub jain: Summary,
    /// Smallest / largest per-thread count at the first finish (the run with the lowest ratio).
    pub min_max: f64,
    /// Threads with zero acquisitions when the first thread finished (worst run).
    pub starved: usize,
    /// Runs stopped by the time cap.
    pub capped_runs: usize,
    /// Acquire latency p50 / p99 / max (ns), all runs merged.
    pub p50_ns: u64,
    /// See `p50_ns`.
    pub p99_ns: u64,
    /// See `p50_ns`.
    pub max_ns: u64,
    /// Median throughput relative to the baseline's (same threads, cs, outside).
    pub vs_baseline: Option<f64>,
    /// Whether the runs disagree (spread of throughput > 20% of the median).
    pub noisy: bool,
}

/// Summarises the runs of one configuration.
pub fn summarise(lock: &str, c: &RunCfg, runs: &[RunOut], ctx: &Ctx) -> Row {
    let time: Vec<f64> = runs.iter().map(|r| r.secs * 1e3).collect();
    let mops: Vec<f64> = runs.iter().map(|r| r.ops as f64 / r.secs / 1e6).collect();
    let jains: Vec<f64> = runs
        .iter()
        .map(|r| jain(&r.snapshot.iter().map(|&x| x as f64).collect::<Vec<_>>()))
        .collect();
    let min_max = runs
        .iter()
        .map(|r| {
            let mx = r.snapshot.iter().copied().max().unwrap_or(0);
            let mn = r.snapshot.iter().copied().min().unwrap_or(0);
            if mx == 0 { 1.0 } else { mn as f64 / mx as f64 }
        })
        .fold(f64::INFINITY, f64::min);
    let starved =
        runs.iter().map(|r| r.snapshot.iter().filter(|&&x| x == 0).count()).max().unwrap_or(0);
    let mut hist = [0u64; BUCKETS];
    let mut max = 0;
    for r in runs {
        for (a, b) in hist.iter_mut().zip(r.hist) {
            *a += b;
        }
        max = max.max(r.max);
    }
    let ns = |t: Option<u64>| t.map_or(0, |t| ctx.ticks_to_ns(t));
    let mops = Summary::of(&mops);
    Row {
        lock: lock.to_string(),
        threads: c.threads,
        cs: c.cs,
        outside: c.outside,
        iters: c.iters,
        time_ms: Summary::of(&time),
        noisy: mops.noisy(),
        mops,
        jain: Summary::of(&jains),
        min_max: if min_max.is_finite() { min_max } else { 1.0 },
        starved,
        capped_runs: runs.iter().filter(|r| r.capped).count(),
        p50_ns: ns(percentile(&hist, 50.0, Some(max))),
        p99_ns: ns(percentile(&hist, 99.0, Some(max))),
        max_ns: ctx.ticks_to_ns(max),
        vs_baseline: None,
    }
}

/// Options of the `contention` scenario.
#[derive(Debug, Clone, clap::Args)]
pub struct ContentionArgs {
    /// Thread counts to sweep (comma-separated); past the CPU count is oversubscription.
    #[arg(long, short = 't', value_delimiter = ',', default_value = "2,4,8")]
    pub threads: Vec<usize>,
    /// Critical-section lengths (work iterations inside the lock).
    #[arg(long, value_delimiter = ',', default_value = "10")]
    pub cs: Vec<u32>,
    /// Work outside the lock (iterations), per lock-unlock pair.
    #[arg(long, value_delimiter = ',', default_value = "100")]
    pub outside: Vec<u32>,
    /// Lock-unlock pairs per thread.
    #[arg(long, short = 'n', default_value_t = 100_000)]
    pub iters: u64,
    /// Time cap per run, seconds (a capped run reports what it did by then).
    #[arg(long, default_value_t = 0.5)]
    pub cap: f64,
    /// Baseline lock for the ratio column.
    #[arg(long, default_value = "std")]
    pub baseline: String,
}

impl Default for ContentionArgs {
    fn default() -> Self {
        ContentionArgs {
            threads: vec![2, 4, 8],
            cs: vec![10],
            outside: vec![100],
            iters: 100_000,
            cap: 0.5,
            baseline: "std".into(),
        }
    }
}

/// Runs the scenario.
pub fn run(a: &ContentionArgs, locks: &[String], runs: usize, ctx: &Ctx) -> Result<Vec<Row>> {
    if a.threads.iter().any(|&t| t == 0 || t > 4096) {
        bail!("--threads: give thread counts between 1 and 4096, e.g. --threads 2,8");
    }
    if !(a.cap > 0.0 && a.cap.is_finite()) {
        bail!("--cap: give a positive number of seconds, e.g. --cap 0.5");
    }
    if a.iters == 0 {
        bail!("--iters: give a positive count, e.g. --iters 100000");
    }
    let mut all = locks.to_vec();
    if !all.contains(&a.baseline) {
        crate::locks::check(std::slice::from_ref(&a.baseline))?;
        all.push(a.baseline.clone());
    }
    let mut cfgs = Vec::new();
    for &t in &a.threads {
        for &cs in &a.cs {
            for &out in &a.outside {
                cfgs.push(RunCfg {
                    threads: t,
                    iters: a.iters,
                    cs,
                    outside: out,
                    cap: Duration::from_secs_f64(a.cap),
                    pin: ctx.pin_for(t),
                    sample: 16,
                });
            }
        }
    }
    let pb = ctx.progress((cfgs.len() * runs * all.len()) as u64, "contention");
    let mut rows = Vec::new();
    for c in &cfgs {
        let mut outs: Vec<Vec<RunOut>> = vec![Vec::new(); all.len()];
        for r in 0..runs {
            for (i, l) in all.iter().enumerate() {
                pb.set_message(format!(
                    "{l} t={} cs={} out={} run {}/{runs}",
                    c.threads,
                    c.cs,
                    c.outside,
                    r + 1
                ));
                outs[i].push(run_named(l, *c)?);
                pb.inc(1);
            }
        }
        let base =
            all.iter().position(|l| *l == a.baseline).map(|i| summarise(&all[i], c, &outs[i], ctx));
        for (i, l) in all.iter().enumerate() {
            if !locks.contains(l) {
                continue;
            }
            let mut row = summarise(l, c, &outs[i], ctx);
            if let Some(b) = &base
                && b.mops.median > 0.0
            {
                row.vs_baseline = Some(row.mops.median / b.mops.median);
            }
            rows.push(row);
        }
    }
    pb.finish_and_clear();
    let _ = Pin::Auto;
    Ok(rows)
}

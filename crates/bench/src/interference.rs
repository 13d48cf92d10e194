//! `interference`: seed 003. An *active* thread runs a real computation (matrix-vector product:
//! memory bound; quicksort: CPU bound, short-latency ops; hashing: pseudo-random accesses)
//! alone, then beside N threads that spin-wait under each policy of
//! [`lockmeter_locks::relax`]. Reported: the active thread's slowdown (%), and the spinners'
//! responsiveness: the time from a release (a generation bump, stamped with the TSC, every
//! `--period-us`) to a spinner seeing it (p50/p99).
//!
//! Seed 003 measured hardware-thread sharing on an UltraSPARC T2 (fetch bandwidth). On a machine
//! without SMT the spinners only compete for whole CPUs: when N + 1 > CPUs the spinning
//! policies steal CPU time from the active thread and only `park` does not; with N < CPUs the
//! slowdown measures memory-system and hypervisor effects.

use crate::Ctx;
use crate::summary::Summary;
use anyhow::{Result, bail};
use lockmeter_core::clock::tsc;
use lockmeter_core::hist::{BUCKETS, bucket, percentile};
use lockmeter_locks::relax::{
    Backoff, Delay, Park, Pause, Relax, Tight, notify_all, wait_while_eq,
};
use serde::Serialize;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::time::{Duration, Instant};

/// Options of the `interference` scenario.
#[derive(Debug, Clone, clap::Args)]
pub struct InterferenceArgs {
    /// Spinning threads beside the active one (comma-separated counts).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    pub spinners: Vec<usize>,
    /// Spin policies: tight, pause, backoff, delay, park.
    #[arg(long, value_delimiter = ',', default_value = "tight,pause,backoff,delay,park")]
    pub policies: Vec<String>,
    /// Workloads: matvec, qsort, hash.
    #[arg(long, value_delimiter = ',', default_value = "matvec,qsort,hash")]
    pub workloads: Vec<String>,
    /// Work size factor (1 = about 20-40 ms per workload run on a current core).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Release period (µs): how often the spinners' word changes.
    #[arg(long, default_value_t = 200)]
    pub period_us: u64,
}

impl Default for InterferenceArgs {
    fn default() -> Self {
        InterferenceArgs {
            spinners: vec![1, 2],
            policies: ["tight", "pause", "backoff", "delay", "park"].map(String::from).to_vec(),
            workloads: ["matvec", "qsort", "hash"].map(String::from).to_vec(),
            scale: 1.0,
            period_us: 200,
        }
    }
}

/// One (workload, spinners, policy) result.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Workload.
    pub workload: String,
    /// Spinning threads.
    pub spinners: usize,
    /// Spin policy.
    pub policy: String,
    /// Active thread alone, ms.
    pub alone_ms: Summary,
    /// Active thread beside the spinners, ms.
    pub with_ms: Summary,
    /// Slowdown of the medians, %.
    pub slowdown_pct: f64,
    /// Release → seen by a spinner, p50 / p99 (ns).
    pub handoff_p50_ns: u64,
    /// See `handoff_p50_ns`.
    pub handoff_p99_ns: u64,
    /// Whether either set of runs disagrees (spread > 20%).
    pub noisy: bool,
}

/// The active thread's workloads, prepared once.
struct Work {
    mat: Vec<f64>,
    n: usize,
    reps: usize,
    keys: Vec<u32>,
    hash_ops: usize,
}

impl Work {
    fn new(scale: f64) -> Work {
        let n = 1024;
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        Work {
            mat: (0..n * n).map(|i| (i % 7) as f64 * 0.5).collect(),
            n,
            reps: ((6.0 * scale).ceil() as usize).max(1),
            keys: (0..((200_000.0 * scale) as usize).max(1000)).map(|_| rnd() as u32).collect(),
            hash_ops: ((1_000_000.0 * scale) as usize).max(1000),
        }
    }

    fn run(&self, w: &str) -> Duration {
        let t = Instant::now();
        match w {
            "matvec" => {
                let v: Vec<f64> = (0..self.n).map(|i| i as f64).collect();
                let mut y = vec![0.0; self.n];
                for _ in 0..self.reps {
                    for (r, yr) in y.iter_mut().enumerate() {
                        let row = &self.mat[r * self.n..(r + 1) * self.n];
                        *yr = row.iter().zip(&v).map(|(a, b)| a * b).sum();
                    }
                    black_box(&y);
                }
            }
            "qsort" => {
                let mut a = self.keys.clone();
                quicksort(&mut a);
                black_box(&a);
            }
            _ => {
                let mut table = vec![0u64; 1 << 18];
                let mask = table.len() - 1;
                // Count 100 000 distinct keys in 2^18 open-addressed slots (at most 38% full).
                let mut counts = vec![0u32; table.len()];
                for n in 0..self.hash_ops as u64 {
                    let k = lockmeter_core::mix64(n % 100_000) | 1;
                    let mut i = k as usize & mask;
                    while table[i] != 0 && table[i] != k {
                        i = (i + 1) & mask;
                    }
                    table[i] = k;
                    counts[i] += 1;
                }
                black_box(&counts);
                black_box(&table);
            }
        }
        t.elapsed()
    }
}

fn quicksort(a: &mut [u32]) {
    if a.len() <= 1 {
        return;
    }
    // Hoare's partition with the lower middle as pivot: both halves are non-empty.
    let p = a[(a.len() - 1) / 2];
    let (mut i, mut j) = (0usize, a.len() - 1);
    loop {
        while a[i] < p {
            i += 1;
        }
        while a[j] > p {
            j -= 1;
        }
        if i >= j {
            break;
        }
        a.swap(i, j);
        i += 1;
        j -= 1;
    }
    let (l, r) = a.split_at_mut(j + 1);
    quicksort(l);
    quicksort(r);
}

/// Runs the active thread `runs` times beside `n` spinners of policy `P`; returns the active
/// run times (ms) and the spinners' release-to-seen histogram (ticks).
fn with_spinners<P: Relax>(
    work: &Work,
    w: &str,
    n: usize,
    runs: usize,
    period: Duration,
) -> (Vec<f64>, [u64; BUCKETS]) {
    let generation = AtomicU32::new(0);
    let stamp = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let spinners: Vec<_> = (0..n)
            .map(|_| {
                let (generation, stamp, stop) = (&generation, &stamp, &stop);
                s.spawn(move || {
                    let mut h = [0u64; BUCKETS];
                    loop {
                        let g = generation.load(Acquire);
                        if stop.load(Relaxed) {
                            break;
                        }
                        wait_while_eq::<P>(generation, g);
                        let d = tsc().wrapping_sub(stamp.load(Relaxed));
                        if !stop.load(Relaxed) {
                            h[bucket(d)] += 1;
                        }
                    }
                    h
                })
            })
            .collect();
        let releaser = s.spawn(|| {
            while !stop.load(Relaxed) {
                std::thread::sleep(period);
                stamp.store(tsc(), Relaxed);
                generation.fetch_add(1, Release);
                notify_all::<P>(&generation);
            }
        });
        std::thread::sleep(Duration::from_millis(5)); // let the spinners settle
        let times: Vec<f64> = (0..runs).map(|_| work.run(w).as_secs_f64() * 1e3).collect();
        stop.store(true, Relaxed);
        stamp.store(tsc(), Relaxed);
        generation.fetch_add(1, Release);
        notify_all::<P>(&generation);
        let _ = releaser.join();
        let mut h = [0u64; BUCKETS];
        for sp in spinners {
            if let Ok(x) = sp.join() {
                for (a, b) in h.iter_mut().zip(x) {
                    *a += b;
                }
            }
        }
        (times, h)
    })
}

/// Runs the scenario.
pub fn run(a: &InterferenceArgs, runs: usize, ctx: &Ctx) -> Result<Vec<Row>> {
    for p in &a.policies {
        if !["tight", "pause", "backoff", "delay", "park"].contains(&p.as_str()) {
            bail!("unknown spin policy {p:?}: choose from tight,pause,backoff,delay,park");
        }
    }
    for w in &a.workloads {
        if !["matvec", "qsort", "hash"].contains(&w.as_str()) {
            bail!("unknown workload {w:?}: choose from matvec,qsort,hash");
        }
    }
    if !(a.scale > 0.0 && a.scale <= 1000.0)
        || a.spinners.iter().any(|&n| n > 1024)
        || a.period_us == 0
    {
        bail!("interference: --scale in (0, 1000], --spinners up to 1024, --period-us > 0");
    }
    let work = Work::new(a.scale);
    let period = Duration::from_micros(a.period_us);
    let total = a.workloads.len() * a.spinners.len() * a.policies.len();
    let pb = ctx.progress(total as u64, "interference");
    let mut rows = Vec::new();
    for w in &a.workloads {
        work.run(w); // warm-up
        for &n in &a.spinners {
            for p in &a.policies {
                // The active thread alone, measured right before each configuration, so that
                // slow drifts of the machine's load cancel out.
                pb.set_message(format!("{w} alone, then + {n} x {p}"));
                let alone = Summary::of(
                    &(0..runs).map(|_| work.run(w).as_secs_f64() * 1e3).collect::<Vec<_>>(),
                );
                let (t, h) = match p.as_str() {
                    "tight" => with_spinners::<Tight>(&work, w, n, runs, period),
                    "pause" => with_spinners::<Pause>(&work, w, n, runs, period),
                    "backoff" => with_spinners::<Backoff>(&work, w, n, runs, period),
                    "delay" => with_spinners::<Delay>(&work, w, n, runs, period),
                    _ => with_spinners::<Park>(&work, w, n, runs, period),
                };
                let with = Summary::of(&t);
                let pc = |q| percentile(&h, q, None).map_or(0, |t| ctx.ticks_to_ns(t));
                rows.push(Row {
                    workload: w.clone(),
                    spinners: n,
                    policy: p.clone(),
                    slowdown_pct: 100.0 * (with.median / alone.median - 1.0),
                    handoff_p50_ns: pc(50.0),
                    handoff_p99_ns: pc(99.0),
                    noisy: with.noisy() || alone.noisy(),
                    alone_ms: alone,
                    with_ms: with,
                });
                pb.inc(1);
            }
        }
    }
    pb.finish_and_clear();
    Ok(rows)
}

//! `uncontended`: ns per lock + unlock pair (with a counter increment inside, like the
//! prior-art numbers) on one thread, for every lock, as ratios to the baselines measured in the
//! same process, interleaved run by run. Each run times 20 batches and keeps the fastest (noise
//! from preemption and neighbours only ever adds time); the table shows the median and range of
//! that over the runs.

use crate::Ctx;
use crate::locks::{BenchLock, Visit, visit};
use crate::summary::Summary;
use crate::work::Protected;
use anyhow::{Result, bail};
use serde::Serialize;
use std::time::Instant;

/// Options of the `uncontended` scenario.
#[derive(Debug, Clone, clap::Args)]
pub struct UncontendedArgs {
    /// Lock-unlock pairs per run.
    #[arg(long, short = 'n', default_value_t = 2_000_000)]
    pub iters: u64,
}

impl Default for UncontendedArgs {
    fn default() -> Self {
        UncontendedArgs { iters: 2_000_000 }
    }
}

/// One lock's result.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Lock.
    pub lock: String,
    /// ns per pair over the runs.
    pub ns: Summary,
    /// Median relative to parking_lot, std, pthread (same process).
    pub vs_parking_lot: f64,
    /// See `vs_parking_lot`.
    pub vs_std: f64,
    /// See `vs_parking_lot`.
    pub vs_pthread: f64,
    /// Whether the runs disagree.
    pub noisy: bool,
}

/// Batches per run.
const BATCHES: u64 = 20;

struct One(u64);
impl Visit for One {
    type Out = f64;
    fn visit<L: BenchLock>(self) -> f64 {
        let l = L::create();
        let d = Protected::default();
        // Warm up (page in, train predictors), then measure.
        for _ in 0..self.0 / 10 {
            // SAFETY: under the lock.
            l.with(|| unsafe { d.critical(0) });
        }
        // The fastest of BATCHES batches: a batch that was preempted or disturbed by a
        // neighbour only gets slower, so the minimum filters the machine's noise.
        let per = (self.0 / BATCHES).max(1);
        let mut best = f64::INFINITY;
        for _ in 0..BATCHES {
            let t = Instant::now();
            for _ in 0..per {
                // SAFETY: under the lock.
                l.with(|| unsafe { d.critical(0) });
            }
            best = best.min(t.elapsed().as_nanos() as f64 / per as f64);
        }
        assert_eq!(d.count(), self.0 / 10 + per * BATCHES, "correctness violation");
        best
    }
}

/// Runs the scenario.
pub fn run(a: &UncontendedArgs, locks: &[String], runs: usize, ctx: &Ctx) -> Result<Vec<Row>> {
    if a.iters < 1000 {
        bail!("--iters: give at least 1000 pairs, e.g. --iters 2000000");
    }
    let mut all = locks.to_vec();
    for b in ["parking-lot", "std", "pthread"] {
        if !all.iter().any(|l| l == b) {
            all.push(b.to_string());
        }
    }
    let pb = ctx.progress((runs * all.len()) as u64, "uncontended");
    let mut ns = vec![Vec::new(); all.len()];
    for r in 0..runs {
        for (i, l) in all.iter().enumerate() {
            pb.set_message(format!("{l} run {}/{runs}", r + 1));
            ns[i].push(visit(l, One(a.iters))?);
            pb.inc(1);
        }
    }
    pb.finish_and_clear();
    let med = |name: &str| {
        all.iter().position(|l| l == name).map_or(f64::NAN, |i| Summary::of(&ns[i]).median)
    };
    let (pl, st, pt) = (med("parking-lot"), med("std"), med("pthread"));
    Ok(locks
        .iter()
        .map(|l| {
            let i = all.iter().position(|x| x == l).unwrap_or(0);
            let s = Summary::of(&ns[i]);
            Row {
                lock: l.clone(),
                vs_parking_lot: s.median / pl,
                vs_std: s.median / st,
                vs_pthread: s.median / pt,
                noisy: s.noisy(),
                ns: s,
            }
        })
        .collect())
}

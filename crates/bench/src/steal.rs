//! `steal`: seed 002's table. The unfair queued lock against the unfair byte (TAS) lock: average
//! run time and standard deviation of a fixed lock-unlock loop per thread, and the unfair lock's
//! steals by queue position (`lsteal_cnts`) and steal attempts (`trylock_cnt`).

use crate::Ctx;
use crate::contention::{RunCfg, run_named, run_with};
use crate::locks::BenchLock;
use crate::summary::Summary;
use anyhow::{Result, bail};
use lock_api::RawMutex;
use lockmeter_locks::UnfairQ;
use lockmeter_locks::unfair::{STEAL_POSITIONS, StealStats};
use serde::Serialize;
use std::time::Duration;

/// Options of the `steal` scenario.
#[derive(Debug, Clone, clap::Args)]
pub struct StealArgs {
    /// Thread counts.
    #[arg(long, short = 't', value_delimiter = ',', default_value = "2,4,8")]
    pub threads: Vec<usize>,
    /// Lock-unlock pairs per thread (shorter runs than 1000000 do not even overlap when
    /// thread start-up takes milliseconds, as it does on a loaded VM).
    #[arg(long, short = 'n', default_value_t = 1_000_000)]
    pub iters: u64,
    /// Critical-section length.
    #[arg(long, default_value_t = 0)]
    pub cs: u32,
    /// Time cap per run, seconds.
    #[arg(long, default_value_t = 2.0)]
    pub cap: f64,
}

impl Default for StealArgs {
    fn default() -> Self {
        StealArgs { threads: vec![2, 4, 8], iters: 1_000_000, cs: 0, cap: 2.0 }
    }
}

/// One thread count's result.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Threads.
    pub threads: usize,
    /// Unfair byte lock (TAS) run time, ms.
    pub tas_ms: Summary,
    /// Unfair queued lock run time, ms.
    pub unfair_q_ms: Summary,
    /// Steals by queue position, summed over the runs (`lsteal_cnts`).
    pub steals: Vec<u64>,
    /// Steal attempts (`trylock_cnt`).
    pub trylocks: u64,
    /// Entries into the queue.
    pub queued: u64,
    /// Acquisitions by the queue head.
    pub head_acquisitions: u64,
    /// Runs stopped by the time cap.
    pub capped_runs: usize,
}

struct Unfair(UnfairQ);
impl BenchLock for Unfair {
    fn create() -> Self {
        Unfair(UnfairQ::new())
    }
    #[inline(always)]
    fn with<T>(&self, f: impl FnOnce() -> T) -> T {
        self.0.lock();
        let r = f();
        // SAFETY: locked just above.
        unsafe { self.0.unlock() };
        r
    }
}

/// Runs the scenario.
pub fn run(a: &StealArgs, runs: usize, ctx: &Ctx) -> Result<Vec<Row>> {
    if a.threads.iter().any(|&t| t == 0 || t > 4096)
        || a.iters == 0
        || !(a.cap.is_finite() && a.cap > 0.0)
    {
        bail!(
            "steal: give --threads between 1 and 4096, a positive --iters and --cap, e.g. --threads 2,8"
        );
    }
    let pb = ctx.progress((a.threads.len() * runs * 2) as u64, "steal");
    let mut rows = Vec::new();
    for &t in &a.threads {
        let cfg = RunCfg {
            threads: t,
            iters: a.iters,
            cs: a.cs,
            outside: 0,
            cap: Duration::from_secs_f64(a.cap),
            pin: ctx.pin_for(t),
            sample: 0,
        };
        let (mut tas, mut uq) = (Vec::new(), Vec::new());
        let mut st = StealStats::default();
        let mut capped = 0;
        for r in 0..runs {
            pb.set_message(format!("tas t={t} run {}/{runs}", r + 1));
            let o = run_named("tas", cfg)?;
            capped += o.capped as usize;
            tas.push(o.secs * 1e3);
            pb.inc(1);
            pb.set_message(format!("unfair-q t={t} run {}/{runs}", r + 1));
            let l = Unfair::create();
            let o = run_with(&l, cfg)?;
            capped += o.capped as usize;
            uq.push(o.secs * 1e3);
            let s = l.0.steal_stats();
            for (a, b) in st.steals.iter_mut().zip(s.steals) {
                *a += b;
            }
            st.trylocks += s.trylocks;
            st.queued += s.queued;
            st.head_acquisitions += s.head_acquisitions;
            pb.inc(1);
        }
        debug_assert_eq!(st.steals.len(), STEAL_POSITIONS);
        rows.push(Row {
            threads: t,
            tas_ms: Summary::of(&tas),
            unfair_q_ms: Summary::of(&uq),
            steals: st.steals.to_vec(),
            trylocks: st.trylocks,
            queued: st.queued,
            head_acquisitions: st.head_acquisitions,
            capped_runs: capped,
        });
    }
    pb.finish_and_clear();
    Ok(rows)
}

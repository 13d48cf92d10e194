//! `lockmeter overhead`: what the collector adds to an uncontended lock+unlock pair.
//!
//! Runs a bundled workload (this binary, hidden subcommand: one thread, one static pthread mutex,
//! lock+unlock pairs called through the PLT like any program's) without the preload and with it in
//! each hold-timing mode, interleaved round by round so that the machine's drift hits all modes
//! alike. Reports the median ns per pair of each mode, its spread, and the median added cost.
//!
//! Then contended workloads (one hot mutex, many mutexes; 4 threads): wall time bare, under
//! each mode, and under `perf lock record` where it can run, beside the profile's own estimate of
//! the slowdown (`overhead.estimated_slowdown`), so that it can be checked against the measured
//! one.

use crate::run::{find_preload, metered_command};
use crate::settings_args::CollectorArgs;
use anyhow::{Context, Result, bail};
use lockmeter_core::settings;
use std::cell::UnsafeCell;
use std::ffi::OsString;
use std::process::Command;

/// Options of `lockmeter overhead`.
#[derive(Debug, clap::Args)]
pub(crate) struct OverheadArgs {
    /// Rounds (each runs every mode once, interleaved).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Lock+unlock pairs per measurement.
    #[arg(long, default_value_t = 2_000_000)]
    pairs: u64,
    /// Sampling rate of the sampled mode.
    #[arg(long, default_value_t = 16)]
    sample: u32,
    /// Print JSON instead of a table (the uncontended pair only).
    #[arg(long)]
    json: bool,
    /// Contended workloads to run after the uncontended pair (none: skip them).
    #[arg(long, value_delimiter = ',', default_value = "hot,many", value_parser = ["hot", "many", "none"])]
    contended: Vec<String>,
    /// Acquisitions per thread in each contended workload.
    #[arg(long, default_value_t = 1_000_000, value_name = "N")]
    contended_pairs: u64,
}

/// Options of the workload.
#[derive(Debug, clap::Args)]
pub(crate) struct OverheadWorkloadArgs {
    #[arg(long, default_value_t = 2_000_000)]
    pairs: u64,
    /// uncontended (one thread, ns per pair), hot (4 threads, one mutex, wall ns) or many (4
    /// threads, 4096 mutexes picked at random, wall ns).
    #[arg(long, default_value = "uncontended")]
    kind: String,
}

/// 4096 mutexes for the `many` workload.
struct Mutexes(UnsafeCell<[libc::pthread_mutex_t; MANY]>);
// SAFETY: as `Mutex`.
unsafe impl Sync for Mutexes {}
const MANY: usize = 4096;
static MANY_LOCKS: Mutexes = Mutexes(UnsafeCell::new([libc::PTHREAD_MUTEX_INITIALIZER; MANY]));

/// A contended workload: 4 threads x `pairs` lock+unlock pairs, on one mutex or on 4096 picked
/// at random; prints the wall time in ns.
fn contended_workload(pairs: u64, many: bool) {
    let t = std::time::Instant::now();
    std::thread::scope(|s| {
        for seed in 1..=4u64 {
            s.spawn(move || {
                let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
                for _ in 0..pairs {
                    let m = if many {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        // SAFETY: an index below MANY into the static array.
                        unsafe {
                            (MANY_LOCKS.0.get() as *mut libc::pthread_mutex_t)
                                .add(x as usize % MANY)
                        }
                    } else {
                        BENCH_LOCK.0.get()
                    };
                    // SAFETY: statically initialized mutexes, locked and unlocked by this thread.
                    unsafe {
                        libc::pthread_mutex_lock(m);
                        libc::pthread_mutex_unlock(m);
                    }
                }
            });
        }
    });
    println!("{}", t.elapsed().as_nanos());
}

struct Mutex(UnsafeCell<libc::pthread_mutex_t>);
// SAFETY: a pthread mutex is made to be shared; we only pass its address to libc.
unsafe impl Sync for Mutex {}
static BENCH_LOCK: Mutex = Mutex(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));

/// The workload: prints the median ns per pair of 7 timed batches.
pub(crate) fn workload(a: OverheadWorkloadArgs) {
    match a.kind.as_str() {
        "hot" => return contended_workload(a.pairs, false),
        "many" => return contended_workload(a.pairs, true),
        _ => {}
    }
    let m = BENCH_LOCK.0.get();
    let n = a.pairs.max(1);
    let mut v: Vec<f64> = (0..7)
        .map(|_| {
            let t = std::time::Instant::now();
            for _ in 0..n {
                // SAFETY: a statically initialized mutex, locked and unlocked by this thread.
                unsafe {
                    libc::pthread_mutex_lock(m);
                    libc::pthread_mutex_unlock(m);
                }
            }
            t.elapsed().as_nanos() as f64 / n as f64
        })
        .collect();
    v.sort_by(f64::total_cmp);
    println!("{:.3}", v[3]);
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// `lockmeter overhead`.
pub(crate) fn overhead(a: OverheadArgs) -> Result<()> {
    if a.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    let lib = find_preload()?;
    let exe = std::env::current_exe()?;
    let dir = std::env::temp_dir().join(format!("lockmeter-overhead-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let command: Vec<OsString> = vec![
        exe.into_os_string(),
        "__overhead-workload".into(),
        "--pairs".into(),
        a.pairs.to_string().into(),
    ];
    let sample = format!("sample:{}", a.sample.max(2));
    let mode = |v: &str| Some(CollectorArgs::with(&[(&settings::HOLD, v)]));
    let modes: [(&str, Option<CollectorArgs>); 4] = [
        ("raw (no preload)", None),
        ("hold timing off", mode("off")),
        ("hold timing sample:N", mode(&sample)),
        ("hold timing on", mode("on")),
    ];
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut added: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for round in 0..a.rounds {
        eprint!("\rlockmeter overhead: round {}/{}", round + 1, a.rounds);
        let mut raw = f64::NAN;
        for (i, (_, hold)) in modes.iter().enumerate() {
            let mut cmd = match hold {
                None => {
                    let mut c = Command::new(&command[0]);
                    c.args(&command[1..]);
                    c
                }
                Some(h) => {
                    metered_command(&command, &lib, &dir.join(format!("r{round}-{i}.lmp")), h)?
                }
            };
            let out = cmd.output().context("cannot run the overhead workload")?;
            if !out.status.success() {
                bail!(
                    "the overhead workload failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            let ns: f64 = String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse()
                .context("bad workload output")?;
            if hold.is_none() {
                raw = ns;
            }
            results[i].push(ns);
            added[i].push(ns - raw);
        }
    }
    eprintln!();
    let _ = std::fs::remove_dir_all(&dir);
    let rows: Vec<(String, f64, f64, f64, f64)> = modes
        .iter()
        .enumerate()
        .map(|(i, (name, _))| {
            let name = name.replace('N', &a.sample.max(2).to_string());
            let lo = results[i].iter().copied().fold(f64::INFINITY, f64::min);
            let hi = results[i].iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (name, median(&mut results[i].clone()), lo, hi, median(&mut added[i].clone()))
        })
        .collect();
    if a.json {
        let items: Vec<String> = rows
            .iter()
            .map(|(n, m, lo, hi, add)| {
                format!(
                    "{{\"mode\":\"{n}\",\"ns_per_pair_median\":{m:.3},\"ns_per_pair_min\":{lo:.3},\"ns_per_pair_max\":{hi:.3},\"added_ns_median\":{add:.3}}}"
                )
            })
            .collect();
        println!(
            "{{\"rounds\":{},\"pairs\":{},\"modes\":[{}]}}",
            a.rounds,
            a.pairs,
            items.join(",")
        );
        return Ok(());
    }
    println!(
        "uncontended pthread_mutex lock+unlock, {} pairs x 7 batches, {} interleaved rounds",
        a.pairs, a.rounds
    );
    println!("{:<24} {:>12} {:>18} {:>14}", "MODE", "NS/PAIR", "SPREAD (min-max)", "ADDED NS");
    for (n, m, lo, hi, add) in &rows {
        println!(
            "{n:<24} {m:>12.1} {:>18} {:>14}",
            format!("{lo:.1}-{hi:.1}"),
            if n.starts_with("raw") { "-".to_string() } else { format!("+{add:.1}") }
        );
    }
    let spread = rows.iter().any(|(_, m, lo, hi, _)| (hi - lo) > 0.25 * m);
    if spread {
        println!(
            "warning: rounds disagree by more than 25%: the machine is noisy; rerun with more --rounds"
        );
    }
    for kind in a.contended.iter().filter(|k| *k != "none") {
        contended(kind, &a, &lib, &modes)?;
    }
    Ok(())
}

/// Whether `perf lock record` can run here (root and perf installed).
fn perf_lock_available() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    root && Command::new("perf").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// One contended workload: wall time bare, under each mode (with the profile's own estimate of
/// the profiler's share of the run) and under `perf lock record`, interleaved, medians.
fn contended(
    kind: &str,
    a: &OverheadArgs,
    lib: &std::path::Path,
    modes: &[(&str, Option<CollectorArgs>)],
) -> Result<()> {
    let exe = std::env::current_exe()?;
    let dir =
        std::env::temp_dir().join(format!("lockmeter-overhead-{}-{kind}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let command: Vec<OsString> = vec![
        exe.into_os_string(),
        "__overhead-workload".into(),
        "--kind".into(),
        kind.into(),
        "--pairs".into(),
        a.contended_pairs.to_string().into(),
    ];
    let with_perf = perf_lock_available();
    let n = modes.len() + usize::from(with_perf);
    let mut wall: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut estimate: Vec<Vec<f64>> = vec![Vec::new(); n];
    for round in 0..a.rounds {
        eprint!("\rlockmeter overhead: {kind}, round {}/{}", round + 1, a.rounds);
        for i in 0..n {
            let out_path = dir.join(format!("{kind}-{round}-{i}.lmp"));
            let mut cmd = match modes.get(i) {
                Some((_, None)) => {
                    let mut c = Command::new(&command[0]);
                    c.args(&command[1..]);
                    c
                }
                Some((_, Some(h))) => metered_command(&command, lib, &out_path, h)?,
                None => {
                    let mut c = Command::new("perf");
                    c.args(["lock", "record", "-q", "-o"]).arg(dir.join("perf.data")).arg("--");
                    c.args(&command);
                    c
                }
            };
            let out = cmd.output().context("cannot run the overhead workload")?;
            if !out.status.success() {
                bail!(
                    "the {kind} workload failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                );
            }
            let ns: f64 = String::from_utf8_lossy(&out.stdout)
                .lines()
                .last()
                .unwrap_or("")
                .trim()
                .parse()
                .context("bad workload output")?;
            wall[i].push(ns);
            if let Ok(p) = lockmeter_format::read_profile_file(&out_path)
                && let Some(x) = p.overhead.estimated_slowdown()
            {
                estimate[i].push(x);
            }
        }
    }
    eprintln!();
    let _ = std::fs::remove_dir_all(&dir);
    let bare = median(&mut wall[0].clone());
    let what = if kind == "hot" { "one mutex" } else { "4096 mutexes picked at random" };
    println!();
    println!(
        "contended: 4 threads x {} lock+unlock pairs on {what}, wall time, {} interleaved rounds",
        a.contended_pairs, a.rounds
    );
    println!("{:<24} {:>12} {:>10} {:>22}", "MODE", "WALL MS", "SLOWDOWN", "ESTIMATED SLOWDOWN");
    for i in 0..n {
        let name = match modes.get(i) {
            Some((name, _)) => name.replace('N', &a.sample.max(2).to_string()),
            None => "perf lock record".to_string(),
        };
        let w = median(&mut wall[i].clone());
        let est = if estimate[i].is_empty() {
            "-".to_string()
        } else {
            format!("{:.2}x", median(&mut estimate[i].clone()))
        };
        let slow = if i == 0 { "-".to_string() } else { format!("{:.2}x", w / bare) };
        println!("{name:<24} {:>12.1} {slow:>10} {est:>22}", w / 1e6);
    }
    if !with_perf {
        println!("(perf lock record: not run; it needs root and perf)");
    }
    Ok(())
}

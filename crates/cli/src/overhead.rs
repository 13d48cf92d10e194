//! `lockmeter overhead`: what the collector adds to an uncontended lock+unlock pair.
//!
//! Runs a bundled workload (this binary, hidden subcommand: one thread, one static pthread mutex,
//! lock+unlock pairs called through the PLT like any program's) without the preload and with it in
//! each hold-timing mode, interleaved round by round so that the machine's drift hits all modes
//! alike. Reports the median ns per pair of each mode, its spread, and the median added cost.
//!
//! Then the same pair timed alone after the caches were evicted (`cold.rs`): what a program that
//! evicts the collector's lines between two lock calls pays.
//!
//! Then contended workloads (one hot mutex, many mutexes; 4 threads; a real program: sysbench
//! mutex or the command after `--`): wall time bare, under each mode, and under `perf lock record`
//! and `mutrace` where they can run, beside the profile's own estimate of the slowdown
//! (`overhead.estimated_slowdown`), so that it can be checked against the measured one
//! (`contended.rs`).

mod cold;
mod contended;

use crate::run::{find_preload, metered_command};
use crate::settings_args::CollectorArgs;
use anyhow::{Context, Result, bail};
use contended::{Setup, median};
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
    /// Cold pairs per measurement: each one timed alone after --cold-mib MiB of data and 64 KiB
    /// of code were touched.
    #[arg(long, default_value_t = 300, value_name = "N")]
    cold_pairs: u64,
    /// MiB of data written (one byte per cache line) before each cold pair; 0: skip the cold
    /// pair.
    #[arg(long, default_value_t = 16, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=65536))]
    cold_mib: u64,
    /// Print JSON instead of a table (the uncontended and cold pairs only).
    #[arg(long)]
    json: bool,
    /// Contended workloads to run after the uncontended pair: hot (4 threads, one mutex), many (4
    /// threads, 4096 mutexes), real (the command after --, else sysbench mutex when installed);
    /// none: skip them.
    #[arg(long, value_delimiter = ',', default_value = "hot,many,real", value_parser = ["hot", "many", "real", "none"])]
    contended: Vec<String>,
    /// Acquisitions per thread in the hot and many workloads.
    #[arg(long, default_value_t = 1_000_000, value_name = "N")]
    contended_pairs: u64,
    /// The real program to measure, instead of `sysbench mutex --threads=4 --mutex-num=4096
    /// --mutex-locks=100000 run`: wall time of the whole command, its output discarded; measured
    /// even when --contended does not list real.
    #[arg(last = true, value_name = "PROGRAM")]
    program: Vec<OsString>,
}

/// Options of the workload.
#[derive(Debug, clap::Args)]
pub(crate) struct OverheadWorkloadArgs {
    #[arg(long, default_value_t = 2_000_000)]
    pairs: u64,
    /// uncontended (one thread, ns per pair), cold (one thread, median ns of a pair timed alone
    /// after evicting the caches), hot (4 threads, one mutex, wall ns) or many (4 threads, 4096
    /// mutexes picked at random, wall ns).
    #[arg(long, default_value = "uncontended")]
    kind: String,
    /// MiB of data the cold workload writes before each pair.
    #[arg(long, default_value_t = 16)]
    cold_mib: u64,
}

/// 4096 mutexes for the `many` workload.
struct Mutexes(UnsafeCell<[libc::pthread_mutex_t; MANY]>);
// SAFETY: as `Mutex`.
unsafe impl Sync for Mutexes {}
const MANY: usize = 4096;
static MANY_LOCKS: Mutexes = Mutexes(UnsafeCell::new([libc::PTHREAD_MUTEX_INITIALIZER; MANY]));

/// A contended workload: 4 threads x `pairs` lock+unlock pairs, on one mutex or on 4096 picked
/// at random, the threads let go together (a spin barrier: no lock of its own); prints the wall
/// time in ns from their start. Without the barrier each thread's pairs (a few ms bare) ran
/// mostly before the next thread was created or not, by chance: the bare run took 26 to 96 ms
/// from one run to the next, the threads overlapping or not.
fn contended_workload(pairs: u64, many: bool) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    const THREADS: usize = 4;
    let ready = AtomicUsize::new(0);
    let t = std::time::Instant::now();
    std::thread::scope(|s| {
        for seed in 1..=THREADS as u64 {
            let ready = &ready;
            s.spawn(move || {
                ready.fetch_add(1, Ordering::AcqRel);
                while ready.load(Ordering::Acquire) < THREADS {
                    std::thread::yield_now();
                }
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
        "cold" => {
            if let Err(e) = cold::workload(a.pairs, a.cold_mib) {
                eprintln!("{e}");
                std::process::exit(2);
            }
            return;
        }
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

/// One row of a pair's table: the mode, its median ns per pair over the rounds, the lowest and
/// highest, and the median of what it added to the raw pair of the same round.
type PairRow = (String, f64, f64, f64, f64);

/// Where and how the pairs are measured: the collector's modes, the preload, the profiles' folder.
struct Modes<'a> {
    rounds: usize,
    modes: &'a [(String, Option<CollectorArgs>)],
    lib: &'a std::path::Path,
    dir: &'a std::path::Path,
}

impl Modes<'_> {
    /// Runs `command` (a workload that prints its ns per pair) in every mode, interleaved round by
    /// round, `name` naming the progress lines and the profiles.
    fn measure(&self, name: &str, command: &[OsString]) -> Result<Vec<PairRow>> {
        let mut results: Vec<Vec<f64>> = vec![Vec::new(); self.modes.len()];
        let mut added: Vec<Vec<f64>> = vec![Vec::new(); self.modes.len()];
        for round in 0..self.rounds {
            eprintln!("lockmeter overhead: {name}, round {}/{}", round + 1, self.rounds);
            let mut raw = f64::NAN;
            for (i, (_, hold)) in self.modes.iter().enumerate() {
                let mut cmd = match hold {
                    None => {
                        let mut c = Command::new(&command[0]);
                        c.args(&command[1..]);
                        c
                    }
                    Some(h) => {
                        let profile = self.dir.join(format!("{name}-r{round}-{i}.lmp"));
                        metered_command(command, self.lib, &profile, h)?
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
        Ok(self
            .modes
            .iter()
            .enumerate()
            .map(|(i, (name, _))| {
                let name = name.clone();
                let lo = results[i].iter().copied().fold(f64::INFINITY, f64::min);
                let hi = results[i].iter().copied().fold(f64::NEG_INFINITY, f64::max);
                (name, median(&mut results[i].clone()), lo, hi, median(&mut added[i].clone()))
            })
            .collect())
    }
}

/// The JSON array of a pair's rows.
fn json_rows(rows: &[PairRow]) -> String {
    let items: Vec<String> = rows
        .iter()
        .map(|(n, m, lo, hi, add)| {
            format!(
                "{{\"mode\":\"{n}\",\"ns_per_pair_median\":{m:.3},\"ns_per_pair_min\":{lo:.3},\"ns_per_pair_max\":{hi:.3},\"added_ns_median\":{add:.3}}}"
            )
        })
        .collect();
    format!("[{}]", items.join(","))
}

/// A pair's table under its `title` line, and a warning when the rounds disagree.
fn print_table(title: &str, rows: &[PairRow]) {
    println!("{title}");
    println!("{:<24} {:>12} {:>18} {:>14}", "MODE", "NS/PAIR", "SPREAD (min-max)", "ADDED NS");
    for (n, m, lo, hi, add) in rows {
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
}

/// `lockmeter overhead`.
pub(crate) fn overhead(a: OverheadArgs) -> Result<()> {
    if a.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    if a.cold_pairs == 0 && a.cold_mib > 0 {
        bail!("--cold-pairs must be at least 1 (--cold-mib 0 skips the cold pair)");
    }
    if a.json && !a.program.is_empty() {
        bail!(
            "--json covers the uncontended and cold pairs only: drop --json to measure the program"
        );
    }
    // Before anything runs, so that a missing program fails at once.
    let workloads = if a.json {
        Vec::new()
    } else {
        contended::plan(&a.contended, &a.program, contended::on_path("sysbench"))?
    };
    let lib = find_preload()?;
    let exe = std::env::current_exe()?;
    let dir = std::env::temp_dir().join(format!("lockmeter-overhead-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let command: Vec<OsString> = vec![
        exe.clone().into_os_string(),
        "__overhead-workload".into(),
        "--pairs".into(),
        a.pairs.to_string().into(),
    ];
    let sample = format!("sample:{}", a.sample.max(2));
    let mode = |v: &str| Some(CollectorArgs::with(&[(&settings::HOLD, v)]));
    let modes: Vec<(String, Option<CollectorArgs>)> = vec![
        ("raw (no preload)".to_string(), None),
        ("hold timing off".to_string(), mode("off")),
        (format!("hold timing {sample}"), mode(&sample)),
        ("hold timing on".to_string(), mode("on")),
    ];
    let pairs = Modes { rounds: a.rounds, modes: &modes, lib: &lib, dir: &dir };
    let measured = pairs.measure("uncontended", &command).and_then(|rows| {
        if a.cold_mib == 0 {
            return Ok((rows, Vec::new()));
        }
        let cold: Vec<OsString> = vec![
            exe.into_os_string(),
            "__overhead-workload".into(),
            "--kind".into(),
            "cold".into(),
            "--pairs".into(),
            a.cold_pairs.to_string().into(),
            "--cold-mib".into(),
            a.cold_mib.to_string().into(),
        ];
        Ok((rows, pairs.measure("cold", &cold)?))
    });
    let _ = std::fs::remove_dir_all(&dir);
    let (rows, cold) = measured?;
    if a.json {
        println!(
            "{{\"rounds\":{},\"pairs\":{},\"modes\":{},\"cold_pairs\":{},\"cold_mib\":{},\"cold\":{}}}",
            a.rounds,
            a.pairs,
            json_rows(&rows),
            a.cold_pairs,
            a.cold_mib,
            json_rows(&cold)
        );
        return Ok(());
    }
    let title = format!(
        "uncontended pthread_mutex lock+unlock, {} pairs x 7 batches, {} interleaved rounds",
        a.pairs, a.rounds
    );
    print_table(&title, &rows);
    if !cold.is_empty() {
        let title = format!(
            "cold pthread_mutex lock+unlock ({} MiB of data and {} touched before each pair), {} \
             pairs, {} interleaved rounds",
            a.cold_mib,
            if cfg!(target_arch = "x86_64") { "64 KiB of code" } else { "no code" },
            a.cold_pairs,
            a.rounds
        );
        println!();
        print_table(&title, &cold);
    }
    let setup = Setup { rounds: a.rounds, pairs: a.contended_pairs, lib: &lib, modes: &modes };
    for w in &workloads {
        contended::measure(w, &setup)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: OverheadArgs,
    }

    fn parse(args: &[&str]) -> Result<OverheadArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("overhead").chain(args.iter().copied())).map(|c| c.a)
    }

    #[test]
    fn arguments() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.contended, ["hot", "many", "real"]);
        assert!(a.program.is_empty());
        let a =
            parse(&["--rounds", "1", "--contended", "real", "--", "prog", "-x", "--y"]).unwrap();
        assert_eq!((a.rounds, &a.contended[..]), (1, &["real".to_string()][..]));
        assert_eq!(a.program, ["prog", "-x", "--y"]);
        assert_eq!(parse(&["--contended", "hot,many"]).unwrap().contended, ["hot", "many"]);
        assert!(parse(&["--contended", "cold"]).is_err());
        // The program comes after --, never as a stray positional argument.
        assert!(parse(&["prog"]).is_err());
    }

    #[test]
    fn cold_arguments() {
        let a = parse(&[]).unwrap();
        assert_eq!((a.cold_pairs, a.cold_mib), (300, 16));
        let a = parse(&["--cold-pairs", "20", "--cold-mib", "1"]).unwrap();
        assert_eq!((a.cold_pairs, a.cold_mib), (20, 1));
        assert_eq!(parse(&["--cold-mib", "0"]).unwrap().cold_mib, 0);
        assert_eq!(parse(&["--cold-mib", "65536"]).unwrap().cold_mib, 65536);
        assert!(parse(&["--cold-mib", "65537"]).is_err());
        assert!(parse(&["--cold-mib", "-1"]).is_err());
        assert!(parse(&["--cold-pairs", "x"]).is_err());
    }

    #[derive(Parser)]
    struct WorkloadCli {
        #[command(flatten)]
        a: OverheadWorkloadArgs,
    }

    #[test]
    fn workload_arguments() {
        let w = |args: &[&str]| {
            WorkloadCli::try_parse_from(std::iter::once("w").chain(args.iter().copied()))
                .map(|c| c.a)
        };
        let a = w(&[]).unwrap();
        assert_eq!((a.kind.as_str(), a.pairs, a.cold_mib), ("uncontended", 2_000_000, 16));
        let a = w(&["--kind", "cold", "--pairs", "20", "--cold-mib", "1"]).unwrap();
        assert_eq!((a.kind.as_str(), a.pairs, a.cold_mib), ("cold", 20, 1));
    }
}

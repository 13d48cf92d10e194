//! `lockmeter demo`: a bundled multithreaded program with a hot and a cold lock, run under
//! `lockmeter run`. It needs no compiler: the workload is this binary itself (a hidden
//! subcommand), which takes real `pthread` locks through libc, so the preload meters it like any
//! other program.

use anyhow::Result;
use std::cell::UnsafeCell;
use std::ffi::OsString;
use std::hint::black_box;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `lockmeter demo`.
#[derive(Debug, clap::Args)]
pub(crate) struct DemoArgs {
    /// Worker threads (default: 2 x CPUs, at least 4).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Iterations per worker.
    #[arg(long, default_value_t = 100_000, value_name = "N")]
    iterations: u64,
    /// Profile file to write (default: lockmeter-demo-N.lmp in the current directory).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Do not print the report.
    #[arg(short, long)]
    quiet: bool,
}

/// Options of the workload.
#[derive(Debug, clap::Args)]
pub(crate) struct WorkloadArgs {
    #[arg(long, default_value_t = 4)]
    threads: usize,
    #[arg(long, default_value_t = 100_000)]
    iterations: u64,
}

/// A pthread mutex in static storage (so that the report can name it by its symbol).
struct Mutex(UnsafeCell<libc::pthread_mutex_t>);
// SAFETY: a pthread mutex is made to be shared between threads; we only pass its address to libc.
unsafe impl Sync for Mutex {}

/// A pthread rwlock in static storage.
struct RwLock(UnsafeCell<libc::pthread_rwlock_t>);
// SAFETY: as for Mutex.
unsafe impl Sync for RwLock {}

/// The hot lock: every worker takes it on every iteration and holds it while it works.
static WORK_QUEUE_LOCK: Mutex = Mutex(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
/// The cold lock: taken now and then, briefly.
static STATS_LOCK: Mutex = Mutex(UnsafeCell::new(libc::PTHREAD_MUTEX_INITIALIZER));
/// A read-mostly configuration lock.
static CONFIG_LOCK: RwLock = RwLock(UnsafeCell::new(libc::PTHREAD_RWLOCK_INITIALIZER));

#[inline(never)]
fn spin_work(n: u64) -> u64 {
    let mut x = 0x9e37_79b9_u64;
    for i in 0..n {
        x = black_box(x.rotate_left(5) ^ i);
    }
    x
}

#[inline(never)]
fn take_work_item(me: u64) -> u64 {
    let m = WORK_QUEUE_LOCK.0.get();
    // SAFETY: a statically initialized mutex, locked and unlocked by this thread.
    unsafe { libc::pthread_mutex_lock(m) };
    let r = spin_work(300 + (me & 1) * 200);
    // SAFETY: as above.
    unsafe { libc::pthread_mutex_unlock(m) };
    r
}

#[inline(never)]
fn update_stats(v: u64) -> u64 {
    let m = STATS_LOCK.0.get();
    // SAFETY: as above.
    unsafe { libc::pthread_mutex_lock(m) };
    let r = spin_work(20) ^ v;
    // SAFETY: as above.
    unsafe { libc::pthread_mutex_unlock(m) };
    r
}

#[inline(never)]
fn read_config() -> u64 {
    let l = CONFIG_LOCK.0.get();
    // SAFETY: a statically initialized rwlock, read-locked and unlocked by this thread.
    unsafe { libc::pthread_rwlock_rdlock(l) };
    let r = spin_work(30);
    // SAFETY: as above.
    unsafe { libc::pthread_rwlock_unlock(l) };
    r
}

#[inline(never)]
fn reload_config() -> u64 {
    let l = CONFIG_LOCK.0.get();
    // SAFETY: as above, write-locked.
    unsafe { libc::pthread_rwlock_wrlock(l) };
    let r = spin_work(2000);
    // SAFETY: as above.
    unsafe { libc::pthread_rwlock_unlock(l) };
    r
}

fn worker(me: u64, iterations: u64) -> u64 {
    let mut acc = 0;
    for i in 0..iterations {
        acc ^= take_work_item(me);
        acc ^= spin_work(400);
        if i % 64 == 0 {
            acc ^= update_stats(acc);
        }
        if i % 16 == 0 {
            acc ^= read_config();
        }
        if me == 0 && i % 4096 == 0 {
            acc ^= reload_config();
        }
    }
    acc
}

/// The workload (hidden subcommand).
pub(crate) fn workload(a: WorkloadArgs) {
    let handles: Vec<_> = (0..a.threads.max(1) as u64)
        .map(|me| {
            std::thread::Builder::new()
                .name(format!("worker-{me}"))
                .spawn(move || worker(me, a.iterations))
                .expect("cannot spawn a demo thread")
        })
        .collect();
    let acc = handles.into_iter().fold(0, |acc, h| acc ^ h.join().unwrap_or(0));
    black_box(acc);
}

/// `lockmeter demo`.
pub(crate) fn demo(a: DemoArgs) -> Result<ExitCode> {
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    let threads = a.threads.unwrap_or((2 * cpus).max(4));
    let exe = std::env::current_exe()?;
    let command: Vec<OsString> = vec![
        exe.into_os_string(),
        "__demo-workload".into(),
        "--threads".into(),
        threads.to_string().into(),
        "--iterations".into(),
        a.iterations.to_string().into(),
    ];
    let output = a.output.unwrap_or_else(|| crate::run::default_output("lockmeter-demo"));
    eprintln!(
        "lockmeter demo: {threads} threads x {} iterations; a hot lock (WORK_QUEUE_LOCK), a cold one (STATS_LOCK) and a read-mostly rwlock (CONFIG_LOCK)",
        a.iterations
    );
    let args = crate::run::RunArgs {
        output: None,
        quiet: a.quiet,
        collector: crate::settings_args::CollectorArgs::default(),
        top: 10,
        lock_filter: None,
        kernel: false,
        pprof_dir: None,
        program: crate::run::Program { command: command.clone() },
    };
    let ran = crate::run::run_metered(&command, &output, &args)?;
    let code = crate::run::finish(&command[..1], &ran, a.quiet, 10)?;
    Ok(code)
}

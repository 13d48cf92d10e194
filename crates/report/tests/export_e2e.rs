//! End to end: a real C program metered by the LD_PRELOAD collector, then every export of its
//! profile read back (folded stacks, pprof, `go tool pprof -top`, CSV, figures, diff).

mod export_common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use export_common::go_pprof_top;
use lockmeter_format::model::*;
use lockmeter_report::export::Weight;
use lockmeter_report::export::diff::{self, DiffOptions, Status};
use lockmeter_report::export::flame;
use lockmeter_report::export::plot::{self, PlotOptions};
use lockmeter_report::export::pprof;
use lockmeter_report::{Analysis, ElfSymbolizer, SymbolizeOptions};

const PROGRAM: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile long counter, stats;
static long work, nap;
static pthread_barrier_t start;

__attribute__((noinline)) void spin(long n) {
    for (volatile long i = 0; i < n; i++) {
    }
}

/* Sleeping now and then with the lock held makes the others wait, however few CPUs there are. */
__attribute__((noinline)) void push_job(long i) {
    pthread_mutex_lock(&queue_lock);
    counter++;
    spin(work);
    if (nap && i % nap == 0) usleep(20);
    pthread_mutex_unlock(&queue_lock);
}

__attribute__((noinline)) void update_stats(void) {
    pthread_mutex_lock(&stats_lock);
    stats++;
    pthread_mutex_unlock(&stats_lock);
}

__attribute__((noinline)) void *producer(void *arg) {
    long n = (long)arg;
    pthread_barrier_wait(&start);
    for (long i = 0; i < n; i++) {
        push_job(i);
        if (i % 16 == 0) update_stats();
    }
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    long iters = argc > 2 ? atol(argv[2]) : 20000;
    work = argc > 3 ? atol(argv[3]) : 100;
    nap = argc > 4 ? atol(argv[4]) : 32;
    pthread_t th[64];
    pthread_barrier_init(&start, NULL, threads);
    for (int t = 0; t < threads; t++) pthread_create(&th[t], NULL, producer, (void *)iters);
    for (int t = 0; t < threads; t++) pthread_join(th[t], NULL);
    printf("%ld\n", counter);
    return counter == threads * iters ? 0 : 1;
}
"#;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).ancestors().nth(2).unwrap().to_path_buf()
}

fn tmpdir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("lockmeter-export-e2e");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Builds the collector once (release, like `lockmeter run` uses it); `None` when it cannot be
/// built here.
fn preload() -> Option<&'static Path> {
    static SO: OnceLock<Option<PathBuf>> = OnceLock::new();
    SO.get_or_init(|| {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "--release", "-p", "lockmeter-preload"])
            .current_dir(workspace())
            .status()
            .ok()?;
        if !status.success() {
            eprintln!("skipped: cannot build lockmeter-preload");
            return None;
        }
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .map(|t| if t.is_relative() { workspace().join(t) } else { t })
            .unwrap_or_else(|| workspace().join("target"));
        let so = target.join("release/liblockmeter_preload.so");
        so.exists().then_some(so)
    })
    .as_deref()
}

/// Compiles the program once; `None` without a C compiler.
fn program() -> Option<&'static Path> {
    static EXE: OnceLock<Option<PathBuf>> = OnceLock::new();
    EXE.get_or_init(|| {
        let dir = tmpdir();
        let src = dir.join("queue.c");
        std::fs::write(&src, PROGRAM).unwrap();
        let exe = dir.join("queue");
        let ok = Command::new("gcc")
            .args(["-O2", "-g", "-pthread", "-o"])
            .arg(&exe)
            .arg(&src)
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("skipped: gcc cannot build the test program");
        }
        ok.then_some(exe)
    })
    .as_deref()
}

/// Runs the program under the collector; returns its profile.
fn metered(name: &str, args: &[&str]) -> Option<(PathBuf, Profile)> {
    let (so, exe) = (preload()?, program()?);
    let out = tmpdir().join(format!("{name}.lmp"));
    let _ = std::fs::remove_file(&out);
    let status = Command::new(exe)
        .args(args)
        .env("LD_PRELOAD", so)
        .env("LOCKMETER_OUTPUT", &out)
        .status()
        .unwrap();
    assert!(status.success(), "{name}: {status}");
    let p = lockmeter_format::read_profile_file(&out).unwrap();
    Some((out, p))
}

#[test]
fn real_program_exports() {
    let Some((before_file, before)) = metered("before", &["4", "5000", "100", "32"]) else {
        return;
    };
    let contended: Vec<&Event> =
        before.events.iter().filter(|e| e.kind == EventKind::Contended).collect();
    assert!(!contended.is_empty(), "no contention recorded");

    // Folded: queue_lock's tower, the call site push_job on top of producer; exact sum.
    let mut sym = ElfSymbolizer::new(&before.maps);
    let lines = flame::folded(&before, &mut sym, Weight::Wait, None);
    let sum: u64 = lines.iter().map(|l| l.weight).sum();
    assert_eq!(sum, contended.iter().map(|e| e.wait_ns).sum::<u64>());
    let hot = lines.iter().max_by_key(|l| l.weight).unwrap();
    assert_eq!(hot.frames[0], "queue_lock", "{hot}");
    assert!(hot.frames.last().unwrap().starts_with("push_job+0x"), "{hot}");
    assert!(hot.frames.iter().any(|f| f.starts_with("producer+0x")), "{hot}");
    let c = flame::folded(&before, &mut sym, Weight::Contentions, None);
    assert_eq!(
        c.iter().map(|l| l.weight).sum::<u64>(),
        contended.iter().map(|e| e.count).sum::<u64>()
    );

    // The flame graph draws.
    let mut svg = Vec::new();
    flame::flamegraph(&before, &mut sym, &Default::default(), &mut svg).unwrap();
    let svg = String::from_utf8(svg).unwrap();
    let opts = roxmltree::ParsingOptions { allow_dtd: true, ..Default::default() };
    roxmltree::Document::parse_with_options(&svg, opts).unwrap();
    assert!(svg.contains("push_job+0x"));

    // pprof reads back with the same totals and function names.
    let pb = pprof::build(&before, &mut sym);
    let mut gz = Vec::new();
    pprof::write(&pb, true, &mut gz).unwrap();
    let back = pprof::read(&gz).unwrap();
    assert_eq!(back, pb);
    let analysis = Analysis::with_symbolizer(&before, &mut sym);
    let samples = analysis.stack_samples(EventKind::Contended);
    assert_eq!(back.sample.len(), samples.len());
    assert_eq!(
        back.sample.iter().map(|s| s.value[1]).sum::<i64>() as u64,
        contended.iter().map(|e| e.wait_ns).sum::<u64>()
    );
    let names: Vec<&str> = back.function.iter().map(|f| back.string(f.name)).collect();
    assert!(names.contains(&"push_job") && names.contains(&"producer"), "{names:?}");
    let file = tmpdir().join("before.pb.gz");
    std::fs::write(&file, &gz).unwrap();
    if let Some(top) = go_pprof_top(&file, &[]) {
        assert!(top.contains("push_job"), "{top}");
        assert!(top.contains("producer"), "{top}");
    }

    // CSV: a row per sample.
    let mut csv = Vec::new();
    pprof::write_csv(&before, &mut sym, &mut csv).unwrap();
    let rows = csv::Reader::from_reader(&csv[..]).records().count();
    assert_eq!(rows, samples.len());

    // Figures.
    let a = Analysis::new(&before, &SymbolizeOptions::default());
    let svg = plot::plot_svg(&a, &PlotOptions::default()).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    assert!(
        doc.descendants().any(|n| n.text().is_some_and(|t| t.trim().starts_with("queue_lock: ")))
    );
    let png = plot::svg_to_png(&svg);
    if let Ok(png) = png {
        assert_eq!(&png[1..4], b"PNG");
    }

    // Diff against one thread (no contention at all): queue_lock's wait is entirely gone.
    let Some((after_file, after)) = metered("after", &["1", "5000", "100", "32"]) else { return };
    let b = Analysis::new(&before, &SymbolizeOptions::default());
    let aa = Analysis::new(&after, &SymbolizeOptions::default());
    let d = diff::diff(
        &before_file.display().to_string(),
        &b,
        &after_file.display().to_string(),
        &aa,
        &DiffOptions::default(),
    );
    let q = d.rows.iter().find(|r| r.lock == "queue_lock").expect("queue_lock matched");
    assert_eq!(q.status, Status::Both);
    let (qb, qa) = (q.before.as_ref().unwrap(), q.after.as_ref().unwrap());
    assert_eq!(qb.acquisitions, 20_000);
    assert_eq!(qa.acquisitions, 5_000);
    assert_eq!(qa.contended, 0);
    assert_eq!(q.change.wait_ns, -(qb.wait_ns_total as i64));
    assert_eq!(d.rows[0].lock, "queue_lock", "largest change first");
    assert!(d.rows.iter().any(|r| r.lock == "stats_lock"));
}

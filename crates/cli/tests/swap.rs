//! End-to-end tests of lock swapping (`lockmeter run --lock ALGO`): the program's default pthread
//! mutexes and their condvars run on a lab algorithm, metered as usual, and the program behaves
//! as it does on glibc's.
//!
//! Ground-truth programs (`tests/programs/`): swap_counter.c (T threads x N lock/unlock on M
//! mutexes, a counter incremented under each: the profile's acquisitions and the counters are
//! exact; one recursive and one error-checking mutex stay glibc's and the profile's note counts
//! them), swap_pc.c (producer/consumer on condvars, timed waits and locks, trylocks, fork),
//! swap_early.c + swap_early_lib.c (a mutex locked through glibc by a library constructor, before
//! swapping began, stays glibc's; the note counts it), swap_rw.c (`--rwlock qrwlock`: readers
//! and writers exclude, exact read and write counts, timeouts, a process-shared rwlock kept),
//! swap_sites.c (`--lock-filter FILE:LINE`: two mutexes at two known lines; the program reads
//! glibc's owner field to tell which one glibc runs).
//! `compare` runs swap_counter.c. sysbench's mutex benchmark, unmodified, is exact under every
//! algorithm (skipped, with the reason printed, when sysbench is missing).
//! memcached under memcaslap runs under `mcs` and `adaptive` (skipped, with the reason printed,
//! when either program is missing).
//!
//! Needs gcc. Run with `cargo test -p lockmeter --test swap`.

mod common;

use common::*;
use std::io::{BufRead, Write};

/// Every algorithm `--lock` takes besides `pthread`.
const ALGOS: [&str; 10] =
    ["tas", "ttas", "ticket", "mcs", "mcs:park", "futex", "adaptive", "clh", "qspin", "unfair-q"];

/// The notes of every process of the run file, each without its process (`swap_pc[42]: `, when
/// a forked child took locks too).
fn notes(p: &Profile) -> Vec<String> {
    p.json["notes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n.as_str())
        .map(|n| n.split_once("]: ").map_or(n, |(_, note)| note).to_owned())
        .collect()
}

#[test]
fn every_algorithm_keeps_mutual_exclusion_and_exact_counts() {
    let s = Scratch::new("swap-counter");
    let exe = s.compile("swap_counter");
    // Small enough for spin locks on an oversubscribed 2-core machine.
    let (t, n, m) = (3u64, 5000u64, 4u64);
    for algo in ALGOS {
        let out = format!("{}.lmp", algo.replace(':', "-"));
        let args = [t.to_string(), n.to_string(), m.to_string()];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let ran = run_metered(&s, &out, &["--lock", algo], &exe, &args);
        ran.expect_code(0);
        let want_acq = t * n + 2 * t;
        assert!(
            ran.stdout.contains(&format!("acquisitions {want_acq}\n"))
                && ran.stdout.contains(&format!("counted {} expected {}\n", t * n, t * n)),
            "{algo}: the program's own totals\n{ran}"
        );
        let p = Profile::load(&s.path(&out), &ran);
        p.check_consistency();
        p.expect_nothing_dropped();
        p.eq(format!("{algo}: totals.acquisitions"), p.totals("acquisitions"), want_acq);
        for k in 0..m {
            p.expect_lock(&elem("swap_locks", k, MUTEX_SIZE), "mutex", t * n / m);
        }
        p.expect_lock("swap_rec", "mutex", t);
        p.expect_lock("swap_ec", "mutex", t);
        let want = format!(
            "lock swapping: {m} mutexes ran on {algo}; 2 kept glibc's implementation (1 recursive, 1 error-checking)"
        );
        p.check(notes(&p).contains(&want), format!("{algo}: note `{want}`"));
    }
}

/// sysbench's mutex benchmark, unmodified, under every algorithm: its own event count times
/// `--mutex-locks` acquisitions of its mutex array (plus sysbench's own few start-up locks), and
/// every one of its 64 mutexes swapped.
#[test]
fn sysbench_mutex_is_exact_under_every_algorithm() {
    let s = Scratch::new("swap-sysbench");
    let args = ["--mutex-num=64", "--mutex-loops=10", "--threads=2"];
    for algo in ALGOS {
        let out = format!("sb-{}.lmp", algo.replace(':', "-"));
        let Some(p) = sysbench_mutex_exact(&s, &out, &["--lock", algo], &args, 2_000) else {
            return;
        };
        let swapped = notes(&p).iter().find_map(|n| {
            let rest = n.strip_prefix("lock swapping: ")?;
            rest.split_once(" mutexes ran on ")?.0.parse::<u64>().ok()
        });
        p.check(
            swapped.is_some_and(|n| n >= 64),
            format!("{algo}: the 64 sysbench mutexes swapped ({swapped:?} in the note)"),
        );
    }
}

/// The swapped mutexes are reached through both symbol versions of the functions glibc 2.34
/// moved into libc (`pthread_mutex_trylock@GLIBC_2.2.5` and `@@GLIBC_2.34`): a glibc trylock on
/// a swapped mutex would read the lab lock's state as its own and break the count.
#[test]
fn the_old_symbol_versions_reach_the_swapped_mutexes() {
    let s = Scratch::new("swap-old");
    let exe = s.compile_with("swap_counter", "swap_counter_old", &["-DOLD_SYMVER"]);
    let nm = std::process::Command::new("objdump").arg("-T").arg(&exe).output();
    if let Ok(o) = nm {
        let syms = String::from_utf8_lossy(&o.stdout);
        assert!(
            syms.lines().any(|l| l.contains("pthread_mutex_trylock") && !l.contains("GLIBC_2.34")),
            "the program binds the old trylock:\n{syms}"
        );
    }
    for algo in ["ticket", "adaptive"] {
        let out = format!("{algo}.lmp");
        let ran = run_metered(&s, &out, &["--lock", algo], &exe, &["3", "3000", "2"]);
        ran.expect_code(0);
        assert!(ran.stdout.contains("counted 9000 expected 9000\n"), "{algo}\n{ran}");
        let p = Profile::load(&s.path(&out), &ran);
        p.eq("totals.acquisitions", p.totals("acquisitions"), 9000 + 6);
        let want = format!(
            "lock swapping: 2 mutexes ran on {algo}; 2 kept glibc's implementation (1 recursive, 1 error-checking)"
        );
        p.check(notes(&p).contains(&want), format!("{algo}: note `{want}`"));
    }
}

#[test]
fn without_lock_nothing_is_swapped_and_no_note_is_written() {
    let s = Scratch::new("swap-off");
    let exe = s.compile("swap_counter");
    let ran = run_metered(&s, "p.lmp", &["--lock", "pthread"], &exe, &["2", "1000", "2"]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.eq("totals.acquisitions", p.totals("acquisitions"), 2 * 1000 + 4);
    p.check(!notes(&p).iter().any(|n| n.starts_with("lock swapping")), "no swapping note");
}

#[test]
fn unknown_algorithm_is_refused_in_one_line() {
    let s = Scratch::new("swap-bad");
    let ran = lockmeter(&s.dir, &["run", "--lock", "unfair", "--", "true"]);
    assert_ne!(ran.code(), 0, "{ran}");
    assert!(ran.stderr.contains("--lock takes one of pthread, tas"), "{ran}");
}

#[test]
fn condvars_timeouts_trylocks_and_fork_behave_under_every_algorithm() {
    let s = Scratch::new("swap-pc");
    let exe = s.compile("swap_pc");
    let (pr, co, k) = (1u64, 2u64, 1000u64);
    let n = pr * k;
    for algo in ALGOS {
        let out = format!("{}.lmp", algo.replace(':', "-"));
        let args = [pr.to_string(), co.to_string(), k.to_string()];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let ran = run_metered(&s, &out, &["--lock", algo], &exe, &args);
        ran.expect_code(0);
        assert!(
            ran.stdout.contains(&format!("items {n} sum {}\n", n * (n + 1) / 2))
                && ran.stdout.contains("ok\n"),
            "{algo}: the program's output\n{ran}"
        );
        let p = Profile::load(&s.path(&out), &ran);
        p.check_consistency();
        let notes = notes(&p);
        // pc_lock and held: both default mutexes, both swapped.
        let want = format!("lock swapping: 2 mutexes ran on {algo}; 0 kept glibc's implementation");
        p.check(notes.contains(&want), format!("{algo}: note `{want}`"));
        p.check(p.totals("cond_waits") > 0, format!("{algo}: condvar waits metered"));
    }
}

/// Runs memcached under `lockmeter run --lock ALGO`, drives it with memcaslap (no get may miss),
/// checks a set/get round trip, then shuts it down and checks the profile.
fn memcached_under(algo: &str) {
    let s = Scratch::new(&format!("swap-memcached-{}", algo.replace(':', "-")));
    let port = 20000 + (std::process::id() % 20000) as u16 + if algo == "mcs" { 0 } else { 1 };
    let out = s.path("mc.lmp");
    let Some(mut mc) = Memcached::start(&s, &out, &["--lock", algo], port) else { return };
    let addr = mc.addr.clone();
    let load = std::process::Command::new("memcaslap")
        .args(["-s", &addr, "-t", "3s", "-T", "2", "-c", "16"])
        .output()
        .expect("cannot run memcaslap");
    let load_out = String::from_utf8_lossy(&load.stdout).into_owned();
    assert!(load.status.success(), "memcaslap failed under {algo}:\n{load_out}");
    let lines = mc.set_get("swapkey");
    assert_eq!(lines, ["STORED\r\n", "VALUE swapkey 0 5\r\n", "hello\r\n", "END\r\n"], "{algo}");
    // memcaslap's own count of the commands it got answers to, against memcached's.
    mc.conn.write_all(b"stats\r\n").unwrap();
    let mut stats = String::new();
    loop {
        let mut l = String::new();
        if mc.reader.read_line(&mut l).unwrap() == 0 || l == "END\r\n" {
            break;
        }
        stats.push_str(&l);
    }
    let stat = |k: &str| -> u64 {
        stats
            .lines()
            .find_map(|l| l.strip_prefix(&format!("STAT {k} ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {k} in stats:\n{stats}"))
    };
    let sent = |k: &str| -> u64 {
        load_out
            .lines()
            .find_map(|l| l.trim().strip_prefix(&format!("{k}: ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {k} in memcaslap's output:\n{load_out}"))
    };
    // Every get found its key, on both sides (a lost update in memcached's tables would miss),
    // and memcached processed no more commands than memcaslap sent (it may have dropped those
    // still in flight when memcaslap stopped), plus our set and get.
    assert_eq!(sent("get_misses"), 0, "{algo}: memcaslap's misses\n{load_out}");
    assert_eq!(stat("get_misses"), 0, "{algo}: memcached's misses\n{stats}");
    assert_eq!(stat("get_hits"), stat("cmd_get"), "{algo}: hits\n{stats}");
    let (gets, sets) = (sent("cmd_get"), sent("cmd_set"));
    assert!(gets > 0 && sets > 0, "{algo}: memcaslap did nothing\n{load_out}");
    assert!(
        stat("cmd_get") <= gets + 1 && stat("cmd_set") <= sets + 1 && stat("cmd_set") > 1,
        "{algo}: memcached's counts against memcaslap's\n{stats}\n{load_out}"
    );
    let served = stat("cmd_get") + stat("cmd_set");
    let ran = mc.shutdown(format!("memcached under --lock {algo}"));
    let p = Profile::load(&out, &ran);
    p.check_consistency();
    let swapped = notes(&p).iter().any(|n| {
        n.starts_with("lock swapping: ")
            && n.contains(&format!(" mutexes ran on {algo};"))
            && !n.starts_with("lock swapping: 0 ")
    });
    p.check(swapped, format!("{algo}: memcached's mutexes were swapped"));
    p.check(p.totals("acquisitions") > served, "more acquisitions than commands");
}

#[test]
fn memcached_runs_under_mcs() {
    memcached_under("mcs");
}

#[test]
fn memcached_runs_under_adaptive() {
    memcached_under("adaptive");
}

#[test]
fn compare_runs_each_lock_interleaved_and_reads_the_metric() {
    let s = Scratch::new("swap-compare");
    let exe = s.compile("swap_counter");
    let dir = s.path("cmp");
    let ran = lockmeter(
        &s.dir,
        &[
            "compare",
            "--locks",
            "pthread,adaptive",
            "--runs",
            "2",
            "--metric",
            "counted ([0-9]+)",
            "--dir",
            dir.to_str().unwrap(),
            "--",
            exe.to_str().unwrap(),
            "2",
            "2000",
            "2",
        ],
    );
    ran.expect_code(0);
    // One row per lock: 2 runs, the program's own count as the metric (exact: 2 x 2000), the
    // top lock is one of the program's (which one waited most is up to the scheduler: the
    // swap_locks, or the recursive swap_rec that each thread takes once), pthread is the 1.00x
    // baseline.
    for lock in ["pthread", "adaptive"] {
        let row = ran
            .stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(lock))
            .unwrap_or_else(|| panic!("no row for {lock}\n{ran}"));
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[1], "2", "runs of {lock}: {row}\n{ran}");
        assert!(cells.contains(&"4000") && cells.contains(&"4000..4000"), "metric: {row}\n{ran}");
        assert!(
            row.contains("swap_locks") || row.contains("swap_rec") || row.contains("swap_ec"),
            "top lock: {row}\n{ran}"
        );
        if lock == "pthread" {
            assert!(row.ends_with("1.00x"), "{row}");
        }
    }
    // Interleaved: run 1 of each before run 2 of any (progress lines in order).
    let order: Vec<&str> = ran.stderr.lines().filter(|l| l.starts_with("lockmeter: [")).collect();
    assert_eq!(order.len(), 4, "{ran}");
    assert!(
        order[0].contains("pthread, run 1/2") && order[1].contains("adaptive, run 1/2"),
        "{ran}"
    );
    assert!(
        order[2].contains("adaptive, run 2/2") && order[3].contains("pthread, run 2/2"),
        "{ran}"
    );
    for f in ["pthread-run1.lmp", "pthread-run2.lmp", "adaptive-run1.lmp", "adaptive-run2.lmp"] {
        assert!(dir.join(f).is_file(), "{f} missing\n{ran}");
    }
    let svg = std::fs::read_to_string(dir.join("compare.svg")).expect("the figure");
    assert!(svg.contains("\nadaptive\n"), "the figure names adaptive");
    // An unknown lock is refused before anything runs, in one line.
    let bad = lockmeter(&s.dir, &["compare", "--locks", "pthread,unfair", "--", "true"]);
    assert_eq!(bad.code(), 2, "{bad}");
    assert_eq!(bad.stderr.lines().count(), 1, "{bad}");
    assert!(bad.stderr.contains("unknown lock 'unfair'"), "{bad}");
}

#[test]
fn a_mutex_glibc_held_before_swapping_stays_glibc_and_is_counted() {
    let s = Scratch::new("swap-early");
    s.compile_with("swap_early_lib", "libswapearly.so", &["-fPIC", "-shared"]);
    let flags = ["-L", s.dir.to_str().unwrap(), "-lswapearly", "-Wl,-rpath,$ORIGIN"];
    let exe = s.compile_with("swap_early", "swap_early", &flags);
    let (t, n) = (3u64, 3000u64);
    for algo in ["mcs", "adaptive"] {
        let out = format!("{algo}.lmp");
        let ran = run_metered(&s, &out, &["--lock", algo], &exe, &[&t.to_string(), &n.to_string()]);
        ran.expect_code(0);
        let want = format!("early {} late {} expected {}\n", t * n, t * n, t * n);
        assert!(ran.stdout.contains(&want), "{algo}: {want}\n{ran}");
        let p = Profile::load(&s.path(&out), &ran);
        p.check_consistency();
        // The busy trylock failed; the constructor's lock was not metered (before the collector
        // was ready), main's unlock ended no metered hold.
        p.expect_lock("early_lock", "mutex", t * n);
        p.eq("early_lock trylock failures", u(p.lock("early_lock"), "trylock_failures"), 1);
        p.expect_lock("late_lock", "mutex", t * n);
        let want = format!(
            "lock swapping: 1 mutexes ran on {algo}; 1 kept glibc's implementation (1 held through glibc when first seen)"
        );
        p.check(notes(&p).contains(&want), format!("{algo}: note `{want}`"));
    }
}

#[test]
fn lock_filter_swaps_only_the_named_object() {
    let s = Scratch::new("swap-filter");
    let exe = s.compile("swap_pc");
    for algo in ["mcs", "adaptive"] {
        // pc_lock (with its two condvars) swapped; `held` (and its condvar) stays glibc's.
        let out = format!("{algo}.lmp");
        let opts = ["--lock", algo, "--lock-filter", "pc_lock"];
        let ran = run_metered(&s, &out, &opts, &exe, &["1", "2", "1000"]);
        ran.expect_code(0);
        assert!(
            ran.stdout.contains("items 1000 sum 500500\n") && ran.stdout.contains("ok\n"),
            "{ran}"
        );
        let p = Profile::load(&s.path(&out), &ran);
        let want = format!(
            "lock swapping: 1 mutexes ran on {algo}; 1 kept glibc's implementation (1 outside --lock-filter)"
        );
        p.check(notes(&p).contains(&want), format!("{algo}: note `{want}`"));
    }
    // The named object must exist; the filter needs --lock.
    let bad = run_metered(&s, "x.lmp", &["--lock", "mcs", "--lock-filter", "no_such"], &exe, &[]);
    assert_eq!(bad.code(), 2, "{bad}");
    assert!(bad.stderr.contains("no data object 'no_such'"), "{bad}");
    let bad = run_metered(&s, "y.lmp", &["--lock-filter", "pc_lock"], &exe, &[]);
    assert_eq!(bad.code(), 2, "{bad}");
    assert!(bad.stderr.contains("give --lock ALGO too"), "{bad}");
}

/// The line of `tests/programs/NAME.c` that holds `marker`.
fn line_of(name: &str, marker: &str) -> usize {
    let src =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/programs/{name}.c"));
    let text = std::fs::read_to_string(&src).unwrap();
    1 + text.lines().position(|l| l.contains(marker)).unwrap_or_else(|| panic!("no {marker}"))
}

#[test]
fn lock_filter_file_line_swaps_only_the_mutex_of_that_line() {
    let s = Scratch::new("swap-sites");
    let exe = s.compile("swap_sites");
    let (la, lb) = (line_of("swap_sites", "/* SITE_A */"), line_of("swap_sites", "/* SITE_B */"));
    // Without a filter both are swapped; with one, only the mutex of that line (initialized
    // there: a; first locked there: b). The program sees which glibc runs (its owner field).
    let cases = [
        (None, "a swapped\nb swapped\n"),
        (Some(format!("swap_sites.c:{la}")), "a swapped\nb glibc\n"),
        (Some(format!("swap_sites.c:{lb}")), "a glibc\nb swapped\n"),
    ];
    for algo in ["tas", "qspin"] {
        for (filter, want) in &cases {
            let out = format!(
                "{algo}-{}.lmp",
                filter.as_deref().unwrap_or("all").replace(['.', ':'], "_")
            );
            let mut opts = vec!["--lock", algo];
            if let Some(f) = filter {
                opts.extend(["--lock-filter", f.as_str()]);
            }
            let ran = run_metered(&s, &out, &opts, &exe, &[]);
            ran.expect_code(0);
            assert!(ran.stdout.starts_with(want), "{algo} {filter:?}: {ran}");
            assert!(ran.stdout.contains("count_a 40000\ncount_b 40000\n"), "{ran}");
            let p = Profile::load(&s.path(&out), &ran);
            let note = if filter.is_some() {
                format!(
                    "lock swapping: 1 mutexes ran on {algo}; 1 kept glibc's implementation (1 outside --lock-filter)"
                )
            } else {
                format!("lock swapping: 2 mutexes ran on {algo}; 0 kept glibc's implementation")
            };
            p.check(notes(&p).contains(&note), format!("{algo} {filter:?}: note `{note}`"));
        }
    }
    // A line without code, or a file the program was not built from: one-line errors.
    for bad in ["swap_sites.c:1", "nowhere.c:12"] {
        let ran = run_metered(&s, "x.lmp", &["--lock", "tas", "--lock-filter", bad], &exe, &[]);
        assert_eq!(ran.code(), 2, "{ran}");
        assert!(
            ran.stderr.contains(&format!("--lock-filter {bad}: no code at that line")),
            "{ran}"
        );
    }
}

#[test]
fn rwlocks_swapped_to_qrwlock_exclude_writers_and_count_exactly() {
    let s = Scratch::new("swap-rw");
    let exe = s.compile("swap_rw");
    let (t, n) = (3u64, 4000u64);
    let writes: u64 = (0..t).map(|t| (0..n).filter(|i| (i + t) % 4 == 0).count() as u64).sum();
    let reads = t * n - writes;
    for opts in [&["--rwlock", "qrwlock"][..], &["--rwlock", "qrwlock", "--lock", "mcs"][..]] {
        let ran = run_metered(&s, "p.lmp", opts, &exe, &[&t.to_string(), &n.to_string()]);
        ran.expect_code(0);
        assert!(ran.stdout.contains(&format!("reads {reads} writes {writes}\nok\n")), "{ran}");
        let p = Profile::load(&s.path("p.lmp"), &ran);
        p.check_consistency();
        // The workers' operations, the main thread's read lock and the timeout thread's
        // tryrdlock.
        let l = p.expect_lock("rw", "rwlock", t * n + 2);
        p.eq("rw reads", u(l, "read_acquisitions"), reads + 2);
        p.eq("rw writes", u(l, "write_acquisitions"), writes);
        p.expect_lock("rw_shared", "rwlock", 1);
        let want = "rwlock swapping: 1 rwlocks ran on qrwlock; 1 kept glibc's implementation (1 process-shared, 0 held through glibc when first seen)";
        p.check(notes(&p).iter().any(|x| x == want), format!("note `{want}`"));
        let _ = std::fs::remove_file(s.path("p.lmp"));
    }
}

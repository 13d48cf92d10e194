//! End-to-end tests of `lockmeter overhead`: the cold pair's table has a row with numbers for
//! each mode, is left out with `--cold-mib 0`, and is in the JSON; the table of a program given
//! after `--` has a row for each way of running it (bare, each collector mode, `perf lock
//! record`, `mutrace`) and its columns; a stand-in `mutrace` on PATH is run once per round; a
//! missing or failing program is a one-line error. Timings are printed, never checked (only
//! that they are positive numbers).
//!
//! Ground-truth program (`tests/programs/`): hammer.c (THREADS x ITERS lock/unlock of one
//! mutex; prints "ok N" and fails unless the counter is exact).
//!
//! Needs gcc. Run with `cargo test -p lockmeter --test overhead`.

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

const MODES: [&str; 4] =
    ["raw (no preload)", "hold timing off", "hold timing sample:16", "hold timing on"];

/// The small uncontended and cold measurements every run here makes.
const SMALL: [&str; 6] = ["--pairs", "20000", "--cold-pairs", "20", "--cold-mib", "1"];

/// `lockmeter overhead --rounds 1 SMALL --contended real --contended-pairs 2000 -- EXE 4 2000`
/// in `s`, with `path` as PATH.
fn overhead(s: &Scratch, exe: &Path, path: &str) -> Ran {
    let mut cmd = lockmeter_cmd(&s.dir);
    cmd.env("PATH", path).args(["overhead", "--rounds", "1"]).args(SMALL);
    cmd.args(["--contended", "real", "--contended-pairs", "2000", "--"]);
    cmd.arg(exe).args(["4", "2000"]);
    let child = spawn(&mut cmd);
    finish(format!("lockmeter overhead -- {} 4 2000", exe.display()), child, b"", RUN_LIMIT)
}

/// The lines of the real program's table: its header line, then the column line and the rows.
fn real_table(ran: &Ran) -> Vec<&str> {
    let lines: Vec<&str> = ran.stdout.lines().collect();
    let Some(at) = lines.iter().position(|l| l.starts_with("real program: ")) else {
        panic!("no real-program table\n{ran}")
    };
    lines[at..].iter().copied().take_while(|l| !l.is_empty()).collect()
}

/// The row named `name`: the words after the name.
fn row<'a>(table: &[&'a str], name: &str, ran: &Ran) -> Vec<&'a str> {
    let Some(l) = table.iter().find(|l| l.starts_with(name)) else {
        panic!("no row '{name}' in the real-program table\n{ran}")
    };
    l[name.len()..].split_whitespace().collect()
}

fn is_ms(w: &str) -> bool {
    w.parse::<f64>().is_ok_and(|v| v > 0.0)
}

fn is_ratio(w: &str) -> bool {
    w.strip_suffix('x').is_some_and(|v| v.parse::<f64>().is_ok_and(|v| v > 0.0))
}

/// Checks a measured row: wall ms, then a slowdown (or "-" for the bare row), then the estimate
/// (a ratio for the collector's modes, "-" for the others).
fn measured(table: &[&str], name: &str, estimate: bool, ran: &Ran) {
    let w = row(table, name, ran);
    let slow_ok = if name == MODES[0] {
        w.get(1) == Some(&"-")
    } else {
        w.get(1).is_some_and(|s| is_ratio(s))
    };
    let est_ok =
        if estimate { w.get(2).is_some_and(|s| is_ratio(s)) } else { w.get(2) == Some(&"-") };
    assert!(w.len() == 3 && is_ms(w[0]) && slow_ok && est_ok, "row '{name}': {w:?}\n{ran}");
}

fn perf_lock_runs() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    root && Command::new("perf").arg("--version").output().is_ok_and(|o| o.status.success())
}

#[test]
fn real_program_table_has_every_row_and_column() {
    let s = Scratch::new("overhead-real");
    let exe = s.compile("hammer");
    // The program's own account of its run, checked once bare.
    let plain = run_plain(&s.dir, &exe, &["4", "2000"]);
    assert_eq!(plain.expect_code(0).stdout.trim(), "ok 8000", "{plain}");
    let path = std::env::var("PATH").unwrap_or_default();
    let ran = overhead(&s, &exe, &path);
    ran.expect_code(0);
    // The uncontended table, the cold one, then only the real program's (no hot, no many).
    assert!(ran.stdout.starts_with("uncontended pthread_mutex lock+unlock, 20000 pairs"), "{ran}");
    assert!(ran.stdout.contains("\ncold pthread_mutex lock+unlock (1 MiB"), "{ran}");
    assert!(!ran.stdout.contains("contended: 4 threads"), "{ran}");
    let t = real_table(&ran);
    assert_eq!(
        t[0], "real program: hammer 4 2000, wall time of the whole command, 1 interleaved rounds",
        "{ran}"
    );
    assert_eq!(
        t[1].split_whitespace().collect::<Vec<_>>(),
        ["MODE", "WALL", "MS", "SLOWDOWN", "ESTIMATED", "SLOWDOWN"]
    );
    assert_eq!(t.len(), 2 + MODES.len() + 2, "{ran}");
    for (i, m) in MODES.iter().enumerate() {
        assert!(t[2 + i].starts_with(m), "row {i} is not '{m}'\n{ran}");
        measured(&t, m, i > 0, &ran);
    }
    if perf_lock_runs() {
        measured(&t, "perf lock record", false, &ran);
    } else {
        assert_eq!(
            row(&t, "perf lock record", &ran),
            ["not", "run:", "it", "needs", "root", "and", "perf"]
        );
    }
    let mutrace = std::env::split_paths(&path).any(|d| d.join("mutrace").is_file());
    if mutrace {
        measured(&t, "mutrace", false, &ran);
    } else {
        assert_eq!(row(&t, "mutrace", &ran), ["not", "run:", "not", "installed"], "{ran}");
    }
    // One progress line per step on stderr.
    let steps: Vec<&str> = ran.stderr.lines().collect();
    assert_eq!(
        steps,
        [
            "lockmeter overhead: uncontended, round 1/1",
            "lockmeter overhead: cold, round 1/1",
            "lockmeter overhead: real, round 1/1"
        ],
        "{ran}"
    );
}

#[test]
fn mutrace_on_path_is_a_measured_column() {
    let s = Scratch::new("overhead-mutrace");
    let exe = s.compile("hammer");
    // A stand-in mutrace that logs each call and runs the program as mutrace would.
    let bin = s.path("bin");
    std::fs::create_dir(&bin).unwrap();
    let log = s.path("mutrace.log");
    let script = format!("#!/bin/sh\necho \"$*\" >> '{}'\nexec \"$@\"\n", log.display());
    let fake = bin.join("mutrace");
    std::fs::write(&fake, script).unwrap();
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&fake, mode).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let ran = overhead(&s, &exe, &path);
    ran.expect_code(0);
    let t = real_table(&ran);
    measured(&t, "mutrace", false, &ran);
    // Run once (one round) on the program with its arguments.
    let calls = std::fs::read_to_string(&log).unwrap();
    assert_eq!(calls, format!("{} 4 2000\n", exe.display()), "{ran}");
}

#[test]
fn missing_or_failing_program_is_a_one_line_error() {
    let s = Scratch::new("overhead-errors");
    let ran = lockmeter(&s.dir, &["overhead", "--rounds", "1", "--", "no-such-program-lm"]);
    ran.expect_code(2);
    assert_eq!(
        ran.stderr, "lockmeter: cannot run 'no-such-program-lm': not found on PATH\n",
        "{ran}"
    );
    assert!(ran.stdout.is_empty(), "{ran}");
    let args = [
        "overhead",
        "--rounds",
        "1",
        "--pairs",
        "1000",
        "--contended",
        "real",
        "--",
        "/bin/sh",
        "-c",
        "echo noise; echo boom >&2; exit 3",
    ];
    let ran = lockmeter(&s.dir, &args);
    ran.expect_code(2);
    let last = ran.stderr.lines().last().unwrap_or("");
    assert_eq!(
        last,
        "lockmeter: the real workload (raw (no preload)) failed (exit status: 3): boom; give a \
         command that succeeds",
        "{ran}"
    );
}

/// The cold pair's table (its title line, the column line and the rows) from `lockmeter
/// overhead --rounds 2 SMALL --contended none`: a row per
/// mode, each with a positive median inside its spread, and an added cost (a number) for the
/// collector's modes; one progress line per round of each part.
#[test]
fn cold_pair_table_has_every_mode_with_numbers() {
    let s = Scratch::new("overhead-cold");
    let args = [&["overhead", "--rounds", "2"][..], &SMALL, &["--contended", "none"]].concat();
    let ran = lockmeter(&s.dir, &args);
    ran.expect_code(0);
    let lines: Vec<&str> = ran.stdout.lines().collect();
    let code = if cfg!(target_arch = "x86_64") { "64 KiB of code" } else { "no code" };
    let title = format!(
        "cold pthread_mutex lock+unlock (1 MiB of data and {code} touched before each pair), 20 \
         pairs, 2 interleaved rounds"
    );
    let Some(at) = lines.iter().position(|l| *l == title) else { panic!("no cold table\n{ran}") };
    // After the uncontended table and a blank line.
    assert!(at > 0 && lines[at - 1].is_empty(), "{ran}");
    let t: Vec<&str> = lines[at..].iter().copied().take_while(|l| !l.is_empty()).collect();
    assert_eq!(
        t[1].split_whitespace().collect::<Vec<_>>(),
        ["MODE", "NS/PAIR", "SPREAD", "(min-max)", "ADDED", "NS"],
        "{ran}"
    );
    let rows: Vec<&str> = t[2..].iter().copied().filter(|l| !l.starts_with("warning:")).collect();
    assert_eq!(rows.len(), MODES.len(), "{ran}");
    for (i, m) in MODES.iter().enumerate() {
        let Some(rest) = rows[i].strip_prefix(m) else { panic!("row {i} is not '{m}'\n{ran}") };
        let w: Vec<&str> = rest.split_whitespace().collect();
        assert_eq!(w.len(), 3, "row '{m}': {w:?}\n{ran}");
        let ns: f64 = w[0].parse().unwrap_or(f64::NAN);
        let (lo, hi) = w[1].split_once('-').unwrap_or(("", ""));
        let (lo, hi): (f64, f64) = (lo.parse().unwrap_or(f64::NAN), hi.parse().unwrap_or(f64::NAN));
        assert!(ns > 0.0 && lo > 0.0 && lo <= ns && ns <= hi, "row '{m}': {w:?}\n{ran}");
        let added_ok = if i == 0 {
            w[2] == "-"
        } else {
            w[2].strip_prefix('+').is_some_and(|v| v.parse::<f64>().is_ok())
        };
        assert!(added_ok, "row '{m}': {w:?}\n{ran}");
    }
    let steps: Vec<&str> = ran.stderr.lines().collect();
    assert_eq!(
        steps,
        [
            "lockmeter overhead: uncontended, round 1/2",
            "lockmeter overhead: uncontended, round 2/2",
            "lockmeter overhead: cold, round 1/2",
            "lockmeter overhead: cold, round 2/2"
        ],
        "{ran}"
    );
}

/// `--cold-mib 0` skips the cold pair: no table, no progress line, an empty JSON array.
#[test]
fn cold_mib_0_skips_the_cold_pair() {
    let s = Scratch::new("overhead-cold-0");
    let args = ["overhead", "--rounds", "1", "--pairs", "20000", "--contended", "none"];
    let ran = lockmeter(&s.dir, &[&args[..], &["--cold-mib", "0"]].concat());
    ran.expect_code(0);
    assert!(ran.stdout.starts_with("uncontended pthread_mutex lock+unlock"), "{ran}");
    assert!(!ran.stdout.contains("cold"), "{ran}");
    assert_eq!(ran.stderr, "lockmeter overhead: uncontended, round 1/1\n", "{ran}");
    let ran = lockmeter(&s.dir, &[&args[..], &["--cold-mib", "0", "--json"]].concat());
    ran.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&ran.stdout).expect("JSON");
    assert_eq!(v["cold_mib"], 0, "{ran}");
    assert_eq!(v["cold"].as_array().map(|a| a.len()), Some(0), "{ran}");
    assert_eq!(v["modes"].as_array().map(|a| a.len()), Some(MODES.len()), "{ran}");
}

/// `--json` has the uncontended rows under their old keys and the cold rows in `cold`, each
/// with positive numbers.
#[test]
fn json_has_the_cold_rows() {
    let s = Scratch::new("overhead-cold-json");
    let ran = lockmeter(&s.dir, &[&["overhead", "--json", "--rounds", "1"][..], &SMALL].concat());
    ran.expect_code(0);
    let v: serde_json::Value = serde_json::from_str(&ran.stdout).expect("JSON");
    assert_eq!((&v["rounds"], &v["pairs"]), (&1.into(), &20000.into()), "{ran}");
    assert_eq!((&v["cold_pairs"], &v["cold_mib"]), (&20.into(), &1.into()), "{ran}");
    for key in ["modes", "cold"] {
        let rows = v[key].as_array().cloned().unwrap_or_default();
        let names: Vec<&str> = rows.iter().filter_map(|r| r["mode"].as_str()).collect();
        assert_eq!(names, MODES, "{key}\n{ran}");
        for r in &rows {
            for k in ["ns_per_pair_median", "ns_per_pair_min", "ns_per_pair_max"] {
                assert!(r[k].as_f64().is_some_and(|x| x > 0.0), "{key} {k}: {r}\n{ran}");
            }
            assert!(r["added_ns_median"].is_number(), "{key}: {r}\n{ran}");
        }
    }
    // The JSON covers the pairs only: no contended workload ran.
    assert_eq!(
        ran.stderr,
        "lockmeter overhead: uncontended, round 1/1\nlockmeter overhead: cold, round 1/1\n",
        "{ran}"
    );
}

/// A cold pair count of 0 (with the cold pair on) and a cold buffer past the limit are refused
/// in one line before anything runs.
#[test]
fn bad_cold_options_are_one_line_errors() {
    let s = Scratch::new("overhead-cold-errors");
    let ran = lockmeter(&s.dir, &["overhead", "--cold-pairs", "0"]);
    ran.expect_code(2);
    assert_eq!(
        ran.stderr,
        "lockmeter: --cold-pairs must be at least 1 (--cold-mib 0 skips the cold pair)\n",
        "{ran}"
    );
    assert!(ran.stdout.is_empty(), "{ran}");
    let ran = lockmeter(&s.dir, &["overhead", "--cold-mib", "70000"]);
    ran.expect_code(2);
    assert!(ran.stderr.contains("--cold-mib"), "{ran}");
    assert!(ran.stdout.is_empty(), "{ran}");
}

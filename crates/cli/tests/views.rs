//! End-to-end tests: the views of a run file of several processes. Two contended programs started
//! by `sh -c 'A & B & wait'`: `--process PID|NAME` in every view that reads a run file (report,
//! flamegraph, export pprof/CSV/Perfetto, plot, and diff on each side).
//!
//! Ground-truth program (`tests/programs/`): holders.c (threads wait on big_lock and log_lock
//! while others hold them; prints each lock's acquisitions, `lock NAME N`).
//!
//! Needs gcc. Run with `cargo test -p lockmeter --test views`.

mod common;

use common::*;
use serde_json::Value;
use std::path::PathBuf;

/// A run of two contended programs under `sh -c`: `a` and `b`, each with its pid and the
/// acquisitions of big_lock and log_lock it printed (into a.out and b.out).
struct Two {
    s: Scratch,
    out: PathBuf,
    ran: Ran,
    a: Side,
    b: Side,
}

struct Side {
    pid: u64,
    big: u64,
    log: u64,
}

/// The number after `key` on the lines of `text` that start with it.
fn printed(text: &str, key: &str) -> Vec<u64> {
    text.lines().filter_map(|l| l.strip_prefix(key)?.trim().parse().ok()).collect()
}

fn two_programs(name: &str, opts: &[&str]) -> Two {
    let s = Scratch::new(name);
    let exe = s.compile("holders");
    let (e, a, b) = (exe.display(), s.path("a.out"), s.path("b.out"));
    let sh = format!(
        "{e} contended 30 > {} & echo \"a $!\"; {e} contended 20 > {} & echo \"b $!\"; wait",
        a.display(),
        b.display()
    );
    let out = s.path("two.lmp");
    let mut args = vec!["run", "-q", "-o", out.to_str().unwrap()];
    args.extend_from_slice(opts);
    args.extend(["--", "sh", "-c", &sh]);
    let ran = lockmeter(&s.dir, &args);
    ran.expect_code(0);
    let side = |key: &str, file: &PathBuf| {
        let pid = printed(&ran.stdout, key);
        let text = std::fs::read_to_string(file).unwrap_or_default();
        let (big, log) = (printed(&text, "lock big_lock "), printed(&text, "lock log_lock "));
        assert!(pid.len() == 1 && big.len() == 1 && log.len() == 1, "{key}: {text}\n{ran}");
        Side { pid: pid[0], big: big[0], log: log[0] }
    };
    let (a, b) = (side("a ", &a), side("b ", &b));
    Two { s, out, ran, a, b }
}

impl Two {
    fn file(&self) -> &str {
        self.out.to_str().unwrap()
    }

    /// `report --format json`, of one process when `process` is given.
    fn report(&self, process: Option<u64>) -> Profile {
        match process {
            Some(p) => Profile::load_with(&self.out, &self.ran, &["--process", &p.to_string()]),
            None => Profile::load(&self.out, &self.ran),
        }
    }

    /// Runs `lockmeter ARGS` in the scratch directory; expects success.
    fn ok(&self, args: &[&str]) -> Ran {
        let r = lockmeter(&self.s.dir, args);
        r.expect_code(0);
        r
    }
}

/// The sum of the last field of each line of folded stacks (`frames weight`).
fn folded_sum(text: &str) -> u64 {
    text.lines().filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok()).sum()
}

/// The sum of the `contentions` column of `export --csv` (the third field from the right).
fn csv_contentions(text: &str) -> u64 {
    text.lines().skip(1).filter_map(|l| l.rsplitn(4, ',').nth(2)?.parse::<u64>().ok()).sum()
}

#[test]
fn every_view_reads_one_process_with_process() {
    let t = two_programs("views-process", &["--longest-waits", "8"]);
    let (a, b) = (t.a.pid, t.b.pid);
    // report: each process alone, exact, its locks without a process prefix.
    let ra = t.report(Some(a));
    ra.expect_lock("big_lock", "mutex", t.a.big);
    ra.expect_lock("log_lock", "mutex", t.a.log);
    let rb = t.report(Some(b));
    rb.expect_lock("big_lock", "mutex", t.b.big);
    rb.expect_lock("log_lock", "mutex", t.b.log);
    let (ca, cb) = (ra.totals("contended"), rb.totals("contended"));
    assert!(ca > 0 && cb > 0, "both programs must be contended: {ca} {cb}\n{}", t.ran);
    let all = t.report(None);
    all.eq("contended, both", all.totals("contended"), ca + cb);

    // flamegraph --folded: every contended acquisition of the process once, by waiter stack;
    // a name selects every process of that name (both programs).
    for (sel, want, file) in [
        (a.to_string(), ca, "a.txt"),
        (b.to_string(), cb, "b.txt"),
        ("holders".into(), ca + cb, "h.txt"),
    ] {
        t.ok(&[
            "flamegraph",
            t.file(),
            "--folded",
            "--weight",
            "contentions",
            "-o",
            file,
            "--process",
            &sel,
        ]);
        let text = std::fs::read_to_string(t.s.path(file)).unwrap();
        assert_eq!(folded_sum(&text), want, "flamegraph --process {sel}:\n{text}");
        assert_eq!(text.contains("holders["), sel == "holders", "process prefixes:\n{text}");
    }

    // export: CSV, pprof and the Perfetto trace of one process.
    let csv = t.ok(&["export", t.file(), "--csv", "-", "--process", &b.to_string()]);
    assert_eq!(csv_contentions(&csv.stdout), cb, "export --csv --process b:\n{}", csv.stdout);
    t.ok(&[
        "export",
        t.file(),
        "--pprof",
        "a.pb.gz",
        "--perfetto",
        "a.json",
        "--process",
        &a.to_string(),
    ]);
    let pb = lockmeter_report::export::pprof::read(&std::fs::read(t.s.path("a.pb.gz")).unwrap())
        .unwrap();
    assert_eq!(pb.sample.iter().map(|s| s.value[0] as u64).sum::<u64>(), ca, "pprof --process a");
    let trace: Value =
        serde_json::from_str(&std::fs::read_to_string(t.s.path("a.json")).unwrap()).unwrap();
    let pids: std::collections::BTreeSet<u64> = trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .filter_map(|e| e["pid"].as_u64())
        .collect();
    assert_eq!(pids.into_iter().collect::<Vec<_>>(), [a], "perfetto --process a: slices' pids");

    // plot: one process's locks, named without their process.
    t.ok(&["plot", t.file(), "-o", "b.svg", "--process", &b.to_string()]);
    let svg = std::fs::read_to_string(t.s.path("b.svg")).unwrap();
    assert!(svg.contains("big_lock") && !svg.contains("holders["), "plot --process b");
    t.ok(&["plot", t.file(), "-o", "all.svg"]);
    let svg = std::fs::read_to_string(t.s.path("all.svg")).unwrap();
    assert!(svg.contains(&format!("holders[{a}]")), "plot of both names each process");

    // diff: --process once applies to both sides, twice to BEFORE then AFTER.
    let d = t.ok(&[
        "diff",
        t.file(),
        t.file(),
        "--format",
        "json",
        "--process",
        &a.to_string(),
        "--process",
        &b.to_string(),
    ]);
    let d: Value = serde_json::from_str(&d.stdout).unwrap();
    let side = |s: &str| u(&d["totals"][s], "acquisitions");
    let (na, nb) = (t.a.big + t.a.log, t.b.big + t.b.log);
    assert_eq!((side("before"), side("after")), (na, nb), "diff --process a --process b");
    let d = t.ok(&["diff", t.file(), t.file(), "--format", "json", "--process", &b.to_string()]);
    let d: Value = serde_json::from_str(&d.stdout).unwrap();
    let side = |s: &str| u(&d["totals"][s], "acquisitions");
    assert_eq!((side("before"), side("after")), (nb, nb), "diff --process b");

    // A process the file does not hold: one line naming those it does, and a failure.
    let r = lockmeter(
        &t.s.dir,
        &["flamegraph", t.file(), "--folded", "-o", "x.txt", "--process", "nosuch"],
    );
    assert_ne!(r.code(), 0, "{r}");
    assert_eq!(r.stderr.trim().lines().count(), 1, "one line: {r}");
    assert!(
        r.stderr.contains("no process 'nosuch'") && r.stderr.contains(&format!("[{a}]")),
        "{r}"
    );
}

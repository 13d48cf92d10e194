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

/// `gcc_flags`: extra flags for holders.c (`-no-pie`: both processes map it at one address).
fn two_programs(name: &str, opts: &[&str], gcc_flags: &[&str]) -> Two {
    let s = Scratch::new(name);
    let exe = s.compile_with("holders", "holders", gcc_flags);
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
    text.lines().skip(1).filter_map(|l| l.rsplit(',').nth(2)?.parse::<u64>().ok()).sum()
}

#[test]
fn every_view_reads_one_process_with_process() {
    let t = two_programs("views-process", &["--longest-waits", "8"], &[]);
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

/// The JSON timeline's intervals of process `pid`: in time order, not overlapping, each listing
/// only that process's locks (named `holders[PID]: `); returns how many there are.
fn check_process_intervals(p: &Profile, pid: u64) -> usize {
    let names: std::collections::HashMap<u64, String> =
        p.locks().iter().map(|l| (u(l, "id"), sf(l, "name").unwrap_or("").to_owned())).collect();
    let prefix = format!("holders[{pid}]: ");
    let mut last_end = 0;
    let mut n = 0;
    for iv in p.json["timeline"].as_array().unwrap().iter().filter(|iv| u(iv, "pid") == pid) {
        let (start, end) = (u(iv, "start_ns"), u(iv, "end_ns"));
        p.check(start >= last_end && end >= start, format!("{pid}: interval {start}..{end}"));
        last_end = end;
        n += 1;
        for l in iv["locks"].as_array().unwrap() {
            let name = &names[&u(l, "id")];
            p.check(name.starts_with(&prefix), format!("{pid}'s interval lists {name}"));
        }
    }
    n
}

#[test]
fn a_run_time_series_shows_every_process_on_one_axis() {
    let t = two_programs("views-timeline", &["--interval", "10ms"], &[]);
    let p = t.report(None);
    p.check_consistency();
    // Both processes' series, each in order, its intervals listing its own locks.
    for pid in [t.a.pid, t.b.pid] {
        let n = check_process_intervals(&p, pid);
        p.check(n >= 2, format!("process {pid} has {n} intervals"));
    }
    // Per lock, the intervals add up to its totals; all of them to the run's, which are what
    // the programs counted.
    let mut sums: std::collections::HashMap<u64, [u64; 4]> = Default::default();
    for iv in p.json["timeline"].as_array().unwrap() {
        for l in iv["locks"].as_array().unwrap() {
            let e = sums.entry(u(l, "id")).or_default();
            for (i, f) in ["acquisitions", "contended", "wait_ns", "hold_ns"].iter().enumerate() {
                e[i] += u(l, f);
            }
        }
    }
    for l in p.locks() {
        let want =
            [u(l, "acquisitions"), u(l, "contended"), u(l, "wait_ns_total"), u(l, "hold_ns_total")];
        let got = sums.get(&u(l, "id")).copied().unwrap_or_default();
        p.eq(format!("{}: timeline sums vs totals", sf(l, "name").unwrap_or("?")), got, want);
    }
    let truth = t.a.big + t.a.log + t.b.big + t.b.log;
    p.eq("timeline acquisitions", sums.values().map(|v| v[0]).sum::<u64>(), truth);
    p.eq("totals", p.totals("acquisitions"), truth);
    let contended: u64 = sums.values().map(|v| v[1]).sum();
    p.eq("timeline contended", contended, p.totals("contended"));

    // The figure draws a line for each process's locks.
    t.ok(&["plot", t.file(), "--kind", "timeline", "-o", "tl.svg"]);
    let svg = std::fs::read_to_string(t.s.path("tl.svg")).unwrap();
    for pid in [t.a.pid, t.b.pid] {
        assert!(svg.contains(&format!("holders[{pid}]: big_lock")), "plot: no line of {pid}");
    }

    // The HTML report draws both too (rendered by headless Chromium when installed).
    t.ok(&["report", t.file(), "--format", "html", "-o", "r.html"]);
    let browser = ["chromium", "chromium-browser", "google-chrome"].into_iter().find(|c| {
        std::process::Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success())
    });
    let Some(browser) = browser else {
        eprintln!("SKIPPED the HTML timeline check: no chromium (bash .ci/install.sh installs it)");
        return;
    };
    let dom = std::process::Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000"])
        .arg("--dump-dom")
        .arg(format!("file://{}", t.s.path("r.html").display()))
        .output()
        .expect("cannot run chromium");
    let dom = String::from_utf8_lossy(&dom.stdout);
    let tl = dom.find("id=\"timeline\"").map(|i| &dom[i..]).expect("no timeline in the page");
    let tl = &tl[..tl.find("</svg>").unwrap_or(tl.len())];
    for pid in [t.a.pid, t.b.pid] {
        let line = format!("<title>holders[{pid}]: big_lock</title>");
        assert!(tl.contains(&line), "the HTML timeline has no line of {pid}");
    }
}

#[test]
fn pprof_of_a_run_points_each_process_into_its_own_mappings() {
    // Not position-independent: both processes map holders at the same addresses, so only
    // the process tells their locations apart.
    let t = two_programs("views-pprof", &[], &["-no-pie"]);
    let contended = |pid: u64| t.report(Some(pid)).totals("contended");
    let (ca, cb) = (contended(t.a.pid), contended(t.b.pid));
    assert!(ca > 0 && cb > 0, "both programs must be contended: {ca} {cb}\n{}", t.ran);
    t.ok(&["export", t.file(), "--pprof", "all.pb.gz"]);
    let pb = lockmeter_report::export::pprof::read(&std::fs::read(t.s.path("all.pb.gz")).unwrap())
        .unwrap();
    // One mapping table, ids 1..n.
    let ids: Vec<u64> = pb.mapping.iter().map(|m| m.id).collect();
    assert_eq!(ids, (1..=pb.mapping.len() as u64).collect::<Vec<_>>(), "mapping ids");
    let exe = t.s.path("holders");
    let exe_maps: Vec<u64> = pb
        .mapping
        .iter()
        .filter(|m| pb.string(m.filename) == exe.to_str().unwrap())
        .map(|m| m.id)
        .collect();
    assert!(exe_maps.len() >= 2, "holders is mapped by both processes: {exe_maps:?}");
    // Per process: the contended acquisitions, and the mappings its locations point into.
    let label = |s: &lockmeter_report::export::pprof::Sample, key: &str| {
        s.label.iter().find(|l| pb.string(l.key) == key).map(|l| pb.string(l.str).to_owned())
    };
    let mut per: std::collections::HashMap<String, (u64, std::collections::BTreeSet<u64>)> =
        Default::default();
    for s in &pb.sample {
        let process = label(s, "process").expect("a sample without a process label");
        let e = per.entry(process).or_default();
        e.0 += s.value[0] as u64;
        for id in &s.location_id {
            let loc = &pb.location[*id as usize - 1];
            assert_eq!(loc.id, *id);
            if loc.mapping_id != 0 {
                let m = &pb.mapping[loc.mapping_id as usize - 1];
                assert!(m.memory_start <= loc.address && loc.address < m.memory_limit);
                e.1.insert(loc.mapping_id);
            }
        }
    }
    let (la, lb) = (format!("holders[{}]", t.a.pid), format!("holders[{}]", t.b.pid));
    assert_eq!(per.len(), 2, "processes: {:?}", per.keys().collect::<Vec<_>>());
    assert_eq!((per[&la].0, per[&lb].0), (ca, cb), "contentions per process");
    let (ma, mb) = (&per[&la].1, &per[&lb].1);
    assert!(ma.is_disjoint(mb), "the processes' locations share mappings: {ma:?} {mb:?}");
    assert!(ma.iter().any(|m| exe_maps.contains(m)) && mb.iter().any(|m| exe_maps.contains(m)));

    // What Go's pprof makes of it: each process's total with -tagfocus.
    let go = std::path::Path::new("/usr/local/go/bin/go");
    let go = if go.exists() { go.to_path_buf() } else { which("go").unwrap_or_default() };
    if go.as_os_str().is_empty() {
        eprintln!("SKIPPED the go tool pprof check: no Go (/usr/local/go/bin/go or go in PATH)");
        return;
    }
    for (pid, want) in [(t.a.pid, ca), (t.b.pid, cb)] {
        let o = std::process::Command::new(&go)
            .current_dir(&t.s.dir)
            .env("PPROF_TMPDIR", &t.s.dir)
            .args(["tool", "pprof", "-top", "-nodefraction=0", "-sample_index=contentions"])
            .arg(format!("-tagfocus=process=holders\\[{pid}\\]"))
            .arg("all.pb.gz")
            .output()
            .expect("cannot run go tool pprof");
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "go tool pprof failed:\n{out}\n{err}");
        // "Showing nodes accounting for N, P% of TOTAL total": N is what -tagfocus kept.
        let total = out
            .lines()
            .find_map(|l| l.split("accounting for ").nth(1)?.split(',').next()?.parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no total in go tool pprof's output:\n{out}\n{err}"));
        assert_eq!(total, want, "go tool pprof, process {pid}:\n{out}");
    }
}

//! The time series of `run --interval` (the profile's `timeline`): its sums equal the totals
//! exactly, `lockmeter plot --kind timeline` and the HTML report draw it, `--pprof-dir` writes one
//! file per interval that add up.

use super::{Phased, count, ctl, snapshot};
use crate::common::*;

/// The timeline's intervals: in order, not overlapping; returns per lock id the sums
/// (acquisitions, contended, wait_ns, hold_ns).
fn timeline_sums(p: &Profile) -> std::collections::HashMap<u64, [u64; 4]> {
    let tl = p.json["timeline"].as_array().cloned().unwrap_or_default();
    let mut sums = std::collections::HashMap::new();
    let mut last_end = 0;
    for iv in &tl {
        let (start, end) = (u(iv, "start_ns"), u(iv, "end_ns"));
        p.check(start >= last_end && end >= start, format!("interval {start}..{end} out of order"));
        last_end = end;
        for l in iv["locks"].as_array().into_iter().flatten() {
            // Critical-section pressure: hold time over the interval's width, for a mutex.
            let kind =
                p.locks().iter().find(|x| u(x, "id") == u(l, "id")).and_then(|x| sf(x, "kind"));
            if kind == Some("mutex") && end > start {
                let want = (u(l, "hold_ns") as f64 * 100.0 / (end - start) as f64).min(100.0);
                let got = l["held_pct"].as_f64();
                p.check(
                    got.is_some_and(|g| (g - want).abs() < 1e-6),
                    format!("held_pct {got:?} = hold_ns over the width ({want})"),
                );
            }
            let e = sums.entry(u(l, "id")).or_insert([0u64; 4]);
            for (i, f) in ["acquisitions", "contended", "wait_ns", "hold_ns"].iter().enumerate() {
                e[i] += u(l, f);
            }
        }
    }
    sums
}

/// Every lock's totals equal the sums of its intervals, exactly.
fn check_timeline_adds_up(p: &Profile) {
    let sums = timeline_sums(p);
    for l in p.locks() {
        let want =
            [u(l, "acquisitions"), u(l, "contended"), u(l, "wait_ns_total"), u(l, "hold_ns_total")];
        let got = sums.get(&u(l, "id")).copied().unwrap_or_default();
        p.eq(format!("lock {}: timeline sums vs totals", u(l, "id")), got, want);
    }
    let all: u64 = sums.values().map(|v| v[0]).sum();
    p.eq("timeline acquisitions vs totals", all, p.totals("acquisitions"));
}

fn intervals(p: &Profile) -> usize {
    p.json["timeline"].as_array().map_or(0, Vec::len)
}

#[test]
fn interval_timeline_adds_up_exactly_and_plots() {
    let s = Scratch::new("interval");
    let mut p = Phased::start(&s, &["--interval", "10ms"]);
    let l1 = p.phase();
    // Wait until the collector has closed at least two intervals (a snapshot shows them).
    let mut n = 0;
    for i in 0..400 {
        let snap = snapshot(&s, p.pid, &format!("wait{i}.lmp"));
        check_timeline_adds_up(&snap);
        n = intervals(&snap);
        if n >= 3 {
            snap.expect_lock("live.a", "mutex", count(&l1, "live.a"));
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(n >= 3, "the time series never had 3 intervals");
    let _l2 = p.phase();
    // A reset restarts the time series with the counts.
    ctl(&s.dir, p.pid, &["reset"]).expect_code(0);
    let l3 = p.phase();
    let l4 = p.phase();
    let snap = snapshot(&s, p.pid, "after.lmp");
    check_timeline_adds_up(&snap);
    let want = count(&l3, "live.a") + count(&l4, "live.c") + count(&l4, "live.d");
    snap.eq(
        "timeline after the reset",
        timeline_sums(&snap).values().map(|v| v[0]).sum::<u64>(),
        want,
    );
    let f = p.finish();
    f.check_consistency();
    check_timeline_adds_up(&f);
    f.expect_lock("live.c", "mutex", count(&l4, "live.c"));
    let d = f.expect_lock("live.d", "mutex", count(&l4, "live.d"));
    f.eq("live.d contended", u(d, "contended"), count(&l4, "contended"));
    f.check(u(d, "wait_ns_total") > 0, "live.d waited");
    f.eq("totals", f.totals("acquisitions"), want);

    // The figure: an SVG with the lock's name in its legend.
    let svg = s.path("timeline.svg");
    let ran = lockmeter(
        &s.dir,
        &["plot", f.path.to_str().unwrap(), "--kind", "timeline", "-o", svg.to_str().unwrap()],
    );
    ran.expect_code(0);
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("Wait per second over time") && text.contains("live.d"), "{ran}");

    // The HTML report draws the timeline too (rendered by headless Chromium when installed).
    let html = s.path("report.html");
    lockmeter(
        &s.dir,
        &["report", f.path.to_str().unwrap(), "--format", "html", "-o", "report.html"],
    )
    .expect_code(0);
    let Some(dom) = rendered_dom(&html) else {
        eprintln!("SKIPPED the HTML timeline check: no chromium (bash .ci/install.sh installs it)");
        return;
    };
    let tl = dom
        .find("id=\"timeline\"")
        .map(|i| &dom[i..])
        .unwrap_or_else(|| panic!("no timeline in the rendered page"));
    assert!(tl.contains("<polyline") && tl.contains("live.d"), "the timeline lacks live.d's line");
}

#[test]
fn plot_timeline_without_interval_says_what_to_do() {
    let s = Scratch::new("nointerval");
    let mut p = Phased::start(&s, &[]);
    p.phase();
    let f = p.finish();
    assert_eq!(intervals(&f), 0);
    let svg = s.path("t.svg");
    let ran = lockmeter(
        &s.dir,
        &["plot", f.path.to_str().unwrap(), "--kind", "timeline", "-o", svg.to_str().unwrap()],
    );
    assert_eq!(ran.status.code(), Some(2), "{ran}");
    assert!(ran.stderr.contains("run --interval"), "{ran}");
    assert!(!svg.exists());
}

#[test]
fn pprof_dir_writes_one_file_per_interval_that_add_up() {
    use lockmeter_report::export::pprof;
    let s = Scratch::new("pprofdir");
    let dir = s.path("pprof");
    std::fs::create_dir(&dir).unwrap();
    let mut p = Phased::start(&s, &["--interval", "50ms", "--pprof-dir", dir.to_str().unwrap()]);
    p.phase();
    p.phase();
    p.phase();
    // At least two intervals' files before the contended phase (a progress condition).
    for _ in 0..400 {
        if std::fs::read_dir(&dir).unwrap().count() >= 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let l4 = p.phase();
    let f = p.finish();
    let d = f.lock("live.d");
    f.eq("live.d contended", u(d, "contended"), count(&l4, "contended"));
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).collect();
    files.sort();
    assert!(files.len() >= 3, "{} pprof files in {}", files.len(), dir.display());
    let (mut contentions, mut delay) = (0i64, 0i64);
    for path in &files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        assert!(name.starts_with("lockmeter-") && name.ends_with(".pb.gz"), "{name}");
        let pb = pprof::read(&std::fs::read(path).unwrap()).unwrap();
        for smp in &pb.sample {
            contentions += smp.value[0];
            delay += smp.value[1];
        }
    }
    // Per interval files add up to the final profile: every contended acquisition once.
    f.eq("contentions over the pprof files", contentions as u64, f.totals("contended"));
    f.eq("delay over the pprof files", delay as u64, f.totals("wait_ns"));
}

#[test]
fn pprof_dir_needs_interval_and_a_directory() {
    let s = Scratch::new("pprofdirerr");
    let ran = lockmeter(&s.dir, &["run", "--pprof-dir", "x", "--", "true"]);
    assert_eq!(ran.status.code(), Some(2), "{ran}");
    assert!(ran.stderr.contains("--interval"), "{ran}");
    let ran = lockmeter(&s.dir, &["run", "--interval", "1s", "--pprof-dir", "nodir", "--", "true"]);
    assert_eq!(ran.status.code(), Some(2), "{ran}");
    assert!(ran.stderr.contains("not a directory"), "{ran}");
}

/// A heap lock destroyed before the end joins its class; its intervals go with it: the class's
/// series shows the acquisitions where they happened (one round per interval or so), not all of
/// them in the interval where the lock ended, and still adds up exactly.
#[test]
fn an_ended_lock_keeps_its_place_in_the_timeline() {
    let s = Scratch::new("ended-timeline");
    let exe = s.compile("ended");
    let ran = run_metered(&s, "p.lmp", &["--interval", "20ms"], &exe, &["6", "1000", "40"]);
    ran.expect_code(0);
    assert!(ran.stdout.contains("ok 6000"), "{ran}");
    let p = Profile::load(&s.path("p.lmp"), &ran);
    check_timeline_adds_up(&p);
    let class = p
        .locks()
        .iter()
        .find(|l| u(l, "acquisitions") == 6000)
        .unwrap_or_else(|| panic!("no lock with the 6000 acquisitions: {}", p.json["locks"]));
    let id = u(class, "id");
    let tl = p.json["timeline"].as_array().cloned().unwrap_or_default();
    let with: Vec<u64> = tl
        .iter()
        .filter_map(|iv| {
            iv["locks"].as_array()?.iter().find(|l| u(l, "id") == id).map(|l| u(l, "acquisitions"))
        })
        .collect();
    // Six rounds 40 ms apart in 20 ms intervals: the acquisitions are spread over several
    // intervals (at least 3, whatever the scheduler does), none holds them all.
    p.check(
        with.len() >= 3 && with.iter().all(|&n| n < 6000),
        format!("the ended lock's acquisitions per interval: {with:?}"),
    );
}

/// `--pprof-dir` under a launcher: the shell that starts the program takes no lock, the program
/// (its child) does; the files cover the child, and over all files every contended acquisition
/// of the run counts once.
#[test]
fn pprof_dir_covers_the_processes_a_launcher_starts() {
    use lockmeter_report::export::pprof;
    let s = Scratch::new("pprofdir-tree");
    let dir = s.path("pprof");
    std::fs::create_dir(&dir).unwrap();
    let exe = s.compile("contended");
    let script = format!("{}; true", exe.display());
    let sh = std::path::Path::new("/bin/sh");
    let ran = run_metered(
        &s,
        "p.lmp",
        &["--interval", "50ms", "--pprof-dir", dir.to_str().unwrap()],
        sh,
        &["-c", &script],
    );
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.expect_lock("c_mutex", "mutex", 2);
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).collect();
    files.sort();
    let contentions: i64 = files
        .iter()
        .map(|f| {
            let pb = pprof::read(&std::fs::read(f).unwrap()).unwrap();
            pb.sample.iter().map(|smp| smp.value[0]).sum::<i64>()
        })
        .sum();
    p.eq("contentions over the pprof files", contentions as u64, p.totals("contended"));
    // Files of more than one interval, of a process other than the shell (`-PID-` in the name).
    let pids: std::collections::BTreeSet<String> = files
        .iter()
        .filter_map(|f| f.file_name()?.to_str()?.split('-').nth(1).map(str::to_owned))
        .collect();
    p.check(
        pids.len() >= 2 && files.len() >= 4,
        format!("pprof files of the shell and its child, several intervals: {files:?}"),
    );
}

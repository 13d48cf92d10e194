//! Long-running programs: run-time control (`lockmeter ctl PID snapshot | pause | resume |
//! reset`), `run --delay`, `run --duration`, and the time series of `run --interval` (the
//! profile's `timeline`, `lockmeter plot --kind timeline`), and `lockmeter top` in an 80x24 tmux
//! pane.
//!
//! Program: `phases.c`, driven line by line through its stdin and stdout: it prints its pid, and
//! after each phase what it did (exact acquisitions per named lock), so every check compares a
//! snapshot or the final profile with the program's own counts; `hot.c`, a loop on the mutex
//! named `live.hot`, for `top`.

mod common;

use common::*;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// A `phases` program running under `lockmeter run`, driven by the test.
struct Phased {
    child: Child,
    stdin: Option<ChildStdin>,
    out: BufReader<ChildStdout>,
    pid: u32,
    profile: PathBuf,
}

impl Phased {
    fn start(s: &Scratch, opts: &[&str]) -> Phased {
        Phased::start_program(s, "phases", &[], opts)
    }

    /// Starts program `name` (driven like `phases.c`) with `args`, under `run OPTS`.
    fn start_program(s: &Scratch, name: &str, args: &[&str], opts: &[&str]) -> Phased {
        let include = workspace().join("include");
        let exe = s.compile_with(name, name, &["-I", include.to_str().unwrap()]);
        let profile = s.path("final.lmp");
        let mut cmd = lockmeter_cmd(&s.dir);
        cmd.args(["run", "-q", "-o", profile.to_str().unwrap()]).args(opts).arg("--").arg(&exe);
        cmd.args(args);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
        let mut child = cmd.spawn().expect("cannot start lockmeter run");
        let stdin = child.stdin.take();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let pid = line
            .trim()
            .strip_prefix("pid ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{name} did not print its pid: {line:?}"));
        Phased { child, stdin, out, pid, profile }
    }

    /// Runs the next phase; returns what the program says it did.
    fn phase(&mut self) -> String {
        let stdin = self.stdin.as_mut().unwrap();
        stdin.write_all(b"go\n").unwrap();
        stdin.flush().unwrap();
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        assert!(line.starts_with("phase "), "unexpected output of phases: {line:?}");
        line.trim().to_string()
    }

    /// Ends the program and returns its final profile.
    fn finish(mut self) -> Profile {
        drop(self.stdin.take());
        let status = self.child.wait().unwrap();
        let ran = Ran {
            what: "lockmeter run phases".into(),
            status,
            stdout: String::new(),
            stderr: String::new(),
            elapsed: Default::default(),
        };
        ran.expect_code(0);
        Profile::load(&self.profile, &ran)
    }
}

impl Drop for Phased {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.child.kill();
        }
    }
}

/// `lockmeter ctl PID ARGS`.
fn ctl(dir: &Path, pid: u32, args: &[&str]) -> Ran {
    let pid = pid.to_string();
    let mut all = vec!["ctl", pid.as_str()];
    all.extend_from_slice(args);
    lockmeter(dir, &all)
}

/// `lockmeter ctl PID snapshot -o NAME`, read back.
fn snapshot(s: &Scratch, pid: u32, name: &str) -> Profile {
    let path = s.path(name);
    let ran = ctl(&s.dir, pid, &["snapshot", "-o", path.to_str().unwrap()]);
    ran.expect_code(0);
    let p = Profile::load(&path, &ran);
    p.expect_end("snapshot", None);
    p.check_consistency();
    p
}

/// The numbers after `name` in a line of the program: "phase 2 live.a 300" -> 300.
fn count(line: &str, name: &str) -> u64 {
    let mut w = line.split_whitespace();
    while let Some(x) = w.next() {
        if x == name {
            return w.next().and_then(|n| n.parse().ok()).unwrap();
        }
    }
    panic!("{name} not in {line:?}")
}

#[test]
fn snapshot_pause_resume_reset_are_exact() {
    let s = Scratch::new("ctl");
    let mut p = Phased::start(&s, &[]);

    // Phase 1, then a snapshot: exactly the program's count, and the program keeps running.
    let l1 = p.phase();
    let s1 = snapshot(&s, p.pid, "s1.lmp");
    s1.expect_lock("live.a", "mutex", count(&l1, "live.a"));
    s1.eq("s1: totals.acquisitions", s1.totals("acquisitions"), count(&l1, "live.a"));

    // Phase 2 paused: adds nothing.
    let st = ctl(&s.dir, p.pid, &["pause"]);
    st.expect_code(0);
    let status = ctl(&s.dir, p.pid, &["status"]);
    assert_eq!(status.expect_code(0).stdout.trim(), "paused", "{status}");
    let l2 = p.phase();
    assert!(count(&l2, "live.b") > 0);
    let s2 = snapshot(&s, p.pid, "s2.lmp");
    s2.expect_lock("live.a", "mutex", count(&l1, "live.a"));
    s2.eq("s2: live.b while paused", s2.acq("live.b"), 0);
    s2.eq("s2: totals.acquisitions", s2.totals("acquisitions"), count(&l1, "live.a"));

    // Resume and reset: phase 3 starts from zero; repeated snapshots agree.
    ctl(&s.dir, p.pid, &["resume"]).expect_code(0);
    let status = ctl(&s.dir, p.pid, &["status"]);
    assert_eq!(status.expect_code(0).stdout.trim(), "metering", "{status}");
    ctl(&s.dir, p.pid, &["reset"]).expect_code(0);
    let s3a = snapshot(&s, p.pid, "s3a.lmp");
    s3a.eq("right after the reset: totals.acquisitions", s3a.totals("acquisitions"), 0);
    let l3 = p.phase();
    let s3 = snapshot(&s, p.pid, "s3.lmp");
    s3.expect_lock("live.a", "mutex", count(&l3, "live.a"));
    s3.eq("s3: totals.acquisitions", s3.totals("acquisitions"), count(&l3, "live.a"));

    // Phase 4, contended, and the final profile: everything since the reset, exactly.
    let l4 = p.phase();
    let f = p.finish();
    f.expect_end("exit", None);
    f.check_consistency();
    f.expect_lock("live.a", "mutex", count(&l3, "live.a"));
    f.expect_lock("live.c", "mutex", count(&l4, "live.c"));
    let d = f.expect_lock("live.d", "mutex", count(&l4, "live.d"));
    f.eq("live.d contended", u(d, "contended"), count(&l4, "contended"));
    f.eq("live.b (only taken while paused)", f.acq("live.b"), 0);
    f.eq(
        "final totals.acquisitions",
        f.totals("acquisitions"),
        count(&l3, "live.a") + count(&l4, "live.c") + count(&l4, "live.d"),
    );
    // The socket is gone with the process.
    let gone = ctl(&s.dir, p_pid_of(&f), &["status"]);
    assert_ne!(gone.status.code(), Some(0), "{gone}");
}

#[test]
fn locks_destroyed_after_a_reset_join_their_class_without_what_came_before() {
    // reset_classes.c: heap mutexes initialized at one site and taken before the reset; after it,
    // taken again and destroyed, initialized again at the same addresses (the thread's record is
    // reused: its counts fold into the class while the program runs) and destroyed once more
    // (folded when the profile is written). The class holds exactly what came after the reset.
    let s = Scratch::new("reset-classes");
    let mut p = Phased::start_program(&s, "reset_classes", &["50"], &[]);
    let l1 = p.phase();
    assert_eq!(count(&l1, "class"), 150, "{l1}");
    ctl(&s.dir, p.pid, &["reset"]).expect_code(0);
    let l2 = p.phase();
    let class_acq = count(&l2, "class");
    let keep_acq = count(&l2, "reset.keep");
    let check = |f: &Profile, what: &str| {
        f.check_consistency();
        f.expect_lock("reset.keep", "mutex", keep_acq);
        let classes: Vec<&serde_json::Value> =
            f.locks().iter().filter(|l| sf(l, "name_source") == Some("class")).collect();
        f.eq(format!("{what}: class rows"), classes.len(), 1);
        f.check(
            sf(classes[0], "name").is_some_and(|n| n.contains("heap locks initialized at make")),
            format!("{what}: the class of make: {:?}", sf(classes[0], "name")),
        );
        f.eq(format!("{what}: class acquisitions"), u(classes[0], "acquisitions"), class_acq);
        f.eq(format!("{what}: class holds timed"), u(classes[0], "holds_timed"), class_acq);
        f.eq(
            format!("{what}: totals.acquisitions"),
            f.totals("acquisitions"),
            class_acq + keep_acq,
        );
    };
    check(&snapshot(&s, p.pid, "after.lmp"), "snapshot");
    let f = p.finish();
    f.expect_end("exit", None);
    check(&f, "final");
}

fn p_pid_of(p: &Profile) -> u32 {
    u(p.header(), "pid") as u32
}

#[test]
fn delay_starts_paused_until_resumed() {
    let s = Scratch::new("delay");
    let mut p = Phased::start(&s, &["--delay", "1h"]);
    let status = ctl(&s.dir, p.pid, &["status"]);
    assert_eq!(status.expect_code(0).stdout.trim(), "paused", "{status}");
    let _l1 = p.phase();
    ctl(&s.dir, p.pid, &["resume"]).expect_code(0);
    let l2 = p.phase();
    let f = p.finish();
    f.check_consistency();
    f.expect_lock("live.a", "mutex", count(&l2, "live.a"));
    f.expect_lock("live.b", "mutex", count(&l2, "live.b"));
    f.eq("totals", f.totals("acquisitions"), count(&l2, "live.a") + count(&l2, "live.b"));
}

#[test]
fn duration_stops_metering_and_the_program_runs_on() {
    let s = Scratch::new("duration");
    let mut p = Phased::start(&s, &["--duration", "1ms"]);
    // Wait (without a time condition on the result) until the collector has paused itself.
    let mut paused = false;
    for _ in 0..200 {
        let st = ctl(&s.dir, p.pid, &["status"]);
        if st.expect_code(0).stdout.trim() == "paused" {
            paused = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(paused, "--duration 1ms never paused metering");
    let l1 = p.phase();
    let l2 = p.phase();
    assert!(count(&l1, "live.a") > 0 && count(&l2, "live.b") > 0);
    let f = p.finish();
    f.eq("acquisitions after --duration", f.totals("acquisitions"), 0);
}

#[test]
fn control_off_serves_no_socket_and_metering_goes_on() {
    let s = Scratch::new("control-off");
    let mut p = Phased::start(&s, &["--control", "0"]);
    // No control thread and no socket (with control on, `ctl status` answers at this point:
    // see delay_starts_paused_until_resumed).
    assert!(!has_thread(p.pid, "lockmeter-ctl"), "a control thread runs with --control 0");
    let st = ctl(&s.dir, p.pid, &["status"]);
    assert_eq!(st.status.code(), Some(2), "{st}");
    let l1 = p.phase();
    let f = p.finish();
    f.check_consistency();
    f.expect_lock("live.a", "mutex", count(&l1, "live.a"));
    f.eq("totals", f.totals("acquisitions"), count(&l1, "live.a"));
}

#[test]
fn control_starts_at_the_first_lock() {
    let s = Scratch::new("ctl-lazy");
    let mut p = Phased::start(&s, &[]);
    // `phases` took no lock yet: no control thread, no socket, and ctl says why.
    assert!(!has_thread(p.pid, "lockmeter-ctl"), "a control thread runs before any lock");
    let st = ctl(&s.dir, p.pid, &["status"]);
    assert_eq!(st.status.code(), Some(2), "{st}");
    assert_eq!(st.stderr.lines().count(), 1, "{st}");
    assert!(st.stderr.contains("has taken no lock yet"), "{st}");
    let l1 = p.phase();
    ctl(&s.dir, p.pid, &["status"]).expect_code(0);
    let s1 = snapshot(&s, p.pid, "s1.lmp");
    s1.expect_lock("live.a", "mutex", count(&l1, "live.a"));
    let f = p.finish();
    f.expect_lock("live.a", "mutex", count(&l1, "live.a"));
}

#[test]
fn ctl_on_a_process_that_is_not_metered_says_so() {
    let s = Scratch::new("notmetered");
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    let ran = ctl(&s.dir, sleeper.id(), &["snapshot"]);
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert_eq!(ran.status.code(), Some(2), "{ran}");
    assert_eq!(ran.stderr.lines().count(), 1, "{ran}");
    assert!(ran.stderr.contains("is not metered by lockmeter"), "{ran}");
    assert!(s.files_with_prefix("lockmeter-").is_empty(), "a file was written: {ran}");

    let ran = ctl(&s.dir, 999_999_999, &["pause"]);
    assert_eq!(ran.status.code(), Some(2), "{ran}");
    assert!(ran.stderr.contains("there is no process 999999999"), "{ran}");
}

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
    let browser = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()));
    let Some(browser) = browser else {
        eprintln!("SKIPPED the HTML timeline check: no chromium (bash .ci/install.sh installs it)");
        return;
    };
    let dom = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000"])
        .arg("--dump-dom")
        .arg(format!("file://{}", html.display()))
        .output()
        .expect("cannot run chromium");
    let dom = String::from_utf8_lossy(&dom.stdout);
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

/// The text of tmux pane `t`.
fn capture(t: &str) -> String {
    let out = Command::new("tmux").args(["capture-pane", "-p", "-t", t]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Waits (at most 60 s) until pane `t` shows something `want` accepts; returns that screen.
fn wait_for(t: &str, what: &str, want: impl Fn(&str) -> bool) -> String {
    let mut screen = String::new();
    for _ in 0..600 {
        screen = capture(t);
        if want(&screen) {
            return screen;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = Command::new("tmux").args(["kill-session", "-t", t]).status();
    panic!("tmux pane never showed {what}; last screen:\n{screen}");
}

fn keys(t: &str, k: &[&str]) {
    let mut c = Command::new("tmux");
    c.args(["send-keys", "-t", t]).args(k);
    assert!(c.status().unwrap().success());
}

#[test]
fn top_shows_the_hot_lock_in_80x24_refreshes_sorts_filters_and_quits() {
    let s = Scratch::new("top");
    let include = workspace().join("include");
    let exe = s.compile_with("hot", "hot", &["-I", include.to_str().unwrap()]);
    let out = s.path("top.lmp");
    let t = format!("lockmeter-top-{}", std::process::id());
    let sh = format!(
        "cd {dir} && LOCKMETER_PRELOAD={lib} {bin} top -o {out} -- {exe} 120; echo TOP-EXIT=$?; sleep 60",
        dir = s.dir.display(),
        lib = preload().display(),
        bin = lockmeter_bin().display(),
        out = out.display(),
        exe = exe.display(),
    );
    let st = Command::new("tmux")
        .args(["new-session", "-d", "-s", &t, "-x", "80", "-y", "24", &sh])
        .env_remove("LD_PRELOAD")
        .status()
        .expect("tmux is needed for this test (.ci/install.sh installs it)");
    assert!(st.success());

    // The hot lock, in a screen of 24 lines of at most 80 columns, with the keys' line.
    let first = wait_for(&t, "live.hot", |sc| sc.lines().any(|l| l.starts_with("live.hot")));
    assert!(first.lines().count() <= 24 && first.lines().all(|l| l.chars().count() <= 80));
    assert!(first.contains("LOCK") && first.contains("q quit"), "{first}");
    let row = |sc: &str| sc.lines().find(|l| l.starts_with("live.hot")).map(str::to_owned);
    // It refreshes: the lock's line changes (its counts grow).
    let before = row(&first);
    wait_for(&t, "a refresh", |sc| row(sc).is_some() && row(sc) != before);
    // Sort and filter.
    keys(&t, &["s"]);
    wait_for(&t, "sort: hold", |sc| sc.contains("sort: hold"));
    keys(&t, &["/", "n", "o", "p", "e", "Enter"]);
    wait_for(&t, "the filter hiding live.hot", |sc| {
        sc.contains("filter: nope") && !sc.contains("live.hot")
    });
    keys(&t, &["/", "Escape"]);
    wait_for(&t, "live.hot again", |sc| row(sc).is_some());
    // q quits, ends the program, and its profile is written.
    keys(&t, &["q"]);
    let end = wait_for(&t, "TOP-EXIT", |sc| sc.contains("TOP-EXIT="));
    let _ = Command::new("tmux").args(["kill-session", "-t", &t]).status();
    assert!(end.contains("TOP-EXIT=0") && end.contains("profile written to"), "{end}");
    let ran = Ran {
        what: "lockmeter top -- hot".into(),
        status: std::process::ExitStatus::default(),
        stdout: String::new(),
        stderr: end,
        elapsed: Default::default(),
    };
    let p = Profile::load(&out, &ran);
    p.check(p.acq("live.hot") > 0, "live.hot in the profile");
}

#[test]
fn top_on_a_process_that_is_not_metered_says_so() {
    let s = Scratch::new("topnot");
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = sleeper.id().to_string();
    // Without a terminal: one line saying it needs one.
    let ran = lockmeter(&s.dir, &["top", &pid]);
    assert_eq!(ran.status.code(), Some(2), "{ran}");
    assert!(ran.stderr.contains("lockmeter top needs a terminal"), "{ran}");
    assert_eq!(ran.stderr.lines().count(), 1, "{ran}");
    // In a terminal (a tmux pane): one line saying the process is not metered.
    let t = format!("lockmeter-topnot-{}", std::process::id());
    let sh = format!(
        "LOCKMETER_PRELOAD={lib} {bin} top {pid}; echo TOP-EXIT=$?; sleep 60",
        lib = preload().display(),
        bin = lockmeter_bin().display(),
    );
    let st = Command::new("tmux")
        .args(["new-session", "-d", "-s", &t, "-x", "80", "-y", "24", &sh])
        .env_remove("LD_PRELOAD")
        .status()
        .expect("tmux is needed for this test (.ci/install.sh installs it)");
    assert!(st.success());
    let screen = wait_for(&t, "TOP-EXIT", |sc| sc.contains("TOP-EXIT="));
    let _ = Command::new("tmux").args(["kill-session", "-t", &t]).status();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert!(
        screen.contains("TOP-EXIT=2") && screen.contains("is not metered by lockmeter"),
        "{screen}"
    );
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

/// Whether process `pid` has a thread named `name`.
fn has_thread(pid: u32, name: &str) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name))
}

#[test]
fn a_program_that_closes_every_descriptor_loses_control_not_its_files() {
    let s = Scratch::new("closer");
    let include = workspace().join("include");
    let exe = s.compile_with("closer", "closer", &["-I", include.to_str().unwrap()]);
    let out = s.path("closer.lmp");
    let mut cmd = lockmeter_cmd(&s.dir);
    cmd.args(["run", "-q", "-o", out.to_str().unwrap(), "--"]).arg(&exe);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
    let mut child = cmd.spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let pid: u32 = line
        .trim()
        .strip_prefix("ready ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("closer printed {line:?}"));
    // Control is gone (the first request may still reach the old socket and get no answer);
    // the control thread ends instead of serving the program's descriptors.
    for _ in 0..2 {
        let ran = ctl(&s.dir, pid, &["status"]);
        assert_eq!(ran.status.code(), Some(2), "{ran}");
    }
    let mut gone = false;
    for _ in 0..200 {
        if !has_thread(pid, "lockmeter-ctl") {
            gone = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(gone, "the control thread still runs");
    let ran = ctl(&s.dir, pid, &["status"]);
    assert!(ran.stderr.contains("has no control socket"), "{ran}");
    // Metering goes on, and the profile is written at exit.
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"end\n").unwrap();
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let ran = Ran {
        what: "lockmeter run closer".into(),
        status: std::process::ExitStatus::default(),
        stdout: String::new(),
        stderr: String::new(),
        elapsed: Default::default(),
    };
    let p = Profile::load(&out, &ran);
    p.expect_lock("closer.lock", "mutex", 10);
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

/// The first child of process `pid` named `comm` (`/proc/PID/task/*/children`).
fn child_named(pid: u32, comm: &str) -> Option<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace().filter_map(|x| x.parse::<u32>().ok()).collect::<Vec<_>>()
        })
        .find(|c| {
            std::fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|n| n.trim() == comm)
        })
}

/// A server under load: `ctl snapshot` of memcached while memcaslap drives it answers (the time
/// it took is printed: a timing is never a pass/fail condition), the snapshot has memcached's
/// locks, and memcached keeps serving: memcaslap misses no get, and a set/get round trip after
/// the snapshot works.
#[test]
fn memcached_under_load_answers_a_snapshot_and_keeps_serving() {
    use std::time::{Duration, Instant};
    let s = Scratch::new("live-memcached");
    let port = (24000 + std::process::id() % 20000) as u16;
    let out = s.path("mc.lmp");
    let Some(mut server) = Memcached::start(&s, &out, &[], port) else { return };
    let addr = server.addr.clone();
    let mc =
        child_named(server.child.id(), "memcached").expect("memcached's pid under lockmeter run");
    let load = Command::new("memcaslap")
        .args(["-s", &addr, "-t", "4s", "-T", "2", "-c", "16"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run memcaslap");
    std::thread::sleep(Duration::from_millis(1500));
    let path = s.path("snap.lmp");
    let t0 = Instant::now();
    let ran = ctl(&s.dir, mc, &["snapshot", "-o", path.to_str().unwrap()]);
    eprintln!("ctl snapshot of memcached under load answered in {:?}", t0.elapsed());
    ran.expect_code(0);
    let snap = Profile::load(&path, &ran);
    snap.expect_end("snapshot", None);
    snap.check_consistency();
    snap.check(
        snap.totals("acquisitions") > 0 && snap.locks().len() >= 2,
        "the snapshot has memcached's locks",
    );
    let load = load.wait_with_output().expect("memcaslap");
    let load_out = String::from_utf8_lossy(&load.stdout).into_owned();
    assert!(load.status.success(), "memcaslap failed:\n{load_out}");
    let misses = load_out
        .lines()
        .find_map(|l| l.trim().strip_prefix("get_misses: "))
        .and_then(|v| v.trim().parse::<u64>().ok());
    assert_eq!(misses, Some(0), "memcaslap's get misses:\n{load_out}");
    let lines = server.set_get("livekey");
    assert_eq!(lines, ["STORED\r\n", "VALUE livekey 0 5\r\n", "hello\r\n", "END\r\n"]);
    let ran = server.shutdown("memcached under lockmeter run".into());
    let p = Profile::load(&out, &ran);
    p.check_consistency();
    // Everything the snapshot counted is in the final profile, and more.
    p.check(
        p.totals("acquisitions") > snap.totals("acquisitions"),
        "the final profile counts past the snapshot",
    );
}

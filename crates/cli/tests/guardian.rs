//! End-to-end tests: endings no handler of the program sees, where the collector's guardian (a
//! process sharing the program's memory) writes the profile after the program is gone: SIGKILL
//! (raised, and sent from outside), a crash (SIGSEGV), a thread's raw `exit_group` while others
//! lock, a fork child killed by SIGKILL, and a cgo Go program that leaves with Go's raw
//! `exit_group`. Each profile's counts equal what the program printed before it died, and its
//! end says how the program ended. `--guardian 0` turns it off: no profile, and `run` says why.
//!
//! Ground-truth programs (`tests/programs/`): ending.c, gocgo/main.go (skipped, with a printed
//! reason, without `go`).
//!
//! Needs gcc. Run with `cargo test -p lockmeter --test guardian`.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The number after `name` in a program's output.
fn field(stdout: &str, name: &str) -> u64 {
    let w: Vec<&str> = stdout.split_whitespace().collect();
    let i = w.iter().position(|x| *x == name).unwrap_or_else(|| panic!("no {name} in {stdout}"));
    w[i + 1].parse().unwrap()
}

/// Checks the end the guardian wrote: `killed` with `signal`, or `exit_group` with `code`.
#[track_caller]
fn expect_guardian_end(p: &Profile, reason: &str, signal: Option<u64>, code: Option<i64>) {
    p.expect_end(reason, signal);
    p.eq("header.end_exit_code", p.header()["end_exit_code"].as_i64(), code);
}

fn killed(mode: &str, sig: i32) {
    let s = Scratch::new(&format!("guard-{mode}"));
    let exe = s.compile("ending");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[mode, "700", "3"]);
    ran.expect_code(128 + sig);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    expect_guardian_end(&p, "killed", Some(sig as u64), None);
    p.expect_lock("end_lock", "mutex", field(&ran.stdout, "end_lock"));
    p.eq("threads", p.threads().len(), 3);
    assert!(ran.stderr.contains(&format!("signal {sig}")), "run does not say the signal\n{ran}");
}

#[test]
fn sigkill_raised_leaves_a_complete_profile() {
    killed("kill9", libc::SIGKILL);
}

#[test]
fn a_crash_leaves_a_complete_profile() {
    killed("segv", libc::SIGSEGV);
}

#[test]
fn sigkill_from_outside_leaves_a_complete_profile() {
    use std::io::BufRead;
    let s = Scratch::new("guard-waitkill");
    let exe = s.compile("ending");
    let out = s.path("p.lmp");
    let mut cmd = lockmeter_cmd(&s.dir);
    let o = out.to_str().unwrap();
    cmd.args(["run", "-q", "-o", o, "--", exe.to_str().unwrap(), "waitkill", "400", "2"]);
    let mut child = spawn(&mut cmd);
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut printed = String::new();
    while !printed.ends_with("ready\n") {
        assert!(stdout.read_line(&mut printed).unwrap() > 0, "no ready line: {printed}");
    }
    let pid = field(&printed, "pid") as i32;
    // SAFETY: kill(2) on the program, a child of our child (it waits in pause()).
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let ran = finish("lockmeter run -- ending waitkill (SIGKILL)".into(), child, b"", RUN_LIMIT);
    ran.expect_code(137);
    let p = Profile::load(&out, &ran);
    p.check_consistency();
    expect_guardian_end(&p, "killed", Some(9), None);
    p.expect_lock("end_lock", "mutex", field(&printed, "end_lock"));
}

#[test]
fn raw_exit_group_while_threads_lock_leaves_a_complete_profile() {
    let s = Scratch::new("guard-exitgroup");
    let exe = s.compile("ending");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &["exitgroup", "600", "2"]);
    ran.expect_code(5);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    expect_guardian_end(&p, "exit_group", None, Some(5));
    p.expect_lock("end_lock", "mutex", field(&ran.stdout, "end_lock"));
    p.check(p.acq("spin_lock") > 0, "the spinners' acquisitions are in the profile");
}

#[test]
fn a_fork_child_killed_by_sigkill_leaves_its_own_profile() {
    let s = Scratch::new("guard-forkkill");
    let exe = s.compile("ending");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &["forkkill", "500", "2"]);
    ran.expect_code(0);
    assert_eq!(field(&ran.stdout, "child_status"), 9, "{ran}");
    // The run file holds both processes: the parent first, then the child.
    let images = split_run(&s, "p.lmp", &ran);
    assert_eq!(images.len(), 2, "the parent and the child: {images:?}\n{ran}");
    let p = Profile::load(&images[0], &ran);
    p.expect_end("exit", None);
    p.expect_lock("end_lock", "mutex", field(&ran.stdout, "end_lock"));
    let c = Profile::load(&images[1], &ran);
    c.check_consistency();
    // The parent reaps the child at once: the guardian may find its status gone.
    let reason = c.header()["end_reason"].as_str().unwrap_or("").to_string();
    c.check(reason == "killed" || reason == "vanished", format!("child's end: {reason}"));
    if reason == "killed" {
        c.expect_end("killed", Some(9));
    }
    c.expect_lock("end_lock", "mutex", field(&ran.stdout, "child_end_lock"));
}

#[test]
fn guardian_off_leaves_no_profile_and_run_says_why() {
    let s = Scratch::new("guard-off");
    let exe = s.compile("ending");
    let ran = run_metered(&s, "p.lmp", &["--guardian", "0"], &exe, &["kill9", "100", "1"]);
    ran.expect_code(137);
    assert!(!s.path("p.lmp").exists(), "a profile with the guardian off\n{ran}");
    assert!(ran.stderr.contains("--guardian 0"), "{ran}");
    assert!(!ran.stderr.contains("statically linked"), "{ran}");
}

/// `go build`s `tests/programs/NAME/main.go` (with cgo) into the scratch directory; `None` (and
/// a printed reason) without `go`.
fn go_build(s: &Scratch, name: &str, test: &str) -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs").join(name);
    let exe = s.path(name);
    let go = ["go", "/usr/local/go/bin/go"]
        .into_iter()
        .find(|g| Command::new(g).arg("version").output().is_ok_and(|o| o.status.success()));
    let Some(go) = go else {
        eprintln!("SKIPPED {test}: no `go` to build {}", src.display());
        return None;
    };
    let ran = Command::new(go)
        .arg("build")
        .arg("-o")
        .arg(&exe)
        .arg(src.join("main.go"))
        .current_dir(&s.dir)
        .env("GOFLAGS", "")
        .env("CGO_ENABLED", "1")
        .output()
        .unwrap();
    assert!(
        ran.status.success(),
        "go build {}: {}",
        src.display(),
        String::from_utf8_lossy(&ran.stderr)
    );
    Some(exe)
}

#[test]
fn a_cgo_go_program_leaving_with_exit_group_leaves_a_complete_profile() {
    let test = "a_cgo_go_program_leaving_with_exit_group_leaves_a_complete_profile";
    let s = Scratch::new("guard-cgo");
    let Some(exe) = go_build(&s, "gocgo", test) else { return };
    let ran = run_metered(&s, "p.lmp", &[], &exe, &["4", "2500", "3"]);
    ran.expect_code(3);
    assert!(!ran.stderr.contains("statically linked"), "{ran}");
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    expect_guardian_end(&p, "exit_group", None, Some(3));
    p.expect_lock("cgo_lock", "mutex", field(&ran.stdout, "cgo_lock"));
}

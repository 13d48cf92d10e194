//! End-to-end tests: how a program ends. exit, _exit, SIGTERM, SIGINT, SIGHUP (also while threads
//! are locking), SIGABRT, a program's own SIGTERM handler, SIGTERM sent to `lockmeter run`, and a
//! statically linked program: the exit status and stdio pass through unchanged, and the profile
//! (when there is one) is complete and says how the program ended.
//!
//! Ground-truth programs (`tests/programs/`): echo.c, ending.c.
//!
//! Needs gcc. Run with `cargo test -p lockmeter --test endings`; the harness builds the
//! preload library itself (`cargo build -p lockmeter-preload`) once per test process.

mod common;

use common::*;
use std::time::Duration;

#[test]
fn underscore_exit_writes_the_profile_and_passes_the_status() {
    let s = Scratch::new("underscore-exit");
    let exe = s.compile("ending");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &["_exit3", "500", "3"]);
    ran.expect_code(3);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    p.expect_end("_exit", None);
    p.eq("header.end_exit_code", p.header()["end_exit_code"].as_u64(), Some(3));
    p.expect_lock("end_lock", "mutex", 1500);
    p.eq("threads", p.threads().len(), 3);
}

#[test]
fn exit_and_return_from_main_record_the_exit_code() {
    let s = Scratch::new("exit-code");
    let exe = s.compile("ending");
    for (mode, code) in [("exit3", 3u64), ("return0", 0)] {
        let out = format!("{mode}.lmp");
        let ran = run_metered(&s, &out, &[], &exe, &[mode, "400", "2"]);
        ran.expect_code(code as i32);
        let p = Profile::load(&s.path(&out), &ran);
        p.check_consistency();
        p.expect_end("exit", None);
        p.eq("header.end_exit_code", p.header()["end_exit_code"].as_u64(), Some(code));
        p.expect_lock("end_lock", "mutex", 800);
        let report = lockmeter(&s.dir, &["report", s.path(&out).to_str().unwrap()]);
        report.expect_code(0);
        let want = format!("ended by exit {code}\n");
        assert!(
            report.stdout.contains(&want),
            "{mode}: no '{want}' in the report:\n{}",
            report.stdout
        );
    }
}

#[test]
fn exit_status_is_passed_through_and_stdio_untouched() {
    let s = Scratch::new("exit7");
    let exe = s.compile("ending");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &["exit7", "300", "2"]);
    ran.expect_code(7);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.expect_end("exit", None);
    p.eq("header.end_exit_code", p.header()["end_exit_code"].as_u64(), Some(7));
    p.expect_lock("end_lock", "mutex", 600);

    let exe = s.compile("echo");
    let mut input = b"hello\nworld\n".to_vec();
    input.extend((0..200_000u32).map(|i| (i % 251) as u8 | 1).filter(|&b| b != 0));
    // The bytes go through as bytes: compare raw output, not lossy strings.
    let out = s.path("echo.lmp");
    let mut cmd = lockmeter_cmd(&s.dir);
    cmd.args(["run", "-q", "-o", out.to_str().unwrap(), "--", exe.to_str().unwrap()]);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("cannot start lockmeter");
    let mut stdin = child.stdin.take().unwrap();
    let data = input.clone();
    let feeder = std::thread::spawn(move || {
        use std::io::Write;
        stdin.write_all(&data).unwrap();
    });
    let o = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(7), "{stderr}");
    assert!(
        o.stdout == input,
        "stdout differs from stdin ({} vs {} bytes)\n{stderr}",
        o.stdout.len(),
        input.len()
    );
    assert!(stderr.contains("echo: done"), "the program's stderr is lost:\n{stderr}");
    let ran = Ran {
        what: "echo".into(),
        status: o.status,
        stdout: String::new(),
        stderr: stderr.into_owned(),
        elapsed: Duration::ZERO,
    };
    let p = Profile::load(&out, &ran);
    p.check(p.acq("echo_lock") >= 1, "echo_lock taken");
}

fn check_signal_end(mode: &str, sig: i32) {
    let s = Scratch::new(&format!("signal-{mode}"));
    let exe = s.compile("ending");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[mode, "500", "3"]);
    ran.expect_code(128 + sig);
    assert!(ran.stderr.contains(&format!("signal {sig}")), "run does not say the signal\n{ran}");
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    p.expect_end("signal", Some(sig as u64));
    p.expect_lock("end_lock", "mutex", 1500);
}

#[test]
fn sigterm_writes_the_profile_and_exits_143() {
    check_signal_end("term", libc::SIGTERM);
}

#[test]
fn sigint_writes_the_profile_and_exits_130() {
    check_signal_end("int", libc::SIGINT);
}

#[test]
fn sigterm_while_threads_are_locking_writes_a_consistent_profile() {
    let s = Scratch::new("signal-busy");
    let exe = s.compile("ending");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &["termbusy", "0", "4"]);
    ran.expect_code(143);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_end("signal", Some(15));
    let l = p.lock("end_lock");
    p.check(u(l, "acquisitions") > 0, "the spinners' acquisitions are in the profile");
    p.eq("dropped.acquisitions", p.dropped("acquisitions"), 0);
}

#[test]
fn sighup_writes_the_profile_and_exits_129() {
    check_signal_end("hup", libc::SIGHUP);
}

#[test]
fn a_program_sigterm_handler_is_left_alone() {
    let s = Scratch::new("termhandler");
    let exe = s.compile("ending");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &["termhandler", "100", "2"]);
    ran.expect_code(5);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.expect_end("_exit", None);
    p.expect_lock("end_lock", "mutex", 200);
}

#[test]
fn abort_passes_its_status_and_run_says_why_there_is_no_profile() {
    // Whether the collector writes a profile at SIGABRT is its choice (it did not, then did);
    // either way the status passes through, a profile is exact, and run blames the right cause.
    let s = Scratch::new("abort");
    let exe = s.compile("ending");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &["abort", "100", "1"]);
    ran.expect_code(134);
    assert!(ran.stderr.contains("signal 6"), "{ran}");
    assert!(!ran.stderr.contains("SIGKILL"), "run blames SIGKILL for a SIGABRT\n{ran}");
    assert!(!ran.stderr.contains("panicked"), "{ran}");
    if s.path("p.lmp").exists() {
        let p = Profile::load(&s.path("p.lmp"), &ran);
        p.expect_end("signal", Some(6));
        p.expect_lock("end_lock", "mutex", 100);
    }
}

#[test]
fn sigterm_sent_to_lockmeter_reaches_the_program() {
    use std::io::BufRead;
    let s = Scratch::new("signal-forward");
    let exe = s.compile("ending");
    let out = s.path("p.lmp");
    let mut cmd = lockmeter_cmd(&s.dir);
    cmd.args([
        "run",
        "-q",
        "-o",
        out.to_str().unwrap(),
        "--",
        exe.to_str().unwrap(),
        "wait",
        "400",
        "2",
    ]);
    let mut child = spawn(&mut cmd);
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    // SAFETY: kill(2) on our own child, the lockmeter process.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let ran = finish("lockmeter run -- ending wait (SIGTERM)".into(), child, b"", RUN_LIMIT);
    ran.expect_code(143);
    let p = Profile::load(&out, &ran);
    p.expect_end("signal", Some(15));
    p.expect_lock("end_lock", "mutex", 800);
}

#[test]
fn a_static_program_runs_unmetered_with_its_status() {
    let s = Scratch::new("static");
    let exe = s.compile_with("ending", "ending_static", &["-static"]);
    let out = s.path("p.lmp");
    let ran = lockmeter(
        &s.dir,
        &["run", "-q", "-o", out.to_str().unwrap(), "--", exe.to_str().unwrap(), "exit7", "10"],
    );
    ran.expect_code(7);
    assert!(!out.exists(), "{ran}");
    // Said once, before it ran, with what sees its locks.
    assert!(ran.stderr.contains("is statically linked"), "{ran}");
    assert!(ran.stderr.contains("lockmeter record"), "{ran}");
    assert_eq!(ran.stderr.trim().lines().count(), 1, "{ran}");
    assert!(!ran.stderr.contains("panicked"), "{ran}");
}

//! End-to-end tests: files and errors. Default output names never overwrite; -o onto an existing
//! file, a directory or a link is refused before the program runs and nothing is renamed or
//! left behind; a relative -o survives the program's chdir; an unwritable output, a missing
//! program and every kind of bad profile give one line of error, without repeating itself.
//!
//! Ground-truth programs (`tests/programs/`): ending.c.
//!
//! Needs gcc. Run with `cargo test -p lockmeter --test files`; the harness builds the
//! preload library itself (`cargo build -p lockmeter-preload`) once per test process.

mod common;

use common::*;

#[test]
fn default_output_names_never_overwrite() {
    let s = Scratch::new("naming");
    let exe = s.compile("ending");
    let e = exe.to_str().unwrap();
    for _ in 0..2 {
        lockmeter(&s.dir, &["run", "-q", "--", e, "exit7", "10", "1"]).expect_code(7);
    }
    for n in ["lockmeter-1.lmp", "lockmeter-2.lmp"] {
        let ran = lockmeter(&s.dir, &["report", n, "--format", "json"]);
        ran.expect_code(0);
        assert!(ran.stdout.contains("\"end_lock\""), "{n}\n{ran}");
    }
    // -o onto an existing file, a directory or a link: refused before the program runs, one
    // line, and nothing the user had is renamed or changed.
    let before = std::fs::read(s.path("lockmeter-1.lmp")).unwrap();
    std::fs::create_dir(s.path("adir")).unwrap();
    std::fs::write(s.path("adir/keep"), b"mine").unwrap();
    std::os::unix::fs::symlink(s.path("target-of-link"), s.path("alink.lmp")).unwrap();
    for (o, why) in [
        ("lockmeter-1.lmp", "never overwrites"),
        ("adir", "is a directory"),
        (".", "is a directory"),
        ("alink.lmp", "symbolic link"),
    ] {
        let ran = lockmeter(&s.dir, &["run", "-q", "-o", o, "--", e, "exit7", "20", "1"]);
        assert_eq!(ran.code(), 2, "-o {o}\n{ran}");
        assert!(ran.stderr.contains(why), "-o {o}\n{ran}");
        assert_eq!(ran.stderr.trim().lines().count(), 1, "-o {o}: one line\n{ran}");
        assert!(!ran.stdout.contains("end_lock"), "-o {o}: the program ran\n{ran}");
    }
    assert_eq!(std::fs::read(s.path("lockmeter-1.lmp")).unwrap(), before);
    assert_eq!(std::fs::read(s.path("adir/keep")).unwrap(), b"mine");
    assert!(!s.path("target-of-link").exists());
    assert!(s.files_with_prefix("lockmeter-1.lmp.").is_empty(), "{:?}", s.files_with_prefix(""));
    assert!(s.dir.is_dir());
    let ran = lockmeter(&s.dir, &["run", "-q", "-o", "fresh.lmp", "--", e, "exit7", "30", "1"]);
    ran.expect_code(7);
    let p = Profile::load(&s.path("fresh.lmp"), &ran);
    p.expect_lock("end_lock", "mutex", 30);
    let p = Profile::load(&s.path("lockmeter-1.lmp"), &ran);
    p.expect_lock("end_lock", "mutex", 10);
    // No temporary files left beside the profiles.
    let litter: Vec<_> = s
        .files_with_prefix("")
        .into_iter()
        .filter(|f| f.to_string_lossy().contains(".tmp"))
        .collect();
    assert!(litter.is_empty(), "{litter:?}");
}

#[test]
fn a_relative_output_path_survives_a_chdir() {
    let s = Scratch::new("chdir");
    let exe = s.compile("ending");
    let ran = lockmeter(
        &s.dir,
        &["run", "-q", "-o", "rel.lmp", "--", exe.to_str().unwrap(), "chdir", "40"],
    );
    ran.expect_code(0);
    let p = Profile::load(&s.path("rel.lmp"), &ran);
    p.expect_lock("end_lock", "mutex", 40);
}

/// A failed command: non-zero exit, one line on stderr starting "lockmeter: ", no panic.
fn expect_one_line_error(ran: &Ran, must_name: &str) -> String {
    assert!(!ran.status.success(), "{} succeeded\n{ran}", ran.what);
    assert!(ran.status.code().is_some(), "{} died of a signal\n{ran}", ran.what);
    assert!(!ran.stderr.contains("panicked"), "{} panicked\n{ran}", ran.what);
    let lines: Vec<&str> = ran.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}: not one line of error\n{ran}", ran.what);
    assert!(lines[0].starts_with("lockmeter: "), "{ran}");
    assert!(
        lines[0].contains(must_name),
        "{}: the message does not name {must_name}\n{ran}",
        ran.what
    );
    lines[0].to_string()
}

#[test]
fn an_unwritable_output_fails_before_running_the_program() {
    let s = Scratch::new("unwritable");
    let exe = s.compile("ending");
    let ran = lockmeter(
        &s.dir,
        &["run", "-q", "-o", "/nonexistent/dir/p.lmp", "--", exe.to_str().unwrap(), "exit7", "10"],
    );
    assert!(!ran.stderr.contains("panicked"), "{ran}");
    assert!(ran.status.code() != Some(7) && ran.status.code() != Some(0), "the program ran\n{ran}");
    expect_one_line_error(&ran, "/nonexistent/dir");
}

#[test]
fn bad_programs_and_bad_profiles_give_one_line_errors() {
    let s = Scratch::new("bad");
    let ran = lockmeter(&s.dir, &["run", "-q", "-o", "x.lmp", "--", "/nonexistent/prog"]);
    expect_one_line_error(&ran, "/nonexistent/prog");
    let ran =
        lockmeter(&s.dir, &["run", "-q", "-o", "x.lmp", "--", "no-such-program-lockmeter-e2e"]);
    expect_one_line_error(&ran, "no-such-program-lockmeter-e2e");

    // A real profile to cut.
    let exe = s.compile("ending");
    let ran = run_metered(&s, "good.lmp", &[], &exe, &["exit7", "10", "1"]);
    ran.expect_code(7);
    let good = std::fs::read(s.path("good.lmp")).unwrap();
    std::fs::write(s.path("empty.lmp"), b"").unwrap();
    std::fs::write(s.path("half.lmp"), &good[..good.len() / 2]).unwrap();
    std::fs::write(s.path("short.lmp"), &good[..good.len().min(7)]).unwrap();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let random: Vec<u8> = (0..8192)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(s.path("random.lmp"), &random).unwrap();
    // The profile's magic followed by garbage.
    let mut magic_garbage = good[..good.len().min(16)].to_vec();
    magic_garbage.extend_from_slice(&random[..4096]);
    std::fs::write(s.path("magic-garbage.lmp"), &magic_garbage).unwrap();

    for f in
        ["missing.lmp", "empty.lmp", "half.lmp", "short.lmp", "random.lmp", "magic-garbage.lmp"]
    {
        for fmt in ["json", "text", "csv"] {
            let ran = lockmeter(&s.dir, &["report", f, "--format", fmt]);
            expect_one_line_error(&ran, f);
        }
    }
    // A directory is not a profile either.
    let ran = lockmeter(&s.dir, &["report", "."]);
    assert!(!ran.status.success() && !ran.stderr.contains("panicked"), "{ran}");
}

#[test]
fn report_errors_do_not_repeat_themselves() {
    let s = Scratch::new("bad-dup");
    std::fs::write(s.path("empty.lmp"), b"").unwrap();
    std::fs::write(s.path("random.lmp"), [0x5au8; 300]).unwrap();
    for f in ["missing.lmp", "empty.lmp", "random.lmp"] {
        let ran = lockmeter(&s.dir, &["report", f]);
        let line = expect_one_line_error(&ran, f);
        // "lockmeter: A: B: B" says B twice.
        let parts: Vec<&str> = line.split(": ").map(str::trim).collect();
        let mut seen = std::collections::HashSet::new();
        for part in parts.iter().filter(|p| p.len() > 12) {
            assert!(seen.insert(*part), "the message repeats '{part}':\n{line}");
        }
    }
}

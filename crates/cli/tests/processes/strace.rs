//! `strace -f` under `lockmeter run` and around it: both end, and the profiles are exact.

use crate::common::*;

/// strace, or `None` with the reason printed (`.ci/install.sh` installs it).
fn strace() -> Option<std::path::PathBuf> {
    match which("strace") {
        Ok(p) => Some(p),
        Err(()) => {
            eprintln!("skipped: strace is not installed (.ci/install.sh installs it)");
            None
        }
    }
}

/// Time limit of the strace runs: they hung forever before (strace waited for its own guardian).
const STRACE_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

#[test]
fn a_metered_strace_f_ends_and_its_tracee_profile_is_exact() {
    // strace -f waits for any child (`__WALL`) until none is left: it used to wait forever for
    // its own guardian and watcher, which wait for it to end.
    let Some(strace) = strace() else { return };
    let s = Scratch::new("strace-in");
    let exe = s.compile("hammer");
    let out = s.path("p.lmp");
    let args = ["run", "-o", out.to_str().unwrap(), "--", strace.to_str().unwrap(), "-f"];
    let rest = ["-o", "/dev/null", exe.to_str().unwrap(), "3", "2000"];
    let all: Vec<&str> = args.iter().chain(rest.iter()).copied().collect();
    let ran = lockmeter_with(&s.dir, &all, b"", STRACE_LIMIT);
    ran.expect_code(0);
    assert!(ran.stdout.contains("ok 6000"), "{ran}");
    let p = Profile::load(&out, &ran);
    p.expect_lock("big_lock", "mutex", 6000);
}

#[test]
fn lockmeter_under_strace_f_ends_and_its_profile_is_exact() {
    let Some(strace) = strace() else { return };
    let s = Scratch::new("strace-out");
    let exe = s.compile("hammer");
    let out = s.path("p.lmp");
    let mut cmd = std::process::Command::new(&strace);
    cmd.args(["-f", "-o", "/dev/null"])
        .arg(lockmeter_bin())
        .args(["run", "-q", "-o", out.to_str().unwrap(), "--", exe.to_str().unwrap(), "3", "2000"])
        .current_dir(&s.dir)
        .env("LOCKMETER_PRELOAD", preload())
        .env_remove("LD_PRELOAD");
    let ran = finish("strace -f lockmeter run hammer".into(), spawn(&mut cmd), b"", STRACE_LIMIT);
    ran.expect_code(0);
    assert!(ran.stdout.contains("ok 6000"), "{ran}");
    let p = Profile::load(&out, &ran);
    p.expect_lock("big_lock", "mutex", 6000);
}

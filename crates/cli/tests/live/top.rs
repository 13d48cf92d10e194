//! `lockmeter top` in an 80x24 tmux pane: the hot lock of `hot.c`, refreshes, sort, filter, quit;
//! a process that is not metered.

use crate::common::*;
use std::process::Command;

/// Starts tmux session `t`, one 80x24 pane running shell command `sh`.
fn new_pane(t: &str, sh: &str) {
    let st = Command::new("tmux")
        .args(["new-session", "-d", "-s", t, "-x", "80", "-y", "24", sh])
        .env_remove("LD_PRELOAD")
        .status()
        .expect("tmux is needed for this test (.ci/install.sh installs it)");
    assert!(st.success());
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
    new_pane(&t, &sh);

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
    new_pane(&t, &sh);
    let screen = wait_for(&t, "TOP-EXIT", |sc| sc.contains("TOP-EXIT="));
    let _ = Command::new("tmux").args(["kill-session", "-t", &t]).status();
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert!(
        screen.contains("TOP-EXIT=2") && screen.contains("is not metered by lockmeter"),
        "{screen}"
    );
}

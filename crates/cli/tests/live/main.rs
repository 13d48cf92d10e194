//! Long-running programs: run-time control (`lockmeter ctl PID snapshot | pause | resume |
//! reset`), `run --delay`, `run --duration`, and the time series of `run --interval` (the
//! profile's `timeline`, `lockmeter plot --kind timeline`), and `lockmeter top` in an 80x24 tmux
//! pane.
//!
//! Program: `phases.c`, driven line by line through its stdin and stdout: it prints its pid, and
//! after each phase what it did (exact acquisitions per named lock), so every check compares a
//! snapshot or the final profile with the program's own counts; `hot.c`, a loop on the mutex
//! named `live.hot`, for `top`.
//!
//! One test binary; its modules: `control` (`ctl` snapshot, pause, resume, reset, status; `--delay`,
//! `--duration`, `--control 0`; control lost or kept under load), `timeline` (`--interval`, its
//! plot and HTML, `--pprof-dir`), `top` (`lockmeter top` in a tmux pane). This file: the driver of
//! `phases.c` and `lockmeter ctl`.

#[path = "../common/mod.rs"]
mod common;

mod control;
mod timeline;
mod top;

use common::*;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

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

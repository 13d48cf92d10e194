//! Running programs and `lockmeter` under a time limit, with their output kept for diagnostics;
//! a run file split into one profile file per process image.

use super::{RUN_LIMIT, Scratch, lockmeter_bin, preload};
use std::fmt::Display;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// What a finished process left.
#[derive(Debug)]
pub struct Ran {
    pub what: String,
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Ran {
    /// The number the program printed after `key` at the start of a line of its stdout (its
    /// ground truth: a child's pid, an expected count); panics when there is none.
    pub fn printed(&self, key: &str) -> u64 {
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no '{key}' line\n{self}"))
    }

    /// The exit code (panics when killed by a signal).
    pub fn code(&self) -> i32 {
        match self.status.code() {
            Some(c) => c,
            None => panic!("{} was killed by signal {:?}\n{self}", self.what, self.status.signal()),
        }
    }

    /// Panics unless the exit code is `want`.
    pub fn expect_code(&self, want: i32) -> &Self {
        if self.status.code() != Some(want) {
            panic!("{}: exit status {:?}, expected code {want}\n{self}", self.what, self.status);
        }
        self
    }
}

impl Display for Ran {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "--- {} ({:?}, {:.2?}) stdout:\n{}\n--- stderr:\n{}\n---",
            self.what,
            self.status,
            self.elapsed,
            clip(&self.stdout, 4000),
            clip(&self.stderr, 8000)
        )
    }
}

pub(super) fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[... {} more bytes]", &s[..end], s.len() - end)
}

/// Starts `cmd` in its own process group with piped stdio.
pub fn spawn(cmd: &mut Command) -> Child {
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    // A test runner started by `nohup` or as a shell's background job ignores SIGHUP or
    // SIGINT/SIGQUIT, and its children inherit that (the collector rightly leaves an ignored
    // signal ignored): start every program with the fatal signals at their default action.
    // SAFETY: `signal` is async-signal-safe; nothing else runs between fork and exec here.
    unsafe {
        cmd.pre_exec(|| {
            for sig in [libc::SIGHUP, libc::SIGINT, libc::SIGQUIT, libc::SIGTERM, libc::SIGPIPE] {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    cmd.spawn().unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"))
}

/// Waits for `child` (feeding `input`, collecting output) at most `limit`; on timeout kills its
/// whole process group and panics with what it printed.
pub fn finish(what: String, mut child: Child, input: &[u8], limit: Duration) -> Ran {
    let start = Instant::now();
    let mut stdin = child.stdin.take();
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || {
        if let Some(s) = stdin.as_mut() {
            let _ = s.write_all(&input);
        }
        drop(stdin);
    });
    let reader = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut v);
            }
            String::from_utf8_lossy(&v).into_owned()
        })
    };
    let out = reader(child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    let err = reader(child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    let status = loop {
        match child.try_wait().expect("cannot wait for a child") {
            Some(st) => break Some(st),
            None if start.elapsed() > limit => break None,
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    };
    let status = match status {
        Some(st) => st,
        None => {
            // SAFETY: kill(2) on the process group we created for this child.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
            let st = child.wait().expect("cannot reap a killed child");
            let _ = feeder.join();
            let ran = Ran {
                what: what.clone(),
                status: st,
                stdout: out.join().unwrap_or_default(),
                stderr: err.join().unwrap_or_default(),
                elapsed: start.elapsed(),
            };
            panic!("{what} did not finish within {limit:?} (hung?); killed it\n{ran}");
        }
    };
    let _ = feeder.join();
    Ran {
        what,
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        elapsed: start.elapsed(),
    }
}

/// A `lockmeter` command with a clean environment (no inherited LOCKMETER_* or LD_PRELOAD).
pub fn lockmeter_cmd(dir: &Path) -> Command {
    let mut cmd = Command::new(lockmeter_bin());
    cmd.current_dir(dir).env("LOCKMETER_PRELOAD", preload()).env_remove("LD_PRELOAD");
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("LOCKMETER_") && k != "LOCKMETER_PRELOAD" {
            cmd.env_remove(k);
        }
    }
    cmd
}

/// Runs `lockmeter ARGS` in `dir`.
pub fn lockmeter(dir: &Path, args: &[&str]) -> Ran {
    lockmeter_with(dir, args, b"", RUN_LIMIT)
}

/// Runs `lockmeter ARGS` in `dir` with `input` on stdin and a time limit.
pub fn lockmeter_with(dir: &Path, args: &[&str], input: &[u8], limit: Duration) -> Ran {
    let mut cmd = lockmeter_cmd(dir);
    cmd.args(args);
    let child = spawn(&mut cmd);
    finish(format!("lockmeter {}", args.join(" ")), child, input, limit)
}

/// Runs a program directly (no preload).
pub fn run_plain(dir: &Path, exe: &Path, args: &[&str]) -> Ran {
    let mut cmd = Command::new(exe);
    cmd.args(args).current_dir(dir).env_remove("LD_PRELOAD");
    let child = spawn(&mut cmd);
    finish(format!("{} {}", exe.display(), args.join(" ")), child, b"", RUN_LIMIT)
}

/// `lockmeter run -q -o OUT [OPTS] -- EXE ARGS`: returns the run and the profile's path.
pub fn run_metered(s: &Scratch, out: &str, opts: &[&str], exe: &Path, args: &[&str]) -> Ran {
    let out = s.path(out);
    let mut all: Vec<&str> = vec!["run", "-q", "-o", out.to_str().unwrap()];
    all.extend_from_slice(opts);
    all.push("--");
    all.push(exe.to_str().unwrap());
    all.extend_from_slice(args);
    lockmeter(&s.dir, &all)
}

/// Splits the run file `name` (in the scratch directory) into one profile file per process
/// image under `img/`, named as the collector names its own: `img/NAME` for the first image,
/// `img/NAME.PID` for another process's first image, `img/NAME.PID.N` after its N-th exec.
/// Returns them in the file's order.
pub fn split_run(s: &Scratch, name: &str, ran: &Ran) -> Vec<PathBuf> {
    let run = lockmeter_format::read_run_file(&s.path(name))
        .unwrap_or_else(|e| panic!("the run file does not read: {e}\n{ran}"));
    std::fs::create_dir_all(s.path("img")).unwrap();
    let mut out = Vec::new();
    for (i, p) in run.processes.iter().enumerate() {
        let h = &p.header;
        let file = match (i, h.image_seq) {
            (0, _) => name.to_owned(),
            (_, 0) => format!("{name}.{}", h.pid),
            (_, n) => format!("{name}.{}.{n}", h.pid),
        };
        let path = s.path("img").join(file);
        std::fs::write(&path, lockmeter_format::to_bytes(p).unwrap()).unwrap();
        out.push(path);
    }
    out
}

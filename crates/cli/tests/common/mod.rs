//! Harness of the end-to-end tests: builds the preload library once, compiles the C programs of
//! `tests/programs/` with gcc, runs them under `lockmeter run` (with a time limit), and reads
//! the profiles back through `lockmeter report --format json`.
//!
//! Every failed check panics with the program's output and the report's JSON (see
//! [`Profile::fail`]); the scratch directory of a failed test is kept and its path printed.

#![allow(dead_code)]

use serde_json::Value;
use std::fmt::Display;
use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Time limit of one program run (generous: a 2-core machine running tests in parallel).
pub const RUN_LIMIT: Duration = Duration::from_secs(90);

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `lockmeter` binary under test.
pub fn lockmeter_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_lockmeter"))
}

/// The preload library, built once per test process with the profile of this test binary.
pub fn preload() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "--quiet", "-p", "lockmeter-preload"]).current_dir(workspace());
        if !cfg!(debug_assertions) {
            cmd.arg("--release");
        }
        let out = cmd.output().expect("cannot run cargo to build lockmeter-preload");
        assert!(
            out.status.success(),
            "cargo build -p lockmeter-preload failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lib = lockmeter_bin().with_file_name("liblockmeter_preload.so");
        assert!(lib.is_file(), "{} missing after the build", lib.display());
        lib
    })
}

/// A scratch directory, removed when the test passes and kept (path printed) when it fails.
pub struct Scratch {
    pub dir: PathBuf,
}

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "lockmeter-e2e-{}-{}-{name}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("cannot create the scratch directory");
        Scratch { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Compiles `tests/programs/NAME.c` into this directory: `gcc -O2 -pthread -g`.
    pub fn compile(&self, name: &str) -> PathBuf {
        self.compile_with(name, name, &[])
    }

    /// Compiles `tests/programs/NAME.c` into `OUT` in this directory with extra gcc flags
    /// (placed after the source, so libraries can be named).
    pub fn compile_with(&self, name: &str, out: &str, flags: &[&str]) -> PathBuf {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
        let src = dir.join(format!("{name}.c"));
        let exe = self.dir.join(out);
        let out = Command::new("gcc")
            .args(["-O2", "-pthread", "-g", "-Wall", "-I"])
            .arg(&dir)
            .arg("-o")
            .arg(&exe)
            .arg(&src)
            .args(flags)
            .output()
            .expect("cannot run gcc (the end-to-end tests need it)");
        assert!(
            out.status.success(),
            "gcc failed on {}:\n{}",
            src.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        exe
    }

    /// Compiles `tests/programs/NAME.cpp` into this directory: `g++ -O2 -pthread -g -std=c++17`.
    pub fn compile_cxx(&self, name: &str) -> PathBuf {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
        let src = dir.join(format!("{name}.cpp"));
        let exe = self.dir.join(name);
        let out = Command::new("g++")
            .args(["-O2", "-pthread", "-g", "-Wall", "-std=c++17", "-o"])
            .arg(&exe)
            .arg(&src)
            .output()
            .expect(
                "cannot run g++ (the C++ end-to-end test needs it; .ci/install.sh installs it)",
            );
        assert!(
            out.status.success(),
            "g++ failed on {}:\n{}",
            src.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        exe
    }

    /// Every file of the directory whose name starts with `prefix`, sorted.
    pub fn files_with_prefix(&self, prefix: &str) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("e2e: kept the scratch directory {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

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

fn clip(s: &str, max: usize) -> String {
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

/// `lockmeter run -q OPTS -o OUT -- sysbench mutex ARGS --mutex-locks=PER run`, checked against
/// sysbench's own count: each of its events takes PER locks of its mutex array, and sysbench's
/// own few start-up locks (fewer than 1000) come on top; nothing dropped. `None`, with the reason
/// printed, when sysbench is not installed.
pub fn sysbench_mutex_exact(
    s: &Scratch,
    out: &str,
    opts: &[&str],
    args: &[&str],
    per: u64,
) -> Option<Profile> {
    if std::process::Command::new("sysbench").arg("--version").output().is_err() {
        eprintln!("skipped: sysbench is not installed (.ci/install.sh installs it)");
        return None;
    }
    let path = s.path(out);
    let locks = format!("--mutex-locks={per}");
    let mut all = vec!["run", "-q"];
    all.extend_from_slice(opts);
    all.extend_from_slice(&["-o", path.to_str().unwrap(), "--", "sysbench", "mutex"]);
    all.extend_from_slice(args);
    all.extend_from_slice(&[locks.as_str(), "run"]);
    let ran = lockmeter(&s.dir, &all);
    ran.expect_code(0);
    let events: u64 = ran
        .stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("total number of events:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("sysbench printed no event count\n{ran}"));
    let p = Profile::load(&path, &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    let total = p.totals("acquisitions");
    p.check(
        total >= events * per && total - events * per < 1000,
        format!(
            "{opts:?}: {total} acquisitions for {events} x {per} sysbench locks (+ its own few)"
        ),
    );
    Some(p)
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

/// A profile read back as JSON, with the run that made it (for diagnostics).
pub struct Profile {
    pub path: PathBuf,
    pub json: Value,
    pub context: String,
}

/// A field of a JSON object as u64 (panics with the object when absent).
pub fn u(v: &Value, field: &str) -> u64 {
    v.get(field)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("no unsigned field `{field}` in {}", clip(&v.to_string(), 2000)))
}

/// A string field (None for null or absent).
pub fn sf<'a>(v: &'a Value, field: &str) -> Option<&'a str> {
    v.get(field).and_then(Value::as_str)
}

impl Profile {
    /// Reads `path` with `lockmeter report --format json`.
    pub fn load(path: &Path, ran: &Ran) -> Profile {
        Profile::load_with(path, ran, &[])
    }

    /// [`Profile::load`] with more `report` options (`--process PID`).
    pub fn load_with(path: &Path, ran: &Ran, opts: &[&str]) -> Profile {
        let context = ran.to_string();
        assert!(path.is_file(), "no profile at {}\n{context}", path.display());
        let mut args = vec!["report", path.to_str().unwrap(), "--format", "json"];
        args.extend_from_slice(opts);
        let rep = lockmeter(path.parent().unwrap_or(Path::new(".")), &args);
        if !rep.status.success() {
            panic!("lockmeter report failed on {}\n{rep}\n{context}", path.display());
        }
        let json: Value = serde_json::from_str(&rep.stdout)
            .unwrap_or_else(|e| panic!("report JSON does not parse: {e}\n{rep}"));
        Profile { path: path.to_path_buf(), json, context }
    }

    /// Panics with `msg`, the run's output and the JSON.
    #[track_caller]
    pub fn fail(&self, msg: impl Display) -> ! {
        let pretty = serde_json::to_string_pretty(&self.json).unwrap_or_default();
        panic!(
            "{msg}\n=== profile {}\n{}\n=== JSON:\n{}",
            self.path.display(),
            self.context,
            clip(&pretty, 30000)
        )
    }

    #[track_caller]
    pub fn check(&self, cond: bool, msg: impl Display) {
        if !cond {
            self.fail(format!("check failed: {msg}"));
        }
    }

    #[track_caller]
    pub fn eq<T: PartialEq + std::fmt::Debug>(&self, what: impl Display, actual: T, expected: T) {
        if actual != expected {
            self.fail(format!("{what}: got {actual:?}, expected {expected:?}"));
        }
    }

    pub fn header(&self) -> &Value {
        &self.json["header"]
    }
    pub fn totals(&self, f: &str) -> u64 {
        u(&self.json["totals"], f)
    }
    pub fn dropped(&self, f: &str) -> u64 {
        u(&self.json["dropped"], f)
    }
    pub fn locks(&self) -> &[Value] {
        self.json["locks"].as_array().map(Vec::as_slice).unwrap_or(&[])
    }
    pub fn threads(&self) -> &[Value] {
        self.json["threads"].as_array().map(Vec::as_slice).unwrap_or(&[])
    }

    /// Every lock entry named `name`.
    pub fn locks_named(&self, name: &str) -> Vec<&Value> {
        self.locks().iter().filter(|l| sf(l, "name") == Some(name)).collect()
    }

    /// The single lock entry named `name`.
    #[track_caller]
    pub fn lock(&self, name: &str) -> &Value {
        let v = self.locks_named(name);
        match v.as_slice() {
            [one] => one,
            [] => self.fail(format!("no lock named {name}")),
            _ => self.fail(format!("{} lock entries named {name}", v.len())),
        }
    }

    /// Acquisitions of the lock named `name` (0 when it is not in the profile).
    pub fn acq(&self, name: &str) -> u64 {
        self.locks_named(name).iter().map(|l| u(l, "acquisitions")).sum()
    }

    /// Checks the lock named `name`: kind and exact acquisitions.
    #[track_caller]
    pub fn expect_lock(&self, name: &str, kind: &str, acquisitions: u64) -> &Value {
        let l = self.lock(name);
        self.eq(format!("{name}: kind"), sf(l, "kind"), Some(kind));
        self.eq(format!("{name}: acquisitions"), u(l, "acquisitions"), acquisitions);
        l
    }

    /// Internal consistency every profile must have: per-lock sums of sites, totals equal the
    /// sums over locks and over threads, contended <= acquisitions, read + write <= total.
    #[track_caller]
    pub fn check_consistency(&self) {
        let fields = [
            "acquisitions",
            "read_acquisitions",
            "write_acquisitions",
            "contended",
            "trylock_failures",
            "cond_waits",
        ];
        for f in fields {
            let over_locks: u64 = self.locks().iter().map(|l| u(l, f)).sum();
            self.eq(format!("totals.{f} vs the sum over locks"), self.totals(f), over_locks);
            let over_threads: u64 = self.threads().iter().map(|t| u(t, f)).sum();
            self.eq(format!("totals.{f} vs the sum over threads"), self.totals(f), over_threads);
        }
        for l in self.locks() {
            let name = sf(l, "name").unwrap_or("?").to_string();
            let addr = sf(l, "address").unwrap_or("?");
            for f in fields {
                let sites: u64 = l["sites"].as_array().into_iter().flatten().map(|x| u(x, f)).sum();
                self.eq(
                    format!("lock {name} {addr}: {f} vs the sum over its sites"),
                    sites,
                    u(l, f),
                );
            }
            self.check(
                u(l, "contended") <= u(l, "acquisitions"),
                format!("lock {name}: contended <= acquisitions"),
            );
            self.check(
                u(l, "read_acquisitions") + u(l, "write_acquisitions") <= u(l, "acquisitions"),
                format!("lock {name}: read + write <= acquisitions"),
            );
            if u(l, "contended") > 0 {
                self.check(
                    u(l, "wait_ns_total") > 0,
                    format!("lock {name}: contended but no wait"),
                );
            }
        }
        self.eq("totals.locks", self.totals("locks"), self.locks().len() as u64);
        self.eq("totals.threads", self.totals("threads"), self.threads().len() as u64);
    }

    /// With hold timing on and room on the held stacks, every hold is timed: holds_timed equals
    /// acquisitions for every lock, but for the `(name, n)` locks, with n holds that never ended
    /// in their own thread (a thread that died holding a robust mutex, a lock still held at exit).
    #[track_caller]
    pub fn expect_all_holds_timed(&self, except: &[(&str, u64)]) {
        for l in self.locks() {
            let name = sf(l, "name").unwrap_or("?");
            let open = except.iter().find(|(n, _)| *n == name).map_or(0, |(_, k)| *k);
            self.eq(
                format!("lock {name}: holds_timed (acquisitions - {open})"),
                u(l, "holds_timed"),
                u(l, "acquisitions") - open,
            );
        }
    }

    /// Checks that nothing was dropped.
    #[track_caller]
    pub fn expect_nothing_dropped(&self) {
        for f in ["acquisitions", "locks", "threads", "holds"] {
            self.eq(format!("dropped.{f}"), self.dropped(f), 0);
        }
    }

    /// Checks `header.end_reason` (and `end_signal`).
    #[track_caller]
    pub fn expect_end(&self, reason: &str, signal: Option<u64>) {
        let h = self.header();
        self.eq("header.end_reason", sf(h, "end_reason"), Some(reason));
        self.eq("header.end_signal", h["end_signal"].as_u64(), signal);
    }
}

/// sizeof(pthread_mutex_t) on x86_64 and aarch64 glibc.
pub const MUTEX_SIZE: u64 = 40;

/// The name the report gives to element `i` of a static array `base` of `size`-byte elements.
pub fn elem(base: &str, i: u64, size: u64) -> String {
    if i == 0 { base.to_string() } else { format!("{base}+{:#x}", i * size) }
}

/// The path of program `prog` on `PATH`, if it is installed.
pub fn which(prog: &str) -> Result<PathBuf, ()> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
        .ok_or(())
}

/// memcached (loopback only, 4 threads, `shutdown` allowed) started under `lockmeter run -q -o
/// OUT RUN_OPTS`, with a connection open to it.
pub struct Memcached {
    pub child: Child,
    pub addr: String,
    pub conn: std::net::TcpStream,
    pub reader: std::io::BufReader<std::net::TcpStream>,
}

impl Memcached {
    /// Starts it on `port` and connects (waiting up to 30 s for it to listen). `None`, with the
    /// reason printed, when memcached or memcaslap is not installed.
    pub fn start(s: &Scratch, out: &Path, run_opts: &[&str], port: u16) -> Option<Memcached> {
        let (Ok(_), Ok(_)) = (which("memcached"), which("memcaslap")) else {
            eprintln!(
                "skipped: memcached or memcaslap is not installed (.ci/install.sh installs them)"
            );
            return None;
        };
        let mut cmd = lockmeter_cmd(&s.dir);
        cmd.args(["run", "-q", "-o", out.to_str().unwrap()]).args(run_opts);
        cmd.args(["--", "memcached", "-u", "root", "-A", "-U", "0", "-l", "127.0.0.1", "-t", "4"]);
        cmd.args(["-p", &port.to_string()]);
        let child = spawn(&mut cmd);
        let addr = format!("127.0.0.1:{port}");
        let start = Instant::now();
        let conn = loop {
            match std::net::TcpStream::connect(&addr) {
                Ok(c) => break c,
                Err(e) if start.elapsed() > Duration::from_secs(30) => {
                    let ran = finish("memcached".into(), child, b"", Duration::from_secs(1));
                    panic!("memcached did not listen on {addr}: {e}\n{ran}");
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        conn.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let reader = std::io::BufReader::new(conn.try_clone().unwrap());
        Some(Memcached { child, addr, conn, reader })
    }

    /// Sets `key` to "hello" and gets it back: the four lines memcached answered.
    pub fn set_get(&mut self, key: &str) -> Vec<String> {
        use std::io::BufRead;
        let req = format!("set {key} 0 0 5\r\nhello\r\nget {key}\r\n");
        self.conn.write_all(req.as_bytes()).unwrap();
        (0..4)
            .map(|_| {
                let mut l = String::new();
                self.reader.read_line(&mut l).unwrap();
                l
            })
            .collect()
    }

    /// Asks memcached to shut down and waits for `lockmeter run` to end.
    pub fn shutdown(mut self, what: String) -> Ran {
        self.conn.write_all(b"shutdown\r\n").unwrap();
        let mut rest = String::new();
        let _ = self.reader.read_to_string(&mut rest);
        finish(what, self.child, b"", RUN_LIMIT)
    }
}

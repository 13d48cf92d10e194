//! `lockmeter record` (the eBPF collector) against ground truth: programs that count their own
//! futex waits, Rust std locks, a static binary, kernel-lock contention counted by perf on the
//! same tracepoint in the same run, and Go mutexes (programs/gomutex, built with `go build`).
//!
//! eBPF needs root (or CAP_BPF + CAP_PERFMON): without it these tests print why they skip.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Why eBPF tests cannot run here, or `None` when they can.
fn ebpf_skip_reason(s: &Scratch) -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root (eBPF needs root or CAP_BPF + CAP_PERFMON)".into());
    }
    let probe = lockmeter(&s.dir, &["record", "-q", "-o", "probe.lmp", "--", "true"]);
    if probe.stderr.contains("no eBPF support") {
        return Some(format!("this lockmeter was built without eBPF: {}", probe.stderr.trim()));
    }
    probe.expect_code(0);
    None
}

macro_rules! need_ebpf {
    ($s:expr, $test:literal) => {
        if let Some(why) = ebpf_skip_reason(&$s) {
            eprintln!("SKIPPED {}: {why}", $test);
            return;
        }
    };
}

/// `lockmeter record -q -o OUT [OPTS] -- EXE ARGS`.
fn record(s: &Scratch, out: &str, opts: &[&str], exe: &Path, args: &[&str]) -> Ran {
    let out = s.path(out);
    let mut all: Vec<&str> = vec!["record", "-q", "-o", out.to_str().unwrap()];
    all.extend_from_slice(opts);
    all.push("--");
    all.push(exe.to_str().unwrap());
    all.extend_from_slice(args);
    lockmeter(&s.dir, &all)
}

/// `counter N futex_waits N wait_ns N` from futexlock's output.
fn futexlock_truth(stdout: &str) -> (u64, u64) {
    let w: Vec<&str> = stdout.split_whitespace().collect();
    let field = |name: &str| -> u64 {
        let i =
            w.iter().position(|x| *x == name).unwrap_or_else(|| panic!("no {name} in {stdout}"));
        w[i + 1].parse().unwrap()
    };
    (field("futex_waits"), field("wait_ns"))
}

/// The hand-made futex lock: every FUTEX_WAIT it makes is counted, exactly; the wait time is
/// within 10% of the program's own clock. The holder sleeps 300 µs inside the lock, so a wait is
/// long beside what the program's clock adds to the kernel's (the syscall's entry and exit, about
/// a microsecond, and any preemption between its clock read and the call).
fn check_futexlock(s: &Scratch, exe: &Path) {
    let ran = record(s, "fx.lmp", &[], exe, &["2", "300", "100", "300"]);
    ran.expect_code(0);
    let (waits, wait_ns) = futexlock_truth(&ran.stdout);
    let p = Profile::load(&s.path("fx.lmp"), &ran);
    p.check_consistency();
    let l = p.lock("hot_futex");
    p.eq("hot_futex: kind", sf(l, "kind"), Some("futex"));
    p.eq("hot_futex: origin", sf(l, "origin"), Some("futex"));
    p.eq("hot_futex: contended (futex waits)", u(l, "contended"), waits);
    p.eq("hot_futex: acquisitions", u(l, "acquisitions"), waits);
    let ours = u(l, "wait_ns_total") as f64;
    let ratio = ours / wait_ns as f64;
    p.check(
        (0.9..=1.1).contains(&ratio),
        format!("hot_futex: wait {ours} ns vs the program's {wait_ns} ns (ratio {ratio:.3})"),
    );
    p.eq("dropped.acquisitions", p.dropped("acquisitions"), 0);
    // The waker's stack is the holder's side of each waiter-holder pair: where it let go.
    p.check(
        l["pairs"].as_array().is_some_and(|h| !h.is_empty()),
        "hot_futex: no waiter-waker pairs",
    );
}

#[test]
fn futex_waits_are_counted_exactly() {
    let s = Scratch::new("rec-futex");
    need_ebpf!(s, "futex_waits_are_counted_exactly");
    let exe = s.compile_with("futexlock", "futexlock", &["-fno-omit-frame-pointer"]);
    check_futexlock(&s, &exe);
}

#[test]
fn static_binaries_are_seen_by_record_and_pointed_there_by_run() {
    let s = Scratch::new("rec-static");
    let exe = s.compile_with("futexlock", "futexlock_static", &["-static"]);
    let run = run_metered(&s, "run.lmp", &[], &exe, &["2", "10"]);
    run.expect_code(0);
    assert!(
        run.stderr.contains("statically linked") && run.stderr.contains("lockmeter record"),
        "{run}"
    );
    need_ebpf!(s, "static_binaries_are_seen_by_record_and_pointed_there_by_run (record)");
    check_futexlock(&s, &exe);
}

#[test]
fn rust_std_locks_are_named_by_their_statics() {
    let s = Scratch::new("rec-rust");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/rust_mutex.rs");
    let exe = s.path("rust_mutex");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let out = Command::new(rustc)
        .args(["-O", "-g", "-C", "force-frame-pointers=yes", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("cannot run rustc");
    assert!(out.status.success(), "rustc: {}", String::from_utf8_lossy(&out.stderr));
    // `run` sees no pthread lock in it, and says why and what sees them.
    let plain = run_metered(&s, "plain.lmp", &[], &exe, &["2", "1000"]);
    plain.expect_code(0);
    assert!(
        plain.stderr.contains("is a Rust program") && plain.stderr.contains("lockmeter record"),
        "{plain}"
    );
    // A program that took no lock cost nothing: the collector's own calibration is not counted.
    let pp = Profile::load(&s.path("plain.lmp"), &plain);
    pp.eq("overhead.estimated_total_ns", u(&pp.json["overhead"], "estimated_total_ns"), 0);
    need_ebpf!(s, "rust_std_locks_are_named_by_their_statics (record)");
    let iters = 100_000u64;
    let ran = record(&s, "r.lmp", &[], &exe, &["4", &iters.to_string()]);
    ran.expect_code(0);
    assert!(ran.stdout.contains(&format!("HOT {}", 4 * iters)), "{ran}");
    let p = Profile::load(&s.path("r.lmp"), &ran);
    p.check_consistency();
    let hot = p.lock("rust_mutex::HOT");
    p.eq("HOT: kind", sf(hot, "kind"), Some("futex"));
    p.check(u(hot, "contended") > 0, "HOT never waited in the kernel");
    p.check(u(hot, "contended") <= 4 * iters, "HOT: more waits than acquisitions");
    // The waiter's stack goes through std's futex mutex, named by the symbolizer.
    let waiters = hot["waiters"].to_string();
    p.check(waiters.contains("futex"), "HOT: the waiter stacks do not show std's futex path");
}

/// `go build`s `tests/programs/NAME/main.go` into the scratch directory with extra flags; `None`
/// (and a printed reason) without `go`.
fn go_build(s: &Scratch, name: &str, out: &str, flags: &[&str], test: &str) -> Option<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs").join(name);
    let exe = s.path(out);
    let ran = Command::new("go")
        .arg("build")
        .args(flags)
        .arg("-o")
        .arg(&exe)
        .arg(src.join("main.go"))
        .current_dir(&s.dir)
        .env("GOFLAGS", "")
        .output();
    let Ok(ran) = ran else {
        eprintln!("SKIPPED {test}: no `go` to build {}", src.display());
        return None;
    };
    assert!(
        ran.status.success(),
        "go build {}: {}",
        src.display(),
        String::from_utf8_lossy(&ran.stderr)
    );
    Some(exe)
}

/// The number after `name` in a program's output.
fn field(stdout: &str, name: &str) -> u64 {
    let w: Vec<&str> = stdout.split_whitespace().collect();
    let i = w.iter().position(|x| *x == name).unwrap_or_else(|| panic!("no {name} in {stdout}"));
    w[i + 1].parse().unwrap()
}

/// gomutex's exact phases make each of its Lock/RLock calls on hot, table and twice wait in the
/// Go runtime's semaphore exactly once (twice's sleeps twice in one call: one contended
/// acquisition), and nothing else waits on them: those counts are exact. How many of busy's
/// Lock calls slept is unknowable; each is counted at most once however often it slept.
#[test]
fn go_mutexes_are_counted_exactly_with_goroutine_stacks() {
    let test = "go_mutexes_are_counted_exactly_with_goroutine_stacks";
    let s = Scratch::new("rec-go");
    need_ebpf!(s, "go_mutexes_are_counted_exactly_with_goroutine_stacks");
    let Some(exe) = go_build(&s, "gomutex", "gomutex", &[], test) else { return };
    let ran = record(&s, "g.lmp", &[], &exe, &["5", "4", "4", "200"]);
    ran.expect_code(0);
    let out = &ran.stdout;
    let p = Profile::load(&s.path("g.lmp"), &ran);
    p.check_consistency();
    p.eq("dropped.acquisitions", p.dropped("acquisitions"), 0);
    // The note says what is traced, and that it was from the program's start.
    let notes = p.json["notes"].to_string();
    p.check(notes.contains("is a Go 1.") && notes.contains("traced with uprobes"), "no Go note");
    p.check(!notes.contains("before lockmeter found it"), "the command was traced late");
    p.check(ran.stderr.contains("traced with uprobes"), "no progress line about Go");

    let hot = p.lock("main.hot");
    p.eq("hot: kind", sf(hot, "kind"), Some("go-mutex"));
    p.eq("hot: origin", sf(hot, "origin"), Some("go"));
    p.eq("hot: contended", u(hot, "contended"), field(out, "hot_waits"));
    p.eq("hot: acquisitions", u(hot, "acquisitions"), field(out, "hot_waits"));
    // Goroutine stacks: they start at the function that called Lock, and go on to its caller
    // (the goroutine's closure in main.main) and the goroutine's start.
    for w in hot["waiters"].as_array().into_iter().flatten() {
        let funcs: Vec<&str> =
            w["stack"].as_array().into_iter().flatten().filter_map(|f| sf(f, "function")).collect();
        p.check(
            funcs.first() == Some(&"main.lockHot")
                && funcs.get(1).is_some_and(|f| f.starts_with("main.main.func"))
                && funcs.last().is_some_and(|f| f.starts_with("runtime.goexit")),
            format!("hot: a waiter stack is not the goroutine's: {funcs:?}"),
        );
    }
    // Who woke the waiters: the holder's unlock in main.main (each round) and in lockHot.
    let pairs = hot["pairs"].to_string();
    p.check(pairs.contains("main.main") && pairs.contains("main.lockHot"), "hot: holders");

    let table = p.lock("main.table");
    p.eq("table: kind", sf(table, "kind"), Some("go-rwmutex"));
    let (reads, writes) = (field(out, "table_read_waits"), field(out, "table_write_waits"));
    p.eq("table: read waits", u(table, "read_acquisitions"), reads);
    // Writers behind readers and writers behind a writer (in the RWMutex's inner mutex).
    p.eq("table: write waits", u(table, "write_acquisitions"), writes);
    p.eq("table: contended", u(table, "contended"), reads + writes);

    let twice = p.lock("main.twice");
    p.check(
        field(out, "twice_sleeps") > field(out, "twice_waits"),
        "twice: no Lock call slept twice, so this run did not test it",
    );
    p.eq(
        "twice: contended (Lock calls, not sleeps)",
        u(twice, "contended"),
        field(out, "twice_waits"),
    );

    let busy = p.lock("main.busy");
    p.check(u(busy, "contended") > 0, "busy: no wait seen");
    p.check(u(busy, "contended") <= field(out, "busy_locks"), "busy: more waits than Lock calls");
}

/// A Go program whose mutexes cannot be traced (no symbol table) is said to be one, in the
/// progress line and in the profile, and its futex waits are still recorded.
#[test]
fn a_stripped_go_program_is_said_to_be_untraced() {
    let test = "a_stripped_go_program_is_said_to_be_untraced";
    let s = Scratch::new("rec-go-s");
    need_ebpf!(s, "a_stripped_go_program_is_said_to_be_untraced");
    let Some(exe) = go_build(&s, "gomutex", "gomutex-s", &["-ldflags=-s"], test) else { return };
    let ran = record(&s, "s.lmp", &[], &exe, &["1", "2", "2", "10"]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("s.lmp"), &ran);
    p.check_consistency();
    let why = "whose sync.Mutex and sync.RWMutex waits were not traced: it has no symbol table";
    let lines: Vec<&str> = ran.stderr.lines().filter(|l| l.contains(why)).collect();
    p.eq("progress lines saying why", lines.len(), 1);
    let notes: Vec<&str> =
        p.json["notes"].as_array().into_iter().flatten().filter_map(|n| n.as_str()).collect();
    p.check(notes.iter().any(|n| n.contains(why)), "no note saying why");
    p.check(
        p.locks().iter().all(|l| sf(l, "origin") != Some("go")),
        "Go locks from a program that could not be traced",
    );
}

/// `N,,lock:contention_end,...` from `perf stat -x,`.
fn perf_count(stderr: &str, event: &str) -> Option<u64> {
    stderr
        .lines()
        .find(|l| l.contains(&format!(",{event},")))
        .and_then(|l| l.split(',').next())
        .and_then(|n| n.trim().parse().ok())
}

#[test]
fn kernel_lock_contention_matches_perf_on_the_same_tracepoint() {
    let s = Scratch::new("rec-kernel");
    need_ebpf!(s, "kernel_lock_contention_matches_perf_on_the_same_tracepoint");
    if Command::new("perf").arg("--version").output().is_err() {
        eprintln!(
            "SKIPPED kernel_lock_contention_matches_perf_on_the_same_tracepoint: no perf (bash .ci/install.sh installs linux-perf)"
        );
        return;
    }
    let exe = s.compile("mmapper");
    // lockmeter traces perf and its child, the workload; perf counts the workload's events.
    let out = s.path("k.lmp");
    let ran = lockmeter(
        &s.dir,
        &[
            "record",
            "-q",
            "-o",
            out.to_str().unwrap(),
            "--",
            "perf",
            "stat",
            "-x,",
            "-e",
            "lock:contention_end",
            "--",
            exe.to_str().unwrap(),
            "4",
            "10000",
        ],
    );
    ran.expect_code(0);
    let Some(truth) = perf_count(&ran.stderr, "lock:contention_end") else {
        panic!("no count from perf stat\n{ran}");
    };
    // One file: perf's profile first, then the workload's.
    assert_eq!(s.files_with_prefix("k.lmp").len(), 1, "{ran}");
    let child = split_run(&s, "k.lmp", &ran)[1..].to_vec();
    assert_eq!(child.len(), 1, "one profile for the workload, beside perf's: {child:?}\n{ran}");
    let p = Profile::load(&child[0], &ran);
    p.check_consistency();
    let ours: u64 = p
        .locks()
        .iter()
        .filter(|l| sf(l, "origin") == Some("kernel"))
        .map(|l| u(l, "contended"))
        .sum();
    p.check(
        truth > 100,
        format!("the workload barely contended ({truth} events): too small to compare"),
    );
    let diff = (ours as f64 - truth as f64).abs() / truth as f64;
    p.check(
        diff <= 0.02,
        format!("kernel contention: lockmeter {ours} vs perf {truth} ({:.2}%)", diff * 100.0),
    );
    p.check(
        p.locks()
            .iter()
            .any(|l| sf(l, "name") == Some("mmap_lock") && sf(l, "kind") == Some("kernel-rwsem")),
        "mmap_lock not recognized",
    );
}

#[test]
fn record_without_privilege_says_what_is_needed() {
    let s = Scratch::new("rec-priv");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        let ran = lockmeter(&s.dir, &["record", "--", "true"]);
        assert_ne!(ran.code(), 0);
        assert!(ran.stderr.contains("root") || ran.stderr.contains("eBPF"), "{ran}");
        return;
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("SKIPPED record_without_privilege_says_what_is_needed: no setpriv to drop root");
        return;
    }
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"])
        .arg(lockmeter_bin())
        .args(["record", "-o", "/nonexistent/x.lmp", "--", "true"])
        .current_dir("/");
    let ran = finish("lockmeter record as nobody".into(), spawn(&mut cmd), b"", RUN_LIMIT);
    assert_eq!(ran.code(), 2, "{ran}");
    assert_eq!(ran.stderr.trim().lines().count(), 1, "one line: {ran}");
    assert!(ran.stderr.contains("CAP_BPF") || ran.stderr.contains("no eBPF support"), "{ran}");
}

#[test]
fn run_kernel_gives_one_profile_with_user_and_kernel_locks() {
    let s = Scratch::new("rec-runkernel");
    need_ebpf!(s, "run_kernel_gives_one_profile_with_user_and_kernel_locks");
    let exe = s.compile("kernelmix");
    let (threads, iters) = (4u64, 4000u64);
    let ran =
        run_metered(&s, "m.lmp", &["--kernel"], &exe, &[&threads.to_string(), &iters.to_string()]);
    ran.expect_code(0);
    assert!(ran.stdout.contains(&format!("counter {}", threads * iters)), "{ran}");
    // One file for the one process.
    assert!(s.files_with_prefix("m.lmp.").is_empty(), "{:?}", s.files_with_prefix("m.lmp"));
    let p = Profile::load(&s.path("m.lmp"), &ran);
    p.check_consistency();
    p.eq("collector", sf(p.header(), "collector"), Some("preload+kernel"));
    // The user lock, exact as ever, and the kernel's view of it folded in, not a second lock.
    // main's one acquisition, held while the workers start, beside theirs (the program's count).
    let hot = p.expect_lock("hot_mutex", "mutex", threads * iters + 1);
    assert!(ran.stdout.contains(&format!("acquisitions {}", threads * iters + 1)), "{ran}");
    p.eq("hot_mutex: origin", sf(hot, "origin"), Some("preload"));
    // A waiter may sleep more than once per acquisition (woken, it can lose the race), but
    // only while it waits: the sleeps lie inside the wait the preload measured (two clocks: 1%).
    let (slept, slept_ns) = (u(hot, "kernel_sleeps"), u(hot, "kernel_sleep_ns"));
    // main held it until every worker had started, and 50 ms more: some of them slept in the kernel.
    p.check(slept > 0, "hot_mutex's waiters never slept in the kernel while main held it");
    p.check(
        slept_ns as f64 <= u(hot, "wait_ns_total") as f64 * 1.01 + 10_000.0,
        format!("hot_mutex: slept {slept_ns} ns, longer than it waited"),
    );
    p.check(
        p.locks()
            .iter()
            .filter(|l| sf(l, "origin") == Some("futex"))
            .all(|l| sf(l, "address") != sf(hot, "address")),
        "hot_mutex's futex word is listed as a lock of its own",
    );
    // The kernel's locks beside it.
    p.check(
        p.locks().iter().any(|l| sf(l, "origin") == Some("kernel")),
        "no kernel lock in the profile",
    );
}

/// `run --kernel` waits for the guardians like `run`: a program that SIGKILLs itself after
/// taking its locks leaves a complete profile (the guardian's, written while `run` keeps the
/// zombie), with the kernel's side folded in.
#[test]
fn run_kernel_waits_for_the_guardian_of_a_killed_program() {
    let s = Scratch::new("rec-runkernel-kill");
    need_ebpf!(s, "run_kernel_waits_for_the_guardian_of_a_killed_program");
    let exe = s.compile("kernelmix");
    let (threads, iters) = (4u64, 4000u64);
    let args = [&threads.to_string()[..], &iters.to_string(), "kill9"];
    let ran = run_metered(&s, "k.lmp", &["--kernel"], &exe, &args);
    ran.expect_code(128 + libc::SIGKILL);
    assert!(ran.stdout.contains(&format!("counter {}", threads * iters)), "{ran}");
    let p = Profile::load(&s.path("k.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    p.expect_end("killed", Some(libc::SIGKILL as u64));
    p.eq("collector", sf(p.header(), "collector"), Some("preload+kernel"));
    let hot = p.expect_lock("hot_mutex", "mutex", threads * iters + 1);
    // main held it until every worker had started, and 50 ms more: some of them slept in the kernel.
    p.check(u(hot, "kernel_sleeps") > 0, "no kernel sleeps folded in");
    p.check(
        p.locks().iter().any(|l| sf(l, "origin") == Some("kernel")),
        "no kernel lock in the profile",
    );
}

#[test]
fn lock_holder_preemption_matches_the_programs_own_count() {
    let s = Scratch::new("rec-preempt");
    need_ebpf!(s, "lock_holder_preemption_matches_the_programs_own_count");
    let exe = s.compile("preempt");
    // Twice as many threads as CPUs, each holding the lock for a while: holders get preempted.
    let threads = 2 * std::thread::available_parallelism().map_or(2, |n| n.get()).min(16);
    let ran =
        run_metered(&s, "p.lmp", &["--kernel"], &exe, &[&threads.to_string(), "500", "200000"]);
    ran.expect_code(0);
    let w: Vec<&str> = ran.stdout.split_whitespace().collect();
    let truth: u64 = w
        .iter()
        .position(|x| *x == "preempted_holds")
        .and_then(|i| w.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no preempted_holds in the output\n{ran}"));
    let p = Profile::load(&s.path("p.lmp"), &ran);
    let hot = p.expect_lock("hot_mutex", "mutex", threads as u64 * 500);
    let ours = u(hot, "preempted_holds");
    if truth >= 20 {
        let diff = (ours as f64 - truth as f64).abs() / truth as f64;
        p.check(
            diff <= 0.2,
            format!(
                "preempted holds: lockmeter {ours}, the program {truth} ({:.0}%)",
                diff * 100.0
            ),
        );
    } else {
        eprintln!(
            "lock_holder_preemption: only {truth} preemptions on this machine; checking ours <= {}",
            truth + 10
        );
        p.check(
            ours <= truth + 10,
            format!("preempted holds: lockmeter {ours}, the program {truth}"),
        );
    }
    p.check(u(hot, "preempted_ns") > 0 || ours == 0, "preempted holds without preempted time");
}

//! POSIX semaphores under the preload collector: a C program that uses `sem_t` as a lock, as a
//! producer/consumer signal and in CPython's Condition pattern (`tests/programs/sem.c`, also built
//! against the pre-2.34 symbol versions), and a Python program contending on a
//! `threading.Lock` (`tests/programs/pylock.py`). Counts are compared exactly with what the
//! programs print about themselves.
//!
//! Needs gcc (and objdump for the symbol-version test); the Python test prints SKIPPED without a
//! python3 whose `threading.Lock` is a semaphore (CPython up to 3.12).
//! Run with `cargo test -p lockmeter --test semaphores`.

mod common;

use common::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The `key=value` lines a program printed.
fn values(ran: &Ran) -> HashMap<String, String> {
    ran.stdout
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// A number the program printed (panics with its output when absent).
fn num(v: &HashMap<String, String>, key: &str, ran: &Ran) -> u64 {
    v.get(key)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("the program printed no number `{key}=`\n{ran}"))
}

const THREADS: u64 = 4;
const ITERS: u64 = 4000;
const ITEMS: u64 = 5000;
const ROUNDS: u64 = 200;

/// Runs `exe` (sem.c) under the preload and checks its profile against what it printed.
fn check_sem_program(s: &Scratch, exe: &Path) {
    let args = [THREADS, ITERS, ITEMS, ROUNDS].map(|n| n.to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let ran = run_metered(s, "p.lmp", &[], exe, &args);
    ran.expect_code(0);
    let v = values(&ran);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    // No held-stack overflow either: the consumer, the producer and the Condition-style waiter
    // take semaphores thousands of times that other threads post.
    p.expect_nothing_dropped();
    p.expect_end("exit", None);

    // The binary semaphore used as a lock.
    let lock_acq = num(&v, "lock_acquisitions", &ran);
    p.eq("the program's own count", lock_acq, THREADS * ITERS + 3);
    let l = p.expect_lock("sem_lock", "semaphore", lock_acq);
    p.eq("sem_lock origin", sf(l, "origin"), Some("preload"));
    p.eq(
        "sem_lock trylock_failures (its EAGAINs + its ETIMEDOUTs; EINVAL is none)",
        u(l, "trylock_failures"),
        num(&v, "lock_trywait_eagain", &ran) + num(&v, "lock_timeouts", &ran),
    );
    p.eq(
        "sem_lock holds_timed (posts by the thread that took it)",
        u(l, "holds_timed"),
        num(&v, "lock_own_posts", &ran),
    );
    p.check(u(l, "hold_ns_total") > 0, "sem_lock holds have a time");
    p.eq("sem_lock threads (lockers, holder, main)", u(l, "threads"), THREADS + 2);

    // Producer and consumer: every post comes from the other thread, so there are no holds.
    let items = num(&v, "items_acquisitions", &ran);
    let slots = num(&v, "slots_acquisitions", &ran);
    p.eq("the program's item count", items, ITEMS);
    for (name, n) in [("items", items), ("slots", slots)] {
        let l = p.expect_lock(name, "semaphore", n);
        p.eq(format!("{name} holds_timed (posted by the other thread)"), u(l, "holds_timed"), 0);
        p.eq(format!("{name} trylock_failures"), u(l, "trylock_failures"), 0);
        p.eq(format!("{name} threads"), u(l, "threads"), 1);
    }

    // Condition-style waiter semaphores: one identity each round, initialized in `waiter`, taken
    // twice, posted by the notifier, destroyed: together, the row of their class.
    let rounds = num(&v, "waiter_rounds", &ran);
    p.eq("the program's round count", rounds, ROUNDS);
    for name in ["round_ready", "round_done"] {
        let l = p.expect_lock(name, "semaphore", rounds);
        p.eq(format!("{name} holds_timed"), u(l, "holds_timed"), 0);
    }
    let class = format!("{rounds} heap locks initialized at waiter (sem");
    let waiters: Vec<&serde_json::Value> =
        p.locks().iter().filter(|l| sf(l, "name").is_some_and(|n| n.starts_with(&class))).collect();
    p.eq(format!("rows named {class}..."), waiters.len() as u64, 1);
    for l in &waiters {
        p.eq("waiter semaphore kind", sf(l, "kind"), Some("semaphore"));
        p.eq("waiter semaphore acquisitions", u(l, "acquisitions"), 2 * rounds);
        p.eq("waiter semaphore holds_timed (posted by the notifier)", u(l, "holds_timed"), 0);
    }
    // The waiter's held stack did not fill with those: its later mutex holds are all timed.
    let after = p.expect_lock("after", "mutex", num(&v, "after_acquisitions", &ran));
    p.eq("after holds_timed", u(after, "holds_timed"), u(after, "acquisitions"));

    // Interrupted, cancelled and cancelled-before-trying waits acquired nothing and failed
    // nothing.
    for name in ["intr", "cancelled", "pending"] {
        p.eq(format!("{name} acquisitions"), p.acq(name), 0);
        let fails: u64 = p.locks_named(name).iter().map(|l| u(l, "trylock_failures")).sum();
        p.eq(format!("{name} trylock_failures"), fails, 0);
    }

    let total = lock_acq + items + slots + 2 * rounds + 2 * rounds + rounds;
    p.eq("totals.acquisitions", p.totals("acquisitions"), total);
    // The waiter semaphores of all rounds are one row, their class's.
    p.eq("totals.locks", p.totals("locks"), 1 + 2 + 2 + 1 + 1);
}

#[test]
fn semaphores_used_as_locks_and_as_signals_are_counted_exactly() {
    let s = Scratch::new("sem");
    let exe = s.compile("sem");
    check_sem_program(&s, &exe);
}

/// The symbol version a program built against glibc < 2.34 binds the sem_* functions to.
fn old_version() -> &'static str {
    if cfg!(target_arch = "aarch64") { "GLIBC_2.17" } else { "GLIBC_2.2.5" }
}

#[test]
fn programs_bound_to_the_pre_2_34_symbol_versions_are_metered_the_same() {
    let s = Scratch::new("sem-old");
    let exe = s.compile_with("sem", "sem_old", &["-DOLD_SYMVER"]);
    let out = Command::new("objdump")
        .arg("-T")
        .arg(&exe)
        .output()
        .expect("cannot run objdump (binutils; .ci/install.sh installs it)");
    assert!(out.status.success(), "objdump -T failed: {}", String::from_utf8_lossy(&out.stderr));
    let syms = String::from_utf8_lossy(&out.stdout);
    let bound = |name: &str, version: &str| {
        syms.lines().any(|l| l.contains(version) && l.split_whitespace().last() == Some(name))
    };
    for name in ["sem_wait", "sem_trywait", "sem_timedwait", "sem_post", "sem_init", "sem_destroy"]
    {
        assert!(bound(name, old_version()), "{name} is not bound to {}:\n{syms}", old_version());
    }
    assert!(bound("sem_clockwait", "GLIBC_2.30"), "sem_clockwait@GLIBC_2.30 missing:\n{syms}");
    check_sem_program(&s, &exe);
}

/// The real python3 interpreter (not a launcher script that execs it) and its version.
fn python() -> Option<(PathBuf, (u32, u32))> {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable); print(*sys.version_info[:2])"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    let exe = lines.next().filter(|e| !e.is_empty()).map(PathBuf::from)?;
    let mut ver = lines.next()?.split_whitespace().map(|x| x.parse::<u32>());
    let (Some(Ok(major)), Some(Ok(minor))) = (ver.next(), ver.next()) else { return None };
    Some((exe, (major, minor)))
}

#[test]
fn python_threading_lock_contention_is_metered_as_a_semaphore() {
    let Some((py, (major, minor))) = python() else {
        println!("SKIPPED python_threading_lock_contention_is_metered_as_a_semaphore: no python3");
        return;
    };
    if (major, minor) >= (3, 13) {
        println!(
            "SKIPPED python_threading_lock_contention_is_metered_as_a_semaphore: Python \
             {major}.{minor}'s threading.Lock is a PyMutex, not a POSIX semaphore"
        );
        return;
    }
    let s = Scratch::new("pylock");
    let script = workspace().join("crates/cli/tests/programs/pylock.py");
    let (threads, iters) = (4u64, 20000u64);
    let ran = run_metered(
        &s,
        "p.lmp",
        &[],
        &py,
        &[script.to_str().unwrap(), &threads.to_string(), &iters.to_string()],
    );
    ran.expect_code(0);
    let v = values(&ran);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    p.expect_end("_exit", None);
    p.eq("the program's counter", num(&v, "counter", &ran), threads * iters);
    let want = num(&v, "lock_acquisitions", &ran);
    p.check(want >= threads * iters, "the program counts every `with lock`");

    let sems: Vec<&serde_json::Value> =
        p.locks().iter().filter(|l| sf(l, "kind") == Some("semaphore")).collect();
    let over_sems: u64 = sems.iter().map(|l| u(l, "acquisitions")).sum();
    p.check(
        over_sems >= want,
        format!("semaphore acquisitions {over_sems} >= the program's {want} (Python locks too)"),
    );
    match v.get("sem_addr").map(String::as_str) {
        Some(a) if a.starts_with("0x") => {
            // The counter lock's identity: the newest one at its sem_t address (the program never
            // frees it, so none came after it).
            let addr = u64::from_str_radix(&a[2..], 16).expect("sem_addr is hex");
            let at = |l: &&&serde_json::Value| {
                sf(l, "address")
                    .and_then(|x| u64::from_str_radix(x.trim_start_matches("0x"), 16).ok())
                    == Some(addr)
            };
            let Some(l) = sems.iter().filter(at).max_by_key(|l| u(l, "generation")) else {
                p.fail(format!("no semaphore at the counter lock's address {a}"))
            };
            p.eq("counter lock acquisitions", u(l, "acquisitions"), want);
            p.eq(
                "counter lock holds_timed (every `with` releases in its own thread)",
                u(l, "holds_timed"),
                want,
            );
            p.eq("counter lock threads (workers and main)", u(l, "threads"), threads + 1);
        }
        _ => {
            let why = v.get("why").map_or("?", String::as_str);
            println!("note: the counter lock's sem_t is unknown ({why}): checking the sums only");
            p.check(
                sems.iter().any(|l| u(l, "acquisitions") >= threads * iters),
                format!("one semaphore has at least {} acquisitions", threads * iters),
            );
        }
    }
}

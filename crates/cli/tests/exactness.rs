//! End-to-end tests: exact counts per lock kind. Each C program takes its locks a known number
//! of times (static, striped, robust, PI, adaptive, error-checking and recursive mutexes,
//! rwlocks, spinlocks, condition variables, trylocks and timed locks, contention built on
//! purpose, locks taken in a signal handler, one address re-initialized as other kinds, C11
//! `mtx_*` and `cnd_*`, C++ `std::mutex`, `std::shared_mutex`, `std::recursive_mutex` and
//! `std::timed_mutex`) and runs under `lockmeter run`; the profile must hold exactly those counts,
//! and the program must behave as it does without the collector.
//!
//! Ground-truth programs (`tests/programs/`): condvar.c, contended.c, hammer.c, handoff.c, kinds.c,
//! reuse.c, rwlock.c, semantics.c, sighandler.c, spin.c, striped.c, trylock.c, c11mtx.c,
//! cxxlocks.cpp, cpuhop.c.
//!
//! Needs gcc and g++. Run with `cargo test -p lockmeter --test exactness`; the harness builds the
//! preload library itself (`cargo build -p lockmeter-preload`) once per test process.

mod common;

use common::*;
use std::time::Duration;

#[test]
fn several_static_and_striped_locks_are_counted_exactly() {
    let s = Scratch::new("striped");
    let exe = s.compile("striped");
    let (t, m) = (6u64, 8000u64);
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[&t.to_string(), &m.to_string()]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    p.expect_end("exit", None);

    let a = p.expect_lock("lock_a", "mutex", t * m);
    p.eq("lock_a generation", u(a, "generation"), 0);
    p.expect_lock("lock_b", "mutex", t * m / 4);
    let init = p.expect_lock("init_lock", "mutex", t * m / 2);
    p.eq("init_lock generation (initialized at run time)", u(init, "generation"), 1);
    for k in 0..8 {
        let name = elem("stripes", k, MUTEX_SIZE);
        let l = p.expect_lock(&name, "mutex", t * m / 8);
        p.eq(format!("{name} generation"), u(l, "generation"), 0);
    }
    let expected_total = t * m + t * m / 4 + t * m / 2 + t * m;
    p.eq("totals.acquisitions", p.totals("acquisitions"), expected_total);
    p.eq("totals.locks", p.totals("locks"), 11);
    p.eq(
        "read+write (no rwlock)",
        p.totals("read_acquisitions") + p.totals("write_acquisitions"),
        0,
    );
    p.eq("trylock failures", p.totals("trylock_failures"), 0);
    // Hold timing on: every hold is timed (no held-stack overflow at depth 2).
    p.eq("totals.holds_timed", p.totals("holds_timed"), expected_total);
    p.check(p.totals("hold_ns") > 0, "hold_ns > 0 with hold timing on");

    // One entry per worker thread (the main thread only initialized init_lock), each with its
    // exact share.
    p.eq("threads", p.threads().len() as u64, t);
    for th in p.threads() {
        p.eq(
            format!("thread {} acquisitions", th["tid"]),
            u(th, "acquisitions"),
            expected_total / t,
        );
        p.check(u(th, "tid") > 0, "thread tid known");
    }
    let mut names: Vec<&str> = p.threads().iter().filter_map(|t| sf(t, "name")).collect();
    names.sort_unstable();
    let want: Vec<String> = (0..t).map(|i| format!("striper-{i}")).collect();
    p.eq("thread names (pthread_setname_np)", names, want.iter().map(String::as_str).collect());
    // Sites name the worker function.
    for l in p.locks() {
        for site in l["sites"].as_array().into_iter().flatten() {
            let f = sf(site, "function").unwrap_or("");
            p.check(
                f.starts_with("worker+0x"),
                format!("site {f} of {} is in worker()", l["name"]),
            );
        }
    }
    let h = p.header();
    p.eq("header.cmdline", h["cmdline"].as_array().map(|a| a.len()), Some(3));
    p.eq("header.hold_timing", sf(h, "hold_timing"), Some("on"));
}

#[test]
fn sixty_four_threads_on_one_lock_lose_and_invent_nothing() {
    let s = Scratch::new("hammer");
    let exe = s.compile("hammer");
    let (t, m) = (64u64, 20_000u64);
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[&t.to_string(), &m.to_string()]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    let l = p.expect_lock("big_lock", "mutex", t * m);
    p.eq("totals.acquisitions", p.totals("acquisitions"), t * m);
    p.eq("totals.locks", p.totals("locks"), 1);
    p.eq("big_lock threads", u(l, "threads"), t);
    p.check(u(l, "owner_changes") < t * m, "owner_changes < acquisitions");
    p.eq("threads listed", p.threads().len() as u64, t);
    for th in p.threads() {
        p.eq(format!("thread {} acquisitions", th["tid"]), u(th, "acquisitions"), m);
    }
    // Per-CPU acquisitions cover every acquisition exactly (nothing dropped).
    let cpus: u64 =
        p.json["cpus"].as_array().into_iter().flatten().map(|c| u(c, "acquisitions")).sum();
    p.eq("sum of cpus[].acquisitions", cpus, t * m);
    p.expect_all_holds_timed(&[]);
}

#[test]
fn robust_pi_adaptive_and_errorcheck_mutexes_under_contention_are_exact() {
    let s = Scratch::new("kinds");
    let exe = s.compile("kinds");
    let (t, m) = (6u64, 5000u64);
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[&t.to_string(), &m.to_string()]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    for name in ["robust_m", "pi_m", "pi_robust", "adaptive_m", "ec_m"] {
        let l = p.expect_lock(name, "mutex", t * m);
        p.eq(format!("{name} trylock_failures"), u(l, "trylock_failures"), 0);
        p.eq(format!("{name} generation"), u(l, "generation"), 1);
    }
    p.expect_lock("robust_rec", "mutex", 2 * t * m);
    // The owner died holding it; 3 waiters; one got EOWNERDEAD (an acquisition).
    p.expect_lock("owner_dead", "mutex", 4);
    p.expect_lock("seen_lock", "mutex", 1);
    p.expect_all_holds_timed(&[("owner_dead", 1)]);
}

#[test]
fn rwlock_read_write_split_and_failures_are_exact() {
    let s = Scratch::new("rwlock");
    let exe = s.compile("rwlock");
    let n = 1000u64;
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[&n.to_string()]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    let reads = 3 * n + 1 + n;
    let writes = 3 * n + 1;
    let l = p.expect_lock("table_lock", "rwlock", reads + writes);
    p.eq("table_lock read_acquisitions", u(l, "read_acquisitions"), reads);
    p.eq("table_lock write_acquisitions", u(l, "write_acquisitions"), writes);
    p.eq("table_lock trylock_failures", u(l, "trylock_failures"), 3 * n + 5);
    p.eq("table_lock contended (never blocked by construction)", u(l, "contended"), 0);
    p.eq("table_lock generation", u(l, "generation"), 0);
    p.eq("totals.read_acquisitions", p.totals("read_acquisitions"), reads);
    p.eq("totals.write_acquisitions", p.totals("write_acquisitions"), writes);
    p.eq("threads", p.threads().len(), 2);
    let helper = p.threads().iter().map(|t| u(t, "acquisitions")).min();
    p.eq("the helper thread's acquisitions (1 read + 1 write)", helper, Some(2));
    p.expect_all_holds_timed(&[]);
}

#[test]
fn spinlocks_are_counted_with_their_kind() {
    let s = Scratch::new("spin");
    let exe = s.compile("spin");
    let (t, m, tries) = (4u64, 10_000u64, 100u64);
    let ran =
        run_metered(&s, "p.lmp", &[], &exe, &[&t.to_string(), &m.to_string(), &tries.to_string()]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    let l = p.expect_lock("spin", "spinlock", t * m + 2);
    p.eq("spin trylock_failures", u(l, "trylock_failures"), tries);
    p.eq("spin generation", u(l, "generation"), 1);
    for k in 0..4 {
        // sizeof(pthread_spinlock_t) = 4
        let name = elem("spins", k, 4);
        let l = p.expect_lock(&name, "spinlock", m * t / 4);
        p.eq(format!("{name} generation"), u(l, "generation"), 1);
    }
    p.eq("totals.acquisitions", p.totals("acquisitions"), 2 * t * m + 2);
    p.expect_all_holds_timed(&[]);
}

/// Parses "pp_lock locks=L waits=W" from the condvar program.
fn pingpong_counts(out: &str) -> (u64, u64) {
    let line = out.lines().find(|l| l.starts_with("pp_lock ")).expect("no pp_lock line");
    let get = |k: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(k))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {k} in {line}"))
    };
    (get("locks="), get("waits="))
}

#[test]
fn condvar_waits_reacquire_the_mutex_exactly_once_each() {
    let s = Scratch::new("condvar");
    let exe = s.compile("condvar");
    let (rounds, timeouts) = (2000u64, 5u64);
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[&rounds.to_string(), &timeouts.to_string()]);
    ran.expect_code(0);
    let (locks, waits) = pingpong_counts(&ran.stdout);
    assert_eq!(locks, 2 * rounds, "{ran}");
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.expect_nothing_dropped();
    let pp = p.expect_lock("pp_lock", "mutex", locks + waits);
    p.eq("pp_lock cond_waits", u(pp, "cond_waits"), waits);
    if waits > 0 {
        p.check(u(pp, "cond_wait_ns") > 0, "pp_lock cond_wait_ns > 0");
    }
    let to = p.expect_lock("to_lock", "mutex", 1 + timeouts + 2);
    p.eq(
        "to_lock cond_waits (timed-out timedwait and clockwait re-acquire the mutex)",
        u(to, "cond_waits"),
        timeouts + 2,
    );
    p.check(u(to, "cond_wait_ns") > 0, "to_lock cond_wait_ns > 0");
    p.eq("to_lock contended", u(to, "contended"), 0);
    p.expect_all_holds_timed(&[]);
}

#[test]
fn failed_cond_wait_is_not_an_acquisition() {
    // pthread_cond_timedwait on an error-checking mutex the caller does not hold returns EPERM
    // at once: the mutex was neither released nor re-acquired.
    let s = Scratch::new("condvar-eperm");
    let exe = s.compile("condvar");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &["10", "1"]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    let ec = p.expect_lock("ec_lock", "mutex", 1);
    p.eq("ec_lock cond_waits", u(ec, "cond_waits"), 0);
    p.check_consistency();
}

#[test]
fn a_blocked_acquisition_is_one_contended_acquisition_with_a_wait() {
    let s = Scratch::new("contended");
    let exe = s.compile("contended");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    for (name, kind, reads, writes) in [
        ("c_mutex", "mutex", 0, 0),
        ("c_timed", "mutex", 0, 0),
        ("c_rw_read", "rwlock", 1, 1),
        ("c_rw_write", "rwlock", 1, 1),
        ("c_spin", "spinlock", 0, 0),
        ("c_robust", "mutex", 0, 0),
        ("c_robust_rec", "mutex", 0, 0),
        ("c_pi", "mutex", 0, 0),
    ] {
        let l = p.expect_lock(name, kind, 2);
        p.eq(format!("{name} contended"), u(l, "contended"), 1);
        p.eq(format!("{name} read_acquisitions"), u(l, "read_acquisitions"), reads);
        p.eq(format!("{name} write_acquisitions"), u(l, "write_acquisitions"), writes);
        p.eq(format!("{name} trylock_failures"), u(l, "trylock_failures"), 0);
        p.check(u(l, "wait_ns_total") > 0, format!("{name}: wait_ns_total > 0"));
        p.eq(
            format!("{name} wait_ns_max == total (one wait)"),
            u(l, "wait_ns_max"),
            u(l, "wait_ns_total"),
        );
        p.check(
            u(l, "wait_ns_total") < u(p.header(), "duration_ns"),
            format!("{name}: the wait is shorter than the run"),
        );
        // The helper's hold was wanted by main (FreeBSD cnt_hold), and main found it held.
        p.eq(format!("{name} cnt_hold"), u(l, "cnt_hold"), 1);
        p.eq(format!("{name} cnt_lock"), u(l, "cnt_lock"), 1);
        // The helper held it for at least 200 ms (usleep inside the hold): a sanity check of
        // the clock calibration, not a timing measurement.
        let hold_max = u(l, "hold_ns_max");
        p.check(
            (150_000_000..u(p.header(), "duration_ns")).contains(&hold_max),
            format!("{name}: hold_ns_max {hold_max} >= 150 ms (slept 200) and < the run"),
        );
    }
    for name in ["c_mutex", "c_timed", "c_spin", "c_robust", "c_robust_rec", "c_pi"] {
        p.eq(format!("{name} owner_changes"), u(p.lock(name), "owner_changes"), 1);
    }
    p.eq("totals.contended", p.totals("contended"), 8);
}

#[test]
fn a_mutex_released_by_another_thread_does_not_poison_hold_timing() {
    let s = Scratch::new("handoff");
    let exe = s.compile("handoff");
    let (n, k) = (200u64, 100u64);
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[&n.to_string(), &k.to_string()]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_lock("handoff_lock", "mutex", n);
    p.expect_lock("handoff_spin", "spinlock", n);
    let other = p.expect_lock("other_lock", "mutex", k);
    p.eq("other_lock holds_timed", u(other, "holds_timed"), k);
    p.eq("dropped.holds (no thread ever held more than 1 lock)", p.dropped("holds"), 0);
}

#[test]
fn trylock_ebusy_and_timedlock_etimedout_are_exact() {
    let s = Scratch::new("trylock");
    let exe = s.compile("trylock");
    let tries = 500u64;
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[&tries.to_string()]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    let g = p.expect_lock("guard", "mutex", 1 + tries + 2);
    p.eq("guard trylock_failures (EBUSY + ETIMEDOUT)", u(g, "trylock_failures"), tries + 3);
    p.eq("guard contended", u(g, "contended"), 0);
    p.eq("guard cnt_hold (the helper's one hold was wanted)", u(g, "cnt_hold"), 1);
    p.expect_all_holds_timed(&[]);
    p.eq("threads", p.threads().len(), 2);
}

#[test]
fn recursive_errorcheck_and_robust_mutexes_behave_as_without_the_preload() {
    let s = Scratch::new("semantics");
    let exe = s.compile("semantics");
    let n = 100u64;
    let plain = run_plain(&s.dir, &exe, &[&n.to_string()]);
    plain.expect_code(0);
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[&n.to_string()]);
    assert_eq!(ran.status.code(), plain.status.code(), "exit status differs\n{plain}\n{ran}");
    assert_eq!(ran.stdout, plain.stdout, "output differs\n{plain}\n{ran}");
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    let rec = p.expect_lock("rec_lock", "mutex", 3 * n);
    p.eq("rec_lock generation", u(rec, "generation"), 1);
    let ec = p.expect_lock("ec_lock", "mutex", n);
    p.eq("ec_lock trylock_failures (EBUSY by the owner)", u(ec, "trylock_failures"), n);
    let normal = p.expect_lock("normal_lock", "mutex", n);
    p.eq("normal_lock trylock_failures", u(normal, "trylock_failures"), n);
    p.expect_lock("robust_lock", "mutex", 3);
    p.expect_lock("errno_lock", "mutex", 2 * n);
    let rw = p.expect_lock("rw", "rwlock", 3 * n);
    p.eq("rw read_acquisitions", u(rw, "read_acquisitions"), 2 * n);
    p.eq("rw write_acquisitions", u(rw, "write_acquisitions"), n);
    p.eq("rw trylock_failures (EDEADLK is no failed trylock)", u(rw, "trylock_failures"), 0);
    p.eq("bad_lock (EINVAL) acquisitions", p.acq("bad_lock"), 0);
    // robust_lock: the thread that died holding it never released its hold.
    p.expect_all_holds_timed(&[("robust_lock", 1)]);
}

#[test]
fn robust_not_recoverable_is_transparent() {
    let s = Scratch::new("notrecoverable");
    let exe = s.compile("semantics");
    let plain = run_plain(&s.dir, &exe, &["10", "notrecoverable"]);
    plain.expect_code(0);
    let out = s.path("p.lmp");
    let ran = lockmeter_with(
        &s.dir,
        &[
            "run",
            "-q",
            "-o",
            out.to_str().unwrap(),
            "--",
            exe.to_str().unwrap(),
            "10",
            "notrecoverable",
        ],
        b"",
        Duration::from_secs(10),
    );
    assert_eq!(ran.stdout, plain.stdout, "output differs\n{plain}\n{ran}");
    ran.expect_code(0);
    let p = Profile::load(&out, &ran);
    p.expect_lock("dead_lock", "mutex", 2);
    p.check_consistency();
}

#[test]
fn locks_taken_in_a_signal_handler_are_counted() {
    let s = Scratch::new("sighandler");
    let exe = s.compile("sighandler");
    let k = 200u64;
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[&k.to_string()]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    p.expect_lock("main_lock", "mutex", k);
    let l = p.expect_lock("sig_lock", "mutex", k);
    let f = l["sites"][0]["function"].as_str().unwrap_or("");
    p.check(f.starts_with("on_usr1+0x"), format!("sig_lock site {f} is in the handler"));
}

#[test]
fn one_address_reinitialized_as_other_kinds_keeps_identities_apart() {
    let s = Scratch::new("reuse");
    let exe = s.compile("reuse");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    let mut slot: Vec<(u64, String, u64, u64, u64)> = p
        .locks_named("slot")
        .iter()
        .map(|l| {
            (
                u(l, "generation"),
                sf(l, "kind").unwrap_or("").to_string(),
                u(l, "acquisitions"),
                u(l, "read_acquisitions"),
                u(l, "write_acquisitions"),
            )
        })
        .collect();
    slot.sort();
    // The live identity keeps its row; the two that ended (destroyed) joined their classes.
    let want: Vec<(u64, String, u64, u64, u64)> = vec![(5, "mutex".into(), 30, 0, 0)];
    p.eq("slot identities (generation, kind, acquisitions, reads, writes)", slot, want);
    let class = |prefix: &str, kind: &str| -> (u64, u64, u64) {
        let v: Vec<&serde_json::Value> = p
            .locks()
            .iter()
            .filter(|l| sf(l, "kind") == Some(kind))
            .filter(|l| sf(l, "name").is_some_and(|n| n.starts_with(prefix)))
            .collect();
        p.eq(format!("{kind} rows named {prefix}..."), v.len(), 1);
        p.eq(format!("{prefix}: generation"), u(v[0], "generation"), 0);
        let l = v[0];
        (u(l, "acquisitions"), u(l, "read_acquisitions"), u(l, "write_acquisitions"))
    };
    p.eq(
        "slot's first mutex, in its class",
        class("1 lifetime of slot initialized at main (reuse.c:19)", "mutex"),
        (10, 0, 0),
    );
    p.eq(
        "slot's rwlock, in its class",
        class("1 lifetime of slot initialized at main (reuse.c:25)", "rwlock"),
        (25, 20, 5),
    );
    let addrs: std::collections::HashSet<&str> =
        p.locks_named("slot").iter().filter_map(|l| sf(l, "address")).collect();
    p.eq("slot: one address", addrs.len(), 1);
    // `plain` initialized again without a destroy: the first identity ended, in its class.
    let plain: Vec<(u64, u64)> =
        p.locks_named("plain").iter().map(|l| (u(l, "generation"), u(l, "acquisitions"))).collect();
    p.eq("plain's live identity (generation, acquisitions)", plain, vec![(2, 8)]);
    p.eq(
        "plain's first identity, in its class",
        class("1 lifetime of plain initialized at main (reuse.c:46)", "mutex").0,
        7,
    );
    p.eq("locks", p.locks().len() as u64, 6);
    let busy = p.expect_lock("busy_lock", "mutex", 2);
    p.eq("busy_lock generation (a failed destroy changes nothing)", u(busy, "generation"), 0);
    p.expect_all_holds_timed(&[]);
}

#[test]
fn c11_mtx_and_cnd_are_counted_exactly() {
    // glibc's mtx_lock calls its internal __pthread_mutex_lock, which no pthread hook sees: the
    // C11 functions have hooks of their own.
    let s = Scratch::new("c11");
    let exe = s.compile("c11mtx");
    let (t, m, tries, rounds) = (4u64, 8000u64, 100u64, 1000u64);
    let args = [t, m, tries, rounds].map(|v| v.to_string());
    let ran = run_metered(&s, "p.lmp", &[], &exe, &args.each_ref().map(String::as_str));
    ran.expect_code(0);
    assert!(ran.stdout.contains(&format!("ok {} timed {} rec {}", t * m, t * m / 4, t * m / 8)));
    let line = ran.stdout.lines().find(|l| l.starts_with("cv ")).unwrap_or_else(|| panic!("{ran}"));
    let get = |k: &str| -> u64 {
        line.split_whitespace().find_map(|w| w.strip_prefix(k)?.parse().ok()).unwrap()
    };
    let (locks, waits) = (get("locks="), get("waits="));
    assert_eq!(locks, 2 * rounds, "{ran}");
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    p.expect_lock("c11_lock", "mutex", t * m);
    p.expect_lock("c11_timed", "mutex", t * m / 4);
    p.expect_lock("c11_rec", "mutex", 2 * t * m / 8);
    let tr = p.expect_lock("c11_try", "mutex", 2);
    p.eq(
        "c11_try trylock_failures (thrd_busy, thrd_timedout)",
        u(tr, "trylock_failures"),
        tries + 1,
    );
    p.eq("c11_try contended (the timed lock waited)", u(tr, "contended"), 0);
    p.expect_lock("hold_gate", "mutex", 2);
    let cv = p.expect_lock("c11_cv_lock", "mutex", locks + waits);
    p.eq("c11_cv_lock cond_waits", u(cv, "cond_waits"), waits);
    p.expect_all_holds_timed(&[]);
}

#[test]
fn cxx_std_mutex_shared_mutex_recursive_and_timed_are_counted_exactly() {
    let s = Scratch::new("cxx");
    let exe = s.compile_cxx("cxxlocks");
    let (t, m, tries) = (4u64, 8000u64, 100u64);
    let ran =
        run_metered(&s, "p.lmp", &[], &exe, &[&t.to_string(), &m.to_string(), &tries.to_string()]);
    ran.expect_code(0);
    let (writes, reads) = (t * m / 8, t * m - t * m / 8);
    let want =
        format!("ok {} reads {reads} writes {writes} rec {} timed {}", t * m, t * m / 4, t * m / 4);
    assert!(ran.stdout.contains(&want), "no '{want}'\n{ran}");
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    p.expect_lock("cxx_mutex", "mutex", t * m);
    let sh = p.expect_lock("cxx_shared", "rwlock", t * m);
    p.eq("cxx_shared read_acquisitions", u(sh, "read_acquisitions"), reads);
    p.eq("cxx_shared write_acquisitions", u(sh, "write_acquisitions"), writes);
    p.expect_lock("cxx_rec", "mutex", 2 * t * m / 4);
    p.expect_lock("cxx_timed", "mutex", t * m / 4);
    let tr = p.expect_lock("cxx_try", "mutex", 2);
    p.eq("cxx_try trylock_failures", u(tr, "trylock_failures"), tries);
}

#[test]
fn per_cpu_counts_are_exact_when_threads_change_cpus() {
    let s = Scratch::new("cpuhop");
    let exe = s.compile("cpuhop");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &["3", "12"]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    // The program's own count of its acquisitions on each CPU (it pins itself to each in turn).
    let mut want: Vec<(u64, u64)> = Vec::new();
    for l in ran.stdout.lines() {
        let f: Vec<u64> = l.split(' ').skip(1).filter_map(|x| x.parse().ok()).collect();
        if l.starts_with("cpu ") && f.len() == 2 {
            want.push((f[0], f[1]));
        }
    }
    p.check(!want.is_empty(), "the program printed its per-CPU counts");
    let got: Vec<(u64, u64)> = p.json["cpus"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| (u(c, "cpu"), u(c, "acquisitions")))
        .filter(|&(_, a)| a > 0)
        .collect();
    p.eq("cpus[] (cpu, acquisitions)", got, want);
}

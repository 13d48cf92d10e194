//! End-to-end tests: real C programs with known lock counts (`tests/programs/*.c`), run under
//! `lockmeter run` (the LD_PRELOAD collector), whose profiles are checked for exact counts.
//!
//! Needs gcc. Run with `cargo test -p lockmeter --test e2e`; the harness builds the preload
//! library itself (`cargo build -p lockmeter-preload`) once per test process.

mod common;

use common::*;
use std::time::Duration;

/// sizeof(pthread_mutex_t) on x86_64 and aarch64 glibc.
const MUTEX_SIZE: u64 = 40;

/// The name the report gives to element `i` of a static array `base` of `size`-byte elements.
fn elem(base: &str, i: u64, size: u64) -> String {
    if i == 0 { base.to_string() } else { format!("{base}+{:#x}", i * size) }
}

// ---- 1. several static locks and striped locks ----

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
fn hold_timing_off_and_sampled_keep_the_counts() {
    let s = Scratch::new("hold");
    let exe = s.compile("striped");
    let (t, m) = (4u64, 4000u64);
    let args = [t.to_string(), m.to_string()];
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let total = t * m + t * m / 4 + t * m / 2 + t * m;

    let ran = run_metered(&s, "off.lmp", &["--hold", "off"], &exe, &args);
    ran.expect_code(0);
    let p = Profile::load(&s.path("off.lmp"), &ran);
    p.check_consistency();
    p.eq("header.hold_timing", sf(p.header(), "hold_timing"), Some("off"));
    p.eq("totals.acquisitions", p.totals("acquisitions"), total);
    p.eq("totals.holds_timed", p.totals("holds_timed"), 0);
    p.eq("totals.hold_ns", p.totals("hold_ns"), 0);
    for l in p.locks() {
        p.eq(format!("{} hold_ns_total", l["name"]), u(l, "hold_ns_total"), 0);
    }
    p.expect_lock("lock_a", "mutex", t * m);
    p.expect_lock(&elem("stripes", 7, MUTEX_SIZE), "mutex", t * m / 8);

    let ran = run_metered(&s, "sampled.lmp", &["--hold", "sample:4"], &exe, &args);
    ran.expect_code(0);
    let p = Profile::load(&s.path("sampled.lmp"), &ran);
    p.check_consistency();
    p.eq("header.hold_timing", sf(p.header(), "hold_timing"), Some("sampled"));
    p.eq("header.hold_sample_every", p.header()["hold_sample_every"].as_u64(), Some(4));
    p.eq("totals.acquisitions", p.totals("acquisitions"), total);
    // One hold in 4 per thread (a per-thread counter): between total/4 - t and total/4 + t.
    let timed = p.totals("holds_timed");
    p.check(
        timed + t >= total / 4 && timed <= total / 4 + t,
        format!("holds_timed {timed} is about a quarter of {total}"),
    );
}

#[test]
fn stack_options_keep_the_counts() {
    let s = Scratch::new("frames");
    let exe = s.compile("striped");
    let (t, m) = (4u64, 4000u64);
    let total = t * m + t * m / 4 + t * m / 2 + t * m;
    for (i, opts) in [
        &["--frames", "0"][..],
        &["--frames", "32"][..],
        &["--frames", "8", "--stack-sample", "10"][..],
    ]
    .into_iter()
    .enumerate()
    {
        let out = format!("p{i}.lmp");
        let ran = run_metered(&s, &out, opts, &exe, &[&t.to_string(), &m.to_string()]);
        ran.expect_code(0);
        let p = Profile::load(&s.path(&out), &ran);
        p.check_consistency();
        p.eq(format!("{opts:?}: totals.acquisitions"), p.totals("acquisitions"), total);
        p.expect_lock("lock_a", "mutex", t * m);
        p.expect_lock("lock_b", "mutex", t * m / 4);
        p.expect_lock(&elem("stripes", 3, MUTEX_SIZE), "mutex", t * m / 8);
        p.eq(format!("{opts:?}: dropped.acquisitions"), p.dropped("acquisitions"), 0);
    }
}

/// Rows of a CSV report (no quoted commas in these profiles) as maps of column -> cell.
fn csv_rows(text: &str) -> Vec<std::collections::HashMap<String, String>> {
    let mut lines = text.lines();
    let head: Vec<String> = lines.next().unwrap_or("").split(',').map(str::to_string).collect();
    lines.map(|l| head.iter().cloned().zip(l.split(',').map(str::to_string)).collect()).collect()
}

#[test]
fn report_views_and_formats_agree_on_the_counts() {
    let s = Scratch::new("views");
    let exe = s.compile("striped");
    let (t, m) = (4u64, 800u64);
    let total = t * m + t * m / 4 + t * m / 2 + t * m;
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[&t.to_string(), &m.to_string()]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    let f = s.path("p.lmp");
    let f = f.to_str().unwrap();
    let sum = |rows: &[std::collections::HashMap<String, String>]| -> u64 {
        rows.iter().map(|r| r["acquisitions"].parse::<u64>().unwrap()).sum()
    };
    for (by, rows_expected) in [("lock", Some(11)), ("site", None), ("thread", Some(t as usize))] {
        let r = lockmeter(&s.dir, &["report", f, "--format", "csv", "--by", by]);
        r.expect_code(0);
        let rows = csv_rows(&r.stdout);
        p.eq(format!("csv --by {by}: sum of acquisitions"), sum(&rows), total);
        if let Some(n) = rows_expected {
            p.eq(format!("csv --by {by}: rows"), rows.len(), n);
        }
    }
    let r = lockmeter(&s.dir, &["report", f, "--format", "csv", "--by", "cpu"]);
    r.expect_code(0);
    p.eq("csv --by cpu: sum of acquisitions", sum(&csv_rows(&r.stdout)), total);

    let r = lockmeter(&s.dir, &["report", f]);
    r.expect_code(0);
    assert!(r.stdout.contains("lock_a") && r.stdout.contains("stripes+0x28"), "{r}");

    // --top cuts locks[], not totals.
    let r = lockmeter(&s.dir, &["report", f, "--format", "json", "--top", "3"]);
    r.expect_code(0);
    let j: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    p.eq("--top 3: locks", j["locks"].as_array().map(Vec::len), Some(3));
    p.eq("--top 3: totals.acquisitions", u(&j["totals"], "acquisitions"), total);

    // --lock filters by name.
    let r = lockmeter(&s.dir, &["report", f, "--format", "json", "--lock", "stripes"]);
    r.expect_code(0);
    let j: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    let locks = j["locks"].as_array().cloned().unwrap_or_default();
    p.eq("--lock stripes: locks", locks.len(), 8);
    p.eq(
        "--lock stripes: acquisitions",
        locks.iter().map(|l| u(l, "acquisitions")).sum::<u64>(),
        t * m,
    );

    // --no-symbols: the same counts, no static names.
    let r = lockmeter(&s.dir, &["report", f, "--format", "json", "--no-symbols"]);
    r.expect_code(0);
    let j: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    p.eq("--no-symbols: totals.acquisitions", u(&j["totals"], "acquisitions"), total);
    let named = j["locks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|l| {
            sf(l, "name").is_some_and(|n| n.starts_with("lock_a") || n.starts_with("stripes"))
        })
        .count();
    p.eq("--no-symbols: locks named by symbols", named, 0);
}

// ---- 2. many threads, one lock ----

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

// ---- 3. rwlocks ----

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

// ---- 4. spinlocks ----

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

// ---- 5. condition variables ----

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

// ---- contention by construction ----

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
fn holds_beyond_the_held_stack_are_counted_as_dropped_holds() {
    let s = Scratch::new("nested");
    let exe = s.compile("nested");
    let (depth, rounds) = (100u64, 10u64);
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[&depth.to_string(), &rounds.to_string()]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.eq("totals.acquisitions", p.totals("acquisitions"), depth * rounds);
    p.eq("locks", p.locks().len() as u64, depth);
    // 64 holds per round fit on the held stack; which 64 is the collector's choice (the first
    // ones, or the last ones when the oldest entries give way), but it is the same every round.
    let mut fully_timed = 0;
    for i in 0..depth {
        let l = p.expect_lock(&elem("nest", i, MUTEX_SIZE), "mutex", rounds);
        let timed = u(l, "holds_timed");
        p.check(
            timed == 0 || timed == rounds,
            format!("nest[{i}] holds_timed {timed}: 0 or {rounds}"),
        );
        fully_timed += u64::from(timed == rounds);
    }
    p.eq("locks whose holds are timed", fully_timed, 64);
    p.eq("dropped.holds", p.dropped("holds"), (depth - 64) * rounds);
    p.eq("dropped.acquisitions", p.dropped("acquisitions"), 0);
    p.eq("totals.holds_timed", p.totals("holds_timed"), 64 * rounds);
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

// ---- 6. trylock and timed locks ----

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

// ---- 7. recursive, error-checking and robust mutexes: semantic transparency ----

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

// ---- 8. fork ----

#[test]
fn fork_children_get_their_own_exact_profiles() {
    let s = Scratch::new("fork");
    let exe = s.compile("forker");
    let (before, after, child) = (100u64, 200u64, 300u64);
    let ran = run_metered(
        &s,
        "p.lmp",
        &[],
        &exe,
        &[&before.to_string(), &after.to_string(), &child.to_string()],
    );
    ran.expect_code(0);
    let pid_of = |k: &str| -> u64 {
        ran.stdout
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no '{k}' line\n{ran}"))
    };
    let (c1, c2) = (pid_of("child1 "), pid_of("child2 "));

    let parent = Profile::load(&s.path("p.lmp"), &ran);
    parent.check_consistency();
    parent.expect_nothing_dropped();
    parent.expect_end("exit", None);
    parent.expect_lock("fork_lock", "mutex", before + after);
    parent.expect_lock("helper_lock", "mutex", 77);
    parent.eq("parent: child_lock", parent.acq("child_lock"), 0);
    parent.eq("parent threads", parent.threads().len(), 2);
    parent.expect_lock("held_lock", "mutex", 1);
    let ppid = u(parent.header(), "pid");

    let f1 = s.path(&format!("p.lmp.{c1}"));
    let p1 = Profile::load(&f1, &ran);
    p1.check_consistency();
    p1.expect_nothing_dropped();
    p1.expect_end("exit", None);
    p1.eq("child 1 pid", u(p1.header(), "pid"), c1);
    p1.eq("child 1 ppid", u(p1.header(), "ppid"), ppid);
    p1.expect_lock("fork_lock", "mutex", child);
    p1.expect_lock("child_lock", "mutex", child / 2);
    p1.eq("child 1: helper_lock (parent's, before the fork)", p1.acq("helper_lock"), 0);
    p1.eq("child 1 threads", p1.threads().len(), 1);
    p1.expect_lock("held_lock", "mutex", 5);
    p1.eq("child 1 totals", p1.totals("acquisitions"), child + child / 2 + 5);
    p1.expect_all_holds_timed(&[]);
    parent.expect_all_holds_timed(&[]);

    let f2 = s.path(&format!("p.lmp.{c2}"));
    let p2 = Profile::load(&f2, &ran);
    p2.check_consistency();
    p2.expect_end("_exit", None);
    p2.expect_lock("fork_lock", "mutex", child);
    p2.eq("child 2 totals", p2.totals("acquisitions"), child);

    for f in [&f1, &f2] {
        let listed = ran.stderr.lines().any(|l| l.trim() == f.to_str().unwrap());
        assert!(listed, "run does not list {}\n{ran}", f.display());
    }
    assert!(ran.stderr.contains("2 more profile(s)"), "{ran}");
    assert_eq!(s.files_with_prefix("p.lmp").len(), 3, "{ran}");
}

#[test]
fn process_shared_locks_are_counted_per_process() {
    let s = Scratch::new("pshared");
    let exe = s.compile("pshared");
    let n = 20_000u64;
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[&n.to_string()]);
    ran.expect_code(0);
    let child: u64 = ran
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("child ")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no child pid\n{ran}"));
    for f in [s.path("p.lmp"), s.path(&format!("p.lmp.{child}"))] {
        let p = Profile::load(&f, &ran);
        p.check_consistency();
        p.expect_nothing_dropped();
        let mutexes: Vec<_> = p.locks().iter().filter(|l| sf(l, "kind") == Some("mutex")).collect();
        p.eq("mutexes", mutexes.len(), 1);
        p.eq("shared mutex acquisitions", u(mutexes[0], "acquisitions"), n);
        let rw: Vec<_> = p.locks().iter().filter(|l| sf(l, "kind") == Some("rwlock")).collect();
        p.eq("rwlocks", rw.len(), 1);
        p.eq("shared rwlock reads", u(rw[0], "read_acquisitions"), n);
        p.eq("shared rwlock writes", u(rw[0], "write_acquisitions"), n / 2);
        p.expect_all_holds_timed(&[]);
    }
}

// ---- 9, 10, 14. how processes end ----

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
    p.expect_lock("end_lock", "mutex", 1500);
    p.eq("threads", p.threads().len(), 3);
}

#[test]
fn exit_status_is_passed_through_and_stdio_untouched() {
    let s = Scratch::new("exit7");
    let exe = s.compile("ending");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &["exit7", "300", "2"]);
    ran.expect_code(7);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.expect_end("exit", None);
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

// ---- 11. a million short-lived locks ----

#[test]
fn a_million_short_lived_locks_finish_and_account_for_every_acquisition() {
    let s = Scratch::new("million");
    let exe = s.compile("million");
    for mode in ["static", "heap"] {
        let n = 1_000_000u64;
        let out = format!("{mode}.lmp");
        let ran = run_metered(&s, &out, &[], &exe, &[&n.to_string(), mode]);
        ran.expect_code(0);
        assert_eq!(ran.stdout.trim(), format!("ok {n}"), "{ran}");
        assert!(ran.elapsed < Duration::from_secs(60), "{mode}: took {:?}", ran.elapsed);
        let p = Profile::load(&s.path(&out), &ran);
        p.check_consistency();
        let recorded = p.totals("acquisitions");
        let dropped = p.dropped("acquisitions");
        p.eq(format!("{mode}: recorded + dropped acquisitions"), recorded + dropped, n);
        p.eq("totals.dropped", p.totals("dropped"), dropped);
        // Every lock identity had one acquisition.
        p.eq(
            format!("{mode}: one lock entry per recorded acquisition"),
            p.locks().len() as u64,
            recorded,
        );
        for l in p.locks() {
            p.eq("acquisitions of a short-lived lock", u(l, "acquisitions"), 1);
        }
        if mode == "static" {
            // Each round inits (+1) and destroys (+1): odd generations are the locked ones.
            let mut gens: Vec<u64> = p.locks().iter().map(|l| u(l, "generation")).collect();
            gens.sort_unstable();
            gens.dedup();
            p.eq("distinct generations", gens.len() as u64, recorded);
            p.check(gens.iter().all(|g| g % 2 == 1), "locked generations are odd");
            p.check(p.locks().iter().all(|l| sf(l, "name") == Some("short_lock")), "names");
        }
        // Memory stays bounded (fixed tables), whatever the number of identities.
        let mem = u(&p.json["overhead"], "memory_bytes");
        p.check(mem < 64 << 20, format!("collector memory {mem} < 64 MiB"));
        p.eq("dropped.threads", p.dropped("threads"), 0);
    }
}

#[test]
fn dropped_locks_estimate_counts_reinitialized_identities() {
    // 100k identities at one address, one acquisition each: all but ~3.5k are dropped; the
    // report must not claim that they were one lock.
    let s = Scratch::new("dropped-identities");
    let exe = s.compile("million");
    let n = 100_000u64;
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[&n.to_string(), "static"]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    let dropped = p.dropped("acquisitions");
    p.eq("recorded + dropped", p.totals("acquisitions") + dropped, n);
    let est = p.dropped("locks");
    // Each dropped acquisition is a distinct lock (address + generation).
    p.check(
        est * 2 >= dropped && est <= dropped * 2,
        format!("dropped.locks {est} within a factor 2 of the {dropped} dropped lock identities"),
    );
}

// ---- 12. table overflow ----

fn check_overflow(opts: &[&str], what: &str) {
    let s = Scratch::new(what);
    let exe = s.compile("many_locks");
    let nlocks = 200u64;
    let ran = run_metered(&s, "p.lmp", opts, &exe, &[&nlocks.to_string(), "1"]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    let truth = nlocks * (nlocks + 1) / 2;
    let recorded = p.totals("acquisitions");
    let dropped = p.dropped("acquisitions");
    p.check(dropped > 0, format!("{what}: something dropped"));
    p.eq(format!("{what}: recorded + dropped"), recorded + dropped, truth);
    // Every recorded lock has its exact count (lock i: i + 1).
    for l in p.locks() {
        let name = sf(l, "name").unwrap_or("");
        let i = match name.strip_prefix("many+0x") {
            Some(hex) => u64::from_str_radix(hex, 16).unwrap() / MUTEX_SIZE,
            None if name == "many" => 0,
            None => p.fail(format!("unexpected lock {name}")),
        };
        p.eq(format!("{name} acquisitions"), u(l, "acquisitions"), i + 1);
    }
    let missing = nlocks - p.locks().len() as u64;
    let est = p.dropped("locks");
    p.check(
        est * 10 >= missing * 8 && est * 10 <= missing * 12,
        format!("{what}: dropped.locks {est} within 20% of the {missing} locks not recorded"),
    );
    p.eq("dropped.threads", p.dropped("threads"), 0);
}

#[test]
fn per_thread_record_table_overflow_is_accounted_exactly() {
    check_overflow(&["--records", "32"], "records32");
}

#[test]
fn lock_registry_overflow_is_accounted_exactly() {
    check_overflow(&["--locks", "64"], "locks64");
}

#[test]
fn threads_refused_a_table_are_accounted_exactly() {
    // --threads 2: the main thread (whose table the start-up calibration made) and one worker
    // get tables; the other 3 workers are refused.
    let s = Scratch::new("threads2");
    let exe = s.compile("hammer");
    let (t, m) = (4u64, 1000u64);
    let ran =
        run_metered(&s, "p.lmp", &["--threads", "2"], &exe, &[&t.to_string(), &m.to_string()]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.eq("dropped.threads", p.dropped("threads"), t - 1);
    p.expect_lock("big_lock", "mutex", m);
    p.eq(
        "recorded + dropped acquisitions",
        p.totals("acquisitions") + p.dropped("acquisitions"),
        t * m,
    );
}

// ---- 13. exec ----

#[test]
fn exec_writes_one_profile_per_image_and_a_failed_exec_changes_nothing() {
    let s = Scratch::new("exec");
    let exe = s.compile("execer");
    let (n, m) = (100u64, 50u64);
    for how in ["execv", "execve", "execvp", "execl", "execlp", "execle"] {
        let base = format!("{how}.lmp");
        let ran = run_metered(&s, &base, &[], &exe, &[&n.to_string(), &m.to_string(), how]);
        ran.expect_code(0);
        let first = Profile::load(&s.path(&base), &ran);
        first.check_consistency();
        first.expect_nothing_dropped();
        first.expect_end("exec", None);
        first.expect_lock("exec_lock", "mutex", 2 * n);
        first.eq(format!("{how}: stage 1: stage2_lock"), first.acq("stage2_lock"), 0);
        let pid = u(first.header(), "pid");

        let f2 = s.path(&format!("{base}.{pid}.1"));
        let second = Profile::load(&f2, &ran);
        second.check_consistency();
        second.expect_end("exit", None);
        second.eq(format!("{how}: stage 2 pid"), u(second.header(), "pid"), pid);
        second.expect_lock("stage2_lock", "mutex", m);
        second.eq(format!("{how}: stage 2: exec_lock"), second.acq("exec_lock"), 0);
        let listed = ran.stderr.lines().any(|l| l.trim() == f2.to_str().unwrap());
        assert!(listed, "{how}: not listed\n{ran}");
        assert_eq!(s.files_with_prefix(&base).len(), 2, "{how}\n{ran}");
    }
}

#[test]
fn exec_image_seq_counts_the_execs() {
    let s = Scratch::new("exec-seq");
    let exe = s.compile("execer");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &["10", "10"]);
    ran.expect_code(0);
    let first = Profile::load(&s.path("p.lmp"), &ran);
    first.eq("stage 1 image_seq", u(first.header(), "image_seq"), 0);
    let pid = u(first.header(), "pid");
    let second = Profile::load(&s.path(&format!("p.lmp.{pid}.1")), &ran);
    second.eq(
        "stage 2 image_seq (SCHEMA.md: +1 after each exec)",
        u(second.header(), "image_seq"),
        1,
    );
}

#[test]
fn lockmeter_disable_passes_everything_through() {
    let s = Scratch::new("disable");
    let exe = s.compile("semantics");
    let plain = run_plain(&s.dir, &exe, &["20"]);
    let out = s.path("p.lmp");
    let mut cmd = lockmeter_cmd(&s.dir);
    cmd.env("LOCKMETER_DISABLE", "1");
    cmd.args(["run", "-q", "-o", out.to_str().unwrap(), "--", exe.to_str().unwrap(), "20"]);
    let ran = finish("lockmeter run (LOCKMETER_DISABLE=1)".into(), spawn(&mut cmd), b"", RUN_LIMIT);
    ran.expect_code(0);
    assert_eq!(ran.stdout, plain.stdout, "{ran}");
    assert!(!out.exists(), "a profile was written with LOCKMETER_DISABLE=1\n{ran}");
    assert!(ran.stderr.contains("wrote no profile"), "{ran}");
}

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
fn posix_spawn_vfork_and_fork_exec_children_get_exact_profiles() {
    let s = Scratch::new("spawn");
    let exe = s.compile("spawner");
    let (n, m) = (100u64, 50u64);
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[&n.to_string(), &m.to_string()]);
    ran.expect_code(0);
    let pids: Vec<u64> = ran
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("spawned ")?.trim().parse().ok())
        .collect();
    assert_eq!(pids.len(), 3, "{ran}");
    let parent = Profile::load(&s.path("p.lmp"), &ran);
    parent.check_consistency();
    parent.expect_nothing_dropped();
    parent.expect_end("exit", None);
    parent.expect_lock("parent_lock", "mutex", 2 * n);
    parent.eq("parent: child_lock", parent.acq("child_lock"), 0);
    // posix_spawn and vfork children exec at once: one profile each, of the new image.
    for (how, pid) in [("posix_spawn", pids[0]), ("vfork", pids[1])] {
        let p = Profile::load(&s.path(&format!("p.lmp.{pid}")), &ran);
        p.check_consistency();
        p.expect_end("exit", None);
        p.eq(format!("{how} child pid"), u(p.header(), "pid"), pid);
        p.expect_lock("child_lock", "mutex", m);
        p.eq(format!("{how} child: parent_lock"), p.acq("parent_lock"), 0);
    }
    // The fork child: its forked image (no lock of its own) ends by exec, then the new image.
    let pid = pids[2];
    let pre = Profile::load(&s.path(&format!("p.lmp.{pid}")), &ran);
    pre.expect_end("exec", None);
    pre.eq("fork child before exec: acquisitions", pre.totals("acquisitions"), 0);
    let post = Profile::load(&s.path(&format!("p.lmp.{pid}.1")), &ran);
    post.expect_end("exit", None);
    post.expect_lock("child_lock", "mutex", m);
    post.eq("fork child after exec: parent_lock", post.acq("parent_lock"), 0);
    assert_eq!(s.files_with_prefix("p.lmp").len(), 5, "{ran}");
    assert!(ran.stderr.contains("4 more profile(s)"), "{ran}");
}

#[test]
fn image_seq_after_spawning_children_the_parent_execs() {
    // The parent starts children by posix_spawn, vfork + execv and fork + execv, then execs
    // itself: its second image is image_seq 1, whatever its children did.
    let s = Scratch::new("spawn-seq");
    let exe = s.compile("spawner");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &["10", "5", "thenexec"]);
    ran.expect_code(0);
    let first = Profile::load(&s.path("p.lmp"), &ran);
    first.expect_end("exec", None);
    first.eq("stage 1 image_seq", u(first.header(), "image_seq"), 0);
    let pid = u(first.header(), "pid");
    let second = Profile::load(&s.path(&format!("p.lmp.{pid}.1")), &ran);
    second.expect_lock("child_lock", "mutex", 5);
    second.eq("the parent's exec'd image: image_seq", u(second.header(), "image_seq"), 1);
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
    let want: Vec<(u64, String, u64, u64, u64)> = vec![
        (1, "mutex".into(), 10, 0, 0),
        (3, "rwlock".into(), 25, 20, 5),
        (5, "mutex".into(), 30, 0, 0),
    ];
    p.eq("slot identities (generation, kind, acquisitions, reads, writes)", slot, want);
    let addrs: std::collections::HashSet<&str> =
        p.locks_named("slot").iter().filter_map(|l| sf(l, "address")).collect();
    p.eq("slot: one address", addrs.len(), 1);
    let mut plain: Vec<(u64, u64)> =
        p.locks_named("plain").iter().map(|l| (u(l, "generation"), u(l, "acquisitions"))).collect();
    plain.sort();
    p.eq("plain identities (generation, acquisitions)", plain, vec![(1, 7), (2, 8)]);
    let busy = p.expect_lock("busy_lock", "mutex", 2);
    p.eq("busy_lock generation (a failed destroy changes nothing)", u(busy, "generation"), 0);
    p.expect_all_holds_timed(&[]);
}

fn check_shlib(s: &Scratch, extra: &[&str], tag: &str) {
    let lib = s.path("libe2eshlib.so");
    if !lib.exists() {
        s.compile_with("shlib", "libe2eshlib.so", &["-fPIC", "-shared"]);
    }
    let mut flags = vec!["-L", s.dir.to_str().unwrap(), "-le2eshlib", "-Wl,-rpath,$ORIGIN"];
    flags.extend_from_slice(extra);
    let exe = s.compile_with("shlib_main", &format!("shlib_main_{tag}"), &flags);
    let n = 300u64;
    let out = format!("{tag}.lmp");
    let ran = run_metered(s, &out, &[], &exe, &[&n.to_string()]);
    ran.expect_code(0);
    let p = Profile::load(&s.path(&out), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    for (name, func, module) in [
        ("shlib_lock", "shlib_take+0x", "libe2eshlib.so"),
        ("shlib_private_lock", "shlib_take+0x", "libe2eshlib.so"),
        ("main_lock", "main+0x", ""),
    ] {
        let l = p.expect_lock(name, "mutex", n);
        let site = &l["sites"][0];
        let f = sf(site, "function").unwrap_or("");
        p.check(f.starts_with(func), format!("{tag}: {name} site {f} starts with {func}"));
        if !module.is_empty() {
            p.eq(format!("{tag}: {name} site module"), sf(site, "module"), Some(module));
        }
    }
}

#[test]
fn static_locks_of_shared_libraries_and_non_pie_programs_are_named() {
    let s = Scratch::new("shlib");
    check_shlib(&s, &[], "pie");
    check_shlib(&s, &["-no-pie"], "nopie");
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

#[test]
fn thread_churn_beyond_the_thread_limit_is_accounted_exactly() {
    // 1100 short-lived threads (default limit 1024 tables; the main thread has one).
    let s = Scratch::new("churn");
    let exe = s.compile("churn");
    let n = 1100u64;
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[&n.to_string(), "16"]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    let recorded = p.totals("acquisitions");
    p.eq("threads listed", p.threads().len() as u64, recorded);
    p.eq("dropped.threads", p.dropped("threads"), n - 1023);
    p.eq("recorded + dropped acquisitions", recorded + p.dropped("acquisitions"), n);
}

#[test]
fn first_use_stacks_fit_in_their_tables() {
    // Six lock identities (reuse.c), one thread: nothing can overflow the stack and event tables,
    // and each identity has its first-use event.
    let s = Scratch::new("first-use");
    let exe = s.compile("reuse");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[]);
    ran.expect_code(0);
    let prof = lockmeter_format::read_profile_file(&s.path("p.lmp")).expect("profile reads");
    assert_eq!(prof.locks.len(), 6, "{ran}");
    assert_eq!(prof.dropped.stacks, 0, "dropped.stacks for 6 locks in one thread\n{ran}");
    let first_uses =
        prof.events.iter().filter(|e| e.kind == lockmeter_format::EventKind::FirstUse).count();
    assert_eq!(first_uses, 6, "one first-use event per lock identity: {:?}", prof.events);
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

#[test]
fn lockmeter_clock_from_the_environment_is_respected() {
    // LOCKMETER_CLOCK is a documented setting of the collector; `run` must not override it.
    let s = Scratch::new("clock");
    let exe = s.compile("ending");
    let out = s.path("p.lmp");
    let mut cmd = lockmeter_cmd(&s.dir);
    cmd.env("LOCKMETER_CLOCK", "monotonic");
    cmd.args([
        "run",
        "-q",
        "-o",
        out.to_str().unwrap(),
        "--",
        exe.to_str().unwrap(),
        "exit7",
        "10",
    ]);
    let ran =
        finish("lockmeter run (LOCKMETER_CLOCK=monotonic)".into(), spawn(&mut cmd), b"", RUN_LIMIT);
    ran.expect_code(7);
    let p = Profile::load(&out, &ran);
    p.expect_lock("end_lock", "mutex", 10);
    p.eq("header.clock.source", sf(&p.header()["clock"], "source"), Some("monotonic"));
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

fn run_named(tag: &str) -> (Scratch, Profile) {
    let s = Scratch::new(tag);
    let include = workspace().join("include");
    let exe = s.compile_with("named", "named", &["-I", include.to_str().unwrap()]);
    let plain = run_plain(&s.dir, &exe, &[]);
    plain.expect_code(0);
    assert_eq!(plain.stdout, "ok plain\n", "{plain}");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[]);
    ran.expect_code(0);
    assert_eq!(ran.stdout, "ok named\n", "{ran}");
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    (s, p)
}

#[test]
fn locks_named_through_lockmeter_h_are_reported_by_name() {
    let (_s, p) = run_named("named");
    p.expect_lock("queue.lock", "mutex", 10);
    let rw = p.expect_lock("table.rwlock", "rwlock", 5);
    p.eq("table.rwlock reads", u(rw, "read_acquisitions"), 5);
    p.expect_lock("spin.heap", "spinlock", 3);
    let second = p.expect_lock("second", "mutex", 6);
    p.eq("second: generation", u(second, "generation"), 3);
    p.expect_lock("new", "mutex", 2);
    p.eq("the overwritten name", p.locks_named("old").len(), 0);
    p.eq("a name given before the init", p.locks_named("named-before-init").len(), 0);
    p.eq("totals.acquisitions", p.totals("acquisitions"), 10 + 5 + 3 + 4 + 6 + 2 + 1 + 6);
}

#[test]
fn lock_names_survive_the_destroy_of_their_lock() {
    // "A name belongs to the lock identity it was given to" (include/lockmeter.h, names.rs):
    // identities destroyed before the end (short-lived heap locks) keep theirs.
    let (_s, p) = run_named("named-destroyed");
    let first = p.expect_lock("first", "mutex", 4);
    p.eq("first: generation", u(first, "generation"), 1);
    let conns = p.locks_named("conn.lock");
    p.eq("conn.lock identities", conns.len(), 3);
    for c in conns {
        p.eq("conn.lock acquisitions", u(c, "acquisitions"), 2);
    }
}

#[test]
fn report_after_the_program_was_deleted_or_replaced() {
    let s = Scratch::new("replaced");
    let striped = s.compile("striped");
    let hammer = s.compile("hammer");
    let prog = s.path("prog");
    std::fs::copy(&striped, &prog).unwrap();
    let (t, m) = (4u64, 800u64);
    let ran = run_metered(&s, "p.lmp", &[], &prog, &[&t.to_string(), &m.to_string()]);
    ran.expect_code(0);
    let before = Profile::load(&s.path("p.lmp"), &ran);
    before.expect_lock("stripes", "mutex", t * m / 8);

    // Replaced by another program at the same path: its symbols must not name this profile's
    // locks and sites (wrong names are worse than none).
    std::fs::remove_file(&prog).unwrap();
    std::fs::copy(&hammer, &prog).unwrap();
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.eq("totals.acquisitions", p.totals("acquisitions"), before.totals("acquisitions"));
    for l in p.locks() {
        let name = sf(l, "name").unwrap_or("");
        p.check(!name.contains("big_lock"), format!("lock named {name} from the replacing binary"));
        for site in l["sites"].as_array().into_iter().flatten() {
            let f = sf(site, "function").unwrap_or("");
            p.check(
                !f.starts_with("_fini") && !f.starts_with("_start"),
                format!("site {f} symbolized with the replacing binary"),
            );
        }
    }

    // Deleted: the report still works, with the same counts.
    std::fs::remove_file(&prog).unwrap();
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.eq("totals.acquisitions", p.totals("acquisitions"), before.totals("acquisitions"));
    p.eq("locks", p.locks().len(), before.locks().len());
}

/// A minimal RFC 4180 CSV parser (quoted fields with commas, quotes and newlines).
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let (mut rows, mut row, mut field) = (Vec::new(), Vec::new(), String::new());
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    if !field.is_empty() || !row.is_empty() {
        row.push(field);
        rows.push(row);
    }
    rows
}

#[test]
fn awkward_names_and_a_huge_command_line_survive_every_format() {
    let s = Scratch::new("weird");
    let include = workspace().join("include");
    let exe = s.compile_with("weird", "weird", &["-I", include.to_str().unwrap()]);
    let big: Vec<String> = (0..2000).map(|i| format!("{i:04}{}", "x".repeat(46))).collect();
    let mut args: Vec<&str> = vec!["run", "-q", "-o", "p.lmp", "--", exe.to_str().unwrap()];
    args.extend(big.iter().map(String::as_str));
    let ran = lockmeter(&s.dir, &args);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    let odd_name = "a,b\"c\nd;<x>&";
    p.expect_lock(odd_name, "mutex", 8);
    let long: Vec<&serde_json::Value> =
        p.locks().iter().filter(|l| sf(l, "name").is_some_and(|n| n.starts_with("ééé"))).collect();
    p.eq("locks named é...", long.len(), 1);
    p.eq("long_lock acquisitions", u(long[0], "acquisitions"), 4);
    let long_name = sf(long[0], "name").unwrap_or("");
    p.check(long_name.len() <= 130, format!("long name kept short: {} bytes", long_name.len()));
    p.check(
        p.threads().iter().any(|t| sf(t, "name").is_some_and(|n| n.ends_with("-bad"))),
        "the non-UTF-8 thread name is reported (lossily)",
    );
    let cmdline = p.header()["cmdline"].as_array().cloned().unwrap_or_default();
    p.check(cmdline.len() > 1, "header.cmdline kept");
    for (i, a) in cmdline.iter().skip(1).enumerate() {
        // Possibly cut short, never wrong.
        let a = a.as_str().unwrap_or("");
        p.check(big[i].starts_with(a), format!("cmdline[{}] = {a}", i + 1));
    }

    let csv = lockmeter(&s.dir, &["report", "p.lmp", "--format", "csv"]);
    csv.expect_code(0);
    let rows = parse_csv(&csv.stdout);
    assert_eq!(rows.len(), 3, "header + 2 locks\n{csv}");
    let name_col = rows[0].iter().position(|c| c == "name").expect("name column");
    assert!(rows.iter().any(|r| r[name_col] == odd_name), "{csv}");
    assert!(rows.iter().all(|r| r.len() == rows[0].len()), "ragged CSV\n{csv}");

    // Text: a lock name must not break the table (no raw newline from a name), and the
    // header line does not carry a 100 KB command line.
    let text = lockmeter(&s.dir, &["report", "p.lmp"]);
    text.expect_code(0);
    assert!(!text.stdout.contains(odd_name), "raw control characters in the text report\n{text}");
    let longest = text.stdout.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 2000, "a {longest}-byte line in the text report");
}

#[test]
fn many_named_short_lived_locks_do_not_slow_the_profile_down() {
    // 50 000 named identities: the names' bookkeeping must stay cheap at exit, where the profile
    // is written (the program itself runs in ~0.2 s under the debug collector; 5 s is a sanity
    // bound, not a measurement).
    let s = Scratch::new("named-many");
    let include = workspace().join("include");
    let exe = s.compile_with("named_many", "named_many", &["-I", include.to_str().unwrap()]);
    let n = 50_000u64;
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[&n.to_string()]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.eq("recorded + dropped", p.totals("acquisitions") + p.dropped("acquisitions"), n);
    for l in p.locks() {
        let name = sf(l, "name").unwrap_or("");
        p.check(name.starts_with("conn-"), format!("a recorded identity named {name}"));
    }
    p.check(ran.elapsed < Duration::from_secs(5), format!("the run took {:?}", ran.elapsed));
}

#[test]
fn plain_ld_preload_without_lockmeter_run() {
    // The documented low-level use: LD_PRELOAD=liblockmeter_preload.so PROGRAM, configured by
    // the environment (here LOCKMETER_RECORDS=32 and LOCKMETER_OUTPUT). A single process writes
    // OUTPUT (every process tries the plain name first, never overwriting); without
    // LOCKMETER_OUTPUT, lockmeter-<pid>.lmp.
    let s = Scratch::new("ld-preload");
    let exe = s.compile("many_locks");
    let mut cmd = std::process::Command::new(&exe);
    cmd.args(["200", "1"])
        .current_dir(&s.dir)
        .env("LD_PRELOAD", preload())
        .env("LOCKMETER_OUTPUT", s.path("direct.lmp"))
        .env("LOCKMETER_RECORDS", "32");
    let child = spawn(&mut cmd);
    let pid = child.id();
    let ran = finish("many_locks under LD_PRELOAD".into(), child, b"", RUN_LIMIT);
    ran.expect_code(0);
    let p = Profile::load(&s.path("direct.lmp"), &ran);
    p.check_consistency();
    p.eq("header.pid", u(p.header(), "pid"), u64::from(pid));
    p.eq("recorded + dropped", p.totals("acquisitions") + p.dropped("acquisitions"), 200 * 201 / 2);
    p.check(p.dropped("acquisitions") > 0, "LOCKMETER_RECORDS=32 was applied");

    let mut cmd = std::process::Command::new(&exe);
    cmd.args(["5", "1"]).current_dir(&s.dir).env("LD_PRELOAD", preload());
    let child = spawn(&mut cmd);
    let pid = child.id();
    let ran = finish("many_locks under LD_PRELOAD, default output".into(), child, b"", RUN_LIMIT);
    ran.expect_code(0);
    let p = Profile::load(&s.path(&format!("lockmeter-{pid}.lmp")), &ran);
    p.eq("totals.acquisitions", p.totals("acquisitions"), 15);
    p.expect_nothing_dropped();
}

// ---- 15. bad input ----

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

// ---- 16. the demo ----

#[test]
fn demo_runs_and_names_its_locks() {
    let s = Scratch::new("demo");
    let out = s.path("demo.lmp");
    let ran = lockmeter(
        &s.dir,
        &["demo", "--threads", "4", "--iterations", "2000", "-q", "-o", out.to_str().unwrap()],
    );
    ran.expect_code(0);
    let p = Profile::load(&out, &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    let named = |needle: &str| -> &serde_json::Value {
        let v: Vec<_> = p
            .locks()
            .iter()
            .filter(|l| sf(l, "name").is_some_and(|n| n.contains(needle)))
            .collect();
        match v.as_slice() {
            [one] => one,
            _ => p.fail(format!("{} locks named like {needle}", v.len())),
        }
    };
    let wq = named("WORK_QUEUE_LOCK");
    p.eq("WORK_QUEUE_LOCK acquisitions (4 x 2000)", u(wq, "acquisitions"), 8000);
    p.eq("WORK_QUEUE_LOCK kind", sf(wq, "kind"), Some("mutex"));
    let st = named("STATS_LOCK");
    p.eq("STATS_LOCK acquisitions (4 x ceil(2000/64))", u(st, "acquisitions"), 4 * 32);
    let cfg = named("CONFIG_LOCK");
    p.eq("CONFIG_LOCK kind", sf(cfg, "kind"), Some("rwlock"));
    p.eq("CONFIG_LOCK reads (4 x 2000/16)", u(cfg, "read_acquisitions"), 4 * 125);
    p.eq("CONFIG_LOCK writes", u(cfg, "write_acquisitions"), 1);
}

//! End-to-end tests: what the collector could not record is counted. Limits are reached on
//! purpose (held-lock stack, the memory cap on record tables, lock registry, thread tables, 50 000
//! named locks); recorded + dropped must equal the program's own count, and the estimates of
//! dropped locks must be close to the truth. With default options the record tables grow, and
//! nothing is lost (100 000 distinct locks; sysbench with 4096 mutexes where sysbench is
//! installed); a million short-lived locks fold into their classes, exactly. The collector's own
//! memory is what it keeps resident, never more than the whole process's resident memory.
//! Out of address space, `pthread_create` fails with `EAGAIN` as it does without the collector
//! (it used to abort in the collector's own allocation); under `ulimit -v` the collector reserves
//! no more than the limit leaves room for, and the profile is complete.
//!
//! Ground-truth programs (`tests/programs/`): churn.c, distinct.c, hammer.c, lifetimes.c,
//! many_locks.c, million.c, named_many.c, nested.c, per_request.c, reuse.c, threads_oom.c.
//!
//! Needs gcc. Run with `cargo test -p lockmeter --test limits`; the harness builds the
//! preload library itself (`cargo build -p lockmeter-preload`) once per test process.

mod common;

use common::*;

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
fn a_million_short_lived_locks_fold_into_their_class_exactly() {
    let s = Scratch::new("million");
    let exe = s.compile("million");
    for mode in ["static", "heap"] {
        let n = 1_000_000u64;
        let out = format!("{mode}.lmp");
        // A million identities of one acquisition each, at a 64 MiB cap: each ends (destroyed)
        // and joins its class, so they all fit.
        let ran = run_metered(&s, &out, &["--max-memory", "64M"], &exe, &[&n.to_string(), mode]);
        ran.expect_code(0);
        assert_eq!(ran.stdout.trim(), format!("ok {n}"), "{ran}");
        // Printed, never asserted: a timing is not a pass/fail condition.
        eprintln!("{mode}: the run took {:?}", ran.elapsed);
        let p = Profile::load(&s.path(&out), &ran);
        p.check_consistency();
        p.expect_nothing_dropped();
        p.eq(format!("{mode}: acquisitions"), p.totals("acquisitions"), n);
        // One row: the class of the init call in main.
        p.eq(format!("{mode}: locks"), p.locks().len() as u64, 1);
        let l = &p.locks()[0];
        p.eq("acquisitions of the class", u(l, "acquisitions"), n);
        p.eq("holds timed", u(l, "holds_timed"), n);
        let name = sf(l, "name").unwrap_or_default();
        let want = match mode {
            "static" => format!("{n} lifetimes of short_lock initialized at main (million.c:"),
            _ => format!("{n} heap locks initialized at main (million.c:"),
        };
        p.check(name.starts_with(&want), format!("{mode}: class named {name:?}, want {want}..."));
        let mem = u(&p.json["overhead"], "memory_bytes");
        p.check(mem <= 64 << 20, format!("collector memory {mem} <= 64 MiB"));
    }
}

#[test]
fn lock_lifetimes_fold_into_classes_exactly_with_defaults() {
    // 1,000,000 heap mutexes, 100,000 alive at a time, each locked once by each of two worker
    // threads and destroyed by the main thread; 10,000 rwlocks and 10,000 semaphores made, used
    // and destroyed; 3 mutexes that stay alive. Default options: nothing is dropped, totals are
    // exact, and the report has a row per class and per live lock, not a million rows.
    let s = Scratch::new("lifetimes");
    let exe = s.compile("lifetimes");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &["1000000", "100000", "3"]);
    ran.expect_code(0);
    let f: Vec<u64> = ran.stdout.split_whitespace().skip(1).map(|x| x.parse().unwrap()).collect();
    let [mutex_acq, lifetimes, rw_acq, sem_acq] = f[..] else { panic!("output: {ran}") };
    assert_eq!((mutex_acq, lifetimes), (2_000_000, 1_000_000), "{ran}");
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    p.eq("totals.acquisitions", p.totals("acquisitions"), mutex_acq + rw_acq + sem_acq + 3 * 2);
    p.eq("totals.holds_timed", p.totals("holds_timed"), p.totals("acquisitions"));
    p.eq("locks", p.locks().len() as u64, 3 + 3);
    let class = |prefix: &str, kind: &str, acq: u64| {
        let v: Vec<&serde_json::Value> = p
            .locks()
            .iter()
            .filter(|l| sf(l, "kind") == Some(kind))
            .filter(|l| sf(l, "name").is_some_and(|n| n.starts_with(prefix)))
            .collect();
        p.eq(format!("{kind} rows named {prefix}..."), v.len(), 1);
        p.eq(format!("{prefix}: acquisitions"), u(v[0], "acquisitions"), acq);
        p.eq(format!("{prefix}: holds timed"), u(v[0], "holds_timed"), acq);
        p.eq(format!("{prefix}: name source"), sf(v[0], "name_source"), Some("class"));
    };
    class("1000000 heap locks initialized at make_window (lifetimes.c:", "mutex", mutex_acq);
    class("10000 heap locks initialized at main (lifetimes.c:", "rwlock", rw_acq);
    class("10000 heap locks initialized at main (lifetimes.c:", "semaphore", sem_acq);
    // Each worker's acquisitions of the class are its own record: one per thread and site.
    let mutex_class = p
        .locks()
        .iter()
        .find(|l| sf(l, "name").is_some_and(|n| n.starts_with("1000000 heap")))
        .unwrap();
    p.eq("threads of the mutex class", u(mutex_class, "threads"), 2);
    // The live locks keep rows of their own.
    let live: Vec<&serde_json::Value> =
        p.locks().iter().filter(|l| u(l, "generation") != 0).collect();
    p.eq("live locks", live.len() as u64, 3);
    for l in live {
        p.eq("live lock acquisitions", u(l, "acquisitions"), 2);
        p.check(
            sf(l, "name").is_some_and(|n| n.starts_with("heap lock first used at main")),
            format!("live lock named by its first use: {:?}", sf(l, "name")),
        );
    }
    // The text report fits on a screen.
    let report = lockmeter(&s.dir, &["report", "p.lmp"]);
    report.expect_code(0);
    let lines = report.stdout.lines().count();
    assert!(lines < 40, "{lines} lines:\n{report}");
    assert!(report.stdout.contains("1000000 heap locks initialized at make_window"), "{report}");
}

#[test]
fn reinitialized_identities_fold_into_one_class_within_a_small_cap() {
    // 100k identities at one address, one acquisition each, at a 24 MiB cap that once kept only
    // a few thousand of them as rows of their own: each ended identity joins its class, so all
    // fit, in one row.
    let s = Scratch::new("dropped-identities");
    let exe = s.compile("million");
    let n = 100_000u64;
    let ran = run_metered(&s, "p.lmp", &["--max-memory", "24M"], &exe, &[&n.to_string(), "static"]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.expect_nothing_dropped();
    p.eq("acquisitions", p.totals("acquisitions"), n);
    p.eq("locks", p.locks().len() as u64, 1);
}

/// The report's line about dropped acquisitions, checked to name `option` (the `run` option that
/// makes room, from the settings table) and no other option or variable.
fn check_drop_hint(s: &Scratch, profile: &str, setting: &lockmeter_core::settings::Setting) {
    let lockmeter_core::settings::Cli::Flag(option) = setting.cli else {
        panic!("{} has no run option", setting.env)
    };
    let ran = lockmeter(&s.dir, &["report", profile]);
    ran.expect_code(0);
    let lines: Vec<&str> = ran.stdout.lines().filter(|l| l.contains("acquisitions on ~")).collect();
    assert_eq!(lines.len(), 1, "one line about dropped acquisitions\n{ran}");
    let line = lines[0];
    let raise = format!("(raise {option} {})", setting.value_name);
    assert!(line.contains(&raise), "{raise} named: {line}");
    for other in [
        &lockmeter_core::settings::THREADS,
        &lockmeter_core::settings::RECORDS,
        &lockmeter_core::settings::MAX_MEMORY,
        &lockmeter_core::settings::LOCKS,
    ] {
        if let lockmeter_core::settings::Cli::Flag(o) = other.cli
            && o != option
        {
            assert!(!line.contains(o), "{o} not named for this loss: {line}");
        }
    }
    assert!(!line.contains("LOCKMETER_"), "no environment variable named: {line}");
}

fn check_overflow(opts: &[&str], what: &str, setting: &lockmeter_core::settings::Setting) {
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
    // Every lock has its exact count (lock i: i + 1), recorded or not: what its records lack
    // is its dropped count.
    let (mut seen, mut itemized, mut recorded_locks) = (vec![false; nlocks as usize], 0, 0);
    for l in p.locks() {
        let name = sf(l, "name").unwrap_or("");
        let i = match name.strip_prefix("many+0x") {
            Some(hex) => u64::from_str_radix(hex, 16).unwrap() / MUTEX_SIZE,
            None if name == "many" => 0,
            None => p.fail(format!("unexpected lock {name}")),
        };
        let lost = l.get("dropped_acquisitions").map_or(0, |v| v.as_u64().unwrap());
        p.eq(
            format!("{name} acquisitions + dropped_acquisitions"),
            u(l, "acquisitions") + lost,
            i + 1,
        );
        seen[i as usize] = true;
        itemized += lost;
        recorded_locks += u64::from(u(l, "acquisitions") > 0);
    }
    let itemized_cause = setting.env == lockmeter_core::settings::MAX_MEMORY.env;
    if itemized_cause {
        // The memory cap: every loss is told apart by lock, so every lock is listed.
        p.eq(format!("{what}: locks listed"), seen.iter().filter(|&&x| x).count() as u64, nlocks);
        p.eq(format!("{what}: dropped by lock"), itemized, dropped);
        let report = lockmeter(&s.dir, &["report", "p.lmp"]);
        report.expect_code(0);
        let want = format!("!!! not recorded, by lock ({dropped} of them): many+0x");
        assert!(report.stdout.contains(&want), "{want:?} in the report\n{report}");
    } else {
        // The registry had no slot for the lock: no lock to count its loss against.
        p.eq(format!("{what}: dropped by lock"), itemized, 0);
    }
    let missing = nlocks - recorded_locks;
    let est = p.dropped("locks");
    p.check(
        est * 10 >= missing * 8 && est * 10 <= missing * 12,
        format!("{what}: dropped.locks {est} within 20% of the {missing} locks not recorded"),
    );
    p.eq("dropped.threads", p.dropped("threads"), 0);
    // The JSON tells the cause apart: all of the loss is this setting's.
    let cause = if setting.env == lockmeter_core::settings::MAX_MEMORY.env {
        "acquisitions_table_full"
    } else {
        "acquisitions_registry_full"
    };
    p.eq(format!("{what}: dropped.{cause}"), p.dropped(cause), dropped);
    check_drop_hint(&s, "p.lmp", setting);
}

#[test]
fn record_tables_grow_and_the_memory_cap_is_accounted_exactly() {
    // Tables that start at 16 records grow to hold 200 locks: nothing is lost.
    let s = Scratch::new("grow16");
    let exe = s.compile("many_locks");
    let ran = run_metered(&s, "p.lmp", &["--records", "16"], &exe, &["200", "1"]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.expect_nothing_dropped();
    p.eq("totals.acquisitions", p.totals("acquisitions"), 200 * 201 / 2);
    p.eq("locks", p.locks().len() as u64, 200);
    // The smallest cap under which that run loses nothing (found by bisection: the profile
    // reports resident memory, not what the cap counts); one byte less refuses the tables' last
    // growth, and the loss is counted exactly.
    let fits = |cap: u64| {
        let s = Scratch::new("capfind");
        let c = cap.to_string();
        let ran =
            run_metered(&s, "p.lmp", &["--records", "16", "--max-memory", &c], &exe, &["200", "1"]);
        ran.expect_code(0);
        Profile::load(&s.path("p.lmp"), &ran).dropped("acquisitions") == 0
    };
    let (mut lo, mut hi) = (0u64, 64 << 20);
    assert!(fits(hi), "200 locks fit in 64 MiB");
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) { hi = mid } else { lo = mid }
    }
    let cap = lo.to_string();
    check_overflow(
        &["--records", "16", "--max-memory", &cap],
        "cap",
        &lockmeter_core::settings::MAX_MEMORY,
    );
}

#[test]
fn a_hundred_thousand_distinct_locks_are_kept_with_default_options() {
    let s = Scratch::new("distinct");
    let exe = s.compile("distinct");
    let n = 100_000u64;
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[&n.to_string(), "1"]);
    ran.expect_code(0);
    let truth: u64 = ran
        .stdout
        .trim()
        .strip_prefix("ok ")
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no total printed\n{ran}"));
    // Read in-process: the JSON report of 100,000 locks takes the debug build half a minute.
    let prof = lockmeter_format::read_profile_file(&s.path("p.lmp")).expect("profile reads");
    let d = &prof.dropped;
    assert_eq!((d.acquisitions, d.locks, d.threads, d.holds), (0, 0, 0, 0), "dropped\n{ran}");
    assert_eq!(prof.locks.len() as u64, n, "locks\n{ran}");
    let mut per_lock = std::collections::HashMap::<u32, u64>::new();
    for r in &prof.records {
        *per_lock.entry(r.lock).or_default() += r.stats.acquisitions;
    }
    assert_eq!(per_lock.values().sum::<u64>(), truth, "acquisitions\n{ran}");
    // Lock i is taken (i % 3) + 1 times.
    let mut by_count = [0u64; 4];
    for &a in per_lock.values() {
        assert!((1..=3).contains(&a), "a lock with {a} acquisitions");
        by_count[a as usize] += 1;
    }
    assert_eq!(by_count, [0, n.div_ceil(3), (n + 1) / 3, n / 3], "locks taken 1, 2, 3 times");
    // The collector's resident tables (its own mincore count): 100,000 records of 192 bytes with
    // compact histograms, the registry's touched pages and the index, about 37 MiB. A record
    // whose full histograms are touched without need costs 1,040 bytes more (131 MiB before).
    let resident = prof.overhead.memory_bytes;
    assert!(resident <= 48 << 20, "collector resident {resident} bytes for {n} locks\n{ran}");
}

#[test]
fn sysbench_mutex_4096_is_exact_with_default_options() {
    let s = Scratch::new("sysbench");
    let args = ["--mutex-num=4096", "--threads=4"];
    sysbench_mutex_exact(&s, "p.lmp", &[], &args, 20_000);
}

#[test]
fn lock_registry_overflow_is_accounted_exactly() {
    check_overflow(&["--locks", "64"], "locks64", &lockmeter_core::settings::LOCKS);
}

#[test]
fn threads_refused_a_table_are_accounted_exactly() {
    // --threads 1: the main thread (whose table the start-up calibration made, and which lives
    // to the end) has the only table; the workers, all refused, are counted.
    let s = Scratch::new("threads1");
    let exe = s.compile("hammer");
    let (t, m) = (4u64, 1000u64);
    let ran =
        run_metered(&s, "p.lmp", &["--threads", "1"], &exe, &[&t.to_string(), &m.to_string()]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.eq("dropped.threads", p.dropped("threads"), t);
    p.eq("totals.acquisitions", p.totals("acquisitions"), 0);
    p.eq("dropped.acquisitions", p.dropped("acquisitions"), t * m);
    p.eq("dropped.acquisitions_no_thread", p.dropped("acquisitions_no_thread"), t * m);
    check_drop_hint(&s, "p.lmp", &lockmeter_core::settings::THREADS);
}

#[test]
fn thread_churn_beyond_the_thread_limit_is_accounted_exactly() {
    // 1100 short-lived threads, 16 at a time (default limit 1024 tables; the main thread has
    // one): once the pool is used up, the tables of exited threads are reused, nothing is
    // refused.
    let s = Scratch::new("churn");
    let exe = s.compile("churn");
    let n = 1100u64;
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[&n.to_string(), "16"]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.eq("dropped.threads", p.dropped("threads"), 0);
    p.eq("dropped.acquisitions", p.dropped("acquisitions"), 0);
    p.expect_lock("churn_lock", "mutex", n);
}

#[test]
fn thread_per_request_keeps_every_acquisition_with_default_options() {
    // 2000 threads, at most 16 alive at once, each taking request_lock 25 times and once more in
    // a key destructor during its exit: once the 1024 tables are used up, the shards of exited
    // threads are reused, their records folded into one "[N exited threads]" row, exact.
    let s = Scratch::new("per-request");
    let exe = s.compile("per_request");
    let (threads, per) = (2000u64, 25u64);
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[&threads.to_string(), "16", &per.to_string()]);
    ran.expect_code(0);
    let truth: u64 = ran
        .stdout
        .trim()
        .strip_prefix("total ")
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no total printed\n{ran}"));
    assert_eq!(truth, threads * (per + 1) + 1, "{ran}");
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.eq("dropped.acquisitions", p.dropped("acquisitions"), 0);
    p.eq("dropped.threads", p.dropped("threads"), 0);
    p.expect_lock("request_lock", "mutex", truth);
    p.eq("totals.acquisitions", p.totals("acquisitions"), truth);
    // Rows: the exited threads merged into one, plus the threads whose shards were not taken
    // over (and the main thread); every other row's acquisitions are one whole thread's (per + 1,
    // the main thread's 1): a row never mixes two threads under one name.
    let rows = p.threads();
    let exited: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|t| sf(t, "name").is_some_and(|n| n.ends_with(" exited threads]")))
        .collect();
    p.eq("rows of exited threads", exited.len() as u64, 1);
    let name = sf(exited[0], "name").unwrap();
    let folded: u64 = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(" exited threads]"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| p.fail(format!("row name {name}")));
    p.eq(format!("{name}: acquisitions"), u(exited[0], "acquisitions"), folded * (per + 1));
    p.check(rows.len() <= 1025, format!("{} thread rows for 1024 tables", rows.len()));
    p.check(folded >= threads + 1 - 1024, format!("{folded} exited threads folded"));
    let single: u64 = rows.len() as u64 - 1;
    p.eq("threads: folded + single rows", folded + single, threads + 1);
    for t in rows.iter().filter(|t| !std::ptr::eq(*t, exited[0])) {
        let a = u(t, "acquisitions");
        p.check(a == per + 1 || a == 1, format!("a single thread's row has {a} acquisitions"));
    }
}

#[test]
fn first_use_stacks_fit_in_their_tables() {
    // Six lock identities (reuse.c), one thread: nothing can overflow the stack and event tables,
    // and each live identity has its first-use event (the three that ended are rows of their
    // classes, named by their init sites).
    let s = Scratch::new("first-use");
    let exe = s.compile("reuse");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[]);
    ran.expect_code(0);
    let prof = lockmeter_format::read_profile_file(&s.path("p.lmp")).expect("profile reads");
    assert_eq!(prof.locks.len(), 6, "{ran}");
    assert_eq!(prof.dropped.stacks, 0, "dropped.stacks for 6 locks in one thread\n{ran}");
    let first_uses =
        prof.events.iter().filter(|e| e.kind == lockmeter_format::EventKind::FirstUse).count();
    assert_eq!(first_uses, 3, "one first-use event per live identity: {:?}", prof.events);
    assert_eq!(prof.lock_classes.len(), 3, "three classes: {:?}", prof.lock_classes);
}

#[test]
fn many_named_short_lived_locks_do_not_slow_the_profile_down() {
    // 50 000 named identities: the names' bookkeeping must stay cheap at exit, where the profile
    // is written (the program itself runs in ~0.2 s under the debug collector). The time is
    // printed, never asserted: a timing is not a pass/fail condition.
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
    eprintln!("the run took {:?}", ran.elapsed);
}

#[test]
fn the_collectors_memory_is_resident_bytes_within_the_processs_rss() {
    // 64 threads: each thread table is reserved whole (hundreds of MiB of address space in all)
    // but touched only as it fills. The profile reports the resident part, which cannot exceed
    // the resident memory of the whole process, that the program printed just before exit.
    let s = Scratch::new("resident");
    let exe = s.compile("hammer");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &["64", "2000", "rss"]);
    ran.expect_code(0);
    let rss_kib: u64 = ran
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("rss_kib ")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no rss_kib line\n{ran}"));
    let p = Profile::load(&s.path("p.lmp"), &ran);
    let mem = u(&p.json["overhead"], "memory_bytes");
    p.check(mem > 0, "overhead.memory_bytes > 0");
    p.check(
        mem <= rss_kib * 1024,
        format!("overhead.memory_bytes {mem} <= the process's VmRSS {} bytes", rss_kib * 1024),
    );
}

/// The number after `name` in a program's output.
fn printed(ran: &Ran, name: &str) -> u64 {
    let w: Vec<&str> = ran.stdout.split_whitespace().collect();
    let i = w.iter().position(|x| *x == name).unwrap_or_else(|| panic!("no {name}\n{ran}"));
    w[i + 1].parse().unwrap_or_else(|_| panic!("{name}\n{ran}"))
}

#[test]
fn out_of_address_space_pthread_create_fails_with_eagain_not_an_abort() {
    // RLIMIT_AS a few MiB above the process's size: threads are created until the limit. The
    // collector builds an unwind cache in each pthread_create; a failed allocation there aborted
    // the program. Now the program sees EAGAIN, as it does without the collector.
    let s = Scratch::new("threads-oom");
    let exe = s.compile("threads_oom");
    let plain = run_plain(&s.dir, &exe, &[]);
    plain.expect_code(0);
    assert!(plain.stdout.contains("error EAGAIN"), "{plain}");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[]);
    ran.expect_code(0);
    assert!(ran.stdout.contains("error EAGAIN"), "{ran}");
    let (threads, locks, main) =
        (printed(&ran, "threads"), printed(&ran, "locks"), printed(&ran, "main_locks"));
    assert_eq!(threads, locks, "{ran}");
    assert!(threads > 0, "{ran}");
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_lock("spawn_lock", "mutex", threads + main);
}

#[test]
fn under_ulimit_v_the_program_runs_and_its_profile_is_complete() {
    // The collector's shared arena is sized from --max-memory and within what RLIMIT_AS leaves:
    // a 256 MiB (or larger) reservation used to take the program's room for its thread stacks.
    let s = Scratch::new("ulimit-v");
    let exe = s.compile("hammer");
    let out = s.path("p.lmp");
    let script = format!(
        "ulimit -v 300000 && exec {} run -q -o {} -- {} 3 2000",
        lockmeter_bin().display(),
        out.display(),
        exe.display()
    );
    let cmd = lockmeter_cmd(&s.dir);
    // The same environment as `lockmeter` gets, but started through bash for `ulimit`.
    let mut sh = std::process::Command::new("bash");
    sh.args(["-c", &script]).current_dir(&s.dir);
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    let ran = finish(format!("bash -c '{script}'"), spawn(&mut sh), b"", RUN_LIMIT);
    ran.expect_code(0);
    assert!(ran.stdout.contains("ok 6000"), "{ran}");
    let p = Profile::load(&out, &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    p.expect_lock("big_lock", "mutex", 6000);
}

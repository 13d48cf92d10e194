//! End-to-end tests: settings and report options keep the counts. Hold timing off and sampled,
//! stack depth and sampling, the collector's environment (LOCKMETER_DISABLE, LOCKMETER_CLOCK,
//! plain LD_PRELOAD with LOCKMETER_OUTPUT and LOCKMETER_LOCKS, the TSC rate an exec'd image
//! takes from the image before), and the report's views,
//! formats, --top, --lock and --no-symbols all agree with the program's own counts.
//!
//! Ground-truth programs (`tests/programs/`): ending.c, execer.c, many_locks.c, sampled_mix.c,
//! semantics.c, single.c, striped.c.
//!
//! Needs gcc. Run with `cargo test -p lockmeter --test options`; the harness builds the
//! preload library itself (`cargo build -p lockmeter-preload`) once per test process.

mod common;

use common::*;

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
fn plain_ld_preload_without_lockmeter_run() {
    // The documented low-level use: LD_PRELOAD=liblockmeter_preload.so PROGRAM, configured by
    // the environment (here LOCKMETER_LOCKS=64 and LOCKMETER_OUTPUT). A single process writes
    // OUTPUT (every process tries the plain name first, never overwriting); without
    // LOCKMETER_OUTPUT, lockmeter-<pid>.lmp.
    let s = Scratch::new("ld-preload");
    let exe = s.compile("many_locks");
    let mut cmd = std::process::Command::new(&exe);
    cmd.args(["200", "1"])
        .current_dir(&s.dir)
        .env("LD_PRELOAD", preload())
        .env("LOCKMETER_OUTPUT", s.path("direct.lmp"))
        .env("LOCKMETER_LOCKS", "64");
    let child = spawn(&mut cmd);
    let pid = child.id();
    let ran = finish("many_locks under LD_PRELOAD".into(), child, b"", RUN_LIMIT);
    ran.expect_code(0);
    let p = Profile::load(&s.path("direct.lmp"), &ran);
    p.check_consistency();
    p.eq("header.pid", u(p.header(), "pid"), u64::from(pid));
    p.eq("recorded + dropped", p.totals("acquisitions") + p.dropped("acquisitions"), 200 * 201 / 2);
    p.check(p.dropped("acquisitions") > 0, "LOCKMETER_LOCKS=64 was applied");

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

#[test]
fn plain_ld_preload_passes_the_tsc_rate_to_an_exec_d_image() {
    // Under a plain LD_PRELOAD nobody passes LOCKMETER_TSC_HZ: the first image measures the TSC
    // rate (3 ms of busy-waiting) and passes it on to the image it execs, which takes it instead
    // of measuring its own (two measurements differ in their last digits).
    let s = Scratch::new("ld-preload-hz");
    let exe = s.compile("execer");
    let mut cmd = std::process::Command::new(&exe);
    cmd.args(["10", "10"])
        .current_dir(&s.dir)
        .env("LD_PRELOAD", preload())
        .env("LOCKMETER_OUTPUT", s.path("hz.lmp"))
        .env_remove("LOCKMETER_TSC_HZ")
        .env_remove("LOCKMETER_CLOCK");
    let ran = finish("execer under LD_PRELOAD".into(), spawn(&mut cmd), b"", RUN_LIMIT);
    ran.expect_code(0);
    let files = s.files_with_prefix("hz.lmp");
    assert_eq!(files.len(), 2, "one profile per image: {files:?}\n{ran}");
    let clocks: Vec<(Option<String>, u64)> = files
        .iter()
        .map(|f| {
            let p = Profile::load(f, &ran);
            let c = &p.header()["clock"];
            (sf(c, "source").map(str::to_owned), u(c, "hz"))
        })
        .collect();
    if clocks[0].0.as_deref() != Some("tsc") {
        println!("SKIPPED: the collector chose the {:?} clock (no invariant TSC)", clocks[0].0);
        return;
    }
    assert_eq!(clocks[0], clocks[1], "the exec'd image took the rate of the image before\n{ran}");
}

/// Every stack in a JSON report: waiter, holder and first-use stacks of every lock.
fn all_stacks(p: &Profile) -> Vec<usize> {
    let mut v = Vec::new();
    for l in p.locks() {
        for list in ["waiters", "holders"] {
            for e in l[list].as_array().into_iter().flatten() {
                v.push(e["stack"].as_array().map_or(0, Vec::len));
            }
        }
        if let Some(f) = l["first_use"].as_array() {
            v.push(f.len());
        }
    }
    v
}

#[test]
fn sampling_decisions_are_exact_on_every_path() {
    // One thread, no contention, acquisitions through every path (lock, trylock, read, write,
    // nested, a semaphore's wait and trywait): the preload makes each sampling decision on its
    // fast path or its general path, and both move one countdown per acquisition. --hold
    // sample:7 times every 7th hold of the thread (reads included): exactly floor(A / 7);
    // --stack-sample 3 samples every 3rd acquisition but reads: exactly floor((A - R) / 3).
    let s = Scratch::new("mixsample");
    let exe = s.compile("sampled_mix");
    let opts = ["--hold", "sample:7", "--stack-sample", "3"];
    let ran = run_metered(&s, "m.lmp", &opts, &exe, &["10007"]);
    ran.expect_code(0);
    let (a, r) = (printed(&ran, "acquisitions"), printed(&ran, "reads"));
    let p = Profile::load(&s.path("m.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    p.eq("totals.acquisitions", p.totals("acquisitions"), a);
    p.eq("totals.holds_timed", p.totals("holds_timed"), a / 7);
    let folded = lockmeter(&s.dir, &["flamegraph", "m.lmp", "--weight", "samples", "--folded"]);
    folded.expect_code(0);
    let samples: u64 =
        folded.stdout.lines().filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok()).sum();
    assert_eq!(samples, (a - r) / 3, "{folded}");
}

/// The number after `name` in a program's output.
fn printed(ran: &Ran, name: &str) -> u64 {
    let w: Vec<&str> = ran.stdout.split_whitespace().collect();
    let i = w.iter().position(|x| *x == name).unwrap_or_else(|| panic!("no {name}\n{ran}"));
    w[i + 1].parse().unwrap_or_else(|_| panic!("{name}\n{ran}"))
}

#[test]
fn frames_and_stack_sample_have_their_effect() {
    let s = Scratch::new("effects");
    let exe = s.compile("striped");
    // --frames 0: no stacks at all; --frames 4: none deeper than 4, and some stacks.
    let ran = run_metered(&s, "f0.lmp", &["--frames", "0"], &exe, &["4", "4000"]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("f0.lmp"), &ran);
    p.eq("--frames 0: stacks", all_stacks(&p), Vec::<usize>::new());
    let ran = run_metered(&s, "f4.lmp", &["--frames", "4"], &exe, &["4", "4000"]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("f4.lmp"), &ran);
    let depths = all_stacks(&p);
    p.check(!depths.is_empty(), "--frames 4: no stack recorded");
    p.check(depths.iter().all(|&d| d <= 4), format!("--frames 4: depths {depths:?}"));
    // --stack-sample 10: one acquisition in 10 of each thread carries a stack; one thread,
    // no contention: exactly floor(N / 10) samples.
    let single = s.compile("single");
    let n = 12_345u64;
    let ran = run_metered(&s, "s.lmp", &["--stack-sample", "10"], &single, &[&n.to_string()]);
    ran.expect_code(0);
    let folded = lockmeter(
        &s.dir,
        &["flamegraph", "s.lmp", "--weight", "samples", "--folded", "--lock", "single_lock"],
    );
    folded.expect_code(0);
    let samples: u64 =
        folded.stdout.lines().filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok()).sum();
    assert_eq!(samples, n / 10, "{folded}");
    // Without --stack-sample there are none, and the flame graph says how to get them.
    let ran = run_metered(&s, "n.lmp", &[], &single, &[&n.to_string()]);
    ran.expect_code(0);
    let none = lockmeter(&s.dir, &["flamegraph", "n.lmp", "--weight", "samples", "-o", "n.svg"]);
    assert_ne!(none.code(), 0, "{none}");
    assert!(none.stderr.contains("--stack-sample"), "{none}");
}

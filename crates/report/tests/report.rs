//! Aggregation, sorting and output formats on a hand-built profile.

mod common;

use common::*;
use lockmeter_format::model::*;
use lockmeter_report::*;
use serde_json::Value;

fn merged<'a>(it: impl Iterator<Item = &'a Record>) -> Stats {
    let mut s = Stats::default();
    for r in it {
        s.merge(&r.stats);
    }
    s
}

#[test]
fn per_lock_is_the_sum_of_its_records() {
    let p = sample_profile();
    let a = sample_analysis();
    assert_eq!(a.locks.len(), 4);
    for l in &a.locks {
        let want = merged(p.records.iter().filter(|r| r.lock == l.id));
        assert_eq!(l.agg.stats, want, "lock {}", l.id);
        // Sites partition the lock.
        let mut sites = Agg::default();
        for s in &l.sites {
            sites.merge(&s.agg);
        }
        assert_eq!(sites, l.agg);
    }
    let total = merged(p.records.iter());
    assert_eq!(a.totals.agg.stats, total);
    let mut locks = Stats::default();
    for l in &a.locks {
        locks.merge(&l.agg.stats);
    }
    assert_eq!(locks, total);
    let mut threads = Stats::default();
    for t in &a.threads {
        threads.merge(&t.agg.stats);
    }
    assert_eq!(threads, total);
    assert_eq!(a.totals.agg.stats.acquisitions, 524_110);
    assert_eq!(a.totals.agg.stats.contended, 33_113);
    assert_eq!(a.totals.agg.stats.wait_ns_total, 484_901_500);
    assert_eq!(a.totals.agg.stats.wait_ns_max, 4_000_000);
    assert_eq!((a.totals.locks, a.totals.sites, a.totals.threads), (4, 6, 3));
}

#[test]
fn read_write_split() {
    let a = sample_analysis();
    let config = a.locks.iter().find(|l| l.id == 2).unwrap();
    assert_eq!(config.agg.read_acquisitions, 390_000);
    assert_eq!(config.agg.write_acquisitions, 100);
    assert_eq!(config.agg.stats.acquisitions, 390_100);
    let queue = a.locks.iter().find(|l| l.id == 1).unwrap();
    assert_eq!((queue.agg.read_acquisitions, queue.agg.write_acquisitions), (0, 0));
    assert_eq!(a.totals.agg.read_acquisitions, 390_000);
    assert_eq!(a.totals.agg.write_acquisitions, 100);
}

#[test]
fn sites_merge_by_symbolized_name_across_threads() {
    let a = sample_analysis();
    let queue = a.locks.iter().find(|l| l.id == 1).unwrap();
    assert_eq!(queue.name.as_deref(), Some("queue_lock"));
    assert_eq!(queue.threads, 3);
    let names: Vec<&str> = queue.sites.iter().map(|s| s.function.as_str()).collect();
    // Sorted by total wait: push (two threads, merged) before pop (two addresses, merged).
    assert_eq!(names, ["queue_push+0x24", "queue_pop+0x1c"]);
    assert_eq!(queue.sites[0].agg.stats.acquisitions, 78_000);
    assert_eq!(queue.sites[1].agg.stats.acquisitions, 51_000);
    assert_eq!(queue.sites[1].address, SITE_POP);
    // Without symbols every address is its own site and locks have no name.
    let raw =
        Analysis::new(&sample_profile(), &SymbolizeOptions { enabled: false, symbols_dir: None });
    let q = raw.locks.iter().find(|l| l.id == 1).unwrap();
    assert_eq!(q.name, None);
    assert_eq!(q.sites.len(), 3);
    assert_eq!(q.sites[0].function, format!("{SITE_PUSH:#x}"));
    let heap = raw.locks.iter().find(|l| l.id == 4).unwrap();
    assert_eq!(heap.sites[0].function, "[unknown]");
    assert_eq!(heap.display_name(), format!("{HEAP_MUTEX:#x} (gen 2)"));
}

#[test]
fn records_for_unknown_locks_and_threads_still_count() {
    let mut p = sample_profile();
    p.records.push(rec(9, 77, 0, Mode::Exclusive, stats(5, 1, 10, 10, 0, 0)));
    let a = Analysis::new(&p, &SymbolizeOptions { enabled: false, symbols_dir: None });
    assert_eq!(a.totals.agg.stats.acquisitions, 524_115);
    assert!(a.locks.iter().any(|l| l.id == 77 && l.agg.stats.acquisitions == 5));
    assert!(a.threads.iter().any(|t| t.index == 9 && t.tid == 0));
}

#[test]
fn sorting_by_every_key() {
    let a = sample_analysis();
    let ids = |k: SortKey| a.sorted_locks(k).iter().map(|l| l.id).collect::<Vec<_>>();
    assert_eq!(ids(SortKey::Wait), [1, 2, 3, 4]);
    assert_eq!(ids(SortKey::WaitMax), [2, 1, 3, 4]);
    assert_eq!(ids(SortKey::Hold), [1, 2, 3, 4]);
    assert_eq!(ids(SortKey::HoldMax), [1, 2, 3, 4]);
    assert_eq!(ids(SortKey::Acquisitions), [2, 1, 3, 4]);
    assert_eq!(ids(SortKey::Contended), [1, 2, 3, 4]);
    assert_eq!(ids(SortKey::ContentionRate), [1, 2, 3, 4]);
    // Names: "0x7f3a2c001000", "0x7f3a2c002040 (gen 2)", "config_lock", "queue_lock".
    assert_eq!(ids(SortKey::Name), [3, 4, 2, 1]);
    let tids: Vec<u32> = a.sorted_threads(SortKey::Acquisitions).iter().map(|t| t.tid).collect();
    assert_eq!(tids, [4243, 4244, 4242]);
    let cpus: Vec<u32> = a.sorted_cpus(SortKey::Wait).iter().map(|c| c.cpu).collect();
    assert_eq!(cpus, [1, 0]);
    let cpus: Vec<u32> = a.sorted_cpus(SortKey::Name).iter().map(|c| c.cpu).collect();
    assert_eq!(cpus, [0, 1]);
    let sites: Vec<&str> =
        a.sorted_sites(SortKey::Acquisitions).iter().map(|(_, s)| s.function.as_str()).collect();
    assert_eq!(sites[0], "config_get+0x10");
}

#[test]
fn percentiles_come_from_the_histograms() {
    let a = sample_analysis();
    let queue = a.locks.iter().find(|l| l.id == 1).unwrap();
    // Waits: 12000 + 11000 at ~15 µs (bucket [8192,16384)), 9000 + 100 at ~10 µs (same bucket).
    assert_eq!(queue.agg.wait_percentile_ns(50.0), Some(16_383));
    assert_eq!(queue.agg.wait_avg_ns(), Some(441_000_000 / 32_100));
    let heap = a.locks.iter().find(|l| l.id == 4).unwrap();
    assert_eq!(heap.agg.wait_percentile_ns(99.0), None);
    assert_eq!(heap.agg.wait_avg_ns(), None);
}

fn json_of(a: &Analysis, opts: ReportOptions) -> Value {
    let s = render_to(a, |a, w| json(a, &opts, w));
    serde_json::from_str(&s).expect("valid JSON")
}

#[test]
fn json_has_the_schema_and_exact_numbers() {
    let a = sample_analysis();
    let v = json_of(&a, ReportOptions { format: Format::Json, ..Default::default() });
    assert_eq!(v["schema_version"], 2);
    let t = &v["totals"];
    assert_eq!(t["acquisitions"], 524_110);
    assert_eq!(t["contended"], 33_113);
    assert_eq!(t["wait_ns"], 484_901_500);
    assert_eq!(t["hold_ns"], 217_709_000);
    assert_eq!(t["dropped"], 0);
    assert_eq!(t["locks"], 4);
    for k in ["pid", "cmdline", "duration_ns", "cpu_count", "hold_timing", "end_reason", "clock"] {
        assert!(v["header"].get(k).is_some(), "header.{k}");
    }
    assert_eq!(v["header"]["hold_timing"], "on");
    assert_eq!(v["header"]["end_reason"], "exit");
    assert_eq!(v["header"]["clock"]["source"], "tsc");
    for k in ["acquisitions", "locks", "threads", "holds"] {
        assert_eq!(v["dropped"][k], 0, "dropped.{k}");
    }
    assert_eq!(v["overhead"]["ns_per_pair"], 24);

    let locks = v["locks"].as_array().unwrap();
    assert_eq!(locks.len(), 4, "all locks without an explicit top");
    let q = &locks[0];
    for k in [
        "kind",
        "name",
        "address",
        "generation",
        "acquisitions",
        "read_acquisitions",
        "write_acquisitions",
        "contended",
        "trylock_failures",
        "wait_ns_total",
        "wait_ns_max",
        "hold_ns_total",
        "hold_ns_max",
        "owner_changes",
        "wait_hist_log2_ns",
        "hold_hist_log2_ns",
        "cnt_hold",
        "cnt_lock",
        "cond_waits",
        "cond_wait_ns",
        "sites",
    ] {
        assert!(q.get(k).is_some(), "locks[].{k}");
    }
    assert_eq!(q["kind"], "mutex");
    assert_eq!(q["name"], "queue_lock");
    assert_eq!(q["address"], "0x555555558040");
    assert_eq!(q["acquisitions"], 129_000);
    assert_eq!(q["contended"], 32_100);
    assert_eq!(q["wait_ns_total"], 441_000_000);
    assert_eq!(q["wait_ns_max"], 3_100_000);
    assert_eq!(q["cnt_lock"], 32_100);
    // Histograms: bucket i = [2^(i-1), 2^i) ns, trailing zeros trimmed.
    let wh = q["wait_hist_log2_ns"].as_array().unwrap();
    assert_eq!(wh.len(), 15);
    assert_eq!(wh[14], 32_100);
    let sites = q["sites"].as_array().unwrap();
    assert_eq!(sites.len(), 2);
    for k in [
        "function",
        "address",
        "acquisitions",
        "contended",
        "cnt_hold",
        "cnt_lock",
        "wait_ns_total",
        "hold_ns_total",
        "wait_ns_max",
        "hold_ns_max",
    ] {
        assert!(sites[0].get(k).is_some(), "sites[].{k}");
    }
    assert_eq!(sites[0]["function"], "queue_push+0x24");
    assert_eq!(sites[0]["address"], format!("{SITE_PUSH:#x}"));
    assert_eq!(sites[0]["acquisitions"], 78_000);
    assert_eq!(sites[0]["module"], "app");

    let config = &locks[1];
    assert_eq!(config["kind"], "rwlock");
    assert_eq!(config["read_acquisitions"], 390_000);
    assert_eq!(config["write_acquisitions"], 100);
    let spin = &locks[2];
    assert_eq!(spin["kind"], "spinlock");
    assert!(spin["name"].is_null());
    assert_eq!(locks[3]["generation"], 2);
    assert_eq!(locks[3]["wait_hist_log2_ns"].as_array().unwrap().len(), 0);
    assert!(locks[3]["wait_ns_p50"].is_null());

    let threads = v["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 3);
    for k in ["tid", "name", "acquisitions", "contended", "wait_ns_total", "hold_ns_total"] {
        assert!(threads[0].get(k).is_some(), "threads[].{k}");
    }
    let cpus = v["cpus"].as_array().unwrap();
    assert_eq!(cpus.len(), 2);
    assert_eq!(cpus[0]["cpu"], 0);
    assert_eq!(cpus[0]["wait_ns"], 234_901_500);
}

#[test]
fn json_top_and_sort() {
    let a = sample_analysis();
    let v = json_of(
        &a,
        ReportOptions { top: Some(1), sort: SortKey::Acquisitions, ..Default::default() },
    );
    assert_eq!(v["locks"].as_array().unwrap().len(), 1);
    assert_eq!(v["locks"][0]["name"], "config_lock");
    assert_eq!(v["threads"].as_array().unwrap().len(), 1);
    assert_eq!(v["top"], 1);
    assert_eq!(v["sort"], "acquisitions");
    assert_eq!(v["totals"]["locks"], 4, "totals cover the whole profile");
}

#[test]
fn json_states_drops_and_timing_modes() {
    let mut p = sample_profile();
    p.dropped =
        Dropped { acquisitions: 1234, locks: 5, threads: 1, holds: 7, ..Dropped::default() };
    p.header.hold_timing = HoldTiming::Sampled(16);
    p.header.end_reason = EndReason::Signal(15);
    let a = Analysis::new(&p, &SymbolizeOptions { enabled: false, symbols_dir: None });
    let v = json_of(&a, ReportOptions::default());
    assert_eq!(v["totals"]["dropped"], 1234);
    assert_eq!(v["dropped"]["locks"], 5);
    assert_eq!(v["dropped"]["holds"], 7);
    assert_eq!(v["header"]["hold_timing"], "sampled");
    assert_eq!(v["header"]["hold_sample_every"], 16);
    assert_eq!(v["header"]["end_reason"], "signal");
    assert_eq!(v["header"]["end_signal"], 15);
}

fn csv_rows(a: &Analysis, by: By, top: Option<usize>) -> (Vec<String>, Vec<Vec<String>>) {
    let opts = ReportOptions { by, top, format: Format::Csv, ..Default::default() };
    let s = render_to(a, |a, w| csv(a, &opts, w));
    let mut rd = ::csv::Reader::from_reader(s.as_bytes());
    let head = rd.headers().unwrap().iter().map(String::from).collect();
    let rows = rd.records().map(|r| r.unwrap().iter().map(String::from).collect()).collect();
    (head, rows)
}

#[test]
fn csv_parses_with_json_field_names() {
    let a = sample_analysis();
    let (head, rows) = csv_rows(&a, By::Lock, None);
    assert_eq!(rows.len(), 4);
    let col = |n: &str| head.iter().position(|h| h == n).unwrap_or_else(|| panic!("column {n}"));
    assert_eq!(rows[0][col("name")], "queue_lock");
    assert_eq!(rows[0][col("address")], "0x555555558040");
    assert_eq!(rows[0][col("wait_ns_total")], "441000000");
    assert_eq!(rows[1][col("read_acquisitions")], "390000");
    assert_eq!(rows[2][col("name")], "");
    assert_eq!(rows[3][col("wait_ns_avg")], "");
    for k in
        ["kind", "generation", "acquisitions", "contended", "cnt_hold", "cnt_lock", "hold_ns_max"]
    {
        col(k);
    }

    let (head, rows) = csv_rows(&a, By::Site, Some(2));
    assert_eq!(rows.len(), 2);
    let f = head.iter().position(|h| h == "function").unwrap();
    assert_eq!(rows[0][f], "queue_push+0x24");
    let (_, rows) = csv_rows(&a, By::Thread, None);
    assert_eq!(rows.len(), 3);
    let (head, rows) = csv_rows(&a, By::Cpu, None);
    assert_eq!(head, ["cpu", "acquisitions", "contended", "contention_pct", "wait_ns"]);
    assert_eq!(rows.len(), 2);
}

#[test]
fn csv_quotes_awkward_names() {
    let mut p = sample_profile();
    p.locks[0].name = Some("a, \"b\"".into());
    let a = Analysis::new(&p, &SymbolizeOptions { enabled: false, symbols_dir: None });
    let (head, rows) = csv_rows(&a, By::Lock, None);
    let n = head.iter().position(|h| h == "name").unwrap();
    assert_eq!(rows[0][n], "a, \"b\"");
}

fn text_of(a: &Analysis, opts: ReportOptions) -> String {
    render_to(a, |a, w| text(a, &opts, w))
}

#[test]
fn text_states_the_headline() {
    let a = sample_analysis();
    let s = text_of(&a, ReportOptions::default());
    // 484.9015 ms of waiting over 2 s: on average 0.24 threads waiting, of the 3 that took locks.
    assert!(
        s.lines().any(|l| l
            == "wait: on average 0.24 of the 3 threads that took locks were waiting for one (485 ms of waiting, summed over threads, in a 2.00 s run: time spent waiting, not CPU time)"),
        "{s}"
    );
    assert!(!s.contains("ms/s") && !s.contains("of CPU time"), "{s}");
    let v = json_of(&a, ReportOptions::default());
    let avg = v["headline"]["threads_waiting_avg"].as_f64().unwrap();
    assert!((avg - 0.242_450_75).abs() < 1e-9, "{avg}");
    assert!(s.contains("./app --threads 2 (pid 4242)"));
    assert!(!s.contains("WARNING"));
}

#[test]
fn text_headline_states_the_estimate_and_its_cpu_times() {
    let mut p = sample_profile();
    p.overhead.estimated_slowdown_milli = 2_500;
    let symbolize = SymbolizeOptions { enabled: false, symbols_dir: None };
    let s = text_of(&Analysis::new(&p, &symbolize), ReportOptions::default());
    assert!(s.contains("; estimated slowdown 2.50x\n"), "{s}");
    // With the CPU times the estimate came from.
    p.overhead.cpu_ns = 3_000_000_000;
    p.overhead.hooks_ns = 1_800_000_000;
    let a = Analysis::new(&p, &symbolize);
    let s = text_of(&a, ReportOptions::default());
    assert!(
        s.contains(
            "; estimated slowdown 2.50x (the hooks took ~1.80 s of the run's 3.00 s CPU time)\n"
        ),
        "{s}"
    );
    let v = json_of(&a, ReportOptions::default());
    assert_eq!(v["overhead"]["cpu_ns"], 3_000_000_000u64);
    assert_eq!(v["overhead"]["hooks_ns"], 1_800_000_000u64);
}

#[test]
fn text_warns_loudly_about_drops() {
    let mut p = sample_profile();
    // A profile that does not tell the causes apart (an older file).
    p.dropped = Dropped { acquisitions: 1234, locks: 5, ..Dropped::default() };
    p.header.hold_timing = HoldTiming::Off;
    let a = Analysis::new(&p, &SymbolizeOptions { enabled: false, symbols_dir: None });
    let s = text_of(&a, ReportOptions::default());
    assert!(
        s.contains(
            "!!! WARNING: 1234 acquisitions on ~5 locks not recorded: 1234 with tables full (raise --max-memory SIZE or --locks N)\n"
        ),
        "{s}"
    );
    // The same with threads refused: the thread pool may be the cause too.
    let mut o = sample_profile();
    o.dropped = Dropped { acquisitions: 1234, locks: 5, threads: 3, ..Dropped::default() };
    let oa = Analysis::new(&o, &SymbolizeOptions { enabled: false, symbols_dir: None });
    let os = text_of(&oa, ReportOptions::default());
    assert!(
        os.contains(
            "not recorded: 1234 by threads that got no table or with tables full (raise --threads N, --max-memory SIZE or --locks N)\n"
        ),
        "{os}"
    );
    // Each cause names the `run` option that makes room for it, on the one line.
    let mut q = sample_profile();
    q.dropped = Dropped {
        acquisitions: 1234,
        locks: 5,
        threads: 2,
        acquisitions_no_thread: 1000,
        acquisitions_table_full: 200,
        acquisitions_registry_full: 34,
        ..Dropped::default()
    };
    let qa = Analysis::new(&q, &SymbolizeOptions { enabled: false, symbols_dir: None });
    let qs = text_of(&qa, ReportOptions::default());
    assert!(
        qs.contains(
            "!!! WARNING: 1234 acquisitions on ~5 locks not recorded: 1000 by threads that got no table (raise --threads N); 200 with the collector's memory cap reached (raise --max-memory SIZE); 34 with the lock registry full (raise --locks N)\n"
        ),
        "{qs}"
    );
    assert!(!qs.contains("LOCKMETER_"), "{qs}");
    assert!(s.contains("WARNING"));
    assert!(s.contains("hold timing was off"));
    assert!(!s.contains("clock ran at"));
    let sum = render_to(&a, |a, w| summary(a, SUMMARY_TOP, w));
    assert!(sum.contains("not recorded: 1234 with tables full"));
}

#[test]
fn text_top_n_limits_rows() {
    let a = sample_analysis();
    let s = text_of(&a, ReportOptions { top: Some(2), ..Default::default() });
    assert!(s.contains("locks by total wait (top 2 of 4):"), "{s}");
    assert!(s.contains("queue_lock") && s.contains("config_lock"));
    assert!(!s.contains("0x7f3a2c001000"));
    let s = text_of(&a, ReportOptions { by: By::Thread, top: Some(1), ..Default::default() });
    assert!(s.contains("threads by total wait (top 1 of 3):"), "{s}");
    assert_eq!(s.matches("worker-").count(), 1);
}

#[test]
fn text_columns_align() {
    let a = sample_analysis();
    for by in [By::Lock, By::Site, By::Thread, By::Cpu] {
        let s = text_of(&a, ReportOptions { by, ..Default::default() });
        let table: Vec<&str> = s
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("WAIT-TOTAL"))
            .take_while(|l| !l.is_empty())
            .collect();
        assert!(table.len() > 1, "{by}: {s}");
        // Every numeric column ends at the same char position on every row.
        let head = table[0];
        let ends: Vec<usize> = ["ACQUIRED", "CONTENDED", "WAIT-TOTAL"]
            .iter()
            .map(|h| head.find(h).unwrap() + h.len())
            .collect();
        for row in &table[1..] {
            let chars: Vec<char> = row.chars().collect();
            for &e in &ends {
                assert!(chars.len() >= e, "{by}: short row {row:?}");
                assert_ne!(chars[e - 1], ' ', "{by}: misaligned {row:?}");
                if chars.len() > e {
                    assert_eq!(chars[e], ' ', "{by}: misaligned {row:?}");
                }
            }
        }
    }
}

#[test]
fn empty_profile_renders() {
    let a = Analysis::new(&Profile::default(), &SymbolizeOptions::default());
    let s = text_of(&a, ReportOptions::default());
    assert!(s.contains("wait: no thread waited for a lock (0 threads took locks)"), "{s}");
    assert!(s.contains("no lock acquisitions were recorded"));
    let v = json_of(&a, ReportOptions::default());
    assert_eq!(v["locks"].as_array().unwrap().len(), 0);
    assert!(v["headline"]["wait_ms_per_s"].is_null());
    assert!(v["headline"]["threads_waiting_avg"].is_null());
    for by in [By::Site, By::Thread, By::Cpu] {
        text_of(&a, ReportOptions { by, ..Default::default() });
        csv_rows(&a, by, None);
    }
}

#[test]
fn render_dispatches_on_format() {
    let a = sample_analysis();
    for (format, starts) in
        [(Format::Text, "lockmeter: "), (Format::Json, "{"), (Format::Csv, "id,kind")]
    {
        let opts = ReportOptions { format, ..Default::default() };
        let s = common::render_to(&a, |a, w| lockmeter_report::render(a, &opts, w));
        assert!(s.starts_with(starts), "{format}: {s}");
    }
}

#[test]
fn text_notes_clock_drift() {
    let mut p = sample_profile();
    p.header.clock = ClockInfo { source: 1, hz: 1_000_000_000, hz_run: 1_500_000_000 };
    let a = Analysis::new(&p, &SymbolizeOptions { enabled: false, symbols_dir: None });
    let s = text_of(&a, ReportOptions::default());
    assert!(s.contains("note: the clock ran at 1.500 GHz over the run but ticks were converted at 1.000 GHz: times are off by a factor of ~1.50"), "{s}");
}

#[test]
fn the_collectors_notes_reach_text_and_json() {
    let mut p = sample_profile();
    let note = "Go program /srv/app: its sync.Mutex waits were not traced (no symbol table)";
    p.notes.push(note.into());
    let back = lockmeter_format::read_profile(&lockmeter_format::to_bytes(&p).unwrap()).unwrap();
    let a = Analysis::new(&back, &SymbolizeOptions { enabled: false, symbols_dir: None });
    assert_eq!(a.notes, vec![note.to_owned()]);
    let s = text_of(&a, ReportOptions::default());
    assert!(s.contains(&format!("note: {note}")), "{s}");
    let j = json_of(&a, ReportOptions::default());
    assert_eq!(j["notes"][0].as_str(), Some(note), "{j}");
}

#[test]
fn summary_names_the_top_waiter_and_holder_of_the_top_locks() {
    // events_profile: queue_lock waited 441 ms in all, 350 ms of it by queue_push while
    // queue_pop held it; config_lock 43.9 ms, 40 ms of it by config_reload while config_get
    // held it; the heap spinlock 1.5 µs, with no event recorded; the heap mutex never.
    let a = events_analysis();
    let s = render_to(&a, |a, w| summary(a, SUMMARY_TOP, w));
    let lines: Vec<&str> = s.lines().collect();
    let at = lines.iter().position(|l| l.starts_with("who waited on whom")).expect(&s);
    // The section ends at the blank line before the advice.
    let end = lines[at..].iter().position(|l| l.is_empty()).map_or(lines.len(), |e| at + e);
    assert_eq!(
        lines[at..end],
        [
            "who waited on whom, for the top 3 locks by wait (the top waiting site, the site that held the lock meanwhile):",
            "  queue_push (queue.c:41) waited on queue_lock held from queue_pop (queue.c:58): 79.4% of the lock's wait",
            "  config_reload (config.c:140) waited on config_lock held from config_get+0x10: 91.1% of the lock's wait",
            &format!("  {HEAP_SPIN:#x}: its waiting sites were not recorded"),
        ],
        "{s}"
    );
    // The lock table above it: wait first.
    let head = lines.iter().find(|l| l.trim_start().starts_with("WAIT-TOTAL")).expect(&s);
    assert_eq!(
        head.split_whitespace().collect::<Vec<_>>(),
        [
            "WAIT-TOTAL",
            "CONTENDED",
            "CON%",
            "ACQUIRED",
            "WAIT-MAX",
            "WAIT-AVG",
            "HOLD-TOTAL",
            "HOLD-MAX",
            "KIND",
            "NAME/ADDRESS"
        ],
        "{s}"
    );
}

#[test]
fn summary_says_when_the_holder_is_unknown() {
    // Only the popper's wait on an unknown holder is left of queue_lock's events.
    let mut p = events_profile();
    p.events.retain(|e| e.lock == 1 && e.holder_stack.is_none() && e.wait_ns > 0);
    let a = Analysis::with_symbolizer(&p, &mut FakeSymbols::with_lines());
    let s = render_to(&a, |a, w| summary(a, SUMMARY_TOP, w));
    assert!(
        s.lines().any(|l| l
            == "  queue_pop (queue.c:58) waited on queue_lock while its holder's site was unknown: 0.2% of the lock's wait"),
        "{s}"
    );
}

#[test]
fn without_contention_locks_are_sorted_by_acquisitions() {
    let mut p = sample_profile();
    for r in &mut p.records {
        r.stats.contended = 0;
        r.stats.wait_ns_total = 0;
        r.stats.wait_ns_max = 0;
        r.stats.wait_hist.iter_mut().for_each(|c| *c = 0);
    }
    let a = Analysis::with_symbolizer(&p, &mut FakeSymbols::sample());
    let s = render_to(&a, |a, w| summary(a, SUMMARY_TOP, w));
    let lines: Vec<&str> = s.lines().collect();
    let at = lines.iter().position(|l| l.starts_with("no contention")).expect(&s);
    assert_eq!(lines[at], "no contention: sorted by acquisitions (4 locks):", "{s}");
    // Acquisitions: config_lock 390100, queue_lock 129000, the spinlock 5000, the mutex 10.
    let names: Vec<&str> =
        lines[at + 2..at + 6].iter().map(|l| l.split_whitespace().last().unwrap()).collect();
    assert_eq!(names, ["config_lock", "queue_lock", &format!("{HEAP_SPIN:#x}"), "2)"], "{s}");
    assert!(lines[at + 5].ends_with(&format!("{HEAP_MUTEX:#x} (gen 2)")), "{s}");
    assert!(s.contains("wait: no thread waited for a lock (3 threads took locks)"), "{s}");
    assert!(!s.contains("who waited on whom"), "{s}");
    // The full report too, with --top.
    let t = text_of(&a, ReportOptions { top: Some(2), ..Default::default() });
    assert!(t.contains("no contention: sorted by acquisitions (top 2 of 4 locks):"), "{t}");
    // A sort the user chose that is not about waiting is kept.
    let t = text_of(&a, ReportOptions { sort: SortKey::Hold, ..Default::default() });
    assert!(t.contains("locks by total hold (4):"), "{t}");
}

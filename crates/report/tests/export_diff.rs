//! `diff`: exact numbers and order on hand-built before/after profiles (seed 004's SCTP
//! example: the sender's lock point mostly stops contending, one point disappears, one moves).

mod export_common;

use export_common::*;
use lockmeter_format::model::*;
use lockmeter_report::Analysis;
use lockmeter_report::export::diff::{self, DiffBy, DiffKey, DiffOptions, Status};

const SEND: u64 = 0x5000; // a static lock: matched by name
const STREAM_A: u64 = 0x7f00_0000_1000; // heap locks: matched by their functions
const STREAM_B: u64 = 0x7f00_0000_2000;

/// Sites: sender+0x10 (0x3010 = push_job+0x10), transmitter pop_job+0x10 / +0x18,
/// read_config+0x8.
fn profile(records: Vec<Record>, locks: Vec<LockInfo>) -> Profile {
    Profile {
        header: Header {
            pid: 1,
            cmdline: vec!["./sctp".into()],
            duration_ns: 2_000_000_000,
            ..Header::default()
        },
        locks,
        records,
        ..Profile::default()
    }
}

fn named(id: u32, address: u64, name: &str) -> LockInfo {
    LockInfo { id, address, generation: 0, kind: LockKind::Mutex, name: Some(name.into()) }
}

fn before() -> Profile {
    use Mode::Exclusive as X;
    profile(
        vec![
            // send_mtx: the sender contends a lot at push_job, the transmitter at pop_job.
            rec(1, 1, 0x3010, X, stats(12_240, 5_571, 40_000_000, 9_000_000)),
            rec(2, 1, 0x4010, X, stats(59_394, 503, 5_000_000, 30_000_000)),
            rec(2, 1, 0x4018, X, stats(12_240, 11, 100_000, 1_000_000)),
            // two heap stream locks, both taken by push_job and pop_job: one row.
            rec(1, 2, 0x3010, X, stats(1_000, 10, 10_000, 100_000)),
            rec(2, 3, 0x4010, X, stats(3_000, 20, 30_000, 200_000)),
            rec(2, 3, 0x3010, X, stats(500, 0, 0, 10_000)),
            rec(2, 2, 0x4010, X, stats(500, 0, 0, 10_000)),
            // config: gone after.
            rec(1, 4, 0x5008, X, stats(100, 1, 1_000, 2_000)),
        ],
        vec![
            named(1, SEND, "send_mtx"),
            lock(2, STREAM_A, LockKind::Mutex),
            lock(3, STREAM_B, LockKind::Mutex),
            named(4, 0x5100, "config_lock"),
        ],
    )
}

fn after() -> Profile {
    use Mode::Exclusive as X;
    profile(
        vec![
            // Same lock, other addresses, much less contention; the pop_job site moved by 8.
            rec(1, 7, 0x3010, X, stats(288, 64, 400_000, 200_000)),
            rec(2, 7, 0x4020, X, stats(45_787, 1, 2_000, 20_000_000)),
            // one heap stream lock now.
            rec(1, 8, 0x3010, X, stats(2_000, 5, 5_000, 100_000)),
            rec(2, 8, 0x4010, X, stats(2_000, 5, 5_000, 100_000)),
            // a new lock.
            rec(1, 9, 0x5008, X, stats(10, 0, 0, 500)),
        ],
        vec![
            named(7, 0x6000, "send_mtx"),
            lock(8, 0x7f00_0000_9000, LockKind::Mutex),
            named(9, 0x5200, "stats_lock"),
        ],
    )
}

fn run(opts: &DiffOptions) -> diff::Diff {
    let b = Analysis::with_symbolizer(&before(), &mut FakeSymbols::default());
    let a = Analysis::with_symbolizer(&after(), &mut FakeSymbols::default());
    diff::diff("before.lmp", &b, "after.lmp", &a, opts)
}

#[test]
fn by_lock_numbers_and_order() {
    let d = run(&DiffOptions::default());
    let names: Vec<&str> = d.rows.iter().map(|r| r.lock.as_str()).collect();
    // Largest absolute change in total wait first.
    assert_eq!(
        names,
        ["send_mtx", "[lock taken in pop_job, push_job]", "config_lock", "stats_lock"]
    );
    let send = &d.rows[0];
    assert_eq!(send.status, Status::Both);
    let (b, a) = (send.before.as_ref().unwrap(), send.after.as_ref().unwrap());
    assert_eq!(b.acquisitions, 12_240 + 59_394 + 12_240);
    assert_eq!(a.acquisitions, 288 + 45_787);
    assert_eq!(b.contended, 5_571 + 503 + 11);
    assert_eq!(a.contended, 65);
    assert_eq!(b.wait_ns_total, 45_100_000);
    assert_eq!(a.wait_ns_total, 402_000);
    assert_eq!(send.change.wait_ns, 402_000 - 45_100_000);
    assert_eq!(send.change.acquisitions, 46_075 - 83_874);
    assert_eq!(send.change.hold_ns, 20_200_000 - 40_000_000);
    let pct = send.change.wait_pct.unwrap();
    assert!((pct - (402_000.0 - 45_100_000.0) / 45_100_000.0 * 100.0).abs() < 1e-9);
    let pp = send.change.contention_pct_points;
    let expect = 65.0 * 100.0 / 46_075.0 - 6_085.0 * 100.0 / 83_874.0;
    assert!((pp - expect).abs() < 1e-9, "{pp} {expect}");
    assert_eq!(send.change.cnt_lock, 65 - 6_085);

    // Heap locks merged by their function set: two locks before, one after.
    let heap = &d.rows[1];
    assert_eq!(heap.before.as_ref().unwrap().locks, 2);
    assert_eq!(heap.after.as_ref().unwrap().locks, 1);
    assert_eq!(heap.before.as_ref().unwrap().wait_ns_total, 40_000);
    assert_eq!(heap.change.wait_ns, -30_000);

    assert_eq!(d.rows[2].status, Status::Gone);
    assert!(d.rows[2].after.is_none());
    assert_eq!(d.rows[2].change.wait_ns, -1_000);
    assert_eq!(d.rows[3].status, Status::New);
    assert_eq!(d.rows[3].change.acquisitions, 10);
    assert_eq!(d.rows[3].change.acquisitions_pct, None);

    // Totals over all locks.
    assert_eq!(d.totals.before.as_ref().unwrap().acquisitions, 88_974);
    assert_eq!(d.totals.after.as_ref().unwrap().acquisitions, 50_085);
}

#[test]
fn sort_keys() {
    let d = run(&DiffOptions { sort: DiffKey::Acquisitions, ..DiffOptions::default() });
    let changes: Vec<i64> = d.rows.iter().map(|r| r.change.acquisitions).collect();
    assert_eq!(changes, [-37_799, -1_000, -100, 10]);
    let d = run(&DiffOptions { sort: DiffKey::ContentionRate, top: Some(1), ..Default::default() });
    assert_eq!(d.rows.len(), 1);
    assert_eq!(d.rows_total, 4);
    // config_lock went from 1% to gone (−1 pp), send_mtx from 7.25% to 0.14%.
    assert_eq!(d.rows[0].lock, "send_mtx");
}

#[test]
fn by_site_and_by_function() {
    let d = run(&DiffOptions { by: DiffBy::Site, ..DiffOptions::default() });
    let rows: Vec<(String, String, Status)> =
        d.rows.iter().map(|r| (r.lock.clone(), r.site.clone().unwrap(), r.status)).collect();
    assert_eq!(rows[0], ("send_mtx".into(), "push_job+0x10".into(), Status::Both));
    assert_eq!(d.rows[0].change.wait_ns, 400_000 - 40_000_000);
    // pop_job+0x10 is gone, pop_job+0x20 is new: the offset moved.
    assert!(rows.contains(&("send_mtx".into(), "pop_job+0x10".into(), Status::Gone)));
    assert!(rows.contains(&("send_mtx".into(), "pop_job+0x20".into(), Status::New)));

    // By function, pop_job+0x10, +0x18 and +0x20 are one site.
    let d = run(&DiffOptions { by: DiffBy::Site, by_function: true, ..DiffOptions::default() });
    let pop = d
        .rows
        .iter()
        .find(|r| r.lock == "send_mtx" && r.site.as_deref() == Some("pop_job"))
        .unwrap();
    assert_eq!(pop.status, Status::Both);
    assert_eq!(pop.before.as_ref().unwrap().acquisitions, 59_394 + 12_240);
    assert_eq!(pop.after.as_ref().unwrap().acquisitions, 45_787);
    assert_eq!(pop.change.wait_ns, 2_000 - 5_100_000);
}

#[test]
fn text_table() {
    let d = run(&DiffOptions::default());
    let mut out = Vec::new();
    diff::text(&d, &mut out).unwrap();
    let t = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = t.lines().collect();
    assert!(
        lines[0].starts_with("before before.lmp: ./sctp (pid 1), 2 s; 88974 acquisitions"),
        "{t}"
    );
    assert!(
        lines[1].starts_with("after  after.lmp: ./sctp (pid 1), 2 s; 50085 acquisitions"),
        "{t}"
    );
    assert_eq!(lines[3], "locks by change in total wait (4):");
    assert!(lines[4].contains("ACQUISITIONS") && lines[4].contains("WAIT TOTAL"), "{t}");
    assert!(lines[5].trim_start().starts_with("BEFORE  AFTER"), "{t}");
    assert!(lines[5].trim_end().ends_with("NAME"), "{t}");
    // Rows: totals, then the locks, largest change first, with signs and percentages.
    assert!(lines[6].ends_with("(all locks)"), "{t}");
    let send = lines[7];
    assert!(send.ends_with("send_mtx"), "{t}");
    for cell in
        ["83874", "46075", "-37799 (-45.1%)", "45.1 ms", "402 µs", "-44.7 ms (-99.1%)", "-7.1 pp"]
    {
        assert!(send.contains(cell), "no {cell:?} in {send:?}\n{t}");
    }
    assert!(lines[9].contains("gone") && lines[9].ends_with("config_lock"), "{t}");
    assert!(lines[10].contains("new") && lines[10].ends_with("stats_lock"), "{t}");
    // Columns line up: every row has the name column at the same position.
    let at = lines[5].find("NAME").unwrap();
    for l in &lines[6..] {
        assert!(l.len() > at, "{l}");
    }
}

#[test]
fn json_reads_back() {
    let d = run(&DiffOptions { by: DiffBy::Site, ..DiffOptions::default() });
    let mut out = Vec::new();
    diff::json(&d, &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["schema"], "lockmeter-diff/1");
    assert_eq!(v["by"], "site");
    assert_eq!(v["sort"], "wait");
    assert_eq!(v["before"]["file"], "before.lmp");
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), d.rows_total);
    assert_eq!(rows[0]["lock"], "send_mtx");
    assert_eq!(rows[0]["site"], "push_job+0x10");
    assert_eq!(rows[0]["status"], "both");
    assert_eq!(rows[0]["before"]["acquisitions"], 12_240);
    assert_eq!(rows[0]["after"]["contended"], 64);
    assert_eq!(rows[0]["change"]["wait_ns"], 400_000 - 40_000_000);
    let gone = rows.iter().find(|r| r["status"] == "gone").unwrap();
    assert!(gone["after"].is_null());
    assert_eq!(v["totals"]["change"]["acquisitions"], 50_085 - 88_974);
}

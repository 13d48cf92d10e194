//! The views built from call stacks and events: waiter–holder pairs, waiter and holder stacks,
//! lock names from first uses, filters, histogram tables, and their JSON and CSV forms.

mod common;

use common::*;
use lockmeter_format::model::*;
use lockmeter_report::*;
use serde_json::Value;

fn pair<'a>(a: &'a Analysis, waiter: &str, holder: &str) -> &'a PairAgg {
    a.pairs
        .iter()
        .find(|p| p.waiter.to_string() == waiter && p.holder.to_string() == holder)
        .unwrap_or_else(|| panic!("no pair {waiter} / {holder} in {:#?}", a.pairs))
}

#[test]
fn pairs_aggregate_exactly() {
    let a = events_analysis();
    // queue_lock: push waits on pop (2 threads), pop waits on push, pop waits on unknown;
    // config_lock: writer waits on readers.
    assert_eq!(a.pairs.len(), 4, "{:#?}", a.pairs);
    let p = pair(&a, "queue_push+0x24", "queue_pop+0x1c");
    assert_eq!((p.count, p.wait_ns, p.wait_ns_max), (23_000, 350_000_000, 3_100_000));
    assert_eq!(p.lock_name, "queue_lock");
    assert_eq!(p.waiter.line, Some(41));
    let p = pair(&a, "queue_pop+0x1c", "queue_push+0x24");
    assert_eq!((p.count, p.wait_ns, p.wait_ns_max), (9_000, 90_000_000, 1_000_000));
    let p = pair(&a, "queue_pop+0x1c", "[unknown]");
    assert_eq!((p.count, p.wait_ns), (100, 1_000_000));
    assert_eq!(p.holder.address, 0);
    let p = pair(&a, "config_reload+0x88", "config_get+0x10");
    assert_eq!(p.lock_name, "config_lock");
    // Sorted by total wait; per-lock pairs sum to the top-level ones.
    let waits: Vec<u64> = a.pairs.iter().map(|p| p.wait_ns).collect();
    assert_eq!(waits, [350_000_000, 90_000_000, 40_000_000, 1_000_000]);
    let per_lock: u64 = a.locks.iter().flat_map(|l| &l.pairs).map(|p| p.wait_ns).sum();
    assert_eq!(per_lock, waits.iter().sum::<u64>());
    // Other sort keys.
    let by_count: Vec<u64> = a.sorted_pairs(SortKey::Contended).iter().map(|p| p.count).collect();
    assert_eq!(by_count, [23_000, 9_000, 100, 60]);
    let by_max = a.sorted_pairs(SortKey::WaitMax);
    assert_eq!(by_max[0].wait_ns_max, 4_000_000);
}

#[test]
fn waiter_and_holder_stacks() {
    let a = events_analysis();
    let q = a.locks.iter().find(|l| l.id == 1).unwrap();
    assert_eq!(q.waiters.len(), 2);
    let w = &q.waiters[0];
    assert_eq!((w.stack, w.count, w.ns_total, w.ns_max), (1, 23_000, 350_000_000, 3_100_000));
    let names: Vec<String> = w.frames.iter().map(|f| f.to_string()).collect();
    assert_eq!(names, ["queue_push+0x24", "worker_main+0x40", "start_thread+0x305"]);
    assert_eq!(w.frames[0].inlined[0].function.as_deref(), Some("queue_lock_acquire"));
    assert_eq!(q.waiters[1].ns_total, 91_000_000);
    // Holders by hold time: the pushers' stack (2 threads) first.
    assert_eq!(q.holders.len(), 2);
    assert_eq!(
        (q.holders[0].stack, q.holders[0].count, q.holders[0].ns_total),
        (1, 23_000, 117_000_000)
    );
    assert_eq!(q.holders[0].ns_max, 1_200_000);
    assert_eq!(q.holders[1].frames[0].to_string(), "queue_pop+0x5c");
    // Sampled events and first uses are not waiters.
    let spin = a.locks.iter().find(|l| l.id == 3).unwrap();
    assert!(spin.waiters.is_empty() && spin.holders.is_empty() && spin.pairs.is_empty());
}

#[test]
fn lock_names_by_precedence() {
    let mut p = events_profile();
    p.locks[1].name = Some("config (named by the program)".into());
    let a = Analysis::with_symbolizer(&p, &mut FakeSymbols::with_lines());
    let by_id = |id| a.locks.iter().find(|l| l.id == id).unwrap();
    assert_eq!(by_id(1).name.as_deref(), Some("queue_lock"), "symbol beats first use");
    assert_eq!(by_id(1).name_source, NameSource::Symbol);
    assert!(by_id(1).first_use.is_some());
    assert_eq!(by_id(2).name.as_deref(), Some("config (named by the program)"));
    assert_eq!(by_id(2).name_source, NameSource::Program);
    assert_eq!(by_id(3).name, None, "no first use recorded: the address");
    assert_eq!(by_id(3).name_source, NameSource::Address);
    assert_eq!(by_id(3).display_name(), "0x7f3a2c001000");
    assert_eq!(by_id(4).name_source, NameSource::FirstUse);
    assert_eq!(
        by_id(4).display_name(),
        "heap lock first used at session_new (session.c:12) (gen 2)"
    );
    // Without file:line the site is printed; without a function name, the address.
    let mut s = FakeSymbols::with_lines();
    s.lines.clear();
    let a = Analysis::with_symbolizer(&p, &mut s);
    let l = a.locks.iter().find(|l| l.id == 4).unwrap();
    assert_eq!(l.name.as_deref(), Some("heap lock first used at session_new+0x30"));
    let a = Analysis::with_symbolizer(&p, &mut NoSymbols);
    let l = a.locks.iter().find(|l| l.id == 4).unwrap();
    assert_eq!((l.name.as_deref(), l.name_source), (None, NameSource::Address));
}

fn filtered(lock: Option<&str>, function: Option<&str>) -> Analysis {
    let f = Filter { lock: lock.map(Into::into), function: function.map(Into::into) };
    Analysis::build(&events_profile(), &mut FakeSymbols::with_lines(), &f)
}

#[test]
fn lock_filter_by_name_or_address() {
    let a = filtered(Some("queue"), None);
    assert_eq!(a.locks.len(), 1);
    assert_eq!(a.unfiltered_locks, 4);
    assert_eq!(a.locks[0].name.as_deref(), Some("queue_lock"));
    assert_eq!(a.totals.agg.stats.acquisitions, 129_000);
    assert_eq!(a.totals.locks, 1);
    assert_eq!(a.threads.len(), 3);
    assert_eq!(a.threads.iter().map(|t| t.agg.stats.acquisitions).sum::<u64>(), 129_000);
    assert!(a.pairs.iter().all(|p| p.lock == 1));
    assert_eq!(a.pairs.len(), 3);

    let a = filtered(Some(&format!("{HEAP_SPIN:#x}")), None);
    assert_eq!(a.locks.len(), 1);
    assert_eq!(a.locks[0].id, 3);
    assert_eq!(a.threads.len(), 1);
    // Names from first uses match too.
    let a = filtered(Some("session_new"), None);
    assert_eq!(a.locks.iter().map(|l| l.id).collect::<Vec<_>>(), [4]);
    assert!(filtered(Some("nothing like it"), None).locks.is_empty());
    let a = filtered(Some("nothing like it"), None);
    assert_eq!(a.totals.agg.stats.acquisitions, 0);
    assert!(a.pairs.is_empty() && a.threads.is_empty());
}

#[test]
fn function_filter_keeps_matching_sites_and_stacks() {
    let a = filtered(None, Some("queue_pop"));
    assert_eq!(a.locks.len(), 1);
    let q = &a.locks[0];
    assert_eq!(q.sites.len(), 1);
    assert_eq!(q.sites[0].function, "queue_pop+0x1c");
    assert_eq!(q.agg.stats.acquisitions, 51_000);
    assert_eq!(a.totals.agg.stats.acquisitions, 51_000);
    assert_eq!(a.threads.len(), 1, "only the popper took the lock at queue_pop");
    // Pairs where either side is in queue_pop: all three of queue_lock's.
    assert_eq!(a.pairs.len(), 3);
    // Waiters of the contended acquisitions kept (waiting in, or on a holder in, queue_pop);
    // holders whose stack has a frame in queue_pop.
    assert_eq!(q.waiters.len(), 2);
    assert_eq!(q.holders.len(), 1);
    assert_eq!(q.holders[0].frames[0].to_string(), "queue_pop+0x5c");
    let a = filtered(None, Some("worker_main"));
    let q = &a.locks[0];
    assert!(q.sites.is_empty(), "no call site is in worker_main");
    // The pushers' stack, and the popper's, who waited on holders whose stack is in worker_main.
    assert_eq!(q.waiters.len(), 2);
    assert_eq!(q.waiters[0].frames[1].to_string(), "worker_main+0x40");
    assert_eq!(q.holders.len(), 1);
    // An inlined function matches.
    let a = filtered(None, Some("queue_lock_acquire"));
    assert_eq!(a.locks[0].sites.len(), 1);
    assert_eq!(a.locks[0].sites[0].function, "queue_push+0x24");
    // Both filters.
    let a = filtered(Some("config"), Some("config_get"));
    assert_eq!(a.locks.len(), 1);
    assert_eq!(a.locks[0].agg.stats.acquisitions, 390_000);
    assert_eq!(a.locks[0].agg.read_acquisitions, 390_000);
}

#[test]
fn filters_apply_to_json_and_csv() {
    let a = filtered(Some("queue"), Some("queue_push"));
    let mut out = Vec::new();
    json(&a, &ReportOptions { format: Format::Json, ..Default::default() }, &mut out).unwrap();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["filter"]["lock"], "queue");
    assert_eq!(v["filter"]["function"], "queue_push");
    assert_eq!(v["filter"]["locks_before"], 4);
    assert_eq!(v["locks"].as_array().unwrap().len(), 1);
    assert_eq!(v["locks"][0]["sites"].as_array().unwrap().len(), 1);
    assert_eq!(v["totals"]["acquisitions"], 78_000);
    assert_eq!(v["pairs"].as_array().unwrap().len(), 2);

    let mut out = Vec::new();
    let opts = ReportOptions { format: Format::Csv, by: By::Site, ..Default::default() };
    csv(&a, &opts, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    assert!(text.contains("queue_push+0x24"));
}

#[test]
fn json_v2_stacks_pairs_and_first_use() {
    let a = events_analysis();
    let mut out = Vec::new();
    json(&a, &ReportOptions { format: Format::Json, ..Default::default() }, &mut out).unwrap();
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["schema_version"], 2);
    assert_eq!(v["dropped"]["stacks"], 0);
    let q = &v["locks"][0];
    assert_eq!(q["name"], "queue_lock");
    assert_eq!(q["name_source"], "symbol");
    assert_eq!(q["display_name"], "queue_lock");
    let fu = q["first_use"].as_array().unwrap();
    assert_eq!(fu[0]["function"], "queue_push");
    let w = &q["waiters"][0];
    assert_eq!(w["count"], 23_000);
    assert_eq!(w["wait_ns"], 350_000_000);
    assert_eq!(w["wait_ns_max"], 3_100_000);
    let f0 = &w["stack"][0];
    assert_eq!(f0["address"], format!("{SITE_PUSH:#x}"));
    assert_eq!(f0["name"], "queue_push+0x24");
    assert_eq!(f0["function"], "queue_push");
    assert_eq!(f0["function_offset"], "0x24");
    assert_eq!(f0["module"], "app");
    assert_eq!(f0["file"], "/src/app/queue.c");
    assert_eq!(f0["line"], 41);
    assert_eq!(f0["inlined"][0]["function"], "queue_lock_acquire");
    assert_eq!(f0["inlined"][0]["file"], "/src/app/queue.h");
    assert_eq!(f0["inlined"][0]["line"], 9);
    assert!(w["stack"][2]["file"].is_null());
    let h = &q["holders"][0];
    assert_eq!((h["count"].as_u64(), h["hold_ns"].as_u64()), (Some(23_000), Some(117_000_000)));
    assert_eq!(h["hold_ns_max"], 1_200_000);
    let p = &q["pairs"][0];
    assert_eq!(p["waiter_site"], "queue_push+0x24");
    assert_eq!(p["waiter_function"], "queue_push");
    assert_eq!(p["holder_site"], "queue_pop+0x1c");
    assert_eq!(p["holder_function"], "queue_pop");
    assert_eq!(p["holder"]["line"], 58);
    assert_eq!((p["count"].as_u64(), p["wait_ns"].as_u64()), (Some(23_000), Some(350_000_000)));
    let unknown = q["pairs"].as_array().unwrap().iter().find(|p| p["wait_ns"] == 1_000_000);
    let unknown = unknown.unwrap();
    assert!(unknown["holder_site"].is_null() && unknown["holder"].is_null());
    let s = &q["sites"][0];
    assert_eq!((s["file"].as_str(), s["line"].as_u64()), (Some("/src/app/queue.c"), Some(41)));
    let top = v["pairs"].as_array().unwrap();
    assert_eq!(top.len(), 4);
    assert_eq!(top[0]["lock_name"], "queue_lock");
    assert_eq!(top[0]["lock_id"], 1);
    let heap = v["locks"].as_array().unwrap().iter().find(|l| l["id"] == 4).unwrap();
    assert_eq!(heap["name_source"], "first_use");
    assert!(v["locks"].as_array().unwrap().iter().any(|l| l["first_use"].is_null()));
}

#[test]
fn csv_by_pair() {
    let a = events_analysis();
    let mut out = Vec::new();
    let opts = ReportOptions { format: Format::Csv, by: By::Pair, ..Default::default() };
    csv(&a, &opts, &mut out).unwrap();
    let mut r = ::csv::Reader::from_reader(out.as_slice());
    let head: Vec<String> = r.headers().unwrap().iter().map(str::to_owned).collect();
    assert_eq!(head[..4], ["lock_id", "lock_name", "waiter_site", "waiter_function"]);
    let rows: Vec<::csv::StringRecord> = r.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 4);
    let col = |name: &str| head.iter().position(|h| h == name).unwrap();
    assert_eq!(&rows[0][col("waiter_site")], "queue_push+0x24");
    assert_eq!(&rows[0][col("waiter_line")], "41");
    assert_eq!(&rows[0][col("holder_site")], "queue_pop+0x1c");
    assert_eq!(&rows[0][col("wait_ns")], "350000000");
    assert_eq!(&rows[0][col("count")], "23000");
    assert_eq!(&rows[3][col("holder_site")], "");
}

#[test]
fn histogram_table_math() {
    let mut h = [0u64; 65];
    h[3] = 10; // [4, 8) ns
    h[5] = 30; // [16, 32) ns
    h[6] = 60; // [32, 64) ns
    let rows = hist_rows(&h);
    assert_eq!(rows.len(), 4, "first to last non-empty bucket, empty ones between");
    assert_eq!((rows[0].bucket, rows[0].low, rows[0].high, rows[0].count), (3, 4, 8, 10));
    assert_eq!((rows[1].bucket, rows[1].count), (4, 0));
    assert_eq!(rows[1].cum_pct, 10.0);
    assert_eq!((rows[2].pct, rows[2].cum_pct), (30.0, 40.0));
    assert_eq!((rows[3].pct, rows[3].cum_pct), (60.0, 100.0));
    assert!(hist_rows(&[0; 65]).is_empty());
    let mut one = [0u64; 65];
    one[0] = 2;
    let rows = hist_rows(&one);
    assert_eq!((rows.len(), rows[0].low, rows[0].high, rows[0].cum_pct), (1, 0, 1, 100.0));

    // Percentiles: the upper bound of the bucket holding them, clamped to the maximum.
    let agg = Agg {
        stats: Stats { wait_hist: h, wait_ns_max: 50, contended: 100, ..Stats::default() },
        ..Agg::default()
    };
    assert_eq!(agg.wait_percentile_ns(10.0), Some(7));
    assert_eq!(agg.wait_percentile_ns(11.0), Some(31));
    assert_eq!(agg.wait_percentile_ns(50.0), Some(50));
    assert_eq!(agg.wait_percentile_ns(99.0), Some(50));
}

#[test]
fn text_views_mention_what_they_show() {
    let a = events_analysis();
    let text_of = |opts: ReportOptions| {
        let mut out = Vec::new();
        text(&a, &opts, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    };
    let s = text_of(ReportOptions { by: By::Pair, ..Default::default() });
    assert!(s.contains("waiter-holder pairs by total wait (4):"), "{s}");
    assert!(
        s.lines().any(|l| l.contains("queue_push+0x24 (queue.c:41)")
            && l.contains("queue_pop+0x1c (queue.c:58)")
            && l.contains("350 ms")),
        "{s}"
    );
    let s = text_of(ReportOptions { stacks: true, top: Some(1), ..Default::default() });
    assert!(s.contains("queue_lock_acquire [inlined]  queue.h:9"), "{s}");
    // Profiles without events say so.
    let b = sample_analysis();
    let mut out = Vec::new();
    text(&b, &ReportOptions { by: By::Pair, ..Default::default() }, &mut out).unwrap();
    assert!(String::from_utf8(out).unwrap().contains("no waiter-holder pairs"));
    // A filter is stated in the header.
    let f = filtered(Some("queue"), None);
    let mut out = Vec::new();
    text(&f, &ReportOptions::default(), &mut out).unwrap();
    assert!(String::from_utf8(out).unwrap().contains("filter:   --lock queue: 1 of 4 locks"));
}

#[test]
fn one_fold_for_every_view() {
    // A second stack id with the same frames as stack 1 (a collector may intern a stack twice):
    // its events join stack 1's in the analysis and in the stack samples the exports read.
    let mut p = events_profile();
    let frames = p.stacks.iter().find(|s| s.id == 1).unwrap().frames.clone();
    p.stacks.push(Stack { id: 99, frames });
    let mut twin =
        p.events.iter().find(|e| e.stack == 1 && e.kind == EventKind::Contended).unwrap().clone();
    twin.stack = 99;
    twin.count = 7;
    twin.wait_ns = 70;
    twin.wait_ns_max = 10;
    p.events.push(twin);
    let a = Analysis::with_symbolizer(&p, &mut FakeSymbols::with_lines());
    let q = a.locks.iter().find(|l| l.id == 1).unwrap();
    let w = q.waiters.iter().find(|w| w.stack == 1).unwrap();
    assert_eq!((w.count, w.ns_total), (23_007, 350_000_070));
    assert!(q.waiters.iter().all(|w| w.stack != 99));
    // The exports' samples are the analysis's stacks: same sums, heaviest first.
    let samples = a.stack_samples(EventKind::Contended);
    let total: u64 =
        p.events.iter().filter(|e| e.kind == EventKind::Contended).map(|e| e.wait_ns).sum();
    assert_eq!(samples.iter().map(|s| s.ns).sum::<u64>(), total);
    assert!(samples.windows(2).all(|w| w[0].ns >= w[1].ns));
    assert_eq!(samples[0].frames[0].to_string(), "queue_push+0x24");
    // Sampled acquisitions are their own list, never waiters.
    let sampled: u64 =
        p.events.iter().filter(|e| e.kind == EventKind::Sampled).map(|e| e.count).sum();
    let got: u64 = a.stack_samples(EventKind::Sampled).iter().map(|s| s.count).sum();
    assert_eq!(got, sampled);
}

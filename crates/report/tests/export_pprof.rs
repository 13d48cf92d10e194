//! pprof and CSV exports, read back; `go tool pprof -top` reads the pprof where Go is installed.

mod export_common;

use std::collections::HashMap;
use std::path::PathBuf;

use export_common::*;
use lockmeter_format::model::*;
use lockmeter_report::export::pprof::{self, PprofProfile};

fn tmpdir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("lockmeter-export-pprof").join(name);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A sample as names: (lock label, function names innermost first, [count, ns]).
type Named = (String, Vec<String>, Vec<i64>);

fn named(p: &PprofProfile) -> Vec<Named> {
    let locs: HashMap<u64, &pprof::Location> = p.location.iter().map(|l| (l.id, l)).collect();
    let funcs: HashMap<u64, &pprof::Function> = p.function.iter().map(|f| (f.id, f)).collect();
    let mut v: Vec<Named> = p
        .sample
        .iter()
        .map(|s| {
            let lock = s
                .label
                .iter()
                .find(|l| p.string(l.key) == "lock")
                .map(|l| p.string(l.str).to_owned())
                .expect("a lock label");
            let frames = s
                .location_id
                .iter()
                .map(|id| {
                    let l = locs[id];
                    assert_eq!(l.line.len(), 1);
                    p.string(funcs[&l.line[0].function_id].name).to_owned()
                })
                .collect();
            (lock, frames, s.value.clone())
        })
        .collect();
    v.sort();
    v
}

fn gz_bytes(p: &Profile) -> Vec<u8> {
    let pb = pprof::build(p, &mut FakeSymbols::default());
    let mut out = Vec::new();
    pprof::write(&pb, true, &mut out).unwrap();
    out
}

#[test]
fn pprof_reads_back() {
    let p = stack_profile();
    let bytes = gz_bytes(&p);
    assert_eq!(&bytes[..2], &[0x1f, 0x8b], "gzipped");
    let pb = pprof::read(&bytes).unwrap();

    assert_eq!(pb.string_table[0], "");
    let types: Vec<(&str, &str)> =
        pb.sample_type.iter().map(|t| (pb.string(t.r#type), pb.string(t.unit))).collect();
    assert_eq!(types, [("contentions", "count"), ("delay", "nanoseconds")]);
    let period = pb.period_type.as_ref().unwrap();
    assert_eq!((pb.string(period.r#type), pb.string(period.unit)), ("contentions", "count"));
    assert_eq!(pb.period, 1);
    assert_eq!(pb.time_nanos, 1_700_000_000_000_000_000);
    assert_eq!(pb.duration_nanos, 1_000_000_000);

    let heap = format!("{HEAP:#x}");
    let s = |v: &[&str]| v.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    let expect: Vec<Named> = vec![
        (heap, s(&["pop_job", "worker", "main"]), vec![2, 50]),
        ("config_lock".into(), s(&["read_config", "main"]), vec![1, 40]),
        ("queue_lock".into(), s(&["[unknown stack]"]), vec![1, 7]),
        ("queue_lock".into(), s(&["pop_job", "worker", "main"]), vec![3, 300]),
        ("queue_lock".into(), s(&["push_job", "worker", "main"]), vec![15, 1700]),
    ];
    assert_eq!(named(&pb), expect);

    // Sums equal the profile's contended events exactly.
    let contended = p.events.iter().filter(|e| e.kind == EventKind::Contended);
    let (count, ns) = contended.fold((0, 0), |(c, n), e| (c + e.count, n + e.wait_ns));
    assert_eq!(pb.sample.iter().map(|s| s.value[0]).sum::<i64>(), count as i64);
    assert_eq!(pb.sample.iter().map(|s| s.value[1]).sum::<i64>(), ns as i64);

    // One location per address (innermost first: the lock call site), in the mapping.
    let push = pb.location.iter().find(|l| l.address == PUSH_SITE).unwrap();
    assert_eq!(push.mapping_id, 1);
    assert_eq!(pb.mapping.len(), 1);
    assert_eq!(pb.string(pb.mapping[0].filename), "/opt/app/app");
    assert!(pb.mapping[0].has_functions);
    let mut addrs: Vec<u64> = pb.location.iter().map(|l| l.address).collect();
    addrs.sort();
    addrs.dedup();
    assert_eq!(addrs.len(), pb.location.len());
    // Ids are 1..=n.
    for (i, l) in pb.location.iter().enumerate() {
        assert_eq!(l.id, i as u64 + 1);
    }
    // Functions by name, once each.
    let mut names: Vec<&str> = pb.function.iter().map(|f| pb.string(f.name)).collect();
    names.sort();
    assert_eq!(names, ["[unknown stack]", "main", "pop_job", "push_job", "read_config", "worker"]);
}

#[test]
fn raw_pprof_reads_back_and_garbage_does_not() {
    let p = stack_profile();
    let pb = pprof::build(&p, &mut FakeSymbols::default());
    let mut raw = Vec::new();
    pprof::write(&pb, false, &mut raw).unwrap();
    assert_eq!(pprof::read(&raw).unwrap(), pb);
    assert!(pprof::read(&[0xff, 0xff, 0xff]).is_err());
}

#[test]
fn csv_reads_back() {
    let p = stack_profile();
    let mut out = Vec::new();
    pprof::write_csv(&p, &mut FakeSymbols::default(), &mut out).unwrap();
    let mut r = csv::Reader::from_reader(&out[..]);
    let headers: Vec<String> = r.headers().unwrap().iter().map(str::to_owned).collect();
    assert_eq!(
        headers,
        ["lock", "site", "site_location", "stack", "contentions", "wait_ns", "wait_ns_max"]
    );
    let rows: Vec<Vec<String>> =
        r.records().map(|x| x.unwrap().iter().map(str::to_owned).collect()).collect();
    assert_eq!(rows.len(), 5);
    // Heaviest first.
    assert_eq!(
        rows[0],
        [
            "queue_lock",
            "push_job+0x10",
            "",
            "push_job+0x10;worker+0x20;main+0x30",
            "15",
            "1700",
            "400"
        ]
    );
    assert_eq!(rows[4][0], "queue_lock");
    assert_eq!(rows[4][3], "[unknown stack]");
    let wait: u64 = rows.iter().map(|r| r[5].parse::<u64>().unwrap()).sum();
    assert_eq!(wait, 2097);
}

#[test]
fn go_tool_pprof_reads_it() {
    let dir = tmpdir("hand");
    let file = dir.join("hand.pb.gz");
    std::fs::write(&file, gz_bytes(&stack_profile())).unwrap();
    let Some(top) = go_pprof_top(&file, &[]) else { return };
    // Default sample type: delay (the last), in ns: 2097 ns total.
    assert!(top.contains("Type: delay"), "{top}");
    for f in ["push_job", "pop_job", "read_config", "worker", "main"] {
        assert!(top.contains(f), "{f} missing from:\n{top}");
    }
    assert!(top.contains("2097ns total") || top.contains("2.10us total"), "{top}");
    let top = go_pprof_top(&file, &["-sample_index=contentions"]).unwrap();
    assert!(top.contains("Type: contentions"), "{top}");
    assert!(top.contains("22 total"), "{top}");
    // The lock label filters.
    let top = go_pprof_top(&file, &["-tagfocus=lock=config_lock"]).unwrap();
    assert!(top.contains("read_config"), "{top}");
    assert!(!top.contains("push_job"), "{top}");
}

#[test]
fn pprof_has_files_lines_and_inlined_functions() {
    let p = stack_profile();
    let pb = pprof::build(&p, &mut FakeSymbols { debug: true, ..FakeSymbols::default() });
    let worker = pb.location.iter().find(|l| l.address == 0x2020).unwrap();
    // Inlined first, then the function it is inlined into.
    let lines: Vec<(&str, &str, i64)> = worker
        .line
        .iter()
        .map(|l| {
            let f = pb.function.iter().find(|f| f.id == l.function_id).unwrap();
            (pb.string(f.name), pb.string(f.filename), l.line)
        })
        .collect();
    assert_eq!(lines, [("next_job", "/src/queue.h", 7), ("worker", "/src/app.c", 0x20)]);
    assert!(pb.mapping[0].has_filenames && pb.mapping[0].has_line_numbers);
    assert!(pb.mapping[0].has_inline_frames);
    // Functions are per (name, file): `worker` once although two addresses are in it.
    assert_eq!(pb.function.iter().filter(|f| pb.string(f.name) == "worker").count(), 1);

    let dir = tmpdir("debug");
    let file = dir.join("debug.pb.gz");
    let mut gz = Vec::new();
    pprof::write(&pb, true, &mut gz).unwrap();
    std::fs::write(&file, gz).unwrap();
    if let Some(top) = go_pprof_top(&file, &[]) {
        assert!(top.contains("next_job"), "{top}");
    }
}

#[test]
fn csv_site_location() {
    let p = stack_profile();
    let mut out = Vec::new();
    pprof::write_csv(&p, &mut FakeSymbols { debug: true, ..FakeSymbols::default() }, &mut out)
        .unwrap();
    let mut r = csv::Reader::from_reader(&out[..]);
    let first = r.records().next().unwrap().unwrap();
    assert_eq!(&first[2], "app.c:16");
}

//! Folded stacks and flame graphs, read back.

mod export_common;

use export_common::*;
use lockmeter_format::model::*;
use lockmeter_report::NoSymbols;
use lockmeter_report::export::flame::{self, FlameOptions, FoldedLine};
use lockmeter_report::export::{ExportError, Weight};

/// Parses folded text: (frames, weight) per line.
fn parse(text: &str) -> Vec<(Vec<String>, u64)> {
    text.lines()
        .map(|l| {
            let (stack, w) = l.rsplit_once(' ').expect("a space before the weight");
            (stack.split(';').map(str::to_owned).collect(), w.parse().expect("a number"))
        })
        .collect()
}

fn folded_text(p: &Profile, weight: Weight, lock: Option<&str>) -> String {
    let lines = flame::folded(p, &mut FakeSymbols::default(), weight, lock);
    let mut out = Vec::new();
    flame::write_folded(&lines, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

/// The sum of an event kind's field over the profile.
fn total(p: &Profile, kind: EventKind, f: fn(&Event) -> u64) -> u64 {
    p.events.iter().filter(|e| e.kind == kind).map(f).sum()
}

#[test]
fn folded_wait_is_exact() {
    let p = stack_profile();
    let text = folded_text(&p, Weight::Wait, None);
    let lines = parse(&text);
    let heap = format!("{HEAP:#x}");
    let expect: Vec<(Vec<&str>, u64)> = vec![
        (vec![&heap, "main+0x30", "worker+0x20", "pop_job+0x10"], 50),
        (vec!["config_lock", "main+0x40", "read_config+0x8"], 40),
        (vec!["queue_lock", "[unknown stack]"], 7),
        (vec!["queue_lock", "main+0x30", "worker+0x20", "pop_job+0x10"], 300),
        (vec!["queue_lock", "main+0x30", "worker+0x20", "push_job+0x10"], 1700),
    ];
    let got: Vec<(Vec<&str>, u64)> =
        lines.iter().map(|(f, w)| (f.iter().map(String::as_str).collect(), *w)).collect();
    assert_eq!(got, expect, "{text}");
    // Weights sum to the profile's total exactly.
    let sum: u64 = lines.iter().map(|l| l.1).sum();
    assert_eq!(sum, total(&p, EventKind::Contended, |e| e.wait_ns));
    assert_eq!(sum, 2097);
}

#[test]
fn folded_contentions_and_hold() {
    let p = stack_profile();
    let c = parse(&folded_text(&p, Weight::Contentions, None));
    assert_eq!(c.iter().map(|l| l.1).sum::<u64>(), total(&p, EventKind::Contended, |e| e.count));
    assert_eq!(c.iter().map(|l| l.1).sum::<u64>(), 22);
    let push = c.iter().find(|l| l.0.last().unwrap() == "push_job+0x10").unwrap();
    assert_eq!(push.1, 15);

    // Hold: holder stacks of Holding events, weighted by hold time.
    let h = parse(&folded_text(&p, Weight::Hold, None));
    assert_eq!(h.len(), 2);
    assert_eq!(h.iter().map(|l| l.1).sum::<u64>(), total(&p, EventKind::Holding, |e| e.wait_ns));
    assert!(h.iter().all(|l| l.0.last().unwrap() == "pop_job+0x18"));
    assert_eq!(h.iter().find(|l| l.0[0] == "queue_lock").unwrap().1, 900);
}

#[test]
fn folded_lock_filter_and_separator_in_names() {
    let mut p = stack_profile();
    p.stacks.push(Stack { id: 5, frames: vec![0x6010, 0x1050] });
    p.events.push(event(1, 3, Mode::Write, EventKind::Contended, 5, 1, 60, 60));
    let text = folded_text(&p, Weight::Wait, Some("config"));
    let lines = parse(&text);
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines.iter().all(|l| l.0[0] == "config_lock"));
    // `;` inside a function name cannot split the frame.
    assert!(text.contains("config_lock;main+0x50;std::vec::Vec<T: 4>::push+0x10 60"), "{text}");
    assert_eq!(lines.iter().map(|l| l.1).sum::<u64>(), 100);
}

#[test]
fn lines_with_the_same_names_merge() {
    // Without symbols every address is its own frame; two stacks that differ only in the
    // address of an unnamed frame stay apart, while identical ones merge.
    let mut p = stack_profile();
    p.stacks.push(Stack { id: 6, frames: vec![PUSH_SITE, 0x2020, 0x1030] });
    p.events.push(event(3, 1, Mode::Exclusive, EventKind::Contended, 6, 1, 3, 3));
    let lines = flame::folded(&p, &mut NoSymbols, Weight::Wait, Some("0x"));
    // NoSymbols: no lock names, so every lock is its address.
    assert_eq!(lines.len(), 5);
    let push = FoldedLine {
        frames: vec![
            format!("{QUEUE:#x}"),
            "0x1030".into(),
            "0x2020".into(),
            format!("{PUSH_SITE:#x}"),
        ],
        weight: 1703,
    };
    assert!(lines.contains(&push), "{lines:?}");
}

#[test]
fn site_fallback_without_stacks() {
    let mut p = stack_profile();
    p.stacks.clear();
    p.events.clear();
    let lines = parse(&folded_text(&p, Weight::Wait, None));
    // One frame per (lock, site), weights from the records.
    let wait: u64 = p.records.iter().map(|r| r.stats.wait_ns_total).sum();
    assert_eq!(lines.iter().map(|l| l.1).sum::<u64>(), wait);
    assert!(lines.iter().all(|l| l.0.len() == 2));
    assert!(lines.contains(&(vec!["queue_lock".into(), "push_job+0x10".into()], 1700)));
}

#[test]
fn flamegraph_svg_reads_back() {
    let p = stack_profile();
    let mut svg = Vec::new();
    let opts = FlameOptions { weight: Weight::Wait, ..FlameOptions::default() };
    flame::flamegraph(&p, &mut FakeSymbols::default(), &opts, &mut svg).unwrap();
    let svg = String::from_utf8(svg).unwrap();
    // inferno writes a DOCTYPE.
    let opts = roxmltree::ParsingOptions { allow_dtd: true, ..Default::default() };
    let doc = roxmltree::Document::parse_with_options(&svg, opts).expect("well-formed SVG");
    let texts: Vec<&str> = doc.descendants().filter_map(|n| n.text()).collect();
    assert!(texts.iter().any(|t| t.contains("Lock wait time by waiter stack")), "{texts:?}");
    let titles: Vec<&str> =
        doc.descendants().filter(|n| n.has_tag_name("title")).filter_map(|n| n.text()).collect();
    // Each frame's tooltip: name (weight ns waited, share).
    assert!(titles.iter().any(|t| t.starts_with("queue_lock (2,007 ns waited")), "{titles:?}");
    assert!(titles.iter().any(|t| t.starts_with("push_job+0x10 (1,700 ns waited")), "{titles:?}");
    assert!(titles.iter().any(|t| t.starts_with("config_lock (40 ns waited")), "{titles:?}");
    let rects = doc.descendants().filter(|n| n.has_tag_name("rect")).count();
    assert!(rects >= 10, "{rects} rects");
}

#[test]
fn flamegraph_of_nothing_is_an_error() {
    let mut p = stack_profile();
    p.events.retain(|e| e.kind != EventKind::Contended);
    let mut svg = Vec::new();
    let e = flame::flamegraph(&p, &mut NoSymbols, &FlameOptions::default(), &mut svg).unwrap_err();
    assert!(matches!(e, ExportError::Empty(_)));
    assert_eq!(e.to_string(), "nothing to draw: the profile has no contended acquisition");
    let opts = FlameOptions { lock: Some("nope".into()), ..FlameOptions::default() };
    let e = flame::flamegraph(&stack_profile(), &mut NoSymbols, &opts, &mut svg).unwrap_err();
    assert!(e.to_string().contains("on a lock matching \"nope\""), "{e}");
}

#[test]
fn inlined_functions_are_frames() {
    let p = stack_profile();
    let mut sym = FakeSymbols { debug: true, ..FakeSymbols::default() };
    let lines = flame::folded(&p, &mut sym, Weight::Wait, Some("queue"));
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    assert!(
        text.contains(
            &"queue_lock;main+0x30;worker+0x20;next_job [inlined];push_job+0x10 1700".to_owned()
        ),
        "{text:?}"
    );
}

//! Golden files for the text layout. Regenerate with
//! `LOCKMETER_BLESS=1 cargo test -p lockmeter-report --test golden`.

mod common;

use std::path::PathBuf;

use common::*;
use lockmeter_format::model::{Dropped, HoldTiming};
use lockmeter_report::*;

fn check(name: &str, got: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    if std::env::var_os("LOCKMETER_BLESS").is_some() {
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!("{}: {e} (run with LOCKMETER_BLESS=1 to create)", path.display())
    });
    if want != got {
        panic!(
            "{name} differs from {} (run with LOCKMETER_BLESS=1 to update)\n--- want\n{want}\n--- got\n{got}",
            path.display()
        );
    }
}

fn text_of(a: &Analysis, opts: ReportOptions) -> String {
    render_to(a, |a, w| text(a, &opts, w))
}

#[test]
fn golden_by_lock() {
    check("by_lock.txt", &text_of(&sample_analysis(), ReportOptions::default()));
}

#[test]
fn golden_by_site() {
    let opts = ReportOptions { by: By::Site, ..Default::default() };
    check("by_site.txt", &text_of(&sample_analysis(), opts));
}

#[test]
fn golden_by_thread() {
    let opts = ReportOptions { by: By::Thread, sort: SortKey::Acquisitions, ..Default::default() };
    check("by_thread.txt", &text_of(&sample_analysis(), opts));
}

#[test]
fn golden_by_cpu() {
    let opts = ReportOptions { by: By::Cpu, ..Default::default() };
    check("by_cpu.txt", &text_of(&sample_analysis(), opts));
}

#[test]
fn golden_summary_with_drops() {
    let mut p = sample_profile();
    p.dropped = Dropped {
        acquisitions: 1234,
        locks: 5,
        threads: 1,
        holds: 17,
        acquisitions_no_thread: 1000,
        acquisitions_table_full: 200,
        acquisitions_registry_full: 34,
        ..Dropped::default()
    };
    p.header.hold_timing = HoldTiming::Sampled(16);
    let a = Analysis::with_symbolizer(&p, &mut FakeSymbols::sample());
    check("summary_drops.txt", &render_to(&a, |a, w| summary(a, 2, w)));
}

#[test]
fn golden_by_pair() {
    let opts = ReportOptions { by: By::Pair, ..Default::default() };
    check("by_pair.txt", &text_of(&events_analysis(), opts));
}

#[test]
fn golden_hist() {
    let opts = ReportOptions { hist: true, top: Some(2), ..Default::default() };
    check("hist.txt", &text_of(&events_analysis(), opts));
}

#[test]
fn golden_stacks() {
    let opts = ReportOptions { stacks: true, top: Some(2), ..Default::default() };
    check("stacks.txt", &text_of(&events_analysis(), opts));
}

#[test]
fn golden_by_lock_with_first_use_names() {
    check("by_lock_events.txt", &text_of(&events_analysis(), ReportOptions::default()));
}

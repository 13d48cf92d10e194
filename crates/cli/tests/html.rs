//! The HTML report, rendered by a real browser (headless Chromium): the page draws its lock
//! table, details, histograms and flame graph from the data it embeds, with nothing loaded from
//! the network.

mod common;
use common::*;

#[test]
fn html_report_renders_in_a_browser() {
    let s = Scratch::new("html");
    let out = s.path("demo.lmp");
    let ran = lockmeter(
        &s.dir,
        &["demo", "--threads", "4", "--iterations", "4000", "-q", "-o", out.to_str().unwrap()],
    );
    ran.expect_code(0);
    let p = Profile::load(&out, &ran);
    let html = s.path("report.html");
    lockmeter(&s.dir, &["report", out.to_str().unwrap(), "--format", "html", "-o", "report.html"])
        .expect_code(0);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    for needle in ["http://", "https://", "<link ", "src=\"http"] {
        // The only URL in the page is the SVG namespace, which is a name, not a load.
        let uses = page.matches(needle).count();
        let ns = page.matches("http://www.w3.org/").count();
        assert!(uses <= ns, "the page refers to the network ({needle})");
    }
    // Never overwritten.
    let again = lockmeter(
        &s.dir,
        &["report", out.to_str().unwrap(), "--format", "html", "-o", "report.html"],
    );
    assert_ne!(again.code(), 0);
    assert!(again.stderr.contains("never overwrites"), "{}", again.stderr);

    let Some(dom) = rendered_dom(&html) else {
        eprintln!(
            "SKIPPED html_report_renders_in_a_browser's browser check: no chromium (bash .ci/install.sh installs it)"
        );
        return;
    };
    // Every lock is a row of the rendered table, named as in the JSON report.
    let rows = dom.matches("<tr class=\"lock\"").count();
    p.eq("rendered lock rows", rows, p.locks().len());
    for name in ["WORK_QUEUE_LOCK", "STATS_LOCK", "CONFIG_LOCK"] {
        p.check(dom.contains(name), format!("{name} not in the rendered page"));
    }
    // The hot lock's details are open: its sites, its histograms, its stacks.
    for needle in [
        "call sites",
        "wait time of contended acquisitions",
        "waiter stacks",
        "<svg class=\"hist\"",
    ] {
        p.check(dom.contains(needle), format!("the rendered page lacks {needle:?}"));
    }
    p.check(dom.contains("id=\"headline\""), "no headline");
    p.check(dom.contains("id=\"flame\""), "no flame graph");
}

//! Figures, read back: the SVG parsed as XML, the PNG decoded.

mod export_common;

use export_common::*;
use lockmeter_format::model::*;
use lockmeter_report::Analysis;
use lockmeter_report::export::ExportError;
use lockmeter_report::export::plot::{self, ImageFormat, PlotKind, PlotOptions};

fn analysis() -> Analysis {
    Analysis::with_symbolizer(&stack_profile(), &mut FakeSymbols::default())
}

/// Every text of the SVG.
fn texts(doc: &roxmltree::Document<'_>) -> Vec<String> {
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .map(|t| t.trim().to_owned())
        .collect()
}

/// Polylines with at least `min` points.
fn lines(doc: &roxmltree::Document<'_>, min: usize) -> usize {
    doc.descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .filter(|n| n.attribute("points").is_some_and(|p| p.split_whitespace().count() >= min))
        .count()
}

fn svg(kind: PlotKind, top: usize, lock: Option<&str>) -> String {
    let opts = PlotOptions { kind, top, lock: lock.map(str::to_owned) };
    plot::plot_svg(&analysis(), &opts).unwrap()
}

#[test]
fn all_panels_svg() {
    let s = svg(PlotKind::All, 5, None);
    let doc = roxmltree::Document::parse(&s).expect("well-formed SVG");
    let t = texts(&doc);
    let has = |x: &str| t.iter().any(|s| s.contains(x));
    for caption in [plot::CDF_CAPTION, plot::WAIT_HIST_CAPTION, plot::HOLD_HIST_CAPTION] {
        assert!(has(caption), "no {caption:?} in {t:?}");
    }
    for axis in
        [plot::WAIT_AXIS, plot::HOLD_AXIS, plot::CDF_Y_AXIS, plot::WAIT_Y_AXIS, plot::HOLD_Y_AXIS]
    {
        assert!(has(axis), "no axis title {axis:?} in {t:?}");
    }
    // Time labels with units, percent labels.
    assert!(has("100 ns") || has("1 µs"), "{t:?}");
    assert!(t.iter().any(|s| s == "100%"), "{t:?}");
    // The legend names every lock, heaviest wait first, with its counts.
    let legend: Vec<&String> = t.iter().filter(|s| s.contains(" acquisitions, ")).collect();
    assert_eq!(legend.len(), 3, "{legend:?}");
    assert!(legend[0].starts_with("queue_lock: 1800 acquisitions, 19 contended"), "{legend:?}");
    assert!(legend.iter().any(|s| s.starts_with("config_lock: 2000 acquisitions")), "{legend:?}");
    assert!(legend.iter().any(|s| s.starts_with(&format!("{HEAP:#x}: 100 acquisitions"))));
    assert!(has("lockmeter: ./app --threads 2 (pid 4242, 1 s on 2 CPUs)"), "{t:?}");
    // One line per lock in each panel: 3 CDFs (2 points or more), 3 wait and 3 hold outlines.
    assert!(lines(&doc, 2) >= 9, "{} lines", lines(&doc, 2));
}

#[test]
fn cdf_only_and_lock_filter() {
    let s = svg(PlotKind::Cdf, 5, Some("queue"));
    let doc = roxmltree::Document::parse(&s).unwrap();
    let t = texts(&doc);
    assert!(t.iter().any(|s| s == plot::CDF_CAPTION));
    assert!(!t.iter().any(|s| s == plot::HOLD_HIST_CAPTION));
    let legend: Vec<&String> = t.iter().filter(|s| s.contains(" acquisitions, ")).collect();
    assert_eq!(legend.len(), 1);
    assert!(legend[0].starts_with("queue_lock"));
    // The CDF of queue_lock: every wait in one bucket, so 0% at its lower bound, 100% at its
    // upper bound (and the markers at each point).
    assert!(lines(&doc, 2) >= 1);
}

#[test]
fn top_limits_the_locks() {
    let s = svg(PlotKind::WaitHist, 1, None);
    let doc = roxmltree::Document::parse(&s).unwrap();
    let t = texts(&doc);
    let legend: Vec<&String> = t.iter().filter(|s| s.contains(" acquisitions, ")).collect();
    assert_eq!(legend.len(), 1);
    assert!(legend[0].starts_with("queue_lock"), "{legend:?}");
    assert!(t.iter().any(|s| s.contains("top 1 locks by total wait (of 3)")), "{t:?}");
}

#[test]
fn empty_panels_say_so() {
    let mut p = stack_profile();
    for r in &mut p.records {
        r.stats = stats(r.stats.acquisitions, 0, 0, 0);
        r.stats.holds_timed = 0;
        r.stats.hold_hist = [0; 65];
    }
    let a = Analysis::with_symbolizer(&p, &mut FakeSymbols::default());
    let s = plot::plot_svg(&a, &PlotOptions::default()).unwrap();
    assert!(s.contains("no contended acquisitions"));
    assert!(s.contains("no timed holds"));
    roxmltree::Document::parse(&s).unwrap();
}

#[test]
fn errors() {
    let e = plot::plot_svg(
        &analysis(),
        &PlotOptions { lock: Some("nope".into()), ..PlotOptions::default() },
    )
    .unwrap_err();
    assert!(matches!(e, ExportError::Empty(_)));
    assert!(e.to_string().starts_with("no lock name contains \"nope\" (locks: queue_lock"), "{e}");
    let empty = Analysis::with_symbolizer(&Profile::default(), &mut FakeSymbols::default());
    assert!(plot::plot_svg(&empty, &PlotOptions::default()).is_err());
    let e = ImageFormat::from_path(std::path::Path::new("figure.jpg")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "cannot write figure.jpg: unsupported output extension (supported: .svg, .png)"
    );
    assert_eq!(ImageFormat::from_path("a.PNG".as_ref()).unwrap(), ImageFormat::Png);
}

#[test]
fn png_decodes() {
    let s = svg(PlotKind::All, 5, None);
    let png_bytes = match plot::svg_to_png(&s) {
        Ok(b) => b,
        Err(e) if e.to_string().contains("needs a TrueType font") => {
            eprintln!("skipped: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let doc = roxmltree::Document::parse(&s).unwrap();
    let root = doc.root_element();
    let w: u32 = root.attribute("width").unwrap().parse().unwrap();
    let h: u32 = root.attribute("height").unwrap().parse().unwrap();

    let decoder = png::Decoder::new(std::io::Cursor::new(&png_bytes));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (w, h));
    let px = &buf[..info.buffer_size()];
    let channels = info.color_type.samples();
    // Not blank: many pixels differ from the white background, and there is color (the lines).
    let mut dark = 0usize;
    let mut colored = 0usize;
    for p in px.chunks(channels) {
        let (r, g, b) = (p[0] as i32, p[1] as i32, p[2] as i32);
        if r + g + b < 3 * 128 {
            dark += 1;
        }
        if (r - g).abs() > 60 || (g - b).abs() > 60 {
            colored += 1;
        }
    }
    let total = (w * h) as usize;
    assert!(dark > total / 200, "{dark} dark pixels of {total}");
    assert!(colored > 500, "{colored} colored pixels");
    // Text was drawn: the title row (top 46 px) has dark pixels.
    let title_dark = px[..(46 * w as usize * channels)]
        .chunks(channels)
        .filter(|p| (p[0] as u32 + p[1] as u32 + p[2] as u32) < 300)
        .count();
    assert!(title_dark > 200, "title has {title_dark} dark pixels");
}

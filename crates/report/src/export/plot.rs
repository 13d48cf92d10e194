//! Figures: per lock, the cumulative distribution of wait time (seed 000's CDF of spin-lock
//! acquire times), and histograms of wait and hold time, from the log2 histograms of the profile
//! (bucket `i` counts times in `[2^(i-1), 2^i)` ns).
//!
//! The figures are drawn with `plotters` as SVG; PNG is the same SVG rasterized by `resvg` with
//! the system's fonts. Time axes are logarithmic; a CDF point is plotted at each bucket's upper
//! bound (the share of acquisitions that waited less than it), joined by straight lines, so
//! the curve is exact at the bucket bounds and interpolated between them. Histograms are drawn
//! as outlines (share of the lock's contended acquisitions or timed holds per bucket), so several
//! locks can share a panel. Each lock has one color in every panel, and the legend below the
//! panels gives its counts and percentiles.

use std::path::Path;

use lockmeter_core::hist::{BUCKETS, bucket_high, bucket_low};
use plotters::chart::MeshStyle;
use plotters::coord::Shift;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::prelude::*;
use plotters::style::text_anchor;

use super::image::write_figure;
pub use super::image::{ImageFormat, svg_to_png};
use super::{ExportError, fmt_ns_short};
use crate::analysis::{Agg, Analysis};
use crate::options::SortKey;

/// Which figure to draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PlotKind {
    /// Wait-time CDF per lock.
    Cdf,
    /// Wait-time histogram per lock.
    WaitHist,
    /// Hold-time histogram per lock.
    HoldHist,
    /// All three panels in one figure.
    #[default]
    All,
    /// Wait per second over time per lock (the time series of `run --interval`).
    Timeline,
}

impl std::str::FromStr for PlotKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "cdf" => PlotKind::Cdf,
            "wait-hist" => PlotKind::WaitHist,
            "hold-hist" => PlotKind::HoldHist,
            "all" => PlotKind::All,
            "timeline" => PlotKind::Timeline,
            _ => {
                return Err(format!(
                    "unknown plot kind {s:?} (expected cdf, wait-hist, hold-hist, all or timeline)"
                ));
            }
        })
    }
}

/// Options of [`plot_svg`].
#[derive(Debug, Clone)]
pub struct PlotOptions {
    /// Which figure.
    pub kind: PlotKind,
    /// How many locks (the heaviest by total wait; by total hold for [`PlotKind::HoldHist`]).
    pub top: usize,
    /// Keep only locks whose display name contains this.
    pub lock: Option<String>,
}

impl Default for PlotOptions {
    fn default() -> Self {
        PlotOptions { kind: PlotKind::All, top: 5, lock: None }
    }
}

/// Tableau's ten colors: distinct, and readable on white.
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

const FONT: &str = "sans-serif";

/// The texts of the figure, for tests and for the legend.
pub const CDF_CAPTION: &str = "Wait time CDF per lock (contended acquisitions)";
/// Caption of the wait histogram.
pub const WAIT_HIST_CAPTION: &str = "Wait time histogram (log2 buckets)";
/// Caption of the hold histogram.
pub const HOLD_HIST_CAPTION: &str = "Hold time histogram (log2 buckets)";
/// The x axis of the wait panels.
pub const WAIT_AXIS: &str = "wait time (log scale)";
/// The x axis of the hold panel.
pub const HOLD_AXIS: &str = "hold time (log scale)";
/// The y axis of the CDF.
pub const CDF_Y_AXIS: &str = "% of contended acquisitions that waited less";
/// The y axis of the wait histogram.
pub const WAIT_Y_AXIS: &str = "% of contended acquisitions";
/// The y axis of the hold histogram.
pub const HOLD_Y_AXIS: &str = "% of timed holds";

/// Caption of the timeline.
pub const TIMELINE_CAPTION: &str = "Wait per second over time, per lock";
/// The x axis of the timeline.
pub const TIMELINE_X_AXIS: &str = "time since the program started (s)";
/// The y axis of the timeline.
pub const TIMELINE_Y_AXIS: &str = "wait per second (s/s: threads waiting, on average)";

/// One lock as the figure shows it.
#[derive(Debug)]
struct Series {
    id: u32,
    name: String,
    color: RGBColor,
    agg: Agg,
}

impl Series {
    fn legend(&self) -> String {
        let s = &self.agg.stats;
        let mut t = format!("{}: {} acquisitions", self.name, s.acquisitions);
        if s.contended > 0 {
            let pct = self.agg.contention_pct();
            let pct = if pct < 0.05 { "<0.1%".to_owned() } else { format!("{pct:.1}%") };
            t.push_str(&format!(
                ", {} contended ({pct}), wait p50 {} p99 {} max {}",
                s.contended,
                fmt_ns_short(self.agg.wait_percentile_ns(50.0).unwrap_or(0) as f64),
                fmt_ns_short(self.agg.wait_percentile_ns(99.0).unwrap_or(0) as f64),
                fmt_ns_short(s.wait_ns_max as f64),
            ));
        } else {
            t.push_str(", none contended");
        }
        if s.holds_timed > 0 {
            t.push_str(&format!(
                "; hold p50 {} p99 {}",
                fmt_ns_short(self.agg.hold_percentile_ns(50.0).unwrap_or(0) as f64),
                fmt_ns_short(self.agg.hold_percentile_ns(99.0).unwrap_or(0) as f64),
            ));
        }
        t
    }
}

fn render_err<E: std::fmt::Display>(e: E) -> ExportError {
    ExportError::Render(format!("cannot draw the figure: {e}"))
}

/// The locks to draw: the `top` heaviest (by wait, or by hold for the hold histogram) whose name
/// contains the pattern.
fn select(a: &Analysis, opts: &PlotOptions) -> Result<Vec<Series>, ExportError> {
    if a.locks.is_empty() {
        return Err(ExportError::Empty("nothing to draw: the profile has no locks".into()));
    }
    let key = if opts.kind == PlotKind::HoldHist { SortKey::Hold } else { SortKey::Wait };
    let locks: Vec<_> = a
        .sorted_locks(key)
        .into_iter()
        .filter(|l| opts.lock.as_deref().is_none_or(|p| l.display_name().contains(p)))
        .take(opts.top.max(1))
        .enumerate()
        .map(|(i, l)| Series {
            id: l.id,
            name: l.display_name(),
            color: COLORS[i % COLORS.len()],
            agg: l.agg.clone(),
        })
        .collect();
    if locks.is_empty() {
        let p = opts.lock.as_deref().unwrap_or_default();
        let mut names: Vec<String> =
            a.sorted_locks(key).iter().take(5).map(|l| l.display_name()).collect();
        if a.locks.len() > 5 {
            names.push("...".into());
        }
        return Err(ExportError::Empty(format!(
            "no lock name contains {p:?} (locks: {})",
            names.join(", ")
        )));
    }
    Ok(locks)
}

/// Lower bound of bucket `i` for a log axis (bucket 0, the value 0, is drawn from 0.5 ns).
fn low(i: usize) -> f64 {
    if i == 0 { 0.5 } else { bucket_low(i) as f64 }
}

fn high(i: usize) -> f64 {
    bucket_high(i) as f64
}

/// First and last non-empty bucket.
fn span(h: &[u64; BUCKETS]) -> Option<(usize, usize)> {
    let first = h.iter().position(|&c| c > 0)?;
    let last = h.iter().rposition(|&c| c > 0)?;
    Some((first, last))
}

/// The x range covering every non-empty bucket of `hists`, widened to whole decades (at least
/// two); 1 ns to 1 s when all are empty.
fn x_range<'a>(hists: impl Iterator<Item = &'a [u64; BUCKETS]>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::MAX, 0f64);
    for h in hists {
        if let Some((f, l)) = span(h) {
            lo = lo.min(low(f));
            hi = hi.max(high(l));
        }
    }
    if hi == 0.0 {
        return (1.0, 1e9);
    }
    let lo = 10f64.powf(lo.log10().floor()).max(0.1);
    let mut hi = 10f64.powf(hi.log10().ceil());
    if hi < lo * 100.0 {
        hi = lo * 100.0;
    }
    (lo, hi)
}

/// The CDF of a histogram in percent: (bucket lower bound, 0), then (bucket upper bound,
/// cumulative share) for each bucket.
fn cdf_points(h: &[u64; BUCKETS]) -> Vec<(f64, f64)> {
    let Some((f, l)) = span(h) else { return Vec::new() };
    let n: u64 = h.iter().sum();
    let mut cum = 0u64;
    let mut v = vec![(low(f), 0.0)];
    for (i, &c) in h.iter().enumerate().take(l + 1).skip(f) {
        cum += c;
        v.push((high(i), cum as f64 * 100.0 / n as f64));
    }
    v
}

/// The outline of a histogram in percent of its total: a step per bucket.
fn hist_points(h: &[u64; BUCKETS]) -> Vec<(f64, f64)> {
    let Some((f, l)) = span(h) else { return Vec::new() };
    let n: u64 = h.iter().sum();
    let mut v = vec![(low(f), 0.0)];
    for (i, &c) in h.iter().enumerate().take(l + 1).skip(f) {
        let p = c as f64 * 100.0 / n as f64;
        v.push((low(i), p));
        v.push((high(i), p));
    }
    v.push((high(l), 0.0));
    v
}

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// A panel's chart builder: its caption, and the margins and label areas every panel shares.
fn panel<'a, 'b>(area: &'a Area<'b>, caption: &str) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut b = ChartBuilder::on(area);
    b.caption(caption, (FONT, 18))
        .margin(12)
        .margin_right(36)
        .x_label_area_size(50)
        .y_label_area_size(64);
    b
}

/// Draws a panel's mesh in the fonts and grid colours every panel shares.
fn draw_mesh<X, Y>(mesh: &mut MeshStyle<'_, '_, X, Y, SVGBackend<'_>>) -> Result<(), ExportError>
where
    X: Ranged + ValueFormatter<X::ValueType>,
    Y: Ranged + ValueFormatter<Y::ValueType>,
{
    mesh.label_style((FONT, 13))
        .axis_desc_style((FONT, 15))
        .light_line_style(RGBColor(240, 240, 240))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()
        .map_err(render_err)
}

/// One panel: a log-x chart with one line per lock.
struct Panel<'s> {
    caption: &'static str,
    x_desc: &'static str,
    y_desc: &'static str,
    /// The histogram of a series this panel draws.
    hist: fn(&Agg) -> &[u64; BUCKETS],
    /// Points of a histogram.
    points: fn(&[u64; BUCKETS]) -> Vec<(f64, f64)>,
    /// The y axis always goes to 100 (CDF), else to the highest bar.
    full_y: bool,
    /// What to say when no lock has data.
    empty: &'static str,
    series: &'s [Series],
}

fn wait_hist(a: &Agg) -> &[u64; BUCKETS] {
    &a.stats.wait_hist
}

fn hold_hist(a: &Agg) -> &[u64; BUCKETS] {
    &a.stats.hold_hist
}

impl Panel<'_> {
    fn draw(&self, area: &Area<'_>) -> Result<(), ExportError> {
        let (lo, hi) = x_range(self.series.iter().map(|s| (self.hist)(&s.agg)));
        let lines: Vec<(&Series, Vec<(f64, f64)>)> = self
            .series
            .iter()
            .map(|s| (s, (self.points)((self.hist)(&s.agg))))
            .filter(|(_, p)| !p.is_empty())
            .collect();
        let y_max = if self.full_y {
            100.0
        } else {
            let m = lines.iter().flat_map(|(_, p)| p.iter().map(|q| q.1)).fold(0.0, f64::max);
            if m > 0.0 { (m * 1.1).min(100.0) } else { 100.0 }
        };
        let mut chart = panel(area, self.caption)
            .build_cartesian_2d((lo..hi).log_scale(), 0f64..y_max)
            .map_err(render_err)?;
        let decades = (hi / lo).log10().round().max(1.0) as usize;
        draw_mesh(
            chart
                .configure_mesh()
                .x_labels(decades + 1)
                .y_labels(11)
                .y_max_light_lines(1)
                .x_label_formatter(&|v| fmt_ns_short(*v))
                .y_label_formatter(&|v| format!("{v:.0}%"))
                .x_desc(self.x_desc)
                .y_desc(self.y_desc),
        )?;
        if lines.is_empty() {
            let (w, h) = chart.plotting_area().dim_in_pixel();
            let style = TextStyle::from((FONT, 16))
                .pos(text_anchor::Pos::new(text_anchor::HPos::Center, text_anchor::VPos::Center));
            chart
                .plotting_area()
                .strip_coord_spec()
                .draw(&Text::new(self.empty, (w as i32 / 2, h as i32 / 2), style))
                .map_err(render_err)?;
        }
        for (s, points) in lines {
            chart
                .draw_series(
                    LineSeries::new(points, s.color.stroke_width(2)).point_size(if self.full_y {
                        3
                    } else {
                        0
                    }),
                )
                .map_err(render_err)?;
        }
        Ok(())
    }
}

/// Draws the legend: one line per lock, in its color.
fn draw_legend(area: &Area<'_>, series: &[Series], heading: &str) -> Result<(), ExportError> {
    area.draw(&Text::new(
        heading.to_owned(),
        (20, 6),
        (FONT, 15).into_font().style(FontStyle::Bold),
    ))
    .map_err(render_err)?;
    for (i, s) in series.iter().enumerate() {
        let y = 34 + i as i32 * LEGEND_ROW;
        area.draw(&PathElement::new(vec![(20, y), (56, y)], s.color.stroke_width(3)))
            .map_err(render_err)?;
        area.draw(&Text::new(s.legend(), (66, y - 8), (FONT, 14))).map_err(render_err)?;
    }
    Ok(())
}

const LEGEND_ROW: i32 = 22;

/// The timeline's points of lock `id`: at the middle (s) of each interval of its process, its
/// wait per second.
fn timeline_points(a: &Analysis, id: u32) -> Vec<(f64, f64)> {
    let pid = a.locks.iter().find(|l| l.id == id).map(|l| l.pid);
    a.timeline
        .iter()
        .filter(|iv| iv.end_ns > iv.start_ns && Some(iv.pid) == pid)
        .map(|iv| {
            let wait = iv.locks.iter().find(|l| l.lock == id).map_or(0, |l| l.wait_ns);
            let mid = (iv.start_ns as f64 + iv.end_ns as f64) / 2e9;
            (mid, wait as f64 / (iv.end_ns - iv.start_ns) as f64)
        })
        .collect()
}

/// Draws the timeline panel.
fn draw_timeline(a: &Analysis, area: &Area<'_>, series: &[Series]) -> Result<(), ExportError> {
    let lines: Vec<(&Series, Vec<(f64, f64)>)> =
        series.iter().map(|s| (s, timeline_points(a, s.id))).collect();
    let t_end = a.timeline.iter().map(|iv| iv.end_ns as f64 / 1e9).fold(1e-3, f64::max);
    let y_max = lines.iter().flat_map(|(_, p)| p.iter().map(|q| q.1)).fold(0.0, f64::max);
    let y_max = if y_max > 0.0 { y_max * 1.1 } else { 1.0 };
    let mut chart = panel(area, TIMELINE_CAPTION)
        .build_cartesian_2d(0f64..t_end, 0f64..y_max)
        .map_err(render_err)?;
    draw_mesh(
        chart
            .configure_mesh()
            .x_labels(11)
            .y_labels(11)
            .y_max_light_lines(1)
            .x_label_formatter(&|v| format!("{v:.3}"))
            .y_label_formatter(&|v| format!("{v:.2}"))
            .x_desc(TIMELINE_X_AXIS)
            .y_desc(TIMELINE_Y_AXIS),
    )?;
    for (s, points) in lines {
        chart
            .draw_series(LineSeries::new(points, s.color.stroke_width(2)).point_size(3))
            .map_err(render_err)?;
    }
    Ok(())
}

/// Draws the figure as an SVG document.
pub fn plot_svg(a: &Analysis, opts: &PlotOptions) -> Result<String, ExportError> {
    if opts.kind == PlotKind::Timeline && a.timeline.is_empty() {
        return Err(ExportError::Empty(
            "the profile has no time series: run the program with lockmeter run --interval DUR"
                .into(),
        ));
    }
    let series = select(a, opts)?;
    let cdf = Panel {
        caption: CDF_CAPTION,
        x_desc: WAIT_AXIS,
        y_desc: CDF_Y_AXIS,
        hist: wait_hist,
        points: cdf_points,
        full_y: true,
        empty: "no contended acquisitions",
        series: &series,
    };
    let wait = Panel {
        caption: WAIT_HIST_CAPTION,
        y_desc: WAIT_Y_AXIS,
        points: hist_points,
        full_y: false,
        ..cdf
    };
    let hold = Panel {
        caption: HOLD_HIST_CAPTION,
        x_desc: HOLD_AXIS,
        y_desc: HOLD_Y_AXIS,
        hist: hold_hist,
        empty: "no timed holds (hold timing was off?)",
        ..wait
    };

    let legend_h = 44 + LEGEND_ROW as u32 * series.len() as u32;
    let (width, panels_h) = match opts.kind {
        PlotKind::All => (1280u32, 900u32),
        _ => (1100, 560),
    };
    let title_h = 46;
    let size = (width, title_h + panels_h + legend_h);

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE).map_err(render_err)?;
        let h = &a.header;
        let mut cmd = h.cmdline.join(" ");
        if cmd.chars().count() > 90 {
            cmd = cmd.chars().take(87).collect::<String>() + "...";
        }
        let title = format!(
            "lockmeter: {cmd} (pid {}, {} on {} CPUs)",
            h.pid,
            fmt_ns_short(h.duration_ns as f64),
            h.cpu_count
        );
        let (top, rest) = root.split_vertically(title_h);
        top.draw(&Text::new(
            title,
            (width as i32 / 2, title_h as i32 / 2),
            TextStyle::from((FONT, 20))
                .pos(text_anchor::Pos::new(text_anchor::HPos::Center, text_anchor::VPos::Center)),
        ))
        .map_err(render_err)?;
        let (panels, legend) = rest.split_vertically(panels_h);
        match opts.kind {
            PlotKind::Cdf => cdf.draw(&panels)?,
            PlotKind::WaitHist => wait.draw(&panels)?,
            PlotKind::HoldHist => hold.draw(&panels)?,
            PlotKind::Timeline => draw_timeline(a, &panels, &series)?,
            PlotKind::All => {
                let (upper, lower) = panels.split_vertically(panels_h / 2);
                cdf.draw(&upper)?;
                let (left, right) = lower.split_horizontally(width / 2);
                wait.draw(&left)?;
                hold.draw(&right)?;
            }
        }
        let by = if opts.kind == PlotKind::HoldHist { "hold" } else { "wait" };
        let heading = match &opts.lock {
            Some(p) => format!("locks whose name contains {p:?}, by total {by}"),
            None => format!("top {} locks by total {by} (of {})", series.len(), a.locks.len()),
        };
        draw_legend(&legend, &series, &heading)?;
        root.present().map_err(render_err)?;
    }
    Ok(svg)
}

/// Draws the figure into `path` (`.svg` or `.png`).
pub fn plot_to_file(a: &Analysis, opts: &PlotOptions, path: &Path) -> Result<(), ExportError> {
    write_figure(path, || plot_svg(a, opts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cdf_is_exact_at_bucket_bounds() {
        let mut h = [0u64; BUCKETS];
        h[8] = 1; // [128, 256)
        h[10] = 3; // [512, 1024)
        let p = cdf_points(&h);
        assert_eq!(p, vec![(128.0, 0.0), (256.0, 25.0), (512.0, 25.0), (1024.0, 100.0)]);
        assert_eq!(x_range([&h].into_iter()), (100.0, 10_000.0));
    }

    #[test]
    fn hist_outline() {
        let mut h = [0u64; BUCKETS];
        h[1] = 1; // [1, 2)
        h[2] = 1; // [2, 4)
        let p = hist_points(&h);
        assert_eq!(
            p,
            vec![(1.0, 0.0), (1.0, 50.0), (2.0, 50.0), (2.0, 50.0), (4.0, 50.0), (4.0, 0.0)]
        );
        assert!(hist_points(&[0; BUCKETS]).is_empty());
    }
}

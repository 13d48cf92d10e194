//! The SVG plot of a scenario (plotters).

use super::Data;
use anyhow::Result;

/// Smallest share (%) the latency plot shows.
const CCDF_FLOOR: f64 = 1e-4;

/// Draws the scenario's plot, if it has one.
pub(crate) fn plot(d: &Data, path: &std::path::Path) -> Result<()> {
    use plotters::prelude::*;
    let series: Vec<(String, Vec<(f64, f64)>)>;
    let (title, xl, yl, logx);
    match d {
        Data::Contention { rows, .. } => {
            let mut names: Vec<String> = Vec::new();
            for r in rows {
                if !names.contains(&r.lock) {
                    names.push(r.lock.clone());
                }
            }
            series = names
                .iter()
                .map(|n| {
                    (
                        n.clone(),
                        rows.iter()
                            .filter(|r| &r.lock == n)
                            .map(|r| (r.threads as f64, r.mops.median))
                            .collect(),
                    )
                })
                .collect();
            (title, xl, yl, logx) = (
                "contention: throughput by threads",
                "threads",
                "M lock-unlock pairs/s (median)",
                false,
            );
        }
        Data::Latency(rows) => {
            series = rows
                .iter()
                .map(|r| {
                    // Complementary CDF: % of acquisitions that took 2^(k-1) cycles or more, on
                    // a log scale, so that seed 000's tail (preempted holders) is visible.
                    let mut above = r.samples;
                    let pts = r
                        .hist_cycles
                        .iter()
                        .enumerate()
                        .map(|(b, &c)| {
                            let y = 100.0 * above as f64 / r.samples.max(1) as f64;
                            above -= c;
                            (b as f64, y.max(CCDF_FLOOR))
                        })
                        .collect();
                    (format!("{} load {}", r.lock, r.load), pts)
                })
                .collect();
            (title, xl, yl, logx) = (
                "latency: acquisitions taking at least 2^(k-1) TSC cycles",
                "k = log2 bucket of TSC cycles",
                "% of acquisitions (log scale)",
                true,
            );
        }
        _ => return Ok(()),
    }
    let xs = series.iter().flat_map(|s| s.1.iter().map(|p| p.0));
    let (mut x0, mut x1) =
        xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(x), b.max(x)));
    let ymax =
        series.iter().flat_map(|s| s.1.iter().map(|p| p.1)).fold(0.0, f64::max).max(1e-9) * 1.05;
    if logx {
        // Trim the empty buckets on both sides.
        let lo = series
            .iter()
            .filter_map(|s| s.1.iter().rfind(|p| p.1 >= 100.0).map(|p| p.0))
            .fold(f64::INFINITY, f64::min);
        let hi = series
            .iter()
            .filter_map(|s| s.1.iter().find(|p| p.1 <= CCDF_FLOOR).map(|p| p.0))
            .fold(0.0, f64::max);
        x0 = (lo - 1.0).max(0.0);
        x1 = hi.max(x0 + 1.0) + 1.0;
    }
    if !x0.is_finite() || !x1.is_finite() || x1 <= x0 {
        x0 = 0.0;
        x1 = 1.0;
    }
    let root = SVGBackend::new(path, (1000, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("plot: {e}"))?;
    let err = |e: &dyn std::fmt::Display| anyhow::anyhow!("plot {}: {e}", path.display());
    let mut cb = ChartBuilder::on(&root);
    cb.caption(title, ("sans-serif", 22)).margin(15).x_label_area_size(45).y_label_area_size(70);
    // The two charts differ in their y axis type (linear, log), hence a macro.
    macro_rules! draw {
        ($chart:expr) => {{
            let mut chart = $chart.map_err(|e| err(&e))?;
            chart.configure_mesh().x_desc(xl).y_desc(yl).draw().map_err(|e| err(&e))?;
            for (i, (name, pts)) in series.into_iter().enumerate() {
                let c = Palette99::pick(i).to_rgba();
                chart
                    .draw_series(LineSeries::new(pts, c.stroke_width(2)))
                    .map_err(|e| err(&e))?
                    .label(name)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2))
                    });
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperRight)
                .draw()
                .map_err(|e| err(&e))?;
        }};
    }
    if logx {
        draw!(cb.build_cartesian_2d(x0..x1, (CCDF_FLOOR..100.0).log_scale()));
    } else {
        draw!(cb.build_cartesian_2d(x0..x1, 0.0..ymax));
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

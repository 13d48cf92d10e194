//! The figure of `lockmeter compare`: one bar per lock algorithm, the median wall time of its
//! runs, with a whisker from the fastest to the slowest run (drawn with `plotters` like
//! [`super::plot`], SVG or PNG by the output's extension).

use std::path::Path;

use plotters::prelude::*;

use super::ExportError;
use super::image::write_figure;

/// One algorithm's runs.
#[derive(Debug, Clone)]
pub struct CompareBar {
    /// The algorithm (`pthread`, `mcs`, ...).
    pub label: String,
    /// Median wall time (s).
    pub median_s: f64,
    /// Fastest run (s).
    pub min_s: f64,
    /// Slowest run (s).
    pub max_s: f64,
}

fn render_err<E: std::fmt::Display>(e: E) -> ExportError {
    ExportError::Render(format!("cannot draw the figure: {e}"))
}

/// The figure as an SVG document.
pub fn compare_svg(title: &str, bars: &[CompareBar]) -> Result<String, ExportError> {
    let top = bars.iter().map(|b| b.max_s).fold(0.0f64, f64::max).max(1e-3) * 1.15;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 520)).into_drawing_area();
        root.fill(&WHITE).map_err(render_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(16)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((0..bars.len()).into_segmented(), 0.0..top)
            .map_err(render_err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .y_desc("wall time (s): median, whiskers min..max")
            .x_label_formatter(&|x| match x {
                SegmentValue::CenterOf(i) => {
                    bars.get(*i).map(|b| b.label.clone()).unwrap_or_default()
                }
                _ => String::new(),
            })
            .draw()
            .map_err(render_err)?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                let mut r = Rectangle::new(
                    [(SegmentValue::Exact(i), 0.0), (SegmentValue::Exact(i + 1), b.median_s)],
                    BLUE.mix(0.5).filled(),
                );
                r.set_margin(0, 0, 12, 12);
                r
            }))
            .map_err(render_err)?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                PathElement::new(
                    vec![
                        (SegmentValue::CenterOf(i), b.min_s),
                        (SegmentValue::CenterOf(i), b.max_s),
                    ],
                    BLACK.stroke_width(2),
                )
            }))
            .map_err(render_err)?;
        root.present().map_err(render_err)?;
    }
    Ok(svg)
}

/// Draws the figure into `path` (`.svg` or `.png`), never replacing an existing file.
pub fn compare_to_file(title: &str, bars: &[CompareBar], path: &Path) -> Result<(), ExportError> {
    write_figure(path, || compare_svg(title, bars))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_bar_per_algorithm_with_its_label() {
        let bars: Vec<CompareBar> = ["pthread", "mcs"]
            .iter()
            .enumerate()
            .map(|(i, l)| CompareBar {
                label: l.to_string(),
                median_s: 1.0 + i as f64,
                min_s: 0.5 + i as f64,
                max_s: 1.5 + i as f64,
            })
            .collect();
        let svg = compare_svg("t", &bars).unwrap();
        assert!(svg.contains("\npthread\n") && svg.contains("\nmcs\n"), "{svg}");
        assert_eq!(svg.matches("<rect").count() - 1, 2, "background + 2 bars:\n{svg}");
    }
}

//! The figures' image files: the format by the file's extension ([`ImageFormat`]), SVG
//! rasterized to PNG by `resvg` with the system's fonts ([`svg_to_png`]), and the one way a
//! figure is written ([`write_figure`]: never over an existing file). Used by `plot.rs` and
//! `compare_plot.rs`, which draw the SVG.

use std::path::Path;

use super::{ExportError, has_ext};

/// Image formats, by the output file's extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    /// `.svg`
    Svg,
    /// `.png`
    Png,
}

impl ImageFormat {
    /// The extensions [`ImageFormat::from_path`] accepts.
    pub const SUPPORTED: &'static str = ".svg, .png";

    /// The format of an output path, by its extension.
    pub fn from_path(path: &Path) -> Result<Self, ExportError> {
        if has_ext(path, ".svg") {
            Ok(ImageFormat::Svg)
        } else if has_ext(path, ".png") {
            Ok(ImageFormat::Png)
        } else {
            Err(ExportError::UnsupportedOutput {
                path: path.display().to_string(),
                supported: Self::SUPPORTED,
            })
        }
    }
}

/// Rasterizes an SVG document to PNG with `resvg`, with the system's fonts.
pub fn svg_to_png(svg: &str) -> Result<Vec<u8>, ExportError> {
    let mut opt = resvg::usvg::Options::default();
    let db = opt.fontdb_mut();
    db.load_system_fonts();
    if db.is_empty() {
        return Err(ExportError::Render(
            "PNG output needs a TrueType font and none was found (install one, e.g. Debian's \
             fonts-dejavu-core), or write .svg"
                .into(),
        ));
    }
    // The SVG asks for the generic `sans-serif`; point it at a font that is installed.
    let sans = resvg::usvg::fontdb::Family::SansSerif;
    let query = resvg::usvg::fontdb::Query { families: &[sans], ..Default::default() };
    if db.query(&query).is_none() {
        let preferred = ["DejaVu Sans", "Liberation Sans", "Noto Sans", "FreeSans"];
        let mut family = None;
        for p in preferred {
            if db.faces().any(|f| f.families.iter().any(|(n, _)| n == p)) {
                family = Some(p.to_owned());
                break;
            }
        }
        let family =
            family.or_else(|| db.faces().find_map(|f| f.families.first().map(|(n, _)| n.clone())));
        if let Some(f) = family {
            db.set_sans_serif_family(f);
        }
    }
    opt.font_family = "sans-serif".into();
    let tree = resvg::usvg::Tree::from_str(svg, &opt)
        .map_err(|e| ExportError::Render(format!("cannot read the SVG to rasterize it: {e}")))?;
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| ExportError::Render("the figure has no area".into()))?;
    pixmap.fill(resvg::tiny_skia::Color::WHITE);
    resvg::render(&tree, resvg::tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap.encode_png().map_err(|e| ExportError::Render(format!("cannot encode the PNG: {e}")))
}

/// Writes the SVG figure `draw` makes into `path`, as SVG or PNG by its extension (checked before
/// drawing), never replacing an existing file.
pub(crate) fn write_figure(
    path: &Path,
    draw: impl FnOnce() -> Result<String, ExportError>,
) -> Result<(), ExportError> {
    let format = ImageFormat::from_path(path)?;
    let svg = draw()?;
    let bytes = match format {
        ImageFormat::Svg => svg.into_bytes(),
        ImageFormat::Png => svg_to_png(&svg)?,
    };
    lockmeter_format::files::write_new(path, &bytes).map_err(ExportError::Io)
}

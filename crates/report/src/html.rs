//! The HTML report: one self-contained file (no network access) that a browser renders from the
//! JSON report it embeds, so it shows exactly what `--format json` says: the headline, a
//! sortable lock table whose rows open each lock's call sites, who waited on whom, wait and hold
//! histograms and waiter/holder stacks; the threads; and the flame graph of waiter stacks.
//!
//! The page's script and style are `html/report.js` and `html/report.css`, compiled in.

use std::io::{self, Write};

use base64::Engine as _;

use crate::{Analysis, Format, ReportOptions, headline, json};

const CSS: &str = include_str!("html/report.css");
const JS: &str = include_str!("html/report.js");

/// Text made safe inside a `<script>` element: no `</` can close it early.
fn script_safe(s: &str) -> String {
    s.replace("</", "<\\/").replace("<!--", "<\\!--")
}

/// Text made safe inside HTML text and attributes.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Writes the HTML report of `a`. `flame_svg`, when given, is the flame graph of waiter stacks
/// (an SVG document) shown below the tables. Every lock is included, whatever `opts.top` says.
pub fn html(
    a: &Analysis,
    opts: &ReportOptions,
    flame_svg: Option<&str>,
    w: &mut dyn Write,
) -> io::Result<()> {
    let mut data = Vec::new();
    json(a, &ReportOptions { format: Format::Json, top: None, ..*opts }, &mut data)?;
    let data = String::from_utf8(data).map_err(io::Error::other)?;
    let extra = serde_json::json!({
        "headline": headline(a),
        "flame_svg_base64": flame_svg.map(|s| base64::engine::general_purpose::STANDARD.encode(s)),
    });
    let title = a.header.cmdline.first().map(String::as_str).unwrap_or("lockmeter report");
    write!(
        w,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>lockmeter: {}</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n\
         <main id=\"app\"><noscript>This report needs JavaScript to draw its tables; the data \
         is the JSON in this file.</noscript></main>\n\
         <script type=\"application/json\" id=\"lockmeter-data\">{}</script>\n\
         <script type=\"application/json\" id=\"lockmeter-extra\">{}</script>\n\
         <script>\n{}</script>\n</body>\n</html>\n",
        escape(title),
        script_safe(&data),
        script_safe(&extra.to_string()),
        script_safe(JS),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_text_cannot_close_the_script() {
        let s = script_safe(r#"{"name":"</script><script>alert(1)</script>"}"#);
        assert!(!s.contains("</script"));
        // Still the same JSON once parsed (`<\/` is an escaped `/` in JSON).
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["name"], "</script><script>alert(1)</script>");
        assert_eq!(escape("<a href=\"x\">&"), "&lt;a href=&quot;x&quot;&gt;&amp;");
    }
}

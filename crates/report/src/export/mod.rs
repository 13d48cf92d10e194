//! Exports of a profile for people and for other tools.
//!
//! * [`plot`]: figures of wait and hold time per lock (the wait-time CDF of seed 000, log2
//!   histograms), drawn with `plotters` as SVG, rasterized to PNG with `resvg`;
//! * [`flame`]: flame graphs of waiter (or holder) stacks with `inferno`, and the folded-stack
//!   text other tools read;
//! * [`pprof`]: the pprof protobuf with the sample types of Go's mutex profile
//!   (`contentions/count`, `delay/nanoseconds`), and the same samples as CSV;
//! * [`perfetto`]: the longest contended waits, their holds and arrows between them as a trace
//!   (Chrome's trace event format, which Perfetto UI opens);
//! * [`diff`]: two profiles compared per lock or per call site (seed 004's before/after table).
//!
//! The stack-based exports read the profile's contended events ([`EventKind::Contended`](lockmeter_format::EventKind::Contended): the
//! waiter's stack, how many, how long) and holding events ([`EventKind::Holding`](lockmeter_format::EventKind::Holding): the holder's
//! stack and hold time), merged over threads and modes by (lock, stack); see
//! [`Analysis::stack_samples`](crate::Analysis::stack_samples).
//!
//! ```
//! use lockmeter_format::model::*;
//! use lockmeter_report::NoSymbols;
//! use lockmeter_report::export::{Weight, flame};
//!
//! let profile = Profile {
//!     locks: vec![LockInfo { id: 1, address: 0x5000, generation: 0, kind: LockKind::Mutex,
//!                            name: Some("queue".into()) }],
//!     stacks: vec![Stack { id: 7, frames: vec![0x1010, 0x2020] }],
//!     events: vec![Event { thread: 1, lock: 1, mode: Mode::Exclusive,
//!                          kind: EventKind::Contended, stack: 7, holder_site: 0,
//!                          holder_stack: None, count: 3, wait_ns: 4500, wait_ns_max: 2000 }],
//!     ..Profile::default()
//! };
//! let lines = flame::folded(&profile, &mut NoSymbols, Weight::Wait, None);
//! assert_eq!(lines[0].to_string(), "queue;0x2020;0x1010 4500");
//! ```

pub mod compare_plot;
pub mod diff;
pub mod flame;
mod image;
pub mod perfetto;
pub mod plot;
pub mod pprof;
mod stacks;

use std::fmt;
use std::io;

pub use crate::analysis::StackSample;
pub use crate::frames::FrameCache;
pub use stacks::Weight;

/// Why an export failed. Every message is one line.
#[derive(Debug)]
pub enum ExportError {
    /// Reading or writing a file or stream.
    Io(io::Error),
    /// An output name whose extension no writer handles.
    UnsupportedOutput {
        /// The name given.
        path: String,
        /// What the command writes, e.g. `.svg, .png`.
        supported: &'static str,
    },
    /// Nothing to export (no lock matches, no contended acquisition, ...).
    Empty(String),
    /// The plotting or rendering library failed.
    Render(String),
}

impl fmt::Display for ExportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExportError::Io(e) => write!(f, "{e}"),
            ExportError::UnsupportedOutput { path, supported } => {
                write!(
                    f,
                    "cannot write {path}: unsupported output extension (supported: {supported})"
                )
            }
            ExportError::Empty(m) => f.write_str(m),
            ExportError::Render(m) => f.write_str(m),
        }
    }
}

/// The message of an [`ExportError::Io`] is the I/O error's own, so it has no further source
/// (an error chain printed in one line would say it twice).
impl std::error::Error for ExportError {}

impl From<io::Error> for ExportError {
    fn from(e: io::Error) -> Self {
        ExportError::Io(e)
    }
}

/// Whether `path` ends with `ext` (with its dot, ASCII case-insensitive).
pub(crate) fn has_ext(path: &std::path::Path, ext: &str) -> bool {
    let s = path.to_string_lossy();
    s.len() > ext.len() && s.to_ascii_lowercase().ends_with(ext)
}

/// A human duration for axis labels and tables: `500 ns`, `1 µs`, `2.5 ms`, `10 s`, with at most
/// three significant digits and no trailing zeros.
pub fn fmt_ns_short(ns: f64) -> String {
    if ns.is_nan() || ns <= 0.0 {
        return "0".into();
    }
    let (v, unit) = if ns < 1e3 {
        (ns, "ns")
    } else if ns < 1e6 {
        (ns / 1e3, "µs")
    } else if ns < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    let mut s = format!("{v:.digits$}");
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    format!("{s} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_durations() {
        assert_eq!(fmt_ns_short(0.0), "0");
        assert_eq!(fmt_ns_short(1.0), "1 ns");
        assert_eq!(fmt_ns_short(512.0), "512 ns");
        assert_eq!(fmt_ns_short(1000.0), "1 µs");
        assert_eq!(fmt_ns_short(2500.0), "2.5 µs");
        assert_eq!(fmt_ns_short(12_345.0), "12.3 µs");
        assert_eq!(fmt_ns_short(1e8), "100 ms");
        assert_eq!(fmt_ns_short(1e9), "1 s");
        assert_eq!(fmt_ns_short(1e10), "10 s");
    }

    #[test]
    fn extensions() {
        use std::path::Path;
        assert!(has_ext(Path::new("a/b.SVG"), ".svg"));
        assert!(has_ext(Path::new("x.pb.gz"), ".pb.gz"));
        assert!(!has_ext(Path::new(".svg"), ".svg"));
        assert!(!has_ext(Path::new("x.svgz"), ".svg"));
    }
}

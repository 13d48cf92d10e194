//! Reading a lockmeter profile: aggregation, symbolization and every output format.
//!
//! A [`Profile`] holds one row of statistics per (thread,
//! lock, call site, mode). [`Analysis::new`] sums those records into per-lock, per-site,
//! per-thread and whole-profile aggregates (with [`Stats::merge`](lockmeter_core::Stats::merge),
//! so every view agrees with every other), names call sites and static locks from the ELF
//! files of the profile's memory map ([`symbolize`]), and keeps the per-CPU totals.
//!
//! The renderers then print it:
//!
//! * [`text`]: the human report, the headline (`wait: on average A of the T threads that took
//!   locks were waiting for one`), totals, the profiler's own cost, loud warnings when data was dropped, and a
//!   lockstat-like table for the chosen view ([`By`]), sorted by a [`SortKey`];
//! * [`summary`]: the short version `lockmeter run` prints at exit, with the top waiting site
//!   and the site that held the lock meanwhile for the top locks;
//! * [`json`]: a stable, versioned document (schema in `SCHEMA.md`, [`SCHEMA_VERSION`]);
//! * [`csv()`]: one row per lock, site, thread or CPU.
//!
//! [`render`] picks one by [`ReportOptions::format`]. A command that reads a profile file opens
//! it with [`open`], which also chooses the [`Symbolizer`] every view of it shares.
//!
//! ```
//! use lockmeter_format::model::*;
//! use lockmeter_report::{Analysis, ReportOptions, SymbolizeOptions};
//!
//! let mut stats = Stats::default();
//! stats.acquisitions = 1000;
//! stats.contended = 100;
//! stats.wait_ns_total = 10_000_000;
//! stats.wait_ns_max = 200_000;
//! let profile = Profile {
//!     header: Header { pid: 42, cmdline: vec!["./app".into()], duration_ns: 1_000_000_000,
//!                      cpu_count: 2, ..Header::default() },
//!     threads: vec![ThreadInfo { index: 1, tid: 42, name: "app".into() }],
//!     locks: vec![LockInfo { id: 1, address: 0x5000, generation: 0, kind: LockKind::Mutex,
//!                            name: Some("queue_lock".into()) }],
//!     records: vec![Record { thread: 1, lock: 1, site: 0x1234, mode: Mode::Exclusive, stats }],
//!     ..Profile::default()
//! };
//! let analysis = Analysis::new(&profile, &SymbolizeOptions { enabled: false, symbols_dir: None });
//! assert_eq!(analysis.locks[0].agg.stats.acquisitions, 1000);
//!
//! let mut out = Vec::new();
//! lockmeter_report::text(&analysis, &ReportOptions::default(), &mut out).unwrap();
//! let out = String::from_utf8(out).unwrap();
//! assert!(out.contains("wait: on average 0.010 of the 1 thread that took locks was waiting for one"));
//! assert!(out.contains("queue_lock"));
//! ```

pub mod advice;
pub mod analysis;
mod csvout;
pub mod export;
mod frames;
mod html;
mod json;
pub mod options;
mod runfile;
pub mod storage;
pub mod symbolize;
mod text;
pub mod units;

use std::io;
use std::path::Path;

use lockmeter_format::FileError;
use lockmeter_format::model::Profile;

/// Opens a profile file for any view: reads it and chooses its symbolizer ([`Symbolizer::new`]:
/// the ELF files of its memory map unless `opts.enabled` is off, files changed since the run
/// refused). Every command that reads a profile starts here. The error is one line naming the
/// file and what to do.
pub fn open(path: &Path, opts: &SymbolizeOptions) -> Result<(Profile, Symbolizer), FileError> {
    let profile = lockmeter_format::read_profile_file(path)?;
    let sym = Symbolizer::new(&profile, opts);
    Ok((profile, sym))
}

pub use analysis::{
    Agg, Analysis, Filter, HistRow, ImageMaps, LockAgg, NameSource, PairAgg, ProcessAgg, SiteAgg,
    StackAgg, StackSample, ThreadAgg, TimelineInterval, Totals, hist_rows,
};
pub use csvout::csv;
pub use frames::{FrameCache, names_outermost_first};
pub use html::html;
pub use json::{SCHEMA_VERSION, json};
pub use options::{By, DEFAULT_TOP, Format, ParseOptionError, ReportOptions, SUMMARY_TOP, SortKey};
pub use runfile::{OpenRun, OpenRunError, open_run};
pub use symbolize::{
    ElfSymbolizer, Frame, InlinedFrame, NoSymbols, Symbolize, SymbolizeOptions, Symbolizer,
    code_at_line,
};
pub use text::{DETAIL_LOCKS, SITES_PER_LOCK, SUMMARY_PAIRS, headline, printable, summary, text};

/// Writes the report in `opts.format`.
pub fn render(a: &Analysis, opts: &ReportOptions, w: &mut dyn io::Write) -> io::Result<()> {
    match opts.format {
        Format::Text => text(a, opts, w),
        Format::Json => json(a, opts, w),
        Format::Csv => csv(a, opts, w),
        Format::Html => html(a, opts, None, w),
    }
}

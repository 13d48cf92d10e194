//! `lockmeter diff`: two profiles compared per lock or per call site.

use anyhow::{Context, Result, bail};
use lockmeter_report::export::diff::{self, DiffBy, DiffKey, DiffOptions};
use lockmeter_report::{Analysis, SymbolizeOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Output formats of `lockmeter diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum DiffFormat {
    /// An aligned table.
    Text,
    /// JSON (schema `lockmeter-diff/1`).
    Json,
}

/// Options of `lockmeter diff`.
#[derive(Debug, clap::Args)]
pub(crate) struct DiffArgs {
    /// The profile before the change.
    #[arg(value_name = "BEFORE")]
    before: PathBuf,
    /// The profile after the change.
    #[arg(value_name = "AFTER")]
    after: PathBuf,
    /// Rows: lock, or site (lock and call site).
    #[arg(long, default_value = "lock", value_name = "VIEW")]
    by: DiffBy,
    /// Sort by the largest change in: wait, hold, acquisitions, contended, contention-rate.
    #[arg(long, default_value = "wait", value_name = "KEY")]
    sort: DiffKey,
    /// Match call sites by function only, not function+offset (offsets move when code changes).
    #[arg(long)]
    by_function: bool,
    /// Rows to show (default: 20 in text, every row in json).
    #[arg(long, value_name = "N")]
    top: Option<usize>,
    /// Output format: text or json.
    #[arg(long, default_value = "text", value_name = "FORMAT")]
    format: DiffFormat,
    #[command(flatten)]
    symbols: crate::report_cmd::SymbolArgs,
    /// Compare only this process of each run: a pid, or a name (its final image's file name).
    /// Given twice, the first is BEFORE's and the second AFTER's (pids differ between runs).
    /// Default: every process.
    #[arg(long, value_name = "PID|NAME")]
    process: Vec<String>,
}

fn load(p: &Path, opts: &SymbolizeOptions, process: Option<&str>) -> Result<Analysis> {
    let a = crate::report_cmd::open_run(p, opts, process)?
        .analysis(&lockmeter_report::Filter::default());
    for n in &a.notes {
        eprintln!("lockmeter: note: {}: {n}", p.display());
    }
    Ok(a)
}

/// `lockmeter diff`.
pub(crate) fn diff(a: DiffArgs) -> Result<()> {
    let opts = a.symbols.options()?;
    let (before_process, after_process) = match a.process.as_slice() {
        [] => (None, None),
        [both] => (Some(both.as_str()), Some(both.as_str())),
        [b, a] => (Some(b.as_str()), Some(a.as_str())),
        _ => bail!("--process is given at most twice: BEFORE's process, then AFTER's"),
    };
    let before = load(&a.before, &opts, before_process)?;
    let after = load(&a.after, &opts, after_process)?;
    let top = match (a.top, a.format) {
        (Some(n), _) => Some(n),
        (None, DiffFormat::Text) => Some(20),
        (None, DiffFormat::Json) => None,
    };
    let opts = DiffOptions { by: a.by, sort: a.sort, by_function: a.by_function, top };
    let d = diff::diff(
        &a.before.display().to_string(),
        &before,
        &a.after.display().to_string(),
        &after,
        &opts,
    );
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match a.format {
        DiffFormat::Text => diff::text(&d, &mut out),
        DiffFormat::Json => diff::json(&d, &mut out),
    }
    .context("cannot write the comparison")?;
    out.flush().context("cannot write the comparison")?;
    Ok(())
}

//! `lockmeter report`.

use anyhow::{Context, Result};
use lockmeter_report::{Analysis, By, Filter, Format, ReportOptions, SortKey, SymbolizeOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Options of `lockmeter report`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReportArgs {
    /// The profile to read (written by `lockmeter run`).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// View: lock, site, thread, cpu, or pair (who waited on whom: waiter site, holder site).
    #[arg(long, default_value = "lock")]
    by: By,
    /// Sort key: wait, wait-max, hold, hold-max, acquisitions, contended, contention-rate, name.
    #[arg(long, default_value = "wait")]
    sort: SortKey,
    /// Rows to show (default: 20 in text; every row in json and csv); with --hist or --stacks,
    /// also the number of locks detailed (default 5).
    #[arg(long, value_name = "N")]
    top: Option<usize>,
    /// Output format: text, json or csv.
    #[arg(long, default_value = "text")]
    format: Format,
    /// Keep only locks whose name contains PATTERN, or whose address it is (0x...).
    #[arg(long, value_name = "PATTERN")]
    lock: Option<String>,
    /// Keep only call sites (and stacks) whose function name contains PATTERN.
    #[arg(long, value_name = "PATTERN")]
    function: Option<String>,
    /// Text: log2 histograms of wait and hold time of the top locks, with percentiles.
    #[arg(long)]
    hist: bool,
    /// Text: the top waiter and holder stacks of the top locks, and who waited on whom.
    #[arg(long)]
    stacks: bool,
    /// Do not read the program's ELF files to name call sites and static locks.
    #[arg(long)]
    no_symbols: bool,
}

fn load(file: &Path, symbols: bool, filter: &Filter) -> Result<Analysis> {
    let profile = lockmeter_format::read_profile_file(file)?;
    Ok(Analysis::new_filtered(&profile, &SymbolizeOptions { enabled: symbols }, filter))
}

/// `lockmeter report`.
pub(crate) fn report(a: ReportArgs) -> Result<()> {
    let filter = Filter { lock: a.lock.clone(), function: a.function.clone() };
    let analysis = load(&a.file, !a.no_symbols, &filter)?;
    let opts = ReportOptions {
        by: a.by,
        sort: a.sort,
        top: a.top,
        format: a.format,
        hist: a.hist,
        stacks: a.stacks,
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    lockmeter_report::render(&analysis, &opts, &mut out).context("cannot write the report")?;
    out.flush().context("cannot write the report")?;
    Ok(())
}

/// The short report `run` prints.
pub(crate) fn summary(file: &Path, top: usize) -> Result<String> {
    let analysis = load(file, true, &Filter::default())?;
    let mut v = Vec::new();
    lockmeter_report::summary(&analysis, top, &mut v)?;
    Ok(String::from_utf8_lossy(&v).into_owned())
}

//! `lockmeter report`.

use anyhow::{Context, Result};
use lockmeter_report::export::flame::{self, FlameOptions};
use lockmeter_report::{Analysis, By, Filter, Format, ReportOptions, SortKey, SymbolizeOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Options of `lockmeter report`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReportArgs {
    /// The profile to read (written by `lockmeter run`).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// View: lock, site, thread, cpu, pair (who waited on whom: waiter site, holder site), or
    /// process (one row per process of the run: pid, parent, name of its final image).
    #[arg(long, default_value = "lock")]
    by: By,
    /// Sort key: wait, wait-max, hold, hold-max, acquisitions, contended, contention-rate, name.
    #[arg(long, default_value = "wait")]
    sort: SortKey,
    /// Rows to show (default: 20 in text; every row in json and csv); with --hist or --stacks,
    /// also the number of locks detailed (default 5).
    #[arg(long, value_name = "N")]
    top: Option<usize>,
    /// Output format: text, json, csv, or html (one self-contained page: sortable lock table,
    /// sites, who waited on whom, histograms, stacks and the flame graph; open it in a browser).
    #[arg(long, default_value = "text")]
    format: Format,
    /// Write the report to FILE, a new file (default: standard output).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
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
    #[command(flatten)]
    symbols: crate::report_cmd::SymbolArgs,
    #[command(flatten)]
    process: ProcessArg,
}

/// `--no-symbols` and `--symbols DIR` of every view that reads a run file.
#[derive(Debug, clap::Args)]
pub(crate) struct SymbolArgs {
    /// Do not read the program's ELF files to name call sites, frames and static locks.
    #[arg(long)]
    no_symbols: bool,
    /// Look for the program's symbols in DIR first: debug files by build-id
    /// (DIR/.build-id/ab/cdef….debug), then DIR/NAME or DIR/NAME.debug (an unstripped copy);
    /// a file of another build is refused with a note.
    #[arg(long, value_name = "DIR", conflicts_with = "no_symbols")]
    symbols: Option<PathBuf>,
}

impl SymbolArgs {
    /// The symbolizer's options these flags ask for.
    pub(crate) fn options(&self) -> Result<SymbolizeOptions> {
        SymbolizeOptions::from_flags(self.no_symbols, self.symbols.as_deref())
            .map_err(anyhow::Error::msg)
    }
}

/// `--process PID|NAME` of every view that reads a run file.
#[derive(Debug, clap::Args)]
pub(crate) struct ProcessArg {
    /// Only this process of the run: a pid, or a name (its final image's file name; every
    /// process of that name). Default: every process, a lock's name starting with its process
    /// when several took locks.
    #[arg(long, value_name = "PID|NAME")]
    pub(crate) process: Option<String>,
}

/// Opens the run file `path` for a view, keeping only `process` when given (`--process`).
pub(crate) fn open_run(
    path: &Path,
    opts: &SymbolizeOptions,
    process: Option<&str>,
) -> Result<lockmeter_report::OpenRun> {
    Ok(lockmeter_report::open_run(path, opts, process)?)
}

/// The flame graph of waiter stacks that the HTML report shows, when the profile has any.
fn flame_svg(analysis: &Analysis, lock: Option<&str>) -> Result<Option<String>> {
    let opts = FlameOptions { lock: lock.map(str::to_owned), ..FlameOptions::default() };
    let mut buf = Vec::new();
    match flame::flamegraph_from(analysis, &opts, &mut buf) {
        Ok(()) => Ok(Some(String::from_utf8_lossy(&buf).into_owned())),
        Err(lockmeter_report::export::ExportError::Empty(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// `lockmeter report`.
pub(crate) fn report(a: ReportArgs) -> Result<()> {
    if let Some(p) = &a.output {
        lockmeter_format::files::check_new(p)?;
    }
    let filter = Filter { lock: a.lock.clone(), function: a.function.clone() };
    let opts = a.symbols.options()?;
    let mut run = open_run(&a.file, &opts, a.process.process.as_deref())?;
    let analysis = run.analysis(&filter);
    let opts = ReportOptions {
        by: a.by,
        sort: a.sort,
        top: a.top,
        format: a.format,
        hist: a.hist,
        stacks: a.stacks,
    };
    let mut buf = Vec::new();
    if a.format == Format::Html {
        let flame = flame_svg(&analysis, a.lock.as_deref())?;
        lockmeter_report::html(&analysis, &opts, flame.as_deref(), &mut buf)
    } else {
        lockmeter_report::render(&analysis, &opts, &mut buf)
    }
    .context("cannot write the report")?;
    match &a.output {
        Some(p) => {
            lockmeter_format::files::write_new(p, &buf)?;
            eprintln!("lockmeter: report written to {}", p.display());
        }
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(&buf).context("cannot write the report")?;
            out.flush().context("cannot write the report")?;
        }
    }
    Ok(())
}

/// The short report `run` prints: of every process in the run file.
pub(crate) fn summary(file: &Path, top: usize) -> Result<String> {
    let opts = SymbolizeOptions { enabled: true, symbols_dir: None };
    let analysis = open_run(file, &opts, None)?.analysis(&Filter::default());
    let mut v = Vec::new();
    lockmeter_report::summary(&analysis, top, &mut v)?;
    Ok(String::from_utf8_lossy(&v).into_owned())
}

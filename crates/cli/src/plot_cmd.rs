//! `lockmeter plot`: figures of wait and hold time per lock.

use anyhow::{Result, bail};

use lockmeter_report::export::plot::{self, ImageFormat, PlotKind, PlotOptions};
use std::path::PathBuf;

/// Options of `lockmeter plot`.
#[derive(Debug, clap::Args)]
pub(crate) struct PlotArgs {
    /// The profile to read (written by `lockmeter run`).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// The image to write: F.svg or F.png.
    #[arg(short, long, value_name = "F.svg|F.png")]
    out: PathBuf,
    /// Figure: cdf (wait-time CDF per lock), wait-hist, hold-hist, all (the three panels), or
    /// timeline (wait per second over time, from a profile of `run --interval`).
    #[arg(long, default_value = "all", value_name = "KIND")]
    kind: PlotKind,
    /// Locks to draw: the N with the most total wait (total hold for hold-hist).
    #[arg(long, default_value_t = 5, value_name = "N")]
    top: usize,
    /// Only locks whose name contains PATTERN.
    #[arg(long, value_name = "PATTERN")]
    lock: Option<String>,
    #[command(flatten)]
    symbols: crate::report_cmd::SymbolArgs,
    #[command(flatten)]
    process: crate::report_cmd::ProcessArg,
}

/// `lockmeter plot`.
pub(crate) fn plot(a: PlotArgs) -> Result<()> {
    // Refuse an unknown extension before any work.
    ImageFormat::from_path(&a.out)?;
    if a.top == 0 {
        bail!("--top must be at least 1");
    }
    let opts = a.symbols.options()?;
    let analysis = crate::report_cmd::open_run(&a.file, &opts, a.process.process.as_deref())?
        .analysis(&lockmeter_report::Filter::default());
    crate::print_notes(&analysis.notes);
    let opts = PlotOptions { kind: a.kind, top: a.top, lock: a.lock };
    plot::plot_to_file(&analysis, &opts, &a.out)?;
    eprintln!("lockmeter: figure written to {}", a.out.display());
    Ok(())
}

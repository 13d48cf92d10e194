//! `lockmeter flamegraph`: waiter (or holder) stacks as a flame graph, or folded.

use anyhow::{Context, Result, bail};
use lockmeter_report::Filter;
use lockmeter_report::export::flame::{self, FlameOptions};
use lockmeter_report::export::{ExportError, Weight};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Options of `lockmeter flamegraph`.
#[derive(Debug, clap::Args)]
pub(crate) struct FlameArgs {
    /// The profile to read (written by `lockmeter run`).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Where to write: F.svg; with --folded, F.txt or F.folded (default: standard output).
    #[arg(short, long, value_name = "F.svg")]
    out: Option<PathBuf>,
    /// Widths: wait (ns waited, by waiter stack), contentions (contended acquisitions, by waiter
    /// stack), hold (ns held while others waited, by holder stack) or samples (acquisitions
    /// sampled by `run --stack-sample N`, one in N, by the acquirer's stack: where locks are
    /// taken).
    #[arg(long, default_value = "wait", value_name = "WEIGHT")]
    weight: Weight,
    /// Write folded stacks (`lock;outermost;...;innermost weight`, one per line) for other tools.
    #[arg(long)]
    folded: bool,
    /// Only locks whose name contains PATTERN.
    #[arg(long, value_name = "PATTERN")]
    lock: Option<String>,
    /// Title of the flame graph.
    #[arg(long)]
    title: Option<String>,
    #[command(flatten)]
    symbols: crate::report_cmd::SymbolArgs,
    #[command(flatten)]
    process: crate::report_cmd::ProcessArg,
}

/// Whether `p` ends with one of `exts`.
fn ends_with_any(p: &Path, exts: &[&str]) -> bool {
    let s = p.to_string_lossy().to_ascii_lowercase();
    exts.iter().any(|e| s.len() > e.len() && s.ends_with(e))
}

/// `lockmeter flamegraph`.
pub(crate) fn flamegraph(a: FlameArgs) -> Result<()> {
    let out = match (&a.out, a.folded) {
        (None, false) => bail!("--out F.svg is required (or --folded to print folded stacks)"),
        (Some(p), _) if p.as_os_str() == "-" => None,
        (Some(p), false) if !ends_with_any(p, &[".svg"]) => {
            return Err(ExportError::UnsupportedOutput {
                path: p.display().to_string(),
                supported: ".svg (or --folded for .txt, .folded)",
            }
            .into());
        }
        (Some(p), true) if !ends_with_any(p, &[".txt", ".folded"]) => {
            return Err(ExportError::UnsupportedOutput {
                path: p.display().to_string(),
                supported: ".txt, .folded for --folded",
            }
            .into());
        }
        (p, _) => p.clone(),
    };
    let opts = a.symbols.options()?;
    // Every process of the run file, each folded on its own, then merged.
    let mut run = crate::report_cmd::open_run(&a.file, &opts, a.process.process.as_deref())?;
    let analysis = run.analysis(&Filter { lock: a.lock.clone(), function: None });
    let mut buf = Vec::new();
    if a.folded {
        let lines = flame::folded_from(&analysis, a.weight);
        flame::write_folded(&lines, &mut buf)?;
    } else {
        let opts = FlameOptions { weight: a.weight, lock: a.lock, title: a.title };
        flame::flamegraph_from(&analysis, &opts, &mut buf)?;
    }
    crate::print_notes(&run.notes());
    match out {
        Some(p) => {
            lockmeter_format::files::write_new(&p, &buf)?;
            eprintln!(
                "lockmeter: {} written to {}",
                if a.folded { "folded stacks" } else { "flame graph" },
                p.display()
            );
        }
        None => {
            let mut o = std::io::stdout().lock();
            o.write_all(&buf).context("cannot write to standard output")?;
            o.flush().context("cannot write to standard output")?;
        }
    }
    Ok(())
}

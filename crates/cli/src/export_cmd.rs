//! `lockmeter export`: pprof (Go's mutex profile shape), CSV, and a Perfetto trace of the longest
//! waits.

use anyhow::{Context, Result};

use lockmeter_report::export::{ExportError, perfetto, pprof};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Options of `lockmeter export`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("output").required(true).multiple(true).args(["pprof", "csv", "perfetto"])))]
pub(crate) struct ExportArgs {
    /// The profile to read (written by `lockmeter run`).
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Write a pprof profile of contended acquisitions by waiter stack (sample types
    /// contentions/count and delay/nanoseconds, like Go's mutex profile): F.pb.gz (gzipped, what
    /// pprof tools read) or F.pb (not compressed).
    #[arg(long, value_name = "F.pb.gz")]
    pprof: Option<PathBuf>,
    /// Write the same samples as CSV, one row per (lock, waiter stack); `-` for standard output.
    #[arg(long, value_name = "F.csv")]
    csv: Option<PathBuf>,
    /// Write the longest contended waits (`run --longest-waits N`) as a trace that Perfetto UI
    /// (ui.perfetto.dev) and chrome://tracing open: each wait a slice on its thread, the hold
    /// that caused it a slice on the holder's thread, and an arrow from hold to wait.
    #[arg(long, value_name = "F.json")]
    perfetto: Option<PathBuf>,
    #[command(flatten)]
    symbols: crate::report_cmd::SymbolArgs,
    #[command(flatten)]
    process: crate::report_cmd::ProcessArg,
}

fn ends_with(p: &Path, ext: &str) -> bool {
    let s = p.to_string_lossy().to_ascii_lowercase();
    s.len() > ext.len() && s.ends_with(ext)
}

/// `lockmeter export`.
pub(crate) fn export(a: ExportArgs) -> Result<()> {
    let gzip = match &a.pprof {
        Some(p) if ends_with(p, ".pb.gz") => Some(true),
        Some(p) if ends_with(p, ".pb") => Some(false),
        Some(p) => {
            return Err(ExportError::UnsupportedOutput {
                path: p.display().to_string(),
                supported: ".pb.gz, .pb",
            }
            .into());
        }
        None => None,
    };
    if let Some(p) = &a.csv
        && p.as_os_str() != "-"
        && !ends_with(p, ".csv")
    {
        return Err(ExportError::UnsupportedOutput {
            path: p.display().to_string(),
            supported: ".csv, or - for standard output",
        }
        .into());
    }
    if let Some(p) = &a.perfetto
        && !ends_with(p, ".json")
    {
        return Err(ExportError::UnsupportedOutput {
            path: p.display().to_string(),
            supported: ".json",
        }
        .into());
    }
    let opts = a.symbols.options()?;
    // Every process of the run file, each folded on its own, then merged.
    let mut run = crate::report_cmd::open_run(&a.file, &opts, a.process.process.as_deref())?;
    let analysis = run.analysis(&lockmeter_report::Filter::default());
    if let (Some(p), Some(gzip)) = (&a.pprof, gzip) {
        let pb = pprof::from_analysis(&analysis);
        let mut buf = Vec::new();
        pprof::write(&pb, gzip, &mut buf)?;
        lockmeter_format::files::write_new(p, &buf)?;
        eprintln!(
            "lockmeter: pprof profile written to {} ({} stacks; try `go tool pprof -top {}`)",
            p.display(),
            pb.sample.len(),
            p.display()
        );
    }
    if let Some(p) = &a.csv {
        let mut buf = Vec::new();
        pprof::write_csv_from(&analysis, &mut buf)?;
        if p.as_os_str() == "-" {
            let mut o = std::io::stdout().lock();
            o.write_all(&buf).context("cannot write to standard output")?;
            o.flush().context("cannot write to standard output")?;
        } else {
            lockmeter_format::files::write_new(p, &buf)?;
            eprintln!("lockmeter: CSV written to {}", p.display());
        }
    }
    if let Some(p) = &a.perfetto {
        let t = perfetto::trace_run(&mut run.parts)?;
        lockmeter_format::files::write_new(p, &perfetto::to_json(&t))?;
        let waits = t.events.iter().filter(|e| e.ph == "X" && e.name.starts_with("wait ")).count();
        eprintln!(
            "lockmeter: trace of the {waits} longest waits written to {} (open it in ui.perfetto.dev)",
            p.display()
        );
    }
    crate::print_notes(&run.notes());
    Ok(())
}

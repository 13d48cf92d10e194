//! `lockmeter`: argument parsing and wiring only. The work is done by the library crates:
//! `lockmeter-preload` (the collector), `lockmeter-format` (profiles), `lockmeter-report`
//! (reports) and `lockmeter-bench` (the lock laboratory).

mod collect;
mod compare;
mod ctl;
mod demo;
mod diff_cmd;
mod embedded;
mod export_cmd;
mod flame_cmd;
mod guards;
mod hints;
mod lock_filter;
mod overhead;
mod plot_cmd;
mod pprof_dir;
mod program;
mod record;
mod report_cmd;
mod run;
mod settings_args;
mod stale;
mod top;
mod tree;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// A lock-contention meter and lock laboratory for Linux.
#[derive(Debug, Parser)]
#[command(name = "lockmeter", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a program and meter every pthread lock it takes; at exit, print the locks it waited on
    /// most, who waited on whom, and what to run next.
    Run(run::RunArgs),
    /// Control a program metered by `run` while it runs: snapshot, pause, resume, reset.
    Ctl(ctl::CtlArgs),
    /// A live view of a metered program, refreshed every second: top locks by wait, contention,
    /// wait and hold, a sparkline of wait per second per lock.
    Top(top::TopArgs),
    /// Run a program under several lock algorithms (`run --lock`), interleaved, and compare
    /// their wall time, a metric of the program's output and the top lock's wait and hold.
    Compare(compare::CompareArgs),
    /// Record kernel locks and the futex waits of any program (Rust, Go, JVM, static), with eBPF.
    Record(record::RecordArgs),
    /// Print a report of a profile.
    Report(report_cmd::ReportArgs),
    /// Draw wait-time CDFs and wait and hold histograms per lock (SVG or PNG).
    Plot(plot_cmd::PlotArgs),
    /// Draw a flame graph of waiter (or holder) stacks, or print folded stacks.
    Flamegraph(flame_cmd::FlameArgs),
    /// Write contended stacks as pprof (Go's mutex profile shape) or CSV.
    Export(export_cmd::ExportArgs),
    /// Compare two profiles per lock or per call site.
    Diff(diff_cmd::DiffArgs),
    /// Run a bundled multithreaded program under `run` and show its report.
    Demo(demo::DemoArgs),
    /// The lock laboratory: benchmark lock algorithms (throughput and fairness, acquire-time
    /// latency, interference of spinning waiters, lock stealing).
    Bench(lockmeter_bench::BenchArgs),
    /// Measure what the collector adds, in each hold-timing mode: to an uncontended lock+unlock,
    /// to contended loops and to a real program (sysbench, or `-- PROGRAM ARGS`), beside `perf
    /// lock record` and mutrace where they run.
    Overhead(overhead::OverheadArgs),
    /// The overhead benchmark's workload.
    #[command(hide = true, name = "__overhead-workload")]
    OverheadWorkload(overhead::OverheadWorkloadArgs),
    /// The demo's workload (used by `lockmeter demo`).
    #[command(hide = true, name = "__demo-workload")]
    DemoWorkload(demo::WorkloadArgs),
}

/// Prints the caveats of reading a profile (`lockmeter: note: ...`), one line each.
pub(crate) fn print_notes(notes: &[String]) {
    for n in notes {
        eprintln!("lockmeter: note: {n}");
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.command {
        Command::Run(a) => run::run(a),
        Command::Compare(a) => compare::compare(a).map(|_| ExitCode::SUCCESS),
        Command::Record(a) => record::record(a),
        Command::Ctl(a) => ctl::ctl(a).map(|_| ExitCode::SUCCESS),
        Command::Top(a) => top::top(a).map(|_| ExitCode::SUCCESS),
        Command::Report(a) => report_cmd::report(a).map(|_| ExitCode::SUCCESS),
        Command::Plot(a) => plot_cmd::plot(a).map(|_| ExitCode::SUCCESS),
        Command::Flamegraph(a) => flame_cmd::flamegraph(a).map(|_| ExitCode::SUCCESS),
        Command::Export(a) => export_cmd::export(a).map(|_| ExitCode::SUCCESS),
        Command::Diff(a) => diff_cmd::diff(a).map(|_| ExitCode::SUCCESS),
        Command::Demo(a) => demo::demo(a),
        Command::Bench(a) => lockmeter_bench::run(a).map(|_| ExitCode::SUCCESS),
        Command::Overhead(a) => overhead::overhead(a).map(|_| ExitCode::SUCCESS),
        Command::OverheadWorkload(a) => {
            overhead::workload(a);
            Ok(ExitCode::SUCCESS)
        }
        Command::DemoWorkload(a) => {
            demo::workload(a);
            Ok(ExitCode::SUCCESS)
        }
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            eprintln!("lockmeter: {e:#}");
            ExitCode::from(2)
        }
    }
}

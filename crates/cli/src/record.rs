//! `lockmeter record`: the kernel collector (eBPF): kernel locks and the futex waits of any
//! program. Wiring only; the collector is `lockmeter_kernel`.

use anyhow::{Result, bail};
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Options of `lockmeter record`.
#[derive(Debug, clap::Args)]
pub(crate) struct RecordArgs {
    /// Profile file to write (default: lockmeter-N.lmp, a new N); other processes that waited
    /// get FILE.PID.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Stop after this long (e.g. 10s, 500ms, 2m; a command is then interrupted).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Frames kept per stack, kernel and user parts each.
    #[arg(long, default_value_t = 16, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=127))]
    frames: u16,
    /// Trace this running process (and the children it starts) until it ends or Ctrl-C.
    #[arg(short, long, value_name = "PID", conflicts_with_all = ["all", "command"])]
    pid: Option<u32>,
    /// Trace every process until Ctrl-C or --duration.
    #[arg(short, long, conflicts_with = "command")]
    all: bool,
    /// Do not print the short report.
    #[arg(short, long)]
    quiet: bool,
    /// Locks shown in the short report.
    #[arg(long, default_value_t = 10, value_name = "N")]
    top: usize,
    /// The program and its arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// `10s`, `500ms`, `2m`, `1h`, or seconds.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, unit) =
        s.find(|c: char| !c.is_ascii_digit() && c != '.').map_or((s, ""), |i| s.split_at(i));
    let v: f64 =
        num.parse().map_err(|_| format!("'{s}' is not a duration: use e.g. 10s, 500ms, 2m"))?;
    let secs = match unit {
        "" | "s" => v,
        "ms" => v / 1e3,
        "us" | "µs" => v / 1e6,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(format!("'{s}' is not a duration: use e.g. 10s, 500ms, 2m")),
    };
    if !(secs > 0.0 && secs.is_finite()) {
        return Err(format!("'{s}' is not a positive duration"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `lockmeter record`.
pub(crate) fn record(a: RecordArgs) -> Result<ExitCode> {
    use lockmeter_kernel::{Options, Target};
    let target = match (a.pid, a.all, a.command.is_empty()) {
        (Some(p), _, _) => {
            if !std::path::Path::new(&format!("/proc/{p}")).exists() {
                bail!("no process {p}: give the pid of a running process");
            }
            Target::Pid(p)
        }
        (None, true, _) => {
            if a.duration.is_none() {
                eprintln!("lockmeter: recording every process until Ctrl-C (or use --duration)");
            }
            Target::All
        }
        (None, false, false) => {
            crate::run::resolve_program(&a.command[0])?;
            Target::Command(a.command.clone())
        }
        (None, false, true) => {
            bail!("nothing to record: lockmeter record -- PROGRAM [ARGS], -p PID or -a")
        }
    };
    if let Some(why) = lockmeter_kernel::unavailable() {
        bail!("cannot record: {why}");
    }
    let output = a.output.clone().unwrap_or_else(|| crate::run::default_output("lockmeter"));
    lockmeter_format::files::check_new(&output)?;
    let opts = Options {
        target,
        duration: a.duration,
        frames: a.frames as usize,
        envs: Vec::new(),
        preload: None,
        inherit_fd: None,
        keep_zombie: false,
    };
    let rec = lockmeter_kernel::record(&opts, &mut |m| eprintln!("lockmeter: {m}"))?;
    // One file: every process recorded, back to back (a run file).
    let images = rec
        .profiles
        .iter()
        .map(|p| {
            let key = PathBuf::from(format!("{}.{}", p.header.pid, p.header.image_seq));
            crate::tree::Image::of(&key, p)
        })
        .collect();
    let file = if rec.profiles.is_empty() {
        None
    } else {
        let run = lockmeter_format::Run { processes: rec.profiles };
        lockmeter_format::files::write_new(&output, &lockmeter_format::run_to_bytes(&run)?)?;
        Some(output.clone())
    };
    let status = rec.status.unwrap_or_else(|| std::process::ExitStatus::from_raw(0));
    let ran = crate::run::Ran {
        status,
        file,
        tree: crate::tree::Tree { images },
        left: Vec::new(),
        left_dir: None,
        blind_spot: None,
    };
    let prog: Vec<OsString> = match &opts.target {
        Target::Command(c) => c.clone(),
        Target::Pid(p) => vec![format!("pid {p}").into()],
        Target::All => vec!["every process".into()],
    };
    crate::run::finish(&prog, &ran, a.quiet, a.top)
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("ten").unwrap_err().contains("not a duration"));
        assert!(parse_duration("5parsecs").is_err());
    }
}

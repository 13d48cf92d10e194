//! `lockmeter ctl PID ...`: run-time control of a program metered by `lockmeter run` (or a plain
//! `LD_PRELOAD`), through the collector's unix socket `/tmp/lockmeter-UID/PID.sock`.

use anyhow::{Result, anyhow, bail};
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

/// Options of `lockmeter ctl`.
#[derive(Debug, clap::Args)]
pub(crate) struct CtlArgs {
    /// The metered process.
    #[arg(value_name = "PID")]
    pid: u32,
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Write a complete profile of everything measured so far (since the last reset); the
    /// program keeps running and is metered on.
    Snapshot {
        /// The file to write (never overwritten; default: lockmeter-PID-snapshot-N.lmp, a new N).
        #[arg(short, long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Stop metering (the hooks pass calls straight through) until `resume`.
    Pause,
    /// Meter again after `pause` (or before `--delay` is over).
    Resume,
    /// Start counting from zero: later snapshots and the final profile leave out everything
    /// measured before.
    Reset,
    /// Say whether the process is metering or paused.
    Status,
}

/// The control socket of process `pid`, connected.
pub(crate) fn connect(pid: u32) -> Result<UnixStream> {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let meta = std::fs::metadata(&proc)
        .map_err(|_| anyhow!("there is no process {pid}; check the pid (ps, pgrep)"))?;
    let path = PathBuf::from(format!("/tmp/lockmeter-{}/{pid}.sock", meta.uid()));
    let not_metered = || {
        anyhow!(
            "process {pid} is not metered by lockmeter (start it with `lockmeter run -- CMD`; --control 0 turns control off)"
        )
    };
    let connected = UnixStream::connect(&path);
    if let Err(e) = &connected
        && e.kind() == std::io::ErrorKind::ConnectionRefused
    {
        // Nobody listens: the socket of a process of this pid killed before it could remove it
        // (a live collector's never refuses). It goes; the answer is the same without it.
        crate::stale::remove_if_stale(&path);
    }
    match connected {
        Ok(s) => {
            s.set_read_timeout(Some(Duration::from_secs(30))).ok();
            s.set_write_timeout(Some(Duration::from_secs(30))).ok();
            Ok(s)
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => bail!(
            "permission denied on {}: only the user who runs process {pid}, or root, may control it",
            path.display()
        ),
        Err(_) if runs_the_collector(pid) => bail!(
            "process {pid} runs under lockmeter but has no control socket: it runs with --control 0, closed it, or is a fork child that has taken no lock yet (a fork child binds its socket at its first lock)"
        ),
        Err(_) => Err(not_metered()),
    }
}

/// Whether process `pid` has the preload library mapped (without a socket, it may run with
/// `--control 0`, have closed it, or be a fork child that has taken no lock yet).
fn runs_the_collector(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/maps")).is_ok_and(|m| {
        m.split(|&c| c == b'\n').any(|l| {
            l.rsplit(|&c| c == b'/').next().is_some_and(|f| f.starts_with(b"liblockmeter_preload"))
        })
    })
}

/// Sends `request` to process `pid` and returns the answer's first line (after `ok`) and the
/// bytes that follow it. An `error:` answer is an error.
pub(crate) fn request(pid: u32, request: &str) -> Result<(String, Vec<u8>)> {
    let mut s = connect(pid)?;
    // Socket errors are said in words, not passed on as I/O errors: a broken pipe here is the
    // process closing its socket (main treats a broken pipe as a closed standard output).
    s.write_all(format!("{request}\n").as_bytes()).map_err(|e| {
        anyhow!("process {pid} closed its control socket ({e}); it may be exiting, or closed it")
    })?;
    let mut all = Vec::new();
    s.read_to_end(&mut all).map_err(|e| {
        anyhow!("process {pid} did not answer ({e}); try again (is it stopped or exiting?)")
    })?;
    let nl = all.iter().position(|&c| c == b'\n').ok_or_else(|| {
        anyhow!("process {pid} closed the connection without an answer (it may be exiting)")
    })?;
    let line = String::from_utf8_lossy(&all[..nl]).into_owned();
    let rest = all[nl + 1..].to_vec();
    if let Some(e) = line.strip_prefix("error: ") {
        bail!("process {pid}: {e}");
    }
    let Some(ok) = line.strip_prefix("ok") else {
        bail!(
            "process {pid} answered '{line}', not a lockmeter collector answer; is it metered by this version of lockmeter?"
        );
    };
    Ok((ok.trim().to_string(), rest))
}

/// A snapshot of process `pid`: the profile's bytes, checked to decode.
pub(crate) fn snapshot(pid: u32) -> Result<(Vec<u8>, lockmeter_format::Profile)> {
    let (_, bytes) = request(pid, "snapshot")?;
    let p = lockmeter_format::read_profile(&bytes)
        .map_err(|e| anyhow!("the snapshot of process {pid} is incomplete ({e}); try again"))?;
    Ok((bytes, p))
}

/// `lockmeter ctl`.
pub(crate) fn ctl(a: CtlArgs) -> Result<()> {
    let pid = a.pid;
    match a.action {
        Action::Snapshot { output } => {
            let out = output.unwrap_or_else(|| {
                crate::run::default_output(&format!("lockmeter-{pid}-snapshot"))
            });
            lockmeter_format::files::check_new(&out)?;
            let (bytes, p) = snapshot(pid)?;
            lockmeter_format::files::write_new(&out, &bytes)?;
            let acq: u64 = p.records.iter().map(|r| r.stats.acquisitions).sum();
            eprintln!(
                "lockmeter: snapshot of process {pid} written to {} ({} locks, {acq} acquisitions)",
                out.display(),
                p.locks.len()
            );
        }
        Action::Pause => eprintln!("lockmeter: process {pid}: {}", request(pid, "pause")?.0),
        Action::Resume => eprintln!("lockmeter: process {pid}: {}", request(pid, "resume")?.0),
        Action::Reset => {
            request(pid, "reset")?;
            eprintln!("lockmeter: process {pid}: counts reset to zero");
        }
        Action::Status => println!("{}", request(pid, "status")?.0),
    }
    Ok(())
}

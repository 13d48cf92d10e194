//! `run`'s side of the collector's guardians (see the preload's `guard.rs`): a pipe whose write
//! end every metered process and its guardian inherit (`LOCKMETER_GUARD_FD`). `run` keeps only
//! the read end; once the program has ended, end of file on it means every guardian is done, so
//! the profiles they write are complete before `run` reads them. A process that lives on (a
//! daemon) keeps the pipe open too: `run` stops waiting as soon as no guardian of the run is
//! writing (one whose program ended), without waiting for the daemon.

use lockmeter_core::settings;
use std::collections::HashSet;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// How long `run` waits for guardians after the program ended (a process of the program that
/// lives on keeps its guardian, and the pipe, open).
pub(crate) const LIMIT: Duration = Duration::from_secs(10);

pub(crate) struct DonePipe {
    read: OwnedFd,
    write: Option<OwnedFd>,
}

impl DonePipe {
    /// A new pipe (both ends close-on-exec here); `None` if the system refuses one.
    pub(crate) fn create() -> Option<DonePipe> {
        let mut fds = [-1; 2];
        // SAFETY: `fds` is a valid array of two descriptors for pipe2 to fill.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return None;
        }
        // SAFETY: both descriptors were just created and are owned by nobody else.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        Some(DonePipe { read, write: Some(write) })
    }

    /// The write end and the value of `LOCKMETER_GUARD_FD` that names it (`FD:INODE`), for a
    /// program started elsewhere (`run --kernel`: the kernel collector starts it, and clears
    /// the descriptor's close-on-exec flag in the child); `None` if it cannot be named.
    pub(crate) fn handover(&self) -> Option<(RawFd, String)> {
        let fd = self.write.as_ref()?.as_raw_fd();
        // SAFETY: an all-zero stat is a valid buffer; fstat fills it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: `fd` is open (we own it) and `st` is writable.
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return None;
        }
        Some((fd, format!("{fd}:{}", st.st_ino)))
    }

    /// Passes the write end to the program started by `cmd` (and only to it).
    pub(crate) fn give_to(&self, cmd: &mut Command) {
        let Some((fd, value)) = self.handover() else { return };
        cmd.env(settings::GUARD_FD.env, value);
        // SAFETY: fcntl is async-signal-safe; it only clears close-on-exec on our own pipe, in
        // the child between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                libc::fcntl(fd, libc::F_SETFD, 0);
                Ok(())
            });
        }
    }

    /// Closes our write end (after the program started): from then on only the program's
    /// processes and their guardians hold it.
    pub(crate) fn started(&mut self) {
        self.write = None;
    }

    /// Waits until the guardians are done, at most `limit`: every holder of the write end
    /// closed it, or (with the run's `manifest`) no guardian of the run is writing a profile any
    /// more, so that a process of the program that lives on (a daemon, which holds the pipe too)
    /// does not hold `run` up. False on timeout.
    pub(crate) fn wait_done(&self, limit: Duration, manifest: Option<&Path>) -> bool {
        let end = Instant::now() + limit;
        let mut buf = [0u8; 64];
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            let mut p =
                libc::pollfd { fd: self.read.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            let ms = left.as_millis().min(50) as i32;
            // SAFETY: one valid pollfd.
            let r = unsafe { libc::poll(&mut p, 1, ms) };
            if r > 0 {
                // SAFETY: `buf` is writable for its length; the descriptor is ours.
                let n = unsafe {
                    libc::read(self.read.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len())
                };
                if n == 0 {
                    return true;
                }
            } else if manifest.is_some_and(|m| !guardian_writing(m)) {
                return true;
            }
        }
    }
}

/// Waits for the run's guardians ([`DonePipe::wait_done`], at most [`LIMIT`]); says so when a
/// process of the program still runs after it.
pub(crate) fn wait_guardians(done: Option<&DonePipe>, manifest: Option<&Path>) {
    if let Some(d) = done
        && !d.wait_done(LIMIT, manifest)
    {
        eprintln!(
            "lockmeter: a process of the program still runs {} s after it ended: its profile is not in this summary (it writes it when it ends)",
            LIMIT.as_secs()
        );
    }
}

/// `run --kernel`, once the kernel collector saw the program end: closes our end of `done`,
/// waits for the guardians ([`wait_guardians`]), then reaps the program, left a zombie (`pid`)
/// for its guardian to read how it ended, unless the collector already had its `status`.
pub(crate) fn reap_after_guardians(
    mut done: Option<DonePipe>,
    manifest: Option<&Path>,
    status: Option<std::process::ExitStatus>,
    pid: Option<u32>,
) -> anyhow::Result<std::process::ExitStatus> {
    use std::os::unix::process::ExitStatusExt;
    if let Some(d) = &mut done {
        d.started();
    }
    wait_guardians(done.as_ref(), manifest);
    let (Some(pid), None) = (pid, status) else {
        return Ok(status.unwrap_or_else(|| std::process::ExitStatus::from_raw(0)));
    };
    let mut st = 0;
    loop {
        // SAFETY: waiting for our own child; `st` is writable.
        let r = unsafe { libc::waitpid(pid as libc::pid_t, &mut st, 0) };
        if r == pid as libc::pid_t {
            return Ok(std::process::ExitStatus::from_raw(st));
        }
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(anyhow::anyhow!("cannot wait for the program: {e}"));
        }
    }
}

/// The name every guardian gives itself ([`lockmeter_core::GUARDIAN_NAME`]).
pub(crate) const GUARDIAN_NAME: &str = match lockmeter_core::GUARDIAN_NAME.to_str() {
    Ok(s) => s,
    Err(_) => panic!("the guardian's name is UTF-8"),
};

/// Whether a guardian of the run (`manifest`) may be writing a profile: one whose program ended.
/// A guardian's parent is the process it guards until that process ends (then it is handed to
/// init or a subreaper at once), so a guardian whose parent is not a live process of the run is
/// writing, or about to leave.
fn guardian_writing(manifest: &Path) -> bool {
    let procs = run_processes(manifest);
    let live: HashSet<u32> =
        procs.iter().filter(|(_, c)| c != GUARDIAN_NAME).map(|(p, _)| *p).collect();
    procs
        .iter()
        .filter(|(_, c)| c == GUARDIAN_NAME)
        .any(|(pid, _)| parent_of(*pid).is_none_or(|pp| !live.contains(&pp)))
}

/// The parent pid of process `pid` (field 4 of `/proc/PID/stat`, after the name in parentheses).
fn parent_of(pid: u32) -> Option<u32> {
    lockmeter_core::procstat::read_field(&format!("/proc/{pid}"), 4)
}

/// Waits until child `pid` has ended, without reaping it: its zombie keeps the exit status the
/// guardian reads from `/proc/PID/stat`.
pub(crate) fn wait_exited(pid: u32) {
    loop {
        // SAFETY: an all-zero siginfo is a valid buffer for waitid to fill.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waiting for our own child; WNOWAIT leaves it waitable.
        let r = unsafe { libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
}

/// The running processes whose environment names the run's manifest `manifest` (every process
/// the run started, and their guardians while they run): pid and name.
pub(crate) fn run_processes(manifest: &Path) -> Vec<(u32, String)> {
    let mut want = format!("{}=", lockmeter_core::settings::MANIFEST.env).into_bytes();
    want.extend_from_slice(manifest.as_os_str().as_encoded_bytes());
    let mut found = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else { return found };
    for e in rd.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(env) = std::fs::read(e.path().join("environ")) else { continue };
        if env.split(|&b| b == 0).any(|v| v == want.as_slice()) {
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            found.push((pid, comm.trim().to_owned()));
        }
    }
    found
}

//! `lockmeter run`: runs a program with the preload library and reports what it measured.

use anyhow::{Context, Result, bail};
use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::SystemTime;

pub(crate) use crate::program::{find_preload, preload_blind_spot, resolve_program};
use crate::settings_args::CollectorArgs;
use lockmeter_core::settings;

/// Options of `lockmeter run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// Profile file to write (default: lockmeter-N.lmp in the current directory, a new N).
    #[arg(short, long, value_name = "FILE", help = settings::OUTPUT.help)]
    pub(crate) output: Option<PathBuf>,
    /// Do not print the short report when the program ends.
    #[arg(short, long)]
    pub(crate) quiet: bool,
    /// The collector's settings (one flag per row of `lockmeter_core::settings`).
    #[command(flatten)]
    pub(crate) collector: CollectorArgs,
    /// With --lock: swap only the mutexes inside the program's static object NAME (a mutex or an
    /// array of them, from the executable's symbol table), or those initialized or first locked
    /// at FILE:LINE (from the executable's DWARF line table); the others keep glibc's.
    #[arg(long, value_name = "NAME|FILE:LINE")]
    pub(crate) lock_filter: Option<String>,
    /// Locks shown in the short report.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub(crate) top: usize,
    /// Record the kernel's side too, with eBPF (root or CAP_BPF+CAP_PERFMON): kernel locks the
    /// program contended on, and for each metered lock how often its waiters slept in the kernel.
    /// One profile, as `lockmeter record` and `run` together.
    #[arg(long)]
    pub(crate) kernel: bool,
    /// With --interval: write one pprof file per interval into DIR (the interval's contended
    /// acquisitions by waiter stack, Go's mutex profile shape), for Pyroscope or Parca.
    #[arg(long, value_name = "DIR", requires = "interval", conflicts_with = "kernel")]
    pub(crate) pprof_dir: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) program: Program,
}

/// The program a command runs, and its arguments (`run`, `compare`).
#[derive(Debug, clap::Args)]
pub(crate) struct Program {
    /// The program and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CMD"
    )]
    pub(crate) command: Vec<OsString>,
}

static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    }
}

/// The first `lockmeter-N.lmp` that does not exist yet.
pub(crate) fn default_output(stem: &str) -> PathBuf {
    (1..)
        .map(|n| PathBuf::from(format!("{stem}-{n}.lmp")))
        .find(|p| !p.exists() && !p.with_extension("lmp.tmp").exists())
        .unwrap_or_default()
}

/// Fails early, before the program runs, if profiles cannot be written next to `output`.
fn check_writable(output: &Path) -> Result<()> {
    let dir = output.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let probe = dir.join(format!(".lockmeter-probe-{}", std::process::id()));
    match std::fs::OpenOptions::new().write(true).create_new(true).open(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => {
            bail!("cannot write the profile in {}: {e}; choose another file with -o", dir.display())
        }
    }
}

/// A command that runs `command` under the preload `lib`, writing `output`, with the collector
/// settings `collector`.
pub(crate) fn metered_command(
    command: &[OsString],
    lib: &Path,
    output: &Path,
    collector: &CollectorArgs,
) -> Result<Command> {
    let Some(prog) = command.first() else {
        bail!("no program given: lockmeter run -- PROGRAM [ARGS...]")
    };
    let mut preload = lib.as_os_str().to_owned();
    if let Some(prev) = std::env::var_os("LD_PRELOAD").filter(|p| !p.is_empty()) {
        preload.push(":");
        preload.push(prev);
    }
    let mut cmd = Command::new(prog);
    cmd.args(&command[1..])
        .env("LD_PRELOAD", preload)
        .env(settings::OUTPUT.env, output)
        .env(settings::ROOT_PPID.env, std::process::id().to_string());
    collector.apply(&mut cmd);
    // The TSC calibration travels to the collector (each process then skips its own), unless the
    // user chose the monotonic clock. Measured over the 3 ms a process alone takes (the median of
    // five windows): a longer window was most of what `run` added to a short program.
    let clock = collector
        .get(&settings::CLOCK)
        .map(str::to_owned)
        .or_else(|| std::env::var(settings::CLOCK.env).ok());
    let tsc = match clock.as_deref().map(|c| settings::parse_clock(c.as_bytes())) {
        Some(Some(tsc)) => tsc,
        _ => clock.is_none(),
    };
    if tsc && lockmeter_core::clock::tsc_is_invariant() {
        static HZ: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        let hz = *HZ.get_or_init(|| lockmeter_core::clock::measure_tsc_hz(3_000_000));
        cmd.env(settings::CLOCK.env, "tsc").env(settings::TSC_HZ.env, hz.to_string());
    }
    Ok(cmd)
}

/// Result of running a program under the collector.
pub(crate) struct Ran {
    pub(crate) status: std::process::ExitStatus,
    /// The run file: every process that took locks, and the first one.
    pub(crate) file: Option<PathBuf>,
    /// Every process image that wrote a profile, idle launchers included.
    pub(crate) tree: crate::tree::Tree,
    /// Processes still running when the program ended (`name[pid]`), not in the file.
    pub(crate) left: Vec<String>,
    /// Where the processes still running will write their profiles.
    pub(crate) left_dir: Option<PathBuf>,
    /// Why the collector could not reach the program, said before it ran.
    pub(crate) blind_spot: Option<String>,
}

impl Ran {
    /// `ran` once the profiles of the run are collected into `output`.
    fn collected(
        status: std::process::ExitStatus,
        blind_spot: Option<String>,
        output: &Path,
        (main, others): Profiles,
        dir: &crate::collect::RunDir,
        manifest: Option<&crate::tree::Manifest>,
    ) -> Result<Ran> {
        let c = crate::collect::collect(output, main, others, dir, manifest.map(|m| m.path()))?;
        let left_dir = (!c.left.is_empty()).then(|| dir.path().to_path_buf());
        Ok(Ran { status, file: c.file, tree: c.tree, left: c.left, left_dir, blind_spot })
    }
}

/// Runs `command` under the preload, writing `output`.
pub(crate) fn run_metered(command: &[OsString], output: &Path, args: &RunArgs) -> Result<Ran> {
    let Some(prog) = command.first() else {
        bail!("no program given: lockmeter run -- PROGRAM [ARGS...]")
    };
    let exe = resolve_program(prog)?;
    if args.kernel
        && let Some(why) = lockmeter_kernel::unavailable()
    {
        bail!("--kernel: {why}");
    }
    let blind_spot = preload_blind_spot(&exe);
    if let Some(why) = &blind_spot {
        let how = if args.kernel { "its kernel side is recorded" } else { "running it unmetered" };
        eprintln!("lockmeter: {why} ({how})");
    }
    let lib = find_preload()?;
    let output = std::path::absolute(output).unwrap_or_else(|_| output.to_path_buf());
    // Nothing the user had is renamed or replaced: an existing file, directory or link is an
    // error before the program runs (the collector, too, only ever creates new names).
    lockmeter_format::files::check_new(&output)?;
    check_writable(&output)?;
    // The processes write their profiles into a private directory; `run` joins them into one
    // file at `output` when the program ends.
    let dir = crate::collect::RunDir::create()?;
    let frag = dir.first_profile();
    let mut cmd = metered_command(command, &lib, &frag, &args.collector)?;
    if let Some(d) = &args.pprof_dir {
        crate::pprof_dir::check(d)?;
    }
    // Each process lists the profile it wrote in the manifest, so `run` knows them all.
    let manifest = crate::tree::Manifest::create();
    if let Some(m) = &manifest {
        cmd.env(settings::MANIFEST.env, m.path());
        // An image that took no lock leaves a line in the manifest instead of a profile file
        // (`tree::Manifest::idle_images`); not with --kernel, where each image's file takes its
        // process's kernel profile.
        if !args.kernel {
            cmd.env(settings::IDLE_LINES.env, "1");
        }
    }
    if let Some(name) = &args.lock_filter {
        let v = crate::lock_filter::env_value(&exe, name, &args.collector)?;
        cmd.env(settings::LOCK_FILTER.env, v);
    }
    if args.kernel {
        // Every image writes a profile file: each takes its process's kernel profile.
        let (status, profiles) = run_with_kernel(command, &cmd, &lib, &frag, &manifest, args)?;
        return Ran::collected(status, blind_spot, &output, profiles, &dir, manifest.as_ref());
    }
    // Ctrl-C reaches the program and us alike (one process group): we ignore it and wait for the
    // program to write its profile. SIGTERM and SIGHUP sent to us are forwarded to it.
    let start = SystemTime::now();
    // SAFETY: installing an async-signal-safe handler / ignoring signals in this process.
    let old_int = unsafe { libc::signal(libc::SIGINT, libc::SIG_IGN) };
    for sig in [libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: as above; a signal the caller ignored stays ignored.
        unsafe {
            if libc::signal(sig, forward as *const () as libc::sighandler_t) == libc::SIG_IGN {
                libc::signal(sig, libc::SIG_IGN);
            }
        }
    }
    // SAFETY: the closure only calls signal(2), which is async-signal-safe, in the child.
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(libc::SIGINT, old_int);
            Ok(())
        });
    }
    // Guardians hold this pipe until they are done: its end of file says the profiles are all
    // written (see `guards`).
    let mut done = crate::guards::DonePipe::create();
    if let Some(d) = &done {
        d.give_to(&mut cmd);
    }
    let spawned = cmd.spawn();
    if let Some(d) = &mut done {
        d.started();
    }
    let mut child = spawned.with_context(|| format!("cannot run '{}'", prog.to_string_lossy()))?;
    CHILD.store(child.id() as i32, Ordering::Relaxed);
    let pprof = args.pprof_dir.as_ref().map(|d| {
        let ms = args
            .collector
            .get(&settings::INTERVAL)
            .and_then(|v| settings::parse_duration_ms(v.as_bytes()));
        let period = std::time::Duration::from_millis(ms.unwrap_or(1000).max(1));
        let m = manifest.as_ref().map(|m| m.path().to_path_buf());
        crate::pprof_dir::Writer::start(d, child.id(), m, period)
    });
    // The program's zombie stays until the guardians are done (its guardian reads its status).
    crate::guards::wait_exited(child.id());
    crate::guards::wait_guardians(done.as_ref(), manifest.as_ref().map(|m| m.path()));
    let status = child.wait().context("cannot wait for the program")?;
    CHILD.store(0, Ordering::Relaxed);

    let (main, others) = profiles_of_the_run(&frag, start, manifest.as_ref());
    if let (Some(w), Some(d)) = (pprof, &args.pprof_dir) {
        let all: Vec<PathBuf> = main.iter().chain(others.iter()).cloned().collect();
        let n = w.finish(&all);
        eprintln!("lockmeter: {n} pprof files (one per interval) in {}", d.display());
    }
    Ran::collected(status, blind_spot, &output, (main, others), &dir, manifest.as_ref())
}

/// The profiles this run wrote: those the manifest lists, else (no manifest could be made) the
/// fresh ones found next to `output`.
fn profiles_of_the_run(
    output: &Path,
    start: SystemTime,
    manifest: Option<&crate::tree::Manifest>,
) -> (Option<PathBuf>, Vec<PathBuf>) {
    match manifest {
        Some(m) => m.profiles(output),
        None => written_profiles(output, start),
    }
}

/// The profiles the preload wrote for this run: `output` and the fresh `output.PID[.N]` files.
fn written_profiles(output: &Path, start: SystemTime) -> (Option<PathBuf>, Vec<PathBuf>) {
    let main = output.is_file().then(|| output.to_path_buf());
    let mut others = Vec::new();
    if let (Some(dir), Some(name)) = (output.parent(), output.file_name()) {
        let prefix = format!("{}.", name.to_string_lossy());
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().into_owned();
                let Some(rest) = n.strip_prefix(&prefix) else { continue };
                if !rest.split('.').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
                {
                    continue;
                }
                let fresh =
                    e.metadata().and_then(|m| m.modified()).map(|m| m >= start).unwrap_or(false);
                if fresh {
                    others.push(e.path());
                }
            }
        }
    }
    others.sort();
    (main, others)
}

/// The profiles a run's processes wrote: the first process's, then the others.
type Profiles = (Option<PathBuf>, Vec<PathBuf>);

/// `run --kernel`: the eBPF collector starts the metered command, then each process's kernel
/// profile is folded into its preload profile ([`lockmeter_format::merge::merge_kernel`]).
fn run_with_kernel(
    command: &[OsString],
    cmd: &Command,
    lib: &Path,
    output: &Path,
    manifest: &Option<crate::tree::Manifest>,
    args: &RunArgs,
) -> Result<(std::process::ExitStatus, Profiles)> {
    use lockmeter_format::files::write_new;
    let start = SystemTime::now();
    let mut envs: Vec<(OsString, Option<OsString>)> =
        cmd.get_envs().map(|(k, v)| (k.to_owned(), v.map(|v| v.to_owned()))).collect();
    // The guardians hold this pipe until they are done, as in a plain `run` (see `guards`).
    let done = crate::guards::DonePipe::create();
    let handover = done.as_ref().and_then(|d| d.handover());
    envs.extend(handover.iter().map(|(_, v)| (settings::GUARD_FD.env.into(), Some(v.into()))));
    let frames = settings::FRAMES.count(args.collector.get(&settings::FRAMES).map(str::as_bytes));
    let opts = lockmeter_kernel::Options {
        target: lockmeter_kernel::Target::Command(command.to_vec()),
        duration: None,
        frames: (frames as usize).clamp(1, 127),
        envs,
        preload: Some(lib.to_path_buf()),
        inherit_fd: handover.map(|(fd, _)| fd),
        keep_zombie: true,
    };
    let rec = lockmeter_kernel::record(&opts, &mut |m| {
        if !m.starts_with("recording ") {
            eprintln!("lockmeter: {m}");
        }
    })?;
    let manifest_path = manifest.as_ref().map(|m| m.path());
    let status = crate::guards::reap_after_guardians(done, manifest_path, rec.status, rec.pid)?;
    let (mut main, mut others) = profiles_of_the_run(output, start, manifest.as_ref());
    // Each preload profile takes its process's kernel profile (the last image of a pid that
    // exec'd takes it); kernel profiles of processes the preload did not see are written beside.
    let mut files: Vec<(PathBuf, lockmeter_format::Profile)> = Vec::new();
    for path in main.iter().chain(others.iter()) {
        let p = lockmeter_format::read_profile_file(path)?;
        files.push((path.clone(), p));
    }
    let mut kernel: Vec<Option<lockmeter_format::Profile>> =
        rec.profiles.into_iter().map(Some).collect();
    let mut order: Vec<usize> = (0..files.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(files[i].1.header.image_seq));
    for i in order {
        let pid = files[i].1.header.pid;
        if let Some(k) = kernel.iter_mut().find(|k| k.as_ref().is_some_and(|k| k.header.pid == pid))
        {
            let k = k.take().unwrap_or_default();
            lockmeter_format::merge::merge_kernel(&mut files[i].1, &k);
            let (path, p) = &files[i];
            // The file this run just wrote is replaced by its merged version: written new
            // beside it, then renamed over it.
            let tmp = path.with_extension(format!("merging.{}", std::process::id()));
            write_new(&tmp, &lockmeter_format::to_bytes(p)?)?;
            std::fs::rename(&tmp, path).with_context(|| {
                format!("cannot replace {} by its merged profile", path.display())
            })?;
        }
    }
    for k in kernel.into_iter().flatten() {
        // A process the preload did not see may be a guardian of ours (it shares the program's
        // memory, so the kernel collector follows it): what it did is lockmeter's, not the
        // program's.
        let guardian = !k.threads.is_empty()
            && k.threads.iter().all(|t| t.name == crate::guards::GUARDIAN_NAME);
        if k.records.is_empty() || guardian {
            continue;
        }
        let root = k.header.ppid == std::process::id() || main.is_none() && others.is_empty();
        let path = if root && main.is_none() {
            output.to_path_buf()
        } else {
            PathBuf::from(format!("{}.{}", output.display(), k.header.pid))
        };
        write_new(&path, &lockmeter_format::to_bytes(&k)?)?;
        if root && main.is_none() {
            main = Some(path);
        } else {
            others.push(path);
        }
    }
    Ok((status, (main, others)))
}

/// `lockmeter run`.
pub(crate) fn run(args: RunArgs) -> Result<ExitCode> {
    // Best-effort: the control sockets of processes killed before they could remove theirs.
    crate::stale::remove_stale_sockets(&crate::stale::control_dir());
    let output = args.output.clone().unwrap_or_else(|| default_output("lockmeter"));
    let ran = run_metered(&args.program.command, &output, &args)?;
    finish(&args.program.command, &ran, args.quiet, args.top)
}

/// A signal's description (`Terminated`, `Aborted`, ...).
fn signal_name(sig: i32) -> String {
    // SAFETY: strsignal returns a valid C string for any number.
    unsafe { std::ffi::CStr::from_ptr(libc::strsignal(sig)) }.to_string_lossy().into_owned()
}

/// `path` as a shell word: as it is when it holds only characters no shell treats specially,
/// else in single quotes.
fn shell_word(path: &Path) -> String {
    let s = path.to_string_lossy();
    let plain =
        !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./+,:@%=".contains(&b));
    if plain { s.into_owned() } else { format!("'{}'", s.replace('\'', "'\\''")) }
}

/// The line after the summary: the commands that answer the next questions about `profile`
/// (who waited on whom, their stacks, the interactive report; with `processes`, each process
/// apart).
pub(crate) fn next_commands(profile: &Path, processes: bool) -> String {
    let file = shell_word(profile);
    let html = if profile.extension().is_some_and(|e| e == "lmp") {
        profile.with_extension("html")
    } else {
        let mut p = profile.as_os_str().to_owned();
        p.push(".html");
        PathBuf::from(p)
    };
    let html = shell_word(&html);
    let by = if processes { " | --by process" } else { "" };
    format!("next: lockmeter report {file} --by pair | --stacks{by} | --format html -o {html}")
}

/// Prints the short report and the file written, and turns the program's status into ours.
pub(crate) fn finish(command: &[OsString], ran: &Ran, quiet: bool, top: usize) -> Result<ExitCode> {
    let prog = command.first().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
    // The summary covers every process of the run file (under a launcher, the program the user
    // meant as well as the shell that started it), named with the launchers it came through.
    let tree = &ran.tree;
    if let Some(file) = &ran.file {
        if !quiet {
            if let Some(line) = tree.lead_line() {
                eprintln!("{line}");
            }
            if let Some(line) = tree.fixed_line() {
                eprintln!("{line}");
            }
            match crate::report_cmd::summary(file, top) {
                Ok(s) => {
                    eprint!("{s}");
                    eprintln!();
                    eprintln!("{}", next_commands(file, tree.busy() > 1));
                }
                Err(e) => eprintln!("lockmeter: {e:#}"),
            }
            if let Some(table) = tree.table(top) {
                eprintln!();
                eprint!("{table}");
            }
        }
        let run = lockmeter_format::read_run_file(file).ok();
        let lead = tree.lead().and_then(|l| {
            run.as_ref()?
                .processes
                .iter()
                .find(|p| (p.header.pid, p.header.image_seq) == (l.pid, l.image_seq))
        });
        if let Some(hint) = lead.and_then(crate::hints::no_acquisitions) {
            eprintln!("{hint}");
        }
        eprintln!("lockmeter: profile written to {}", file.display());
    } else {
        match ran.status.signal() {
            Some(sig) => eprintln!(
                "lockmeter: {prog} was killed by signal {sig} ({}) before it could write a profile, and no guardian wrote one (it is off with --guardian 0, and needs Linux 5.3 or later on x86_64)",
                signal_name(sig)
            ),
            None if ran.blind_spot.is_some() => {}
            None => eprintln!(
                "lockmeter: {prog} wrote no profile: it replaced LD_PRELOAD, metering was disabled, or it ended without running exit handlers (a raw exit_group, as Go does) while the guardian was off (--guardian 0) or unavailable (it needs Linux 5.3 or later on x86_64)"
            ),
        }
    }
    if !ran.left.is_empty() {
        let dir = ran.left_dir.as_deref().map(|d| d.display().to_string()).unwrap_or_default();
        eprintln!(
            "lockmeter: not collected: {} still running when {prog} ended ({}); each writes its own profile into {dir} when it ends",
            if ran.left.len() == 1 { "1 process was" } else { "processes were" },
            ran.left.join(", ")
        );
    }
    if let Some(code) = ran.status.code() {
        return Ok(ExitCode::from(code as u8));
    }
    let sig = ran.status.signal().unwrap_or(0);
    if ran.file.is_some() {
        eprintln!("lockmeter: {prog} was killed by signal {sig} ({})", signal_name(sig));
    }
    Ok(ExitCode::from((128 + sig).min(255) as u8))
}

#[cfg(test)]
mod tests {
    use super::next_commands;
    use std::path::Path;

    #[test]
    fn next_commands_name_the_profile_and_its_html_report() {
        assert_eq!(
            next_commands(Path::new("lockmeter-1.lmp"), false),
            "next: lockmeter report lockmeter-1.lmp --by pair | --stacks | --format html -o lockmeter-1.html"
        );
        assert_eq!(
            next_commands(Path::new("/tmp/my run/p.lmp"), true),
            "next: lockmeter report '/tmp/my run/p.lmp' --by pair | --stacks | --by process | --format html -o '/tmp/my run/p.html'"
        );
        assert_eq!(
            next_commands(Path::new("p.lmp.41.2"), false),
            "next: lockmeter report p.lmp.41.2 --by pair | --stacks | --format html -o p.lmp.41.2.html"
        );
        assert_eq!(
            next_commands(Path::new("it's.lmp"), false),
            "next: lockmeter report 'it'\\''s.lmp' --by pair | --stacks | --format html -o 'it'\\''s.html'"
        );
    }
}

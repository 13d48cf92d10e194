//! The contended workloads of `lockmeter overhead`: this binary's `hot` and `many` loops and a
//! real program (sysbench mutex by default, or the user's command after `--`), each run bare,
//! under each collector mode, under `perf lock record` and under `mutrace` where they can run,
//! interleaved round by round; one table per workload of median wall times, beside the profile's
//! own estimate of the slowdown (`overhead.estimated_slowdown`).

use crate::run::{metered_command, resolve_program};
use crate::settings_args::CollectorArgs;
use anyhow::{Context, Result, bail};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The real program measured when the user gives none (and sysbench is installed).
pub(crate) const SYSBENCH_ARGS: [&str; 5] =
    ["mutex", "--threads=4", "--mutex-num=4096", "--mutex-locks=100000", "run"];

/// A contended workload to measure, or one that cannot run here and why.
#[derive(Debug, PartialEq)]
pub(crate) enum Workload {
    /// `hot` or `many`: this binary's hidden workload, which prints its own wall time in ns.
    Builtin(String),
    /// A real program: the wall time of the whole command.
    Real(Vec<OsString>),
    /// The real-program row that cannot run, with the reason (one line).
    Skipped(String),
}

/// The workloads that `--contended` and the command after `--` ask for. `sysbench` is where
/// sysbench was found (the default real program), if anywhere. A command given is always
/// measured, as the real workload, even when `--contended` does not list `real`.
pub(crate) fn plan(
    contended: &[String],
    program: &[OsString],
    sysbench: Option<PathBuf>,
) -> Result<Vec<Workload>> {
    let none = contended.iter().any(|k| k == "none");
    if none && contended.len() > 1 {
        bail!("--contended none runs no contended workload: give it alone, or list workloads");
    }
    if none && !program.is_empty() {
        bail!(
            "the command after -- is measured as the real workload: drop --contended none to run it"
        );
    }
    let mut out = Vec::new();
    for k in contended.iter().filter(|k| *k != "none") {
        if k == "real" {
            if out.iter().any(|w| !matches!(w, Workload::Builtin(_))) {
                continue;
            }
            out.push(real(program, &sysbench)?);
        } else if !out.contains(&Workload::Builtin(k.clone())) {
            out.push(Workload::Builtin(k.clone()));
        }
    }
    if !program.is_empty() && !out.iter().any(|w| matches!(w, Workload::Real(_))) {
        out.push(real(program, &sysbench)?);
    }
    Ok(out)
}

fn real(program: &[OsString], sysbench: &Option<PathBuf>) -> Result<Workload> {
    if let Some(prog) = program.first() {
        let path = resolve_program(prog)?;
        let mut cmd = vec![path.into_os_string()];
        cmd.extend(program[1..].iter().cloned());
        return Ok(Workload::Real(cmd));
    }
    Ok(match sysbench {
        Some(p) => {
            let mut cmd = vec![p.clone().into_os_string()];
            cmd.extend(SYSBENCH_ARGS.iter().map(OsString::from));
            Workload::Real(cmd)
        }
        None => Workload::Skipped(
            "skipped: sysbench is not installed (install it, or give a program: lockmeter \
             overhead -- PROGRAM ARGS)"
                .to_string(),
        ),
    })
}

/// Where `name` is on PATH, if it is.
pub(crate) fn on_path(name: &str) -> Option<PathBuf> {
    resolve_program(&OsString::from(name)).ok()
}

/// Whether `perf lock record` can run here (root and perf installed).
fn perf_lock_available() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    root && Command::new("perf").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// The median of `v` (NaN when empty).
pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

/// One row of a workload's table: a way of running it and what it measured.
#[derive(Debug)]
pub(crate) struct Row {
    pub(crate) name: String,
    /// Wall times in ns, one per round; empty when the row was not run.
    pub(crate) wall: Vec<f64>,
    /// The profile's `estimated_slowdown`, one per round where the run wrote a profile.
    pub(crate) estimate: Vec<f64>,
    /// Why the row was not run (`None`: it was).
    pub(crate) not_run: Option<String>,
}

impl Row {
    fn new(name: &str, not_run: Option<&str>) -> Row {
        Row {
            name: name.to_string(),
            wall: Vec::new(),
            estimate: Vec::new(),
            not_run: not_run.map(str::to_owned),
        }
    }
}

/// The table of one workload: a header line, then one line per row; the first row is the bare
/// run that the slowdowns divide by.
pub(crate) fn table(rows: &[Row]) -> Vec<String> {
    let mut out = vec![format!(
        "{:<24} {:>12} {:>10} {:>22}",
        "MODE", "WALL MS", "SLOWDOWN", "ESTIMATED SLOWDOWN"
    )];
    let bare = rows.first().map_or(f64::NAN, |r| median(&mut r.wall.clone()));
    for (i, r) in rows.iter().enumerate() {
        if let Some(why) = &r.not_run {
            out.push(format!("{:<24} not run: {why}", r.name));
            continue;
        }
        let w = median(&mut r.wall.clone());
        let slow = if i == 0 { "-".to_string() } else { format!("{:.2}x", w / bare) };
        let est = if r.estimate.is_empty() {
            "-".to_string()
        } else {
            format!("{:.2}x", median(&mut r.estimate.clone()))
        };
        out.push(format!("{:<24} {:>12.1} {slow:>10} {est:>22}", r.name, w / 1e6));
    }
    out
}

/// What the contended workloads share with the uncontended pair: rounds, the modes (the first,
/// without collector, is the bare run) and the acquisitions per thread of `hot` and `many`.
pub(crate) struct Setup<'a> {
    pub(crate) rounds: usize,
    pub(crate) pairs: u64,
    pub(crate) lib: &'a Path,
    pub(crate) modes: &'a [(String, Option<CollectorArgs>)],
}

/// How one row runs the workload's command.
enum How<'a> {
    Plain,
    Metered(&'a CollectorArgs),
    Perf,
    Mutrace(&'a Path),
}

/// Measures one workload and prints its table (or its one line when skipped).
pub(crate) fn measure(w: &Workload, s: &Setup) -> Result<()> {
    let (label, command, builtin) = match w {
        Workload::Skipped(_) => {
            println!();
            println!("{}", header(w, s));
            return Ok(());
        }
        Workload::Builtin(kind) => {
            let command: Vec<OsString> = vec![
                std::env::current_exe()?.into_os_string(),
                "__overhead-workload".into(),
                "--kind".into(),
                kind.into(),
                "--pairs".into(),
                s.pairs.to_string().into(),
            ];
            (kind.clone(), command, true)
        }
        Workload::Real(cmd) => ("real".to_string(), cmd.clone(), false),
    };
    let dir =
        std::env::temp_dir().join(format!("lockmeter-overhead-{}-{label}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let r = rounds(&label, &command, builtin, s, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    let rows = r?;
    println!();
    println!("{}", header(w, s));
    for line in table(&rows) {
        println!("{line}");
    }
    Ok(())
}

fn header(w: &Workload, s: &Setup) -> String {
    let what = match w {
        Workload::Builtin(k) if k == "hot" => {
            format!(
                "contended: 4 threads x {} lock+unlock pairs on one mutex, wall time of the whole \
                 command",
                s.pairs
            )
        }
        Workload::Builtin(_) => format!(
            "contended: 4 threads x {} lock+unlock pairs on 4096 mutexes picked at random, wall \
             time of the whole command",
            s.pairs
        ),
        Workload::Real(cmd) => {
            let words: Vec<String> = cmd
                .iter()
                .enumerate()
                .map(|(i, a)| {
                    let p = Path::new(a);
                    // The program by its name, as the user would type it.
                    match (i, p.file_name()) {
                        (0, Some(n)) => n.to_string_lossy().into_owned(),
                        _ => a.to_string_lossy().into_owned(),
                    }
                })
                .collect();
            format!("real program: {}, wall time of the whole command", words.join(" "))
        }
        Workload::Skipped(why) => return format!("real program: {why}"),
    };
    format!("{what}, {} interleaved rounds", s.rounds)
}

/// Runs every row once per round, interleaved, and returns the rows with their measurements.
fn rounds(
    label: &str,
    command: &[OsString],
    builtin: bool,
    s: &Setup,
    dir: &Path,
) -> Result<Vec<Row>> {
    let mut hows: Vec<How> = Vec::new();
    let mut rows: Vec<Row> = Vec::new();
    for (name, mode) in s.modes {
        hows.push(mode.as_ref().map_or(How::Plain, How::Metered));
        rows.push(Row::new(name, None));
    }
    let perf = perf_lock_available();
    hows.push(How::Perf);
    rows.push(Row::new("perf lock record", (!perf).then_some("it needs root and perf")));
    let mutrace = on_path("mutrace");
    hows.push(mutrace.as_deref().map_or(How::Plain, How::Mutrace));
    rows.push(Row::new("mutrace", mutrace.is_none().then_some("not installed")));
    for round in 0..s.rounds {
        eprintln!("lockmeter overhead: {label}, round {}/{}", round + 1, s.rounds);
        for (i, (how, row)) in hows.iter().zip(rows.iter_mut()).enumerate() {
            if row.not_run.is_some() {
                continue;
            }
            let profile = dir.join(format!("{label}-{round}-{i}.lmp"));
            let mut cmd = match how {
                How::Plain => plain(command),
                How::Metered(c) => metered_command(command, s.lib, &profile, c)?,
                How::Perf => {
                    let mut c = Command::new("perf");
                    c.args(["lock", "record", "-q", "-o"]).arg(dir.join("perf.data")).arg("--");
                    c.args(command);
                    c
                }
                How::Mutrace(m) => {
                    let mut c = Command::new(m);
                    c.args(command);
                    c
                }
            };
            let what = format!("the {label} workload ({})", row.name);
            let ns =
                if builtin { run_builtin(&mut cmd, &what)? } else { run_real(&mut cmd, &what)? };
            row.wall.push(ns);
            if let Ok(p) = lockmeter_format::read_profile_file(&profile)
                && let Some(x) = p.overhead.estimated_slowdown()
            {
                row.estimate.push(x);
            }
        }
    }
    Ok(rows)
}

fn plain(command: &[OsString]) -> Command {
    let mut c = Command::new(&command[0]);
    c.args(&command[1..]);
    c
}

/// Runs this binary's workload and returns the wall time of the whole command in ns, as for a
/// real program: the profile's estimate is of the whole process (its start, calibration and
/// profile writing included: 5-60 ms on the 4096-mutex loop), so the measurement is too. The
/// workload's last line of output (its threads' own wall time) must be a number.
fn run_builtin(cmd: &mut Command, what: &str) -> Result<f64> {
    let t = std::time::Instant::now();
    let out = cmd.output().with_context(|| format!("cannot run {what}"))?;
    let ns = t.elapsed().as_nanos() as f64;
    if !out.status.success() {
        bail!("{what} failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    let _: f64 = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or("")
        .trim()
        .parse()
        .context("bad workload output")?;
    Ok(ns)
}

/// Runs the real program (its output discarded, its error output kept for a failure's message)
/// and returns the wall time of the whole command in ns.
fn run_real(cmd: &mut Command, what: &str) -> Result<f64> {
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    let t = std::time::Instant::now();
    let out = cmd.output().with_context(|| format!("cannot run {what}"))?;
    let ns = t.elapsed().as_nanos() as f64;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
        let sep = if last.is_empty() { "" } else { ": " };
        bail!("{what} failed ({}){sep}{last}; give a command that succeeds", out.status);
    }
    Ok(ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn kinds(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn medians() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&mut [7.0]), 7.0);
        assert!(median(&mut []).is_nan());
    }

    #[test]
    fn default_real_program_is_sysbench_when_installed() {
        let sb = PathBuf::from("/usr/bin/sysbench");
        let w = plan(&kinds(&["hot", "many", "real"]), &[], Some(sb)).unwrap();
        let mut want = os(&["/usr/bin/sysbench"]);
        want.extend(os(&SYSBENCH_ARGS));
        assert_eq!(
            w,
            vec![
                Workload::Builtin("hot".into()),
                Workload::Builtin("many".into()),
                Workload::Real(want)
            ]
        );
    }

    #[test]
    fn real_without_sysbench_is_one_skipped_line() {
        let w = plan(&kinds(&["real"]), &[], None).unwrap();
        let [Workload::Skipped(why)] = &w[..] else { panic!("{w:?}") };
        assert!(why.starts_with("skipped: sysbench is not installed"), "{why}");
        assert!(!why.contains('\n'));
    }

    #[test]
    fn a_given_program_is_the_real_workload() {
        let prog = os(&["/bin/sh", "-c", "exit 0"]);
        // Replaces sysbench, once, even when --contended does not list real.
        for k in [&["real"][..], &["hot"], &["real", "hot", "real"]] {
            let w = plan(&kinds(k), &prog, Some("/usr/bin/sysbench".into())).unwrap();
            let real: Vec<_> = w.iter().filter(|w| matches!(w, Workload::Real(_))).collect();
            assert_eq!(real, vec![&Workload::Real(prog.clone())], "{k:?}");
            assert_eq!(w.len(), 1 + usize::from(k.contains(&"hot")), "{k:?}");
        }
        // Found on PATH like a shell would.
        let w = plan(&kinds(&["real"]), &os(&["sh", "-c", "true"]), None).unwrap();
        let [Workload::Real(cmd)] = &w[..] else { panic!("{w:?}") };
        assert!(Path::new(&cmd[0]).is_absolute() && cmd[0].to_string_lossy().ends_with("/sh"));
        assert_eq!(cmd[1..], os(&["-c", "true"]));
    }

    #[test]
    fn plan_errors_are_one_line() {
        let missing = os(&["no-such-program-lockmeter-test"]);
        let e = plan(&kinds(&["real"]), &missing, None).unwrap_err().to_string();
        assert_eq!(e, "cannot run 'no-such-program-lockmeter-test': not found on PATH");
        let e = plan(&kinds(&["real"]), &os(&["/no/such/prog"]), None).unwrap_err().to_string();
        assert_eq!(e, "cannot run '/no/such/prog': no such file");
        let e = plan(&kinds(&["none"]), &os(&["/bin/sh"]), None).unwrap_err().to_string();
        assert!(e.contains("drop --contended none") && !e.contains('\n'), "{e}");
        let e = plan(&kinds(&["none", "hot"]), &[], None).unwrap_err().to_string();
        assert!(e.starts_with("--contended none") && !e.contains('\n'), "{e}");
        assert_eq!(plan(&kinds(&["none"]), &[], None).unwrap(), vec![]);
    }

    fn row(name: &str, wall_ms: &[f64], estimate: &[f64], not_run: Option<&str>) -> Row {
        Row {
            name: name.into(),
            wall: wall_ms.iter().map(|m| m * 1e6).collect(),
            estimate: estimate.to_vec(),
            not_run: not_run.map(str::to_owned),
        }
    }

    #[test]
    fn table_has_a_row_per_way_of_running_and_medians() {
        let rows = [
            row("raw (no preload)", &[100.0, 300.0, 200.0], &[], None),
            row("hold timing on", &[400.0, 500.0, 900.0], &[1.25, 1.5, 1.75], None),
            row("perf lock record", &[250.0], &[], None),
            row("mutrace", &[], &[], Some("not installed")),
        ];
        let t = table(&rows);
        let want = [
            "MODE                          WALL MS   SLOWDOWN     ESTIMATED SLOWDOWN",
            "raw (no preload)                200.0          -                      -",
            "hold timing on                  500.0      2.50x                  1.50x",
            "perf lock record                250.0      1.25x                      -",
            "mutrace                  not run: not installed",
        ];
        assert_eq!(t, want);
    }

    #[test]
    fn headers_name_the_workload() {
        let modes = [];
        let s = Setup { rounds: 3, pairs: 1000, lib: Path::new("/x.so"), modes: &modes };
        let real = Workload::Real(os(&["/usr/bin/sysbench", "mutex", "run"]));
        assert_eq!(
            header(&real, &s),
            "real program: sysbench mutex run, wall time of the whole command, 3 interleaved rounds"
        );
        assert_eq!(
            header(&Workload::Builtin("hot".into()), &s),
            "contended: 4 threads x 1000 lock+unlock pairs on one mutex, wall time of the whole \
             command, 3 interleaved rounds"
        );
    }
}

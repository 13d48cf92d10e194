//! `lockmeter top PID` and `lockmeter top -- CMD`: a live view of a metered program, refreshed
//! every second from snapshots read through the control socket (`ctl.rs`).

use anyhow::{Context, Result, bail};
use lockmeter_report::{Analysis, SortKey, SymbolizeOptions, Symbolizer};
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row, Table};
use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Options of `lockmeter top`.
#[derive(Debug, clap::Args)]
pub(crate) struct TopArgs {
    /// A process metered by `lockmeter run` (or the preload); or give `-- CMD` instead.
    #[arg(value_name = "PID", required_unless_present = "command")]
    pid: Option<u32>,
    /// With `-- CMD`: the profile its exit writes (default: lockmeter-N.lmp, a new N).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Seconds between refreshes.
    #[arg(long, default_value_t = 1.0, value_name = "S")]
    refresh: f64,
    /// Start a program metered and watch it (its output goes to /dev/null; `q` ends it).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// Sparkline history per lock (seconds).
const HISTORY: usize = 30;
const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// The sort orders `s` cycles through.
const SORTS: [(SortKey, &str); 4] = [
    (SortKey::Wait, "wait"),
    (SortKey::Hold, "hold"),
    (SortKey::Acquisitions, "acquisitions"),
    (SortKey::ContentionRate, "contention"),
];

/// One lock on screen.
struct LockLine {
    key: (u64, u32),
    name: String,
    acquisitions: u64,
    contention_pct: f64,
    wait_ns: u64,
    hold_ns: u64,
    hold_p99: Option<u64>,
}

struct View {
    pid: u32,
    cmd: String,
    sort: usize,
    filter: String,
    editing: bool,
    paused: bool,
    lines: Vec<LockLine>,
    /// Per lock: total wait at the last refresh, and wait per second over the last refreshes.
    history: HashMap<(u64, u32), (u64, VecDeque<f64>)>,
    status: String,
    sym: Option<Symbolizer>,
}

impl View {
    fn refresh(&mut self, seconds: f64) {
        let (_, profile) = match crate::ctl::snapshot(self.pid) {
            Ok(p) => p,
            Err(e) => {
                self.status = format!("{e:#}");
                return;
            }
        };
        let sym = self.sym.get_or_insert_with(|| {
            Symbolizer::new(&profile, &SymbolizeOptions { enabled: true, symbols_dir: None })
        });
        let a = Analysis::with_symbolizer(&profile, sym);
        if self.cmd.is_empty() {
            self.cmd = profile.header.cmdline.join(" ");
        }
        self.lines = a
            .locks
            .iter()
            .map(|l| LockLine {
                key: (l.address, l.generation),
                name: l.display_name(),
                acquisitions: l.agg.stats.acquisitions,
                contention_pct: l.agg.contention_pct(),
                wait_ns: l.agg.stats.wait_ns_total,
                hold_ns: l.agg.stats.hold_ns_total,
                hold_p99: l.agg.hold_percentile_ns(99.0),
            })
            .collect();
        for l in &self.lines {
            let (last, h) = self.history.entry(l.key).or_insert((l.wait_ns, VecDeque::new()));
            h.push_back(l.wait_ns.saturating_sub(*last) as f64 / 1e9 / seconds.max(1e-3));
            *last = l.wait_ns;
            while h.len() > HISTORY {
                h.pop_front();
            }
        }
        let paused = if profile.header.end_reason == lockmeter_format::EndReason::Snapshot {
            crate::ctl::request(self.pid, "status").map(|(s, _)| s).unwrap_or_default()
        } else {
            String::new()
        };
        self.status = format!("{} locks, collector {paused}", self.lines.len());
    }

    fn sorted(&self) -> Vec<&LockLine> {
        let mut v: Vec<&LockLine> = self
            .lines
            .iter()
            .filter(|l| self.filter.is_empty() || l.name.contains(&self.filter))
            .collect();
        let key = SORTS[self.sort].0;
        v.sort_by(|a, b| {
            let o = match key {
                SortKey::Hold => b.hold_ns.cmp(&a.hold_ns),
                SortKey::Acquisitions => b.acquisitions.cmp(&a.acquisitions),
                SortKey::ContentionRate => b.contention_pct.total_cmp(&a.contention_pct),
                _ => b.wait_ns.cmp(&a.wait_ns),
            };
            o.then_with(|| a.name.cmp(&b.name))
        });
        v
    }

    fn spark(&self, key: (u64, u32)) -> String {
        let Some((_, h)) = self.history.get(&key) else { return String::new() };
        let max = h.iter().copied().fold(0.0, f64::max);
        h.iter()
            .map(|&v| {
                if max <= 0.0 || v <= 0.0 {
                    ' '
                } else {
                    BARS[((v / max * 7.0).round() as usize).min(7)]
                }
            })
            .collect()
    }

    fn draw(&self, f: &mut ratatui::Frame<'_>) {
        let [head, body, foot] =
            Layout::vertical([Constraint::Length(2), Constraint::Min(3), Constraint::Length(1)])
                .areas(f.area());
        let mut cmd = self.cmd.clone();
        if cmd.chars().count() > 50 {
            cmd = cmd.chars().take(47).collect::<String>() + "...";
        }
        let title = format!(
            "lockmeter top: pid {} {cmd}{}",
            self.pid,
            if self.paused { "  [display paused]" } else { "" }
        );
        let sub = format!("sort: {}  filter: {}  {}", SORTS[self.sort].1, self.filter, self.status);
        f.render_widget(
            Paragraph::new(vec![
                Line::styled(title, Style::new().add_modifier(Modifier::BOLD)),
                Line::raw(sub),
            ]),
            head,
        );
        let rows: Vec<Row> = self
            .sorted()
            .into_iter()
            .map(|l| {
                Row::new(vec![
                    Cell::from(l.name.clone()),
                    Cell::from(crate::top::short(l.acquisitions as f64, "")),
                    Cell::from(format!("{:.1}%", l.contention_pct)),
                    Cell::from(fmt_ns(l.wait_ns)),
                    Cell::from(fmt_ns(l.hold_ns)),
                    Cell::from(l.hold_p99.map(fmt_ns).unwrap_or_else(|| "-".into())),
                    Cell::from(self.spark(l.key)),
                ])
            })
            .collect();
        let widths = [
            Constraint::Fill(1),
            Constraint::Length(7),
            Constraint::Length(6),
            Constraint::Length(8),
            Constraint::Length(8),
            Constraint::Length(8),
            Constraint::Length(HISTORY as u16 / 2),
        ];
        let header = Row::new(["LOCK", "ACQ", "CONT%", "WAIT", "HOLD", "HOLDp99", "WAIT/s"])
            .style(Style::new().add_modifier(Modifier::REVERSED));
        f.render_widget(Table::new(rows, widths).header(header), body);
        let keys = if self.editing {
            format!("filter: {}_  (Enter: apply, Esc: clear)", self.filter)
        } else {
            "q quit  s sort  / filter  p pause".to_string()
        };
        f.render_widget(Paragraph::new(keys), foot);
    }
}

/// `n` with a k/M/G suffix.
pub(crate) fn short(n: f64, unit: &str) -> String {
    match n {
        n if n >= 1e9 => format!("{:.1}G{unit}", n / 1e9),
        n if n >= 1e6 => format!("{:.1}M{unit}", n / 1e6),
        n if n >= 1e4 => format!("{:.0}k{unit}", n / 1e3),
        n => format!("{n:.0}{unit}"),
    }
}

fn fmt_ns(ns: u64) -> String {
    let n = ns as f64;
    match n {
        n if n >= 1e9 => format!("{:.2}s", n / 1e9),
        n if n >= 1e6 => format!("{:.1}ms", n / 1e6),
        n if n >= 1e3 => format!("{:.1}us", n / 1e3),
        n => format!("{n:.0}ns"),
    }
}

/// Starts `command` metered, with its output to /dev/null; returns it and its profile's path.
fn start(command: &[OsString], output: Option<PathBuf>) -> Result<(Child, PathBuf)> {
    let lib = crate::run::find_preload()?;
    let output = output.unwrap_or_else(|| crate::run::default_output("lockmeter"));
    lockmeter_format::files::check_new(&output)?;
    let args = crate::settings_args::CollectorArgs::default();
    let mut cmd = crate::run::metered_command(command, &lib, &output, &args)?;
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
    let child = cmd.spawn().with_context(|| {
        format!("cannot start {}", command.first().map(|c| c.to_string_lossy()).unwrap_or_default())
    })?;
    Ok((child, output))
}

/// `lockmeter top`.
pub(crate) fn top(a: TopArgs) -> Result<()> {
    if !(a.refresh > 0.0 && a.refresh <= 3600.0) {
        bail!("--refresh takes seconds from 0 (exclusive) to 3600, e.g. --refresh 0.5");
    }
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        bail!(
            "lockmeter top needs a terminal; in scripts, take snapshots with lockmeter ctl PID snapshot"
        );
    }
    let (mut child, pid) = match (a.pid, a.command.is_empty()) {
        (Some(_), false) => bail!("give either a PID or -- CMD, not both"),
        (Some(pid), true) => {
            // Fails early, in one line, when the process is not metered.
            crate::ctl::request(pid, "status")?;
            (None, pid)
        }
        (None, _) => {
            let (c, out) = start(&a.command, a.output.clone())?;
            let pid = c.id();
            (Some((c, out)), pid)
        }
    };
    let mut view = View {
        pid,
        cmd: String::new(),
        sort: 0,
        filter: String::new(),
        editing: false,
        paused: false,
        lines: Vec::new(),
        history: HashMap::new(),
        status: "starting".into(),
        sym: None,
    };
    let period = Duration::from_secs_f64(a.refresh);
    let mut terminal = match ratatui::try_init() {
        Ok(t) => t,
        Err(e) => {
            ratatui::restore();
            if let Some((mut c, _)) = child {
                // SAFETY: kill has no memory preconditions; the pid is our own child's.
                unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
                let _ = c.wait();
            }
            bail!("cannot use the terminal ({e}); lockmeter top needs one");
        }
    };
    let result = (|| -> Result<()> {
        let mut last = Instant::now() - period;
        loop {
            if let Some((c, _)) = child.as_mut()
                && let Some(st) = c.try_wait()?
            {
                view.status = format!("the program ended ({st}); q quits");
            } else if !view.paused && last.elapsed() >= period {
                let secs = last.elapsed().as_secs_f64();
                last = Instant::now();
                view.refresh(secs);
            }
            terminal.draw(|f| view.draw(f))?;
            if !event::poll(Duration::from_millis(100))? {
                continue;
            }
            let Event::Key(k) = event::read()? else { continue };
            if k.kind != KeyEventKind::Press {
                continue;
            }
            if view.editing {
                match k.code {
                    KeyCode::Enter => view.editing = false,
                    KeyCode::Esc => {
                        view.filter.clear();
                        view.editing = false;
                    }
                    KeyCode::Backspace => {
                        view.filter.pop();
                    }
                    KeyCode::Char(c) => view.filter.push(c),
                    _ => {}
                }
                continue;
            }
            match k.code {
                KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
                KeyCode::Char('s') => view.sort = (view.sort + 1) % SORTS.len(),
                KeyCode::Char('/') => view.editing = true,
                KeyCode::Char('p') => view.paused = !view.paused,
                _ => {}
            }
        }
    })();
    ratatui::restore();
    if let Some((mut c, out)) = child {
        if c.try_wait()?.is_none() {
            // SAFETY: kill has no memory preconditions; the pid is our own child's.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        }
        let st = c.wait()?;
        if out.exists() {
            eprintln!("lockmeter: the program ended ({st}); profile written to {}", out.display());
        } else {
            eprintln!("lockmeter: the program ended ({st}) without writing {}", out.display());
        }
    }
    result
}

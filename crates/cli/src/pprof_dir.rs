//! `run --interval DUR --pprof-dir DIR`: one pprof file per interval (the contended
//! acquisitions of that interval by waiter stack, Go's mutex profile shape), the shape that
//! continuous-profiling servers (Pyroscope, Parca) ingest.
//!
//! A thread of `lockmeter run` takes a snapshot of the program through its control socket every
//! interval and writes the difference from the previous one; after the program exits, the last
//! file is the final profile less the last snapshot.

use anyhow::Result;
use lockmeter_format::{Event, Profile};
use lockmeter_report::export::pprof;
use lockmeter_report::{SymbolizeOptions, Symbolizer};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// An event's identity across profiles (ids are assigned anew in each): thread, lock address
/// and generation, kind, mode, waiter frames, holder site and frames.
type EventKey = (u32, u64, u32, u8, u8, Vec<u64>, u64, Option<Vec<u64>>);

/// A profile's events by [`EventKey`], the same key in every snapshot of one process.
struct Keys<'p> {
    locks: HashMap<u32, (u64, u32)>,
    stacks: HashMap<u32, &'p Vec<u64>>,
}

impl<'p> Keys<'p> {
    fn new(p: &'p Profile) -> Self {
        Keys {
            locks: p.locks.iter().map(|l| (l.id, (l.address, l.generation))).collect(),
            stacks: p.stacks.iter().map(|s| (s.id, &s.frames)).collect(),
        }
    }

    fn of(&self, e: &Event) -> EventKey {
        let (addr, generation) = self.locks.get(&e.lock).copied().unwrap_or((0, 0));
        (
            e.thread,
            addr,
            generation,
            e.kind as u8,
            e.mode as u8,
            self.stacks.get(&e.stack).map(|s| s.to_vec()).unwrap_or_default(),
            e.holder_site,
            e.holder_stack.and_then(|h| self.stacks.get(&h)).map(|s| s.to_vec()),
        )
    }
}

fn keyed(p: &Profile) -> HashMap<EventKey, (u64, u64)> {
    let keys = Keys::new(p);
    let mut m = HashMap::new();
    for e in &p.events {
        let v: &mut (u64, u64) = m.entry(keys.of(e)).or_default();
        v.0 += e.count;
        v.1 += e.wait_ns;
    }
    m
}

/// `cur` with each event less its count and wait in `prev`, and the header's time span set to
/// `prev`'s end .. `cur`'s end.
fn delta(prev: Option<&Profile>, cur: &Profile) -> Profile {
    let mut d = cur.clone();
    let Some(prev) = prev else { return d };
    let before = keyed(prev);
    let keys = Keys::new(cur);
    d.events = cur
        .events
        .iter()
        .filter_map(|e| {
            let k = keys.of(e);
            let (c, w) = before.get(&k).copied().unwrap_or((0, 0));
            let ev = Event {
                count: e.count.saturating_sub(c),
                wait_ns: e.wait_ns.saturating_sub(w),
                ..e.clone()
            };
            (ev.count > 0 || ev.wait_ns > 0).then_some(ev)
        })
        .collect();
    d.header.start_unix_ns = prev.header.end_unix_ns;
    d.header.duration_ns = cur.header.end_unix_ns.saturating_sub(prev.header.end_unix_ns);
    d
}

/// Writes `DIR/lockmeter-PID-SEQ.pb.gz` (SEQ from 1, a new name) for the difference.
fn write(dir: &Path, pid: u32, seq: u64, prev: Option<&Profile>, cur: &Profile) -> Result<PathBuf> {
    let d = delta(prev, cur);
    // Frames are named from the program's files as they are now (the maps of the snapshot).
    let mut sym = Symbolizer::new(&d, &SymbolizeOptions { enabled: true, symbols_dir: None });
    let pp = pprof::build(&d, &mut sym);
    let mut buf = Vec::new();
    pprof::write(&pp, true, &mut buf)?;
    let path = dir.join(format!("lockmeter-{pid}-{seq:05}.pb.gz"));
    lockmeter_format::files::write_new(&path, &buf)?;
    Ok(path)
}

/// Per process (pid): files written so far, and the last snapshot.
type PerProcess = HashMap<u32, (u64, Option<Profile>)>;

/// The thread writing the files while the program runs.
pub(crate) struct Writer {
    stop: Arc<AtomicBool>,
    state: Arc<Mutex<PerProcess>>,
    thread: Option<std::thread::JoinHandle<()>>,
    dir: PathBuf,
}

/// Checks `--pprof-dir` before the program runs: an existing directory.
pub(crate) fn check(dir: &Path) -> Result<()> {
    if !dir.is_dir() {
        anyhow::bail!(
            "--pprof-dir {}: not a directory; create it first (mkdir -p {})",
            dir.display(),
            dir.display()
        );
    }
    Ok(())
}

/// Writes the next file of process `pid` for the profile `cur` (a snapshot, or its final
/// profile), as the difference from its last snapshot when that was of the same image.
fn write_next(dir: &Path, state: &mut PerProcess, pid: u32, cur: Profile) {
    let (seq, prev) = state.entry(pid).or_default();
    let same = prev.as_ref().filter(|p| p.header.image_seq == cur.header.image_seq);
    match write(dir, pid, *seq + 1, same, &cur) {
        Ok(_) => {
            *seq += 1;
            *prev = Some(cur);
        }
        Err(e) => eprintln!("lockmeter: --pprof-dir: {e:#}"),
    }
}

impl Writer {
    /// Starts writing a file every `period` for each process of the run: the program (`pid`)
    /// and every process whose environment names the run's `manifest` (its children).
    pub(crate) fn start(
        dir: &Path,
        pid: u32,
        manifest: Option<PathBuf>,
        period: Duration,
    ) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(Mutex::new(PerProcess::new()));
        let (s2, st2, d2) = (stop.clone(), state.clone(), dir.to_path_buf());
        let thread = std::thread::spawn(move || {
            let mut next = std::time::Instant::now() + period;
            while !s2.load(Ordering::Relaxed) {
                let now = std::time::Instant::now();
                if now < next {
                    std::thread::sleep((next - now).min(Duration::from_millis(50)));
                    continue;
                }
                next += period;
                let mut pids = vec![pid];
                if let Some(m) = &manifest {
                    pids.extend(crate::guards::run_processes(m).into_iter().map(|(p, _)| p));
                }
                pids.sort_unstable();
                pids.dedup();
                for p in pids {
                    // Processes that are not metered (a guardian, one with --control 0) answer
                    // nothing: no file.
                    let Ok((_, snap)) = crate::ctl::snapshot(p) else { continue };
                    let mut g = st2.lock().unwrap_or_else(|e| e.into_inner());
                    write_next(&d2, &mut g, p, snap);
                }
            }
        });
        Writer { stop, state, thread: Some(thread), dir: dir.to_path_buf() }
    }

    /// The program ended: stops the thread and writes each process's last interval from its
    /// final profile (`profiles`: the files the run's processes wrote, one process image each).
    /// Returns how many files were written in all.
    pub(crate) fn finish(mut self, profiles: &[PathBuf]) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut last: Vec<Profile> = profiles
            .iter()
            .filter_map(|p| lockmeter_format::read_run_file(p).ok())
            .flat_map(|r| r.processes)
            .collect();
        last.sort_by_key(|p| (p.header.pid, p.header.image_seq));
        for p in last {
            let pid = p.header.pid;
            write_next(&self.dir, &mut g, pid, p);
        }
        g.values().map(|(n, _)| n).sum()
    }
}

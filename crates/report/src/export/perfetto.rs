//! The longest contended waits as a trace (Chrome's trace event format, JSON), which Perfetto UI
//! and `chrome://tracing` open: per kept wait, a `wait on LOCK` slice on the waiter's thread, a
//! `hold LOCK` slice on the holder's thread from its acquisition to the waiter's wake-up (when the
//! holder's acquisition time is known), and a flow arrow from the hold to the wait, so that a
//! convoy (one hold, many waiters) shows as one slice with arrows to every wait it caused.
//!
//! The waits are those the collector kept (`run --longest-waits N`: each thread's N longest of
//! the run, [`lockmeter_format::LongWaits`]). Times are microseconds since the profile's start.
//!
//! ```
//! use lockmeter_format::model::*;
//! use lockmeter_report::NoSymbols;
//! use lockmeter_report::export::perfetto;
//!
//! let profile = Profile {
//!     threads: vec![ThreadInfo { index: 1, tid: 10, name: "holder".into() },
//!                   ThreadInfo { index: 2, tid: 11, name: "waiter".into() }],
//!     locks: vec![LockInfo { id: 1, address: 0x5000, generation: 0, kind: LockKind::Mutex,
//!                            name: Some("queue".into()) }],
//!     long_waits: Some(LongWaits { per_thread: 32, lost: 0, waits: vec![LongWait {
//!         thread: 2, lock: 1, mode: Mode::Exclusive, start_ns: 2_000, end_ns: 9_000,
//!         stack: None, holder_thread: 1, holder_site: 0, holder_stack: None,
//!         holder_acquired_ns: Some(1_000) }] }),
//!     ..Profile::default()
//! };
//! let t = perfetto::trace(&profile, &mut NoSymbols).unwrap();
//! let names: Vec<&str> = t.events.iter().map(|e| e.name.as_str()).collect();
//! assert!(names.contains(&"wait on queue") && names.contains(&"hold queue"));
//! ```

use std::collections::{BTreeMap, HashMap};

use lockmeter_format::{LongWait, Profile};
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::ExportError;
use crate::analysis::Analysis;
use crate::frames::FrameCache;
use crate::symbolize::Symbolize;

/// The category of every event (flows bind by it).
pub const CATEGORY: &str = "lock";

/// A whole trace: `{"traceEvents": [...], "displayTimeUnit": "ns"}`.
#[derive(Debug, Clone, Serialize)]
pub struct Trace {
    /// The events.
    #[serde(rename = "traceEvents")]
    pub events: Vec<TraceEvent>,
    /// How the viewer shows times.
    #[serde(rename = "displayTimeUnit")]
    pub display_time_unit: &'static str,
}

/// One trace event (the fields of the trace event format this export uses).
#[derive(Debug, Clone, Serialize)]
pub struct TraceEvent {
    /// Name.
    pub name: String,
    /// Phase: `X` complete slice, `s`/`f` flow start/finish, `M` metadata.
    pub ph: &'static str,
    /// Category.
    #[serde(skip_serializing_if = "str::is_empty")]
    pub cat: &'static str,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Start, microseconds since the profile's start (absent for metadata).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ts: Option<f64>,
    /// Duration in microseconds (`X` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dur: Option<f64>,
    /// Flow id (`s`/`f` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// Binding point of a flow finish: `e`, the enclosing slice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bp: Option<&'static str>,
    /// Arguments shown with the slice.
    #[serde(skip_serializing_if = "Map::is_empty")]
    pub args: Map<String, Value>,
}

impl TraceEvent {
    fn new(name: String, ph: &'static str, pid: u32, tid: u32) -> Self {
        TraceEvent {
            name,
            ph,
            cat: "",
            pid,
            tid,
            ts: None,
            dur: None,
            id: None,
            bp: None,
            args: Map::new(),
        }
    }
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// One hold slice: the holder's acquisition to the latest wake-up of the waits it caused.
struct Hold {
    start_ns: u64,
    end_ns: u64,
    holder_site: u64,
    waiters: u64,
}

/// The trace of a run file's processes (each with its symbolizer): every process that kept
/// waits, on one time axis (the first process's start) with flow ids kept apart. The error of
/// the first process when none kept any.
pub fn trace_run<S: Symbolize>(parts: &mut [(Profile, S)]) -> Result<Trace, ExportError> {
    let t0 = parts.iter().map(|(p, _)| p.header.start_unix_ns).min().unwrap_or(0);
    let mut all = Trace { events: Vec::new(), display_time_unit: "ns" };
    let mut first_err = None;
    let mut next_id = 0u64;
    for (p, sym) in parts.iter_mut() {
        match trace(p, sym) {
            Ok(t) => {
                let shift = us(p.header.start_unix_ns.saturating_sub(t0));
                let base = next_id;
                for mut e in t.events {
                    if let Some(ts) = e.ts.as_mut() {
                        *ts += shift;
                    }
                    if let Some(id) = e.id.as_mut() {
                        *id += base;
                        next_id = next_id.max(*id + 1);
                    }
                    all.events.push(e);
                }
            }
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) if all.events.is_empty() => Err(e),
        _ => Ok(all),
    }
}

/// The trace of the profile's kept waits. `Err(Empty)` with what to do when the profile has
/// none (recorded without them, or by an older lockmeter).
pub fn trace(profile: &Profile, sym: &mut dyn Symbolize) -> Result<Trace, ExportError> {
    let Some(lw) = &profile.long_waits else {
        return Err(ExportError::Empty(
            "the profile has no longest-wait records (written by an older lockmeter or with \
             --longest-waits 0): record it again with `lockmeter run --longest-waits 32`"
                .into(),
        ));
    };
    if lw.waits.is_empty() {
        return Err(ExportError::Empty(
            "the profile has no contended wait to draw (no lock was found held)".into(),
        ));
    }
    let names: HashMap<u32, String> = Analysis::with_symbolizer(profile, sym)
        .locks
        .iter()
        .map(|l| (l.id, l.display_name()))
        .collect();
    let mut frames = FrameCache::new(sym);
    let pid = profile.header.pid;
    // Threads by profile index; an unknown one (0) on a track of its own.
    let threads: HashMap<u32, (u32, &str)> =
        profile.threads.iter().map(|t| (t.index, (t.tid, t.name.as_str()))).collect();
    let tid_of = |index: u32| threads.get(&index).map_or(0, |t| t.0);
    let stacks: HashMap<u32, &[u64]> =
        profile.stacks.iter().map(|s| (s.id, s.frames.as_slice())).collect();
    let lock_name = |id: u32| names.get(&id).cloned().unwrap_or_else(|| format!("lock {id}"));

    let mut events = Vec::new();
    let process = profile.header.cmdline.first().cloned().unwrap_or_else(|| "process".into());
    let mut m = TraceEvent::new("process_name".into(), "M", pid, 0);
    m.args.insert("name".into(), json!(process));
    events.push(m);
    let mut used: Vec<u32> = lw.waits.iter().flat_map(|w| [w.thread, w.holder_thread]).collect();
    used.sort_unstable();
    used.dedup();
    for index in used {
        let (tid, name) = match threads.get(&index) {
            Some(&(tid, name)) if !name.is_empty() => (tid, format!("{name} ({tid})")),
            Some(&(tid, _)) => (tid, format!("thread {tid}")),
            None if index == 0 => (0, "unknown or exited threads".to_owned()),
            None => continue,
        };
        let mut m = TraceEvent::new("thread_name".into(), "M", pid, tid);
        m.args.insert("name".into(), json!(name));
        events.push(m);
    }

    // The holds: one slice per (holder thread, lock, acquisition), up to its last waiter's wake.
    let mut holds: BTreeMap<(u32, u32, u64), Hold> = BTreeMap::new();
    for w in &lw.waits {
        if let Some(k) = hold_key(w) {
            let h = holds.entry(k).or_insert(Hold {
                start_ns: k.2,
                end_ns: w.end_ns,
                holder_site: w.holder_site,
                waiters: 0,
            });
            h.end_ns = h.end_ns.max(w.end_ns);
            h.waiters += 1;
        }
    }
    for (&(thread, lock, _), h) in &holds {
        let mut e = TraceEvent::new(format!("hold {}", lock_name(lock)), "X", pid, tid_of(thread));
        e.cat = CATEGORY;
        e.ts = Some(us(h.start_ns));
        e.dur = Some(us(h.end_ns - h.start_ns));
        e.args.insert("lock".into(), json!(lock_name(lock)));
        if h.holder_site != 0 {
            e.args.insert("holder_site".into(), json!(frames.name(h.holder_site)));
        }
        e.args.insert("held_until_last_wake_ns".into(), json!(h.end_ns - h.start_ns));
        e.args.insert("waiters".into(), json!(h.waiters));
        events.push(e);
    }

    let mut waits: Vec<&LongWait> = lw.waits.iter().collect();
    waits.sort_by_key(|w| (w.start_ns, w.thread));
    for (flow, w) in waits.into_iter().enumerate() {
        let name = lock_name(w.lock);
        let tid = tid_of(w.thread);
        let mut e = TraceEvent::new(format!("wait on {name}"), "X", pid, tid);
        e.cat = CATEGORY;
        e.ts = Some(us(w.start_ns));
        e.dur = Some(us(w.end_ns - w.start_ns));
        e.args.insert("lock".into(), json!(name));
        e.args.insert("wait_ns".into(), json!(w.end_ns - w.start_ns));
        e.args.insert("mode".into(), json!(w.mode.as_str()));
        if let Some(st) = w.stack.and_then(|id| stacks.get(&id)) {
            if let Some(&site) = st.first() {
                e.args.insert("waiter_site".into(), json!(frames.name(site)));
            }
            let names: Vec<String> = st.iter().map(|&a| frames.name(a)).collect();
            e.args.insert("waiter_stack".into(), json!(names));
        }
        if w.holder_site != 0 {
            e.args.insert("holder_site".into(), json!(frames.name(w.holder_site)));
        }
        if let Some(st) = w.holder_stack.and_then(|id| stacks.get(&id)) {
            let names: Vec<String> = st.iter().map(|&a| frames.name(a)).collect();
            e.args.insert("holder_stack".into(), json!(names));
        }
        if w.holder_thread != 0 {
            e.args.insert("holder_tid".into(), json!(tid_of(w.holder_thread)));
        }
        let wait_ts = e.ts;
        events.push(e);
        // The arrow from the hold that made this thread wait to the wait. Flow events bind to
        // the slice with their timestamp on their thread: the start to the hold (its start),
        // the finish to the wait (`bp: e`, the enclosing slice).
        if let Some(k) = hold_key(w) {
            let id = flow as u64 + 1;
            let mut s = TraceEvent::new(format!("{name} held"), "s", pid, tid_of(k.0));
            s.cat = CATEGORY;
            s.ts = Some(us(k.2));
            s.id = Some(id);
            let mut f = TraceEvent::new(format!("{name} held"), "f", pid, tid);
            f.cat = CATEGORY;
            f.ts = wait_ts;
            f.id = Some(id);
            f.bp = Some("e");
            events.extend([s, f]);
        }
    }
    Ok(Trace { events, display_time_unit: "ns" })
}

/// The hold slice of a wait's holder, when both its thread and its acquisition are known (and
/// the acquisition came before the wake-up): (holder thread, lock, acquisition ns).
fn hold_key(w: &LongWait) -> Option<(u32, u32, u64)> {
    let acq = w.holder_acquired_ns?;
    (w.holder_thread != 0 && acq <= w.end_ns).then_some((w.holder_thread, w.lock, acq))
}

/// The trace as JSON bytes.
pub fn to_json(t: &Trace) -> Vec<u8> {
    let mut v = serde_json::to_vec(t).unwrap_or_default();
    v.push(b'\n');
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbolize::NoSymbols;
    use lockmeter_format::model::*;

    fn wait(thread: u32, start: u64, end: u64, holder: u32, acq: Option<u64>) -> LongWait {
        LongWait {
            thread,
            lock: 1,
            mode: Mode::Exclusive,
            start_ns: start,
            end_ns: end,
            stack: None,
            holder_thread: holder,
            holder_site: 0,
            holder_stack: None,
            holder_acquired_ns: acq,
        }
    }

    fn profile(waits: Vec<LongWait>) -> Profile {
        Profile {
            threads: (1..=4)
                .map(|i| ThreadInfo { index: i, tid: 100 + i, name: String::new() })
                .collect(),
            locks: vec![LockInfo {
                id: 1,
                address: 0x10,
                generation: 0,
                kind: LockKind::Mutex,
                name: Some("big".into()),
            }],
            long_waits: Some(LongWaits { per_thread: 4, lost: 0, waits }),
            ..Profile::default()
        }
    }

    #[test]
    fn a_convoy_is_one_hold_with_an_arrow_to_each_wait() {
        let p = profile(vec![
            wait(2, 1_000, 50_000, 1, Some(500)),
            wait(3, 2_000, 60_000, 1, Some(500)),
            wait(4, 3_000, 70_000, 0, None),
        ]);
        let t = trace(&p, &mut NoSymbols).unwrap();
        let of = |ph: &str, name: &str| -> Vec<&TraceEvent> {
            t.events.iter().filter(|e| e.ph == ph && e.name == name).collect()
        };
        let holds = of("X", "hold big");
        assert_eq!(holds.len(), 1);
        assert_eq!((holds[0].tid, holds[0].ts, holds[0].dur), (101, Some(0.5), Some(59.5)));
        let waits = of("X", "wait on big");
        assert_eq!(waits.iter().map(|e| e.tid).collect::<Vec<_>>(), vec![102, 103, 104]);
        assert_eq!(waits[0].dur, Some(49.0));
        let (s, f) = (of("s", "big held"), of("f", "big held"));
        assert_eq!(s.len(), 2);
        assert_eq!(
            s.iter().map(|e| e.id).collect::<Vec<_>>(),
            f.iter().map(|e| e.id).collect::<Vec<_>>()
        );
        assert!(s.iter().all(|e| e.tid == 101 && e.ts == Some(0.5)));
        assert_eq!(
            f.iter().map(|e| (e.tid, e.ts)).collect::<Vec<_>>(),
            vec![(102, Some(1.0)), (103, Some(2.0))]
        );
        let json: Value = serde_json::from_slice(&to_json(&t)).unwrap();
        assert!(json["traceEvents"].as_array().is_some_and(|a| a.len() == t.events.len()));
    }

    #[test]
    fn without_long_waits_says_what_to_do() {
        let p = Profile { long_waits: None, ..profile(Vec::new()) };
        let e = trace(&p, &mut NoSymbols).unwrap_err().to_string();
        assert!(e.contains("--longest-waits") && !e.contains('\n'), "{e}");
        assert!(trace(&profile(Vec::new()), &mut NoSymbols).is_err());
    }
}

//! Stack samples: a profile's events merged by (lock, stack), and the names the exports give to
//! locks and frames.

use std::collections::HashMap;
use std::str::FromStr;

use lockmeter_format::model::{EventKind, Profile};

use crate::analysis::Analysis;
use crate::symbolize::{Frame, Symbolize};
use crate::text::shorten;

/// What a stack is weighed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Weight {
    /// Time waited by contended acquisitions, by the waiter's stack (ns).
    #[default]
    Wait,
    /// Time held by releases that other threads waited for, by the holder's stack (ns).
    Hold,
    /// Number of contended acquisitions, by the waiter's stack.
    Contentions,
    /// Acquisitions sampled with `run --stack-sample N` (one in N, contended or not), by the
    /// acquirer's stack: where locks are taken.
    Samples,
}

impl Weight {
    /// The option value: `wait`, `hold`, `contentions`.
    pub fn as_str(self) -> &'static str {
        match self {
            Weight::Wait => "wait",
            Weight::Hold => "hold",
            Weight::Contentions => "contentions",
            Weight::Samples => "samples",
        }
    }

    /// What one unit of weight is, for a flame graph's tooltips: `ns waited`, ...
    pub fn count_name(self) -> &'static str {
        match self {
            Weight::Wait => "ns waited",
            Weight::Hold => "ns held",
            Weight::Contentions => "contentions",
            Weight::Samples => "sampled acquisitions",
        }
    }

    /// The events this weight reads: contended acquisitions, or holds others waited for.
    pub fn event_kind(self) -> EventKind {
        match self {
            Weight::Hold => EventKind::Holding,
            Weight::Wait | Weight::Contentions => EventKind::Contended,
            Weight::Samples => EventKind::Sampled,
        }
    }

    /// The weight of a sample of [`Weight::event_kind`].
    pub fn of(self, s: &StackSample) -> u64 {
        match self {
            Weight::Wait | Weight::Hold => s.ns,
            Weight::Contentions | Weight::Samples => s.count,
        }
    }
}

impl FromStr for Weight {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "wait" => Weight::Wait,
            "hold" => Weight::Hold,
            "samples" => Weight::Samples,
            "contentions" => Weight::Contentions,
            _ => {
                return Err(format!(
                    "unknown weight {s:?} (expected wait, hold, contentions or samples)"
                ));
            }
        })
    }
}

/// The events of one (lock, stack), merged over threads and modes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackSample {
    /// `LockInfo::id`.
    pub lock: u32,
    /// Return addresses, innermost first (`frames[0]` is the lock call site); empty when the
    /// event's stack is not in the profile.
    pub frames: Vec<u64>,
    /// Number of events: contended acquisitions, or releases others waited for.
    pub count: u64,
    /// Total wait (contended) or hold (holding) time, ns.
    pub ns: u64,
    /// Longest single wait or hold, ns.
    pub ns_max: u64,
}

/// Whether the profile carries call stacks. Profiles without any stack or event (from a
/// collector that records none) are exported by call site: each site a one-frame stack.
pub fn has_stacks(profile: &Profile) -> bool {
    !(profile.stacks.is_empty() && profile.events.is_empty())
}

/// The events of `kind` merged by (lock, stack), heaviest first (then by lock and frames, so
/// the order is deterministic).
///
/// For [`EventKind::Contended`] a sample is a waiter stack with its contended acquisitions and
/// wait time; for [`EventKind::Holding`], a holder stack with its releases that others waited
/// for and their hold time. Profiles without stacks (see [`has_stacks`]) give one sample per
/// (lock, call site) from the records instead: contended acquisitions and wait time, or timed
/// holds and hold time.
pub fn stack_samples(profile: &Profile, kind: EventKind) -> Vec<StackSample> {
    let mut merged: HashMap<(u32, Vec<u64>), (u64, u64, u64)> = HashMap::new();
    if has_stacks(profile) {
        let stacks: HashMap<u32, &[u64]> =
            profile.stacks.iter().map(|s| (s.id, s.frames.as_slice())).collect();
        for e in profile.events.iter().filter(|e| e.kind == kind) {
            let frames = stacks.get(&e.stack).map(|f| f.to_vec()).unwrap_or_default();
            let m = merged.entry((e.lock, frames)).or_default();
            m.0 += e.count;
            m.1 += e.wait_ns;
            m.2 = m.2.max(e.wait_ns_max);
        }
    } else {
        for r in &profile.records {
            let s = &r.stats;
            let (count, ns, max) = match kind {
                EventKind::Contended => (s.contended, s.wait_ns_total, s.wait_ns_max),
                EventKind::Holding => (s.holds_timed, s.hold_ns_total, s.hold_ns_max),
                // Samples exist only as stacks: a profile without stacks has none.
                EventKind::Sampled | EventKind::FirstUse => continue,
            };
            if count == 0 && ns == 0 {
                continue;
            }
            let frames = if r.site == 0 { Vec::new() } else { vec![r.site] };
            let m = merged.entry((r.lock, frames)).or_default();
            m.0 += count;
            m.1 += ns;
            m.2 = m.2.max(max);
        }
    }
    let mut v: Vec<StackSample> = merged
        .into_iter()
        .map(|((lock, frames), (count, ns, ns_max))| StackSample {
            lock,
            frames,
            count,
            ns,
            ns_max,
        })
        .collect();
    v.sort_by(|a, b| {
        b.ns.cmp(&a.ns)
            .then(b.count.cmp(&a.count))
            .then(a.lock.cmp(&b.lock))
            .then_with(|| a.frames.cmp(&b.frames))
    });
    v
}

/// Display names of the profile's locks by id ([`crate::LockAgg::display_name`]: the given
/// name, else the static symbol, else the address), with `sym` naming static locks.
pub fn lock_names(profile: &Profile, sym: &mut dyn Symbolize) -> LockNames {
    let a = Analysis::with_symbolizer(profile, sym);
    LockNames(a.locks.iter().map(|l| (l.id, l.display_name())).collect())
}

/// Lock display names by `LockInfo::id` (see [`lock_names`]).
#[derive(Debug, Clone, Default)]
pub struct LockNames(pub HashMap<u32, String>);

impl LockNames {
    /// The name of lock `id`; `[unknown lock #id]` for an id the profile does not describe.
    pub fn get(&self, id: u32) -> String {
        self.0.get(&id).cloned().unwrap_or_else(|| format!("[unknown lock #{id}]"))
    }
}

/// Symbolizes each code address once.
pub struct FrameCache<'a> {
    sym: &'a mut dyn Symbolize,
    frames: HashMap<u64, Frame>,
}

impl std::fmt::Debug for FrameCache<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameCache").field("frames", &self.frames.len()).finish()
    }
}

impl<'a> FrameCache<'a> {
    /// A cache in front of `sym`.
    pub fn new(sym: &'a mut dyn Symbolize) -> Self {
        FrameCache { sym, frames: HashMap::new() }
    }

    /// The frame of return address `addr`.
    pub fn frame(&mut self, addr: u64) -> &Frame {
        let sym = &mut *self.sym;
        self.frames.entry(addr).or_insert_with(|| sym.code(addr))
    }

    /// The frame's display name: `function+0xOFF`, `module+0xOFF` or the address.
    pub fn name(&mut self, addr: u64) -> String {
        self.frame(addr).to_string()
    }

    /// The names of the functions at `addr`, outermost first: the frame's name, then the
    /// functions inlined at the address (from debug information), each as `name [inlined]`.
    /// Long generic arguments are elided as in the text report (`catch_unwind<…>`).
    pub fn names_outermost_first(&mut self, addr: u64) -> Vec<String> {
        let f = self.frame(addr);
        let mut v = vec![shorten(&f.to_string())];
        for i in f.inlined.iter().rev() {
            let name = i.function.as_deref().unwrap_or("[unknown]");
            v.push(format!("{} [inlined]", shorten(name)));
        }
        v
    }

    /// The symbolizer, for naming data.
    pub fn symbolizer(&mut self) -> &mut dyn Symbolize {
        &mut *self.sym
    }
}

//! The stack view of an [`Analysis`]: what the stack-based exports (folded stacks, flame graphs,
//! pprof, its CSV) draw, read from the same fold as every other view.

use std::slice;

use lockmeter_format::model::EventKind;

use super::{Analysis, LockAgg, StackAgg};
use crate::symbolize::Frame;

/// The events of one (lock, stack), merged over threads and modes.
#[derive(Debug, Clone, PartialEq)]
pub struct StackSample<'a> {
    /// The lock.
    pub lock: &'a LockAgg,
    /// The symbolized frames, innermost first (`frames[0]` is the lock call site); empty when
    /// the event's stack is not in the profile.
    pub frames: &'a [Frame],
    /// Number of events: contended acquisitions, releases others waited for, or samples.
    pub count: u64,
    /// Total wait (contended) or hold (holding) time, ns; 0 for samples.
    pub ns: u64,
    /// Longest single wait or hold, ns.
    pub ns_max: u64,
}

impl<'a> StackSample<'a> {
    fn of(lock: &'a LockAgg, s: &'a StackAgg) -> Self {
        StackSample { lock, frames: &s.frames, count: s.count, ns: s.ns_total, ns_max: s.ns_max }
    }
}

impl Analysis {
    /// The events of `kind` merged by (lock, stack), heaviest first (then by lock and frames, so
    /// the order is deterministic).
    ///
    /// For [`EventKind::Contended`] a sample is a waiter stack with its contended acquisitions and
    /// wait time; for [`EventKind::Holding`], a holder stack with its releases that others waited
    /// for and their hold time; for [`EventKind::Sampled`], an acquirer stack of `run
    /// --stack-sample`. Profiles without stacks (see [`Analysis::has_stacks`]) give one sample per
    /// (lock, call site) from the records instead: contended acquisitions and wait time, or timed
    /// holds and hold time (and no samples).
    pub fn stack_samples(&self, kind: EventKind) -> Vec<StackSample<'_>> {
        let mut v = Vec::new();
        for l in &self.locks {
            if self.has_stacks {
                let list = match kind {
                    EventKind::Contended => &l.waiters,
                    EventKind::Holding => &l.holders,
                    EventKind::Sampled => &l.sampled,
                    EventKind::FirstUse => continue,
                };
                v.extend(list.iter().map(|s| StackSample::of(l, s)));
                continue;
            }
            for site in &l.sites {
                let s = &site.agg.stats;
                let (count, ns, ns_max) = match kind {
                    EventKind::Contended => (s.contended, s.wait_ns_total, s.wait_ns_max),
                    EventKind::Holding => (s.holds_timed, s.hold_ns_total, s.hold_ns_max),
                    EventKind::Sampled | EventKind::FirstUse => continue,
                };
                if count == 0 && ns == 0 {
                    continue;
                }
                let frames = if site.address == 0 { &[][..] } else { slice::from_ref(&site.frame) };
                v.push(StackSample { lock: l, frames, count, ns, ns_max });
            }
        }
        v.sort_by(|a, b| {
            b.ns.cmp(&a.ns).then(b.count.cmp(&a.count)).then(a.lock.id.cmp(&b.lock.id)).then_with(
                || a.frames.iter().map(|f| f.address).cmp(b.frames.iter().map(|f| f.address)),
            )
        });
        v
    }
}

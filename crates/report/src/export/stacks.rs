//! What the stack exports weigh stacks by. The samples themselves come from the one fold of a
//! profile: [`crate::Analysis::stack_samples`].

use std::str::FromStr;

use lockmeter_format::model::EventKind;

use crate::analysis::StackSample;

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
    pub fn of(self, s: &StackSample<'_>) -> u64 {
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

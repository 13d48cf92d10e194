//! Flame graphs of lock wait by waiter stack (or hold by holder stack), and folded stacks.
//!
//! Folded stacks are the text format of Brendan Gregg's FlameGraph tools, which inferno,
//! speedscope and others read: one line per stack, frames from the root to the leaf separated by
//! `;`, then a space and the weight. Here the root frame is the lock's display name, so each lock
//! is a tower of its own, and the leaf is the lock call site:
//!
//! ```text
//! queue_lock;main;worker;push_job+0x1c 183000000
//! ```
//!
//! Frames are named by [`Symbolize::code`] (`function+0xOFF`, `module+0xOFF`, or the address),
//! and functions inlined at a frame's address (known from debug information) follow it as
//! frames of their own, `name [inlined]`; names longer than 60 characters have their generic
//! arguments elided as in the text report (`catch_unwind<…>`); a `;` inside a name (Rust's `[u8; 8]`) becomes `:` so it cannot split the frame, and a stack
//! the profile lost is the single frame `[unknown stack]`. Lines with the same frames are merged,
//! so the weights of the lines sum exactly to the profile's total of the chosen events.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;

use inferno::flamegraph::{self, color::BasicPalette, color::Palette};
use lockmeter_format::model::Profile;

use super::stacks::Weight;
use super::{ExportError, fmt_ns_short};
use crate::analysis::{Analysis, Filter};
use crate::frames::names_outermost_first;
use crate::symbolize::Symbolize;

/// The frame of a stack the profile did not keep.
pub const UNKNOWN_STACK: &str = "[unknown stack]";

/// One folded stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldedLine {
    /// Frame names from the root (the lock) to the leaf (the lock call site).
    pub frames: Vec<String>,
    /// The weight: ns waited, ns held, or contentions.
    pub weight: u64,
}

impl fmt::Display for FoldedLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.frames.join(";"), self.weight)
    }
}

/// A name made safe for a folded line: no `;` (the frame separator), no line breaks.
fn clean(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            ';' => ':',
            '\n' | '\r' | '\t' => ' ',
            c => c,
        })
        .collect()
}

/// Folded stacks of `profile` weighted by `weight`, sorted by their text; lines of weight 0 are
/// left out. `lock` keeps only locks whose display name contains it (or whose address it is).
pub fn folded(
    profile: &Profile,
    sym: &mut dyn Symbolize,
    weight: Weight,
    lock: Option<&str>,
) -> Vec<FoldedLine> {
    let filter = Filter { lock: lock.map(str::to_owned), function: None };
    folded_from(&Analysis::build(profile, sym, &filter), weight)
}

/// Folded stacks of an analysed profile (its filter applies), like [`folded`].
pub fn folded_from(a: &Analysis, weight: Weight) -> Vec<FoldedLine> {
    let mut merged: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    for s in a.stack_samples(weight.event_kind()) {
        let w = weight.of(&s);
        if w == 0 {
            continue;
        }
        let mut line = Vec::with_capacity(s.frames.len() + 1);
        line.push(clean(&s.lock.display_name()));
        if s.frames.is_empty() {
            line.push(UNKNOWN_STACK.to_owned());
        }
        for f in s.frames.iter().rev() {
            line.extend(names_outermost_first(f).iter().map(|n| clean(n)));
        }
        *merged.entry(line).or_default() += w;
    }
    merged.into_iter().map(|(frames, weight)| FoldedLine { frames, weight }).collect()
}

/// Writes folded stacks, one per line.
pub fn write_folded(lines: &[FoldedLine], w: &mut dyn Write) -> std::io::Result<()> {
    for l in lines {
        writeln!(w, "{l}")?;
    }
    Ok(())
}

/// Options of [`flamegraph()`].
#[derive(Debug, Clone, Default)]
pub struct FlameOptions {
    /// What the widths measure.
    pub weight: Weight,
    /// Keep only locks whose display name contains this.
    pub lock: Option<String>,
    /// The title; by default it says what is drawn.
    pub title: Option<String>,
}

/// The default title for a weight.
pub fn title(weight: Weight) -> &'static str {
    match weight {
        Weight::Wait => "Lock wait time by waiter stack",
        Weight::Hold => "Hold time of contended locks by holder stack",
        Weight::Contentions => "Contended lock acquisitions by waiter stack",
        Weight::Samples => "Sampled lock acquisitions by acquirer stack",
    }
}

/// Draws a flame graph (SVG, with inferno) of the profile's stacks: one tower per lock, the lock
/// call site at the top. Fails with [`ExportError::Empty`] when there is nothing to draw.
pub fn flamegraph(
    profile: &Profile,
    sym: &mut dyn Symbolize,
    opts: &FlameOptions,
    w: &mut dyn Write,
) -> Result<(), ExportError> {
    let filter = Filter { lock: opts.lock.clone(), function: None };
    flamegraph_from(&Analysis::build(profile, sym, &filter), opts, w)
}

/// Draws the flame graph of an analysed profile (its filter applies), like [`flamegraph()`];
/// `opts.lock` only names the filter in the message when nothing matches.
pub fn flamegraph_from(
    a: &Analysis,
    opts: &FlameOptions,
    w: &mut dyn Write,
) -> Result<(), ExportError> {
    let lines = folded_from(a, opts.weight);
    if lines.is_empty() {
        let what = match opts.weight {
            Weight::Hold => "no timed hold that another thread waited for",
            Weight::Samples => "no sampled acquisition (run it with --stack-sample N)",
            _ => "no contended acquisition",
        };
        let lock = match &opts.lock {
            Some(p) => format!(" on a lock matching {p:?}"),
            None => String::new(),
        };
        return Err(ExportError::Empty(format!("nothing to draw: the profile has {what}{lock}")));
    }
    let total: u64 = lines.iter().map(|l| l.weight).sum();
    let total = match opts.weight {
        Weight::Wait => format!("{} waited", fmt_ns_short(total as f64)),
        Weight::Hold => format!("{} held", fmt_ns_short(total as f64)),
        Weight::Contentions => format!("{total} contended acquisitions"),
        Weight::Samples => format!("{total} sampled acquisitions"),
    };
    let h = &a.header;
    let mut subtitle = format!("{} (pid {}): {total}", h.cmdline.join(" "), h.pid);
    if !a.has_stacks {
        subtitle.push_str("; call sites only (the profile has no stacks)");
    }
    if a.dropped.stacks > 0 {
        subtitle.push_str(&format!("; {} stacks or events not recorded", a.dropped.stacks));
    }
    let mut o = flamegraph::Options::default();
    o.title = opts.title.clone().unwrap_or_else(|| title(opts.weight).to_owned());
    o.subtitle = Some(subtitle);
    o.count_name = opts.weight.count_name().to_owned();
    o.name_type = "Frame:".to_owned();
    o.colors = Palette::Basic(match opts.weight {
        Weight::Hold => BasicPalette::Aqua,
        _ => BasicPalette::Hot,
    });
    // Colors from the names, so the same input always gives the same picture.
    o.hash = true;
    let text: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    flamegraph::from_lines(&mut o, text.iter().map(String::as_str), w).map_err(|e| {
        if e.kind() == std::io::ErrorKind::InvalidData {
            ExportError::Render(format!("cannot draw the flame graph: {e}"))
        } else {
            ExportError::Io(e)
        }
    })
}

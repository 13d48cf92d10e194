//! Symbolizing code addresses once each, for every fold and export of a profile.

use std::collections::HashMap;

use crate::symbolize::{Frame, Symbolize};
use crate::text::shorten;

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

    /// The names of the functions at `addr`, outermost first (see [`names_outermost_first`]).
    pub fn names_outermost_first(&mut self, addr: u64) -> Vec<String> {
        names_outermost_first(self.frame(addr))
    }

    /// The symbolizer, for naming data.
    pub fn symbolizer(&mut self) -> &mut dyn Symbolize {
        &mut *self.sym
    }
}

/// The names of the functions at a frame, outermost first: the frame's name, then the functions
/// inlined at its address (from debug information), each as `name [inlined]`. Long generic
/// arguments are elided as in the text report (`catch_unwind<…>`).
pub fn names_outermost_first(f: &Frame) -> Vec<String> {
    let mut v = vec![shorten(&f.to_string())];
    for i in f.inlined.iter().rev() {
        let name = i.function.as_deref().unwrap_or("[unknown]");
        v.push(format!("{} [inlined]", shorten(name)));
    }
    v
}

//! Symbolization: code and data addresses of the (exited) process → names.
//!
//! The profile stores the process's memory map (`/proc/PID/maps` at the end of the run). An
//! address is resolved in three steps:
//!
//! 1. **module**: the file mapping that contains the address; for an address in an anonymous
//!    mapping (`.bss` past the last file page), the module whose `PT_LOAD` segments cover it once
//!    the module's load bias is known;
//! 2. **ELF virtual address**: `address - bias`, where the bias comes from a mapping's file offset
//!    and the `PT_LOAD` program header that contains that offset. This covers PIE and shared
//!    objects (`ET_DYN`, bias = load address) and non-PIE executables (`ET_EXEC`, bias 0) alike;
//! 3. **symbol**: `.symtab`, falling back to `.dynsym` for stripped files; functions
//!    (`STT_FUNC`) for code, objects (`STT_OBJECT`) for data. Names are demangled (Rust, C++).
//!
//! 4. **source**: when DWARF debug information exists, the file:line of the call and the chain of
//!    inlined functions at it, read with [`addr2line`] (gimli). The debug information is looked
//!    for in the module itself, then in a separate debug file found by build-id
//!    (`/usr/lib/debug/.build-id/xx/yyyy.debug`) or by `.gnu_debuglink` (next to the module, in
//!    its `.debug/` folder, under `/usr/lib/debug/<module's folder>/`); split DWARF (`.dwo`,
//!    `.dwp`) is followed by `addr2line`'s loader. Extra global debug folders can be named in
//!    `LOCKMETER_DEBUG_DIRS` (colon-separated, searched before `/usr/lib/debug`).
//!
//! Anything that fails (file gone or unreadable, not ELF, no covering symbol, no debug
//! information) degrades: code becomes `function+0xOFF` without file:line, `module+0xOFF` (file
//! offset) or the raw address, data becomes `None`. Nothing here ever fails the report.
//!
//! Call sites and stack frames are return addresses: the symbol and the line are looked up at
//! `address - 1` (inside the call instruction), offsets are printed from the return address.
//! Each module's files are read once, on first use, and cached.

use std::fmt;

use lockmeter_format::model::Profile;

mod elf;
mod lines;
mod symbols_dir;

pub use elf::{ElfSymbolizer, KERNEL_SYMBOL_PREFIX, default_debug_dirs};
pub use lines::code_at_line;

/// A resolved code address (a call site).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Frame {
    /// The address that was resolved.
    pub address: u64,
    /// Base name of the module (`app`, `libc.so.6`), when the address is in a mapped file.
    pub module: Option<String>,
    /// File offset of the address within the module.
    pub module_offset: u64,
    /// Demangled function name, when a symbol covers the address.
    pub function: Option<String>,
    /// Offset of the address from the start of `function`.
    pub function_offset: u64,
    /// Whether `function` came from debug information alone (no symbol covers the address), so
    /// `function_offset` is not known.
    pub function_offset_unknown: bool,
    /// Source file of the call (in `function`, after inlining is unwound), from debug info.
    pub file: Option<String>,
    /// Line of the call in `file`.
    pub line: Option<u32>,
    /// Functions inlined at the address, innermost first; `function` is the one they were
    /// inlined into. Empty without debug information or inlining.
    pub inlined: Vec<InlinedFrame>,
}

/// A function inlined at an address, with the location inside it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InlinedFrame {
    /// Demangled function name.
    pub function: Option<String>,
    /// Source file.
    pub file: Option<String>,
    /// Line in `file`.
    pub line: Option<u32>,
}

/// `file:line` with the file's base name only (`app.c:42`), `None` without a file.
pub fn short_location(file: Option<&str>, line: Option<u32>) -> Option<String> {
    let f = file?;
    let base = f.rsplit('/').next().unwrap_or(f);
    Some(match line {
        Some(l) => format!("{base}:{l}"),
        None => base.to_owned(),
    })
}

impl Frame {
    /// `file:line` (base name of the file) of the call, when debug information gave one.
    pub fn short_location(&self) -> Option<String> {
        short_location(self.file.as_deref(), self.line)
    }

    /// The function's name without offset, else the [`Display`](fmt::Display) form.
    pub fn function_name(&self) -> String {
        match &self.function {
            Some(f) => f.clone(),
            None => self.to_string(),
        }
    }

    /// Whether the function, or a function inlined at the address, contains `pattern`.
    pub fn matches_function(&self, pattern: &str) -> bool {
        self.function.as_deref().is_some_and(|f| f.contains(pattern))
            || self
                .inlined
                .iter()
                .any(|i| i.function.as_deref().is_some_and(|f| f.contains(pattern)))
            || (self.function.is_none() && self.to_string().contains(pattern))
    }
}

impl fmt::Display for Frame {
    /// `function+0xOFF`, else `module+0xOFF` (file offset), else `0xADDRESS`; `[unknown]` for 0.
    /// A function known from debug information only: `function (module+0xOFF)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.function, &self.module) {
            (Some(func), Some(m)) if self.function_offset_unknown => {
                write!(f, "{func} ({m}+{:#x})", self.module_offset)
            }
            (Some(func), None) if self.function_offset_unknown => f.write_str(func),
            (Some(func), _) => write!(f, "{func}+{:#x}", self.function_offset),
            (None, Some(m)) => write!(f, "{m}+{:#x}", self.module_offset),
            (None, None) if self.address == 0 => f.write_str("[unknown]"),
            (None, None) => write!(f, "{:#x}", self.address),
        }
    }
}

/// Something that turns addresses of the profiled process into names.
pub trait Symbolize {
    /// Resolves a code address. `addr` is a return address: implementations look up `addr - 1`
    /// (the call instruction) but report offsets of `addr` itself.
    fn code(&mut self, addr: u64) -> Frame;
    /// Names the static object that contains `addr` (`my_lock`, `locks+0x28`), or `None` for
    /// heap, stack and unknown memory.
    fn data(&mut self, addr: u64) -> Option<String>;
    /// Caveats about the names given so far, one sentence each (e.g. files changed since the
    /// run, whose addresses were left unnamed). None by default.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Symbolization settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymbolizeOptions {
    /// Read the ELF files of the memory map to name call sites and static locks. When off,
    /// sites print as raw addresses and locks keep only collector-given names.
    pub enabled: bool,
    /// `--symbols DIR`: a folder of debug files or unstripped copies, looked in first for each
    /// module (by build-id, then by name; a file of another build is refused with a note).
    pub symbols_dir: Option<std::path::PathBuf>,
}

impl SymbolizeOptions {
    /// The options of a command's `--no-symbols` and `--symbols DIR` flags; an error (one line,
    /// saying what to do) when `DIR` is not a folder.
    pub fn from_flags(
        no_symbols: bool,
        symbols_dir: Option<&std::path::Path>,
    ) -> Result<SymbolizeOptions, String> {
        if let Some(d) = symbols_dir.filter(|d| !d.is_dir()) {
            return Err(format!(
                "--symbols {}: not a folder; name the folder that holds the debug files \
                 (DIR/.build-id/ab/cdef….debug) or unstripped copies (DIR/NAME)",
                d.display()
            ));
        }
        Ok(SymbolizeOptions { enabled: !no_symbols, symbols_dir: symbols_dir.map(Into::into) })
    }
}

impl Default for SymbolizeOptions {
    fn default() -> Self {
        SymbolizeOptions { enabled: true, symbols_dir: None }
    }
}

/// The symbolizer every view of a profile uses, chosen once by [`Symbolizer::new`] (and by
/// [`crate::open`], which reads the profile too).
#[derive(Debug)]
pub enum Symbolizer {
    /// The ELF files of the profile's memory map; files modified after the run started are
    /// refused ([`ElfSymbolizer::refuse_files_changed_after`]) and reported by
    /// [`Symbolize::notes`].
    Elf(Box<ElfSymbolizer>),
    /// No symbols (`--no-symbols`): [`NoSymbols`].
    Off,
}

impl Symbolizer {
    /// The symbolizer for `profile`: [`Symbolizer::Elf`] over its memory map when
    /// `opts.enabled` (files changed since `header.start_unix_ns` refused, `opts.symbols_dir`
    /// looked in first), else
    /// [`Symbolizer::Off`].
    pub fn new(profile: &Profile, opts: &SymbolizeOptions) -> Symbolizer {
        if opts.enabled {
            let mut elf = ElfSymbolizer::new(&profile.maps)
                .refuse_files_changed_after(profile.header.start_unix_ns);
            if let Some(d) = &opts.symbols_dir {
                elf = elf.with_symbols_dir(d.clone());
            }
            Symbolizer::Elf(Box::new(elf))
        } else {
            Symbolizer::Off
        }
    }
}

impl Symbolize for Symbolizer {
    fn code(&mut self, addr: u64) -> Frame {
        match self {
            Symbolizer::Elf(e) => e.code(addr),
            Symbolizer::Off => NoSymbols.code(addr),
        }
    }
    fn data(&mut self, addr: u64) -> Option<String> {
        match self {
            Symbolizer::Elf(e) => e.data(addr),
            Symbolizer::Off => NoSymbols.data(addr),
        }
    }
    fn notes(&self) -> Vec<String> {
        match self {
            Symbolizer::Elf(e) => e.notes(),
            Symbolizer::Off => Vec::new(),
        }
    }
}

/// A symbolizer that resolves nothing: sites print as raw addresses, locks stay unnamed.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoSymbols;

impl Symbolize for NoSymbols {
    fn code(&mut self, addr: u64) -> Frame {
        Frame { address: addr, ..Frame::default() }
    }
    fn data(&mut self, _addr: u64) -> Option<String> {
        None
    }
}

/// Demangles a Rust (legacy or v0) or C++ symbol name; other names are returned as they are.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        // `{:#}` leaves out the hash suffix.
        return format!("{d:#}");
    }
    if name.starts_with("_Z")
        && let Some(s) = cpp_demangle::Symbol::new(name).ok().and_then(|sym| sym.demangle().ok())
    {
        return s;
    }
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockmeter_format::model::MapEntry;

    #[test]
    fn demangles() {
        assert_eq!(demangle("main"), "main");
        assert_eq!(demangle("_ZN3foo3bar17h0123456789abcdefE"), "foo::bar");
        assert_eq!(demangle("_ZN3foo3barEv"), "foo::bar()");
        assert_eq!(demangle("_RNvCs1234_7mycrate3baz"), "mycrate::baz");
    }

    #[test]
    fn frame_display() {
        let f = Frame { address: 0x1234, ..Frame::default() };
        assert_eq!(f.to_string(), "0x1234");
        assert_eq!(Frame::default().to_string(), "[unknown]");
        let f = Frame { module: Some("libc.so.6".into()), module_offset: 0x99, ..f };
        assert_eq!(f.to_string(), "libc.so.6+0x99");
        let f = Frame { function: Some("hot".into()), function_offset: 0x1f, ..f };
        assert_eq!(f.to_string(), "hot+0x1f");
    }

    #[test]
    fn missing_files_degrade() {
        let maps = vec![
            MapEntry {
                start: 0x1000,
                end: 0x2000,
                offset: 0x3000,
                perms: "r-xp".into(),
                path: "/nonexistent/lockmeter/app".into(),
            },
            MapEntry {
                start: 0x5000,
                end: 0x6000,
                offset: 0,
                perms: "rw-p".into(),
                path: "[heap]".into(),
            },
        ];
        let mut s = ElfSymbolizer::new(&maps);
        assert_eq!(s.code(0x1010).to_string(), "app+0x3010");
        assert_eq!(s.code(0x9999).to_string(), "0x9999");
        assert_eq!(s.data(0x1010), None);
        assert_eq!(s.data(0x5010), None);
    }
}

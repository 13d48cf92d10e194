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

use std::cell::OnceCell;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lockmeter_format::model::{MapEntry, Profile};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SymbolizeOptions {
    /// Read the ELF files of the memory map to name call sites and static locks. When off,
    /// sites print as raw addresses and locks keep only collector-given names.
    pub enabled: bool,
}

impl Default for SymbolizeOptions {
    fn default() -> Self {
        SymbolizeOptions { enabled: true }
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
    /// `opts.enabled` (files changed since `header.start_unix_ns` refused), else
    /// [`Symbolizer::Off`].
    pub fn new(profile: &Profile, opts: &SymbolizeOptions) -> Symbolizer {
        if opts.enabled {
            let elf = ElfSymbolizer::new(&profile.maps)
                .refuse_files_changed_after(profile.header.start_unix_ns);
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

/// One symbol: start (ELF virtual address), size, raw name.
#[derive(Debug, Clone)]
struct Sym {
    addr: u64,
    size: u64,
    name: String,
}

/// A `PT_LOAD` segment.
#[derive(Debug, Clone, Copy)]
struct Seg {
    vaddr: u64,
    memsz: u64,
    offset: u64,
    filesz: u64,
}

/// What we keep of a parsed ELF file.
struct ElfInfo {
    segs: Vec<Seg>,
    /// Functions, sorted by address.
    text: Vec<Sym>,
    /// Data objects, sorted by address.
    data: Vec<Sym>,
    /// Whether the file has its own DWARF (`.debug_info`).
    has_dwarf: bool,
    /// Whether no symbol table names its functions (no `.symtab`, here or in a separate debug
    /// file): its code is shown as `module+0xOFFSET`.
    stripped: bool,
    /// The GNU build-id, by which a debug file can be matched to it later.
    build_id: Option<Vec<u8>>,
    /// `.gnu_debuglink`: the separate debug file's name.
    debuglink: Option<String>,
    /// The file with the module's DWARF (itself or a separate debug file), if any.
    debug_path: Option<PathBuf>,
    /// The DWARF reader, loaded on first use (`None` inside: no debug information found).
    debug: OnceCell<Option<addr2line::Loader>>,
}

impl fmt::Debug for ElfInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ElfInfo")
            .field("segs", &self.segs.len())
            .field("text", &self.text.len())
            .field("data", &self.data.len())
            .field("has_dwarf", &self.has_dwarf)
            .field("debuglink", &self.debuglink)
            .field("debug_path", &self.debug_path)
            .finish()
    }
}

/// The global folders searched for separate debug files by build-id and debuglink:
/// `LOCKMETER_DEBUG_DIRS` (colon-separated), then `/usr/lib/debug`.
pub fn default_debug_dirs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::env::var("LOCKMETER_DEBUG_DIRS")
        .unwrap_or_default()
        .split(':')
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .collect();
    v.push(PathBuf::from("/usr/lib/debug"));
    v
}

/// The contents of `path` when it is an object file with DWARF and (when `build_id` is given and
/// the file has one) the same build-id.
fn usable_debug_file(path: &Path, build_id: Option<&[u8]>) -> Option<Vec<u8>> {
    let bytes = std::fs::read(path).ok()?;
    let file = object::File::parse(&*bytes).ok()?;
    let dwarf = file.section_by_name(".debug_info").is_some_and(|s| s.size() > 0);
    let same = match (build_id, file.build_id().ok().flatten()) {
        (Some(want), Some(got)) => want == got,
        _ => true,
    };
    drop(file);
    (dwarf && same).then_some(bytes)
}

/// A separate debug file for the module at `path`: by build-id
/// (`<dir>/.build-id/xx/yyyy.debug`), else by `.gnu_debuglink` (next to the module, in its
/// `.debug/` folder, under `<dir>/<module's folder>/`), for each global debug folder `<dir>`.
/// Returns its path and contents.
fn separate_debug_file(
    dirs: &[PathBuf],
    path: &Path,
    build_id: Option<&[u8]>,
    debuglink: Option<&str>,
) -> Option<(PathBuf, Vec<u8>)> {
    if let Some(id) = build_id.filter(|id| id.len() >= 2) {
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        for d in dirs {
            let p = d.join(".build-id").join(&hex[..2]).join(format!("{}.debug", &hex[2..]));
            if let Some(bytes) = usable_debug_file(&p, Some(id)) {
                return Some((p, bytes));
            }
        }
    }
    let link = debuglink?;
    let dir = path.parent()?;
    let mut candidates = vec![dir.join(link), dir.join(".debug").join(link)];
    let rel = dir.strip_prefix("/").unwrap_or(dir);
    candidates.extend(dirs.iter().map(|d| d.join(rel).join(link)));
    candidates
        .into_iter()
        .filter(|c| c != path)
        .find_map(|c| usable_debug_file(&c, build_id).map(|b| (c, b)))
}

/// Functions and data objects of `file`, from `.symtab` (or `.dynsym` when `dynamic`), sorted by
/// address. `None` when the table has no usable symbol.
fn symbols(file: &object::File<'_>, dynamic: bool) -> Option<(Vec<Sym>, Vec<Sym>)> {
    let mut text = Vec::new();
    let mut data = Vec::new();
    let syms: Box<dyn Iterator<Item = object::Symbol<'_, '_>>> =
        if dynamic { Box::new(file.dynamic_symbols()) } else { Box::new(file.symbols()) };
    for s in syms {
        if !s.is_definition() || s.address() == 0 {
            continue;
        }
        let Ok(name) = s.name() else { continue };
        if name.is_empty() {
            continue;
        }
        let sym = Sym { addr: s.address(), size: s.size(), name: name.to_owned() };
        match s.kind() {
            SymbolKind::Text => text.push(sym),
            SymbolKind::Data => data.push(sym),
            _ => continue,
        }
    }
    if text.is_empty() && data.is_empty() {
        return None;
    }
    for v in [&mut text, &mut data] {
        v.sort_by(|a, b| a.addr.cmp(&b.addr).then(b.size.cmp(&a.size)));
        v.dedup_by(|a, b| a.addr == b.addr && a.size == b.size);
    }
    Some((text, data))
}

impl ElfInfo {
    /// The DWARF reader for this module (loaded once).
    fn dwarf(&self) -> Option<&addr2line::Loader> {
        self.debug
            .get_or_init(|| self.debug_path.as_ref().and_then(|p| addr2line::Loader::new(p).ok()))
            .as_ref()
    }

    /// Parses the module at `path` (contents `bytes`), finding its debug information: its own
    /// DWARF, else a separate debug file, whose `.symtab` also replaces a stripped module's
    /// `.dynsym`.
    fn parse(path: &Path, bytes: &[u8], debug_dirs: &[PathBuf]) -> Option<ElfInfo> {
        let file = object::File::parse(bytes).ok()?;
        if file.format() != object::BinaryFormat::Elf {
            return None;
        }
        let segs = file
            .segments()
            .map(|s| {
                let (offset, filesz) = s.file_range();
                Seg { vaddr: s.address(), memsz: s.size(), offset, filesz }
            })
            .collect();
        // `.symtab` when present (it is a superset of `.dynsym`); `.dynsym` for stripped files.
        let own = symbols(&file, false);
        let has_symtab = own.is_some();
        let (mut text, mut data) = own.or_else(|| symbols(&file, true)).unwrap_or_default();
        let has_dwarf = file.section_by_name(".debug_info").is_some_and(|s| s.size() > 0);
        let build_id = file.build_id().ok().flatten().map(<[u8]>::to_vec);
        let debuglink = file
            .gnu_debuglink()
            .ok()
            .flatten()
            .map(|(name, _crc)| String::from_utf8_lossy(name).into_owned());
        let mut stripped = !has_symtab;
        let debug_path = if has_dwarf {
            Some(path.to_path_buf())
        } else {
            separate_debug_file(debug_dirs, path, build_id.as_deref(), debuglink.as_deref()).map(
                |(p, bytes)| {
                    if !has_symtab {
                        if let Some((t, d)) =
                            object::File::parse(&*bytes).ok().and_then(|f| symbols(&f, false))
                        {
                            (text, data) = (t, d);
                            stripped = false;
                        }
                    }
                    p
                },
            )
        };
        Some(ElfInfo {
            segs,
            text,
            data,
            has_dwarf,
            stripped,
            build_id,
            debuglink,
            debug_path,
            debug: OnceCell::new(),
        })
    }

    /// ELF virtual address of a file offset, via the `PT_LOAD` segment containing it.
    fn offset_to_vaddr(&self, off: u64) -> Option<u64> {
        self.segs
            .iter()
            .find(|s| off >= s.offset && off < s.offset + s.filesz.max(1))
            .map(|s| s.vaddr + (off - s.offset))
    }

    /// Whether a virtual address lies in a loaded segment (including `.bss`).
    fn covers(&self, vaddr: u64) -> bool {
        self.segs.iter().any(|s| vaddr >= s.vaddr && vaddr < s.vaddr + s.memsz)
    }

    /// The symbol of `syms` covering `vaddr`. Sized symbols must contain it; a zero-sized symbol
    /// matches only its own address unless `loose`, where the nearest preceding one is taken.
    fn lookup(syms: &[Sym], vaddr: u64, loose: bool) -> Option<&Sym> {
        let end = syms.partition_point(|s| s.addr <= vaddr);
        // Look back a little for a sized symbol that contains `vaddr` (symbols may nest).
        for s in syms[..end].iter().rev().take(16) {
            if vaddr < s.addr.saturating_add(s.size) || s.addr == vaddr {
                return Some(s);
            }
        }
        let s = syms[..end].last()?;
        (loose && s.size == 0).then_some(s)
    }
}

/// A module (mapped file) of the process, with its load bias once known.
#[derive(Debug)]
struct Module {
    path: String,
    name: String,
    /// Virtual address at run time minus ELF virtual address.
    bias: Option<u64>,
    elf: Option<Arc<ElfInfo>>,
    /// Whether `load` ran (files are read on first use).
    loaded: bool,
}

/// Symbolizes from ELF symbol tables, reading the files named in the memory map.
///
/// Parsed files are cached per path (also across profiles when the symbolizer is reused).
#[derive(Debug)]
pub struct ElfSymbolizer {
    maps: Vec<MapEntry>,
    /// Module index per entry of `maps` (`None` for anonymous and special mappings).
    map_module: Vec<Option<usize>>,
    modules: Vec<Module>,
    cache: HashMap<String, Option<Arc<ElfInfo>>>,
    /// Global folders of separate debug files.
    debug_dirs: Vec<PathBuf>,
    /// Files modified after this time (ns since the Unix epoch) are not read: they are not the
    /// files that were mapped (0: read any file).
    not_after_ns: u64,
    /// Base names of the modules refused for that reason.
    refused: Vec<String>,
}

/// Whether the file at `path` was modified after `unix_ns` (ns since the Unix epoch).
fn modified_after(path: &str, unix_ns: u64) -> bool {
    let modified = std::fs::metadata(path).and_then(|md| md.modified()).ok();
    let ns = modified
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    ns > u128::from(unix_ns)
}

/// Whether a maps path names a file (not `[heap]`, `[stack]`, `[vdso]`, anonymous, ...).
fn is_file_path(p: &str) -> bool {
    p.starts_with('/')
}

impl ElfSymbolizer {
    /// A symbolizer for a process with this memory map. Files are read lazily.
    pub fn new(maps: &[MapEntry]) -> Self {
        let mut maps = maps.to_vec();
        maps.sort_by_key(|m| m.start);
        let mut modules: Vec<Module> = Vec::new();
        let mut map_module = Vec::with_capacity(maps.len());
        for m in &maps {
            if !is_file_path(&m.path) {
                map_module.push(None);
                continue;
            }
            let idx = match modules.iter().position(|x| x.path == m.path) {
                Some(i) => i,
                None => {
                    let name = m.path.rsplit('/').next().unwrap_or(&m.path);
                    let name = name.strip_suffix(" (deleted)").unwrap_or(name).to_owned();
                    modules.push(Module {
                        path: m.path.clone(),
                        name,
                        bias: None,
                        elf: None,
                        loaded: false,
                    });
                    modules.len() - 1
                }
            };
            map_module.push(Some(idx));
        }
        ElfSymbolizer {
            maps,
            map_module,
            modules,
            cache: HashMap::new(),
            debug_dirs: default_debug_dirs(),
            not_after_ns: 0,
            refused: Vec::new(),
        }
    }

    /// Refuses files modified after `unix_ns` (the start of the run): a program rebuilt or
    /// replaced between the run and the report would give its new names to the old addresses.
    /// Such modules are shown as `module+0xOFF`, and [`ElfSymbolizer::changed_since`] lists them.
    pub fn refuse_files_changed_after(mut self, unix_ns: u64) -> Self {
        self.not_after_ns = unix_ns;
        self
    }

    /// A symbolizer that looks for separate debug files (by build-id and debuglink) in `dirs`
    /// instead of [`default_debug_dirs`].
    pub fn with_debug_dirs(maps: &[MapEntry], dirs: Vec<PathBuf>) -> Self {
        ElfSymbolizer { debug_dirs: dirs, ..Self::new(maps) }
    }

    /// Base names of the modules read so far whose file was modified after `unix_ns` (ns since
    /// the Unix epoch, e.g. the start of the run): their names may not match the run.
    pub fn changed_since(&self, unix_ns: u64) -> Vec<String> {
        if unix_ns == 0 {
            return Vec::new();
        }
        let mut v: Vec<String> = self
            .modules
            .iter()
            .filter(|m| m.loaded && m.elf.is_some())
            .filter(|m| modified_after(&m.path, unix_ns))
            .map(|m| m.name.clone())
            .chain(self.refused.iter().cloned())
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// One sentence per stripped module of the program (not the C library's) read so far: its
    /// code is shown as `module+0xOFFSET`, and where a debug file with its build-id would name it.
    fn stripped_notes(&self) -> Vec<String> {
        let mut seen = std::collections::HashSet::new();
        let mut v = Vec::new();
        for m in &self.modules {
            let Some(elf) = m.elf.as_ref().filter(|e| e.stripped) else { continue };
            if lockmeter_core::stacks::is_system_library(&m.name) || !seen.insert(&m.path) {
                continue;
            }
            let how = match elf.build_id.as_deref().filter(|id| id.len() >= 2) {
                Some(id) => {
                    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
                    format!(
                        "build-id {hex}; to name them, put its debug file at \
                         DIR/.build-id/{}/{}.debug and run the report again with \
                         LOCKMETER_DEBUG_DIRS=DIR",
                        &hex[..2],
                        &hex[2..]
                    )
                }
                None => "it has no build-id; to name them, rebuild it with symbols".to_owned(),
            };
            v.push(format!(
                "{} is stripped: its code is shown as {}+0xOFFSET (file offsets) ({how})",
                m.name, m.name
            ));
        }
        v
    }

    /// Parses module `i` (through the cache) and computes its load bias.
    fn load(&mut self, i: usize) {
        if std::mem::replace(&mut self.modules[i].loaded, true) {
            return;
        }
        let path = self.modules[i].path.clone();
        let dirs = &self.debug_dirs;
        // A file deleted after it was mapped may have been replaced: do not trust the path.
        let changed = self.not_after_ns != 0 && modified_after(&path, self.not_after_ns);
        if changed {
            self.refused.push(self.modules[i].name.clone());
        }
        let elf = if path.ends_with(" (deleted)") || changed {
            None
        } else {
            self.cache
                .entry(path.clone())
                .or_insert_with(|| {
                    std::fs::read(&path)
                        .ok()
                        .and_then(|b| ElfInfo::parse(Path::new(&path), &b, dirs))
                        .map(Arc::new)
                })
                .clone()
        };
        let Some(elf) = elf else { return };
        let bias = self
            .maps
            .iter()
            .zip(&self.map_module)
            .filter(|(_, mm)| **mm == Some(i))
            .find_map(|(m, _)| elf.offset_to_vaddr(m.offset).map(|v| m.start.wrapping_sub(v)));
        // A file that no longer matches its mappings (no segment at a mapped offset) is ignored.
        if bias.is_some() {
            self.modules[i].bias = bias;
            self.modules[i].elf = Some(elf);
        }
    }

    /// The module containing `addr` and the mapping it is in, loading the module's file. An
    /// address in an anonymous mapping (`.bss` beyond the file's last page) belongs to the
    /// module mapped just below it when that module's segments cover it.
    fn module_of(&mut self, addr: u64) -> Option<(usize, Option<MapEntry>)> {
        let i = self.maps.partition_point(|m| m.start <= addr);
        let m = self.maps.get(i.checked_sub(1)?)?;
        if addr >= m.end {
            return None;
        }
        if let Some(mi) = self.map_module[i - 1] {
            let m = m.clone();
            self.load(mi);
            return Some((mi, Some(m)));
        }
        if !m.path.is_empty() {
            // [heap], [stack], [vdso], ...
            return None;
        }
        let mi = self.map_module[..i - 1].iter().rev().find_map(|x| *x)?;
        self.load(mi);
        let md = &self.modules[mi];
        let (bias, elf) = (md.bias?, md.elf.as_ref()?);
        elf.covers(addr.wrapping_sub(bias)).then_some((mi, None))
    }

    /// The ELF file of a module, and the ELF virtual address of `addr` in it.
    fn resolve(&self, mi: usize, addr: u64) -> Option<(&ElfInfo, u64)> {
        let md = &self.modules[mi];
        Some((md.elf.as_deref()?, addr.wrapping_sub(md.bias?)))
    }
}

/// The prefix of the map entries in which the kernel collector records the kernel functions its
/// stacks went through (`[kernel] NAME`, one entry per function, from `/proc/kallsyms` at the
/// time of the run), so that kernel frames are named without the machine that recorded them.
pub const KERNEL_SYMBOL_PREFIX: &str = "[kernel] ";

/// A kernel function recorded in the profile's map, if one covers `addr`.
fn kernel_frame(maps: &[MapEntry], addr: u64) -> Option<Frame> {
    let i = maps.partition_point(|m| m.start <= addr);
    let m = maps.get(i.checked_sub(1)?)?;
    let name = m.path.strip_prefix(KERNEL_SYMBOL_PREFIX)?;
    // A return address may be one past the end of a function that ends in a call.
    (addr <= m.end).then(|| Frame {
        address: addr,
        module: Some("kernel".to_owned()),
        module_offset: addr - m.start,
        function: Some(name.to_owned()),
        function_offset: addr - m.start,
        ..Frame::default()
    })
}

impl Symbolize for ElfSymbolizer {
    fn code(&mut self, addr: u64) -> Frame {
        let mut frame = Frame { address: addr, ..Frame::default() };
        if addr == 0 {
            return frame;
        }
        if let Some(k) = kernel_frame(&self.maps, addr) {
            return k;
        }
        let Some((mi, map)) = self.module_of(addr) else { return frame };
        frame.module = Some(self.modules[mi].name.clone());
        if let Some(m) = &map {
            frame.module_offset = addr - m.start + m.offset;
        }
        if let Some((elf, vaddr)) = self.resolve(mi, addr) {
            if map.is_none() {
                // Recover the file offset from the segment.
                if let Some(s) =
                    elf.segs.iter().find(|s| vaddr >= s.vaddr && vaddr < s.vaddr + s.memsz)
                {
                    frame.module_offset = vaddr - s.vaddr + s.offset;
                }
            }
            // A return address may be one past the end of a function that ends in a call.
            if let Some(s) = ElfInfo::lookup(&elf.text, vaddr.wrapping_sub(1), true) {
                frame.function = Some(demangle(&s.name));
                frame.function_offset = vaddr - s.addr;
            }
            if let Some(dwarf) = elf.dwarf() {
                source_frames(dwarf, vaddr.wrapping_sub(1), &mut frame);
            }
        }
        frame
    }

    fn data(&mut self, addr: u64) -> Option<String> {
        let (mi, _) = self.module_of(addr)?;
        let (elf, vaddr) = self.resolve(mi, addr)?;
        let s = ElfInfo::lookup(&elf.data, vaddr, false)?;
        let name = demangle(&s.name);
        Some(if vaddr == s.addr { name } else { format!("{name}+{:#x}", vaddr - s.addr) })
    }

    /// The files read (or refused) so far that were modified after the time given to
    /// [`ElfSymbolizer::refuse_files_changed_after`]: none when it was not called.
    fn notes(&self) -> Vec<String> {
        let mut notes = self.stripped_notes();
        let changed = self.changed_since(self.not_after_ns);
        if changed.is_empty() {
            return notes;
        }
        notes.push(format!(
            "{} changed after the run started (rebuilt or replaced?): its addresses are shown as \
             module+offset, not with names that may be wrong",
            changed.join(", ")
        ));
        notes
    }
}

/// Fills `frame`'s file, line and inlined chain from DWARF at `probe` (an ELF virtual address
/// inside the call instruction). The outermost DWARF frame is the function itself: its location
/// becomes the frame's; the others are the inlined functions, innermost first.
fn source_frames(dwarf: &addr2line::Loader, probe: u64, frame: &mut Frame) {
    let Ok(mut iter) = dwarf.find_frames(probe) else { return };
    let mut found: Vec<InlinedFrame> = Vec::new();
    while let Ok(Some(f)) = iter.next() {
        let function = f.function.as_ref().and_then(|n| n.raw_name().ok()).map(|n| demangle(&n));
        let (file, line) = match &f.location {
            Some(l) => (l.file.map(str::to_owned), l.line),
            None => (None, None),
        };
        found.push(InlinedFrame { function, file, line });
        if found.len() >= 64 {
            break;
        }
    }
    let Some(outer) = found.pop() else { return };
    frame.file = outer.file;
    frame.line = outer.line;
    if frame.function.is_none() && outer.function.is_some() {
        frame.function = outer.function;
        frame.function_offset_unknown = true;
    }
    frame.inlined = found;
}

/// Demangles a Rust (legacy or v0) or C++ symbol name; other names are returned as they are.
pub fn demangle(name: &str) -> String {
    if let Ok(d) = rustc_demangle::try_demangle(name) {
        // `{:#}` leaves out the hash suffix.
        return format!("{d:#}");
    }
    if name.starts_with("_Z") {
        if let Some(s) = cpp_demangle::Symbol::new(name).ok().and_then(|sym| sym.demangle().ok()) {
            return s;
        }
    }
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

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

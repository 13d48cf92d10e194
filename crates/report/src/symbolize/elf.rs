//! The ELF symbolizer: modules of the profile's memory map, their symbols and load biases, debug
//! information found in the module or by build-id / debug link, and the kernel's symbols (see
//! the steps in [`super`]).

use std::cell::OnceCell;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use lockmeter_format::model::MapEntry;
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};

use super::symbols_dir::{self, separate_debug_file};
use super::{Frame, InlinedFrame, Symbolize, demangle};

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
    ///
    /// With `symbols_in` (`--symbols DIR` and the module's base name), a matching file in `DIR`
    /// comes first, for the symbol table or the DWARF the module lacks; the candidates it
    /// refuses are added to `notes`.
    fn parse(
        path: &Path,
        bytes: &[u8],
        debug_dirs: &[PathBuf],
        symbols_in: Option<(&Path, &str)>,
        notes: &mut Vec<String>,
    ) -> Option<ElfInfo> {
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
        let mut dir_dwarf = None;
        if let Some((dir, name)) = symbols_in.filter(|_| !has_symtab || !has_dwarf) {
            let found = symbols_dir::find(dir, name, build_id.as_deref());
            notes.extend(found.refused);
            if let Some((p, b)) = found.file {
                let f = object::File::parse(&*b).ok();
                if !has_symtab && let Some((t, d)) = f.as_ref().and_then(|f| symbols(f, false)) {
                    (text, data) = (t, d);
                    stripped = false;
                }
                if f.is_some_and(|f| f.section_by_name(".debug_info").is_some_and(|s| s.size() > 0))
                {
                    dir_dwarf = Some(p);
                }
            }
        }
        let debug_path = if has_dwarf {
            Some(path.to_path_buf())
        } else if dir_dwarf.is_some() {
            dir_dwarf
        } else {
            separate_debug_file(debug_dirs, path, build_id.as_deref(), debuglink.as_deref()).map(
                |(p, bytes)| {
                    if !has_symtab
                        && let Some((t, d)) =
                            object::File::parse(&*bytes).ok().and_then(|f| symbols(&f, false))
                    {
                        (text, data) = (t, d);
                        stripped = false;
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
    /// `--symbols DIR`: looked in first for a module's symbols and debug information.
    symbols_dir: Option<PathBuf>,
    /// Files of `symbols_dir` refused (another build), one sentence each.
    symbols_refused: Vec<String>,
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
            symbols_dir: None,
            symbols_refused: Vec::new(),
        }
    }

    /// Refuses files modified after `unix_ns` (the start of the run): a program rebuilt or
    /// replaced between the run and the report would give its new names to the old addresses.
    /// Such modules are shown as `module+0xOFF`, and [`ElfSymbolizer::changed_since`] lists them.
    pub fn refuse_files_changed_after(mut self, unix_ns: u64) -> Self {
        self.not_after_ns = unix_ns;
        self
    }

    /// Looks for each module's symbols and debug information in `dir` first (`--symbols DIR`):
    /// by build-id (`DIR/.build-id/ab/cdef….debug`), then by name (`DIR/NAME`,
    /// `DIR/NAME.debug`); a file whose build-id is not the module's is refused with a note.
    pub fn with_symbols_dir(mut self, dir: PathBuf) -> Self {
        self.symbols_dir = Some(dir);
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
                         DIR/.build-id/{}/{}.debug (or an unstripped copy at DIR/{}) and \
                         run the report again with --symbols DIR",
                        &hex[..2],
                        &hex[2..],
                        m.name
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
        let name = self.modules[i].name.clone();
        let dirs = &self.debug_dirs;
        let symbols = self.symbols_dir.as_deref().map(|d| (d, name.as_str()));
        let notes = &mut self.symbols_refused;
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
                        .and_then(|b| ElfInfo::parse(Path::new(&path), &b, dirs, symbols, notes))
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
        notes.extend(self.symbols_refused.iter().cloned());
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

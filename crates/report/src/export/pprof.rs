//! pprof export: the profile's contended acquisitions as a pprof protobuf, shaped like Go's mutex
//! profile, so `go tool pprof`, Pyroscope, Parca and speedscope open it; and the same samples as
//! CSV.
//!
//! The protobuf follows `profile.proto` of github.com/google/pprof: the message types below are
//! written by hand with `prost`'s derive (no `protoc`), and the file is gzipped as pprof expects.
//!
//! * sample types `contentions/count` and `delay/nanoseconds` (Go's mutex profile), period type
//!   `contentions/count`, period 1;
//! * one sample per (lock, waiter stack), merged over threads and modes: values
//!   `[contended acquisitions, wait ns]`, locations innermost first (the lock call site first),
//!   and labels `lock=<display name>` and `process=<name>[<pid>]` (Go's profile has stacks
//!   only; `-tagfocus lock=...` or `process=...` filters);
//! * a location per return address, with a line naming its function (the symbol, or
//!   `module+0xOFF` / the address when there is none) with its source file and line when debug
//!   information gave them, preceded by the functions inlined there (innermost first, as pprof
//!   wants); a mapping per executable file mapping of each process image, in one table (a run of
//!   several processes: each location points into its own process's mappings), marked as having
//!   functions so pprof does not try to symbolize again;
//! * `time_nanos` and `duration_nanos` from the profile header.

use std::collections::HashMap;
use std::io::{Read, Write};

use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use lockmeter_format::model::{EventKind, Profile};
use prost::Message;

use super::ExportError;
use crate::analysis::Analysis;
use crate::symbolize::Symbolize;

/// `perftools.profiles.Profile`.
#[derive(Clone, PartialEq, Message)]
pub struct PprofProfile {
    /// What each value of a sample measures.
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    /// The samples.
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    /// Mapped binaries.
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    /// Code locations (one per address).
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    /// Functions.
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// Every string of the profile; index 0 is `""`.
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// Regex of frames to drop (string index).
    #[prost(int64, tag = "7")]
    pub drop_frames: i64,
    /// Regex of frames to keep (string index).
    #[prost(int64, tag = "8")]
    pub keep_frames: i64,
    /// When the profile was collected, ns since the Unix epoch.
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    /// How long it was collected, ns.
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    /// What one sample stands for.
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    /// Events per sample.
    #[prost(int64, tag = "12")]
    pub period: i64,
    /// Free-form comments (string indices).
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// The sample type shown by default (string index; 0: the last one).
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// `ValueType`: a type and a unit (string indices).
#[derive(Clone, PartialEq, Message)]
pub struct ValueType {
    /// e.g. `contentions`.
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    /// e.g. `count`.
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// `Sample`.
#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    /// Location ids, innermost first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// One value per sample type.
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    /// Labels.
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// `Label`: a string (`str`) or numeric (`num`) tag.
#[derive(Clone, PartialEq, Message)]
pub struct Label {
    /// Key (string index).
    #[prost(int64, tag = "1")]
    pub key: i64,
    /// String value (string index).
    #[prost(int64, tag = "2")]
    pub str: i64,
    /// Numeric value.
    #[prost(int64, tag = "3")]
    pub num: i64,
    /// Unit of `num` (string index).
    #[prost(int64, tag = "4")]
    pub num_unit: i64,
}

/// `Mapping`: a mapped binary.
#[derive(Clone, PartialEq, Message)]
pub struct Mapping {
    /// Unique nonzero id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Start address.
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    /// End address (exclusive).
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    /// File offset of `memory_start`.
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    /// Path (string index).
    #[prost(int64, tag = "5")]
    pub filename: i64,
    /// Build id (string index).
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    /// Locations in it have function names.
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    /// Locations in it have file names.
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    /// Locations in it have line numbers.
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    /// Locations in it have inlined frames.
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

/// `Location`: a code address and what it resolves to.
#[derive(Clone, PartialEq, Message)]
pub struct Location {
    /// Unique nonzero id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// `Mapping::id`, 0 when unknown.
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    /// The address.
    #[prost(uint64, tag = "3")]
    pub address: u64,
    /// Functions at the address, innermost (inlined) first.
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
    /// Whether the location is a fold of several.
    #[prost(bool, tag = "5")]
    pub is_folded: bool,
}

/// `Line`: a function and a source line.
#[derive(Clone, PartialEq, Message)]
pub struct Line {
    /// `Function::id`.
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    /// Source line, 0 when unknown.
    #[prost(int64, tag = "2")]
    pub line: i64,
    /// Source column, 0 when unknown.
    #[prost(int64, tag = "3")]
    pub column: i64,
}

/// `Function`.
#[derive(Clone, PartialEq, Message)]
pub struct Function {
    /// Unique nonzero id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Name (string index).
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// Mangled name (string index).
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    /// Source file (string index).
    #[prost(int64, tag = "4")]
    pub filename: i64,
    /// First line of the function.
    #[prost(int64, tag = "5")]
    pub start_line: i64,
}

impl PprofProfile {
    /// The string at index `i` of the string table (`""` when out of range).
    pub fn string(&self, i: i64) -> &str {
        usize::try_from(i).ok().and_then(|i| self.string_table.get(i)).map_or("", String::as_str)
    }
}

/// The string table under construction.
#[derive(Debug)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Self {
        Strings { table: vec![String::new()], index: HashMap::from([(String::new(), 0)]) }
    }

    fn get(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_owned());
        self.index.insert(s.to_owned(), i);
        i
    }
}

/// A mapping's address range and its `Mapping::id`: (start, end, id).
type MappedRange = (u64, u64, u64);

/// The pprof function name of an unknown stack.
pub const UNKNOWN_STACK: &str = "[unknown stack]";

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Builds the pprof profile of the contended acquisitions of `profile`.
pub fn build(profile: &Profile, sym: &mut dyn Symbolize) -> PprofProfile {
    from_analysis(&Analysis::with_symbolizer(profile, sym))
}

/// Builds the pprof profile of the contended acquisitions of an analysed profile (its filter
/// applies).
pub fn from_analysis(a: &Analysis) -> PprofProfile {
    let mut st = Strings::new();

    let contentions = st.get("contentions");
    let count = st.get("count");
    let delay = st.get("delay");
    let nanoseconds = st.get("nanoseconds");
    let lock_key = st.get("lock");

    // One mapping table: each process image's executable file mappings, by start address;
    // a location points into the mappings of its lock's image (images' addresses overlap).
    let mut images: HashMap<(u32, u32), Vec<MappedRange>> = HashMap::new();
    let mut mapping: Vec<Mapping> = Vec::new();
    for im in &a.maps {
        let mut maps: Vec<_> = im
            .maps
            .iter()
            .filter(|m| m.perms.contains('x') && m.path.starts_with('/') && m.end > m.start)
            .collect();
        maps.sort_by_key(|m| m.start);
        let ranges = images.entry((im.pid, im.image_seq)).or_default();
        for m in maps {
            let id = mapping.len() as u64 + 1;
            mapping.push(Mapping {
                id,
                memory_start: m.start,
                memory_limit: m.end,
                file_offset: m.offset,
                filename: st.get(m.path.strip_suffix(" (deleted)").unwrap_or(&m.path)),
                has_functions: true,
                ..Mapping::default()
            });
            ranges.push((m.start, m.end, id));
        }
    }
    let mapping_of = |image: (u32, u32), addr: u64| -> u64 {
        let Some(ranges) = images.get(&image) else { return 0 };
        let i = ranges.partition_point(|r| r.0 <= addr);
        match i.checked_sub(1).and_then(|i| ranges.get(i)) {
            Some(&(_, end, id)) if addr < end => id,
            _ => 0,
        }
    };
    let process_key = st.get("process");
    let process_label: HashMap<u32, String> =
        a.processes.iter().map(|p| (p.pid, p.label())).collect();

    let mut function: Vec<Function> = Vec::new();
    let mut function_ids: HashMap<(String, String), u64> = HashMap::new();
    let mut function_of = |name: &str, file: &str, st: &mut Strings| -> u64 {
        *function_ids.entry((name.to_owned(), file.to_owned())).or_insert_with(|| {
            let n = st.get(name);
            function.push(Function {
                id: function.len() as u64 + 1,
                name: n,
                system_name: n,
                filename: st.get(file),
                ..Function::default()
            });
            function.len() as u64
        })
    };
    let mut location: Vec<Location> = Vec::new();
    // By (pid, image, address): the same address in two images is two locations.
    let mut location_ids: HashMap<(u32, u32, u64), u64> = HashMap::new();
    let (mut files, mut lines, mut inlines) = (false, false, false);

    let mut sample = Vec::new();
    for s in a.stack_samples(EventKind::Contended) {
        if s.count == 0 && s.ns == 0 {
            continue;
        }
        let mut ids = Vec::with_capacity(s.frames.len().max(1));
        if s.frames.is_empty() {
            let id = *location_ids.entry((0, 0, 0)).or_insert_with(|| {
                let f = function_of(UNKNOWN_STACK, "", &mut st);
                location.push(Location {
                    id: location.len() as u64 + 1,
                    line: vec![Line { function_id: f, ..Line::default() }],
                    ..Location::default()
                });
                location.len() as u64
            });
            ids.push(id);
        }
        let image = (s.lock.pid, s.lock.image_seq);
        for f in s.frames {
            let addr = f.address;
            if let Some(&id) = location_ids.get(&(image.0, image.1, addr)) {
                ids.push(id);
                continue;
            }
            // Inlined functions first (innermost first), then the function they are in.
            let mut line = Vec::with_capacity(f.inlined.len() + 1);
            for i in &f.inlined {
                let name = i.function.as_deref().unwrap_or("[unknown]");
                let fid = function_of(name, i.file.as_deref().unwrap_or(""), &mut st);
                line.push(Line { function_id: fid, line: i.line.map_or(0, i64::from), column: 0 });
            }
            let name = f.function.clone().unwrap_or_else(|| f.to_string());
            let fid = function_of(&name, f.file.as_deref().unwrap_or(""), &mut st);
            line.push(Line { function_id: fid, line: f.line.map_or(0, i64::from), column: 0 });
            files |= f.file.is_some();
            lines |= f.line.is_some();
            inlines |= !f.inlined.is_empty();
            let id = location.len() as u64 + 1;
            location.push(Location {
                id,
                mapping_id: mapping_of(image, addr),
                address: addr,
                line,
                is_folded: false,
            });
            location_ids.insert((image.0, image.1, addr), id);
            ids.push(id);
        }
        let lock = st.get(&s.lock.display_name());
        let mut label = vec![Label { key: lock_key, str: lock, ..Label::default() }];
        if let Some(p) = process_label.get(&s.lock.pid) {
            label.push(Label { key: process_key, str: st.get(p), ..Label::default() });
        }
        sample.push(Sample { location_id: ids, value: vec![to_i64(s.count), to_i64(s.ns)], label });
    }
    for m in &mut mapping {
        m.has_filenames = files;
        m.has_line_numbers = lines;
        m.has_inline_frames = inlines;
    }

    let h = &a.header;
    let processes = match a.processes.len() {
        0 | 1 => String::new(),
        n => format!(", {n} processes"),
    };
    let comment = st.get(&format!(
        "lockmeter {}: contended pthread lock acquisitions of {} (pid {}{processes})",
        h.lockmeter_version,
        h.cmdline.join(" "),
        h.pid
    ));
    PprofProfile {
        sample_type: vec![
            ValueType { r#type: contentions, unit: count },
            ValueType { r#type: delay, unit: nanoseconds },
        ],
        sample,
        mapping,
        location,
        function,
        time_nanos: to_i64(h.start_unix_ns),
        duration_nanos: to_i64(h.duration_ns),
        period_type: Some(ValueType { r#type: contentions, unit: count }),
        period: 1,
        comment: vec![comment],
        string_table: st.table,
        ..PprofProfile::default()
    }
}

/// Writes `p` gzipped (what `go tool pprof` and the profile viewers read) or raw.
pub fn write(p: &PprofProfile, gzip: bool, w: &mut dyn Write) -> std::io::Result<()> {
    let bytes = p.encode_to_vec();
    if gzip {
        let mut gz = GzEncoder::new(w, Compression::default());
        gz.write_all(&bytes)?;
        gz.finish()?;
    } else {
        w.write_all(&bytes)?;
    }
    Ok(())
}

/// Reads a pprof profile, gzipped or raw.
pub fn read(bytes: &[u8]) -> Result<PprofProfile, ExportError> {
    let raw;
    let data = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut v = Vec::new();
        GzDecoder::new(bytes).read_to_end(&mut v)?;
        raw = v;
        &raw[..]
    } else {
        bytes
    };
    PprofProfile::decode(data).map_err(|e| ExportError::Render(format!("not a pprof profile: {e}")))
}

/// Writes the samples of [`build`] as CSV: one row per (lock, waiter stack), heaviest first, with
/// columns `lock`, `site` (the lock call site), `site_location` (its `file:line` when debug
/// information gave one), `stack` (every frame, innermost first, joined by `;`), `contentions`,
/// `wait_ns`, `wait_ns_max`.
pub fn write_csv(
    profile: &Profile,
    sym: &mut dyn Symbolize,
    w: &mut dyn Write,
) -> Result<(), ExportError> {
    write_csv_from(&Analysis::with_symbolizer(profile, sym), w)
}

/// Writes the CSV of [`write_csv`] from an analysed profile (or a merged run).
pub fn write_csv_from(a: &Analysis, w: &mut dyn Write) -> Result<(), ExportError> {
    let mut out = csv::Writer::from_writer(w);
    let csv_err = |e: csv::Error| match e.into_kind() {
        csv::ErrorKind::Io(e) => ExportError::Io(e),
        k => ExportError::Render(format!("cannot write CSV: {k:?}")),
    };
    out.write_record([
        "lock",
        "site",
        "site_location",
        "stack",
        "contentions",
        "wait_ns",
        "wait_ns_max",
    ])
    .map_err(csv_err)?;
    for s in a.stack_samples(EventKind::Contended) {
        let stack: Vec<String> = s.frames.iter().map(|f| f.to_string()).collect();
        let site = stack.first().cloned().unwrap_or_else(|| UNKNOWN_STACK.to_owned());
        let stack = if stack.is_empty() { UNKNOWN_STACK.to_owned() } else { stack.join(";") };
        let location = match s.frames.first() {
            Some(f) => f.short_location().unwrap_or_default(),
            None => String::new(),
        };
        out.write_record([
            s.lock.display_name(),
            site,
            location,
            stack,
            s.count.to_string(),
            s.ns.to_string(),
            s.ns_max.to_string(),
        ])
        .map_err(csv_err)?;
    }
    out.flush()?;
    Ok(())
}

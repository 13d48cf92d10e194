//! The reader: [`read_profile`] and [`read_profile_file`]. Never panics on any input, and
//! never allocates more than a small multiple of the input's length.

#![deny(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects
)]

use core::fmt;
use std::io;
use std::path::{Path, PathBuf};

use lockmeter_core::hist::BUCKETS;

use crate::layout::{
    self, END_PAYLOAD_LEN, FILE_HEADER_LEN, FRAME_LEN, Fnv64, MAGIC, MAX_PAYLOAD, MAX_STRING,
    VERSION, flags, tag,
};
use crate::model::{
    ClockInfo, CpuStats, Dropped, Event, EventKind, Header, LockClass, LockInfo, LockKind,
    LockSleep, MapEntry, Mode, Overhead, Profile, Record, Stack, Stats, ThreadInfo,
};

/// Why bytes are not a readable profile, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormatError {
    /// Byte offset in the input: the start of the offending record, or where the input ends
    /// for [`FormatErrorKind::Truncated`].
    pub offset: u64,
    /// What is wrong.
    pub kind: FormatErrorKind,
}

/// What is wrong with the bytes. Variants may be added.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FormatErrorKind {
    /// No bytes at all.
    Empty,
    /// The first 8 bytes are not [`MAGIC`]; `looks_like` names what the file seems to be.
    BadMagic {
        /// e.g. `"an ELF file"`, `"JSON"`.
        looks_like: Option<&'static str>,
    },
    /// The format version is newer than this build reads.
    NewerVersion {
        /// The file's version.
        version: u32,
    },
    /// The format version is 0, which no writer uses.
    BadVersion {
        /// The file's version.
        version: u32,
    },
    /// The input ends before the END record: the writer was interrupted.
    Truncated,
    /// A record tag of 0 (zeroed data).
    BadTag {
        /// The tag.
        tag: u16,
    },
    /// A payload length above [`MAX_PAYLOAD`].
    TooLong {
        /// The record's tag.
        tag: u16,
        /// The length field.
        len: u32,
    },
    /// An unknown record flagged [`flags::CRITICAL`]: a newer writer's record that may not be
    /// skipped.
    NeedsNewer {
        /// The unknown tag.
        tag: u16,
    },
    /// A payload shorter than the fields it must hold.
    TooShort {
        /// The record's name ([`tag::name`]).
        record: &'static str,
        /// Its payload length.
        len: u32,
    },
    /// A string's length runs past the end of its record's payload.
    StringOverrun {
        /// The record's name.
        record: &'static str,
        /// The field.
        field: &'static str,
    },
    /// A string longer than [`MAX_STRING`].
    StringTooLong {
        /// The record's name.
        record: &'static str,
        /// The field.
        field: &'static str,
        /// Its length.
        len: u32,
    },
    /// A string that must be UTF-8 (collector, lockmeter version) is not.
    BadUtf8 {
        /// The record's name.
        record: &'static str,
        /// The field.
        field: &'static str,
    },
    /// An enum code out of range (lock kind, mode, hold timing, end reason, name presence).
    BadCode {
        /// The record's name.
        record: &'static str,
        /// The field.
        field: &'static str,
        /// The code found.
        code: u32,
    },
    /// A sparse histogram that is not well formed.
    BadHistogram {
        /// `"wait_hist"` or `"hold_hist"`.
        field: &'static str,
        /// What is wrong.
        why: &'static str,
    },
    /// A record that may appear once appears again.
    Duplicate {
        /// The record's name.
        record: &'static str,
    },
    /// No HEADER record before the END record.
    MissingHeader,
    /// The END record's payload is not 16 bytes.
    BadEnd {
        /// Its length field.
        len: u32,
    },
    /// The END record's record count disagrees with the records found.
    CountMismatch {
        /// Count stored in the END record.
        stored: u64,
        /// Records found.
        found: u64,
    },
    /// The checksum in the END record disagrees with the bytes before it.
    ChecksumMismatch {
        /// Checksum stored in the END record.
        stored: u64,
        /// Checksum of the bytes.
        computed: u64,
    },
    /// Bytes after the END record.
    TrailingData {
        /// How many.
        len: u64,
    },
}

impl FormatError {
    pub(crate) fn new(offset: usize, kind: FormatErrorKind) -> Self {
        FormatError { offset: offset as u64, kind }
    }

    /// The same error in a profile that starts `by` bytes into a run file.
    pub(crate) fn shifted(self, by: usize) -> Self {
        FormatError { offset: self.offset.saturating_add(by as u64), kind: self.kind }
    }

    /// Whether the input looks cut short (an interrupted writer) rather than damaged.
    pub fn is_truncated(&self) -> bool {
        matches!(self.kind, FormatErrorKind::Truncated)
    }
}

const DAMAGED: &str = "the file is damaged; re-run the program to write a new profile";

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use FormatErrorKind as K;
        let off = self.offset;
        match &self.kind {
            K::Empty => write!(
                f,
                "empty file (no data at offset 0; the program may have been killed before \
                 lockmeter wrote anything; re-run it)"
            ),
            K::BadMagic { looks_like: None } => {
                write!(f, "not a lockmeter profile (bad magic at offset {off})")
            }
            K::BadMagic { looks_like: Some(what) } => {
                write!(
                    f,
                    "not a lockmeter profile (bad magic at offset {off}; this looks like {what})"
                )
            }
            K::NewerVersion { version } => write!(
                f,
                "written by a newer lockmeter (format version {version} at offset {off}, this \
                 build reads up to {VERSION}); upgrade lockmeter"
            ),
            K::BadVersion { version } => {
                write!(
                    f,
                    "corrupt file header at offset {off}: format version {version} is not valid ({DAMAGED})"
                )
            }
            K::Truncated => write!(
                f,
                "truncated at offset {off} (the program may have been killed before lockmeter \
                 finished writing; re-run it)"
            ),
            K::NeedsNewer { tag } => write!(
                f,
                "record at offset {off} (tag {tag:#06x}) needs a newer lockmeter (this build \
                 reads format version {VERSION}); upgrade lockmeter"
            ),
            K::TrailingData { len } => write!(
                f,
                "corrupt file: {len} unexpected bytes at offset {off} after the end record \
                 (two profiles concatenated? {DAMAGED})"
            ),
            other => write!(f, "corrupt record at offset {off}: {} ({DAMAGED})", Why(other)),
        }
    }
}

/// The reason part of a "corrupt record" message.
struct Why<'a>(&'a FormatErrorKind);

impl fmt::Display for Why<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use FormatErrorKind as K;
        match self.0 {
            K::BadTag { tag } => write!(f, "record tag {tag} is not valid (zeroed data?)"),
            K::TooLong { tag, len } => write!(
                f,
                "{} record (tag {tag:#06x}) claims {len} bytes, more than the {MAX_PAYLOAD} allowed",
                tag::name(*tag)
            ),
            K::TooShort { record, len } => {
                write!(f, "{record} record is too short ({len} bytes)")
            }
            K::StringOverrun { record, field } => {
                write!(f, "{record} record: {field} runs past the end of the record")
            }
            K::StringTooLong { record, field, len } => {
                write!(
                    f,
                    "{record} record: {field} is {len} bytes, more than the {MAX_STRING} allowed"
                )
            }
            K::BadUtf8 { record, field } => write!(f, "{record} record: {field} is not UTF-8"),
            K::BadCode { record, field, code } => {
                write!(f, "{record} record: invalid {field} code {code}")
            }
            K::BadHistogram { field, why } => write!(f, "stats record: {field}: {why}"),
            K::Duplicate { record } => write!(f, "a second {record} record"),
            K::MissingHeader => write!(f, "no header record before the end record"),
            K::BadEnd { len } => {
                write!(f, "end record has {len} bytes instead of {END_PAYLOAD_LEN}")
            }
            K::CountMismatch { stored, found } => {
                write!(f, "end record counts {stored} records but the file has {found}")
            }
            K::ChecksumMismatch { stored, computed } => write!(
                f,
                "checksum mismatch (end record says {stored:#018x}, data hashes to {computed:#018x})"
            ),
            // Covered by FormatError's Display; kept for completeness.
            K::Empty => write!(f, "empty input"),
            K::BadMagic { .. } => write!(f, "bad magic"),
            K::NewerVersion { version } | K::BadVersion { version } => {
                write!(f, "format version {version}")
            }
            K::Truncated => write!(f, "truncated"),
            K::NeedsNewer { tag } => write!(f, "unknown critical record tag {tag:#06x}"),
            K::TrailingData { len } => write!(f, "{len} bytes after the end record"),
        }
    }
}

impl std::error::Error for FormatError {}

/// A profile file that could not be read: the path and why.
#[derive(Debug)]
pub struct FileError {
    /// The file.
    pub path: PathBuf,
    /// Why.
    pub kind: FileErrorKind,
}

/// Why a profile file could not be read.
#[derive(Debug)]
#[non_exhaustive]
pub enum FileErrorKind {
    /// The file could not be read at all.
    Io(io::Error),
    /// The file's bytes are not a readable profile.
    Format(FormatError),
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.path.display();
        match &self.kind {
            FileErrorKind::Io(e) => {
                write!(f, "{p}: cannot read the file ({e}); check the path and its permissions")
            }
            FileErrorKind::Format(e) => write!(f, "{p}: {e}"),
        }
    }
}

/// The message already says everything (file, offset, cause, what to do), so `source()` is
/// `None`: error reporters that print the chain (`anyhow`'s `{:#}`) do not repeat the cause. The
/// cause stays available in [`FileError::kind`].
impl std::error::Error for FileError {}

/// Reads a profile file.
pub fn read_profile_file(path: &Path) -> Result<Profile, FileError> {
    let bytes = std::fs::read(path)
        .map_err(|e| FileError { path: path.to_path_buf(), kind: FileErrorKind::Io(e) })?;
    read_profile(&bytes)
        .map_err(|e| FileError { path: path.to_path_buf(), kind: FileErrorKind::Format(e) })
}

/// What a foreign file seems to be, from its first bytes.
fn sniff(b: &[u8]) -> Option<&'static str> {
    let first = b.iter().copied().find(|c| !c.is_ascii_whitespace());
    if b.starts_with(b"\x7fELF") {
        Some("an ELF file")
    } else if b.starts_with(b"\x1f\x8b") {
        Some("a gzip file")
    } else if b.starts_with(b"\x28\xb5\x2f\xfd") {
        Some("a zstd file")
    } else if matches!(first, Some(b'{' | b'[')) {
        Some("JSON")
    } else if b.iter().take(64).all(|&c| c.is_ascii_graphic() || c.is_ascii_whitespace()) {
        Some("a text file")
    } else {
        None
    }
}

/// One record frame.
#[derive(Clone, Copy)]
struct Frame<'a> {
    offset: usize,
    tag: u16,
    flags: u16,
    payload: &'a [u8],
}

/// The length of the profile `bytes` starts with: up to the end of its END record, when its
/// magic and framing are intact (`None` otherwise; [`read_profile`] then says what is wrong).
/// A run file's profiles lie back to back ([`crate::read_run`]).
pub(crate) fn member_len(bytes: &[u8]) -> Option<usize> {
    if bytes.get(..MAGIC.len()) != Some(&MAGIC[..]) {
        return None;
    }
    let mut pos = FILE_HEADER_LEN;
    loop {
        let fr = frame_at(bytes, pos).ok()??;
        pos = pos.checked_add(FRAME_LEN)?.checked_add(fr.payload.len())?;
        if fr.tag == tag::END {
            return Some(pos);
        }
    }
}

/// Reads the frame at `pos`. `Ok(None)` at the end of the input.
fn frame_at(bytes: &[u8], pos: usize) -> Result<Option<Frame<'_>>, FormatError> {
    let total = bytes.len();
    if pos >= total {
        return Ok(None);
    }
    let truncated = || FormatError::new(total, FormatErrorKind::Truncated);
    let head = pos.checked_add(FRAME_LEN).and_then(|e| bytes.get(pos..e)).ok_or_else(truncated)?;
    let mut c = Cursor { data: head, pos: 0 };
    let (tag, flags, len) = match (c.u16(), c.u16(), c.u32()) {
        (Some(t), Some(f), Some(l)) => (t, f, l),
        _ => return Err(truncated()),
    };
    if tag == 0 {
        return Err(FormatError::new(pos, FormatErrorKind::BadTag { tag }));
    }
    if len > MAX_PAYLOAD {
        return Err(FormatError::new(pos, FormatErrorKind::TooLong { tag, len }));
    }
    let start = pos.checked_add(FRAME_LEN).ok_or_else(truncated)?;
    let end = start.checked_add(len as usize).ok_or_else(truncated)?;
    let payload = bytes.get(start..end).ok_or_else(truncated)?;
    Ok(Some(Frame { offset: pos, tag, flags, payload }))
}

/// Reads a profile from its bytes. Never panics; every error names a byte offset.
///
/// Checks, in order: magic, version, framing up to the END record, the END record's checksum
/// and record count, that nothing follows it, then each record's fields. Unknown record tags
/// are skipped unless flagged [`flags::CRITICAL`]; bytes after the known fields of a payload
/// are ignored (room for fields appended by later writers).
///
/// Strings from the OS (command line, executable, map paths and permissions, thread and lock
/// names) are converted lossily (invalid UTF-8 becomes U+FFFD); the collector and lockmeter
/// version strings must be valid UTF-8. The command line is split at NUL bytes, a final NUL
/// terminating the last argument. References between records (a record's thread index or
/// lock id) are not checked.
pub fn read_profile(bytes: &[u8]) -> Result<Profile, FormatError> {
    use FormatErrorKind as K;
    let total = bytes.len();
    if bytes.is_empty() {
        return Err(FormatError::new(0, K::Empty));
    }
    match bytes.get(..MAGIC.len()) {
        Some(m) if m == MAGIC => {}
        Some(_) => return Err(FormatError::new(0, K::BadMagic { looks_like: sniff(bytes) })),
        None if MAGIC.starts_with(bytes) => return Err(FormatError::new(total, K::Truncated)),
        None => return Err(FormatError::new(0, K::BadMagic { looks_like: sniff(bytes) })),
    }
    let version = bytes
        .get(MAGIC.len()..FILE_HEADER_LEN)
        .and_then(|v| Cursor { data: v, pos: 0 }.u32())
        .ok_or(FormatError::new(total, K::Truncated))?;
    if version == 0 {
        return Err(FormatError::new(MAGIC.len(), K::BadVersion { version }));
    }
    if version > VERSION {
        return Err(FormatError::new(MAGIC.len(), K::NewerVersion { version }));
    }

    // Pass 1: framing, END record, checksum. Counts per tag size the vectors exactly.
    let mut pos = FILE_HEADER_LEN;
    let mut counts = [0usize; 9];
    let mut found: u64 = 0;
    let end = loop {
        let Some(fr) = frame_at(bytes, pos)? else {
            return Err(FormatError::new(total, K::Truncated));
        };
        pos = pos.saturating_add(FRAME_LEN).saturating_add(fr.payload.len());
        if fr.tag == tag::END {
            break fr;
        }
        found = found.saturating_add(1);
        if let Some(c) = counts.get_mut(usize::from(fr.tag)) {
            *c = c.saturating_add(1);
        }
    };
    let mut c = Cursor { data: end.payload, pos: 0 };
    let (stored_count, stored_sum) = match (c.u64(), c.u64()) {
        (Some(n), Some(s)) if end.payload.len() == END_PAYLOAD_LEN as usize => (n, s),
        _ => {
            let len = u32::try_from(end.payload.len()).unwrap_or(u32::MAX);
            return Err(FormatError::new(end.offset, K::BadEnd { len }));
        }
    };
    // The checksum covers every byte before it (the END frame and record count included).
    let covered = end.offset.saturating_add(FRAME_LEN).saturating_add(8);
    let mut h = Fnv64::new();
    h.update(bytes.get(..covered).unwrap_or_default());
    if h.value() != stored_sum {
        return Err(FormatError::new(
            end.offset,
            K::ChecksumMismatch { stored: stored_sum, computed: h.value() },
        ));
    }
    if stored_count != found {
        return Err(FormatError::new(end.offset, K::CountMismatch { stored: stored_count, found }));
    }
    if pos < total {
        return Err(FormatError::new(
            pos,
            K::TrailingData { len: total.saturating_sub(pos) as u64 },
        ));
    }

    // Pass 2: decode.
    let cap = |t: u16| counts.get(usize::from(t)).copied().unwrap_or(0);
    let mut p = Profile {
        maps: Vec::with_capacity(cap(tag::MAP)),
        threads: Vec::with_capacity(cap(tag::THREAD)),
        locks: Vec::with_capacity(cap(tag::LOCK)),
        records: Vec::with_capacity(cap(tag::RECORD)),
        cpus: Vec::with_capacity(cap(tag::CPU)),
        ..Profile::default()
    };
    let (mut have_header, mut have_dropped, mut have_overhead) = (false, false, false);
    let mut pos = FILE_HEADER_LEN;
    while pos < end.offset {
        let Some(fr) = frame_at(bytes, pos)? else { break };
        pos = pos.saturating_add(FRAME_LEN).saturating_add(fr.payload.len());
        let at = |kind| FormatError::new(fr.offset, kind);
        let once = |seen: &mut bool, record| {
            if std::mem::replace(seen, true) { Err(at(K::Duplicate { record })) } else { Ok(()) }
        };
        let mut c = Payload::new(&fr);
        match fr.tag {
            tag::HEADER => {
                once(&mut have_header, "header")?;
                p.header = decode_header(&mut c).map_err(at)?;
            }
            tag::MAP => p.maps.push(decode_map(&mut c).map_err(at)?),
            tag::THREAD => p.threads.push(decode_thread(&mut c).map_err(at)?),
            tag::LOCK => p.locks.push(decode_lock(&mut c).map_err(at)?),
            tag::RECORD => p.records.push(decode_record(&mut c).map_err(at)?),
            tag::LOCK_SLEEP => p.lock_sleeps.push(LockSleep {
                lock: c.u32().map_err(at)?,
                sleeps: c.u64().map_err(at)?,
                sleep_ns: c.u64().map_err(at)?,
                sleep_ns_max: c.u64().map_err(at)?,
                preempted_holds: c.opt_u64().map_err(at)?.unwrap_or(0),
                preempted_ns: c.opt_u64().map_err(at)?.unwrap_or(0),
                preempted_wait_ns: c.opt_u64().map_err(at)?.unwrap_or(0),
            }),
            tag::LOCK_CLASS => p.lock_classes.push(LockClass {
                lock: c.u32().map_err(at)?,
                site: c.u64().map_err(at)?,
                initialized: match c.u8().map_err(at)? {
                    1 => true,
                    2 => false,
                    o => return Err(at(c.bad_code("class origin", o))),
                },
                lifetimes: c.u64().map_err(at)?,
                sample_address: c.u64().map_err(at)?,
            }),
            tag::CPU => p.cpus.push(CpuStats {
                cpu: c.u32().map_err(at)?,
                acquisitions: c.u64().map_err(at)?,
                contended: c.u64().map_err(at)?,
                wait_ns: c.u64().map_err(at)?,
            }),
            tag::DROPPED => {
                once(&mut have_dropped, "dropped")?;
                p.dropped = Dropped {
                    acquisitions: c.u64().map_err(at)?,
                    locks: c.u64().map_err(at)?,
                    threads: c.u64().map_err(at)?,
                    holds: c.u64().map_err(at)?,
                    // Added after the first release of format 1: absent means none.
                    stacks: c.opt_u64().map_err(at)?.unwrap_or(0),
                    // Added later still: absent means the causes are not told apart.
                    acquisitions_no_thread: c.opt_u64().map_err(at)?.unwrap_or(0),
                    acquisitions_table_full: c.opt_u64().map_err(at)?.unwrap_or(0),
                    acquisitions_registry_full: c.opt_u64().map_err(at)?.unwrap_or(0),
                };
            }
            tag::OVERHEAD => {
                once(&mut have_overhead, "overhead")?;
                p.overhead = Overhead {
                    ns_per_pair: c.u64().map_err(at)?,
                    estimated_total_ns: c.u64().map_err(at)?,
                    memory_bytes: c.u64().map_err(at)?,
                    ns_per_stack: c.opt_u64().map_err(at)?.unwrap_or(0),
                    // Added later still: absent means not estimated.
                    estimated_slowdown_milli: c.opt_u64().map_err(at)?.unwrap_or(0),
                    contended_ns: c.opt_u64().map_err(at)?.unwrap_or(0),
                    serialized_ns: c.opt_u64().map_err(at)?.unwrap_or(0),
                };
            }
            tag::STACK => p.stacks.push(decode_stack(&mut c).map_err(at)?),
            tag::EVENT => p.events.push(decode_event(&mut c).map_err(at)?),
            tag::NOTE => {
                let len = c.u32().map_err(at)?;
                p.notes.push(c.lossy(len, "text").map_err(at)?);
            }
            tag::INTERVAL => {
                let index = c.u32().map_err(at)?;
                let (start_ns, end_ns) = (c.u64().map_err(at)?, c.u64().map_err(at)?);
                // Numbered from 0 in order: the index says which one the next INTERVAL_LOCKs
                // belong to.
                if index as usize != p.timeline.len() || end_ns < start_ns {
                    return Err(at(c.bad_code("interval index", index)));
                }
                p.timeline.push(crate::model::Interval { start_ns, end_ns, locks: Vec::new() });
            }
            tag::INTERVAL_LOCK => {
                let index = c.u32().map_err(at)?;
                let l = crate::model::IntervalLock {
                    lock: c.u32().map_err(at)?,
                    acquisitions: c.u64().map_err(at)?,
                    contended: c.u64().map_err(at)?,
                    wait_ns: c.u64().map_err(at)?,
                    hold_ns: c.u64().map_err(at)?,
                };
                match p.timeline.get_mut(index as usize) {
                    Some(iv) => iv.locks.push(l),
                    None => return Err(at(c.bad_code("interval index", index))),
                }
            }
            tag::LONG_WAITS => {
                if p.long_waits.is_some() {
                    return Err(at(K::Duplicate { record: "long waits" }));
                }
                p.long_waits = Some(crate::model::LongWaits {
                    per_thread: c.u32().map_err(at)?,
                    lost: c.u64().map_err(at)?,
                    waits: Vec::new(),
                });
            }
            tag::LONG_WAIT => {
                let w = decode_long_wait(&mut c).map_err(at)?;
                match p.long_waits.as_mut() {
                    Some(lw) => lw.waits.push(w),
                    None => {
                        return Err(
                            at(c.bad_code("position (before the long waits record)", 0u32)),
                        );
                    }
                }
            }
            t if fr.flags & flags::CRITICAL != 0 => return Err(at(K::NeedsNewer { tag: t })),
            _ => {} // unknown, skippable
        }
    }
    if !have_header {
        return Err(FormatError::new(end.offset, K::MissingHeader));
    }
    Ok(p)
}

/// Little-endian reads over a byte slice; `None` past the end.
struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.data.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    fn arr<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }
    fn u16(&mut self) -> Option<u16> {
        self.arr().map(u16::from_le_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.arr().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.arr().map(u64::from_le_bytes)
    }
}

/// A record's payload, with errors that name the record.
struct Payload<'a> {
    c: Cursor<'a>,
    record: &'static str,
}

type R<T> = Result<T, FormatErrorKind>;

impl<'a> Payload<'a> {
    fn new(fr: &Frame<'a>) -> Self {
        Payload { c: Cursor { data: fr.payload, pos: 0 }, record: tag::name(fr.tag) }
    }
    fn short(&self) -> FormatErrorKind {
        FormatErrorKind::TooShort {
            record: self.record,
            len: u32::try_from(self.c.data.len()).unwrap_or(u32::MAX),
        }
    }
    fn u8(&mut self) -> R<u8> {
        self.c.arr::<1>().map(|[b]| b).ok_or_else(|| self.short())
    }
    fn u32(&mut self) -> R<u32> {
        self.c.u32().ok_or_else(|| self.short())
    }
    fn i32(&mut self) -> R<i32> {
        self.c.arr().map(i32::from_le_bytes).ok_or_else(|| self.short())
    }
    fn u64(&mut self) -> R<u64> {
        self.c.u64().ok_or_else(|| self.short())
    }
    /// A trailing `u64` that older writers did not write: `None` at the end of the payload.
    fn opt_u64(&mut self) -> R<Option<u64>> {
        if self.c.pos >= self.c.data.len() { Ok(None) } else { self.u64().map(Some) }
    }
    /// String bytes of length `len` (read earlier from the fixed part).
    fn bytes(&mut self, len: u32, field: &'static str) -> R<&'a [u8]> {
        let record = self.record;
        if len as usize > MAX_STRING {
            return Err(FormatErrorKind::StringTooLong { record, field, len });
        }
        self.c.take(len as usize).ok_or(FormatErrorKind::StringOverrun { record, field })
    }
    fn lossy(&mut self, len: u32, field: &'static str) -> R<String> {
        Ok(String::from_utf8_lossy(self.bytes(len, field)?).into_owned())
    }
    fn strict(&mut self, len: u32, field: &'static str) -> R<String> {
        let b = self.bytes(len, field)?;
        match std::str::from_utf8(b) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => Err(FormatErrorKind::BadUtf8 { record: self.record, field }),
        }
    }
    fn bad_code(&self, field: &'static str, code: impl Into<u32>) -> FormatErrorKind {
        FormatErrorKind::BadCode { record: self.record, field, code: code.into() }
    }
    fn hist(&mut self, field: &'static str) -> R<[u64; BUCKETS]> {
        let bad = |why| FormatErrorKind::BadHistogram { field, why };
        let mut h = [0u64; BUCKETS];
        let n = self.u8()?;
        if usize::from(n) > BUCKETS {
            return Err(bad("more buckets than a histogram has"));
        }
        let mut next = 0usize;
        for _ in 0..n {
            let i = usize::from(self.u8()?);
            let v = self.u64()?;
            if i < next {
                return Err(bad("buckets out of order or repeated"));
            }
            match h.get_mut(i) {
                Some(slot) => *slot = v,
                None => return Err(bad("bucket index out of range")),
            }
            next = i.saturating_add(1);
        }
        Ok(h)
    }
}

fn decode_header(c: &mut Payload<'_>) -> R<Header> {
    let pid = c.u32()?;
    let ppid = c.u32()?;
    let image_seq = c.u32()?;
    let cpu_count = c.u32()?;
    let start_unix_ns = c.u64()?;
    let end_unix_ns = c.u64()?;
    let duration_ns = c.u64()?;
    let hz = c.u64()?;
    let hz_run = c.u64()?;
    let source = c.u8()?;
    let ht = c.u8()?;
    let er = c.u8()?;
    let _reserved = c.u8()?;
    let sample = c.u32()?;
    let signal = c.i32()?;
    let collector_len = c.u32()?;
    let version_len = c.u32()?;
    let exe_len = c.u32()?;
    let cmdline_len = c.u32()?;
    let hold_timing =
        layout::hold_timing_from_code(ht, sample).ok_or_else(|| c.bad_code("hold timing", ht))?;
    let end_reason =
        layout::end_reason_from_code(er, signal).ok_or_else(|| c.bad_code("end reason", er))?;
    let collector = c.strict(collector_len, "collector")?;
    let lockmeter_version = c.strict(version_len, "lockmeter version")?;
    let exe = c.lossy(exe_len, "exe")?;
    let raw = c.bytes(cmdline_len, "cmdline")?;
    let raw = raw.strip_suffix(&[0]).unwrap_or(raw);
    let cmdline = if cmdline_len == 0 {
        Vec::new()
    } else {
        raw.split(|&b| b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect()
    };
    Ok(Header {
        collector,
        lockmeter_version,
        pid,
        ppid,
        image_seq,
        cmdline,
        exe,
        start_unix_ns,
        end_unix_ns,
        duration_ns,
        clock: ClockInfo { source, hz, hz_run },
        cpu_count,
        hold_timing,
        end_reason,
    })
}

fn decode_map(c: &mut Payload<'_>) -> R<MapEntry> {
    let start = c.u64()?;
    let end = c.u64()?;
    let offset = c.u64()?;
    let perms_len = c.u32()?;
    let path_len = c.u32()?;
    Ok(MapEntry {
        start,
        end,
        offset,
        perms: c.lossy(perms_len, "perms")?,
        path: c.lossy(path_len, "path")?,
    })
}

fn decode_thread(c: &mut Payload<'_>) -> R<ThreadInfo> {
    let index = c.u32()?;
    let tid = c.u32()?;
    let name_len = c.u32()?;
    Ok(ThreadInfo { index, tid, name: c.lossy(name_len, "name")? })
}

fn decode_lock(c: &mut Payload<'_>) -> R<LockInfo> {
    let id = c.u32()?;
    let address = c.u64()?;
    let generation = c.u32()?;
    let kind = c.u8()?;
    let has_name = c.u8()?;
    let name_len = c.u32()?;
    let kind = LockKind::from_u8(kind).ok_or_else(|| c.bad_code("lock kind", kind))?;
    let name = match has_name {
        0 if name_len == 0 => None,
        1 => Some(c.lossy(name_len, "name")?),
        _ => return Err(c.bad_code("name presence", has_name)),
    };
    Ok(LockInfo { id, address, generation, kind, name })
}

fn decode_stack(c: &mut Payload<'_>) -> R<Stack> {
    let id = c.u32()?;
    let n = c.u32()?;
    if n as usize > crate::encode::MAX_STACK_FRAMES {
        return Err(c.bad_code("frame count", n));
    }
    let mut frames = Vec::with_capacity(n as usize);
    for _ in 0..n {
        frames.push(c.u64()?);
    }
    Ok(Stack { id, frames })
}

fn decode_long_wait(c: &mut Payload<'_>) -> R<crate::model::LongWait> {
    let thread = c.u32()?;
    let lock = c.u32()?;
    let mode = c.u8()?;
    let mode = Mode::from_u8(mode).ok_or_else(|| c.bad_code("mode", mode))?;
    let (start_ns, end_ns) = (c.u64()?, c.u64()?);
    if end_ns < start_ns {
        return Err(c.bad_code("end_ns below start_ns", 0u32));
    }
    let stack = c.u32()?;
    let holder_thread = c.u32()?;
    let holder_site = c.u64()?;
    let holder_stack = c.u32()?;
    let holder_acquired_ns = c.u64()?;
    Ok(crate::model::LongWait {
        thread,
        lock,
        mode,
        start_ns,
        end_ns,
        stack: (stack != u32::MAX).then_some(stack),
        holder_thread,
        holder_site,
        holder_stack: (holder_stack != u32::MAX).then_some(holder_stack),
        holder_acquired_ns: (holder_acquired_ns != u64::MAX).then_some(holder_acquired_ns),
    })
}

fn decode_event(c: &mut Payload<'_>) -> R<Event> {
    let thread = c.u32()?;
    let lock = c.u32()?;
    let mode = c.u8()?;
    let mode = Mode::from_u8(mode).ok_or_else(|| c.bad_code("mode", mode))?;
    let kind = c.u8()?;
    let kind = EventKind::from_u8(kind).ok_or_else(|| c.bad_code("event kind", kind))?;
    let stack = c.u32()?;
    let holder_site = c.u64()?;
    let holder_stack = c.u32()?;
    Ok(Event {
        thread,
        lock,
        mode,
        kind,
        stack,
        holder_site,
        holder_stack: (holder_stack != u32::MAX).then_some(holder_stack),
        count: c.u64()?,
        wait_ns: c.u64()?,
        wait_ns_max: c.u64()?,
    })
}

fn decode_record(c: &mut Payload<'_>) -> R<Record> {
    let thread = c.u32()?;
    let lock = c.u32()?;
    let site = c.u64()?;
    let mode = c.u8()?;
    let mode = Mode::from_u8(mode).ok_or_else(|| c.bad_code("mode", mode))?;
    let stats = Stats {
        acquisitions: c.u64()?,
        contended: c.u64()?,
        trylock_failures: c.u64()?,
        wait_ns_total: c.u64()?,
        wait_ns_max: c.u64()?,
        hold_ns_total: c.u64()?,
        hold_ns_max: c.u64()?,
        holds_timed: c.u64()?,
        owner_changes: c.u64()?,
        cnt_hold: c.u64()?,
        cnt_lock: c.u64()?,
        cond_waits: c.u64()?,
        cond_wait_ns: c.u64()?,
        wait_hist: c.hist("wait_hist")?,
        hold_hist: c.hist("hold_hist")?,
    };
    Ok(Record { thread, lock, site, mode, stats })
}

//! The reader: [`read_profile`] and [`read_profile_file`]. Never panics on any input, and
//! never allocates more than a small multiple of the input's length.

use std::path::Path;

use lockmeter_core::hist::BUCKETS;

use crate::layout::{
    END_PAYLOAD_LEN, FILE_HEADER_LEN, FRAME_LEN, Fnv64, MAGIC, MAX_PAYLOAD, MAX_STRING, VERSION,
    flags, tag,
};
use crate::model::{CpuStats, Dropped, LockClass, LockSleep, Lost, Mode, Overhead, Profile};

mod error;
mod records;

pub use error::{FileError, FileErrorKind, FormatError, FormatErrorKind};
use records::{
    decode_event, decode_header, decode_lock, decode_long_wait, decode_map, decode_record,
    decode_stack, decode_thread,
};

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
            tag::LOST => p.lost.push(Lost {
                lock: c.u32().map_err(at)?,
                site: c.u64().map_err(at)?,
                mode: {
                    let m = c.u8().map_err(at)?;
                    Mode::from_u8(m).ok_or_else(|| at(c.bad_code("mode", m)))?
                },
                acquisitions: c.u64().map_err(at)?,
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
                    cpu_ns: c.opt_u64().map_err(at)?.unwrap_or(0),
                    hooks_ns: c.opt_u64().map_err(at)?.unwrap_or(0),
                    // Added later still: absent means not measured.
                    start_ns: c.opt_u64().map_err(at)?.unwrap_or(0),
                    end_ns: c.opt_u64().map_err(at)?.unwrap_or(0),
                    // Added later still: absent means none.
                    other_images: c.opt_u64().map_err(at)?.unwrap_or(0),
                    other_fixed_ns: c.opt_u64().map_err(at)?.unwrap_or(0),
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

//! The writer: [`Encoder`] streams a profile record by record into a [`Sink`] without
//! allocating, so the preload can call it from a signal handler or right before `_exit`/`exec`.
//!
//! Everything in this module except [`IoSink`], `impl Sink for Vec<u8>`, [`encode_profile`],
//! [`to_bytes`] and [`write_profile`] is allocation-free and panic-free: fixed-size stack
//! buffers, checked arithmetic, no indexing that can panic (enforced by clippy lints on this
//! module).

use core::fmt;
use std::io;

use lockmeter_core::hist::BUCKETS;

use crate::layout::{
    self, END_PAYLOAD_LEN, FRAME_LEN, Fnv64, MAGIC, MAX_PAYLOAD, MAX_STRING, VERSION, flags, tag,
};
use crate::model::Profile;

mod records;
mod refs;
mod sink;

pub use refs::{HeaderRef, MapRef};
pub use sink::{BufSink, IoSink, Sink, SinkError, SliceSink};

/// Why the encoder stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeError {
    /// The sink failed; the file is incomplete (a reader will say it is truncated).
    Sink(SinkError),
    /// The calls were out of order (a second header, a second `dropped`, `finish` without a
    /// header, ...). Nothing was written for the offending call.
    Misuse(&'static str),
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::Sink(e) => write!(f, "cannot write the profile: {e}"),
            EncodeError::Misuse(m) => write!(f, "lockmeter encoder misuse: {m}"),
        }
    }
}

impl std::error::Error for EncodeError {}

impl From<SinkError> for EncodeError {
    fn from(e: SinkError) -> Self {
        EncodeError::Sink(e)
    }
}

/// Size of the on-stack buffer a record is assembled in. The fixed part of every record fits
/// (the largest, a stats record with both histograms full, is 1,301 bytes); strings are copied
/// in when they fit and otherwise written straight from the caller's slice.
pub const RECORD_BUF: usize = 2048;

/// Most frames a stack record keeps (its fixed part must fit [`RECORD_BUF`]).
pub const MAX_STACK_FRAMES: usize = 128;

/// A record being assembled on the stack: frame header, then the fixed-size fields.
struct Rec {
    buf: [u8; RECORD_BUF],
    len: usize,
    overflow: bool,
}

impl Rec {
    fn new() -> Self {
        Rec { buf: [0; RECORD_BUF], len: FRAME_LEN, overflow: false }
    }
    fn put(&mut self, b: &[u8]) {
        let Some(end) = self.len.checked_add(b.len()) else {
            self.overflow = true;
            return;
        };
        match self.buf.get_mut(self.len..end) {
            Some(dst) => {
                dst.copy_from_slice(b);
                self.len = end;
            }
            None => self.overflow = true,
        }
    }
    fn u8(&mut self, v: u8) {
        self.put(&[v]);
    }
    fn u32(&mut self, v: u32) {
        self.put(&v.to_le_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.put(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.put(&v.to_le_bytes());
    }
    /// A string length (the string itself goes in the tail), capped to what fits `u32`.
    fn len32(&mut self, s: &[u8]) {
        self.u32(u32::try_from(s.len()).unwrap_or(u32::MAX));
    }
    /// Sparse histogram: count (u8), then (bucket u8, value u64) for each non-zero bucket.
    fn hist(&mut self, h: &[u64; BUCKETS]) {
        let n = h.iter().filter(|&&v| v != 0).count();
        self.u8(u8::try_from(n).unwrap_or(u8::MAX));
        for (i, &v) in h.iter().enumerate() {
            if v != 0 {
                self.u8(u8::try_from(i).unwrap_or(u8::MAX));
                self.u64(v);
            }
        }
    }
}

/// Cuts a string to [`MAX_STRING`]; sets `truncated` if it did.
fn cap<'s>(s: &'s [u8], truncated: &mut bool) -> &'s [u8] {
    let (kept, cut) = layout::truncate_at_char_boundary(s, MAX_STRING);
    *truncated |= cut;
    kept
}

/// Streams a profile into a [`Sink`], record by record, without allocating.
///
/// Call [`begin`](Encoder::begin), then [`header`](Encoder::header) once and the other record
/// methods in any order and number ([`dropped`](Encoder::dropped) and
/// [`overhead`](Encoder::overhead) at most once each), then [`finish`](Encoder::finish), which
/// writes the END record (record count and FNV-1a 64 checksum of every byte before it).
///
/// Strings longer than [`MAX_STRING`] (1 MiB) are cut at a UTF-8 character boundary and their
/// record is flagged [`flags::TRUNCATED`]. After a sink error every call returns that error.
/// Each call assembles its record in a [`RECORD_BUF`] (2 KiB) stack buffer, so the encoder
/// needs a few KiB of stack (a test encodes on a 16 KiB thread stack, in a debug build).
#[derive(Debug)]
pub struct Encoder<S: Sink> {
    sink: S,
    hash: Fnv64,
    written: u64,
    records: u64,
    header_done: bool,
    dropped_done: bool,
    overhead_done: bool,
    failed: Option<EncodeError>,
}

impl<S: Sink> Encoder<S> {
    /// Writes the file header (magic and format version) and returns the encoder.
    pub fn begin(sink: S) -> Result<Self, EncodeError> {
        let mut e = Encoder {
            sink,
            hash: Fnv64::new(),
            written: 0,
            records: 0,
            header_done: false,
            dropped_done: false,
            overhead_done: false,
            failed: None,
        };
        let mut head = [0u8; layout::FILE_HEADER_LEN];
        let (m, v) = head.split_at_mut(MAGIC.len());
        m.copy_from_slice(&MAGIC);
        v.copy_from_slice(&VERSION.to_le_bytes());
        e.out(&head)?;
        Ok(e)
    }

    /// Bytes written so far.
    pub fn bytes_written(&self) -> u64 {
        self.written
    }

    /// Records written so far (the file header and END record not counted).
    pub fn records_written(&self) -> u64 {
        self.records
    }

    /// The sink.
    pub fn sink(&self) -> &S {
        &self.sink
    }

    /// Gives up (no END record is written, so a reader will call the file truncated) and
    /// returns the sink, e.g. to inspect an [`IoSink`]'s error.
    pub fn into_sink(self) -> S {
        self.sink
    }

    fn check(&self) -> Result<(), EncodeError> {
        match self.failed {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn out(&mut self, b: &[u8]) -> Result<(), EncodeError> {
        self.check()?;
        match self.sink.write_all(b) {
            Ok(()) => {
                self.hash.update(b);
                self.written = self.written.wrapping_add(b.len() as u64);
                Ok(())
            }
            Err(e) => {
                let e = EncodeError::Sink(e);
                self.failed = Some(e);
                Err(e)
            }
        }
    }

    /// Frames and writes a record: `rec` holds the fixed fields after the frame header,
    /// `tail` the strings, in order.
    fn emit(
        &mut self,
        tag: u16,
        mut flags: u16,
        rec: &mut Rec,
        tail: &[&[u8]],
        truncated: bool,
    ) -> Result<(), EncodeError> {
        self.check()?;
        if rec.overflow {
            return Err(EncodeError::Misuse("record buffer overflow"));
        }
        let mut tails: usize = 0;
        for t in tail {
            tails = tails.saturating_add(t.len());
        }
        let payload = rec.len.saturating_sub(FRAME_LEN).saturating_add(tails);
        let payload = match u32::try_from(payload) {
            Ok(p) if p <= MAX_PAYLOAD => p,
            _ => return Err(EncodeError::Misuse("record longer than the format allows")),
        };
        if truncated {
            flags |= flags::TRUNCATED;
        }
        let mut frame = [0u8; FRAME_LEN];
        frame_header(&mut frame, tag, flags, payload);
        if let Some(dst) = rec.buf.get_mut(..FRAME_LEN) {
            dst.copy_from_slice(&frame);
        }
        if rec.len.saturating_add(tails) <= RECORD_BUF {
            // One write for the whole record.
            for t in tail {
                rec.put(t);
            }
            self.out(rec.buf.get(..rec.len).unwrap_or_default())?;
        } else {
            // Long strings go straight from the caller's slices.
            self.out(rec.buf.get(..rec.len).unwrap_or_default())?;
            for t in tail {
                self.out(t)?;
            }
        }
        self.records = self.records.wrapping_add(1);
        Ok(())
    }

    /// Writes the header record. Exactly once per file, anywhere before [`finish`](Self::finish).
    pub fn header(&mut self, h: &HeaderRef<'_>) -> Result<(), EncodeError> {
        self.check()?;
        if self.header_done {
            return Err(EncodeError::Misuse("header written twice"));
        }
        let mut t = false;
        let collector = cap(h.collector.as_bytes(), &mut t);
        let version = cap(h.lockmeter_version.as_bytes(), &mut t);
        let exe = cap(h.exe, &mut t);
        let cmdline = cap(h.cmdline, &mut t);
        let mut r = Rec::new();
        r.u32(h.pid);
        r.u32(h.ppid);
        r.u32(h.image_seq);
        r.u32(h.cpu_count);
        r.u64(h.start_unix_ns);
        r.u64(h.end_unix_ns);
        r.u64(h.duration_ns);
        r.u64(h.clock.hz);
        r.u64(h.clock.hz_run);
        r.u8(h.clock.source);
        let (ht, sample) = layout::hold_timing_code(h.hold_timing);
        let (er, end_flags, signal) = layout::end_reason_code(h.end_reason);
        r.u8(ht);
        r.u8(er);
        r.u8(end_flags);
        r.u32(sample);
        r.i32(signal);
        r.len32(collector);
        r.len32(version);
        r.len32(exe);
        r.len32(cmdline);
        self.emit(tag::HEADER, 0, &mut r, &[collector, version, exe, cmdline], t)?;
        self.header_done = true;
        Ok(())
    }

    /// Writes the END record (number of records, FNV-1a 64 of every byte before the checksum
    /// itself) and returns
    /// the sink. Fails, writing nothing, if no header was written. Does not flush the sink.
    pub fn finish(mut self) -> Result<S, EncodeError> {
        self.check()?;
        if !self.header_done {
            return Err(EncodeError::Misuse("finish without a header"));
        }
        let mut end = [0u8; FRAME_LEN + END_PAYLOAD_LEN as usize];
        let (frame, payload) = end.split_at_mut(FRAME_LEN);
        let mut f = [0u8; FRAME_LEN];
        frame_header(&mut f, tag::END, 0, END_PAYLOAD_LEN);
        frame.copy_from_slice(&f);
        let (count, sum) = payload.split_at_mut(8);
        count.copy_from_slice(&self.records.to_le_bytes());
        // The checksum covers every byte before it: the END frame and count included.
        let mut h = self.hash;
        h.update(&f);
        h.update(count);
        sum.copy_from_slice(&h.value().to_le_bytes());
        self.out(&end)?;
        Ok(self.sink)
    }
}

fn frame_header(out: &mut [u8; FRAME_LEN], tag: u16, flags: u16, len: u32) {
    let [t0, t1] = tag.to_le_bytes();
    let [f0, f1] = flags.to_le_bytes();
    let [l0, l1, l2, l3] = len.to_le_bytes();
    *out = [t0, t1, f0, f1, l0, l1, l2, l3];
}

/// Encodes a whole [`Profile`] into `sink` with an [`Encoder`] and returns the sink.
/// Allocates (to join the command line); for tools and tests.
///
/// Command-line arguments are joined NUL-terminated, as in `/proc/PID/cmdline`, so an argument
/// containing a NUL byte reads back split in two.
pub fn encode_profile<S: Sink>(p: &Profile, sink: S) -> Result<S, EncodeError> {
    let h = &p.header;
    let mut cmdline = Vec::new();
    for a in &h.cmdline {
        cmdline.extend_from_slice(a.as_bytes());
        cmdline.push(0);
    }
    let mut e = Encoder::begin(sink)?;
    e.header(&HeaderRef {
        collector: &h.collector,
        lockmeter_version: &h.lockmeter_version,
        pid: h.pid,
        ppid: h.ppid,
        image_seq: h.image_seq,
        cmdline: &cmdline,
        exe: h.exe.as_bytes(),
        start_unix_ns: h.start_unix_ns,
        end_unix_ns: h.end_unix_ns,
        duration_ns: h.duration_ns,
        clock: h.clock,
        cpu_count: h.cpu_count,
        hold_timing: h.hold_timing,
        end_reason: h.end_reason,
    })?;
    for m in &p.maps {
        e.map_line(m.start, m.end, m.offset, m.perms.as_bytes(), m.path.as_bytes())?;
    }
    for t in &p.threads {
        e.thread(t.index, t.tid, t.name.as_bytes())?;
    }
    for l in &p.locks {
        e.lock(l.id, l.address, l.generation, l.kind, l.name.as_deref().map(str::as_bytes))?;
    }
    for r in &p.records {
        e.record(r)?;
    }
    for c in &p.cpus {
        e.cpu(c)?;
    }
    for l in &p.lock_sleeps {
        e.lock_sleep(l)?;
    }
    for c in &p.lock_classes {
        e.lock_class(c)?;
    }
    for l in &p.lost {
        e.lost(l)?;
    }
    for st in &p.stacks {
        e.stack(st.id, &st.frames)?;
    }
    for ev in &p.events {
        e.event(ev)?;
    }
    for n in &p.notes {
        e.note(n.as_bytes())?;
    }
    for (i, iv) in p.timeline.iter().enumerate() {
        e.interval(i as u32, iv.start_ns, iv.end_ns)?;
        for l in &iv.locks {
            e.interval_lock(i as u32, l)?;
        }
    }
    if let Some(lw) = &p.long_waits {
        e.long_waits(lw.per_thread, lw.lost)?;
        for w in &lw.waits {
            e.long_wait(w)?;
        }
    }
    e.dropped(&p.dropped)?;
    e.overhead(&p.overhead)?;
    e.finish()
}

/// The encoded bytes of a [`Profile`].
pub fn to_bytes(p: &Profile) -> Result<Vec<u8>, EncodeError> {
    encode_profile(p, Vec::new())
}

/// Writes a [`Profile`] to `w` (buffered internally) and flushes it.
pub fn write_profile<W: io::Write>(p: &Profile, w: W) -> io::Result<()> {
    let mut sink = IoSink::new(io::BufWriter::new(w));
    match encode_profile(p, &mut sink) {
        Ok(_) => {}
        Err(EncodeError::Sink(e)) => {
            return Err(sink.take_error().unwrap_or_else(|| io::Error::other(e)));
        }
        Err(e) => return Err(io::Error::new(io::ErrorKind::InvalidInput, e)),
    }
    let mut w = sink.into_inner();
    io::Write::flush(&mut w)
}

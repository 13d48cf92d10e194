//! The writer: [`Encoder`] streams a profile record by record into a [`Sink`] without
//! allocating, so the preload can call it from a signal handler or right before `_exit`/`exec`.
//!
//! Everything in this module except [`IoSink`], `impl Sink for Vec<u8>`, [`encode_profile`],
//! [`to_bytes`] and [`write_profile`] is allocation-free and panic-free: fixed-size stack
//! buffers, checked arithmetic, no indexing that can panic (enforced by clippy lints on this
//! module).

#![deny(
    clippy::indexing_slicing,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::arithmetic_side_effects
)]

use core::fmt;
use std::io;

use lockmeter_core::hist::BUCKETS;

use crate::layout::{
    self, END_PAYLOAD_LEN, FRAME_LEN, Fnv64, MAGIC, MAX_PAYLOAD, MAX_STRING, VERSION, flags, tag,
};
use crate::model::{
    ClockInfo, CpuStats, Dropped, EndReason, Event, HoldTiming, IntervalLock, LockClass, LockKind,
    LockSleep, LongWait, Mode, Overhead, Profile, Record, Stats,
};

/// Why a [`Sink`] could not take bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SinkError {
    /// A fixed-capacity sink is full (nothing of the rejected buffer was written).
    Full,
    /// The OS refused the write; the value is the `errno` (`ENOSPC`, `EIO`, ...).
    Os(i32),
    /// Another I/O failure ([`IoSink`] keeps the original [`io::Error`]).
    Other,
}

impl fmt::Display for SinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SinkError::Full => f.write_str("output buffer full"),
            SinkError::Os(e) => write!(f, "write failed (errno {e})"),
            SinkError::Other => f.write_str("write failed"),
        }
    }
}

impl std::error::Error for SinkError {}

/// Where an [`Encoder`] writes: a file descriptor, a buffer, an [`io::Write`].
///
/// Implementations used by the preload must not allocate or take locks.
pub trait Sink {
    /// Writes all of `buf`, or fails. After a failure the encoder writes nothing more.
    fn write_all(&mut self, buf: &[u8]) -> Result<(), SinkError>;
}

impl<S: Sink + ?Sized> Sink for &mut S {
    fn write_all(&mut self, buf: &[u8]) -> Result<(), SinkError> {
        (**self).write_all(buf)
    }
}

/// Appends to the vector (allocates: for tests and tools, not for the preload).
impl Sink for Vec<u8> {
    fn write_all(&mut self, buf: &[u8]) -> Result<(), SinkError> {
        self.extend_from_slice(buf);
        Ok(())
    }
}

/// A sink over a caller-provided byte slice; fails with [`SinkError::Full`] when it does not fit.
/// Allocation-free.
#[derive(Debug)]
pub struct SliceSink<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> SliceSink<'a> {
    /// An empty sink writing into `buf`.
    pub fn new(buf: &'a mut [u8]) -> Self {
        SliceSink { buf, len: 0 }
    }
    /// The bytes written so far.
    pub fn written(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }
    /// Number of bytes written so far.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Sink for SliceSink<'_> {
    fn write_all(&mut self, buf: &[u8]) -> Result<(), SinkError> {
        let end = self.len.checked_add(buf.len()).ok_or(SinkError::Full)?;
        let dst = self.buf.get_mut(self.len..end).ok_or(SinkError::Full)?;
        dst.copy_from_slice(buf);
        self.len = end;
        Ok(())
    }
}

/// A fixed-size write buffer in front of another sink, so that a sink doing one `write(2)` per
/// call sees few large writes. Allocation-free; `N` bytes live inline.
///
/// Nothing is flushed on drop: call [`flush`](BufSink::flush) or
/// [`into_inner`](BufSink::into_inner) after [`Encoder::finish`].
#[derive(Debug)]
pub struct BufSink<S: Sink, const N: usize> {
    inner: S,
    buf: [u8; N],
    len: usize,
}

impl<S: Sink, const N: usize> BufSink<S, N> {
    /// An empty buffer in front of `inner`.
    pub fn new(inner: S) -> Self {
        BufSink { inner, buf: [0; N], len: 0 }
    }
    /// Writes the buffered bytes to the inner sink.
    pub fn flush(&mut self) -> Result<(), SinkError> {
        if self.len > 0 {
            let pending = self.buf.get(..self.len).unwrap_or_default();
            self.inner.write_all(pending)?;
            self.len = 0;
        }
        Ok(())
    }
    /// Flushes and returns the inner sink.
    pub fn into_inner(mut self) -> Result<S, SinkError> {
        self.flush()?;
        Ok(self.inner)
    }
    /// The inner sink (bytes still buffered are not in it yet).
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: Sink, const N: usize> Sink for BufSink<S, N> {
    fn write_all(&mut self, buf: &[u8]) -> Result<(), SinkError> {
        let room = N.saturating_sub(self.len);
        if buf.len() > room {
            self.flush()?;
        }
        if buf.len() >= N {
            return self.inner.write_all(buf);
        }
        let end = self.len.checked_add(buf.len()).ok_or(SinkError::Full)?;
        let dst = self.buf.get_mut(self.len..end).ok_or(SinkError::Full)?;
        dst.copy_from_slice(buf);
        self.len = end;
        Ok(())
    }
}

/// Adapts any [`io::Write`] (allocates on error only: it keeps the [`io::Error`]).
#[derive(Debug)]
pub struct IoSink<W: io::Write> {
    inner: W,
    error: Option<io::Error>,
}

impl<W: io::Write> IoSink<W> {
    /// Wraps a writer. Wrap files in an [`io::BufWriter`]: the encoder writes each record
    /// with one or a few small writes.
    pub fn new(inner: W) -> Self {
        IoSink { inner, error: None }
    }
    /// The last write error, if any.
    pub fn take_error(&mut self) -> Option<io::Error> {
        self.error.take()
    }
    /// The writer.
    pub fn into_inner(self) -> W {
        self.inner
    }
    /// The writer, by reference.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.inner
    }
}

impl<W: io::Write> Sink for IoSink<W> {
    fn write_all(&mut self, buf: &[u8]) -> Result<(), SinkError> {
        self.inner.write_all(buf).map_err(|e| {
            let se = match e.raw_os_error() {
                Some(n) => SinkError::Os(n),
                None => SinkError::Other,
            };
            self.error = Some(e);
            se
        })
    }
}

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

/// The header, borrowed: what the preload has at hand, nothing owned.
#[derive(Debug, Clone, Copy, Default)]
pub struct HeaderRef<'a> {
    /// Which collector wrote it: `preload`, `kernel`, `library`.
    pub collector: &'a str,
    /// Version of lockmeter that wrote it.
    pub lockmeter_version: &'a str,
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Number of this image within the pid.
    pub image_seq: u32,
    /// The command line exactly as `/proc/self/cmdline` gives it: each argument followed by a NUL.
    pub cmdline: &'a [u8],
    /// Path of the executable (bytes of `readlink /proc/self/exe`).
    pub exe: &'a [u8],
    /// Wall-clock start, ns since the Unix epoch.
    pub start_unix_ns: u64,
    /// Wall-clock end, ns since the Unix epoch.
    pub end_unix_ns: u64,
    /// Duration of metering (monotonic), ns.
    pub duration_ns: u64,
    /// Clock calibration.
    pub clock: ClockInfo,
    /// Online CPUs.
    pub cpu_count: u32,
    /// Hold timing mode.
    pub hold_timing: HoldTiming,
    /// Why the profile was written.
    pub end_reason: EndReason,
}

/// One memory-map line, borrowed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MapRef<'a> {
    /// Start address.
    pub start: u64,
    /// End address (exclusive).
    pub end: u64,
    /// File offset of `start`.
    pub offset: u64,
    /// Permissions, e.g. `r-xp`.
    pub perms: &'a [u8],
    /// Path, `[heap]`, ..., or empty.
    pub path: &'a [u8],
}

impl<'a> MapRef<'a> {
    /// Parses one line of `/proc/PID/maps`
    /// (`start-end perms offset dev inode [path]`, numbers in hex), without allocating.
    /// A trailing newline is ignored. `None` if the line is malformed.
    pub fn parse_line(line: &'a [u8]) -> Option<MapRef<'a>> {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let mut rest = line;
        let mut field = || -> Option<&'a [u8]> {
            let start = rest.iter().position(|&b| b != b' ')?;
            let r = rest.get(start..)?;
            let end = r.iter().position(|&b| b == b' ').unwrap_or(r.len());
            let (f, tail) = r.split_at_checked(end)?;
            rest = tail;
            Some(f)
        };
        let range = field()?;
        let perms = field()?;
        let offset = field()?;
        let _dev = field()?;
        let _inode = field()?;
        let dash = range.iter().position(|&b| b == b'-')?;
        let (lo, hi) = range.split_at_checked(dash)?;
        let hi = hi.get(1..)?;
        let path_start = rest.iter().position(|&b| b != b' ').unwrap_or(rest.len());
        Some(MapRef {
            start: parse_hex(lo)?,
            end: parse_hex(hi)?,
            offset: parse_hex(offset)?,
            perms,
            path: rest.get(path_start..).unwrap_or_default(),
        })
    }
}

fn parse_hex(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        let d = match b {
            b'0'..=b'9' => b.wrapping_sub(b'0'),
            b'a'..=b'f' => b.wrapping_sub(b'a').wrapping_add(10),
            b'A'..=b'F' => b.wrapping_sub(b'A').wrapping_add(10),
            _ => return None,
        };
        v = v.checked_mul(16)?.checked_add(u64::from(d))?;
    }
    Some(v)
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
        let (er, signal) = layout::end_reason_code(h.end_reason);
        r.u8(ht);
        r.u8(er);
        r.u8(0);
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

    /// Writes one memory-map line.
    pub fn map(&mut self, m: &MapRef<'_>) -> Result<(), EncodeError> {
        self.map_line(m.start, m.end, m.offset, m.perms, m.path)
    }

    /// Writes one memory-map line from its parts.
    pub fn map_line(
        &mut self,
        start: u64,
        end: u64,
        offset: u64,
        perms: &[u8],
        path: &[u8],
    ) -> Result<(), EncodeError> {
        let mut t = false;
        let perms = cap(perms, &mut t);
        let path = cap(path, &mut t);
        let mut r = Rec::new();
        r.u64(start);
        r.u64(end);
        r.u64(offset);
        r.len32(perms);
        r.len32(path);
        self.emit(tag::MAP, 0, &mut r, &[perms, path], t)
    }

    /// Writes one thread.
    pub fn thread(&mut self, index: u32, tid: u32, name: &[u8]) -> Result<(), EncodeError> {
        let mut t = false;
        let name = cap(name, &mut t);
        let mut r = Rec::new();
        r.u32(index);
        r.u32(tid);
        r.len32(name);
        self.emit(tag::THREAD, 0, &mut r, &[name], t)
    }

    /// Writes one lock identity.
    pub fn lock(
        &mut self,
        id: u32,
        address: u64,
        generation: u32,
        kind: LockKind,
        name: Option<&[u8]>,
    ) -> Result<(), EncodeError> {
        let mut t = false;
        let name = name.map(|n| cap(n, &mut t));
        let mut r = Rec::new();
        r.u32(id);
        r.u64(address);
        r.u32(generation);
        r.u8(kind as u8);
        r.u8(u8::from(name.is_some()));
        let bytes = name.unwrap_or_default();
        r.len32(bytes);
        self.emit(tag::LOCK, 0, &mut r, &[bytes], t)
    }

    /// Writes one record of statistics.
    pub fn record(&mut self, rec: &Record) -> Result<(), EncodeError> {
        self.stats(rec.thread, rec.lock, rec.site, rec.mode, &rec.stats)
    }

    /// Writes one record of statistics from its parts (no [`Record`] needs to be built).
    pub fn stats(
        &mut self,
        thread: u32,
        lock: u32,
        site: u64,
        mode: Mode,
        s: &Stats,
    ) -> Result<(), EncodeError> {
        let mut r = Rec::new();
        r.u32(thread);
        r.u32(lock);
        r.u64(site);
        r.u8(mode as u8);
        for v in [
            s.acquisitions,
            s.contended,
            s.trylock_failures,
            s.wait_ns_total,
            s.wait_ns_max,
            s.hold_ns_total,
            s.hold_ns_max,
            s.holds_timed,
            s.owner_changes,
            s.cnt_hold,
            s.cnt_lock,
            s.cond_waits,
            s.cond_wait_ns,
        ] {
            r.u64(v);
        }
        r.hist(&s.wait_hist);
        r.hist(&s.hold_hist);
        self.emit(tag::RECORD, 0, &mut r, &[], false)
    }

    /// Writes the totals of one CPU.
    pub fn cpu(&mut self, c: &CpuStats) -> Result<(), EncodeError> {
        let mut r = Rec::new();
        r.u32(c.cpu);
        r.u64(c.acquisitions);
        r.u64(c.contended);
        r.u64(c.wait_ns);
        self.emit(tag::CPU, 0, &mut r, &[], false)
    }

    /// Writes interval number `index` of the time series (numbered from 0, in time order).
    pub fn interval(&mut self, index: u32, start_ns: u64, end_ns: u64) -> Result<(), EncodeError> {
        let mut r = Rec::new();
        r.u32(index);
        r.u64(start_ns);
        r.u64(end_ns);
        self.emit(tag::INTERVAL, 0, &mut r, &[], false)
    }

    /// Writes what one lock did in interval `index` (written after that interval).
    pub fn interval_lock(&mut self, index: u32, l: &IntervalLock) -> Result<(), EncodeError> {
        let mut r = Rec::new();
        r.u32(index);
        r.u32(l.lock);
        r.u64(l.acquisitions);
        r.u64(l.contended);
        r.u64(l.wait_ns);
        r.u64(l.hold_ns);
        self.emit(tag::INTERVAL_LOCK, 0, &mut r, &[], false)
    }

    /// Writes the kernel sleeps of one lock.
    pub fn lock_sleep(&mut self, l: &LockSleep) -> Result<(), EncodeError> {
        let mut r = Rec::new();
        r.u32(l.lock);
        r.u64(l.sleeps);
        r.u64(l.sleep_ns);
        r.u64(l.sleep_ns_max);
        r.u64(l.preempted_holds);
        r.u64(l.preempted_ns);
        r.u64(l.preempted_wait_ns);
        self.emit(tag::LOCK_SLEEP, 0, &mut r, &[], false)
    }

    /// Writes that lock `c.lock` is a class.
    pub fn lock_class(&mut self, c: &LockClass) -> Result<(), EncodeError> {
        let mut r = Rec::new();
        r.u32(c.lock);
        r.u64(c.site);
        r.u8(if c.initialized { 1 } else { 2 });
        r.u64(c.lifetimes);
        r.u64(c.sample_address);
        self.emit(tag::LOCK_CLASS, 0, &mut r, &[], false)
    }

    /// Writes one interned stack (at most [`MAX_STACK_FRAMES`] frames are kept).
    pub fn stack(&mut self, id: u32, frames: &[u64]) -> Result<(), EncodeError> {
        let frames = frames.get(..frames.len().min(MAX_STACK_FRAMES)).unwrap_or_default();
        let mut r = Rec::new();
        r.u32(id);
        r.u32(frames.len() as u32);
        for &f in frames {
            r.u64(f);
        }
        self.emit(tag::STACK, 0, &mut r, &[], false)
    }

    /// Writes one aggregated event.
    pub fn event(&mut self, e: &Event) -> Result<(), EncodeError> {
        let mut r = Rec::new();
        r.u32(e.thread);
        r.u32(e.lock);
        r.u8(e.mode as u8);
        r.u8(e.kind as u8);
        r.u32(e.stack);
        r.u64(e.holder_site);
        r.u32(e.holder_stack.unwrap_or(u32::MAX));
        r.u64(e.count);
        r.u64(e.wait_ns);
        r.u64(e.wait_ns_max);
        self.emit(tag::EVENT, 0, &mut r, &[], false)
    }

    /// Writes how the longest waits were kept (once, before the LONG_WAIT records).
    pub fn long_waits(&mut self, per_thread: u32, lost: u64) -> Result<(), EncodeError> {
        let mut r = Rec::new();
        r.u32(per_thread);
        r.u64(lost);
        self.emit(tag::LONG_WAITS, 0, &mut r, &[], false)
    }

    /// Writes one of the longest waits (after the LONG_WAITS record).
    pub fn long_wait(&mut self, w: &LongWait) -> Result<(), EncodeError> {
        let mut r = Rec::new();
        r.u32(w.thread);
        r.u32(w.lock);
        r.u8(w.mode as u8);
        r.u64(w.start_ns);
        r.u64(w.end_ns);
        r.u32(w.stack.unwrap_or(u32::MAX));
        r.u32(w.holder_thread);
        r.u64(w.holder_site);
        r.u32(w.holder_stack.unwrap_or(u32::MAX));
        r.u64(w.holder_acquired_ns.unwrap_or(u64::MAX));
        self.emit(tag::LONG_WAIT, 0, &mut r, &[], false)
    }

    /// A NOTE record: one sentence about what the collector could not see.
    pub fn note(&mut self, text: &[u8]) -> Result<(), EncodeError> {
        let mut t = false;
        let text = cap(text, &mut t);
        let mut r = Rec::new();
        r.len32(text);
        self.emit(tag::NOTE, 0, &mut r, &[text], t)
    }

    /// Writes what did not fit. At most once.
    pub fn dropped(&mut self, d: &Dropped) -> Result<(), EncodeError> {
        self.check()?;
        if self.dropped_done {
            return Err(EncodeError::Misuse("dropped written twice"));
        }
        let mut r = Rec::new();
        r.u64(d.acquisitions);
        r.u64(d.locks);
        r.u64(d.threads);
        r.u64(d.holds);
        r.u64(d.stacks);
        r.u64(d.acquisitions_no_thread);
        r.u64(d.acquisitions_table_full);
        r.u64(d.acquisitions_registry_full);
        self.emit(tag::DROPPED, 0, &mut r, &[], false)?;
        self.dropped_done = true;
        Ok(())
    }

    /// Writes the profiler's own cost. At most once.
    pub fn overhead(&mut self, o: &Overhead) -> Result<(), EncodeError> {
        self.check()?;
        if self.overhead_done {
            return Err(EncodeError::Misuse("overhead written twice"));
        }
        let mut r = Rec::new();
        r.u64(o.ns_per_pair);
        r.u64(o.estimated_total_ns);
        r.u64(o.memory_bytes);
        r.u64(o.ns_per_stack);
        r.u64(o.estimated_slowdown_milli);
        r.u64(o.contended_ns);
        r.u64(o.serialized_ns);
        self.emit(tag::OVERHEAD, 0, &mut r, &[], false)?;
        self.overhead_done = true;
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

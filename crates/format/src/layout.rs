//! Constants of the file layout (see `FORMAT.md`), the checksum, and the numeric codes of the
//! model's enums. Shared by the writer and the reader; public so that tools and fuzzers can
//! build or patch files by hand.

use crate::model::{EndReason, HoldTiming};

/// The first 8 bytes of every profile.
pub const MAGIC: [u8; 8] = *b"LOCKMTR\0";

/// The format version this build writes, and the newest it reads. Bumped only for changes an
/// older reader cannot skip over; new record tags and new fields appended to a payload keep it.
pub const VERSION: u32 = 1;

/// Bytes before the first record: magic (8) and version (4).
pub const FILE_HEADER_LEN: usize = 12;

/// Bytes of a record frame before its payload: tag (2), flags (2), payload length (4).
pub const FRAME_LEN: usize = 8;

/// Largest payload a record may have (16 MiB). A larger length field is corruption.
pub const MAX_PAYLOAD: u32 = 16 << 20;

/// Longest string the writer stores (1 MiB); longer strings are cut at a UTF-8 character
/// boundary and the record gets [`flags::TRUNCATED`]. A reader rejects longer strings.
pub const MAX_STRING: usize = 1 << 20;

/// Payload length of the END record.
pub const END_PAYLOAD_LEN: u32 = 16;

/// Record tags.
pub mod tag {
    /// Profile header (exactly one per file).
    pub const HEADER: u16 = 0x0001;
    /// One line of the memory map.
    pub const MAP: u16 = 0x0002;
    /// One thread.
    pub const THREAD: u16 = 0x0003;
    /// One lock identity.
    pub const LOCK: u16 = 0x0004;
    /// The statistics of one (thread, lock, site, mode).
    pub const RECORD: u16 = 0x0005;
    /// Per-CPU totals.
    pub const CPU: u16 = 0x0006;
    /// What did not fit (at most one per file).
    pub const DROPPED: u16 = 0x0007;
    /// The profiler's own cost (at most one per file).
    pub const OVERHEAD: u16 = 0x0008;
    /// One interned call stack.
    pub const STACK: u16 = 0x0009;
    /// One aggregated event (contended acquisition by waiter stack and holder, ...).
    pub const EVENT: u16 = 0x000A;
    /// Kernel sleeps of a lock metered in user space ([`crate::LockSleep`]).
    pub const LOCK_SLEEP: u16 = 0x000B;
    /// One sentence about what the collector could not see in this process.
    pub const NOTE: u16 = 0x000C;
    /// One interval of the time series (`run --interval`).
    pub const INTERVAL: u16 = 0x000D;
    /// What one lock did in one interval.
    pub const INTERVAL_LOCK: u16 = 0x000E;
    /// A lock that folds the identities of one class ([`crate::LockClass`]).
    pub const LOCK_CLASS: u16 = 0x000F;
    /// How the longest contended waits were kept ([`crate::LongWaits`], at most one per file).
    pub const LONG_WAITS: u16 = 0x0010;
    /// One of the longest contended waits ([`crate::LongWait`]).
    pub const LONG_WAIT: u16 = 0x0011;
    /// Acquisitions of one (lock, site, mode) that were not recorded ([`crate::Lost`]).
    pub const LOST: u16 = 0x0012;
    /// End of file: record count and checksum. Always last.
    pub const END: u16 = 0xFFFF;

    /// A short lowercase name for messages (`"header"`, `"lock"`, ...), `"unknown"` otherwise.
    pub fn name(tag: u16) -> &'static str {
        match tag {
            HEADER => "header",
            MAP => "map",
            THREAD => "thread",
            LOCK => "lock",
            RECORD => "stats",
            CPU => "cpu",
            DROPPED => "dropped",
            OVERHEAD => "overhead",
            STACK => "stack",
            EVENT => "event",
            LOCK_SLEEP => "lock sleep",
            NOTE => "note",
            INTERVAL => "interval",
            INTERVAL_LOCK => "interval lock",
            LOCK_CLASS => "lock class",
            LONG_WAITS => "long waits",
            LONG_WAIT => "long wait",
            LOST => "lost",
            END => "end",
            _ => "unknown",
        }
    }
}

/// Record flags (the `u16` after the tag).
pub mod flags {
    /// A string in this record was cut to [`MAX_STRING`](super::MAX_STRING) bytes.
    pub const TRUNCATED: u16 = 0x0001;
    /// A reader that does not know this record's tag must reject the file instead of skipping it.
    pub const CRITICAL: u16 = 0x8000;
}

/// FNV-1a, 64 bits: the file checksum, computed incrementally.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fnv64(u64);

impl Fnv64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    /// The hash of no bytes.
    pub const fn new() -> Self {
        Fnv64(Self::OFFSET)
    }
    /// Adds bytes.
    #[inline]
    pub fn update(&mut self, bytes: &[u8]) {
        let mut h = self.0;
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(Self::PRIME);
        }
        self.0 = h;
    }
    /// The hash so far.
    pub const fn value(&self) -> u64 {
        self.0
    }
}

impl Default for Fnv64 {
    fn default() -> Self {
        Self::new()
    }
}

/// FNV-1a 64 of `bytes`.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h = Fnv64::new();
    h.update(bytes);
    h.value()
}

/// [`HoldTiming`] as (code, sample period): `On` = (0, 0), `Off` = (1, 0), `Sampled(n)` = (2, n).
pub fn hold_timing_code(h: HoldTiming) -> (u8, u32) {
    match h {
        HoldTiming::On => (0, 0),
        HoldTiming::Off => (1, 0),
        HoldTiming::Sampled(n) => (2, n),
    }
}

/// The inverse of [`hold_timing_code`]; the value is ignored for codes 0 and 1.
pub fn hold_timing_from_code(code: u8, value: u32) -> Option<HoldTiming> {
    Some(match code {
        0 => HoldTiming::On,
        1 => HoldTiming::Off,
        2 => HoldTiming::Sampled(value),
        _ => return None,
    })
}

/// [`EndReason`] as (code, flags, value): `Exit` = (0, _, code), `UnderscoreExit` = (1, _, code),
/// `Signal(s)` = (2, 0, s), `Exec` = (3, 0, 0), `Snapshot` = (4, 0, 0), `Killed(s)` = (5, 0, s),
/// `ExitGroup(code)` = (6, 0, code), `Vanished` = (7, 0, 0), `OomKilled` = (8, 0, 9). `flags` is [`END_EXIT_CODE_KNOWN`]
/// when an `Exit` or `UnderscoreExit` carries its exit code (the header's byte 59, which readers
/// before it ignore), else 0.
pub fn end_reason_code(e: EndReason) -> (u8, u8, i32) {
    let exit = |code: u8, c: Option<i32>| match c {
        Some(c) => (code, END_EXIT_CODE_KNOWN, c),
        None => (code, 0, 0),
    };
    match e {
        EndReason::Exit(c) => exit(0, c),
        EndReason::UnderscoreExit(c) => exit(1, c),
        EndReason::Signal(s) => (2, 0, s),
        EndReason::Exec => (3, 0, 0),
        EndReason::Snapshot => (4, 0, 0),
        EndReason::Killed(s) => (5, 0, s),
        EndReason::ExitGroup(code) => (6, 0, code),
        EndReason::Vanished => (7, 0, 0),
        EndReason::OomKilled => (8, 0, 9),
    }
}

/// The header flag (byte 59) saying that the value of an `Exit` or `UnderscoreExit` is its exit
/// code.
pub const END_EXIT_CODE_KNOWN: u8 = 1;

/// The inverse of [`end_reason_code`]; the value is ignored for codes other than 0, 1 (with
/// [`END_EXIT_CODE_KNOWN`]), 2, 5 and 6.
pub fn end_reason_from_code(code: u8, flags: u8, value: i32) -> Option<EndReason> {
    let known = (flags & END_EXIT_CODE_KNOWN != 0).then_some(value);
    Some(match code {
        0 => EndReason::Exit(known),
        1 => EndReason::UnderscoreExit(known),
        2 => EndReason::Signal(value),
        3 => EndReason::Exec,
        4 => EndReason::Snapshot,
        5 => EndReason::Killed(value),
        6 => EndReason::ExitGroup(value),
        7 => EndReason::Vanished,
        8 => EndReason::OomKilled,
        _ => return None,
    })
}

/// `bytes` cut to at most `max` bytes, backing off (at most 3 bytes) so the cut does not split
/// a UTF-8 character. Returns the kept prefix and whether anything was cut.
pub fn truncate_at_char_boundary(bytes: &[u8], max: usize) -> (&[u8], bool) {
    if bytes.len() <= max {
        return (bytes, false);
    }
    let mut cut = max;
    for _ in 0..3 {
        match bytes.get(cut) {
            Some(&b) if b & 0xC0 == 0x80 && cut > 0 => cut = cut.saturating_sub(1),
            _ => break,
        }
    }
    (bytes.get(..cut).unwrap_or_default(), true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_known_values() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        let s = "aé€😀"; // 1 + 2 + 3 + 4 bytes
        for max in 0..=s.len() + 1 {
            let (t, cut) = truncate_at_char_boundary(s.as_bytes(), max);
            assert!(std::str::from_utf8(t).is_ok(), "max {max}");
            assert!(t.len() <= max);
            assert_eq!(cut, max < s.len());
        }
    }

    #[test]
    fn codes_round_trip() {
        for h in [HoldTiming::On, HoldTiming::Off, HoldTiming::Sampled(7)] {
            let (c, v) = hold_timing_code(h);
            assert_eq!(hold_timing_from_code(c, v), Some(h));
        }
        for e in [
            EndReason::Exit(None),
            EndReason::Exit(Some(0)),
            EndReason::Exit(Some(3)),
            EndReason::UnderscoreExit(None),
            EndReason::UnderscoreExit(Some(255)),
            EndReason::Signal(15),
            EndReason::Exec,
            EndReason::Snapshot,
            EndReason::Killed(9),
            EndReason::ExitGroup(5),
            EndReason::Vanished,
            EndReason::OomKilled,
        ] {
            let (c, f, v) = end_reason_code(e);
            assert_eq!(end_reason_from_code(c, f, v), Some(e));
        }
        assert_eq!(hold_timing_from_code(3, 0), None);
        assert_eq!(end_reason_from_code(9, 0, 0), None);
        // A file written before the exit code was recorded: byte 59 is 0, the code unknown.
        assert_eq!(end_reason_from_code(0, 0, 0), Some(EndReason::Exit(None)));
    }
}

//! The reader on damaged, hostile and foreign input: always an error (or a valid profile),
//! never a panic, and a one-line message naming the offset.

mod common;

use common::{encoded, rich_profile};
use lockmeter_format::fuzzing::{frames, seal};
use lockmeter_format::layout::{self, MAX_PAYLOAD, tag};
use lockmeter_format::*;

fn err(b: &[u8]) -> FormatError {
    match read_profile(b) {
        Ok(_) => panic!("read a profile from damaged bytes"),
        Err(e) => {
            let msg = e.to_string();
            assert!(!msg.contains('\n'), "{msg}");
            assert!(msg.contains(&format!("offset {}", e.offset)), "{msg}");
            e
        }
    }
}

/// A one-record body: frame header plus payload.
fn frame(t: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&t.to_le_bytes());
    f.extend_from_slice(&0u16.to_le_bytes());
    f.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    f.extend_from_slice(payload);
    f
}

/// The frames of a file with just a default header, and the header's payload.
fn header_payload() -> Vec<u8> {
    let mut e = Encoder::begin(Vec::new()).unwrap();
    e.header(&HeaderRef { collector: "c", ..HeaderRef::default() }).unwrap();
    frames(&e.finish().unwrap())[8..].to_vec()
}

#[test]
fn truncation_at_every_offset_is_an_error() {
    let b = encoded();
    for n in 0..b.len() {
        let e = err(&b[..n]);
        let want = if n == 0 { FormatErrorKind::Empty } else { FormatErrorKind::Truncated };
        assert_eq!(e.kind, want, "cut at {n}: {e}");
        if n > 0 {
            assert_eq!(e.offset, n as u64);
        }
    }
    assert_eq!(read_profile(&b).unwrap(), rich_profile());
}

#[test]
fn every_single_byte_flip_is_detected() {
    let b = encoded();
    let mut m = b.clone();
    for i in 0..b.len() {
        for x in [0x01u8, 0x80, 0xff] {
            m[i] ^= x;
            let _ = err(&m);
            m[i] ^= x;
        }
    }
}

#[test]
fn spec_messages() {
    let e = err(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    assert_eq!(
        e.to_string(),
        "not a lockmeter profile (bad magic at offset 0; this looks like an ELF file)"
    );
    assert_eq!(
        err(b"\x00\x01\x02\x03\x04\x05\x06\x07\x08").to_string(),
        "not a lockmeter profile (bad magic at offset 0)"
    );
    assert!(err(b"  {\"locks\": []}").to_string().contains("looks like JSON"));
    assert!(err(b"hello world, this is text\n").to_string().contains("text file"));
    assert!(err(b"lockmtr\0\x01\0\0\0").to_string().contains("bad magic"));
    assert!(err(b"LOCK").to_string().starts_with("truncated at offset 4 ("));
    assert!(err(b"LOCKX").to_string().contains("bad magic"));
    assert_eq!(
        err(b"").to_string(),
        "empty file (no data at offset 0; the program may have been killed before lockmeter wrote anything; re-run it)"
    );

    let mut b = encoded();
    b[8..12].copy_from_slice(&7u32.to_le_bytes());
    assert_eq!(
        err(&b).to_string(),
        "written by a newer lockmeter (format version 7 at offset 8, this build reads up to 1); upgrade lockmeter"
    );
    b[8..12].copy_from_slice(&0u32.to_le_bytes());
    assert_eq!(err(&b).kind, FormatErrorKind::BadVersion { version: 0 });

    let b = encoded();
    assert_eq!(
        err(&b[..1234]).to_string(),
        "truncated at offset 1234 (the program may have been killed before lockmeter finished writing; re-run it)"
    );
    let mut c = b.clone();
    c[100] ^= 1;
    let e = err(&c);
    assert!(matches!(e.kind, FormatErrorKind::ChecksumMismatch { .. }));
    assert_eq!(e.offset, (b.len() - 24) as u64);
    assert!(
        e.to_string()
            .starts_with(&format!("corrupt record at offset {}: checksum mismatch", b.len() - 24))
    );
}

#[test]
fn file_errors_name_the_file() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let missing = dir.join("format-does-not-exist.lmp");
    let e = read_profile_file(&missing).unwrap_err();
    assert!(matches!(e.kind, FileErrorKind::Io(_)));
    assert!(e.to_string().starts_with(&format!("{}: cannot read the file (", missing.display())));

    let p = dir.join("format-truncated.lmp");
    std::fs::write(&p, &encoded()[..1234]).unwrap();
    let e = read_profile_file(&p).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: truncated at offset 1234 (the program may have been killed before lockmeter finished writing; re-run it)",
            p.display()
        )
    );
    std::fs::write(&p, b"").unwrap();
    assert!(read_profile_file(&p).unwrap_err().to_string().contains("empty file"));
    let _ = std::fs::remove_file(&p);
}

#[test]
fn huge_length_fields() {
    let b = encoded();
    // The first record's length: over the limit is corruption, under it but past the end is
    // truncation. Neither allocates.
    for (len, want) in [
        (u32::MAX, FormatErrorKind::TooLong { tag: tag::HEADER, len: u32::MAX }),
        (MAX_PAYLOAD + 1, FormatErrorKind::TooLong { tag: tag::HEADER, len: MAX_PAYLOAD + 1 }),
        (MAX_PAYLOAD, FormatErrorKind::Truncated),
    ] {
        let mut m = b.clone();
        m[16..20].copy_from_slice(&len.to_le_bytes());
        assert_eq!(err(&m).kind, want);
    }
    // Huge string lengths inside a well-framed, correctly checksummed header.
    let h = header_payload();
    for (at, len) in [(68, u32::MAX), (76, (1 << 20) + 1), (80, 86)] {
        let mut p = h.clone();
        p[at..at + 4].copy_from_slice(&len.to_le_bytes());
        let e = err(&seal(&frame(tag::HEADER, &p)));
        assert!(
            matches!(
                e.kind,
                FormatErrorKind::StringTooLong { .. } | FormatErrorKind::StringOverrun { .. }
            ),
            "{e}"
        );
        assert_eq!(e.offset, 12);
    }
}

#[test]
fn end_record_checks() {
    let b = encoded();
    let end = b.len() - 24;
    let mut m = b.clone();
    m[end + 8..end + 16].copy_from_slice(&999u64.to_le_bytes());
    assert!(matches!(err(&m).kind, FormatErrorKind::ChecksumMismatch { .. }));
    let sum = layout::fnv1a64(&m[..end + 16]);
    m[end + 16..].copy_from_slice(&sum.to_le_bytes());
    assert!(matches!(err(&m).kind, FormatErrorKind::CountMismatch { stored: 999, .. }));

    let mut m = b.clone();
    m.extend_from_slice(b"more");
    let e = err(&m);
    assert_eq!(e.kind, FormatErrorKind::TrailingData { len: 4 });
    assert_eq!(e.offset, b.len() as u64);

    // Two profiles back to back.
    let mut two = b.clone();
    two.extend_from_slice(&b);
    assert!(matches!(err(&two).kind, FormatErrorKind::TrailingData { .. }));

    let mut m = b[..end].to_vec();
    m.extend_from_slice(&frame(tag::END, &[0; 8]));
    assert_eq!(err(&m).kind, FormatErrorKind::BadEnd { len: 8 });
}

#[test]
fn structural_errors() {
    let h = frame(tag::HEADER, &header_payload());
    assert_eq!(err(&seal(&[])).kind, FormatErrorKind::MissingHeader);
    let mut twice = h.clone();
    twice.extend_from_slice(&h);
    assert_eq!(err(&seal(&twice)).kind, FormatErrorKind::Duplicate { record: "header" });
    for t in [tag::DROPPED, tag::OVERHEAD] {
        let mut b = h.clone();
        b.extend_from_slice(&frame(t, &[0; 32]));
        b.extend_from_slice(&frame(t, &[0; 32]));
        let e = err(&seal(&b));
        assert!(matches!(e.kind, FormatErrorKind::Duplicate { .. }), "{e}");
        assert_eq!(e.offset, (12 + h.len() + 40) as u64);
    }
    // A record too short for its fields.
    let mut b = h.clone();
    b.extend_from_slice(&frame(tag::CPU, &[0; 27]));
    assert_eq!(err(&seal(&b)).kind, FormatErrorKind::TooShort { record: "cpu", len: 27 });
    // Zeroed data where a record should be.
    let mut z = b"LOCKMTR\0\x01\0\0\0".to_vec();
    z.extend_from_slice(&[0; 64]);
    assert_eq!(err(&z).kind, FormatErrorKind::BadTag { tag: 0 });
}

#[test]
fn enum_codes_and_utf8_are_validated() {
    let h = frame(tag::HEADER, &header_payload());
    let with = |f: Vec<u8>| {
        let mut b = h.clone();
        b.extend_from_slice(&f);
        seal(&b)
    };
    // Header: hold timing at 57, end reason at 58, collector (strict UTF-8) at 84.
    for (at, v, field) in [(57, 3u8, "hold timing"), (58, 9, "end reason")] {
        let mut p = header_payload();
        p[at] = v;
        let e = err(&seal(&frame(tag::HEADER, &p)));
        assert_eq!(e.kind, FormatErrorKind::BadCode { record: "header", field, code: v.into() });
    }
    let mut p = header_payload();
    p[84] = 0xff;
    assert_eq!(
        err(&seal(&frame(tag::HEADER, &p))).kind,
        FormatErrorKind::BadUtf8 { record: "header", field: "collector" }
    );

    // Lock: kind at 16, name presence at 17.
    let mut lock = Vec::new();
    lock.extend_from_slice(&1u32.to_le_bytes());
    lock.extend_from_slice(&2u64.to_le_bytes());
    lock.extend_from_slice(&3u32.to_le_bytes());
    lock.extend_from_slice(&[1, 0]);
    lock.extend_from_slice(&0u32.to_le_bytes());
    assert!(read_profile(&with(frame(tag::LOCK, &lock))).is_ok());
    for (at, v, field) in [(16, 0u8, "lock kind"), (16, 99, "lock kind"), (17, 2, "name presence")]
    {
        let mut l = lock.clone();
        l[at] = v;
        let e = err(&with(frame(tag::LOCK, &l)));
        assert_eq!(e.kind, FormatErrorKind::BadCode { record: "lock", field, code: v.into() });
        assert_eq!(e.offset, (12 + h.len()) as u64);
    }

    // Stats: mode at 16, histograms from 121.
    let mut e = Encoder::begin(Vec::new()).unwrap();
    let mut s = Stats::default();
    s.wait_hist[5] = 1;
    s.wait_hist[6] = 1;
    e.header(&HeaderRef::default()).unwrap();
    e.stats(1, 1, 1, Mode::Read, &s).unwrap();
    let body = frames(&e.finish().unwrap()).to_vec();
    let rec = body.len() - (8 + 121 + 1 + 18 + 1);
    assert_eq!(&body[rec..rec + 2], &tag::RECORD.to_le_bytes());
    let p = rec + 8;
    for (at, v, want) in [
        (16, 3u8, "mode"),
        (121, 66, "more buckets than a histogram has"),
        (122, 65, "bucket index out of range"),
        (131, 5, "buckets out of order or repeated"),
        (131, 4, "buckets out of order or repeated"),
    ] {
        let mut m = body.clone();
        m[p + at] = v;
        let e = err(&seal(&m));
        let ok = match &e.kind {
            FormatErrorKind::BadCode { field, .. } => *field == want,
            FormatErrorKind::BadHistogram { why, .. } => *why == want,
            _ => false,
        };
        assert!(ok, "{at}: {e}");
    }
}

#[test]
fn checksum_covers_file_header_and_frames() {
    // Swapping two records keeps every record valid but changes the checksum.
    let b = encoded();
    let body = frames(&b);
    let first_len = 8 + u32::from_le_bytes(body[4..8].try_into().unwrap()) as usize;
    let mut swapped = body[first_len..].to_vec();
    swapped.extend_from_slice(&body[..first_len]);
    let mut m = b[..12].to_vec();
    m.extend_from_slice(&swapped);
    m.extend_from_slice(&b[b.len() - 24..]);
    assert!(matches!(err(&m).kind, FormatErrorKind::ChecksumMismatch { .. }));
    // ...and when re-sealed it is a valid profile with the same content.
    assert_eq!(read_profile(&seal(&swapped)).unwrap(), rich_profile());
}

#[test]
fn timeline_records_must_come_in_order() {
    let h = frame(tag::HEADER, &header_payload());
    let interval = |i: u32, start: u64, end: u64| {
        let mut p = i.to_le_bytes().to_vec();
        p.extend_from_slice(&start.to_le_bytes());
        p.extend_from_slice(&end.to_le_bytes());
        frame(tag::INTERVAL, &p)
    };
    let row = |i: u32| {
        let mut p = i.to_le_bytes().to_vec();
        p.extend_from_slice(&0u32.to_le_bytes());
        p.extend_from_slice(&[1; 32]);
        frame(tag::INTERVAL_LOCK, &p)
    };
    let bad =
        FormatErrorKind::BadCode { record: "interval lock", field: "interval index", code: 0 };
    // A lock row before its interval.
    let mut b = h.clone();
    b.extend_from_slice(&row(0));
    assert_eq!(err(&seal(&b)).kind, bad);
    // An interval out of order, and one that ends before it starts.
    let mut b = h.clone();
    b.extend_from_slice(&interval(1, 0, 10));
    assert!(matches!(
        err(&seal(&b)).kind,
        FormatErrorKind::BadCode { field: "interval index", .. }
    ));
    let mut b = h.clone();
    b.extend_from_slice(&interval(0, 10, 5));
    assert!(matches!(
        err(&seal(&b)).kind,
        FormatErrorKind::BadCode { field: "interval index", .. }
    ));
    // In order: read back.
    let mut b = h;
    b.extend_from_slice(&interval(0, 0, 10));
    b.extend_from_slice(&row(0));
    b.extend_from_slice(&interval(1, 10, 20));
    let p = read_profile(&seal(&b)).unwrap();
    assert_eq!(p.timeline.len(), 2);
    assert_eq!(p.timeline[0].locks[0].acquisitions, 0x0101_0101_0101_0101);
    assert!(p.timeline[1].locks.is_empty());
}

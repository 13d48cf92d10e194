//! Round trips and the writer's behavior.

mod common;

use common::{encoded, rich_profile};
use lockmeter_format::layout::{self, MAX_STRING, flags, tag};
use lockmeter_format::*;

/// Frames of an encoded file: (offset, tag, flags, payload).
fn frames(b: &[u8]) -> Vec<(usize, u16, u16, &[u8])> {
    let mut out = Vec::new();
    let mut pos = layout::FILE_HEADER_LEN;
    while pos < b.len() {
        let t = u16::from_le_bytes([b[pos], b[pos + 1]]);
        let f = u16::from_le_bytes([b[pos + 2], b[pos + 3]]);
        let len = u32::from_le_bytes(b[pos + 4..pos + 8].try_into().unwrap()) as usize;
        out.push((pos, t, f, &b[pos + 8..pos + 8 + len]));
        pos += 8 + len;
    }
    out
}

#[test]
fn rich_profile_round_trips() {
    let p = rich_profile();
    let bytes = to_bytes(&p).unwrap();
    assert_eq!(read_profile(&bytes).unwrap(), p);
}

#[test]
fn default_profile_round_trips() {
    let p = Profile::default();
    assert_eq!(read_profile(&to_bytes(&p).unwrap()).unwrap(), p);
}

#[test]
fn cmdline_edge_cases_round_trip() {
    for args in [vec![], vec![""], vec!["", ""], vec!["a", "", "b"], vec!["x"]] {
        let mut p = Profile::default();
        p.header.cmdline = args.iter().map(|s| s.to_string()).collect();
        assert_eq!(read_profile(&to_bytes(&p).unwrap()).unwrap(), p, "{args:?}");
    }
}

#[test]
fn write_profile_and_read_profile_file() {
    let p = rich_profile();
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("format-roundtrip.lmp");
    write_profile(&p, std::fs::File::create(&path).unwrap()).unwrap();
    assert_eq!(read_profile_file(&path).unwrap(), p);
    let _ = std::fs::remove_file(&path);
}

#[test]
fn encoder_on_fixed_buffer_matches_to_bytes() {
    let p = rich_profile();
    let expected = to_bytes(&p).unwrap();
    let mut buf = vec![0u8; expected.len()];
    let sink = encode_profile(&p, SliceSink::new(&mut buf)).unwrap();
    assert_eq!(sink.written(), &expected[..]);

    // Through a small write buffer in front of the fixed buffer: same bytes.
    let mut buf2 = vec![0u8; expected.len()];
    let sink = encode_profile(&p, BufSink::<_, 256>::new(SliceSink::new(&mut buf2))).unwrap();
    let inner = sink.into_inner().unwrap();
    assert_eq!(inner.written(), &expected[..]);
}

#[test]
fn sink_full_is_reported_and_sticky() {
    let p = rich_profile();
    let len = encoded().len();
    for cap in [0, 5, 12, 100, len / 2, len - 1] {
        let mut buf = vec![0u8; cap];
        match encode_profile(&p, SliceSink::new(&mut buf)) {
            Err(EncodeError::Sink(SinkError::Full)) => {}
            other => panic!("cap {cap}: {other:?}"),
        }
    }
    let mut buf = [0u8; 40];
    let mut e = Encoder::begin(SliceSink::new(&mut buf)).unwrap();
    assert_eq!(e.thread(1, 2, &[b'x'; 100]), Err(EncodeError::Sink(SinkError::Full)));
    // Sticky: even a record that would fit fails now.
    assert_eq!(e.cpu(&CpuStats::default()), Err(EncodeError::Sink(SinkError::Full)));
    assert_eq!(e.bytes_written(), 12);
}

#[test]
fn misuse_is_refused_without_writing() {
    let e = Encoder::begin(Vec::new()).unwrap();
    assert_eq!(e.finish().unwrap_err(), EncodeError::Misuse("finish without a header"));
    let mut e = Encoder::begin(Vec::new()).unwrap();
    e.header(&HeaderRef::default()).unwrap();
    let n = e.bytes_written();
    assert!(matches!(e.header(&HeaderRef::default()), Err(EncodeError::Misuse(_))));
    e.dropped(&Dropped::default()).unwrap();
    assert!(matches!(e.dropped(&Dropped::default()), Err(EncodeError::Misuse(_))));
    e.overhead(&Overhead::default()).unwrap();
    assert!(matches!(e.overhead(&Overhead::default()), Err(EncodeError::Misuse(_))));
    assert_eq!(e.records_written(), 3);
    assert!(e.bytes_written() > n);
    let v = e.finish().unwrap();
    assert!(read_profile(&v).is_ok());
}

#[test]
fn long_strings_are_cut_at_a_char_boundary_and_flagged() {
    // 'é' is 2 bytes: MAX_STRING + 1 bytes of it would be split mid-character at MAX_STRING.
    let long = "é".repeat(MAX_STRING / 2 + 1);
    let mut e = Encoder::begin(Vec::new()).unwrap();
    e.header(&HeaderRef { exe: long.as_bytes(), ..HeaderRef::default() }).unwrap();
    e.thread(1, 1, long.as_bytes()).unwrap();
    e.thread(2, 2, &[b'n'; 5000]).unwrap(); // longer than RECORD_BUF, not cut
    let bytes = e.finish().unwrap();
    let fr = frames(&bytes);
    assert_eq!(fr[0].1, tag::HEADER);
    assert_eq!(fr[0].2 & flags::TRUNCATED, flags::TRUNCATED);
    assert_eq!(fr[2].2 & flags::TRUNCATED, 0);
    let p = read_profile(&bytes).unwrap();
    assert_eq!(p.header.exe.len(), MAX_STRING);
    assert!(long.starts_with(&p.header.exe));
    assert_eq!(p.threads[0].name, p.header.exe);
    assert_eq!(p.threads[1].name.len(), 5000);
}

#[test]
fn raw_bytes_are_read_lossily() {
    let mut e = Encoder::begin(Vec::new()).unwrap();
    e.header(&HeaderRef { cmdline: b"a\xffb\0c\0", exe: b"/bin/\xfe", ..HeaderRef::default() })
        .unwrap();
    e.lock(1, 2, 3, LockKind::RwLock, Some(b"\xc3")).unwrap();
    let p = read_profile(&e.finish().unwrap()).unwrap();
    assert_eq!(p.header.cmdline, ["a\u{fffd}b", "c"]);
    assert_eq!(p.header.exe, "/bin/\u{fffd}");
    assert_eq!(p.locks[0].name.as_deref(), Some("\u{fffd}"));
}

#[test]
fn unknown_records_are_skipped_unless_critical() {
    let base = encoded();
    let body = fuzzing::frames(&base);
    let unknown = |flags: u16| {
        let mut f = Vec::new();
        f.extend_from_slice(&0x0042u16.to_le_bytes());
        f.extend_from_slice(&flags.to_le_bytes());
        f.extend_from_slice(&5u32.to_le_bytes());
        f.extend_from_slice(b"hello");
        f
    };
    let mut with = unknown(0);
    with.extend_from_slice(body);
    assert_eq!(read_profile(&fuzzing::seal(&with)).unwrap(), rich_profile());

    let mut critical = unknown(flags::CRITICAL);
    critical.extend_from_slice(body);
    let e = read_profile(&fuzzing::seal(&critical)).unwrap_err();
    assert_eq!(e.kind, FormatErrorKind::NeedsNewer { tag: 0x42 });
    assert_eq!(e.offset, 12);
    assert!(e.to_string().contains("upgrade lockmeter"), "{e}");
}

#[test]
fn fields_appended_to_a_payload_are_ignored() {
    let mut f = Vec::new();
    let mut e = Encoder::begin(&mut f).unwrap();
    e.header(&HeaderRef::default()).unwrap();
    e.cpu(&CpuStats { cpu: 3, acquisitions: 4, contended: 5, wait_ns: 6 }).unwrap();
    e.finish().unwrap();
    let mut body = fuzzing::frames(&f).to_vec();
    // The CPU record is last: grow its length by 4 and append 4 bytes.
    let n = body.len();
    let cpu_at = n - (8 + 28);
    assert_eq!(&body[cpu_at..cpu_at + 2], &tag::CPU.to_le_bytes());
    body[cpu_at + 4..cpu_at + 8].copy_from_slice(&32u32.to_le_bytes());
    body.extend_from_slice(&[9, 9, 9, 9]);
    let p = read_profile(&fuzzing::seal(&body)).unwrap();
    assert_eq!(p.cpus, [CpuStats { cpu: 3, acquisitions: 4, contended: 5, wait_ns: 6 }]);
}

#[test]
fn map_lines_parse() {
    let l = b"7f1c2a000000-7f1c2a021000 r-xp 00001000 08:01 1234                       /usr/lib/libc.so.6\n";
    let m = MapRef::parse_line(l).unwrap();
    assert_eq!(
        m,
        MapRef {
            start: 0x7f1c_2a00_0000,
            end: 0x7f1c_2a02_1000,
            offset: 0x1000,
            perms: b"r-xp",
            path: b"/usr/lib/libc.so.6"
        }
    );
    let anon = MapRef::parse_line(b"00400000-00401000 rw-p 00000000 00:00 0 ").unwrap();
    assert_eq!(anon.path, b"");
    let spaces = MapRef::parse_line(b"1-2 r--p 0 00:00 0   /tmp/a b (deleted)").unwrap();
    assert_eq!(spaces.path, b"/tmp/a b (deleted)");
    for bad in [&b""[..], b"xyz", b"1-2 r--p", b"1-g r--p 0 0 0", b"12 r--p 0 0 0"] {
        assert_eq!(MapRef::parse_line(bad), None, "{:?}", String::from_utf8_lossy(bad));
    }
    let mut e = Encoder::begin(Vec::new()).unwrap();
    e.header(&HeaderRef::default()).unwrap();
    e.map(&m).unwrap();
    let p = read_profile(&e.finish().unwrap()).unwrap();
    assert_eq!(p.maps[0].path, "/usr/lib/libc.so.6");
    assert_eq!(p.maps[0].start, 0x7f1c_2a00_0000);
}

/// Pins the bytes of a minimal file: a change here is a format change (see FORMAT.md).
#[test]
fn minimal_file_bytes_are_stable() {
    let mut e = Encoder::begin(Vec::new()).unwrap();
    e.header(&HeaderRef { collector: "t", pid: 7, ..HeaderRef::default() }).unwrap();
    e.cpu(&CpuStats { cpu: 1, acquisitions: 2, contended: 3, wait_ns: 4 }).unwrap();
    let b = e.finish().unwrap();
    let mut want = Vec::new();
    want.extend_from_slice(b"LOCKMTR\0");
    want.extend_from_slice(&[1, 0, 0, 0]); // version 1
    want.extend_from_slice(&[1, 0, 0, 0, 85, 0, 0, 0]); // HEADER, flags 0, 85 bytes
    want.extend_from_slice(&7u32.to_le_bytes()); // pid
    want.extend_from_slice(&[0; 12]); // ppid, image_seq, cpu_count
    want.extend_from_slice(&[0; 40]); // start, end, duration, hz, hz_run
    want.extend_from_slice(&[0, 0, 0, 0]); // source, hold timing On, end reason Exit, reserved
    want.extend_from_slice(&[0; 8]); // sample period, signal
    want.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]); // string lengths
    want.push(b't'); // collector
    want.extend_from_slice(&[6, 0, 0, 0, 28, 0, 0, 0]); // CPU, flags 0, 28 bytes
    want.extend_from_slice(&[1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0]);
    want.extend_from_slice(&[4, 0, 0, 0, 0, 0, 0, 0]);
    want.extend_from_slice(&[0xff, 0xff, 0, 0, 16, 0, 0, 0]); // END
    want.extend_from_slice(&2u64.to_le_bytes()); // two records
    let sum = layout::fnv1a64(&want); // of every byte before the checksum
    want.extend_from_slice(&sum.to_le_bytes());
    assert_eq!(b, want);
}

#[test]
fn stats_record_layout_is_sparse() {
    let mut s = Stats { acquisitions: 1, ..Stats::default() };
    s.wait_hist[3] = 5;
    s.hold_hist[0] = 1;
    s.hold_hist[64] = 2;
    let mut e = Encoder::begin(Vec::new()).unwrap();
    e.header(&HeaderRef::default()).unwrap();
    e.stats(1, 2, 3, Mode::Write, &s).unwrap();
    let b = e.finish().unwrap();
    let fr = frames(&b);
    let (_, t, _, payload) = fr[1];
    assert_eq!(t, tag::RECORD);
    // 17 bytes of ids and mode, 13 counters, then 1 + 9 and 1 + 2 * 9 bytes of histograms.
    assert_eq!(payload.len(), 17 + 13 * 8 + 10 + 19);
    assert_eq!(payload[16], 2); // Mode::Write
    assert_eq!(&payload[121..131], &[1, 3, 5, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(payload[131], 2);
    assert_eq!(read_profile(&b).unwrap().records[0].stats, s);
}

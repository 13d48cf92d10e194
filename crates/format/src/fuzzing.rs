//! The fuzz entry point, shared by the cargo-fuzz target (`fuzz/fuzz_targets/read_profile.rs`)
//! and the stable smoke test (`tests/fuzz_smoke.rs`).
//!
//! [`check`] panics only when the reader breaks its contract: a panic inside the reader, an
//! error message that is not one line, or a profile that does not survive a write and re-read.

use crate::layout::{END_PAYLOAD_LEN, FILE_HEADER_LEN, FRAME_LEN, Fnv64, MAGIC, VERSION, tag};
use crate::{read_profile, read_run, run_to_bytes, to_bytes};

/// Checks the reader on `data` as given, and on [`seal`]`(data)` (the same bytes made into a
/// file with a valid header and END record, so that mutations get past the checksum and reach
/// the record decoders).
pub fn check(data: &[u8]) {
    check_one(data);
    let sealed = seal(data);
    check_one(&sealed);
    // The same as run files: as given, and as a run of two sealed profiles.
    check_run(data);
    check_run(&[&sealed[..], &sealed[..]].concat());
}

/// Reads `data` as a run file; on success, writes the run and reads it back, which must give
/// the same run; on failure, the message must be one line with an offset inside the input.
pub fn check_run(data: &[u8]) {
    match read_run(data) {
        Ok(r) => {
            assert!(!r.processes.is_empty(), "a run read with no process");
            let bytes = match run_to_bytes(&r) {
                Ok(b) => b,
                Err(e) => panic!("a run that was read cannot be written: {e}"),
            };
            match read_run(&bytes) {
                Ok(q) => assert_eq!(r, q, "run changed through write + read"),
                Err(e) => panic!("a re-written run does not read back: {e}"),
            }
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(!msg.is_empty() && !msg.contains('\n'), "bad message {msg:?}");
            assert!(e.offset <= data.len() as u64, "offset {} past the input", e.offset);
        }
    }
}

/// Reads `data`; on success, writes the profile and reads it back, which must give the same
/// profile; on failure, the message must be one non-empty line.
pub fn check_one(data: &[u8]) {
    match read_profile(data) {
        Ok(p) => {
            let bytes = match to_bytes(&p) {
                Ok(b) => b,
                Err(e) => panic!("a profile that was read cannot be written: {e}"),
            };
            match read_profile(&bytes) {
                Ok(q) => assert_eq!(p, q, "profile changed through write + read"),
                Err(e) => panic!("a re-written profile does not read back: {e}"),
            }
        }
        Err(e) => {
            let msg = e.to_string();
            assert!(!msg.is_empty() && !msg.contains('\n'), "bad message {msg:?}");
            assert!(e.offset <= data.len() as u64, "offset {} past the input", e.offset);
        }
    }
}

/// Makes a well-framed file out of arbitrary bytes: magic and version, then the frames that
/// `body` starts with (up to the first one cut short or an END), then a correct END record.
pub fn seal(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len().saturating_add(64));
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    let mut pos = 0usize;
    let mut count = 0u64;
    while let Some(head) = body.get(pos..pos.saturating_add(FRAME_LEN)) {
        let t = u16::from_le_bytes([head[0], head[1]]);
        let len = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as usize;
        let end = pos.saturating_add(FRAME_LEN).saturating_add(len);
        if t == tag::END || end > body.len() {
            break;
        }
        out.extend_from_slice(&body[pos..end]);
        count += 1;
        pos = end;
    }
    out.extend_from_slice(&tag::END.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&END_PAYLOAD_LEN.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    let mut h = Fnv64::new();
    h.update(&out);
    out.extend_from_slice(&h.value().to_le_bytes());
    debug_assert!(out.len() >= FILE_HEADER_LEN);
    out
}

/// The frames of a well-framed file (between the file header and the END record), for
/// building fuzz seeds: `seal(frames(file))` rebuilds `file`.
pub fn frames(file: &[u8]) -> &[u8] {
    let body = file.get(FILE_HEADER_LEN..).unwrap_or_default();
    body.get(..body.len().saturating_sub(FRAME_LEN + END_PAYLOAD_LEN as usize)).unwrap_or_default()
}

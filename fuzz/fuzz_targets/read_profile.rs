//! Fuzzes the profile and run-file reader: `cargo +nightly fuzz run read_profile` (see fuzz/README.md).
//!
//! The same entry point runs on stable, deterministically, in
//! `crates/format/tests/fuzz_smoke.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Reads `data` as a file, and again sealed with a valid header and END record so that
    // mutations reach the record decoders; any profile read must survive write + re-read. The
    // same bytes are read as a run file (profiles back to back), alone and as a run of two.
    lockmeter_format::fuzzing::check(data);
});

//! lockmeter's profile model and its versioned binary file encoding.
//!
//! - [`model`]: the data every collector produces and every report reads ([`Profile`]).
//! - The writer, [`Encoder`]: streams a profile record by record into a [`Sink`] with fixed-size
//!   stack buffers only: no allocation, no panics, no locks, so the LD_PRELOAD collector can call
//!   it from a signal handler or right before `_exit`/`exec`. It takes borrowed inputs
//!   ([`HeaderRef`], [`MapRef`], byte slices, `&Record`), so the caller builds no owned model
//!   values. [`write_profile`], [`to_bytes`] and [`encode_profile`] write a whole [`Profile`].
//! - The reader, [`read_profile`] / [`read_profile_file`]: never panics on any input, bounds
//!   every allocation by the input's length, and explains every failure in one line naming the
//!   byte offset ([`FormatError`], [`FileError`]).
//! - A run file ([`Run`], [`read_run`]): the profiles of every process of one run, back to
//!   back; a single profile's file is a run of one.
//! - [`layout`]: the constants of the layout, documented byte by byte in `FORMAT.md`: magic
//!   `LOCKMTR\0`, a `u32` format version, then framed little-endian records
//!   `[tag u16][flags u16][len u32][payload]` ending with an END record that carries the record
//!   count and an FNV-1a 64 checksum of everything before it, so truncation and corruption are
//!   detected. Unknown tags are skipped; histograms are stored sparsely.
//! - [`fuzzing`]: the fuzz entry point shared by `fuzz/` (cargo-fuzz, nightly) and the stable
//!   smoke test `tests/fuzz_smoke.rs`.
//!
//! # Example
//!
//! Writing with the allocation-free encoder into a fixed buffer, then reading back:
//!
//! ```
//! use lockmeter_format::*;
//!
//! let mut buf = [0u8; 8192];
//! let mut enc = Encoder::begin(SliceSink::new(&mut buf))?;
//! enc.header(&HeaderRef {
//!     collector: "preload",
//!     lockmeter_version: "0.1.0",
//!     pid: 4242,
//!     cmdline: b"./server\0--threads\08\0", // as /proc/self/cmdline gives it
//!     exe: b"/usr/bin/server",
//!     end_reason: EndReason::Signal(15),
//!     ..HeaderRef::default()
//! })?;
//! enc.thread(1, 4243, b"worker-1")?;
//! enc.lock(7, 0x5555_0000_1000, 0, LockKind::Mutex, Some(b"queue"))?;
//! let mut stats = Stats::default();
//! stats.acquisitions = 10;
//! stats.contended = 3;
//! stats.wait_hist[10] = 3; // three waits in [512, 1024) ns
//! enc.stats(1, 7, 0x4011_2233, Mode::Exclusive, &stats)?;
//! let sink = enc.finish()?;
//!
//! let profile = read_profile(sink.written())?;
//! assert_eq!(profile.header.cmdline, ["./server", "--threads", "8"]);
//! assert_eq!(profile.header.end_reason, EndReason::Signal(15));
//! assert_eq!(profile.locks[0].name.as_deref(), Some("queue"));
//! assert_eq!(profile.records[0].stats, stats);
//!
//! // A whole Profile round-trips through write_profile / read_profile.
//! let mut file = Vec::new();
//! write_profile(&profile, &mut file)?;
//! assert_eq!(read_profile(&file)?, profile);
//!
//! // Damage is reported in one line, with the offset.
//! let err = read_profile(&file[..file.len() - 3]).unwrap_err();
//! assert!(err.to_string().starts_with("truncated at offset"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]

/// Modules that must never panic (the reader, on any input) or allocate where the preload calls
/// them (the writer): no indexing that can panic, no unwrap, no unchecked arithmetic. The lints
/// are listed here once; each module's children inherit them.
macro_rules! panic_free {
    ($($vis:vis mod $name:ident;)*) => {
        $(
            #[deny(
                clippy::indexing_slicing,
                clippy::unwrap_used,
                clippy::expect_used,
                clippy::panic,
                clippy::arithmetic_side_effects
            )]
            $vis mod $name;
        )*
    };
}

panic_free! {
    mod decode;
    mod encode;
    pub mod layout;
    mod run;
}
pub mod files;
pub mod fuzzing;
pub mod merge;
pub mod model;

pub use decode::{
    FileError, FileErrorKind, FormatError, FormatErrorKind, read_profile, read_profile_file,
};
pub use encode::{
    BufSink, EncodeError, Encoder, HeaderRef, IoSink, MAX_STACK_FRAMES, MapRef, RECORD_BUF, Sink,
    SinkError, SliceSink, encode_profile, to_bytes, write_profile,
};
pub use model::*;
pub use run::{Run, join_files, read_run, read_run_file, run_to_bytes};

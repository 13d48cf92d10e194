//! What can be wrong with a profile's bytes or file ([`FormatError`], [`FileError`]), and the
//! one-line messages that say so.

use core::fmt;
use std::io;
use std::path::PathBuf;

use crate::layout::{END_PAYLOAD_LEN, MAX_PAYLOAD, MAX_STRING, VERSION, tag};

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
    /// The first 8 bytes are not [`MAGIC`](crate::layout::MAGIC); `looks_like` names what the file seems to be.
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
    /// An unknown record flagged [`flags::CRITICAL`](crate::layout::flags::CRITICAL): a newer writer's record that may not be
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

//! A run file: the profiles of every process one `lockmeter run` metered, in one file.
//!
//! A [`Profile`] is one process image (its maps, stacks and addresses mean nothing in another
//! process), so a run is a list of them: [`Run`]. Its file is the profiles' files back to back,
//! each complete (magic, version, records, END with its own checksum); a file of one profile,
//! which is every file older lockmeters wrote, is a run of one. See `FORMAT.md`, "Run files".

use std::path::Path;

use crate::decode::{FileError, FileErrorKind, FormatError, FormatErrorKind, member_len};
use crate::encode::EncodeError;
use crate::layout::MAGIC;
use crate::model::Profile;

/// The profiles of one run: the root process's first (its header names the command the user
/// ran), then the others in the order they were written.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Run {
    /// One profile per process image, never empty when read from a file.
    pub processes: Vec<Profile>,
}

impl Run {
    /// A run of one profile.
    pub fn single(p: Profile) -> Run {
        Run { processes: vec![p] }
    }

    /// The root process's profile (the first), if any.
    pub fn root(&self) -> Option<&Profile> {
        self.processes.first()
    }
}

/// Reads a run file: one or more profiles back to back. Never panics; an error names the byte
/// offset in the whole file. Bytes after a profile that do not start another one are an error
/// (as [`crate::read_profile`] reports them).
pub fn read_run(bytes: &[u8]) -> Result<Run, FormatError> {
    let mut processes = Vec::new();
    let mut pos = 0usize;
    loop {
        let rest = bytes.get(pos..).unwrap_or_default();
        if !processes.is_empty() && !rest.starts_with(&MAGIC) {
            let len = rest.len() as u64;
            return Err(FormatError::new(pos, FormatErrorKind::TrailingData { len }));
        }
        let len = member_len(rest).unwrap_or(rest.len());
        let one = rest.get(..len).unwrap_or(rest);
        processes.push(crate::read_profile(one).map_err(|e| e.shifted(pos))?);
        pos = pos.saturating_add(len.max(1));
        if pos >= bytes.len() {
            return Ok(Run { processes });
        }
    }
}

/// Reads the run file at `path`; errors name the file.
pub fn read_run_file(path: &Path) -> Result<Run, FileError> {
    let bytes = std::fs::read(path)
        .map_err(|e| FileError { path: path.to_path_buf(), kind: FileErrorKind::Io(e) })?;
    read_run(&bytes)
        .map_err(|e| FileError { path: path.to_path_buf(), kind: FileErrorKind::Format(e) })
}

/// Encodes a run: each profile's file, back to back (a run of one is an ordinary profile file).
pub fn run_to_bytes(run: &Run) -> Result<Vec<u8>, EncodeError> {
    let mut out = Vec::new();
    for p in &run.processes {
        out.extend_from_slice(&crate::to_bytes(p)?);
    }
    Ok(out)
}

/// Joins profile files' bytes into a run file, checking that each is one readable profile.
/// The error names which of them is not (its index) and why.
pub fn join_files(files: &[Vec<u8>]) -> Result<Vec<u8>, (usize, FormatError)> {
    let mut out = Vec::with_capacity(files.iter().map(Vec::len).fold(0, usize::saturating_add));
    for (i, f) in files.iter().enumerate() {
        crate::read_profile(f).map_err(|e| (i, e))?;
        out.extend_from_slice(f);
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;
    use crate::model::Header;

    fn profile(pid: u32) -> Profile {
        Profile { header: Header { pid, ..Header::default() }, ..Profile::default() }
    }

    #[test]
    fn a_single_profile_file_is_a_run_of_one() {
        let bytes = crate::to_bytes(&profile(7)).unwrap();
        assert_eq!(read_run(&bytes).unwrap(), Run::single(profile(7)));
    }

    #[test]
    fn several_profiles_round_trip_and_errors_name_the_offset_in_the_file() {
        let run = Run { processes: vec![profile(1), profile(2), profile(3)] };
        let bytes = run_to_bytes(&run).unwrap();
        assert_eq!(read_run(&bytes).unwrap(), run);
        let one = crate::to_bytes(&profile(1)).unwrap().len();
        // The second profile cut short: truncated at the end of the input.
        let cut = &bytes[..one + 20];
        let e = read_run(cut).unwrap_err();
        assert!(e.is_truncated(), "{e}");
        assert_eq!(e.offset, cut.len() as u64);
        // A damaged byte in the third: its offset is in the whole file.
        let mut bad = bytes.clone();
        bad[2 * one + 30] ^= 0xff;
        let e = read_run(&bad).unwrap_err();
        assert!(e.offset >= 2 * one as u64, "{e}");
        // Garbage after a profile.
        let mut junk = bytes.clone();
        junk.extend_from_slice(b"xyz");
        let e = read_run(&junk).unwrap_err();
        assert_eq!(e.kind, FormatErrorKind::TrailingData { len: 3 });
        assert_eq!(e.offset, bytes.len() as u64);
        // An old reader's view of a run of several: one profile and trailing data.
        assert!(crate::read_profile(&bytes).is_err());
    }

    #[test]
    fn join_checks_each_file() {
        let a = crate::to_bytes(&profile(1)).unwrap();
        let b = crate::to_bytes(&profile(2)).unwrap();
        let joined = join_files(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(read_run(&joined).unwrap().processes.len(), 2);
        let (i, _) = join_files(&[a, b[..10].to_vec()]).unwrap_err();
        assert_eq!(i, 1);
        assert!(read_run(&[]).is_err());
    }
}

//! One file per run: the processes of a run write their profiles into a private directory
//! ([`RunDir`]); when the program ends, `run` joins them into the one file the user asked for
//! ([`collect`]) and removes them. A process still running then (a daemon) is named, not waited
//! for.

use anyhow::{Context, Result};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use crate::tree::Tree;

/// A private directory (mode 0700, created new under the temporary directory) for the
/// profiles a run's processes write; removed when dropped (empty: [`collect`] removes the
/// profiles), unless a process still running will write into it.
#[derive(Debug)]
pub(crate) struct RunDir {
    dir: PathBuf,
    keep: std::cell::Cell<bool>,
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if !self.keep.get() {
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}

impl RunDir {
    /// A new directory; the error says what to do.
    pub(crate) fn create() -> Result<RunDir> {
        let base = std::env::temp_dir();
        let mut last = None;
        for n in 0..100 {
            let dir = base.join(format!("lockmeter-run-{}-{n}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
                Ok(()) => return Ok(RunDir { dir, keep: std::cell::Cell::new(false) }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(e) => {
                    last = Some(e);
                    break;
                }
            }
        }
        let e = last.map(|e| e.to_string()).unwrap_or_default();
        anyhow::bail!(
            "cannot create a private directory in {} for the run's profiles ({e}); set TMPDIR to a writable directory",
            base.display()
        )
    }

    /// The name the first process writes (the others write `NAME.PID[.N]` beside it).
    pub(crate) fn first_profile(&self) -> PathBuf {
        self.dir.join("run.lmp")
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.dir
    }
}

/// What [`collect`] did.
#[derive(Debug, Default)]
pub(crate) struct Collected {
    /// The run file written (`None`: no process wrote a profile).
    pub(crate) file: Option<PathBuf>,
    /// Every process image that wrote a profile or left a line in the manifest, idle launchers
    /// included (for the summary).
    pub(crate) tree: Tree,
    /// Processes still running when the program ended, `name[pid]`: not collected.
    pub(crate) left: Vec<String>,
}

/// Joins the run's profiles (`main`, the first process's, then `others`) into one new file at
/// `output` ([`lockmeter_format::files::write_new`]): each image that took a lock, and the
/// first one even if it took none; the file's first profile counts the images left out and
/// what starting and ending them cost (OVERHEAD's `other_images`, `other_fixed_ns`), so that
/// the run's estimate has them. Then removes the profiles; `dir` is kept when a process of
/// the run is still running (it writes into `dir` when it ends; it is named in `left`).
pub(crate) fn collect(
    output: &Path,
    main: Option<PathBuf>,
    others: Vec<PathBuf>,
    dir: &RunDir,
    manifest: Option<&Path>,
) -> Result<Collected> {
    let paths: Vec<PathBuf> = main.iter().chain(&others).cloned().collect();
    let mut tree = Tree::read(&paths);
    if let Some(m) = manifest {
        tree.add_idle(crate::tree::idle_images(m));
    }
    let mut files = Vec::new();
    let (mut other_images, mut other_fixed_ns) = (0u64, 0u64);
    for im in &tree.images {
        let first = main.as_ref() == Some(&im.path);
        if first || im.acquisitions > 0 {
            files.push(std::fs::read(&im.path).with_context(|| {
                format!("cannot read the profile {} of the run", im.path.display())
            })?);
        } else {
            other_images += 1;
            other_fixed_ns = other_fixed_ns.saturating_add(im.fixed_ns);
        }
    }
    if other_images > 0
        && let Some(first) = files.first_mut()
    {
        *first = with_others(first, other_images, other_fixed_ns)?;
    }
    let file = if files.is_empty() {
        None
    } else {
        let bytes = lockmeter_format::join_files(&files).map_err(|(i, e)| {
            anyhow::anyhow!("a profile of the run is unreadable (#{i}: {e}); run again")
        })?;
        lockmeter_format::files::write_new(output, &bytes)?;
        Some(output.to_path_buf())
    };
    let left = manifest.map(still_running).unwrap_or_default();
    for p in &paths {
        let _ = std::fs::remove_file(p);
    }
    dir.keep.set(!left.is_empty());
    Ok(Collected { file, tree, left })
}

/// The profile `bytes` with the run's images left out of the file counted in its OVERHEAD.
fn with_others(bytes: &[u8], images: u64, fixed_ns: u64) -> Result<Vec<u8>> {
    let mut p = lockmeter_format::read_profile(bytes).map_err(|e| {
        anyhow::anyhow!("the first profile of the run is unreadable ({e}); run again")
    })?;
    p.overhead.other_images = images;
    p.overhead.other_fixed_ns = fixed_ns;
    lockmeter_format::to_bytes(&p).map_err(|e| {
        anyhow::anyhow!("cannot encode the run's first profile again ({e}); run again")
    })
}

/// The processes still running whose environment names this run's manifest (they were started
/// under it and will write their profiles when they end), as `name[pid]`.
fn still_running(manifest: &Path) -> Vec<String> {
    let mut left: Vec<String> = crate::guards::run_processes(manifest)
        .into_iter()
        .filter(|(_, comm)| comm != crate::guards::GUARDIAN_NAME)
        .map(|(pid, comm)| format!("{comm}[{pid}]"))
        .collect();
    left.sort();
    left
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_directory_is_private_and_new() {
        use std::os::unix::fs::PermissionsExt;
        let a = RunDir::create().unwrap();
        let b = RunDir::create().unwrap();
        assert_ne!(a.path(), b.path());
        let mode = std::fs::metadata(a.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        assert!(a.first_profile().starts_with(a.path()));
        let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
        drop((a, b));
        assert!(!pa.exists() && !pb.exists());
    }
}

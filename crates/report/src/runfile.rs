//! Opening a run file (one or more process images' profiles) for any view: each image is folded
//! with its own symbolizer, then the folds are merged into one [`Analysis`]
//! ([`Analysis::merge`]), optionally after choosing one process (`--process PID|NAME`).

use std::path::Path;

use lockmeter_format::FileError;
use lockmeter_format::model::Profile;

use crate::analysis::{Analysis, Filter};
use crate::symbolize::{Symbolize, SymbolizeOptions, Symbolizer};

/// The process images of a run file, each with the symbolizer chosen for it.
#[derive(Debug)]
pub struct OpenRun {
    /// One entry per process image, the root's first.
    pub parts: Vec<(Profile, Symbolizer)>,
}

/// Why a run file could not be opened for a view.
#[derive(Debug)]
pub enum OpenRunError {
    /// The file could not be read (its message names the file and what to do).
    File(FileError),
    /// `--process` named no process of the file: the message names the file and those it holds.
    NoProcess(String),
}

impl std::fmt::Display for OpenRunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenRunError::File(e) => e.fmt(f),
            OpenRunError::NoProcess(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for OpenRunError {}

impl From<FileError> for OpenRunError {
    fn from(e: FileError) -> Self {
        OpenRunError::File(e)
    }
}

/// Opens a run file (a single-process profile is a run of one) for any view: reads it, keeps
/// only the process `process` names when given (`--process PID|NAME`: a pid, or every process
/// of that name), and chooses each kept process image's symbolizer ([`Symbolizer::new`]). The
/// error is one line naming the file and what to do.
pub fn open_run(
    path: &Path,
    opts: &SymbolizeOptions,
    process: Option<&str>,
) -> Result<OpenRun, OpenRunError> {
    let run = lockmeter_format::read_run_file(path)?;
    let mut profiles = run.processes;
    if let Some(sel) = process {
        select(&mut profiles, sel)
            .map_err(|e| OpenRunError::NoProcess(format!("{}: {e}", path.display())))?;
    }
    let parts = profiles
        .into_iter()
        .map(|p| {
            let sym = Symbolizer::new(&p, opts);
            (p, sym)
        })
        .collect();
    Ok(OpenRun { parts })
}

/// The file name of a profile's final executable, as processes are named.
fn image_name(p: &Profile) -> String {
    let h = &p.header;
    let s = if h.exe.is_empty() {
        h.cmdline.first().cloned().unwrap_or_default()
    } else {
        h.exe.clone()
    };
    s.rsplit('/').next().unwrap_or(&s).to_owned()
}

/// Keeps only the process `sel` names: a pid, or a process name (the file name of its final
/// image's executable; every process of that name). The error says which there are.
fn select(parts: &mut Vec<Profile>, sel: &str) -> Result<(), String> {
    let want: Vec<u32> = match sel.trim().parse::<u32>() {
        Ok(pid) => vec![pid],
        Err(_) => {
            // A pid's name is its last image's.
            let mut last: std::collections::BTreeMap<u32, (u32, String)> = Default::default();
            for p in parts.iter() {
                let e = last.entry(p.header.pid).or_default();
                if p.header.image_seq >= e.0 {
                    *e = (p.header.image_seq, image_name(p));
                }
            }
            last.into_iter().filter(|(_, (_, n))| n == sel.trim()).map(|(pid, _)| pid).collect()
        }
    };
    if !parts.iter().any(|p| want.contains(&p.header.pid)) {
        let mut have: Vec<String> =
            parts.iter().map(|p| format!("{}[{}]", image_name(p), p.header.pid)).collect();
        have.dedup();
        return Err(format!(
            "no process '{sel}' in this file (it holds {}); give one of those pids or names to --process",
            have.join(", ")
        ));
    }
    parts.retain(|p| want.contains(&p.header.pid));
    Ok(())
}

impl OpenRun {
    /// The whole run as one analysis: each image folded with `filter`, then merged.
    pub fn analysis(&mut self, filter: &Filter) -> Analysis {
        let parts = self.parts.iter_mut().map(|(p, sym)| Analysis::build(p, sym, filter)).collect();
        Analysis::merge(parts)
    }

    /// Every symbolizer's notes (files changed since the run, ...), each once.
    pub fn notes(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for (_, s) in &self.parts {
            for n in s.notes() {
                if !v.contains(&n) {
                    v.push(n);
                }
            }
        }
        v
    }

    /// The root process's profile (its header: the command line the user ran).
    pub fn root(&self) -> Option<&Profile> {
        self.parts.first().map(|(p, _)| p)
    }
}

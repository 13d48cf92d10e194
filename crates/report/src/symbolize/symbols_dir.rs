//! Finding a module's debug file: in the global debug folders by build-id or `.gnu_debuglink`
//! ([`separate_debug_file`]), and in `--symbols DIR` ([`find`]).
//!
//! `--symbols DIR`: a folder of debug files (or unstripped copies) for the modules of a run, found
//! by build-id (`DIR/.build-id/ab/cdef….debug`, the GDB and debuginfod layout), then by the
//! module's file name (`DIR/NAME`, `DIR/NAME.debug`). A file is used only when its build-id is
//! the module's: one that differs (another build of the program), or that cannot be checked
//! because either has no build-id, is refused with a note, never used to name code.

use std::path::{Path, PathBuf};

use object::{Object, ObjectSection};

/// What `DIR` holds for one module.
#[derive(Debug, Default)]
pub(super) struct Found {
    /// The matching file and its contents (it has a symbol table or DWARF).
    pub(super) file: Option<(PathBuf, Vec<u8>)>,
    /// One sentence per candidate refused (a different or missing build-id).
    pub(super) refused: Vec<String>,
}

fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// Looks in `dir` for the debug file of module `name` (base name) whose build-id is `build_id`.
pub(super) fn find(dir: &Path, name: &str, build_id: Option<&[u8]>) -> Found {
    let mut found = Found::default();
    let mut candidates = Vec::new();
    if let Some(id) = build_id.filter(|id| id.len() >= 2) {
        let h = hex(id);
        candidates.push(dir.join(".build-id").join(&h[..2]).join(format!("{}.debug", &h[2..])));
    }
    candidates.push(dir.join(name));
    candidates.push(dir.join(format!("{name}.debug")));
    for c in candidates {
        let Ok(bytes) = std::fs::read(&c) else { continue };
        let Ok(file) = object::File::parse(&*bytes) else {
            found.refused.push(format!("{}: not an ELF file, not used for {name}", c.display()));
            continue;
        };
        let theirs = file.build_id().ok().flatten();
        let why = match (build_id, theirs) {
            (Some(want), Some(got)) if want == got => None,
            (Some(want), Some(got)) => Some(format!(
                "its build-id {} is not {name}'s {} (another build)",
                hex(got),
                hex(want)
            )),
            (None, _) => Some(format!("{name} has no build-id to check it against")),
            (Some(_), None) => Some("it has no build-id to check".to_owned()),
        };
        if let Some(why) = why {
            found.refused.push(format!("{} not used for {name}: {why}", c.display()));
            continue;
        }
        let useful = file.section_by_name(".symtab").is_some()
            || file.section_by_name(".debug_info").is_some_and(|s| s.size() > 0);
        if !useful {
            found.refused.push(format!(
                "{} not used for {name}: it has neither symbols nor debug information",
                c.display()
            ));
            continue;
        }
        drop(file);
        found.file = Some((c, bytes));
        break;
    }
    found
}

/// The contents of `path` when it is an object file with DWARF and (when `build_id` is given and
/// the file has one) the same build-id.
fn usable_debug_file(path: &Path, build_id: Option<&[u8]>) -> Option<Vec<u8>> {
    let bytes = std::fs::read(path).ok()?;
    let file = object::File::parse(&*bytes).ok()?;
    let dwarf = file.section_by_name(".debug_info").is_some_and(|s| s.size() > 0);
    let same = match (build_id, file.build_id().ok().flatten()) {
        (Some(want), Some(got)) => want == got,
        _ => true,
    };
    drop(file);
    (dwarf && same).then_some(bytes)
}

/// A separate debug file for the module at `path`: by build-id
/// (`<dir>/.build-id/xx/yyyy.debug`), else by `.gnu_debuglink` (next to the module, in its
/// `.debug/` folder, under `<dir>/<module's folder>/`), for each global debug folder `<dir>`.
/// Returns its path and contents.
pub(super) fn separate_debug_file(
    dirs: &[PathBuf],
    path: &Path,
    build_id: Option<&[u8]>,
    debuglink: Option<&str>,
) -> Option<(PathBuf, Vec<u8>)> {
    if let Some(id) = build_id.filter(|id| id.len() >= 2) {
        let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
        for d in dirs {
            let p = d.join(".build-id").join(&hex[..2]).join(format!("{}.debug", &hex[2..]));
            if let Some(bytes) = usable_debug_file(&p, Some(id)) {
                return Some((p, bytes));
            }
        }
    }
    let link = debuglink?;
    let dir = path.parent()?;
    let mut candidates = vec![dir.join(link), dir.join(".debug").join(link)];
    let rel = dir.strip_prefix("/").unwrap_or(dir);
    candidates.extend(dirs.iter().map(|d| d.join(rel).join(link)));
    candidates
        .into_iter()
        .filter(|c| c != path)
        .find_map(|c| usable_debug_file(&c, build_id).map(|b| (c, b)))
}

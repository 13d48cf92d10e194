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

//! The reverse of symbolization: the code of a source line (`run --lock-filter FILE:LINE`), from
//! the DWARF line table of one ELF file (read with the `gimli` that [`addr2line`] uses).

use std::borrow::Cow;
use std::path::Path;

use addr2line::gimli;
use object::{Object, ObjectSection};

/// The address ranges (ELF virtual addresses, `[start, end)`) of the code that the DWARF line
/// table of the ELF file at `elf` attributes to line `line` of a source file whose base name is
/// `file`'s. An error (one sentence) when the file cannot be read or has no DWARF; an empty list
/// when no code is at that line.
pub fn code_at_line(elf: &Path, file: &str, line: u64) -> Result<Vec<(u64, u64)>, String> {
    let data = std::fs::read(elf).map_err(|e| format!("cannot read {}: {e}", elf.display()))?;
    let obj =
        object::File::parse(&*data).map_err(|_| format!("{} is not an ELF file", elf.display()))?;
    if obj.section_by_name(".debug_line").is_none() {
        return Err(format!("{} has no DWARF line table (compile it with -g)", elf.display()));
    }
    let endian = if obj.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let load = |id: gimli::SectionId| -> Result<Cow<'_, [u8]>, gimli::Error> {
        Ok(obj
            .section_by_name(id.name())
            .and_then(|s| s.uncompressed_data().ok())
            .unwrap_or(Cow::Borrowed(&[])))
    };
    let sections = gimli::DwarfSections::load(load).map_err(|e| bad(elf, e))?;
    let dwarf = sections.borrow(|s| gimli::EndianSlice::new(s, endian));
    let want = base_name(file);
    let mut out = Vec::new();
    let mut units = dwarf.units();
    while let Some(header) = units.next().map_err(|e| bad(elf, e))? {
        let unit = dwarf.unit(header).map_err(|e| bad(elf, e))?;
        let Some(program) = unit.line_program.clone() else { continue };
        let mut rows = program.rows();
        // The start of the row being read when it is at the line: it ends at the next row.
        let mut open: Option<u64> = None;
        while let Some((header, row)) = rows.next_row().map_err(|e| bad(elf, e))? {
            if let Some(start) = open.take()
                && row.address() > start
            {
                out.push((start, row.address()));
            }
            if row.end_sequence() || row.line().map(|l| l.get()) != Some(line) {
                continue;
            }
            let Some(f) = row.file(header) else { continue };
            let Ok(name) = dwarf.attr_string(&unit, f.path_name()) else { continue };
            if base_name(&name.to_string_lossy()) == want {
                open = Some(row.address());
            }
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

fn base_name(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

fn bad(elf: &Path, e: gimli::Error) -> String {
    format!("cannot read the DWARF of {}: {e}", elf.display())
}

//! `run --lock-filter NAME`: the address range of the program's static object NAME, which the
//! collector swaps alone (`LOCKMETER_LOCK_FILTER=OFFSET+SIZE`, hex, from the executable's load
//! address). `run --lock-filter FILE:LINE`: the code of that line in the executable's DWARF line
//! table, whose mutexes (initialized or first locked there) the collector swaps alone
//! (`LOCKMETER_LOCK_FILTER=@START-END,...`, at most `MAX_SITE_RANGES` ranges).

use anyhow::{Context, Result, bail};
use lockmeter_core::settings;
use object::{Object, ObjectSymbol, SymbolKind};
use std::path::Path;

use crate::settings_args::CollectorArgs;

/// The value of `LOCKMETER_LOCK_FILTER` for object `name` of executable `exe`.
pub(crate) fn env_value(exe: &Path, name: &str, collector: &CollectorArgs) -> Result<String> {
    if collector.get(&settings::LOCK).is_none_or(|l| l == "pthread") {
        bail!("--lock-filter chooses which mutexes --lock swaps: give --lock ALGO too");
    }
    if let Some((file, line)) = file_line(name) {
        return site_value(exe, file, line);
    }
    let data = std::fs::read(exe).with_context(|| format!("cannot read {}", exe.display()))?;
    let file = object::File::parse(&*data)
        .with_context(|| format!("--lock-filter: {} is not an ELF executable", exe.display()))?;
    let found = file
        .symbols()
        .chain(file.dynamic_symbols())
        .find(|s| s.name() == Ok(name) && s.kind() == SymbolKind::Data && s.size() > 0);
    match found {
        Some(s) => Ok(format!("{:x}+{:x}", s.address(), s.size())),
        None => bail!(
            "--lock-filter: no data object '{name}' in the symbol table of {} (name a static mutex or array of mutexes of the executable)",
            exe.display()
        ),
    }
}

/// The most code ranges `LOCKMETER_LOCK_FILTER` carries (the collector's table).
pub(crate) const MAX_SITE_RANGES: usize = 32;

/// `FILE:LINE` split, when `spec` is one (a decimal line after the last colon; a C++ name such
/// as `ns::lock` is not).
fn file_line(spec: &str) -> Option<(&str, u64)> {
    let (file, line) = spec.rsplit_once(':')?;
    if file.is_empty() || file.ends_with(':') || !line.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((file, line.parse().ok().filter(|&l| l > 0)?))
}

/// The value of `LOCKMETER_LOCK_FILTER` for the code at `file:line` of executable `exe`.
fn site_value(exe: &Path, file: &str, line: u64) -> Result<String> {
    let ranges = lockmeter_report::code_at_line(exe, file, line)
        .map_err(|e| anyhow::anyhow!("--lock-filter {file}:{line}: {e}"))?;
    if ranges.is_empty() {
        bail!(
            "--lock-filter {file}:{line}: no code at that line in the DWARF line table of {} (name a line of the executable's own sources that initializes or locks a mutex)",
            exe.display()
        );
    }
    if ranges.len() > MAX_SITE_RANGES {
        bail!(
            "--lock-filter {file}:{line}: the line has {} pieces of code, more than {MAX_SITE_RANGES}; name a line with a single mutex call",
            ranges.len()
        );
    }
    let parts: Vec<String> = ranges.iter().map(|(a, b)| format!("{a:x}-{b:x}")).collect();
    Ok(format!("@{}", parts.join(",")))
}

#[cfg(test)]
mod tests {
    use super::file_line;

    #[test]
    fn file_line_or_name() {
        assert_eq!(file_line("prog.c:27"), Some(("prog.c", 27)));
        assert_eq!(file_line("src/a.c:3"), Some(("src/a.c", 3)));
        assert_eq!(file_line("pc_lock"), None);
        assert_eq!(file_line("ns::lock"), None);
        assert_eq!(file_line("prog.c:0"), None);
        assert_eq!(file_line(":5"), None);
    }
}

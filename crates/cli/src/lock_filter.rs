//! `run --lock-filter NAME`: the address range of the program's static object NAME, which the
//! collector swaps alone (`LOCKMETER_LOCK_FILTER=OFFSET+SIZE`, hex, from the executable's load
//! address).

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

//! What the commands that start a program (`run`, `overhead`, `compare`, `record`, `top`) find
//! first: the program a command names, whether LD_PRELOAD can reach its locks, the preload library.

use anyhow::{Context, Result, bail};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Finds `liblockmeter_preload.so`: `$LOCKMETER_PRELOAD`, next to this executable, in
/// `../lib/lockmeter/` relative to it, else the copy embedded in this binary, written out to a
/// private cache directory ([`crate::embedded`]).
pub(crate) fn find_preload() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("LOCKMETER_PRELOAD") {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        bail!(
            "LOCKMETER_PRELOAD={} is not a file; unset it or point it at liblockmeter_preload.so",
            p.display()
        );
    }
    let exe = std::env::current_exe().context("cannot find the lockmeter executable")?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let name = "liblockmeter_preload.so";
    for cand in [dir.join(name), dir.join("../lib/lockmeter").join(name), dir.join("..").join(name)]
    {
        if cand.is_file() {
            return Ok(cand.canonicalize().unwrap_or(cand));
        }
    }
    crate::embedded::preload_file()
}

/// Which program `cmd` names, as the shell would find it.
pub(crate) fn resolve_program(cmd: &OsString) -> Result<PathBuf> {
    let p = Path::new(cmd);
    if p.components().count() > 1 || cmd.to_string_lossy().contains('/') {
        if p.exists() {
            return Ok(p.to_path_buf());
        }
        bail!("cannot run '{}': no such file", p.display());
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for d in std::env::split_paths(&path) {
        let c = d.join(p);
        if c.is_file() {
            return Ok(c);
        }
    }
    bail!("cannot run '{}': not found on PATH", p.display())
}

/// Why LD_PRELOAD cannot reach the locks of `exe`, as one line that points at `record`: a
/// statically linked program (no ELF interpreter loads the preload), or a setuid/setgid one run
/// by another user (the loader ignores LD_PRELOAD). `None` for everything else, scripts included.
pub(crate) fn preload_blind_spot(exe: &Path) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let name = exe.display();
    let record = format!("record it with eBPF instead: sudo lockmeter record -- {name} ...");
    let meta = std::fs::metadata(exe).ok()?;
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    let setid = (meta.mode() & 0o4000 != 0 && meta.uid() != euid) || meta.mode() & 0o2000 != 0;
    if setid && euid != 0 {
        return Some(format!(
            "{name} is setuid/setgid, so the loader ignores LD_PRELOAD: {record}"
        ));
    }
    let data = std::fs::read(exe).ok()?;
    let has_interp = match object::FileKind::parse(&*data).ok()? {
        object::FileKind::Elf64 => {
            has_interp::<object::elf::FileHeader64<object::Endianness>>(&data)?
        }
        object::FileKind::Elf32 => {
            has_interp::<object::elf::FileHeader32<object::Endianness>>(&data)?
        }
        _ => return None,
    };
    (!has_interp).then(|| {
        format!("{name} is statically linked, so LD_PRELOAD cannot reach its locks: {record}")
    })
}

/// Whether an ELF file has a PT_INTERP program header (is dynamically linked).
fn has_interp<H: object::read::elf::FileHeader<Endian = object::Endianness>>(
    data: &[u8],
) -> Option<bool> {
    use object::read::elf::ProgramHeader;
    let h = H::parse(data).ok()?;
    let e = h.endian().ok()?;
    let ph = h.program_headers(e, data).ok()?;
    Some(ph.iter().any(|p| p.p_type(e) == object::elf::PT_INTERP))
}

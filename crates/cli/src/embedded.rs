//! The copy of the preload library carried inside the `lockmeter` binary (built by `build.rs`),
//! written out on first use to a private cache directory so that a copied or installed
//! `lockmeter` works alone.
//!
//! The file is named by its content's hash (`liblockmeter_preload-HASH.so`): a binary finds its
//! own copy, two versions never share a file, and an existing file is used only when it holds
//! exactly the embedded bytes. The directory is `$XDG_CACHE_HOME/lockmeter` (else
//! `~/.cache/lockmeter`), used only when it is a real directory owned by this user and closed to
//! others (mode 0700, created so); otherwise `$TMPDIR/lockmeter-UID` under the same rules.

use anyhow::{Context, Result, bail};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The library's bytes.
pub(crate) static PRELOAD: &[u8] = include_bytes!(env!("LOCKMETER_EMBEDDED_PRELOAD"));
/// The 64-bit FNV-1a hash of [`PRELOAD`], in hex (computed by `build.rs`).
const HASH: &str = env!("LOCKMETER_EMBEDDED_PRELOAD_HASH");

/// The candidate cache directories, in order of preference.
fn cache_dirs() -> Vec<PathBuf> {
    let mut v = Vec::new();
    let abs = |p: PathBuf| p.is_absolute().then_some(p);
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from).and_then(abs) {
        v.push(x.join("lockmeter"));
    } else if let Some(h) = std::env::var_os("HOME").map(PathBuf::from).and_then(abs) {
        v.push(h.join(".cache/lockmeter"));
    }
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    v.push(std::env::temp_dir().join(format!("lockmeter-{uid}")));
    v
}

/// Makes `dir` (mode 0700) if it is missing, and checks that it is a directory (not a link)
/// owned by this user that nobody else can write or read.
fn private_dir(dir: &Path) -> Result<()> {
    if let Some(parent) = dir.parent() {
        // The parent (~/.cache) is an ordinary directory; only the last level is ours.
        let _ = std::fs::DirBuilder::new().recursive(true).mode(0o755).create(parent);
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => bail!("cannot create {}: {e}", dir.display()),
    }
    let meta = std::fs::symlink_metadata(dir).with_context(|| format!("{}", dir.display()))?;
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != uid || meta.mode() & 0o077 != 0 {
        bail!(
            "{} is not a private directory of this user (a directory, owned by uid {uid}, mode 0700)",
            dir.display()
        );
    }
    Ok(())
}

/// The embedded library as a file: the existing copy in the cache when it holds exactly these
/// bytes, else a new one (written under a temporary name, then renamed into place).
pub(crate) fn preload_file() -> Result<PathBuf> {
    let name = format!("liblockmeter_preload-{HASH}.so");
    let mut why = Vec::new();
    for dir in cache_dirs() {
        match write_into(&dir, &name) {
            Ok(p) => return Ok(p),
            Err(e) => why.push(format!("{e:#}")),
        }
    }
    bail!(
        "cannot write the preload library out of the lockmeter binary ({}); set XDG_CACHE_HOME to a directory of yours, or LOCKMETER_PRELOAD to a liblockmeter_preload.so",
        why.join("; ")
    )
}

fn write_into(dir: &Path, name: &str) -> Result<PathBuf> {
    use std::io::Write;
    private_dir(dir)?;
    let path = dir.join(name);
    if let Ok(meta) = std::fs::symlink_metadata(&path)
        && meta.is_file()
        && std::fs::read(&path).is_ok_and(|b| b == PRELOAD)
    {
        return Ok(path);
    }
    let tmp = dir.join(format!(".{name}.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o700)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .with_context(|| format!("cannot create {}", tmp.display()))?;
    let written = f.write_all(PRELOAD).and_then(|()| f.sync_all());
    drop(f);
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        bail!("cannot write {}: {e}", tmp.display());
    }
    let _ = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o700));
    // Rename over a file of that name that held other bytes (a truncated earlier write): the
    // directory is private, so nothing of the user's is there.
    if let Err(e) = std::fs::rename(&tmp, &path) {
        let _ = std::fs::remove_file(&tmp);
        bail!("cannot rename {} to {}: {e}", tmp.display(), path.display());
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_library_is_an_elf_shared_object() {
        assert!(PRELOAD.len() > 4096);
        assert_eq!(&PRELOAD[..4], b"\x7fELF");
        assert_eq!(HASH.len(), 16);
    }
}

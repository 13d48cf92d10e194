//! Writing a new file without ever replacing one: how every lockmeter command writes its output.
//!
//! The bytes go to an unnamed file in the target's directory (`O_TMPFILE`; a file named
//! `.NAME.PID.N.tmp`, created with `O_EXCL|O_NOFOLLOW`, where the file system has no unnamed
//! files), which is then linked to its name: `link` fails when the name exists, so nothing the
//! user had is overwritten, a symlink planted at the name cannot redirect the write, and no
//! reader ever sees a half-written file.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Why a new file could not be written, with what to do.
fn refuse(path: &Path, why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::AlreadyExists, format!("{} {why}", path.display()))
}

/// Checks that `path` names no existing file, directory or link.
pub fn check_new(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => {
            Err(refuse(path, "is a directory: give a file name inside it, e.g. -o DIR/out"))
        }
        Ok(m) if m.file_type().is_symlink() => Err(refuse(
            path,
            "is a symbolic link: lockmeter does not write through links; give another name",
        )),
        Ok(_) => Err(refuse(
            path,
            "exists: lockmeter never overwrites a file; remove it or choose another name",
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io::Error::new(e.kind(), format!("cannot check {}: {e}", path.display()))),
    }
}

/// Writes `bytes` to the new file `path`; fails, changing nothing, if `path` exists.
pub fn write_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    check_new(path)?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let ctx =
        |e: io::Error| io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display()));
    // An unnamed file, linked to its name once complete.
    if let Ok(mut f) =
        OpenOptions::new().write(true).mode(0o644).custom_flags(libc::O_TMPFILE).open(&dir)
    {
        f.write_all(bytes).map_err(ctx)?;
        return link_fd(&f, path).map_err(ctx);
    }
    // A named temporary file.
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut last = None;
    for n in 0..100 {
        let tmp = dir.join(format!(".{name}.{}.{n}.tmp", std::process::id()));
        let f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp);
        let mut f = match f {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                last = Some(e);
                continue;
            }
            Err(e) => return Err(ctx(e)),
        };
        let r = f.write_all(bytes).and_then(|()| std::fs::hard_link(&tmp, path));
        let _ = std::fs::remove_file(&tmp);
        return r.map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => {
                refuse(path, "appeared while lockmeter wrote it; nothing was replaced")
            }
            _ => ctx(e),
        });
    }
    Err(ctx(last.unwrap_or_else(|| io::Error::other("no temporary name was free"))))
}

/// Gives the unnamed file `f` the name `path` (fails if the name exists).
fn link_fd(f: &File, path: &Path) -> io::Result<()> {
    use rustix::fs::{AtFlags, CWD, linkat};
    use std::os::fd::AsRawFd;
    let proc = format!("/proc/self/fd/{}", f.as_raw_fd());
    // AT_SYMLINK_FOLLOW: follow the /proc/self/fd entry to the open (unnamed) file.
    match linkat(CWD, proc.as_str(), CWD, path, AtFlags::SYMLINK_FOLLOW) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::EXIST) => {
            Err(refuse(path, "appeared while lockmeter wrote it; nothing was replaced"))
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("lockmeter-files-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn writes_a_new_file_and_never_replaces_one() {
        let d = tmpdir("new");
        let p = d.join("out.html");
        write_new(&p, b"first").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"first");
        let e = write_new(&p, b"second").unwrap_err();
        assert!(e.to_string().contains("never overwrites"), "{e}");
        assert_eq!(std::fs::read(&p).unwrap(), b"first");
        // No temporary file left behind.
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn refuses_directories_and_links() {
        let d = tmpdir("refuse");
        let e = write_new(&d, b"x").unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e}");
        let victim = d.join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let link = d.join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(write_new(&link, b"x").unwrap_err().to_string().contains("symbolic link"));
        let dangling = d.join("dangling");
        std::os::unix::fs::symlink(d.join("nowhere"), &dangling).unwrap();
        assert!(write_new(&dangling, b"x").is_err());
        assert!(!d.join("nowhere").exists());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        std::fs::remove_dir_all(&d).unwrap();
    }
}

//! Housekeeping of the temporary directory: what earlier runs left there when they were killed.
//! The manifests of runs that are gone ([`remove_stale_manifests`]) and the control sockets of
//! processes that are gone ([`remove_stale_sockets`]).

use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Removes, from `dir`, the manifests (`.lockmeter-run-PID-N.profiles`, see
/// [`crate::tree::Manifest`]) that earlier runs left when they were killed before they could
/// remove them: those whose `run` process is gone and that belong to this user. A manifest only
/// lists profile paths (the profiles themselves are in the run's directory, left alone), so
/// nothing the user made is lost; a live run's manifest is never touched.
pub(crate) fn remove_stale_manifests(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let me = own_uid();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(".lockmeter-run-")?.strip_suffix(".profiles"))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, n)| n.parse::<u32>().ok().and(pid.parse::<i32>().ok()))
        else {
            continue;
        };
        let Ok(md) = e.path().symlink_metadata() else { continue };
        if !md.file_type().is_file() || md.uid() != me || pid <= 0 {
            continue;
        }
        if gone(pid) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// The control directory of this user, where each metered process binds `PID.sock`
/// (`preload/src/control.rs`): `/tmp/lockmeter-UID`.
pub(crate) fn control_dir() -> PathBuf {
    PathBuf::from(format!("/tmp/lockmeter-{}", own_uid()))
}

/// Removes, from the control directory `dir`, the control sockets whose process is gone (killed
/// where no handler of ours ran: SIGKILL, a crash) and returns how many went. The rule, so that
/// nothing the user had is lost: only an entry of `dir` itself that is named `*.sock`, is a
/// socket (not a link: none is followed), belongs to this user, and refuses a connection
/// (`ECONNREFUSED`: nobody listens on it) goes. A socket someone listens on, any other file, a
/// link, another user's entry, and everything outside `dir` stay; so does `dir` itself unless it
/// is a directory of this user (not a link). A live collector's socket never refuses: it appears
/// under its name only once it listens (bound under `PID.sock.new`, then renamed). Such a
/// temporary name is left only by a process killed between the two; it goes when it refuses a
/// connection and its process (the PID of its name) is gone.
///
/// Best-effort: what cannot be read or removed is left as it is.
pub(crate) fn remove_stale_sockets(dir: &Path) -> usize {
    if !own_dir(dir) {
        return 0;
    }
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries.flatten().filter(|e| remove_entry_if_stale(&e.path())).count()
}

/// Removes `path`, one control socket, under [`remove_stale_sockets`]' rule (its directory a
/// directory of this user, not a link). Returns whether it went.
pub(crate) fn remove_if_stale(path: &Path) -> bool {
    path.parent().is_some_and(own_dir) && remove_entry_if_stale(path)
}

/// Whether `dir` is a directory of this user (not a link to one).
fn own_dir(dir: &Path) -> bool {
    dir.symlink_metadata().is_ok_and(|md| md.is_dir() && md.uid() == own_uid())
}

/// [`remove_if_stale`] for an entry of a directory already checked.
fn remove_entry_if_stale(path: &Path) -> bool {
    let name = path.file_name().map(|n| n.as_bytes()).unwrap_or_default();
    let pending_pid = name.strip_suffix(b".sock.new").and_then(|p| std::str::from_utf8(p).ok());
    if !name.ends_with(b".sock") && pending_pid.is_none() {
        return false;
    }
    let Some(before) = own_socket(path) else { return false };
    if !refuses(path) {
        return false;
    }
    if let Some(pid) = pending_pid
        && !pid.parse::<i32>().is_ok_and(|p| p > 0 && gone(p))
    {
        return false;
    }
    // Still the socket that refused (not one a process of the same pid renamed into place since).
    own_socket(path) == Some(before) && std::fs::remove_file(path).is_ok()
}

fn own_uid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// The (device, inode) of `path` if it is a socket of this user (not followed if a link).
fn own_socket(path: &Path) -> Option<(u64, u64)> {
    let md = path.symlink_metadata().ok()?;
    (md.file_type().is_socket() && md.uid() == own_uid()).then_some((md.dev(), md.ino()))
}

/// Whether process `pid` is gone (no process has that pid now).
fn gone(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

/// Whether a connection to the unix socket `path` is refused (`ECONNREFUSED`: nobody listens).
/// The connect does not block: `std`'s `UnixStream::connect` would wait while the listener's
/// backlog is full (a stopped process: each `run` leaves it one unaccepted connection). A
/// connection made is closed at once; the collector's control thread reads its empty request
/// and answers an error to nobody (`MSG_NOSIGNAL`), without a word on the program's stderr.
fn refuses(path: &Path) -> bool {
    use std::os::fd::{FromRawFd, OwnedFd};
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: a zeroed sockaddr_un is a valid (empty) address.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return false;
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, &s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = s as libc::c_char;
    }
    // SAFETY: plain socket creation; the descriptor is owned (closed on drop) just below.
    let fd = unsafe {
        libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0)
    };
    if fd < 0 {
        return false;
    }
    // SAFETY: `fd` is a new descriptor nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: a valid, NUL-terminated sockaddr_un of the given length.
    let r = unsafe {
        libc::connect(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            (&addr as *const libc::sockaddr_un).cast(),
            size_of::<libc::sockaddr_un>() as libc::socklen_t,
        )
    };
    r != 0 && std::io::Error::last_os_error().kind() == ErrorKind::ConnectionRefused
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_manifests_of_ended_runs_are_removed_and_live_ones_kept() {
        let dir = std::env::temp_dir().join(format!("lm-stale-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // A pid that cannot be running: above the kernel's pid_max limit (2^22).
        let dead = dir.join(".lockmeter-run-4194305-0.profiles");
        let live = dir.join(format!(".lockmeter-run-{}-3.profiles", std::process::id()));
        let other = dir.join(".lockmeter-run-4194305-x.profiles");
        let unrelated = dir.join("run.lmp");
        for f in [&dead, &live, &other, &unrelated] {
            std::fs::write(f, b"x\n").unwrap();
        }
        remove_stale_manifests(&dir);
        assert!(!dead.exists(), "the ended run's manifest is still there");
        assert!(live.exists() && other.exists() && unrelated.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn only_refusing_sockets_of_the_directory_are_removed() {
        use std::os::unix::net::UnixListener;
        let base = std::env::temp_dir().join(format!("lm-stale-socks-{}", std::process::id()));
        let (dir, outside) = (base.join("ctl"), base.join("outside"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        // A socket nobody listens on: bound, then its listener closed (the file stays).
        let dead = |p: &Path| drop(UnixListener::bind(p).unwrap());
        let live = dir.join("100.sock");
        let _listener = UnixListener::bind(&live).unwrap();
        let stale = dir.join("101.sock");
        dead(&stale);
        let stale_pending = dir.join("4194305.sock.new"); // its pid cannot exist (> 2^22)
        dead(&stale_pending);
        let binding = dir.join(format!("{}.sock.new", std::process::id())); // its pid runs
        dead(&binding);
        let other_name = dir.join("102.socket");
        dead(&other_name);
        let regular = dir.join("x.sock");
        std::fs::write(&regular, b"mine\n").unwrap();
        let subdir = dir.join("d.sock");
        std::fs::create_dir(&subdir).unwrap();
        let target = outside.join("103.sock");
        dead(&target);
        let link = dir.join("link.sock");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        // A link to the directory is not cleaned through.
        let dir_link = base.join("ctl-link");
        std::os::unix::fs::symlink(&dir, &dir_link).unwrap();
        assert_eq!(remove_stale_sockets(&dir_link), 0);
        assert!(!remove_if_stale(&dir_link.join("101.sock")));
        assert!(stale.exists());

        // One socket by its path (`ctl PID`): a listening one stays, a dead one goes.
        assert!(!remove_if_stale(&live));
        let stale_one = dir.join("104.sock");
        dead(&stale_one);
        assert!(remove_if_stale(&stale_one) && !stale_one.exists());

        assert_eq!(remove_stale_sockets(&dir), 2);
        assert!(!stale.exists() && !stale_pending.exists(), "a dead socket is still there");
        for kept in [&live, &binding, &other_name, &regular, &subdir, &target] {
            assert!(kept.exists(), "{} was removed", kept.display());
        }
        assert!(link.symlink_metadata().is_ok(), "the link was removed");
        // The listening socket still answers.
        drop(std::os::unix::net::UnixStream::connect(&live).unwrap());
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_listener_with_a_full_backlog_is_neither_waited_for_nor_removed() {
        use std::os::fd::AsRawFd;
        let dir = std::env::temp_dir().join(format!("lm-stale-full-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("200.sock");
        let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        // SAFETY: listen on our own listening socket: the backlog shrinks to its minimum; no
        // connection is ever accepted (a stopped process).
        assert_eq!(unsafe { libc::listen(l.as_raw_fd(), 0) }, 0);
        for _ in 0..8 {
            assert!(!refuses(&path));
        }
        assert_eq!(remove_stale_sockets(&dir), 0);
        assert!(path.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! Writing the profile file safely: an unnamed `O_TMPFILE` (else a fresh `O_EXCL|O_NOFOLLOW`
//! temporary name) in the output's directory, given its final name by `linkat`/`link` (never
//! replacing anything), and its name appended to the run's manifest. Also the sink on a raw file
//! descriptor (a file or the control socket) the encoder writes to.

use super::{Bufs, End, IS_ROOT, encode};
use crate::sys;
use core::ffi::c_int;
use core::sync::atomic::Ordering::*;
use lockmeter_format::{Sink, SinkError};

/// Appends the profile's final name (`b.path`) and a newline to the run's manifest, in one
/// `write` to an `O_APPEND` file, so that lines of processes ending together never mix. Only a
/// file `run` made is opened (no `O_CREAT`, no link followed).
fn note_in_manifest(b: &mut Bufs) {
    if b.manifest.bytes().is_empty() {
        return;
    }
    // SAFETY: `manifest` is NUL-terminated; the flags create nothing.
    let fd = unsafe {
        libc::open(
            b.manifest.as_ptr(),
            libc::O_WRONLY | libc::O_APPEND | libc::O_CLOEXEC | libc::O_NOFOLLOW,
        )
    };
    if fd < 0 {
        return;
    }
    b.scratch.clear().push(b.path.bytes()).push(b"\n");
    sys::write_all(fd, b.scratch.bytes());
    // SAFETY: `fd` is ours.
    unsafe { libc::close(fd) };
}

/// A sink on a raw file descriptor: a file, or a connected socket (written with `MSG_NOSIGNAL`:
/// a client that went away is an error, never a SIGPIPE for the program).
pub(super) struct FdSink {
    pub(super) fd: c_int,
    pub(super) socket: bool,
}

impl Sink for FdSink {
    fn write_all(&mut self, buf: &[u8]) -> Result<(), SinkError> {
        let ok = if self.socket { send_all(self.fd, buf) } else { sys::write_all(self.fd, buf) };
        if ok { Ok(()) } else { Err(SinkError::Os(sys::errno())) }
    }
}

/// Sends all of `b` on socket `fd`, retrying on EINTR.
pub(crate) fn send_all(fd: c_int, mut b: &[u8]) -> bool {
    while !b.is_empty() {
        // SAFETY: `b` is a valid buffer; MSG_NOSIGNAL turns a closed peer into EPIPE.
        let r = unsafe { libc::send(fd, b.as_ptr().cast(), b.len(), libc::MSG_NOSIGNAL) };
        if r < 0 {
            if sys::errno() == libc::EINTR {
                continue;
            }
            return false;
        }
        b = b.get(r as usize..).unwrap_or(&[]);
    }
    true
}

/// Opens the file the profile is encoded into, before it gets its final name: an unnamed
/// `O_TMPFILE` in the output's directory (nothing is left behind if the dump is killed), else a
/// fresh `BASE.tmp.PID[.N]` created with `O_EXCL | O_NOFOLLOW` (a planted link or file at that
/// name is never followed or truncated; the next name is tried). Returns the descriptor and
/// whether `b.tmp` names it (false: it is unnamed).
fn open_unnamed_or_fresh(b: &mut Bufs, pid: u32) -> Option<(i32, bool)> {
    // The directory: everything before the last '/' of the base, else ".".
    b.tmp.clear();
    match b.out_base.bytes().iter().rposition(|&c| c == b'/') {
        Some(0) => b.tmp.push(b"/"),
        Some(i) => b.tmp.push(&b.out_base.bytes()[..i]),
        None => b.tmp.push(b"."),
    };
    // SAFETY: `tmp` is NUL-terminated.
    let fd = unsafe {
        libc::open(b.tmp.as_ptr(), libc::O_TMPFILE | libc::O_WRONLY | libc::O_CLOEXEC, 0o644)
    };
    if fd >= 0 {
        return Some((fd, false));
    }
    for n in 0..1000u64 {
        b.tmp.clear();
        if b.out_base.bytes().is_empty() {
            b.tmp.push(b"lockmeter-").push_u64(pid as u64).push(b".lmp");
        } else {
            b.tmp.push(b.out_base.bytes());
        }
        b.tmp.push(b".tmp.").push_u64(pid as u64);
        if n > 0 {
            b.tmp.push(b".").push_u64(n);
        }
        // SAFETY: `tmp` is NUL-terminated.
        let fd = unsafe {
            libc::open(
                b.tmp.as_ptr(),
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o644,
            )
        };
        if fd >= 0 {
            return Some((fd, true));
        }
        if sys::errno() != libc::EEXIST {
            return None;
        }
    }
    None
}

/// Gives the encoded file `fd` the name in `b.path` without replacing anything there: `linkat`
/// of the unnamed file (through /proc/self/fd), `link` of the named one, or for a file system
/// without hard links, `renameat2(RENAME_NOREPLACE)`. False when the name is taken.
fn link_new(b: &mut Bufs, fd: i32, named: bool) -> bool {
    if !named {
        b.scratch.clear();
        b.scratch.push(b"/proc/self/fd/").push_u64(fd as u64);
        // SAFETY: both paths are NUL-terminated; linkat does not replace an existing name.
        return unsafe {
            libc::linkat(
                libc::AT_FDCWD,
                b.scratch.as_ptr(),
                libc::AT_FDCWD,
                b.path.as_ptr(),
                libc::AT_SYMLINK_FOLLOW,
            )
        } == 0;
    }
    // SAFETY: both NUL-terminated; link does not replace an existing name.
    if unsafe { libc::link(b.tmp.as_ptr(), b.path.as_ptr()) } == 0 {
        // SAFETY: NUL-terminated.
        unsafe { libc::unlink(b.tmp.as_ptr()) };
        return true;
    }
    if sys::errno() == libc::EEXIST {
        return false;
    }
    // SAFETY: both NUL-terminated; RENAME_NOREPLACE fails rather than replace.
    unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            b.tmp.as_ptr(),
            libc::AT_FDCWD,
            b.path.as_ptr(),
            libc::RENAME_NOREPLACE,
        ) == 0
    }
}

/// Writes this image's profile file (or its idle line); `mapped` as for `resident::measure`.
pub(super) fn encode_to_file(b: &mut Bufs, pid: u32, end: End, mapped: bool) -> bool {
    // An image that took no lock, under `run`: a line in the manifest, no file (`b.path` empty:
    // a failed exec has no file to withdraw), and no resident memory to measure (the line
    // carries none; measuring reads the page map of every mapping the collector made).
    if super::idle::wanted(b) && super::idle::write_line(b, pid) {
        b.path.clear();
        return true;
    }
    // The collector's resident memory, before the tables are read (`resident::measure`).
    crate::resident::measure(mapped);
    let Some((fd, named)) = open_unnamed_or_fresh(b, pid) else {
        complain(b"cannot create the profile file next to ", b.out_base.bytes());
        return false;
    };
    let ok = encode(b, FdSink { fd, socket: false }, pid, end);
    let drop_tmp = |b: &Bufs| {
        if named {
            // SAFETY: NUL-terminated path of the file we created.
            unsafe { libc::unlink(b.tmp.as_ptr()) };
        }
    };
    if !ok {
        complain(b"cannot write the profile file next to ", b.out_base.bytes());
        drop_tmp(b);
        // SAFETY: `fd` is ours.
        unsafe { libc::close(fd) };
        return false;
    }
    // Final name: never overwrite. Root process: BASE, else BASE.PID; then .1, .2, ...
    for n in 0..10_000u64 {
        b.path.clear();
        let base_empty = b.out_base.bytes().is_empty();
        if base_empty {
            b.path.push(b"lockmeter-").push_u64(pid as u64);
        } else {
            b.path.push(b.out_base.bytes());
            if !IS_ROOT.load(Relaxed) {
                b.path.push(b".").push_u64(pid as u64);
            }
        }
        if n > 0 {
            if !base_empty && IS_ROOT.load(Relaxed) {
                b.path.push(b".").push_u64(pid as u64);
            }
            b.path.push(b".").push_u64(n);
        }
        if base_empty {
            b.path.push(b".lmp");
        }
        if link_new(b, fd, named) {
            // SAFETY: `fd` is ours.
            unsafe { libc::close(fd) };
            note_in_manifest(b);
            return true;
        }
        if sys::errno() != libc::EEXIST {
            break;
        }
    }
    complain(b"cannot find a free name for the profile ", b.out_base.bytes());
    drop_tmp(b);
    // SAFETY: `fd` is ours.
    unsafe { libc::close(fd) };
    false
}

fn complain(what: &[u8], path: &[u8]) {
    sys::write_stderr(b"lockmeter: ");
    sys::write_stderr(what);
    sys::write_stderr(path);
    sys::write_stderr(b"\n");
}

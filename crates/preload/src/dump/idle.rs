//! An image that took no lock, under `lockmeter run` (`LOCKMETER_IDLE_LINES=1`, the run's first
//! process excepted): instead of a profile file (an inode made, read and removed for nothing:
//! most of what ending costs a launcher's or a shell script's short processes), one line appended
//! to the run's manifest, in one `write` (lines of processes ending together never mix), with
//! what `run`'s process tree needs of it (`cli/src/tree.rs`, `Manifest::idle_images`):
//!
//! `idle TAB PID TAB PPID TAB IMAGE_SEQ TAB START_UNIX_NS TAB END_UNIX_NS TAB FIXED_NS TAB EXE
//! TAB CMDLINE NL`, numbers in decimal, the executable's path and the command line (its
//! NUL-terminated arguments, at most [`CMDLINE_MAX`] bytes of them) in hex; `FIXED_NS` is what
//! starting and ending cost the image (the `start_ns` + `end_ns` its profile would have had).

use super::{Bufs, CMDLINE_LEN, IMAGE_SEQ, IS_ROOT, PPID_SEEN, START_COST_NS, START_UNIX_NS};
use crate::sys;
use core::sync::atomic::{AtomicBool, Ordering::*};
use lockmeter_core::clock;

/// Whether idle images leave a line (`LOCKMETER_IDLE_LINES=1`, constructor).
pub(crate) static ENABLED: AtomicBool = AtomicBool::new(false);

/// The most bytes of the command line a line carries.
const CMDLINE_MAX: usize = 16 << 10;

/// Whether this image's end is a line: enabled, under a manifest, not the run's first process,
/// and no metered acquisition since the image started.
pub(super) fn wanted(b: &Bufs) -> bool {
    ENABLED.load(Relaxed)
        && !IS_ROOT.load(Relaxed)
        && !b.manifest.bytes().is_empty()
        && crate::guard::never_metered()
}

/// What a line says of its image besides its executable, command line and costs.
pub(super) struct Facts {
    pub(super) pid: u32,
    pub(super) ppid: u64,
    pub(super) seq: u32,
    pub(super) start_unix_ns: u64,
}

/// The buffers a line is built in (`Bufs`' own, or a pending fork child's: `fork.rs`). All
/// zero is a valid value.
#[repr(C)]
pub(crate) struct IdleBufs {
    cmdline: [u8; 32768],
    exe: [u8; 4096],
    chunk: [u8; 65536],
}

/// Appends the line to the manifest; false (nothing written) when it cannot.
pub(super) fn write_line(b: &mut Bufs, pid: u32) -> bool {
    let cmdline = match CMDLINE_LEN.load(Relaxed) {
        0 => sys::read_file(c"/proc/self/cmdline", &mut b.cmdline),
        n => b.cmdline.get(..n).unwrap_or(&[]),
    };
    let ppid = match PPID_SEEN.load(Relaxed) {
        // SAFETY: getppid has no preconditions.
        0 => (unsafe { libc::getppid() }) as u64,
        p => p as u64,
    };
    let facts = Facts {
        pid,
        ppid,
        seq: IMAGE_SEQ.load(Relaxed),
        start_unix_ns: START_UNIX_NS.load(Relaxed),
    };
    let fixed = || START_COST_NS.load(Relaxed).saturating_add(super::end_cost_ns());
    append(&b.manifest, cmdline, &mut b.exe, &mut b.chunk, &facts, fixed)
}

/// Whether a fork child that took no lock ends with a line: enabled, under a manifest (a fork
/// child is never the run's first process).
pub(super) fn wanted_in_fork_child() -> bool {
    // SAFETY: `manifest` is written by the constructor only; read, never borrowed mutably here.
    ENABLED.load(Relaxed) && !unsafe { &(*super::BUFS.0.get()).manifest }.bytes().is_empty()
}

/// A fork child's line, before its tables are its own (`pending.rs`): built in `bufs`,
/// from `facts` and the constructor's command line (read-only: the parent may be writing its
/// own buffers); `fixed` is what starting and ending cost it, taken just before the write.
pub(super) fn write_for_fork_child(
    bufs: &mut IdleBufs,
    facts: Facts,
    fixed: impl Fn() -> u64,
) -> bool {
    let n = CMDLINE_LEN.load(Relaxed);
    // SAFETY: the manifest's name and a command line read by the constructor (`n` > 0) are
    // written by the constructor only: read, never borrowed mutably here.
    let (manifest, kept) = unsafe {
        let b = &*super::BUFS.0.get();
        (&b.manifest, b.cmdline.get(..n).unwrap_or(&[]))
    };
    let cmdline = match n {
        0 => sys::read_file(c"/proc/self/cmdline", &mut bufs.cmdline),
        _ => kept,
    };
    append(manifest, cmdline, &mut bufs.exe, &mut bufs.chunk, &facts, fixed)
}

/// Builds the line in `chunk` (`exe` receives the executable's path) and appends it to
/// `manifest`.
fn append(
    manifest: &sys::PathBuf,
    cmdline: &[u8],
    exe: &mut [u8],
    chunk: &mut [u8],
    f: &Facts,
    fixed: impl Fn() -> u64,
) -> bool {
    let cmdline = cmdline.get(..cmdline.len().min(CMDLINE_MAX)).unwrap_or(&[]);
    // SAFETY: the path is NUL-terminated and `exe` is a writable buffer of the given size.
    let n =
        unsafe { libc::readlink(c"/proc/self/exe".as_ptr(), exe.as_mut_ptr().cast(), exe.len()) };
    let exe = exe.get(..n.max(0) as usize).unwrap_or(&[]);
    let mut line = Line { buf: &mut *chunk, len: 0 };
    line.push(b"idle");
    for v in [f.pid as u64, f.ppid, f.seq as u64, f.start_unix_ns, clock::realtime_ns()] {
        line.push(b"\t").num(v);
    }
    // What ending cost is taken last, just before the write.
    line.push(b"\t").num(fixed());
    line.push(b"\t").hex(exe);
    line.push(b"\t").hex(cmdline);
    line.push(b"\n");
    if line.len > line.buf.len() {
        return false; // cannot happen: the buffer holds the longest line
    }
    let len = line.len;
    // SAFETY: `manifest` is NUL-terminated; the flags create nothing.
    let fd = unsafe {
        libc::open(
            manifest.as_ptr(),
            libc::O_WRONLY | libc::O_APPEND | libc::O_CLOEXEC | libc::O_NOFOLLOW,
        )
    };
    if fd < 0 {
        return false;
    }
    let ok = chunk.get(..len).is_some_and(|l| sys::write_all(fd, l));
    // SAFETY: `fd` is ours.
    unsafe { libc::close(fd) };
    ok
}

/// A line built in a fixed buffer; bytes past its end are counted, not written.
struct Line<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl Line<'_> {
    fn push(&mut self, bytes: &[u8]) -> &mut Self {
        for &c in bytes {
            if let Some(slot) = self.buf.get_mut(self.len) {
                *slot = c;
            }
            self.len += 1;
        }
        self
    }

    fn num(&mut self, v: u64) -> &mut Self {
        self.push(sys::decimal(v, &mut [0; 20]))
    }

    fn hex(&mut self, bytes: &[u8]) -> &mut Self {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        for &c in bytes {
            self.push(&[DIGITS[(c >> 4) as usize], DIGITS[(c & 15) as usize]]);
        }
        self
    }
}

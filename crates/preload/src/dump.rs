//! Writing the profile: once per process image, at `exit`, `_exit`, `exec*` or a fatal signal;
//! and snapshots of it on request (`lockmeter ctl PID snapshot`), any number of times, while the
//! hooks keep running (everything is read through atomics).
//!
//! Async-signal-safe: no allocation, no lock, raw system calls only; big buffers are static and
//! owned by the one thread that wins the `DUMP` flag. The file is written under a temporary name
//! and then `link`ed to its final name, which never overwrites an existing file: the profile is
//! never seen half-written under its final name.

use crate::state::{self, CFG, STATE};
use crate::sys::{self, PathBuf};
use core::cell::UnsafeCell;
use core::ffi::c_int;
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering::*};
use lockmeter_core::stacks::{EventEntry, EventTable, StackEntry, StackStore};
use lockmeter_core::table::Table;
use lockmeter_core::{LockKind, Mode, clock};
use lockmeter_format::{BufSink, Encoder, HeaderRef, MapRef, Sink, SinkError};
use lockmeter_format::{ClockInfo, CpuStats, Dropped, EndReason, HoldTiming, Overhead};

/// Why the profile is written.
#[derive(Clone, Copy)]
pub(crate) enum End {
    Exit,
    UnderscoreExit,
    Signal(c_int),
    Exec,
    /// A snapshot while the program runs.
    Snapshot,
    /// Written by the guardian: killed by this signal, no handler of ours ran.
    Killed(c_int),
    /// Written by the guardian: the raw `exit_group` with this code.
    ExitGroup(c_int),
    /// Written by the guardian: how the program ended is unknown.
    Vanished,
}

/// 0 = not written, 1 = being written, 2 = written, 3 = a snapshot or reset is in progress (the
/// final profile waits for it). Whoever moves it away from 0 owns `BUFS` and the baseline.
static DUMP: AtomicU8 = AtomicU8::new(0);
const DUMP_IDLE: u8 = 0;
const DUMP_FINAL: u8 = 1;
const DUMP_WRITTEN: u8 = 2;
const DUMP_LIVE: u8 = 3;

/// The parent the guardian read from the dead program's `/proc/PID/stat` (0: ask `getppid`).
static PPID_SEEN: AtomicU32 = AtomicU32::new(0);

/// Run facts recorded at start-up.
pub(crate) static PID: AtomicU32 = AtomicU32::new(0);
pub(crate) static IS_ROOT: AtomicBool = AtomicBool::new(false);
pub(crate) static START_UNIX_NS: AtomicU64 = AtomicU64::new(0);
pub(crate) static START_MONO_NS: AtomicU64 = AtomicU64::new(0);
pub(crate) static START_TICKS: AtomicU64 = AtomicU64::new(0);
pub(crate) static NS_PER_PAIR: AtomicU64 = AtomicU64::new(0);
pub(crate) static NS_PER_STACK: AtomicU64 = AtomicU64::new(0);
/// This image's number within the pid (0, then +1 after each exec).
pub(crate) static IMAGE_SEQ: AtomicU32 = AtomicU32::new(0);

/// Static buffers of the (single) dumping thread.
struct Bufs {
    out_base: PathBuf,
    /// The run's manifest (`LOCKMETER_MANIFEST`), empty when none.
    manifest: PathBuf,
    path: PathBuf,
    tmp: PathBuf,
    scratch: PathBuf,
    cmdline: [u8; 32768],
    exe: [u8; 4096],
    chunk: [u8; 65536],
    comm: [u8; 64],
}

struct Shared(UnsafeCell<Bufs>);
// SAFETY: `Bufs` is only touched by the thread that set DUMP from 0 to 1 (or by the constructor,
// before any other thread of ours can run), so never concurrently.
unsafe impl Sync for Shared {}

static BUFS: Shared = Shared(UnsafeCell::new(Bufs {
    out_base: PathBuf::new(),
    manifest: PathBuf::new(),
    path: PathBuf::new(),
    tmp: PathBuf::new(),
    scratch: PathBuf::new(),
    cmdline: [0; 32768],
    exe: [0; 4096],
    chunk: [0; 65536],
    comm: [0; 64],
}));

/// Sets the output base name (from `LOCKMETER_OUTPUT`). Constructor only.
/// Bytes of the command line read at start-up (0: not read; read at dump time instead).
static CMDLINE_LEN: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);

/// Reads the command line now, before the program can rewrite its argv (servers such as redis
/// do): the profile names the program as it was started.
pub(crate) fn remember_cmdline() {
    // SAFETY: called from the constructor, before any hook meters or dumps.
    let b = unsafe { &mut *BUFS.0.get() };
    let n = sys::read_file(c"/proc/self/cmdline", &mut b.cmdline).len();
    CMDLINE_LEN.store(n, Relaxed);
}

pub(crate) fn set_output(base: &[u8]) {
    // SAFETY: called from the constructor, before any hook meters or dumps.
    let b = unsafe { &mut *BUFS.0.get() };
    b.out_base.clear().push(base);
}

/// Sets the manifest the final name of each profile is appended to (from `LOCKMETER_MANIFEST`).
/// Constructor only.
pub(crate) fn set_manifest(path: &[u8]) {
    // SAFETY: called from the constructor, before any hook meters or dumps.
    let b = unsafe { &mut *BUFS.0.get() };
    b.manifest.clear().push(path);
}

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
struct FdSink {
    fd: c_int,
    socket: bool,
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

/// Writes the profile of this process image, once. Returns whether this call wrote it.
pub(crate) fn write_profile(end: End) -> bool {
    let saved_errno = sys::errno();
    let wrote = write_profile_inner(end);
    sys::set_errno(saved_errno);
    wrote
}

fn write_profile_inner(end: End) -> bool {
    let st = STATE.load(Acquire);
    if st != state::READY && st != state::PAUSED {
        return false;
    }
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    if pid != PID.load(Relaxed) {
        // A vfork child sharing our memory: leave the parent's profile alone.
        return false;
    }
    // The image ends: `lockmeter ctl` can no longer reach it.
    crate::live::unlink_sock();
    // A snapshot in progress (on the control thread, which never runs our signal handlers, and
    // whose socket writes time out) finishes first.
    loop {
        match DUMP.compare_exchange(DUMP_IDLE, DUMP_FINAL, AcqRel, Acquire) {
            Ok(_) => break,
            Err(DUMP_LIVE) => sleep_ms(1),
            Err(_) => return false,
        }
    }
    STATE.store(state::DONE, Release);
    crate::resident::measure();
    // SAFETY: we won DUMP; no other thread touches BUFS until we release it.
    let b = unsafe { &mut *BUFS.0.get() };
    let ok = encode_to_file(b, pid, end);
    DUMP.store(if ok { DUMP_WRITTEN } else { DUMP_IDLE }, Release);
    ok
}

/// Whether this image's profile is written or an exec replaced it (the guardian then leaves).
pub(crate) fn image_left() -> bool {
    DUMP.load(Acquire) == DUMP_WRITTEN || EXEC_BUSY.load(Acquire)
}

/// The guardian, once the program is gone (no thread of it runs): writes the profile unless the
/// program did. A dump the program's death interrupted (or a snapshot) is started over: its
/// writer is gone and its temporary file with it.
pub(crate) fn write_by_guardian(ppid: u32, end: End) -> bool {
    let st = STATE.load(Acquire);
    if st != state::READY && st != state::PAUSED && st != state::DONE {
        return false;
    }
    let was = DUMP.swap(DUMP_FINAL, AcqRel);
    if was == DUMP_WRITTEN {
        DUMP.store(DUMP_WRITTEN, Release);
        return false;
    }
    if was == DUMP_FINAL {
        sys::write_stderr(b"lockmeter: the program died while writing its profile; its guardian writes it again\n");
    }
    STATE.store(state::DONE, Release);
    crate::live::unlink_sock();
    PPID_SEEN.store(ppid, Relaxed);
    crate::resident::measure();
    // SAFETY: we hold DUMP and no thread of the program runs any more.
    let b = unsafe { &mut *BUFS.0.get() };
    let ok = encode_to_file(b, PID.load(Relaxed), end);
    DUMP.store(if ok { DUMP_WRITTEN } else { DUMP_IDLE }, Release);
    ok
}

fn sleep_ms(ms: i64) {
    let ts = libc::timespec { tv_sec: 0, tv_nsec: ms * 1_000_000 };
    // SAFETY: a valid timespec; the remainder is not wanted.
    unsafe { libc::nanosleep(&ts, core::ptr::null_mut()) };
}

/// Takes the writer's lock for a snapshot or reset; false while the final profile is written
/// (or was), or another snapshot runs.
fn begin_live() -> bool {
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u32;
    let st = STATE.load(Acquire);
    pid == PID.load(Relaxed)
        && (st == state::READY || st == state::PAUSED)
        && DUMP.compare_exchange(DUMP_IDLE, DUMP_LIVE, AcqRel, Acquire).is_ok()
}

fn end_live() {
    DUMP.store(DUMP_IDLE, Release);
}

/// Why a snapshot or reset was refused.
pub(crate) const BUSY: &[u8] = b"error: the program is writing its final profile (it is exiting)\n";

/// Writes `ok\n` and then a snapshot profile of everything measured so far (less the reset
/// baseline) on the connected socket `fd`; hooks keep metering meanwhile. On refusal, writes
/// the reason instead.
pub(crate) fn snapshot(fd: c_int) -> bool {
    if !begin_live() {
        send_all(fd, BUSY);
        return false;
    }
    crate::resident::measure();
    // SAFETY: we own DUMP (DUMP_LIVE); no other thread touches BUFS until we release it.
    let b = unsafe { &mut *BUFS.0.get() };
    let ok = send_all(fd, b"ok\n")
        && encode(b, FdSink { fd, socket: true }, PID.load(Relaxed), End::Snapshot);
    end_live();
    ok
}

/// Resets the counts: records every record's statistics (and the per-CPU sums) as the baseline
/// that snapshots and the final profile subtract. False when refused or out of memory.
pub(crate) fn reset() -> Result<(), &'static [u8]> {
    if !begin_live() {
        return Err(BUSY);
    }
    let r = take_baseline();
    end_live();
    r
}

fn take_baseline() -> Result<(), &'static [u8]> {
    const NOMEM: &[u8] = b"error: cannot map memory for the reset baseline\n";
    let merged = Merged::of_exited();
    let rows = || rows(&merged);
    let n: usize = rows().map(|r| r.table.len()).sum();
    // SAFETY: we hold the writer's lock (DUMP_LIVE), as for each call below.
    let mapped = unsafe { crate::live::begin(n) };
    if !mapped {
        merged.free();
        return Err(NOMEM);
    }
    // The time series restarts too, from the same reading of the records.
    let reg = state::registry();
    // SAFETY: as above.
    unsafe { crate::timeline::begin_sums() };
    for row in rows() {
        let owner = row_owner(&row);
        for e in row.table.entries() {
            let ((k1, site), live) = (e.key(), &e.stats);
            let Some(r) = reg.and_then(|reg| record_row(reg, k1, e.tag.load(Relaxed))) else {
                continue;
            };
            let st = live.snapshot();
            // SAFETY: as above.
            unsafe { crate::live::put(owner, r.base, site, &st) };
            // SAFETY: as above.
            unsafe { crate::timeline::add(r.row, r.heir, &st) };
        }
    }
    merged.free();
    let now = clock::monotonic_ns().saturating_sub(START_MONO_NS.load(Relaxed));
    // SAFETY: we hold the writer's lock (DUMP_LIVE).
    unsafe { crate::timeline::reset(now) };
    for sh in state::shards() {
        for (cpu, c) in sh.cpus.iter().enumerate() {
            let a = c.acquisitions.get();
            if a > 0 {
                // SAFETY: as above.
                unsafe { crate::live::put_cpu(cpu, a, c.contended.get(), c.wait_ns.get()) };
            }
        }
    }
    Ok(())
}

/// What a record of the tables is in the profile (see [`record_row`]).
struct RecordRow {
    /// A row of its own, a class, or left out.
    ident: crate::classes::Ident,
    /// The key of its row: a live identity's `(slot << 32) | generation`, a class's
    /// [`class_pair`] (the time series and the lock ids use it).
    row: u64,
    /// The key its reset baseline is kept under: the identity's own, so that the next identity
    /// in a slot does not inherit it.
    base: u64,
    /// The row its figures join when its identity ends (its class's), 0 for a class row: the
    /// time series hands the identity's intervals over to it.
    heir: u64,
    kind: LockKind,
    mode: Mode,
}

/// What record `k1` tagged `tag` is in the profile; `None` for the calibration lock, records not
/// yet tagged and keys that do not decode.
fn record_row(
    reg: &lockmeter_core::registry::Registry<'_>,
    k1: u64,
    tag: u64,
) -> Option<RecordRow> {
    let (slot_idx, g, kind, mode) = crate::classes::unkey(k1);
    let (kind, mode) = (LockKind::from_u8(kind)?, Mode::from_u8(mode)?);
    let ident = crate::classes::resolve(Some(reg), k1, tag);
    let (row, heir) = match ident {
        crate::classes::Ident::Live(pair) => {
            (pair, class_pair(crate::classes::untag(tag).1, kind as u8))
        }
        crate::classes::Ident::Class(c) => (class_pair(c, kind as u8), 0),
        crate::classes::Ident::Skip => return None,
    };
    let base = if slot_idx == crate::classes::CLASS_SLOT || g != 0 {
        k1
    } else {
        crate::classes::key(slot_idx, crate::classes::untag(tag).0, kind, mode)
    };
    Some(RecordRow { ident, row, base, heir, kind, mode })
}

/// Sums every record per lock for the time series (the caller holds the writer's lock).
fn sum_records() {
    let reg = state::registry();
    let merged = Merged::of_exited();
    // SAFETY: the caller holds the writer's lock.
    unsafe { crate::timeline::begin_sums() };
    for row in rows(&merged) {
        for e in row.table.entries() {
            let (k1, _) = e.key();
            if let Some(r) = reg.and_then(|reg| record_row(reg, k1, e.tag.load(Relaxed))) {
                // SAFETY: as above.
                unsafe { crate::timeline::add(r.row, r.heir, &e.stats.snapshot()) };
            }
        }
    }
    merged.free();
}

/// Closes an interval of the time series (the control thread, once per period). False when
/// the final profile is being written.
pub(crate) fn sample() -> bool {
    if !begin_live() {
        return false;
    }
    sum_records();
    let now = clock::monotonic_ns().saturating_sub(START_MONO_NS.load(Relaxed));
    // SAFETY: we hold the writer's lock (DUMP_LIVE).
    unsafe { crate::timeline::close_interval(now) };
    end_live();
    true
}

/// The owner id a row's baseline is keyed by: the shard's current owner (a new thread that takes
/// a dead thread's table over starts from zero), 0 for the exited threads' row.
fn row_owner(row: &Row<'_>) -> u64 {
    match row.who {
        Who::Thread(sh) => sh.owner.load(Relaxed) as u64,
        Who::Exited(_) => 0,
    }
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

fn encode_to_file(b: &mut Bufs, pid: u32, end: End) -> bool {
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

fn encode(b: &mut Bufs, sink: FdSink, pid: u32, end: End) -> bool {
    let Ok(mut enc) = Encoder::begin(BufSink::<FdSink, 16384>::new(sink)) else {
        return false;
    };
    if write_records(b, &mut enc, pid, end).is_none() {
        return false;
    }
    match enc.finish() {
        Ok(mut s) => s.flush().is_ok(),
        Err(_) => false,
    }
}

type Enc = Encoder<BufSink<FdSink, 16384>>;

fn write_records(b: &mut Bufs, enc: &mut Enc, pid: u32, end: End) -> Option<()> {
    let end_mono = clock::monotonic_ns();
    let end_ticks = clock::now();
    let start_mono = START_MONO_NS.load(Relaxed);
    let duration = end_mono.saturating_sub(start_mono);
    let hz = CFG.calib_hz.load(Relaxed);
    let hz_run = if duration > 100_000_000 && clock::source() == clock::Source::Tsc {
        ((end_ticks.wrapping_sub(START_TICKS.load(Relaxed)) as u128 * 1_000_000_000)
            / duration as u128) as u64
    } else {
        0
    };
    let cmdline = match CMDLINE_LEN.load(Relaxed) {
        0 => sys::read_file(c"/proc/self/cmdline", &mut b.cmdline),
        n => b.cmdline.get(..n).unwrap_or(&[]),
    };
    // SAFETY: the path is NUL-terminated and `exe` is a writable buffer of the given size.
    let n = unsafe {
        libc::readlink(c"/proc/self/exe".as_ptr(), b.exe.as_mut_ptr().cast(), b.exe.len())
    };
    let exe = b.exe.get(..n.max(0) as usize).unwrap_or(&[]);
    // SAFETY: sysconf has no preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u32;
    let hold_timing = match CFG.hold_every.load(Relaxed) {
        0 => HoldTiming::On,
        1 => HoldTiming::Off,
        n => HoldTiming::Sampled(n),
    };
    let end_reason = match end {
        End::Exit => EndReason::Exit,
        End::UnderscoreExit => EndReason::UnderscoreExit,
        End::Signal(s) => EndReason::Signal(s),
        End::Exec => EndReason::Exec,
        End::Snapshot => EndReason::Snapshot,
        End::Killed(s) => EndReason::Killed(s),
        End::ExitGroup(c) => EndReason::ExitGroup(c),
        End::Vanished => EndReason::Vanished,
    };
    enc.header(&HeaderRef {
        collector: "preload",
        lockmeter_version: env!("CARGO_PKG_VERSION"),
        pid,
        ppid: match PPID_SEEN.load(Relaxed) {
            // SAFETY: getppid has no preconditions.
            0 => (unsafe { libc::getppid() }) as u32,
            p => p,
        },
        image_seq: IMAGE_SEQ.load(Relaxed),
        cmdline,
        exe,
        start_unix_ns: START_UNIX_NS.load(Relaxed),
        end_unix_ns: clock::realtime_ns(),
        duration_ns: duration,
        clock: ClockInfo { source: clock::source() as u8, hz, hz_run },
        cpu_count: cpus,
        hold_timing,
        end_reason,
    })
    .ok()?;

    write_maps(b, enc)?;

    // Locks and records, with dense lock ids assigned in a scratch map.
    let reg = state::registry()?;
    // The dead threads whose shards were taken over, merged into one row.
    let merged = Merged::of_exited();
    let rows = || rows(&merged);
    let total: usize = rows().map(|r| r.table.len() + r.events.len()).sum();
    let ids = IdMap::new(total);
    // The names the program gave, indexed once: (slot, generation) -> arena offset (+1).
    let mut nnames = 0usize;
    crate::names::for_each(|_, _, _| nnames += 1);
    let names = IdMap::new(nnames);
    crate::names::for_each(|slot, generation, off| {
        names.set(((slot as u64) << 32) | generation as u64, off + 1)
    });
    // Threads written so far (a thread is listed with its first record or event).
    let listed_threads = IdMap::new(rows().count());
    let mut lost_to_fold = 0u64;
    // SAFETY: the caller holds the writer's lock (DUMP).
    unsafe { crate::timeline::begin_sums() };
    for sh in rows() {
        let owner = row_owner(&sh);
        // The records of identities that ended, folded by class (see `meter`'s lock classes).
        let folded = Table::new(&state::SCRATCH, 64);
        for e in sh.table.entries() {
            let ((k1, site), live) = (e.key(), &e.stats);
            let Some(r) = record_row(reg, k1, e.tag.load(Relaxed)) else { continue };
            let mut st = live.snapshot();
            // The time series sums the raw figures (a reset's are in its base too).
            // SAFETY: the caller holds the writer's lock (DUMP).
            unsafe { crate::timeline::add(r.row, r.heir, &st) };
            // SAFETY: the caller holds the writer's lock (DUMP).
            let since_reset = unsafe { crate::live::subtract(owner, r.base, site, &mut st) };
            if since_reset && crate::live::is_zero(&st) {
                continue; // nothing since the last reset
            }
            let (kind, mode) = (r.kind, r.mode);
            let (pair, slot_idx) = match r.ident {
                crate::classes::Ident::Live(pair) => (pair, (pair >> 32) as u32),
                crate::classes::Ident::Skip => continue,
                crate::classes::Ident::Class(c) => {
                    match folded.get(crate::classes::class_key(c, kind as u8, mode as u8), site) {
                        Some(f) => f.stats.absorb_stats(&st),
                        None => lost_to_fold += st.acquisitions,
                    }
                    continue;
                }
            };
            if matches!(listed_threads.get(sh.index as u64), Some((_, true))) {
                write_thread(b, enc, &sh)?;
            }
            let (id, new) = ids.get(pair)?;
            if new {
                write_lock(enc, reg, &names, id, slot_idx, (pair & 0xffff_ffff) as u32, kind)
                    .ok()?;
            }
            enc.stats(sh.index, id, site, mode, &st).ok()?;
        }
        for (k1, site, live) in folded.iter() {
            let (_, class, kind, mode) = crate::classes::unkey(k1);
            let (Some(kind), Some(mode)) = (LockKind::from_u8(kind), Mode::from_u8(mode)) else {
                continue;
            };
            if matches!(listed_threads.get(sh.index as u64), Some((_, true))) {
                write_thread(b, enc, &sh)?;
            }
            let (id, new) = ids.get(class_pair(class, kind as u8))?;
            if new {
                write_class(enc, id, class, kind).ok()?;
            }
            enc.stats(sh.index, id, site, mode, &live.snapshot()).ok()?;
        }
    }
    // Stacks, deduplicated across threads, then the events that use them.
    let nstacks: usize = rows().map(|s| s.stacks.len()).sum();
    let stack_ids = IdMap::new(nstacks);
    let mut ok = true;
    for sh in rows() {
        sh.stacks.for_each(|hash, frames| {
            if let Some((id, true)) = stack_ids.get(hash) {
                ok &= enc.stack(id, frames).is_ok();
            }
        });
    }
    if !ok {
        return None;
    }
    for sh in rows() {
        let mut failed = false;
        sh.events.for_each(|k, e| {
            if failed {
                return;
            }
            let (_, _, kind, mode) = crate::classes::unkey(k.lock);
            let Some(mode) = Mode::from_u8(mode) else { return };
            let pair = match crate::classes::resolve_event(Some(reg), k.lock) {
                crate::classes::Ident::Live(pair) => pair,
                crate::classes::Ident::Skip => return,
                // A class is named by its site: the first uses of its identities are left out.
                crate::classes::Ident::Class(_)
                    if k.kind == lockmeter_core::stacks::EventKind::FirstUse =>
                {
                    return;
                }
                crate::classes::Ident::Class(c) => class_pair(c, kind),
            };
            let Some(stack) = stack_ids.find(k.stack) else { return };
            // Only locks with recorded acquisitions are listed; the others are counted as
            // dropped, and their events (a first use, say) go with them.
            let Some(id) = ids.find(pair) else { return };
            if matches!(listed_threads.get(sh.index as u64), Some((_, true))) {
                failed |= write_thread(b, enc, &sh).is_none();
            }
            let ev = lockmeter_format::Event {
                thread: sh.index,
                lock: id,
                mode,
                kind: k.kind,
                stack,
                holder_site: k.holder_site,
                holder_stack: if k.holder_stack == 0 {
                    None
                } else {
                    stack_ids.find(k.holder_stack)
                },
                count: e.count.get(),
                wait_ns: e.wait_ns.get(),
                wait_ns_max: e.wait_ns_max.get(),
            };
            failed |= enc.event(&ev).is_err();
        });
        if failed {
            return None;
        }
    }
    crate::longest::write(
        enc,
        START_TICKS.load(Relaxed),
        |k| {
            let (_, _, _, mode) = crate::classes::unkey(k);
            let pair = match crate::classes::resolve_event(Some(reg), k) {
                crate::classes::Ident::Live(pair) => pair,
                crate::classes::Ident::Skip => return None,
                crate::classes::Ident::Class(c) => class_pair(c, crate::classes::unkey(k).2),
            };
            Some(crate::longest::Resolved { lock: ids.find(pair)?, mode: Mode::from_u8(mode)? })
        },
        |h| stack_ids.find(h),
    )?;
    // SAFETY: the caller holds the writer's lock (DUMP).
    let lost = unsafe { crate::timeline::write(enc, duration, |pair| ids.find(pair)) }?;
    if lost > 0 {
        b.scratch.clear().push(b"the time series (--interval) lost ").push_u64(lost);
        b.scratch.push(b" lock rows that did not fit its tables: its sums fall short");
        enc.note(b.scratch.bytes()).ok()?;
    }
    stack_ids.free();
    ids.free();
    listed_threads.free();
    names.free();

    // Per-CPU totals.
    for cpu in 0..state::MAX_CPUS {
        let mut c = CpuStats { cpu: cpu as u32, ..Default::default() };
        for sh in state::shards() {
            if let Some(x) = sh.cpus.get(cpu) {
                c.acquisitions += x.acquisitions.get();
                c.contended += x.contended.get();
                c.wait_ns += x.wait_ns.get();
            }
        }
        // SAFETY: the caller holds the writer's lock (DUMP).
        unsafe {
            crate::live::subtract_cpu(cpu, &mut c.acquisitions, &mut c.contended, &mut c.wait_ns)
        };
        if c.acquisitions > 0 {
            enc.cpu(&c).ok()?;
        }
    }

    let mut d = Dropped {
        locks: reg.unrecorded_locks_estimate(),
        threads: state::THREADS_REFUSED.load(Relaxed),
        stacks: merged.lost_stacks,
        acquisitions_no_thread: state::ACQ_NO_SHARD.load(Relaxed),
        acquisitions_table_full: merged.lost_acquisitions + lost_to_fold,
        ..Dropped::default()
    };
    let mut acquisitions = 0u64;
    for sh in state::shards() {
        d.acquisitions_table_full += sh.dropped.get();
        d.acquisitions_registry_full += sh.dropped_registry.get();
        d.holds += sh.held_overflow.get();
        d.stacks += sh.stacks_dropped.get();
    }
    // The program's acquisitions only: the collector's own calibration pairs are not its cost.
    let (mut wanted_holds, mut threads, mut wait_ns) = (0u64, 0u64, 0u64);
    for sh in rows() {
        let before = acquisitions;
        for e in sh.table.entries() {
            if crate::classes::resolve(Some(reg), e.key().0, e.tag.load(Relaxed))
                != crate::classes::Ident::Skip
            {
                acquisitions += e.stats.acquisitions.get();
                wanted_holds += e.stats.cnt_hold.get();
                wait_ns = wait_ns.saturating_add(e.stats.wait_ns_total.get());
            }
        }
        threads += u64::from(acquisitions > before);
    }
    merged.free();
    d.acquisitions =
        d.acquisitions_no_thread + d.acquisitions_table_full + d.acquisitions_registry_full;
    enc.dropped(&d).ok()?;
    let mut note = [0u8; 512];
    for write in [crate::swap::note, crate::swap_rw::rw_note] {
        let n = write(&mut note);
        if n > 0 {
            enc.note(&note[..n]).ok()?;
        }
    }
    let per_pair = NS_PER_PAIR.load(Relaxed);
    let (slowdown, contended_ns, serial_ns) = crate::cost::estimate(&cost_inputs(
        duration,
        acquisitions,
        wanted_holds,
        per_pair,
        crate::cost::parallelism(threads, u64::from(cpus), duration, wait_ns),
    ));
    enc.overhead(&Overhead {
        ns_per_pair: per_pair,
        estimated_total_ns: per_pair.saturating_mul(acquisitions),
        memory_bytes: crate::resident::at_dump(),
        ns_per_stack: NS_PER_STACK.load(Relaxed),
        estimated_slowdown_milli: slowdown,
        contended_ns,
        serialized_ns: serial_ns,
    })
    .ok()?;
    Some(())
}

/// The cost model's inputs: the given totals, and what every thread measured (see `cost`).
fn cost_inputs(
    duration_ns: u64,
    acquisitions: u64,
    wanted_holds: u64,
    ns_per_pair: u64,
    parallel: f64,
) -> crate::cost::Inputs {
    let mut sum = [0u64; 8];
    for sh in state::shards() {
        let c = &sh.cost;
        let v = [
            c.acq_timed.get(),
            c.acq_ticks.get(),
            c.rel_timed.get(),
            c.rel_ticks.get(),
            c.gather_ticks.get(),
            c.holding.get(),
            c.holding_timed.get(),
            c.holding_ticks.get(),
        ];
        for (s, x) in sum.iter_mut().zip(v) {
            *s = s.saturating_add(x);
        }
    }
    let [acq_n, acq_t, rel_n, rel_t, gather_t, holding, holding_n, holding_t] = sum;
    let ns = |t: u64| state::ticks_to_ns(t) as f64;
    let mean = |t: u64, n: u64| if n == 0 { 0.0 } else { ns(t) / n as f64 };
    let contended = ns(gather_t) + mean(holding_t, holding_n) * holding as f64;
    crate::cost::Inputs {
        duration_ns,
        acquisitions,
        wanted_holds,
        ns_per_pair,
        calib_cs_ns: crate::cost::CALIB_CS_PS.load(Relaxed) as f64 / 1000.0,
        cs_acq_ns: mean(acq_t, acq_n),
        cs_rel_ns: mean(rel_t, rel_n),
        contended_ns: contended as u64,
        parallel,
    }
}

/// Writes a lock identity, with the name the program gave it.
fn write_lock(
    enc: &mut Enc,
    reg: &lockmeter_core::registry::Registry<'static>,
    names: &IdMap,
    id: u32,
    slot_idx: u32,
    gen_: u32,
    kind: LockKind,
) -> Result<(), lockmeter_format::EncodeError> {
    // An identity that ended (a named one keeps its row) may have left its slot to another lock.
    let addr =
        reg.slot(slot_idx).filter(|s| s.in_use() && s.generation() == gen_).map_or(0, |s| s.addr());
    let name = names
        .find(((slot_idx as u64) << 32) | gen_ as u64)
        .and_then(|off| crate::names::name_at(off.wrapping_sub(1)));
    enc.lock(id, addr, gen_, kind, name)
}

/// The lock-id map key of class `class` of kind `kind` (no identity has slot `CLASS_SLOT`).
fn class_pair(class: u32, kind: u8) -> u64 {
    ((crate::classes::CLASS_SLOT as u64) << 32) | ((class as u64) << 8) | kind as u64
}

/// Writes a class's lock: address and generation 0, and what the class is.
fn write_class(
    enc: &mut Enc,
    id: u32,
    class: u32,
    kind: LockKind,
) -> Result<(), lockmeter_format::EncodeError> {
    enc.lock(id, 0, 0, kind, None)?;
    let c = crate::classes::CLASSES.get(class);
    enc.lock_class(&lockmeter_format::LockClass {
        lock: id,
        site: c.map_or(0, |c| c.site()),
        initialized: c.is_some_and(|c| c.origin() == lockmeter_core::registry::ClassOrigin::Init),
        lifetimes: c.map_or(0, |c| c.ended()),
        sample_address: c.map_or(0, |c| c.sample_address()),
    })
}

/// The thread index of the row of exited threads (above every shard's index).
const EXITED_INDEX: u32 = state::MAX_THREADS as u32 + 1;

/// Whose records a [`Row`] holds.
enum Who<'a> {
    /// A shard's current (or last) thread.
    Thread(&'a state::Shard),
    /// The dead threads of every taken-over shard, this many.
    Exited(u64),
}

/// One thread row of the profile and its tables.
struct Row<'a> {
    index: u32,
    table: &'a Table<'static>,
    stacks: &'a StackStore<'static>,
    events: &'a EventTable<'static>,
    who: Who<'a>,
}

/// Every row: one per shard, then the exited threads (if any).
fn rows(merged: &Merged) -> impl Iterator<Item = Row<'_>> {
    let shards = state::shards().map(|sh| Row {
        index: sh.index,
        table: &sh.table,
        stacks: &sh.stacks,
        events: &sh.events,
        who: Who::Thread(sh),
    });
    let exited = (merged.threads > 0).then_some(Row {
        index: EXITED_INDEX,
        table: &merged.table,
        stacks: &merged.stacks,
        events: &merged.events,
        who: Who::Exited(merged.threads),
    });
    shards.chain(exited)
}

/// The exited accumulations of all shards merged, in a scratch mapping (the dumping thread is
/// its only writer). What does not fit is counted as dropped.
struct Merged {
    threads: u64,
    table: Table<'static>,
    stacks: StackStore<'static>,
    events: EventTable<'static>,
    lost_acquisitions: u64,
    lost_stacks: u64,
    mem: *mut u8,
    bytes: usize,
}

impl Merged {
    fn of_exited() -> Merged {
        let exited = || {
            state::shards().filter_map(|sh| {
                // SAFETY: null or an accumulation published by a shard's owner, never unmapped.
                unsafe { sh.exited.load(Acquire).as_ref() }
            })
        };
        let (mut threads, mut nr, mut ns, mut ne) = (0u64, 0usize, 0usize, 0usize);
        for ex in exited() {
            threads += ex.threads.get();
            nr += ex.table.len();
            ns += ex.stacks.len();
            ne += ex.events.len();
        }
        // At most half full: the merge never finds a table full.
        let cap = |n: usize| (n.max(8) * 2).next_power_of_two();
        let (nr, ns, ne) = if threads > 0 { (cap(nr), cap(ns), cap(ne)) } else { (0, 0, 0) };
        let stacks_off = 0;
        let events_off = stacks_off + ns * size_of::<StackEntry>();
        let bytes = events_off + ne * size_of::<EventEntry>();
        let mem = if bytes > 0 { state::map_zeroed(bytes) } else { core::ptr::null_mut() };
        let mut m = Merged {
            threads,
            table: Table::new(&state::SCRATCH, nr),
            stacks: StackStore::new(&[]),
            events: EventTable::new(&[]),
            lost_acquisitions: 0,
            lost_stacks: 0,
            mem,
            bytes,
        };
        if !mem.is_null() {
            // SAFETY: a fresh zeroed mapping of `bytes` bytes holding the two entry arrays one
            // after the other (each size a multiple of 8); zeroed memory is a valid empty entry.
            // It lives until `free`, after the last use of the tables. The record table maps its
            // own scratch memory.
            unsafe {
                m.stacks = StackStore::new(core::slice::from_raw_parts(
                    mem.add(stacks_off) as *const StackEntry,
                    ns,
                ));
                m.events = EventTable::new(core::slice::from_raw_parts(
                    mem.add(events_off) as *const EventEntry,
                    ne,
                ));
            }
        }
        for ex in exited() {
            for e in ex.table.entries() {
                if !crate::classes::merge_record(state::registry(), &m.table, e) {
                    m.lost_acquisitions += e.stats.acquisitions.get();
                }
            }
            ex.stacks.for_each(|_, frames| {
                if m.stacks.intern(frames).is_none() {
                    m.lost_stacks += 1;
                }
            });
            ex.events.for_each(|k, e| match m.events.get(&k) {
                Some(d) => {
                    d.count.add(e.count.get());
                    d.wait_ns.add(e.wait_ns.get());
                    d.wait_ns_max.max(e.wait_ns_max.get());
                }
                None => m.lost_stacks += 1,
            });
        }
        m
    }

    fn free(self) {
        if !self.mem.is_null() {
            // SAFETY: the mapping made in `of_exited`; its tables are not used after this.
            unsafe { libc::munmap(self.mem.cast(), self.bytes) };
        }
    }
}

/// Writes a thread's record (only threads with records are listed: the constructor's
/// calibration leaves the main thread with none of its own).
fn write_thread(b: &mut Bufs, enc: &mut Enc, row: &Row<'_>) -> Option<()> {
    let sh = match row.who {
        Who::Thread(sh) => sh,
        Who::Exited(n) => {
            b.scratch.clear().push(b"[").push_u64(n);
            b.scratch.push(if n == 1 { b" exited thread]" } else { b" exited threads]" });
            return enc.thread(row.index, 0, b.scratch.bytes()).ok();
        }
    };
    let tid = sh.tid.load(Relaxed);
    b.scratch.clear().push(b"/proc/self/task/").push_u64(tid as u64).push(b"/comm");
    // SAFETY: `scratch` is NUL-terminated and outlives the call.
    let path = unsafe { core::ffi::CStr::from_ptr(b.scratch.as_ptr()) };
    let comm = sys::read_file(path, &mut b.comm);
    let comm = comm.strip_suffix(b"\n").unwrap_or(comm);
    let (own, n) = sh.name();
    let name: &[u8] = if comm.is_empty() { own.get(..n).unwrap_or(&[]) } else { comm };
    enc.thread(sh.index, tid, name).ok()
}

/// Streams `/proc/self/maps` into map records.
/// The path given to an anonymous mapping that holds a thread's stack (the report's
/// `lockmeter_report::storage::THREAD_STACK`): the report names a lock there a stack lock.
const THREAD_STACK: &[u8] = b"[thread stack]";

/// Whether `[start, end)` holds the stack of a thread that has a shard: glibc maps a thread's
/// stack with its descriptor on top, where `stack_top` points (the main thread's is `[stack]`).
fn holds_thread_stack(start: u64, end: u64) -> bool {
    state::shards().any(|sh| {
        let top = sh.stack_top.load(Relaxed);
        start < top && top < end
    })
}

fn write_maps(b: &mut Bufs, enc: &mut Enc) -> Option<()> {
    // SAFETY: NUL-terminated path.
    let fd = unsafe { libc::open(c"/proc/self/maps".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Some(());
    }
    let mut have = 0usize;
    let mut result = Some(());
    while let Some(rest) = b.chunk.get_mut(have..) {
        if rest.is_empty() {
            // A single line longer than the buffer: drop it.
            have = 0;
            continue;
        }
        // SAFETY: `rest` is a valid writable buffer.
        let r = unsafe { libc::read(fd, rest.as_mut_ptr().cast(), rest.len()) };
        if r < 0 && sys::errno() == libc::EINTR {
            continue;
        }
        if r <= 0 {
            break;
        }
        have += r as usize;
        let data = b.chunk.get(..have).unwrap_or(&[]);
        let mut start = 0;
        while let Some(nl) = data.get(start..).and_then(|d| d.iter().position(|&c| c == b'\n')) {
            let line = data.get(start..start + nl).unwrap_or(&[]);
            if let Some(mut m) = MapRef::parse_line(line) {
                if m.path.is_empty() && holds_thread_stack(m.start, m.end) {
                    m.path = THREAD_STACK;
                }
                if enc.map(&m).is_err() {
                    result = None;
                }
            }
            start += nl + 1;
        }
        b.chunk.copy_within(start..have, 0);
        have -= start;
        if result.is_none() {
            break;
        }
    }
    // SAFETY: `fd` is ours.
    unsafe { libc::close(fd) };
    result
}

/// (slot, generation) -> dense lock id, in a scratch mapping (no allocator).
struct IdMap {
    keys: *mut u64,
    vals: *mut u32,
    cap: usize,
    bytes: usize,
    next: core::cell::Cell<u32>,
}

impl IdMap {
    fn new(n: usize) -> Self {
        let cap = (n.max(1) * 2).next_power_of_two();
        let bytes = cap * 12;
        let mem = state::map_zeroed(bytes);
        let vals = if mem.is_null() {
            core::ptr::null_mut()
        } else {
            // SAFETY: in bounds of the mapping (cap * 8 < bytes).
            let v = unsafe { mem.add(cap * 8) };
            v.cast()
        };
        IdMap { keys: mem.cast(), vals, cap, bytes, next: core::cell::Cell::new(0) }
    }

    /// The id of `pair` if it has one.
    fn find(&self, pair: u64) -> Option<u32> {
        if self.keys.is_null() {
            return None;
        }
        let k = pair.wrapping_add(1);
        let mut i = lockmeter_core::mix64(k) as usize & (self.cap - 1);
        for _ in 0..self.cap {
            // SAFETY: i < cap; both arrays have cap elements inside the mapping.
            let (kp, vp) = unsafe { (self.keys.add(i), self.vals.add(i)) };
            // SAFETY: as above; only this thread uses the map.
            let cur = unsafe { *kp };
            if cur == k {
                // SAFETY: as above.
                return Some(unsafe { *vp });
            }
            if cur == 0 {
                return None;
            }
            i = (i + 1) & (self.cap - 1);
        }
        None
    }

    /// Sets the value of `pair` (inserting it), so that `find` returns `val`.
    fn set(&self, pair: u64, val: u32) {
        if self.keys.is_null() {
            return;
        }
        let k = pair.wrapping_add(1);
        let mut i = lockmeter_core::mix64(k) as usize & (self.cap - 1);
        for _ in 0..self.cap {
            // SAFETY: i < cap; both arrays have cap elements inside the mapping.
            let (kp, vp) = unsafe { (self.keys.add(i), self.vals.add(i)) };
            // SAFETY: as above; only this thread uses the map.
            let cur = unsafe { *kp };
            if cur == k || cur == 0 {
                // SAFETY: as above.
                unsafe {
                    *kp = k;
                    *vp = val;
                }
                return;
            }
            i = (i + 1) & (self.cap - 1);
        }
    }

    /// The id of `pair`, and whether it was just assigned.
    fn get(&self, pair: u64) -> Option<(u32, bool)> {
        if self.keys.is_null() {
            return None;
        }
        let k = pair.wrapping_add(1); // 0 marks empty
        let mut i = lockmeter_core::mix64(k) as usize & (self.cap - 1);
        for _ in 0..self.cap {
            // SAFETY: i < cap; both arrays have cap elements inside the mapping.
            let (kp, vp) = unsafe { (self.keys.add(i), self.vals.add(i)) };
            // SAFETY: as above; only this thread uses the map.
            let cur = unsafe { *kp };
            if cur == k {
                // SAFETY: as above.
                return Some((unsafe { *vp }, false));
            }
            if cur == 0 {
                let id = self.next.get();
                self.next.set(id + 1);
                // SAFETY: as above.
                unsafe {
                    *kp = k;
                    *vp = id;
                }
                return Some((id, true));
            }
            i = (i + 1) & (self.cap - 1);
        }
        None
    }

    fn free(self) {
        if !self.keys.is_null() {
            // SAFETY: the mapping made in `new`, no longer used.
            unsafe { libc::munmap(self.keys.cast(), self.bytes) };
        }
    }
}

/// Room for the environment passed to an exec.
const EXEC_ENV_MAX: usize = 16384;
const SEQ_VAR: &[u8] = b"LOCKMETER_IMAGE_SEQ=";

struct ExecEnv {
    ptrs: [*const core::ffi::c_char; EXEC_ENV_MAX],
    var: [u8; 48],
}

struct SharedEnv(UnsafeCell<ExecEnv>);
// SAFETY: only the thread that sets EXEC_BUSY from false to true touches it.
unsafe impl Sync for SharedEnv {}

static EXEC_ENV: SharedEnv =
    SharedEnv(UnsafeCell::new(ExecEnv { ptrs: [core::ptr::null(); EXEC_ENV_MAX], var: [0; 48] }));
static EXEC_BUSY: AtomicBool = AtomicBool::new(false);

/// `envp` with `LOCKMETER_IMAGE_SEQ=<next>` in front (any older one left out), built in a static
/// array; `envp` itself if metering is off, another thread is exec-ing, or it does not fit.
pub(crate) fn env_with_image_seq(
    envp: *const *const core::ffi::c_char,
) -> *const *const core::ffi::c_char {
    // A vfork child shares our memory (and the exec'd image is a new pid, which starts at 0):
    // leave both its environment and our state alone.
    // SAFETY: getpid has no preconditions.
    if envp.is_null() || unsafe { libc::getpid() } as u32 != PID.load(Relaxed) {
        return envp;
    }
    if EXEC_BUSY.swap(true, Acquire) {
        return envp;
    }
    // SAFETY: we own EXEC_ENV (EXEC_BUSY).
    let env = unsafe { &mut *EXEC_ENV.0.get() };
    let mut v = PathBuf::new();
    v.push(SEQ_VAR).push_u64(IMAGE_SEQ.load(Relaxed) as u64 + 1);
    let bytes = v.bytes();
    let n = bytes.len().min(env.var.len() - 1);
    env.var[..n].copy_from_slice(&bytes[..n]);
    env.var[n] = 0;
    env.ptrs[0] = env.var.as_ptr().cast();
    let mut out = 1;
    let mut i = 0;
    loop {
        // SAFETY: `envp` is a NULL-terminated array of C strings (the exec contract).
        let e = unsafe { *envp.add(i) };
        if e.is_null() {
            break;
        }
        i += 1;
        // SAFETY: `e` is a NUL-terminated string.
        let s = unsafe { core::ffi::CStr::from_ptr(e) }.to_bytes();
        if s.starts_with(SEQ_VAR) {
            continue;
        }
        if out + 1 >= EXEC_ENV_MAX {
            EXEC_BUSY.store(false, Release);
            return envp;
        }
        env.ptrs[out] = e;
        out += 1;
    }
    env.ptrs[out] = core::ptr::null();
    env.ptrs.as_ptr()
}

/// Before an exec: writes the profile. Returns whether one was written (to withdraw on failure).
pub(crate) fn before_exec() -> bool {
    write_profile(End::Exec)
}

/// The exec failed: withdraws the profile just written and goes on metering.
pub(crate) fn exec_failed(written: bool) {
    // SAFETY: getpid has no preconditions.
    if unsafe { libc::getpid() } as u32 != PID.load(Relaxed) {
        return; // a vfork child: nothing of ours was taken
    }
    EXEC_BUSY.store(false, Release);
    if !written {
        return;
    }
    // SAFETY: DUMP is 2 (we wrote it) and no other thread dumps while it is not 0.
    let b = unsafe { &mut *BUFS.0.get() };
    // SAFETY: NUL-terminated path of the file we just wrote.
    unsafe { libc::unlink(b.path.as_ptr()) };
    DUMP.store(DUMP_IDLE, Release);
    STATE.store(crate::live::running_state(), Release);
}

/// In a fork child: a fresh profile for the new process.
pub(crate) fn reset_for_child() {
    DUMP.store(DUMP_IDLE, Relaxed);
    // SAFETY: the fork child's only thread.
    unsafe {
        crate::live::clear();
        crate::timeline::reset_for_child(0);
    }
    // SAFETY: getpid has no preconditions.
    PID.store(unsafe { libc::getpid() } as u32, Relaxed);
    IS_ROOT.store(false, Relaxed);
    IMAGE_SEQ.store(0, Relaxed);
    EXEC_BUSY.store(false, Relaxed);
    START_UNIX_NS.store(clock::realtime_ns(), Relaxed);
    START_MONO_NS.store(clock::monotonic_ns(), Relaxed);
    START_TICKS.store(clock::now(), Relaxed);
}

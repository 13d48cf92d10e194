//! Writing the profile: once per process image, at `exit`, `_exit`, `exec*` or a fatal signal;
//! and snapshots of it on request (`lockmeter ctl PID snapshot`), any number of times, while the
//! hooks keep running (everything is read through atomics).
//!
//! Async-signal-safe: no allocation, no lock, raw system calls only; big buffers are static and
//! owned by the one thread that wins the `DUMP` flag. The file is written under a temporary name
//! and then `link`ed to its final name, which never overwrites an existing file: the profile is
//! never seen half-written under its final name.
//!
//! This file holds the writer's flag, the run facts and buffers, and the entry points; one file
//! per job does the rest:
//! - `file.rs`: the file itself (`O_TMPFILE` + `linkat`, the manifest) and the descriptor sink;
//! - `snapshot.rs`: snapshots, resets (the baseline) and the time series' intervals;
//! - `merge.rs`: the rows (shards, exited threads merged) and what each record is in the profile;
//! - `ids.rs`: dense lock ids, class keys, lock and class records with their names;
//! - `records.rs`: encoding everything else a profile holds, record by record;
//! - `maps.rs`: `/proc/self/maps`;
//! - `exec.rs`: the environment passed to an exec, the profile withdrawn when it fails.

mod exec;
mod file;
mod idle;
mod ids;
mod maps;
mod merge;
mod pending;
mod records;
mod snapshot;

pub(crate) use exec::{ExecEnv, before_exec, env_with_image_seq, exec_failed, inherit_calibration};
pub(crate) use file::send_all;
pub(crate) use idle::ENABLED as IDLE_LINES;
pub(crate) use idle::IdleBufs;
pub(crate) use maps::note_loaded;
pub(crate) use snapshot::{reset, sample, snapshot};

use crate::state::{self, STATE};
use crate::sys::{self, PathBuf};
use core::cell::UnsafeCell;
use core::ffi::c_int;
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering::*};
use file::FdSink;
use lockmeter_core::clock;
use lockmeter_format::{BufSink, Encoder};

/// Why the profile is written.
#[derive(Clone, Copy)]
pub(crate) enum End {
    /// `exit` or return from `main`, with the status passed to `exit`.
    Exit(c_int),
    /// `_exit` / `_Exit`, with their status.
    UnderscoreExit(c_int),
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
    /// Written by the watcher: the kernel's log said the OOM killer killed the program.
    OomKilled,
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
/// Whether `NS_PER_PAIR`, `NS_PER_STACK` and the cost model's calibrated parts hold this image's
/// calibration (measured, or passed on by the image that exec'd it): then passed on at exec.
pub(crate) static CALIBRATED: AtomicBool = AtomicBool::new(false);
/// What starting cost this process (the constructor, or a fork child's handler), in ns.
pub(crate) static START_COST_NS: AtomicU64 = AtomicU64::new(0);
/// When (monotonic ns) the writing of the final profile began: its cost up to the OVERHEAD record
/// is the profile's `end_ns`.
static END_FROM_NS: AtomicU64 = AtomicU64::new(0);

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

/// Writes the profile of this process image, once. Returns whether this call wrote it.
pub(crate) fn write_profile(end: End) -> bool {
    let saved_errno = sys::errno();
    // A fork child before its first lock: its tables are still its parent's (`fork.rs`).
    let wrote = if state::fork_pending() { pending::end(end) } else { write_profile_inner(end) };
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
    END_FROM_NS.store(clock::monotonic_ns(), Relaxed);
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
    // SAFETY: we won DUMP; no other thread touches BUFS until we release it.
    let b = unsafe { &mut *BUFS.0.get() };
    let ok = file::encode_to_file(b, pid, end, true);
    DUMP.store(if ok { DUMP_WRITTEN } else { DUMP_IDLE }, Release);
    ok
}

/// Whether this image's profile is written or an exec replaced it (the guardian then leaves).
pub(crate) fn image_left() -> bool {
    DUMP.load(Acquire) == DUMP_WRITTEN || exec::EXEC_BUSY.load(Acquire)
}

/// The guardian, once the program is gone (no thread of it runs): writes the profile unless the
/// program did. A dump the program's death interrupted (or a snapshot) is started over: its
/// writer is gone and its temporary file with it. `watcher`: the caller is the watcher, whose
/// page tables are not the program's.
pub(crate) fn write_by_guardian(ppid: u32, end: End, watcher: bool) -> bool {
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
    END_FROM_NS.store(clock::monotonic_ns(), Relaxed);
    STATE.store(state::DONE, Release);
    crate::live::unlink_sock();
    PPID_SEEN.store(ppid, Relaxed);
    // SAFETY: we hold DUMP and no thread of the program runs any more.
    let b = unsafe { &mut *BUFS.0.get() };
    let ok = file::encode_to_file(b, PID.load(Relaxed), end, !watcher);
    DUMP.store(if ok { DUMP_WRITTEN } else { DUMP_IDLE }, Release);
    ok
}

fn sleep_ms(ms: i64) {
    let ts = libc::timespec { tv_sec: 0, tv_nsec: ms * 1_000_000 };
    // SAFETY: a valid timespec; the remainder is not wanted.
    unsafe { libc::nanosleep(&ts, core::ptr::null_mut()) };
}

fn encode(b: &mut Bufs, sink: FdSink, pid: u32, end: End) -> bool {
    let Ok(mut enc) = Encoder::begin(BufSink::<FdSink, 16384>::new(sink)) else {
        return false;
    };
    if records::write_records(b, &mut enc, pid, end).is_none() {
        return false;
    }
    match enc.finish() {
        Ok(mut s) => s.flush().is_ok(),
        Err(_) => false,
    }
}

type Enc = Encoder<BufSink<FdSink, 16384>>;

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
    exec::EXEC_BUSY.store(false, Relaxed);
    START_UNIX_NS.store(clock::realtime_ns(), Relaxed);
    START_MONO_NS.store(clock::monotonic_ns(), Relaxed);
    START_TICKS.store(clock::now(), Relaxed);
    crate::cost::START_CPU_NS.store(crate::cost::process_cpu_ns(PID.load(Relaxed)), Relaxed);
    START_COST_NS.store(0, Relaxed);
    END_FROM_NS.store(0, Relaxed);
}

/// What ending has cost so far (the final profile's `end_ns`), 0 outside the final writing.
pub(crate) fn end_cost_ns() -> u64 {
    match END_FROM_NS.load(Relaxed) {
        0 => 0,
        t => clock::monotonic_ns().saturating_sub(t).max(1),
    }
}

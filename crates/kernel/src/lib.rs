//! lockmeter's kernel collector: what the kernel sees of a program's locks, with eBPF.
//!
//! - **Kernel locks** from the tracepoints `lock:contention_begin` / `lock:contention_end`: per
//!   lock, waiting thread and kernel stack (with the user stack that led there), the contended
//!   count and the wait time (total, max, log2 histogram). Kinds come from the tracepoint flags;
//!   `mmap_lock` and `siglock` are recognized from the task structures.
//! - **Futex waits of any program** (Rust `std::sync`, C, C++, the JVM, static binaries) from
//!   `futex`, `futex_wait` and `futex_waitv`: per futex word, waiting thread, waiter user stack
//!   and the user stack of the last thread that woke the word (where the holder let go).
//!
//! Everything is aggregated in BPF hash maps; nothing is sent per event. What does not fit is
//! counted and written to the profile's `dropped` figures. The result is the same profile model
//! the preload collector writes ([`lockmeter_format::Profile`], collector `kernel`), one profile
//! per traced process, so every view of `lockmeter report` works on it.
//!
//! The BPF side is `src/bpf/lockmeter.bpf.c` (which includes its parts by job, `src/bpf/*.bpf.h`:
//! maps and helpers, processes, lock holders, kernel locks, futexes, Go), compiled against the
//! running kernel's BTF by
//! `build.rs` (clang, bpftool) into a libbpf-rs skeleton. Without them the crate still builds
//! and [`unavailable`] says how to get eBPF support.

#[cfg_attr(not(lockmeter_bpf), allow(dead_code))]
mod frames;
mod golang;
mod procfs;
mod profile;

#[cfg(lockmeter_bpf)]
mod bpf;

pub use profile::{GoProc, Raw, RawAgg, RawPreempt, RawProc, build_profiles};

use std::ffi::OsString;

/// Whether the executable at `path` is a Go program (the same test `record` uses to decide on
/// Go uprobes).
pub fn is_go_program(path: &std::path::Path) -> bool {
    !matches!(golang::inspect_file(path), golang::Inspection::NotGo)
}
use std::time::Duration;

/// What to trace.
#[derive(Debug, Clone)]
pub enum Target {
    /// Run this command (and its children) and trace it until it ends.
    Command(Vec<OsString>),
    /// Trace a running process (and the children it starts).
    Pid(u32),
    /// Trace every process on the machine.
    All,
}

/// Options of a recording.
#[derive(Debug, Clone)]
pub struct Options {
    /// What to trace.
    pub target: Target,
    /// Stop after this long (required for `All` and `Pid` unless interrupted).
    pub duration: Option<Duration>,
    /// Frames kept per stack (user and kernel stacks each).
    pub frames: usize,
    /// Environment changes for a `Target::Command` (set, or removed when `None`).
    pub envs: Vec<(OsString, Option<OsString>)>,
    /// The preload library the command runs with (`run --kernel`): a uprobe on it tells where
    /// each thread keeps its held locks, for lock-holder preemption.
    pub preload: Option<std::path::PathBuf>,
    /// A descriptor the command inherits (close-on-exec cleared in the child only): `run
    /// --kernel` passes its guardians' pipe.
    pub inherit_fd: Option<i32>,
    /// Leave the ended command unreaped: its zombie keeps its exit status for lockmeter's
    /// guardian to read (`run --kernel` reaps it once the guardians are done). Then
    /// [`Recorded::status`] is `None` and [`Recorded::pid`] names the zombie.
    pub keep_zombie: bool,
}

/// What a recording produced.
#[derive(Debug)]
pub struct Recorded {
    /// One profile per traced process that waited on something, the target first.
    pub profiles: Vec<lockmeter_format::Profile>,
    /// The command's exit status (for `Target::Command`, unless `keep_zombie`).
    pub status: Option<std::process::ExitStatus>,
    /// The command's pid (for `Target::Command`).
    pub pid: Option<u32>,
}

/// Why eBPF recording cannot work here, as one line that says what to do; `None` when it can.
pub fn unavailable() -> Option<String> {
    #[cfg(not(lockmeter_bpf))]
    {
        let why = include_str!(concat!(env!("OUT_DIR"), "/no_bpf_reason.txt"));
        Some(format!(
            "this lockmeter has no eBPF support ({why}): install clang, bpftool, libelf-dev and zlib1g-dev (bash .ci/install.sh does) and rebuild with `cargo build --release`"
        ))
    }
    #[cfg(lockmeter_bpf)]
    {
        procfs::privilege_problem()
    }
}

/// Records what `opts` says; `progress` is told what is happening (one line at a time).
pub fn record(opts: &Options, progress: &mut dyn FnMut(&str)) -> anyhow::Result<Recorded> {
    if let Some(why) = unavailable() {
        anyhow::bail!("{why}");
    }
    #[cfg(lockmeter_bpf)]
    {
        bpf::record(opts, progress)
    }
    #[cfg(not(lockmeter_bpf))]
    {
        let _ = (opts, progress);
        unreachable!("unavailable() is Some without eBPF support")
    }
}

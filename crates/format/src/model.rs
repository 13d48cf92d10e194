//! The profile model: what every collector produces and every report reads.
//!
//! A profile is one process image (one pid between exec calls). Its finest grain is the
//! [`Record`]: one (thread, lock, call site, mode) with its [`Stats`]. Per-lock, per-site,
//! per-thread and total views are sums of records.

pub use lockmeter_core::stacks::EventKind;
pub use lockmeter_core::{LockKind, Mode, Stats};

/// A whole profile.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Profile {
    /// Who, what and when.
    pub header: Header,
    /// The process's memory map at the end of the run, for symbolization.
    pub maps: Vec<MapEntry>,
    /// Threads that took at least one lock.
    pub threads: Vec<ThreadInfo>,
    /// Lock identities (address + generation).
    pub locks: Vec<LockInfo>,
    /// The statistics, one per (thread, lock, site, mode).
    pub records: Vec<Record>,
    /// Per-CPU totals (Lockmeter's per-CPU view).
    pub cpus: Vec<CpuStats>,
    /// Interned call stacks, referenced by `events`.
    pub stacks: Vec<Stack>,
    /// Contended acquisitions by waiter stack and holder, sampled acquisitions, first uses.
    pub events: Vec<Event>,
    /// What the kernel saw of locks another collector metered (`run --kernel`): sleeps in the
    /// kernel on the lock's futex words. At most one per lock.
    pub lock_sleeps: Vec<LockSleep>,
    /// Locks of the profile that are classes: the statistics of many lock identities that ended
    /// (destroyed), folded by where they were initialized or first used. At most one per lock.
    pub lock_classes: Vec<LockClass>,
    /// What did not fit in the fixed-size tables.
    pub dropped: Dropped,
    /// The acquisitions of `dropped` that the collector could tell apart by lock and call site
    /// (those refused a record when the collector's memory cap was reached); empty in files from
    /// before they were kept.
    pub lost: Vec<Lost>,
    /// The profiler's own cost.
    pub overhead: Overhead,
    /// What the collector could not see in this process, one sentence each (e.g. a Go program
    /// whose mutexes could not be traced); the report shows them as notes.
    pub notes: Vec<String>,
    /// The time series of `run --interval`: per interval, what each lock did in it (empty
    /// without `--interval`). Intervals are in time order and do not overlap; their sums per
    /// lock equal the lock's totals in `records`.
    pub timeline: Vec<Interval>,
    /// The longest contended waits, one by one, with their holders (`run --longest-waits N`);
    /// `None` when the collector kept none (off, or a file from before they were recorded).
    pub long_waits: Option<LongWaits>,
}

/// The longest contended waits the collector kept: up to `per_thread` per thread, the longest
/// of the run (a wait shorter than a full reservoir's shortest is not kept, and not a loss).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LongWaits {
    /// Waits kept per thread at most (`--longest-waits N`).
    pub per_thread: u32,
    /// Contended waits not considered because their thread had no reservoir (it could not be
    /// mapped).
    pub lost: u64,
    /// The waits kept, by start time.
    pub waits: Vec<LongWait>,
}

/// One contended wait: who waited on which lock, when, and who held the lock then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LongWait {
    /// `ThreadInfo::index` of the waiter (0: a thread that exited and whose table was taken
    /// over).
    pub thread: u32,
    /// `LockInfo::id`.
    pub lock: u32,
    /// How the lock was taken.
    pub mode: Mode,
    /// Start of the wait, ns since the profile's start.
    pub start_ns: u64,
    /// End of the wait (the acquisition), ns since the profile's start.
    pub end_ns: u64,
    /// `Stack::id` of the waiter's stack, when recorded.
    pub stack: Option<u32>,
    /// `ThreadInfo::index` of the holder when the waiter found the lock held (0: unknown).
    pub holder_thread: u32,
    /// The holder's call site (0: unknown).
    pub holder_site: u64,
    /// `Stack::id` of the holder's stack, when its acquisition recorded one.
    pub holder_stack: Option<u32>,
    /// When the holder acquired the lock, ns since the profile's start, when known.
    pub holder_acquired_ns: Option<u64>,
}

/// One interval of the time series.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Interval {
    /// Start, ns since the profile's start (monotonic clock).
    pub start_ns: u64,
    /// End (exclusive), ns since the profile's start.
    pub end_ns: u64,
    /// The locks active in it (any count non-zero), by lock id.
    pub locks: Vec<IntervalLock>,
}

/// What one lock did in one interval.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IntervalLock {
    /// LOCK id.
    pub lock: u32,
    /// Acquisitions (all modes, all threads).
    pub acquisitions: u64,
    /// Contended acquisitions.
    pub contended: u64,
    /// Wait time of contended acquisitions (ns).
    pub wait_ns: u64,
    /// Time held, over timed holds (ns).
    pub hold_ns: u64,
}

/// How the collector timed holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HoldTiming {
    /// Every hold timed (two clock reads per acquisition).
    #[default]
    On,
    /// No hold timed; wait timed only after a failed first attempt.
    Off,
    /// One hold in N timed.
    Sampled(u32),
}

/// Why the profile was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    /// `exit` or return from `main`, with the exit code (`None`: not recorded, as in profiles of
    /// earlier versions and of the kernel collector).
    Exit(Option<i32>),
    /// `_exit` / `_Exit`, with the exit code (`None`: not recorded).
    UnderscoreExit(Option<i32>),
    /// Killed by this signal (SIGTERM, SIGINT, ...).
    Signal(i32),
    /// The image was replaced by `exec*`.
    Exec,
    /// Written on request while the program ran.
    Snapshot,
    /// Killed by this signal where no handler of ours ran (SIGKILL, a crash, an OOM kill); the
    /// profile was written by lockmeter's guardian after the program died.
    Killed(i32),
    /// Left with the raw `exit_group` system call and this exit code, so no exit handler ran (Go
    /// programs do); the profile was written by lockmeter's guardian.
    ExitGroup(i32),
    /// Killed by the OOM killer (SIGKILL), as the kernel's log said; the profile was written by
    /// lockmeter's watcher, a process the OOM killer spares (the guardian dies with the program).
    OomKilled,
    /// Ended where no handler of ours ran, and how could not be learnt (the process was reaped
    /// before the guardian looked); the profile was written by lockmeter's guardian.
    Vanished,
}

impl Default for EndReason {
    fn default() -> Self {
        EndReason::Exit(None)
    }
}

impl EndReason {
    /// Whether lockmeter's guardian wrote the profile after the program was gone.
    pub fn by_guardian(self) -> bool {
        matches!(
            self,
            EndReason::Killed(_)
                | EndReason::ExitGroup(_)
                | EndReason::Vanished
                | EndReason::OomKilled
        )
    }
}

/// Clock calibration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClockInfo {
    /// 1 = TSC, 2 = CLOCK_MONOTONIC (see `lockmeter_core::clock::Source`).
    pub source: u8,
    /// Ticks per second used for conversion during the run.
    pub hz: u64,
    /// Ticks per second re-measured over the whole run (0 if the run was too short).
    pub hz_run: u64,
}

/// Defines a profile header type over the text types it holds: [`Header`] (owned: the model)
/// and `encode::HeaderRef` (borrowed: what the preload has at hand) have the same fields.
macro_rules! header_type {
    (
        $(#[$m:meta])* $name:ident $(<$lt:lifetime>)?, text: $text:ty,
        $(#[$cm:meta])* cmdline: $cmdline:ty, $(#[$em:meta])* exe: $exe:ty $(,)?
    ) => {
        $(#[$m])*
        pub struct $name $(<$lt>)? {
            /// Which collector wrote it: `preload`, `kernel`, `library`.
            pub collector: $text,
            /// Version of lockmeter that wrote it.
            pub lockmeter_version: $text,
            /// Process id.
            pub pid: u32,
            /// Parent process id.
            pub ppid: u32,
            /// Number of this image within the pid (0, then +1 after each exec).
            pub image_seq: u32,
            $(#[$cm])*
            pub cmdline: $cmdline,
            $(#[$em])*
            pub exe: $exe,
            /// Wall-clock start and end, ns since the Unix epoch.
            pub start_unix_ns: u64,
            /// See `start_unix_ns`.
            pub end_unix_ns: u64,
            /// Duration of metering (monotonic), ns.
            pub duration_ns: u64,
            /// Clock calibration.
            pub clock: $crate::model::ClockInfo,
            /// Online CPUs.
            pub cpu_count: u32,
            /// Hold timing mode.
            pub hold_timing: $crate::model::HoldTiming,
            /// Why the profile was written.
            pub end_reason: $crate::model::EndReason,
        }
    };
}
pub(crate) use header_type;

header_type! {
    /// Profile header.
    #[derive(Debug, Clone, PartialEq, Eq, Default)]
    Header,
    text: String,
    /// Command line.
    cmdline: Vec<String>,
    /// Path of the executable.
    exe: String,
}

/// One line of `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MapEntry {
    /// Start address.
    pub start: u64,
    /// End address (exclusive).
    pub end: u64,
    /// File offset of `start`.
    pub offset: u64,
    /// Permissions, e.g. `r-xp`.
    pub perms: String,
    /// Path, or `[heap]`, `[stack]`, ..., empty for anonymous memory.
    pub path: String,
}

/// A thread that took locks.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ThreadInfo {
    /// The index records use (1-based, in order of first lock).
    pub index: u32,
    /// Kernel thread id.
    pub tid: u32,
    /// Thread name (`comm`), possibly empty.
    pub name: String,
}

/// One lock identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInfo {
    /// The id records use.
    pub id: u32,
    /// Address of the lock object.
    pub address: u64,
    /// Generation: bumped by each `*_init` / `*_destroy` at this address.
    pub generation: u32,
    /// Kind of lock.
    pub kind: LockKind,
    /// A name given by the collector or the program, if any.
    pub name: Option<String>,
}

/// Statistics of one (thread, lock, site, mode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// `ThreadInfo::index`.
    pub thread: u32,
    /// `LockInfo::id`.
    pub lock: u32,
    /// Call site: the return address of the lock call (0 when unknown).
    pub site: u64,
    /// How the lock was taken.
    pub mode: Mode,
    /// The numbers.
    pub stats: Stats,
}

/// A lock of the profile that is a *class* (as the kernel's lockdep classes): the folded
/// statistics of the lock identities that ended (were destroyed) and were initialized at one call
/// site (or, for locks never initialized by a call, first used there). Its `LockInfo` has address
/// 0 and generation 0; live identities keep their own locks.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LockClass {
    /// `LockInfo::id`.
    pub lock: u32,
    /// The call site (return address) of the init call, or of the first use (0: the identities
    /// the collector could not class, folded by kind).
    pub site: u64,
    /// Whether `site` is where the locks were initialized (else where they were first used).
    pub initialized: bool,
    /// Lock identities of this class that ended (destroyed, or initialized again).
    pub lifetimes: u64,
    /// The address of the first lock of the class (its storage: heap, stack, ...); 0 if unknown.
    pub sample_address: u64,
}

/// The kernel's side of one lock metered in user space: its waits that slept in the kernel (on a
/// futex word inside the lock object), seen by the eBPF collector in the same run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LockSleep {
    /// `LockInfo::id`.
    pub lock: u32,
    /// Futex wait calls on the lock's words (each a sleep, or an attempt to sleep, in the
    /// kernel; one contended acquisition may make several).
    pub sleeps: u64,
    /// Their total time (ns).
    pub sleep_ns: u64,
    /// The longest (ns).
    pub sleep_ns_max: u64,
    /// Lock-holder preemption: times a thread holding the lock was switched out while runnable
    /// (preempted, or it yielded the CPU), as the kernel counts involuntary context switches.
    pub preempted_holds: u64,
    /// The time those holders spent switched out (ns).
    pub preempted_ns: u64,
    /// Waiters' time asleep on the lock's futex word while its holder was switched out (ns).
    pub preempted_wait_ns: u64,
}

/// Per-CPU totals.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuStats {
    /// CPU number.
    pub cpu: u32,
    /// Acquisitions made on this CPU.
    pub acquisitions: u64,
    /// Contended acquisitions made on this CPU.
    pub contended: u64,
    /// Wait time of acquisitions that completed on this CPU (ns).
    pub wait_ns: u64,
}

/// What did not fit.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Dropped {
    /// Acquisitions not recorded (per-thread table full, registry full, or thread pool exhausted).
    pub acquisitions: u64,
    /// Estimated distinct locks whose acquisitions were not recorded.
    pub locks: u64,
    /// Threads that got no shard (thread pool exhausted).
    pub threads: u64,
    /// Holds not timed because the per-thread stack of held locks was full.
    pub holds: u64,
    /// Stacks or events not recorded because their tables were full.
    pub stacks: u64,
    /// Of `acquisitions`: those of threads that got no table (thread pool exhausted).
    pub acquisitions_no_thread: u64,
    /// Of `acquisitions`: those whose thread's record table could not grow (the collector's
    /// memory cap, `--max-memory`, reached).
    pub acquisitions_table_full: u64,
    /// Of `acquisitions`: those of locks the lock registry had no room for.
    pub acquisitions_registry_full: u64,
}

/// Acquisitions of one (lock, site, mode) that the collector counted but could not record (its
/// memory cap, `--max-memory`, was reached): part of [`Dropped::acquisitions`], told apart by lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lost {
    /// `LockInfo::id` (the lock, or its class when the lock ended).
    pub lock: u32,
    /// Call site (return address of the lock call).
    pub site: u64,
    /// How the lock was taken.
    pub mode: Mode,
    /// Acquisitions not recorded.
    pub acquisitions: u64,
}

/// The profiler's own cost.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Overhead {
    /// Measured cost the hooks add to one lock+unlock pair, in ns (calibrated at the end).
    pub ns_per_pair: u64,
    /// `ns_per_pair` x acquisitions: estimated time the program spent in the profiler.
    pub estimated_total_ns: u64,
    /// Memory the collector mapped, in bytes.
    pub memory_bytes: u64,
    /// Measured cost of recording one call stack (contended acquisitions pay it), in ns; 0 when
    /// stacks were off.
    pub ns_per_stack: u64,
    /// Estimated slowdown of the run, x 1000: estimated metered wall time / unmetered wall time
    /// (1000: none). 0 when not estimated (files of earlier writers, the eBPF collector).
    pub estimated_slowdown_milli: u64,
    /// Time measured on the contended path (waiters' and holders' stacks and events), in ns,
    /// summed over threads.
    pub contended_ns: u64,
    /// Estimated time the hooks added inside critical sections that other threads waited for,
    /// in ns: added to wall time undivided.
    pub serialized_ns: u64,
    /// The process's CPU time over the run (user and system, all threads), in ns; 0 when not
    /// measured (files of earlier writers).
    pub cpu_ns: u64,
    /// Estimated CPU time the hooks took (pairs as the run paid them, the contended path, first
    /// uses), summed over threads, in ns; 0 when not estimated.
    pub hooks_ns: u64,
    /// What starting the collector cost this process, measured, in ns: the constructor (or, in a
    /// fork child, the fork handler), the guardian's and watcher's start included; the loading
    /// of the library before it is not. Summed over the processes of a run. 0: not measured.
    pub start_ns: u64,
    /// What ending cost this process, measured up to this record, in ns: the exit path and the
    /// profile's writing until then (the rest of the file, its name and the manifest line after
    /// it are not in it). Summed over the processes of a run. 0: not measured.
    pub end_ns: u64,
    /// The run's process images left out of its run file (they took no lock: a launcher's
    /// shells, a script's short commands), written by `run` into the first profile of the file:
    /// how many, and what starting and ending the collector cost them in all (the sum of their
    /// `start_ns` and `end_ns`), in ns. Metered wall time the unmetered run would not have had,
    /// counted in the run's estimate. 0: none (or files of earlier writers).
    pub other_images: u64,
    pub other_fixed_ns: u64,
}

impl Overhead {
    /// The estimated slowdown (estimated metered wall / unmetered wall), if estimated.
    pub fn estimated_slowdown(&self) -> Option<f64> {
        (self.estimated_slowdown_milli > 0).then(|| self.estimated_slowdown_milli as f64 / 1000.0)
    }
}

/// An interned call stack: return addresses, innermost first. `frames[0]` is the call site of the
/// lock function (the same address as the `site` of the matching record).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Stack {
    /// The id events use.
    pub id: u32,
    /// Return addresses, innermost first.
    pub frames: Vec<u64>,
}

/// Aggregated events of one thread on one lock, by the acquirer's stack and, for contended
/// acquisitions, by who held the lock when the acquirer found it held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// `ThreadInfo::index` of the acquirer (the waiter, for contended acquisitions).
    pub thread: u32,
    /// `LockInfo::id`.
    pub lock: u32,
    /// How the lock was taken.
    pub mode: Mode,
    /// Contended acquisition, sampled acquisition, or the lock's first use.
    pub kind: EventKind,
    /// `Stack::id` of the acquirer's stack.
    pub stack: u32,
    /// Call site of the holder when the acquirer found the lock held (0 when unknown or not
    /// contended).
    pub holder_site: u64,
    /// `Stack::id` of the holder's stack, when its acquisition recorded one.
    pub holder_stack: Option<u32>,
    /// Number of events.
    pub count: u64,
    /// Total wait (ns), contended events only.
    pub wait_ns: u64,
    /// Longest wait (ns).
    pub wait_ns_max: u64,
}

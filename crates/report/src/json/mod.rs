//! JSON output. The schema is documented in `SCHEMA.md`; bump [`SCHEMA_VERSION`] on any
//! incompatible change (a removed or renamed field, a changed meaning). Added fields do not
//! bump it.
//!
//! This file holds the types serialized (the schema's shape); `write.rs` fills them from an
//! [`Analysis`](crate::analysis::Analysis) and writes them.

use serde::Serialize;

mod write;

pub use write::json;

/// Version of the JSON schema.
pub const SCHEMA_VERSION: u32 = 2;

#[derive(Serialize)]
struct Doc<'a> {
    schema_version: u32,
    generator: &'static str,
    header: HeaderOut<'a>,
    headline: Headline,
    totals: TotalsOut,
    overhead: OverheadOut,
    dropped: DroppedOut,
    sort: &'static str,
    top: Option<usize>,
    filter: FilterOut<'a>,
    notes: &'a [String],
    locks: Vec<LockOut<'a>>,
    threads: Vec<ThreadOut<'a>>,
    processes: Vec<ProcessOut<'a>>,
    cpus: Vec<CpuOut>,
    pairs: Vec<PairOut<'a>>,
    timeline: Vec<IntervalOut>,
}

#[derive(Serialize)]
struct IntervalOut {
    pid: u32,
    start_ns: u64,
    end_ns: u64,
    locks: Vec<IntervalLockOut>,
}

#[derive(Serialize)]
struct IntervalLockOut {
    id: u32,
    acquisitions: u64,
    contended: u64,
    wait_ns: u64,
    hold_ns: u64,
    /// Critical-section pressure: the share of the interval the lock was held (see SCHEMA.md).
    held_pct: Option<f64>,
}

#[derive(Serialize)]
struct FilterOut<'a> {
    lock: Option<&'a str>,
    function: Option<&'a str>,
    locks_before: usize,
}

#[derive(Serialize)]
struct InlinedOut<'a> {
    function: Option<&'a str>,
    file: Option<&'a str>,
    line: Option<u32>,
}

#[derive(Serialize)]
struct FrameOut<'a> {
    address: String,
    name: String,
    function: Option<&'a str>,
    function_offset: Option<String>,
    module: Option<&'a str>,
    module_offset: Option<String>,
    file: Option<&'a str>,
    line: Option<u32>,
    inlined: Vec<InlinedOut<'a>>,
}

#[derive(Serialize)]
struct WaiterOut<'a> {
    stack: Vec<FrameOut<'a>>,
    count: u64,
    wait_ns: u64,
    wait_ns_max: u64,
}

#[derive(Serialize)]
struct HolderOut<'a> {
    stack: Vec<FrameOut<'a>>,
    count: u64,
    hold_ns: u64,
    hold_ns_max: u64,
}

#[derive(Serialize)]
struct PairOut<'a> {
    lock_id: u32,
    lock_name: &'a str,
    waiter_site: String,
    waiter_function: Option<&'a str>,
    waiter: FrameOut<'a>,
    holder_site: Option<String>,
    holder_function: Option<&'a str>,
    holder: Option<FrameOut<'a>>,
    count: u64,
    wait_ns: u64,
    wait_ns_max: u64,
}

#[derive(Serialize)]
struct HeaderOut<'a> {
    collector: &'a str,
    lockmeter_version: &'a str,
    pid: u32,
    ppid: u32,
    image_seq: u32,
    cmdline: &'a [String],
    exe: &'a str,
    start_unix_ns: u64,
    end_unix_ns: u64,
    duration_ns: u64,
    cpu_count: u32,
    hold_timing: &'static str,
    hold_sample_every: Option<u32>,
    end_reason: &'static str,
    end_signal: Option<i32>,
    end_exit_code: Option<i32>,
    clock: ClockOut,
}

#[derive(Serialize)]
struct ClockOut {
    source: &'static str,
    hz: u64,
    hz_run: u64,
}

#[derive(Serialize)]
struct Headline {
    threads_waiting_avg: Option<f64>,
    wait_ms_per_s: Option<f64>,
    available_ms_per_s: u64,
    cpu_time_pct: Option<f64>,
}

#[derive(Serialize)]
struct TotalsOut {
    #[serde(flatten)]
    counts: CountsOut,
    wait_ns: u64,
    wait_ns_max: u64,
    hold_ns: u64,
    hold_ns_max: u64,
    holds_timed: u64,
    owner_changes: u64,
    cond_waits: u64,
    cond_wait_ns: u64,
    dropped: u64,
    locks: usize,
    sites: usize,
    threads: usize,
}

#[derive(Serialize)]
struct OverheadOut {
    ns_per_pair: u64,
    estimated_total_ns: u64,
    estimated_slowdown: Option<f64>,
    contended_ns: u64,
    serialized_ns: u64,
    cpu_ns: u64,
    hooks_ns: u64,
    start_ns: u64,
    end_ns: u64,
    other_images: u64,
    other_fixed_ns: u64,
    memory_bytes: u64,
}

#[derive(Serialize)]
struct DroppedOut {
    acquisitions: u64,
    locks: u64,
    threads: u64,
    holds: u64,
    stacks: u64,
    acquisitions_no_thread: u64,
    acquisitions_table_full: u64,
    acquisitions_registry_full: u64,
}

/// The counts that open both the totals and every entry's statistics.
#[derive(Serialize)]
struct CountsOut {
    acquisitions: u64,
    read_acquisitions: u64,
    write_acquisitions: u64,
    contended: u64,
    contention_pct: f64,
    trylock_failures: u64,
}

/// The statistics every lock, site and thread entry carries.
#[derive(Serialize)]
struct StatsOut {
    #[serde(flatten)]
    counts: CountsOut,
    wait_ns_total: u64,
    wait_ns_max: u64,
    wait_ns_avg: Option<u64>,
    wait_ns_p50: Option<u64>,
    wait_ns_p90: Option<u64>,
    wait_ns_p99: Option<u64>,
    hold_ns_total: u64,
    hold_ns_max: u64,
    hold_ns_avg: Option<u64>,
    hold_ns_p50: Option<u64>,
    hold_ns_p90: Option<u64>,
    hold_ns_p99: Option<u64>,
    holds_timed: u64,
    owner_changes: u64,
    cnt_hold: u64,
    cnt_lock: u64,
    cond_waits: u64,
    cond_wait_ns: u64,
    wait_hist_log2_ns: Vec<u64>,
    hold_hist_log2_ns: Vec<u64>,
}

#[derive(Serialize)]
struct LockOut<'a> {
    id: u32,
    kind: &'static str,
    origin: &'static str,
    name: Option<&'a str>,
    name_source: Option<&'static str>,
    display_name: String,
    address: String,
    generation: u32,
    threads: usize,
    #[serde(flatten)]
    stats: StatsOut,
    /// Acquisitions not recorded (the collector's memory cap was reached); absent when none.
    #[serde(skip_serializing_if = "Option::is_none")]
    dropped_acquisitions: Option<u64>,
    sites: Vec<SiteOut<'a>>,
    first_use: Option<Vec<FrameOut<'a>>>,
    /// `run --kernel`: futex wait calls on the lock's words (sleeps in the kernel), and time.
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel_sleeps: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel_sleep_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kernel_sleep_ns_max: Option<u64>,
    /// `run --kernel`: lock-holder preemption (holders switched out while runnable).
    #[serde(skip_serializing_if = "Option::is_none")]
    preempted_holds: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    preempted_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    preempted_wait_ns: Option<u64>,
    waiters: Vec<WaiterOut<'a>>,
    holders: Vec<HolderOut<'a>>,
    pairs: Vec<PairOut<'a>>,
}

#[derive(Serialize)]
struct SiteOut<'a> {
    function: &'a str,
    module: Option<&'a str>,
    address: String,
    file: Option<&'a str>,
    line: Option<u32>,
    inlined: Vec<InlinedOut<'a>>,
    #[serde(flatten)]
    stats: StatsOut,
}

#[derive(Serialize)]
struct ThreadOut<'a> {
    index: u32,
    tid: u32,
    name: &'a str,
    locks: usize,
    #[serde(flatten)]
    stats: StatsOut,
}

#[derive(Serialize)]
struct ProcessOut<'a> {
    pid: u32,
    ppid: u32,
    name: &'a str,
    images: usize,
    threads: usize,
    locks: usize,
    #[serde(flatten)]
    stats: StatsOut,
}

#[derive(Serialize)]
struct CpuOut {
    cpu: u32,
    acquisitions: u64,
    contended: u64,
    contention_pct: f64,
    wait_ns: u64,
}

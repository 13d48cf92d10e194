//! Every setting of the collectors, defined once.
//!
//! Each [`Setting`] names its environment variable (what a collector reads), its `lockmeter run`
//! flag (what the CLI derives its options from), its default, its range and its help text. The
//! preload parses its environment with [`Setting::count`], [`parse_hold`] and [`parse_clock`]
//! (no allocation, usable in a constructor); the CLI builds its flags from [`SETTINGS`] and
//! forwards what the user gave as environment variables; the README's settings section is
//! [`markdown_table`] (a test checks it). Adding a setting is one row here and the code that
//! reads it.

mod parse;
mod readme;
#[cfg(test)]
mod tests;

pub use parse::{parse_clock, parse_duration_ms, parse_hold, parse_size, parse_u64, show_size};
pub use readme::markdown_table;

/// How `lockmeter run` exposes a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cli {
    /// A `--flag VALUE` derived from this row and forwarded as the environment variable.
    Flag(&'static str),
    /// The CLI defines this option itself (its processing is more than forwarding), e.g. `-o`.
    Own(&'static str),
    /// No option: the variable is set by `lockmeter run` itself, or by the user of a plain
    /// `LD_PRELOAD`.
    None,
}

/// What values a setting takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// A whole number, clamped by collectors into `min..=max` and refused outside it by the CLI.
    Count {
        /// The default.
        default: u64,
        /// The smallest value.
        min: u64,
        /// The largest value.
        max: u64,
    },
    /// Hold timing: `on`, `off` or `sample:N` ([`parse_hold`]).
    Hold,
    /// Clock source: `tsc` or `monotonic` ([`parse_clock`]).
    Clock,
    /// An amount of memory in bytes, given as a number with an optional binary unit (`K`, `M`,
    /// `G`, `T`: 512M is 512 MiB), clamped like a count ([`parse_size`]).
    Size {
        /// The default.
        default: u64,
        /// The smallest value.
        min: u64,
        /// The largest value.
        max: u64,
    },
    /// A path or other free text.
    Text,
    /// `1` switches it on (`0` off).
    Switch,
    /// A duration: a number with a unit, `ms`, `s`, `m` or `h` (a bare number is seconds),
    /// forwarded as given; collectors read it with [`parse_duration_ms`].
    Duration,
    /// One of the names listed.
    Choice(&'static [&'static str]),
}

/// One setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setting {
    /// The environment variable a collector reads.
    pub env: &'static str,
    /// The same name NUL-terminated, for `getenv` without allocation.
    pub env_c: &'static core::ffi::CStr,
    /// How `lockmeter run` exposes it.
    pub cli: Cli,
    /// What values it takes.
    pub value: Value,
    /// The placeholder of its value in help text (`N`, `MODE`, `FILE`).
    pub value_name: &'static str,
    /// The default, as shown to users.
    pub default: &'static str,
    /// What it does (one sentence, shown by `--help` and in the README).
    pub help: &'static str,
}

impl Setting {
    /// The value of a [`Value::Count`] setting from the raw environment value: the default when
    /// absent or not a number, clamped into range otherwise. Other kinds give 0.
    pub fn count(&self, raw: Option<&[u8]>) -> u64 {
        match self.value {
            Value::Count { default, min, max } => {
                raw.and_then(parse_u64).unwrap_or(default).clamp(min, max)
            }
            Value::Size { default, min, max } => {
                raw.and_then(parse_size).unwrap_or(default).clamp(min, max)
            }
            _ => 0,
        }
    }

    /// The default of a [`Value::Count`] setting (0 for other kinds).
    pub const fn default_count(&self) -> u64 {
        match self.value {
            Value::Count { default, .. } | Value::Size { default, .. } => default,
            _ => 0,
        }
    }

    /// Checks a value given on the command line; `Err` says what is allowed.
    pub fn validate(&self, v: &str) -> Result<(), String> {
        let name = match self.cli {
            Cli::Flag(f) | Cli::Own(f) => f,
            Cli::None => self.env,
        };
        match self.value {
            Value::Count { min, max, .. } => match parse_u64(v.as_bytes()) {
                Some(n) if (min..=max).contains(&n) => Ok(()),
                Some(_) => Err(format!("{name} takes a number from {min} to {max}, not '{v}'")),
                None => Err(format!("{name} takes a number, not '{v}'")),
            },
            Value::Size { min, max, .. } => match parse_size(v.as_bytes()) {
                Some(n) if (min..=max).contains(&n) => Ok(()),
                Some(_) => Err(format!(
                    "{name} takes a size from {} to {}, not '{v}'",
                    show_size(min),
                    show_size(max)
                )),
                None => Err(format!("{name} takes a size such as 512M or 4G, not '{v}'")),
            },
            Value::Hold => match parse_hold(v.as_bytes()) {
                Some(_) => Ok(()),
                None => Err(format!(
                    "'{v}' is not a hold timing mode: use on, off or sample:N (N >= 2)"
                )),
            },
            Value::Clock => match parse_clock(v.as_bytes()) {
                Some(_) => Ok(()),
                None => Err(format!("'{v}' is not a clock: use tsc or monotonic")),
            },
            Value::Text => Ok(()),
            Value::Duration => match parse_duration_ms(v.as_bytes()) {
                Some(_) => Ok(()),
                None => {
                    Err(format!("{name} takes a duration such as 500ms, 10s, 5m or 1h, not '{v}'"))
                }
            },
            Value::Switch => match v {
                "0" | "1" => Ok(()),
                _ => Err(format!("{name} takes 0 or 1, not '{v}'")),
            },
            Value::Choice(names) => match names.contains(&v) {
                true => Ok(()),
                false => Err(format!("{name} takes one of {}, not '{v}'", names.join(", "))),
            },
        }
    }
}

macro_rules! c {
    ($s:literal) => {
        match core::ffi::CStr::from_bytes_with_nul(concat!($s, "\0").as_bytes()) {
            Ok(c) => c,
            Err(_) => panic!("a setting name has a NUL byte"),
        }
    };
}

macro_rules! setting {
    ($id:ident, $env:literal, $cli:expr, $value:expr, $vn:literal, $default:literal, $help:literal) => {
        #[doc = $help]
        pub const $id: Setting = Setting {
            env: $env,
            env_c: c!($env),
            cli: $cli,
            value: $value,
            value_name: $vn,
            default: $default,
            help: $help,
        };
    };
}

/// Most threads a collector can give a table of their own (the ceiling of [`THREADS`]).
pub const MAX_THREADS: u64 = 16384;

setting!(
    OUTPUT,
    "LOCKMETER_OUTPUT",
    Cli::Own("-o"),
    Value::Text,
    "FILE",
    "lockmeter-N.lmp (a new N)",
    "Profile file to write. Under `lockmeter run` the program writes FILE and its other processes FILE.PID; with a plain LD_PRELOAD the first process to finish takes FILE, the others FILE.PID[.N] (default there: lockmeter-PID.lmp)."
);
setting!(
    HOLD,
    "LOCKMETER_HOLD",
    Cli::Flag("--hold"),
    Value::Hold,
    "MODE",
    "on",
    "Hold timing: on (every hold is timed), off (only contended waits are timed, the cheapest mode), sample:N (one hold in N)."
);
setting!(
    RECORDS,
    "LOCKMETER_RECORDS",
    Cli::Flag("--records"),
    Value::Count { default: 256, min: 16, max: 1 << 24 },
    "N",
    "256",
    "Records per thread in its first table segment: the (lock, call site, mode) combinations one thread keeps before its table grows (it doubles on demand, within --max-memory)."
);
setting!(
    LOCKS,
    "LOCKMETER_LOCKS",
    Cli::Flag("--locks"),
    Value::Count { default: 262144, min: 16, max: 1 << 26 },
    "N",
    "262144",
    "Distinct lock addresses the lock registry can keep (64 bytes each, reserved, resident once touched)."
);
setting!(
    MAX_MEMORY,
    "LOCKMETER_MAX_MEMORY",
    Cli::Flag("--max-memory"),
    Value::Size { default: 1 << 30, min: 1 << 20, max: 1 << 44 },
    "SIZE",
    "1G",
    "Most memory the collector keeps (K, M, G suffixes): its fixed tables, and each record at the most it can use (about 1.3 KB with both full histograms; tables grow on demand). Acquisitions of records that do not fit are counted as dropped, by lock and call site. It also sizes the address space reserved, not used, for the tables the watcher shares: 4 times SIZE plus 256 MiB, at most 64 GiB and a quarter of what `ulimit -v` leaves."
);
setting!(
    THREADS,
    "LOCKMETER_THREADS",
    Cli::Flag("--threads"),
    Value::Count { default: 1024, min: 1, max: MAX_THREADS },
    "N",
    "1024",
    "Threads alive at once that get a table of their own (a later thread takes over an exited thread's table; the exited threads' records stay, merged into one row)."
);
setting!(
    FRAMES,
    "LOCKMETER_FRAMES",
    Cli::Flag("--frames"),
    Value::Count { default: 16, min: 0, max: crate::stacks::MAX_FRAMES as u64 },
    "N",
    "16",
    "Frames per call stack, recorded for contended acquisitions, releases of wanted locks and first uses (0 or 1: the call site only, no stacks)."
);
setting!(
    STACK_SAMPLE,
    "LOCKMETER_STACK_SAMPLE",
    Cli::Flag("--stack-sample"),
    Value::Count { default: 0, min: 0, max: 1 << 30 },
    "N",
    "0 (off)",
    "Also record the stack of one acquisition in N, contended or not (0: never)."
);
setting!(
    STACKS,
    "LOCKMETER_STACKS",
    Cli::Flag("--stacks"),
    Value::Count { default: 1024, min: 16, max: 1 << 20 },
    "N",
    "1024",
    "Distinct call stacks each thread can keep."
);
setting!(
    EVENTS,
    "LOCKMETER_EVENTS",
    Cli::Flag("--events"),
    Value::Count { default: 4096, min: 16, max: 1 << 22 },
    "N",
    "4096",
    "(lock, stack, holder) combinations each thread can keep."
);
setting!(
    LONGEST_WAITS,
    "LOCKMETER_LONGEST_WAITS",
    Cli::Flag("--longest-waits"),
    Value::Count { default: 32, min: 0, max: 1024 },
    "N",
    "32",
    "Contended waits each thread keeps one by one, the longest of the run, with the holder that caused each (what `lockmeter export --perfetto` draws; 0: none)."
);
setting!(
    CLOCK,
    "LOCKMETER_CLOCK",
    Cli::Flag("--clock"),
    Value::Clock,
    "CLOCK",
    "tsc when invariant",
    "Clock: tsc (the CPU's time-stamp counter, calibrated to ns) or monotonic (clock_gettime)."
);
setting!(
    TSC_HZ,
    "LOCKMETER_TSC_HZ",
    Cli::None,
    Value::Count { default: 0, min: 0, max: u64::MAX },
    "HZ",
    "measured",
    "TSC rate in Hz; `lockmeter run` measures it once and passes it on, which skips each process's 3 ms calibration; the collector passes its own on to the images it execs."
);
setting!(
    ROOT_PPID,
    "LOCKMETER_ROOT_PPID",
    Cli::None,
    Value::Count { default: 0, min: 0, max: u64::MAX },
    "PID",
    "unset",
    "Set by `lockmeter run` to its own pid: the process whose parent it is writes the profile FILE itself."
);
setting!(
    MANIFEST,
    "LOCKMETER_MANIFEST",
    Cli::None,
    Value::Text,
    "FILE",
    "unset",
    "Set by `lockmeter run`: a file it made, to which each process appends the name of the profile it wrote (one line each), so that `run` knows every profile of the run without looking for them."
);
setting!(
    IDLE_LINES,
    "LOCKMETER_IDLE_LINES",
    Cli::None,
    Value::Switch,
    "0|1",
    "0",
    "Set to 1 by `lockmeter run` (not with --kernel): a process image other than the first that took no lock writes no profile file; it appends one line to the manifest instead, with what the run's summary needs of it (pid, parent, image number, times, what starting and ending cost it, executable, command line)."
);
setting!(
    IMAGE_SEQ,
    "LOCKMETER_IMAGE_SEQ",
    Cli::None,
    Value::Count { default: 0, min: 0, max: u32::MAX as u64 },
    "N",
    "unset",
    "Set by the collector across exec: the number of the image within its process (0, then +1 after each exec)."
);
setting!(
    CALIBRATION,
    "LOCKMETER_CALIBRATION",
    Cli::None,
    Value::Text,
    "PAIR:STACK:CS:OUT:REAL:RAW",
    "unset",
    "Set by the collector across exec: the calibration of the image before (ns per lock+unlock pair, ns per stack, then the pair's parts inside and outside the critical section, the real lock calls and the bare pair without the hooks, in ps), which the exec'd image takes instead of measuring its own (about 0.5 ms)."
);
/// The lock algorithms `--lock` swaps in (`pthread`: none, glibc's own); the lab's
/// `lockmeter_locks::cabi::ALGOS` are the others (a test there checks the two lists agree).
pub const SWAP_LOCKS: &[&str] = &[
    "pthread", "tas", "ttas", "ticket", "mcs", "mcs:park", "futex", "adaptive", "clh", "qspin",
    "unfair-q",
];

setting!(
    LOCK,
    "LOCKMETER_LOCK",
    Cli::Flag("--lock"),
    Value::Choice(SWAP_LOCKS),
    "ALGO",
    "pthread",
    "Run the program's default-type pthread mutexes (and their condvars) on this lab algorithm instead of glibc's: pthread (no swap), tas, ttas, ticket, mcs, mcs:park, futex, adaptive, clh, qspin or unfair-q. Other mutex types keep glibc's implementation; the profile's notes count them."
);
setting!(
    RWLOCK,
    "LOCKMETER_RWLOCK",
    Cli::Flag("--rwlock"),
    Value::Choice(&["pthread", "qrwlock"]),
    "ALGO",
    "pthread",
    "Run the program's process-private pthread rwlocks on this lab algorithm instead of glibc's: pthread (no swap) or qrwlock (fair: a recursive read lock taken while a writer waits deadlocks). The profile's notes count the rwlocks that were not swapped."
);
setting!(
    LOCK_FILTER,
    "LOCKMETER_LOCK_FILTER",
    Cli::Own("--lock-filter"),
    Value::Text,
    "NAME or FILE:LINE",
    "every mutex",
    "With --lock: swap only the mutexes inside the program's static object NAME (a mutex or an array of them, from the executable's symbol table), or those initialized or first locked at FILE:LINE (the site the report names them by; FILE by base name, from the executable's DWARF line table: compile it with -g); the others keep glibc's. `run` passes the collector OFFSET+SIZE, or @START-END,... code ranges (hex, from the executable's load address)."
);
setting!(
    DISABLE,
    "LOCKMETER_DISABLE",
    Cli::None,
    Value::Switch,
    "1",
    "unset",
    "1: the collector passes everything through and writes nothing."
);

setting!(
    CONTROL,
    "LOCKMETER_CONTROL",
    Cli::Flag("--control"),
    Value::Switch,
    "0|1",
    "1",
    "1: the collector serves `lockmeter ctl` and `lockmeter top` on a unix socket in /tmp/lockmeter-UID (a 0700 directory; only the same user or root may connect); 0: no socket."
);
setting!(
    GUARDIAN,
    "LOCKMETER_GUARDIAN",
    Cli::Flag("--guardian"),
    Value::Switch,
    "0|1",
    "1",
    "1: each metered process gets, at its first lock (a process that takes none has no profile to lose), a guardian, a process sharing its memory that writes the profile when the program ends where no handler runs (SIGKILL, a crash, the raw exit_group of Go), and a watcher, a process of its own that sees the collector's tables through shared memory and writes the profile when the OOM killer killed the program with its guardian; 0: neither (such endings lose the profile, and the collector's memory stays private)."
);
setting!(
    GUARD_FD,
    "LOCKMETER_GUARD_FD",
    Cli::None,
    Value::Text,
    "FD:INODE",
    "unset",
    "Set by `lockmeter run`: the write end of a pipe that every guardian holds until it is done, so that `run` reads the profiles only after the guardians wrote them."
);
setting!(
    DELAY,
    "LOCKMETER_DELAY",
    Cli::Flag("--delay"),
    Value::Duration,
    "DUR",
    "0",
    "Start metering this long after the program starts (500ms, 10s, 5m, 1h); until then hooks pass through."
);
setting!(
    DURATION,
    "LOCKMETER_DURATION",
    Cli::Flag("--duration"),
    Value::Duration,
    "DUR",
    "unlimited",
    "Stop metering this long after it started (after --delay); the program keeps running and the profile, written at its exit, holds what was measured."
);
setting!(
    INTERVAL,
    "LOCKMETER_INTERVAL",
    Cli::Flag("--interval"),
    Value::Duration,
    "DUR",
    "off",
    "Keep a time series: per interval of DUR and per lock, acquisitions, contended, wait and hold (the profile's timeline; at most 512 intervals, neighbours merge when full)."
);

/// Every setting, in the order `--help` and the README show them.
pub const SETTINGS: &[Setting] = &[
    OUTPUT,
    HOLD,
    RECORDS,
    LOCKS,
    MAX_MEMORY,
    THREADS,
    FRAMES,
    STACK_SAMPLE,
    STACKS,
    EVENTS,
    LONGEST_WAITS,
    CLOCK,
    LOCK,
    RWLOCK,
    LOCK_FILTER,
    TSC_HZ,
    ROOT_PPID,
    MANIFEST,
    IDLE_LINES,
    IMAGE_SEQ,
    CALIBRATION,
    DISABLE,
    CONTROL,
    GUARDIAN,
    GUARD_FD,
    DELAY,
    DURATION,
    INTERVAL,
];

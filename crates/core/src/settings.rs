//! Every setting of the collectors, defined once.
//!
//! Each [`Setting`] names its environment variable (what a collector reads), its `lockmeter run`
//! flag (what the CLI derives its options from), its default, its range and its help text. The
//! preload parses its environment with [`Setting::count`], [`parse_hold`] and [`parse_clock`]
//! (no allocation, usable in a constructor); the CLI builds its flags from [`SETTINGS`] and
//! forwards what the user gave as environment variables; the README's settings section is
//! [`markdown_table`] (a test checks it). Adding a setting is one row here and the code that
//! reads it.

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
    /// A path or other free text.
    Text,
    /// `1` switches it on.
    Switch,
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
            _ => 0,
        }
    }

    /// The default of a [`Value::Count`] setting (0 for other kinds).
    pub const fn default_count(&self) -> u64 {
        match self.value {
            Value::Count { default, .. } => default,
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

/// Parses a decimal `u64` (no sign, no spaces); `None` when empty, not a number or too large.
pub fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    Some(v)
}

/// Hold timing from its text: `on` → 0 (time every hold), `off` → 1 (none), `sample:N` → N
/// (one hold in N, N ≥ 2, at most 2^30). `None` for anything else.
pub fn parse_hold(b: &[u8]) -> Option<u32> {
    match b {
        b"on" => Some(0),
        b"off" => Some(1),
        _ => {
            let n = parse_u64(b.strip_prefix(b"sample:")?)?;
            (2..=1 << 30).contains(&n).then_some(n as u32)
        }
    }
}

/// The clock from its text: `tsc` → `Some(true)`, `monotonic` → `Some(false)`.
pub fn parse_clock(b: &[u8]) -> Option<bool> {
    match b {
        b"tsc" => Some(true),
        b"monotonic" => Some(false),
        _ => None,
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
    Value::Count { default: 4096, min: 16, max: 1 << 24 },
    "N",
    "4096",
    "Records per thread: the (lock, call site, mode) combinations one thread can keep."
);
setting!(
    LOCKS,
    "LOCKMETER_LOCKS",
    Cli::Flag("--locks"),
    Value::Count { default: 65536, min: 16, max: 1 << 26 },
    "N",
    "65536",
    "Distinct lock addresses the lock registry can keep."
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
    "TSC rate in Hz; `lockmeter run` measures it once and passes it on, which skips each process's 3 ms calibration."
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
    IMAGE_SEQ,
    "LOCKMETER_IMAGE_SEQ",
    Cli::None,
    Value::Count { default: 0, min: 0, max: u32::MAX as u64 },
    "N",
    "unset",
    "Set by the collector across exec: the number of the image within its process (0, then +1 after each exec)."
);
/// The lock algorithms `--lock` swaps in (`pthread`: none, glibc's own); the lab's
/// `lockmeter_locks::cabi::ALGOS` are the others (a test there checks the two lists agree).
pub const SWAP_LOCKS: &[&str] =
    &["pthread", "tas", "ttas", "ticket", "mcs", "mcs:park", "futex", "adaptive", "clh"];

setting!(
    LOCK,
    "LOCKMETER_LOCK",
    Cli::Flag("--lock"),
    Value::Choice(SWAP_LOCKS),
    "ALGO",
    "pthread",
    "Run the program's default-type pthread mutexes (and their condvars) on this lab algorithm instead of glibc's: pthread (no swap), tas, ttas, ticket, mcs, mcs:park, futex, adaptive or clh. Other mutex types keep glibc's implementation; the profile's notes count them."
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
    "NAME",
    "every mutex",
    "With --lock: swap only the mutexes inside the program's static object NAME (a mutex or an array of them, from the executable's symbol table); the others keep glibc's. `run` passes the collector OFFSET+SIZE (hex, from the executable's load address)."
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

/// Every setting, in the order `--help` and the README show them.
pub const SETTINGS: &[Setting] = &[
    OUTPUT,
    HOLD,
    RECORDS,
    LOCKS,
    THREADS,
    FRAMES,
    STACK_SAMPLE,
    STACKS,
    EVENTS,
    CLOCK,
    LOCK,
    RWLOCK,
    LOCK_FILTER,
    TSC_HZ,
    ROOT_PPID,
    IMAGE_SEQ,
    DISABLE,
];

/// The settings as the README's Markdown table (`run` option, variable, meaning, default).
pub fn markdown_table() -> String {
    let mut s =
        String::from("| `run` option | variable | meaning | default |\n|---|---|---|---|\n");
    for st in SETTINGS {
        let opt = match st.cli {
            Cli::Flag(f) | Cli::Own(f) => format!("`{f} {}`", st.value_name),
            Cli::None => String::new(),
        };
        s.push_str(&format!("| {opt} | `{}` | {} | {} |\n", st.env, st.help, st.default));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_consistent() {
        for (i, a) in SETTINGS.iter().enumerate() {
            assert_eq!(a.env_c.to_bytes(), a.env.as_bytes());
            assert!(a.env.starts_with("LOCKMETER_"), "{}", a.env);
            for b in &SETTINGS[i + 1..] {
                assert_ne!(a.env, b.env);
                if let (Cli::Flag(x) | Cli::Own(x), Cli::Flag(y) | Cli::Own(y)) = (a.cli, b.cli) {
                    assert_ne!(x, y);
                }
            }
            if let Value::Count { default, min, max } = a.value {
                assert!(min <= default && default <= max, "{}", a.env);
            }
        }
    }

    #[test]
    fn counts_default_and_clamp() {
        assert_eq!(FRAMES.count(None), 16);
        assert_eq!(FRAMES.count(Some(b"4")), 4);
        assert_eq!(FRAMES.count(Some(b"0")), 0);
        assert_eq!(FRAMES.count(Some(b"1000")), crate::stacks::MAX_FRAMES as u64);
        assert_eq!(RECORDS.count(Some(b"1")), 16);
        assert_eq!(RECORDS.count(Some(b"x")), 4096);
        assert_eq!(RECORDS.count(Some(b"")), 4096);
        assert_eq!(RECORDS.count(Some(b"99999999999999999999999")), 4096);
    }

    #[test]
    fn hold_and_clock() {
        assert_eq!(parse_hold(b"on"), Some(0));
        assert_eq!(parse_hold(b"off"), Some(1));
        assert_eq!(parse_hold(b"sample:16"), Some(16));
        assert_eq!(parse_hold(b"sample:1"), None);
        assert_eq!(parse_hold(b"sample:"), None);
        assert_eq!(parse_hold(b"16"), None);
        assert_eq!(parse_clock(b"tsc"), Some(true));
        assert_eq!(parse_clock(b"monotonic"), Some(false));
        assert_eq!(parse_clock(b"TSC"), None);
    }

    #[test]
    fn validate_says_what_is_allowed() {
        assert!(FRAMES.validate("8").is_ok());
        let e = FRAMES.validate("65").unwrap_err();
        assert!(e.contains("--frames takes a number from 0 to 64"), "{e}");
        assert!(RECORDS.validate("ten").unwrap_err().contains("takes a number"));
        assert!(HOLD.validate("sample:4").is_ok());
        assert!(HOLD.validate("sometimes").is_err());
        assert!(CLOCK.validate("monotonic").is_ok());
        assert!(CLOCK.validate("hpet").is_err());
    }

    #[test]
    fn markdown_has_every_setting() {
        let t = markdown_table();
        for s in SETTINGS {
            assert!(t.contains(s.env), "{}", s.env);
        }
        assert_eq!(t.lines().count(), SETTINGS.len() + 2);
    }
}

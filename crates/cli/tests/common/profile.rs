//! A profile read back through `lockmeter report --format json`, and the checks every test
//! makes on it (exact counts, internal consistency, nothing dropped, how it ended).

use super::run::{Ran, clip, lockmeter};
use serde_json::Value;
use std::fmt::Display;
use std::path::{Path, PathBuf};

/// A profile read back as JSON, with the run that made it (for diagnostics).
pub struct Profile {
    pub path: PathBuf,
    pub json: Value,
    pub context: String,
}

/// A field of a JSON object as u64 (panics with the object when absent).
pub fn u(v: &Value, field: &str) -> u64 {
    v.get(field)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("no unsigned field `{field}` in {}", clip(&v.to_string(), 2000)))
}

/// A string field (None for null or absent).
pub fn sf<'a>(v: &'a Value, field: &str) -> Option<&'a str> {
    v.get(field).and_then(Value::as_str)
}

impl Profile {
    /// Reads `path` with `lockmeter report --format json`.
    pub fn load(path: &Path, ran: &Ran) -> Profile {
        Profile::load_with(path, ran, &[])
    }

    /// [`Profile::load`] with more `report` options (`--process PID`).
    pub fn load_with(path: &Path, ran: &Ran, opts: &[&str]) -> Profile {
        let context = ran.to_string();
        assert!(path.is_file(), "no profile at {}\n{context}", path.display());
        let mut args = vec!["report", path.to_str().unwrap(), "--format", "json"];
        args.extend_from_slice(opts);
        let rep = lockmeter(path.parent().unwrap_or(Path::new(".")), &args);
        if !rep.status.success() {
            panic!("lockmeter report failed on {}\n{rep}\n{context}", path.display());
        }
        let json: Value = serde_json::from_str(&rep.stdout)
            .unwrap_or_else(|e| panic!("report JSON does not parse: {e}\n{rep}"));
        Profile { path: path.to_path_buf(), json, context }
    }

    /// Panics with `msg`, the run's output and the JSON.
    #[track_caller]
    pub fn fail(&self, msg: impl Display) -> ! {
        let pretty = serde_json::to_string_pretty(&self.json).unwrap_or_default();
        panic!(
            "{msg}\n=== profile {}\n{}\n=== JSON:\n{}",
            self.path.display(),
            self.context,
            clip(&pretty, 30000)
        )
    }

    #[track_caller]
    pub fn check(&self, cond: bool, msg: impl Display) {
        if !cond {
            self.fail(format!("check failed: {msg}"));
        }
    }

    #[track_caller]
    pub fn eq<T: PartialEq + std::fmt::Debug>(&self, what: impl Display, actual: T, expected: T) {
        if actual != expected {
            self.fail(format!("{what}: got {actual:?}, expected {expected:?}"));
        }
    }

    pub fn header(&self) -> &Value {
        &self.json["header"]
    }
    pub fn totals(&self, f: &str) -> u64 {
        u(&self.json["totals"], f)
    }
    pub fn dropped(&self, f: &str) -> u64 {
        u(&self.json["dropped"], f)
    }
    pub fn locks(&self) -> &[Value] {
        self.json["locks"].as_array().map(Vec::as_slice).unwrap_or(&[])
    }
    pub fn threads(&self) -> &[Value] {
        self.json["threads"].as_array().map(Vec::as_slice).unwrap_or(&[])
    }

    /// Every lock entry named `name`.
    pub fn locks_named(&self, name: &str) -> Vec<&Value> {
        self.locks().iter().filter(|l| sf(l, "name") == Some(name)).collect()
    }

    /// The single lock entry named `name`.
    #[track_caller]
    pub fn lock(&self, name: &str) -> &Value {
        let v = self.locks_named(name);
        match v.as_slice() {
            [one] => one,
            [] => self.fail(format!("no lock named {name}")),
            _ => self.fail(format!("{} lock entries named {name}", v.len())),
        }
    }

    /// Acquisitions of the lock named `name` (0 when it is not in the profile).
    pub fn acq(&self, name: &str) -> u64 {
        self.locks_named(name).iter().map(|l| u(l, "acquisitions")).sum()
    }

    /// Checks the lock named `name`: kind and exact acquisitions.
    #[track_caller]
    pub fn expect_lock(&self, name: &str, kind: &str, acquisitions: u64) -> &Value {
        let l = self.lock(name);
        self.eq(format!("{name}: kind"), sf(l, "kind"), Some(kind));
        self.eq(format!("{name}: acquisitions"), u(l, "acquisitions"), acquisitions);
        l
    }

    /// Internal consistency every profile must have: per-lock sums of sites, totals equal the
    /// sums over locks and over threads, contended <= acquisitions, read + write <= total.
    #[track_caller]
    pub fn check_consistency(&self) {
        let fields = [
            "acquisitions",
            "read_acquisitions",
            "write_acquisitions",
            "contended",
            "trylock_failures",
            "cond_waits",
        ];
        for f in fields {
            let over_locks: u64 = self.locks().iter().map(|l| u(l, f)).sum();
            self.eq(format!("totals.{f} vs the sum over locks"), self.totals(f), over_locks);
            let over_threads: u64 = self.threads().iter().map(|t| u(t, f)).sum();
            self.eq(format!("totals.{f} vs the sum over threads"), self.totals(f), over_threads);
        }
        for l in self.locks() {
            let name = sf(l, "name").unwrap_or("?").to_string();
            let addr = sf(l, "address").unwrap_or("?");
            for f in fields {
                let sites: u64 = l["sites"].as_array().into_iter().flatten().map(|x| u(x, f)).sum();
                self.eq(
                    format!("lock {name} {addr}: {f} vs the sum over its sites"),
                    sites,
                    u(l, f),
                );
            }
            self.check(
                u(l, "contended") <= u(l, "acquisitions"),
                format!("lock {name}: contended <= acquisitions"),
            );
            self.check(
                u(l, "read_acquisitions") + u(l, "write_acquisitions") <= u(l, "acquisitions"),
                format!("lock {name}: read + write <= acquisitions"),
            );
            if u(l, "contended") > 0 {
                self.check(
                    u(l, "wait_ns_total") > 0,
                    format!("lock {name}: contended but no wait"),
                );
            }
        }
        self.eq("totals.locks", self.totals("locks"), self.locks().len() as u64);
        self.eq("totals.threads", self.totals("threads"), self.threads().len() as u64);
    }

    /// With hold timing on and room on the held stacks, every hold is timed: holds_timed equals
    /// acquisitions for every lock, but for the `(name, n)` locks, with n holds that never ended
    /// in their own thread (a thread that died holding a robust mutex, a lock still held at exit).
    #[track_caller]
    pub fn expect_all_holds_timed(&self, except: &[(&str, u64)]) {
        for l in self.locks() {
            let name = sf(l, "name").unwrap_or("?");
            let open = except.iter().find(|(n, _)| *n == name).map_or(0, |(_, k)| *k);
            self.eq(
                format!("lock {name}: holds_timed (acquisitions - {open})"),
                u(l, "holds_timed"),
                u(l, "acquisitions") - open,
            );
        }
    }

    /// Checks that nothing was dropped.
    #[track_caller]
    pub fn expect_nothing_dropped(&self) {
        for f in ["acquisitions", "locks", "threads", "holds"] {
            self.eq(format!("dropped.{f}"), self.dropped(f), 0);
        }
    }

    /// Checks `header.end_reason` (and `end_signal`).
    #[track_caller]
    pub fn expect_end(&self, reason: &str, signal: Option<u64>) {
        let h = self.header();
        self.eq("header.end_reason", sf(h, "end_reason"), Some(reason));
        self.eq("header.end_signal", h["end_signal"].as_u64(), signal);
    }
}

/// sizeof(pthread_mutex_t) on x86_64 and aarch64 glibc.
pub const MUTEX_SIZE: u64 = 40;

/// The name the report gives to element `i` of a static array `base` of `size`-byte elements.
pub fn elem(base: &str, i: u64, size: u64) -> String {
    if i == 0 { base.to_string() } else { format!("{base}+{:#x}", i * size) }
}

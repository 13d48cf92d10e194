//! What machine a result comes from: CPU, cores, SMT, hypervisor, kernel; and the steal time a
//! scenario suffered (from `/proc/stat`), so that a result says how noisy its machine was.

use serde::Serialize;
use std::process::Command;

/// The machine a result was measured on.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// `model name` from /proc/cpuinfo.
    pub cpu_model: String,
    /// CPUs this process may run on.
    pub cpus: usize,
    /// `/sys/devices/system/cpu/smt/active` (None: unknown).
    pub smt: Option<bool>,
    /// Hypervisor: `systemd-detect-virt --vm`, else `/sys/hypervisor/type`, else "yes" when
    /// the cpuinfo `hypervisor` flag is set, else "none".
    pub hypervisor: String,
    /// Container runtime (`systemd-detect-virt --container`), if any.
    pub container: Option<String>,
    /// `uname -r`.
    pub kernel: String,
    /// TSC rate measured against CLOCK_MONOTONIC (Hz); 0 when the TSC is not invariant.
    pub tsc_hz: u64,
    /// CPU flags that matter for locks (hypervisor, invariant TSC, WAITPKG, MONITORX, RTM).
    pub cpu_flags_of_note: Vec<String>,
    /// `/proc/loadavg` when the benchmark started: other work on the machine skews every number.
    pub loadavg: String,
}

fn read(p: &str) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

impl Machine {
    /// Probes the machine (about 30 ms, for the TSC rate).
    pub fn probe() -> Machine {
        let cpuinfo = read("/proc/cpuinfo").unwrap_or_default();
        let field = |k: &str| {
            cpuinfo
                .lines()
                .find(|l| l.starts_with(k))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        };
        let flags = field("flags").unwrap_or_default();
        let has = |f: &str| flags.split_whitespace().any(|w| w == f);
        let detect = |arg: &str| {
            Command::new("systemd-detect-virt")
                .arg(arg)
                .output()
                .ok()
                .and_then(|o| String::from_utf8(o.stdout).ok())
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty() && s != "none")
        };
        let hypervisor =
            detect("--vm").or_else(|| read("/sys/hypervisor/type")).unwrap_or_else(|| {
                if has("hypervisor") { "yes (cpuid flag)".into() } else { "none".into() }
            });
        let container = detect("--container");
        let smt = read("/sys/devices/system/cpu/smt/active").map(|s| s == "1");
        let tsc_hz = if lockmeter_core::clock::tsc_is_invariant() {
            lockmeter_core::clock::measure_tsc_hz(30_000_000)
        } else {
            0
        };
        let notable = ["hypervisor", "constant_tsc", "nonstop_tsc", "waitpkg", "monitorx", "rtm"];
        Machine {
            cpu_model: field("model name").unwrap_or_else(|| "unknown".into()),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            smt,
            hypervisor,
            container,
            kernel: uname_release(),
            tsc_hz,
            cpu_flags_of_note: notable.iter().filter(|f| has(f)).map(|f| f.to_string()).collect(),
            loadavg: read("/proc/loadavg")
                .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
                .unwrap_or_default(),
        }
    }

    /// One line for the text output.
    pub fn line(&self) -> String {
        format!(
            "machine: {} | {} CPUs | SMT {} | hypervisor {}{} | kernel {} | TSC {:.3} GHz | flags: {} | loadavg {}",
            self.cpu_model,
            self.cpus,
            match self.smt {
                Some(true) => "on",
                Some(false) => "off",
                None => "?",
            },
            self.hypervisor,
            self.container.as_ref().map_or(String::new(), |c| format!(" (container {c})")),
            self.kernel,
            self.tsc_hz as f64 / 1e9,
            self.cpu_flags_of_note.join(","),
            self.loadavg
        )
    }
}

fn uname_release() -> String {
    // SAFETY: `utsname` is plain data; uname fills it with NUL-terminated strings.
    unsafe {
        let mut u: libc::utsname = core::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return "unknown".into();
        }
        std::ffi::CStr::from_ptr(u.release.as_ptr()).to_string_lossy().into_owned()
    }
}

/// Total and steal jiffies of all CPUs, from the `cpu` line of /proc/stat.
fn cpu_jiffies() -> Option<(u64, u64)> {
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    let line = s.lines().next()?;
    let v: Vec<u64> = line.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
    let total = v.iter().take(8).sum();
    Some((total, *v.get(7)?))
}

/// Measures the share of CPU time stolen by the hypervisor over a scenario.
#[derive(Debug)]
pub struct StealMeter(Option<(u64, u64)>);

impl StealMeter {
    /// Starts measuring.
    pub fn start() -> Self {
        StealMeter(cpu_jiffies())
    }
    /// Steal time as a percentage of all CPU time since `start` (None: unknown).
    pub fn percent(&self) -> Option<f64> {
        let (t0, s0) = self.0?;
        let (t1, s1) = cpu_jiffies()?;
        let dt = t1.saturating_sub(t0);
        (dt > 0).then(|| 100.0 * s1.saturating_sub(s0) as f64 / dt as f64)
    }
}

/// Pins the calling thread to `cpu` (best effort).
pub fn pin_to(cpu: usize) {
    // SAFETY: `set` is a plain bit set initialised by CPU_ZERO; pid 0 = the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = core::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, core::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

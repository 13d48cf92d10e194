//! What the kernel collector reads from /proc and /sys: privileges, tracefs, process snapshots
//! (memory map, command line, thread names) and kernel symbols.

use lockmeter_format::MapEntry;
use std::collections::HashMap;

/// Why this process may not load BPF programs, or `None` when it may.
#[cfg_attr(not(lockmeter_bpf), allow(dead_code))]
pub(crate) fn privilege_problem() -> Option<String> {
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    let has = |c: u32| eff & (1u64 << c) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return None;
    }
    Some(
        "eBPF needs root, or the capabilities CAP_BPF and CAP_PERFMON: run it with sudo (plain `lockmeter run` needs neither)"
            .into(),
    )
}

/// Makes sure tracefs is mounted (libbpf finds tracepoints there); mounts it when it is not.
#[cfg_attr(not(lockmeter_bpf), allow(dead_code))]
pub(crate) fn ensure_tracefs() -> anyhow::Result<()> {
    for d in ["/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events"] {
        if std::path::Path::new(d).is_dir() {
            return Ok(());
        }
    }
    let st = std::process::Command::new("mount")
        .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
        .status();
    match st {
        Ok(s) if s.success() => Ok(()),
        _ => anyhow::bail!(
            "tracefs is not mounted and could not be mounted: run `mount -t tracefs nodev /sys/kernel/tracing` as root"
        ),
    }
}

/// What a process looked like the last time it was seen alive.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Its memory map (file mappings only are needed for symbols; all are kept).
    pub maps: Vec<MapEntry>,
    /// Command line.
    pub cmdline: Vec<String>,
    /// Executable path.
    pub exe: String,
    /// Parent pid.
    pub ppid: u32,
    /// Thread names by tid.
    pub threads: HashMap<u32, String>,
}

/// Reads `/proc/PID`; `None` when the process is gone.
pub(crate) fn snapshot(pid: u32) -> Option<Snapshot> {
    let base = format!("/proc/{pid}");
    let maps = std::fs::read_to_string(format!("{base}/maps")).ok()?;
    if maps.is_empty() {
        return None; // a zombie: its memory is gone
    }
    let cmdline = std::fs::read(format!("{base}/cmdline")).unwrap_or_default();
    let cmdline = cmdline
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let exe = std::fs::read_link(format!("{base}/exe"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ppid = lockmeter_core::procstat::read_field(&base, 4).unwrap_or(0);
    let mut threads = HashMap::new();
    if let Ok(rd) = std::fs::read_dir(format!("{base}/task")) {
        for e in rd.flatten() {
            if let Some(tid) = e.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) {
                let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
                threads.insert(tid, comm.trim_end().to_owned());
            }
        }
    }
    Some(Snapshot { maps: parse_maps(&maps), cmdline, exe, ppid, threads })
}

/// Parses `/proc/PID/maps`.
pub(crate) fn parse_maps(text: &str) -> Vec<MapEntry> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (range, perms, off) = (f.next()?, f.next()?, f.next()?);
            let (_dev, _inode) = (f.next()?, f.next()?);
            let path = f.collect::<Vec<_>>().join(" ");
            let (a, b) = range.split_once('-')?;
            Some(MapEntry {
                start: u64::from_str_radix(a, 16).ok()?,
                end: u64::from_str_radix(b, 16).ok()?,
                offset: u64::from_str_radix(off, 16).ok()?,
                perms: perms.to_owned(),
                path,
            })
        })
        .collect()
}

/// Kernel symbols from `/proc/kallsyms`, sorted by address (empty when unreadable or hidden).
#[derive(Debug, Default)]
pub struct Kallsyms {
    syms: Vec<(u64, char, String)>,
}

impl Kallsyms {
    /// Reads `/proc/kallsyms` (addresses are zero unless we are privileged).
    pub fn load() -> Kallsyms {
        Self::parse(&std::fs::read_to_string("/proc/kallsyms").unwrap_or_default())
    }

    /// Parses the text of `/proc/kallsyms`.
    pub fn parse(text: &str) -> Kallsyms {
        let mut syms: Vec<(u64, char, String)> = text
            .lines()
            .filter_map(|l| {
                let mut f = l.split_whitespace();
                let a = u64::from_str_radix(f.next()?, 16).ok()?;
                let t = f.next()?.chars().next()?;
                let name = f.next()?;
                (a != 0).then(|| (a, t, name.to_owned()))
            })
            .collect();
        syms.sort_by_key(|s| s.0);
        syms.dedup_by_key(|s| s.0);
        Kallsyms { syms }
    }

    /// The symbol containing `addr`: (start, end, name, is_code). The end is the next symbol's
    /// start.
    pub fn lookup(&self, addr: u64) -> Option<(u64, u64, &str, bool)> {
        let i = self.syms.partition_point(|s| s.0 <= addr).checked_sub(1)?;
        let (start, t, name) = &self.syms[i];
        let end = self.syms.get(i + 1).map_or(start + 1, |n| n.0);
        Some((*start, end, name, matches!(t, 't' | 'T' | 'w' | 'W')))
    }

    /// Whether any symbol was read.
    pub fn is_empty(&self) -> bool {
        self.syms.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_and_kallsyms_parse() {
        let m = parse_maps(
            "5555a000-5555b000 r-xp 00001000 08:01 1234   /usr/bin/my prog\n7ffd0000-7ffd1000 rw-p 00000000 00:00 0 [stack]\n",
        );
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].start, 0x5555a000);
        assert_eq!(m[0].offset, 0x1000);
        assert_eq!(m[0].path, "/usr/bin/my prog");
        assert_eq!(m[1].path, "[stack]");
        let k = Kallsyms::parse(
            "ffffffff81000000 T _stext\nffffffff81000100 t down_write\nffffffff81000200 T up_write\nffffffff82000000 D jiffies_lock\n0000000000000000 T hidden\n",
        );
        assert_eq!(
            k.lookup(0xffffffff81000150),
            Some((0xffffffff81000100, 0xffffffff81000200, "down_write", true))
        );
        assert_eq!(k.lookup(0xffffffff82000000).map(|s| (s.2, s.3)), Some(("jiffies_lock", false)));
        assert_eq!(k.lookup(0x1000), None);
    }
}

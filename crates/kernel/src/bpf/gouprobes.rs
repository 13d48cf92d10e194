//! Go programs among the traced processes: their executables are inspected (`golang.rs`) and
//! the Go runtime's semaphore gets its uprobes (`go_uprobe` or `go_uprobe_multi` in
//! `lockmeter.bpf.c`, the cookie telling each site apart). Uprobes belong to a file, so every
//! process of a traced executable is seen from the moment they are attached; the BPF side keeps
//! to the traced processes. Where the kernel has uprobe.multi links (Linux 6.6), an executable's
//! sites are one link: each detach of a plain uprobe waits for the kernel (about 0.1 s, one
//! after the other), a link's detach waits once.
//!
//! Each Go process gets one note for its profile, said as a progress line when it is found:
//! that its mutexes are traced (and what of them cannot be seen), or why they are not.

use super::skel::LockmeterSkel;
use crate::golang::{self, Inspection};
use crate::profile::GoProc;
use libbpf_rs::{Link, MapCore, MapFlags, UprobeMultiOpts, UprobeOpts};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// What became of one executable.
enum Bin {
    NotGo,
    Traced { version: String, runtime_code: Vec<(u64, u64)> },
    NotTraced { version: Option<String>, why: String },
}

/// The Go executables met so far and the processes that run them.
#[derive(Default)]
pub(super) struct GoUprobes {
    /// By (device, inode) of the executable.
    bins: HashMap<(u64, u64), Bin>,
    /// The executable each process was last seen running.
    pids: HashMap<u32, (u64, u64)>,
    /// What goes in each Go process's profile.
    pub(super) procs: HashMap<u32, GoProc>,
    pub(super) links: Vec<Link>,
    /// When the recording started (boot-time clock ticks).
    start: u64,
    /// Whether `go_uprobe_multi` is the program loaded (else `go_uprobe`).
    multi: bool,
}

impl std::fmt::Debug for GoUprobes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GoUprobes").field("bins", &self.bins.len()).finish()
    }
}

const MAX_BINS: u32 = 256;
const SEMA_TRACED: &str = "its sync.Mutex and sync.RWMutex waits in the Go runtime's semaphore are traced with uprobes; a Lock that spins, then gets the lock without sleeping, is not seen";

impl GoUprobes {
    /// `multi`: whether the uprobe.multi program was loaded (see [`uprobe_multi`]).
    pub(super) fn new(multi: bool) -> Self {
        GoUprobes { start: boot_ticks(), multi, ..GoUprobes::default() }
    }

    /// The command's executable, before it starts: a Go program is then traced from its first
    /// instruction.
    pub(super) fn before_spawn(&mut self, skel: &LockmeterSkel<'_>, program: &std::ffi::OsStr) {
        let Some(path) = resolve(program) else { return };
        if let Ok(md) = std::fs::metadata(&path) {
            self.bin(skel, (md.dev(), md.ino()), &path);
        }
    }

    /// Looks at the executable of each process in `pids` (new ones, and those that called exec);
    /// returns the processes whose executable is new.
    pub(super) fn check(
        &mut self,
        skel: &LockmeterSkel<'_>,
        pids: &[u32],
        progress: &mut dyn FnMut(&str),
    ) -> Vec<u32> {
        let mut changed = Vec::new();
        for &pid in pids {
            let exe = PathBuf::from(format!("/proc/{pid}/exe"));
            let Ok(md) = std::fs::metadata(&exe) else { continue };
            let id = (md.dev(), md.ino());
            if self.pids.insert(pid, id) == Some(id) {
                continue;
            }
            changed.push(pid);
            let path = std::fs::read_link(&exe)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            // The file by its path while it is the same file (so that it can be read and
            // attached to after the process is gone); else through /proc/PID/exe (a deleted
            // file, another mount namespace).
            let same = std::fs::metadata(&path).is_ok_and(|m| (m.dev(), m.ino()) == id);
            let file = if same { PathBuf::from(&path) } else { exe };
            // A process that started during the recording and made its uprobes be attached ran
            // without them for a while.
            let attached_now = self.bin(skel, id, &file);
            let late = attached_now && proc_start_ticks(pid).is_none_or(|t| t >= self.start);
            let name = format!("{path} (pid {pid})");
            let note = match &self.bins[&id] {
                Bin::NotGo => {
                    self.procs.remove(&pid);
                    continue;
                }
                Bin::Traced { version, runtime_code } => {
                    let runtime_code = runtime_code.clone();
                    let mut note =
                        format!("{name} is a Go {} program: {SEMA_TRACED}", trim_go(version));
                    if late {
                        note.push_str(
                            "; it ran for a while before lockmeter found it and attached them: its waits before then are not counted",
                        );
                    }
                    self.procs.insert(pid, GoProc { exe: path, runtime_code, note: note.clone() });
                    note
                }
                Bin::NotTraced { version, why } => {
                    let v = version.as_deref().map_or("unknown version".into(), trim_go);
                    let note = format!(
                        "{name} is a Go program (Go {v}) whose sync.Mutex and sync.RWMutex waits were not traced: {why}"
                    );
                    let g = GoProc { exe: path, runtime_code: Vec::new(), note: note.clone() };
                    self.procs.insert(pid, g);
                    note
                }
            };
            progress(&note);
        }
        changed
    }

    /// The executable `id` (at `path`), inspected and given its uprobes the first time; whether
    /// that was now.
    fn bin(&mut self, skel: &LockmeterSkel<'_>, id: (u64, u64), path: &Path) -> bool {
        if self.bins.contains_key(&id) {
            return false;
        }
        let index = self.bins.values().filter(|b| matches!(b, Bin::Traced { .. })).count() as u32;
        let bin = match golang::inspect_file(path) {
            Inspection::NotGo => Bin::NotGo,
            Inspection::Unsupported { version, why } => Bin::NotTraced { version, why },
            Inspection::Go(_) if index >= MAX_BINS => Bin::NotTraced {
                version: None,
                why: format!("lockmeter traces at most {MAX_BINS} Go executables at once"),
            },
            Inspection::Go(g) => match self.attach(skel, index, path, &g) {
                Ok(()) => Bin::Traced { version: g.version, runtime_code: g.runtime_code },
                Err(e) => Bin::NotTraced {
                    version: Some(g.version),
                    why: format!("its uprobes could not be attached ({e:#})"),
                },
            },
        };
        self.bins.insert(id, bin);
        true
    }

    fn attach(
        &mut self,
        skel: &LockmeterSkel<'_>,
        index: u32,
        path: &Path,
        g: &golang::GoExe,
    ) -> anyhow::Result<()> {
        // The BPF side's struct go_bin: each wrapper's entry by role, sync.(*RWMutex).Lock.
        let mut fns = [0u64; 4];
        for (role, site) in &g.begins {
            fns[*role as usize] = site.vaddr;
        }
        let mut value = Vec::with_capacity(48);
        for v in fns.iter().chain([&g.rwlock.0, &g.rwlock.1]) {
            value.extend_from_slice(&v.to_ne_bytes());
        }
        skel.maps.gobins.update(&index.to_ne_bytes(), &value, MapFlags::ANY)?;
        // (file offset, cookie): the cookie is the executable's index and the site's role (the
        // BPF side's GO_*: the wrappers' roles, 4 a wait's end, 5 a release).
        let cookie = |role: u64| u64::from(index) << 8 | role;
        let sites: Vec<(usize, u64)> =
            (g.begins.iter().map(|(r, s)| (s.offset, cookie(*r as u64))))
                .chain(g.ends.iter().map(|s| (s.offset, cookie(4))))
                .chain(g.releases.iter().map(|s| (s.offset, cookie(5))))
                .map(|(off, c)| (off as usize, c))
                .collect();
        if self.multi {
            let opts = UprobeMultiOpts {
                offsets: sites.iter().map(|s| s.0).collect(),
                cookies: sites.iter().map(|s| s.1).collect(),
                ..UprobeMultiOpts::default()
            };
            let prog = &skel.progs.go_uprobe_multi;
            self.links.push(prog.attach_uprobe_multi_with_opts(-1, path, "", opts)?);
        } else {
            let mut links = Vec::new();
            for (offset, cookie) in sites {
                let opts = UprobeOpts { cookie, ..UprobeOpts::default() };
                links.push(skel.progs.go_uprobe.attach_uprobe_with_opts(-1, path, offset, opts)?);
            }
            self.links.extend(links);
        }
        Ok(())
    }
}

/// Whether the kernel has uprobe.multi links (Linux 6.6 and later).
pub(super) fn uprobe_multi() -> bool {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mut v = release.trim().split(|c: char| !c.is_ascii_digit()).map(|n| n.parse::<u32>());
    matches!((v.next(), v.next()), (Some(Ok(major)), Some(Ok(minor))) if (major, minor) >= (6, 6))
}

/// `go1.26.8` -> `1.26.8`.
fn trim_go(v: &str) -> String {
    v.strip_prefix("go").unwrap_or(v).to_owned()
}

/// The program a command names, as `execvp` finds it.
fn resolve(program: &std::ffi::OsStr) -> Option<PathBuf> {
    let p = Path::new(program);
    if p.as_os_str().as_encoded_bytes().contains(&b'/') {
        return Some(p.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(p)).find(|c| c.is_file())
}

/// The boot-time clock in clock ticks (as /proc/PID/stat's start time).
fn boot_ticks() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    ts.tv_sec as u64 * hz + ts.tv_nsec as u64 * hz / 1_000_000_000
}

/// When a process started (clock ticks since boot), from /proc/PID/stat.
fn proc_start_ticks(pid: u32) -> Option<u64> {
    lockmeter_core::procstat::read_field(&format!("/proc/{pid}"), 22)
}

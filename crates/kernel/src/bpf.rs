//! Loading, attaching and reading the BPF programs (libbpf-rs skeleton of `bpf/lockmeter.bpf.c`).

use crate::procfs::{self, Kallsyms};
use crate::profile::{Raw, RawAgg, build_profiles};
use crate::{Options, Recorded, Target};
use anyhow::{Context, Result, bail};
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags};
use lockmeter_core::{LockKind, Mode};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[allow(
    clippy::all,
    clippy::pedantic,
    clippy::undocumented_unsafe_blocks,
    missing_debug_implementations,
    missing_docs,
    unsafe_op_in_unsafe_fn
)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/lockmeter.skel.rs"));
}
use skel::LockmeterSkelBuilder;

mod gouprobes;

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Sizes of the BPF map values (see the C structs).
const KEY_LEN: usize = 48;
const HIST: usize = lockmeter_core::hist::BUCKETS;

fn u64_at(b: &[u8], o: usize) -> u64 {
    b.get(o..o + 8).map_or(0, |s| u64::from_le_bytes(s.try_into().unwrap_or([0; 8])))
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    b.get(o..o + 4).map_or(0, |s| u32::from_le_bytes(s.try_into().unwrap_or([0; 4])))
}

/// Starts the command; the BPF programs are attached and lockmeter's own tgid is in `tgids`,
/// so the fork handler traces the child from its first instruction.
fn spawn(cmd: &[std::ffi::OsString], opts: &Options) -> Result<std::process::Child> {
    let Some(prog) = cmd.first() else {
        bail!("no program given: lockmeter record -- PROGRAM [ARGS...]")
    };
    let mut c = std::process::Command::new(prog);
    c.args(&cmd[1..]);
    for (k, v) in &opts.envs {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    if let Some(fd) = opts.inherit_fd {
        use std::os::unix::process::CommandExt;
        // SAFETY: fcntl is async-signal-safe; it only clears close-on-exec on a descriptor the
        // caller owns, in the child between fork and exec.
        unsafe {
            c.pre_exec(move || {
                libc::fcntl(fd, libc::F_SETFD, 0);
                Ok(())
            });
        }
    }
    c.spawn().with_context(|| format!("cannot run '{}'", prog.to_string_lossy()))
}

pub(crate) fn record(opts: &Options, progress: &mut dyn FnMut(&str)) -> Result<Recorded> {
    procfs::ensure_tracefs()?;
    let mut obj = std::mem::MaybeUninit::uninit();
    let mut open =
        LockmeterSkelBuilder::default().open(&mut obj).context("cannot open the BPF programs")?;
    let rodata = open.maps.rodata_data.as_deref_mut().context("the BPF object has no .rodata")?;
    rodata.trace_all = matches!(opts.target, Target::All);
    rodata.self_tgid = std::process::id();
    // The futex2 and futex_waitv tracepoints are newer than the rest: without them those calls
    // are not seen (said below), but the rest works.
    let optional = |name: &str| {
        std::path::Path::new(&format!("/sys/kernel/tracing/events/syscalls/{name}")).exists()
    };
    let has_futex2 = optional("sys_enter_futex_wait") && optional("sys_exit_futex_wake");
    let has_waitv = optional("sys_enter_futex_waitv");
    if !has_futex2 {
        open.progs.on_futex2_wait_enter.set_autoload(false);
        open.progs.on_futex2_wait_exit.set_autoload(false);
        open.progs.on_futex2_wake_exit.set_autoload(false);
    }
    if !has_waitv {
        open.progs.on_futex_waitv_enter.set_autoload(false);
        open.progs.on_futex_waitv_exit.set_autoload(false);
    }
    // Go programs' uprobes: one of the two forms of the same program (see gouprobes.rs).
    let multi = gouprobes::uprobe_multi();
    open.progs.go_uprobe.set_autoload(!multi);
    open.progs.go_uprobe_multi.set_autoload(multi);
    let mut skel = open.load().context("the kernel refused the BPF programs")?;

    skel.attach().context("cannot attach the BPF programs")?;
    if let Some(lib) = &opts.preload {
        let uo = libbpf_rs::UprobeOpts {
            func_name: Some("lockmeter_thread_held".into()),
            ..Default::default()
        };
        let link = skel
            .progs
            .on_thread_held
            .attach_uprobe_with_opts(-1, lib, 0, uo)
            .with_context(|| format!("cannot attach a uprobe to {}", lib.display()))?;
        skel.links.on_thread_held = Some(link);
    }
    let mut go = gouprobes::GoUprobes::new(multi);
    let me = std::process::id();
    let child = match &opts.target {
        Target::Command(cmd) => {
            if let Some(program) = cmd.first() {
                go.before_spawn(&skel, program);
            }
            skel.maps
                .tgids
                .update(&me.to_ne_bytes(), &[1u8], MapFlags::ANY)
                .context("cannot add the process to the BPF map")?;
            let child = spawn(cmd, opts);
            let _ = skel.maps.tgids.delete(&me.to_ne_bytes());
            Some(child?)
        }
        _ => None,
    };
    let root = match (&opts.target, &child) {
        (_, Some(c)) => Some(c.id()),
        (Target::Pid(p), _) => Some(*p),
        _ => None,
    };
    if let (Target::Pid(pid), None) = (&opts.target, &child) {
        // A running process and its existing children.
        let mut pids = vec![*pid];
        pids.extend(children_of(*pid));
        for p in pids {
            skel.maps
                .tgids
                .update(&p.to_ne_bytes(), &[1u8], MapFlags::ANY)
                .context("cannot add the process to the BPF map")?;
        }
    }
    STOP.store(false, Ordering::Relaxed);
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: installing an async-signal-safe handler that only stores an atomic.
    let (old_int, old_term) =
        unsafe { (libc::signal(libc::SIGINT, handler), libc::signal(libc::SIGTERM, handler)) };

    // /proc/kallsyms takes a few hundred ms to read: read while the program runs, at the lowest
    // priority so the program is not slowed for it.
    let kallsyms = std::thread::spawn(|| {
        // SAFETY: setpriority on this thread's own tid (Linux: per-thread nice).
        unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19) };
        Kallsyms::load()
    });
    let start = Instant::now();
    let start_unix_ns = unix_ns();
    let mut procs: HashMap<u32, procfs::Snapshot> = HashMap::new();
    let mut status = None;
    let mut held = child;
    progress(&match &opts.target {
        Target::Command(c) => format!(
            "recording {} (pid {}); it ends when the program does",
            c.iter().map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" "),
            root.unwrap_or(0)
        ),
        Target::Pid(p) => format!("recording pid {p}; Ctrl-C stops"),
        Target::All => "recording every process; Ctrl-C stops".to_owned(),
    });
    let mut last_snap = Instant::now() - Duration::from_secs(1);
    let mut last_go = last_snap;
    loop {
        // Go programs among the traced processes (new ones, and those that called exec): a
        // new image is snapshotted at once, for its symbols if it ends soon.
        let new_images = if !matches!(opts.target, Target::All) {
            go.check(&skel, &traced_pids(&skel, &opts.target), progress)
        } else if last_go.elapsed() >= Duration::from_millis(250) {
            last_go = Instant::now();
            go.check(&skel, &all_pids(), progress)
        } else {
            Vec::new()
        };
        for pid in new_images {
            if let Some(s) = procfs::snapshot(pid) {
                procs.insert(pid, s);
            }
        }
        // Snapshots of the traced processes, for symbols after they are gone.
        let every = if matches!(opts.target, Target::All) { 1000 } else { 50 };
        if last_snap.elapsed() >= Duration::from_millis(every) {
            for pid in traced_pids(&skel, &opts.target) {
                if let Some(s) = procfs::snapshot(pid) {
                    procs.insert(pid, s);
                }
            }
            last_snap = Instant::now();
        }
        if let Some(h) = &mut held {
            if opts.keep_zombie {
                if has_ended(h.id()) {
                    break;
                }
            } else if let Some(st) = h.try_wait().context("cannot wait for the program")? {
                status = Some(st);
                break;
            }
        } else if let Some(p) = root
            && !std::path::Path::new(&format!("/proc/{p}")).exists()
        {
            break;
        }
        if STOP.load(Ordering::Relaxed) && held.is_none() {
            break;
        }
        if opts.duration.is_some_and(|d| start.elapsed() >= d) {
            if let Some(h) = &mut held {
                // The time is up for a command: it is stopped the way Ctrl-C would.
                // SAFETY: kill(2) on our own child's pid.
                unsafe { libc::kill(h.id() as i32, libc::SIGINT) };
                if opts.keep_zombie {
                    while !has_ended(h.id()) {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                } else {
                    status = Some(h.wait().context("cannot wait for the program")?);
                }
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let duration_ns = start.elapsed().as_nanos() as u64;
    // Stop: the maps stop changing (the programs stay attached until the end, see below).
    if let Some(bss) = skel.maps.bss_data.as_deref_mut() {
        bss.stopped = 1;
    }
    let go_links = std::mem::take(&mut go.links);
    // SAFETY: restoring the dispositions saved above.
    unsafe {
        libc::signal(libc::SIGINT, old_int);
        libc::signal(libc::SIGTERM, old_term);
    }
    for pid in traced_pids(&skel, &opts.target) {
        if let Some(s) = procfs::snapshot(pid) {
            procs.insert(pid, s);
        }
    }
    let mut raw = read_maps(&skel)?;
    raw.procs = procs;
    raw.go = std::mem::take(&mut go.procs);
    raw.root = root;
    raw.start_unix_ns = start_unix_ns;
    raw.end_unix_ns = unix_ns();
    raw.duration_ns = duration_ns;
    raw.cpu_count = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let ks = kallsyms.join().unwrap_or_default();
    let mut profiles = build_profiles(&raw, &ks, opts.frames);
    if let (Some(r), true) =
        (root, profiles.first().is_none_or(|p| p.header.pid != root.unwrap_or(0)))
    {
        // The target never waited: still one (empty) profile for it, so the report says so.
        let mut empty = Raw { root: Some(r), ..Raw::default() };
        empty.procs = raw.procs.clone();
        empty.start_unix_ns = raw.start_unix_ns;
        empty.end_unix_ns = raw.end_unix_ns;
        empty.duration_ns = raw.duration_ns;
        empty.cpu_count = raw.cpu_count;
        empty.drops = raw.drops;
        empty.go = raw.go.clone();
        empty.aggs.clear();
        let mut p = crate::profile::empty_profile(&empty, r);
        if let Some(first) = profiles.first_mut() {
            p.dropped = std::mem::take(&mut first.dropped);
        }
        profiles.insert(0, p);
    }
    detach_in_background(skel, go_links, opts.inherit_fd);
    if !has_futex2 || !has_waitv {
        progress(
            "this kernel lacks the futex_wait/futex_wake or futex_waitv tracepoints: those calls were not seen",
        );
    }
    let pid = held.as_ref().map(|h| h.id());
    Ok(Recorded { profiles, status, pid })
}

/// Whether child `pid` has ended, without reaping it (its zombie stays waitable).
fn has_ended(pid: u32) -> bool {
    // SAFETY: an all-zero siginfo is a valid buffer for waitid to fill.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: polling our own child; WNOWAIT leaves it waitable, WNOHANG returns at once.
    let r = unsafe {
        libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT)
    };
    // SAFETY: reading si_pid of the siginfo waitid filled (0 when the child has not ended).
    r == 0 && unsafe { info.si_pid() } != 0
}

/// Detaches the BPF programs without waiting: closing a perf-event tracepoint waits for an RCU
/// grace period each (tens of ms on a small VM). A child process takes over our references to
/// every descriptor; ours are closed at once, and the child, when released, exits and pays the
/// waits where nobody waits for it. It does not keep `also_close` (the descriptor the command
/// inherited: `run --kernel`'s guardians' pipe, whose end of file `run` waits for).
fn detach_in_background(
    skel: skel::LockmeterSkel<'_>,
    more: Vec<libbpf_rs::Link>,
    also_close: Option<i32>,
) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        drop(more);
        drop(skel);
        return;
    }
    // SAFETY: the child only calls async-signal-safe functions (close, read, _exit).
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: async-signal-safe calls on descriptors this process owns.
        unsafe {
            libc::close(fds[1]);
            for fd in 0..3 {
                libc::close(fd);
            }
            if let Some(fd) = also_close {
                libc::close(fd);
            }
            let mut b = 0u8;
            libc::read(fds[0], (&mut b as *mut u8).cast(), 1);
            libc::_exit(0);
        }
    }
    drop(more);
    drop(skel);
    // SAFETY: closing our pipe ends releases the child (EOF); it is reaped by init or by us.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
        if pid > 0 {
            libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG);
        }
    }
}

/// Possible CPUs (the rq-lock map's useful length).
fn raw_cpus() -> u32 {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/possible").unwrap_or_default();
    let last = s.trim().rsplit(['-', ',']).next().and_then(|n| n.parse::<u32>().ok()).unwrap_or(0);
    (last + 1).min(1024)
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Child processes of `pid` (from /proc/PID/task/*/children).
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for e in rd.flatten() {
            let c = std::fs::read_to_string(e.path().join("children")).unwrap_or_default();
            out.extend(c.split_whitespace().filter_map(|p| p.parse::<u32>().ok()));
        }
    }
    out
}

/// Every process on the machine (for `Target::All`).
fn all_pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|rd| rd.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_default()
}

/// The processes being traced: those in the `tgids` map, or for `All`, those with aggregates.
fn traced_pids(skel: &skel::LockmeterSkel<'_>, target: &Target) -> Vec<u32> {
    let mut pids: Vec<u32> = if matches!(target, Target::All) {
        skel.maps.agg.keys().map(|k| u32_at(&k, 8)).collect()
    } else {
        skel.maps.tgids.keys().map(|k| u32_at(&k, 0)).collect()
    };
    pids.sort_unstable();
    pids.dedup();
    pids
}

fn stack(skel: &skel::LockmeterSkel<'_>, cache: &mut HashMap<i32, Vec<u64>>, id: i32) -> Vec<u64> {
    if id < 0 {
        return Vec::new();
    }
    cache
        .entry(id)
        .or_insert_with(|| {
            let v = skel.maps.stacks.lookup(&id.to_ne_bytes(), MapFlags::ANY).ok().flatten();
            v.map(|b| (0..b.len() / 8).map(|i| u64_at(&b, i * 8)).take_while(|&a| a != 0).collect())
                .unwrap_or_default()
        })
        .clone()
}

fn read_maps(skel: &skel::LockmeterSkel<'_>) -> Result<Raw> {
    let mut raw = Raw::default();
    let mut stacks = HashMap::new();
    for k in skel.maps.agg.keys() {
        if k.len() < KEY_LEN {
            continue;
        }
        let Some(v) = skel.maps.agg.lookup(&k, MapFlags::ANY).context("cannot read the BPF map")?
        else {
            continue;
        };
        let mode_word = u32_at(&k, 28);
        let Some(kind) = LockKind::from_u8(u32_at(&k, 24) as u8) else { continue };
        let mut hist = [0u64; HIST];
        for (i, h) in hist.iter_mut().enumerate() {
            *h = u64_at(&v, 24 + i * 8);
        }
        raw.aggs.push(RawAgg {
            addr: u64_at(&k, 0),
            tgid: u32_at(&k, 8),
            tid: u32_at(&k, 12),
            kind,
            mode: Mode::from_u8((mode_word & 0xff) as u8).unwrap_or(Mode::Exclusive),
            hint: mode_word >> 8,
            stack: stack(skel, &mut stacks, u32_at(&k, 16) as i32),
            other: stack(skel, &mut stacks, u32_at(&k, 20) as i32),
            leaf: u64_at(&k, 32),
            oleaf: u64_at(&k, 40),
            count: u64_at(&v, 0),
            total_ns: u64_at(&v, 8),
            max_ns: u64_at(&v, 16),
            hist,
        });
    }
    // Aggregates in a stable order: by process, thread, lock.
    raw.aggs.sort_by_key(|a| (a.tgid, a.tid, a.addr, a.kind as u8, a.mode as u8));
    for k in skel.maps.preempt.keys() {
        if let Some(v) = skel.maps.preempt.lookup(&k, MapFlags::ANY).ok().flatten() {
            raw.preempts.push(crate::RawPreempt {
                addr: u64_at(&k, 0),
                tgid: u32_at(&k, 8),
                holds: u64_at(&v, 0),
                ns: u64_at(&v, 8),
                wait_ns: u64_at(&v, 16),
            });
        }
    }
    for k in skel.maps.joinwords.keys() {
        if let Some(v) = skel.maps.joinwords.lookup(&k, MapFlags::ANY).ok().flatten() {
            raw.join_words.insert((u32_at(&k, 8), u64_at(&k, 0)), u32_at(&v, 0));
        }
    }
    raw.rq_locks = (0..raw_cpus())
        .map(|c| {
            let v = skel.maps.rqlocks.lookup(&c.to_ne_bytes(), MapFlags::ANY).ok().flatten();
            v.map_or(0, |b| u64_at(&b, 0))
        })
        .collect();
    for (i, d) in raw.drops.iter_mut().enumerate() {
        let v = skel.maps.drops.lookup(&(i as u32).to_ne_bytes(), MapFlags::ANY).ok().flatten();
        *d = v.map_or(0, |b| u64_at(&b, 0));
    }
    Ok(raw)
}

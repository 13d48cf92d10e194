//! From what the BPF maps hold to lockmeter profiles: one per process, in the model every view
//! reads. Pure functions, tested without BPF.

use crate::frames::{in_libc, is_lock_function, with_leaf, without_tracing_frames};
use crate::procfs::{Kallsyms, Snapshot};
use lockmeter_core::stacks::EventKind;
use lockmeter_core::{LockKind, Mode, Stats};
use lockmeter_format::{
    ClockInfo, Dropped, EndReason, Event, Header, HoldTiming, LockInfo, MapEntry, Profile, Record,
    Stack, ThreadInfo,
};
use std::collections::{BTreeMap, HashMap};

/// Hints the BPF side adds to a kernel lock (bits 8 and up of the mode word).
pub(crate) const HINT_MMAP_LOCK: u32 = 1;
/// See [`HINT_MMAP_LOCK`].
pub(crate) const HINT_SIGLOCK: u32 = 2;

/// One aggregate of the BPF map: a (process, thread, lock, stacks) with its wait statistics.
#[derive(Debug, Clone)]
pub struct RawAgg {
    /// Lock address (kernel) or futex word (user address).
    pub addr: u64,
    /// Process.
    pub tgid: u32,
    /// Thread.
    pub tid: u32,
    /// Kind of lock.
    pub kind: LockKind,
    /// Mode (read/write for reader-writer locks).
    pub mode: Mode,
    /// `HINT_*` bits.
    pub hint: u32,
    /// Waiter stack: kernel frames for kernel locks, user frames for futexes (innermost first).
    pub stack: Vec<u64>,
    /// Kernel locks: the user stack that led to the kernel. Futexes: the user stack of the last
    /// thread that woke the word before the wait ended.
    pub other: Vec<u64>,
    /// The return address a leaf function left for `stack`'s user part (0: none); kept only
    /// when the instruction before it is a call.
    pub leaf: u64,
    /// The same for `other`.
    pub oleaf: u64,
    /// Waits.
    pub count: u64,
    /// Total wait, ns.
    pub total_ns: u64,
    /// Longest wait, ns.
    pub max_ns: u64,
    /// Log2 histogram of waits (as `lockmeter_core::hist`).
    pub hist: [u64; lockmeter_core::hist::BUCKETS],
}

/// A traced process as it was last seen alive.
pub type RawProc = Snapshot;

/// Lock-holder preemption of one user lock: how often and how long its holders were switched
/// out while runnable, and the waiters' futex sleep meanwhile.
#[derive(Debug, Clone, Default)]
pub struct RawPreempt {
    /// Process.
    pub tgid: u32,
    /// The lock (the address on the preload's held stack).
    pub addr: u64,
    /// Switch-outs of a holder.
    pub holds: u64,
    /// Their time (ns).
    pub ns: u64,
    /// Waiters' futex sleep on the lock's word during them (ns).
    pub wait_ns: u64,
}

/// Everything a recording gathered.
#[derive(Debug, Default)]
pub struct Raw {
    /// The aggregates.
    pub aggs: Vec<RawAgg>,
    /// Snapshots of the processes, by pid.
    pub procs: HashMap<u32, RawProc>,
    /// The target process (first profile), if there is one.
    pub root: Option<u32>,
    /// Words cleared and woken when a thread exits (pthread_join waits on them): (tgid,
    /// address) -> the thread's tid.
    pub join_words: HashMap<(u32, u64), u32>,
    /// Lock-holder preemption per (process, lock address) (`run --kernel`).
    pub preempts: Vec<RawPreempt>,
    /// The address of each CPU's run-queue lock (index: CPU; 0: not seen).
    pub rq_locks: Vec<u64>,
    /// Aggregates that did not fit, per-task starts that did not fit, stacks not taken, kernel
    /// contentions nested too deep.
    pub drops: [u64; 4],
    /// Wall clock at start and end, ns since the epoch.
    pub start_unix_ns: u64,
    /// See `start_unix_ns`.
    pub end_unix_ns: u64,
    /// Duration, ns.
    pub duration_ns: u64,
    /// Online CPUs.
    pub cpu_count: u32,
    /// The Go programs among the processes, by pid.
    pub go: HashMap<u32, GoProc>,
}

/// A Go program: where its runtime's code is, and what its profile says about Go tracing.
#[derive(Debug, Clone, Default)]
pub struct GoProc {
    /// Its executable, as its memory map names it.
    pub exe: String,
    /// File offset ranges `[start, end)` of the code of the packages runtime, sync and
    /// internal/sync, sorted: a goroutine stack's frames there are how it waited, not where.
    pub runtime_code: Vec<(u64, u64)>,
    /// One sentence for the profile's notes: its mutexes are traced (and what cannot be seen of
    /// them), or why they are not.
    pub note: String,
}

impl GoProc {
    /// Whether `addr` lies in the Go runtime's or the sync packages' code of this executable.
    fn is_runtime(&self, maps: &[MapEntry], addr: u64) -> bool {
        let Some(m) = maps.iter().find(|m| addr >= m.start && addr < m.end && m.path == self.exe)
        else {
            return false;
        };
        let off = addr - m.start + m.offset;
        let i = self.runtime_code.partition_point(|r| r.0 <= off);
        i > 0 && off < self.runtime_code[i - 1].1
    }
}

/// Whether waits of this kind are a program's waits seen from user space (futex words, Go
/// mutexes), rather than kernel locks.
fn is_user_kind(kind: LockKind) -> bool {
    matches!(kind, LockKind::Futex | LockKind::GoMutex | LockKind::GoRwMutex)
}

fn kernel_lock_name(a: &RawAgg, ks: &Kallsyms, rq_locks: &[u64]) -> String {
    if let Some(cpu) = rq_locks.iter().position(|&l| l != 0 && l == a.addr) {
        return format!("rq lock (CPU {cpu})");
    }
    // A lock taken inside a BPF program (a map's bucket lock) is the recorder's own doing.
    let in_bpf = a.stack.iter().any(|&f| {
        ks.lookup(f.wrapping_sub(1)).is_some_and(|s| {
            s.3 && (s.2.starts_with("bpf_trace_run") || s.2.starts_with("__bpf_prog_"))
        })
    });
    if in_bpf {
        return "BPF map lock (lockmeter's own tracing)".into();
    }
    if a.hint & HINT_MMAP_LOCK != 0 {
        return "mmap_lock".into();
    }
    if a.hint & HINT_SIGLOCK != 0 {
        return "siglock".into();
    }
    if let Some((start, end, name, false)) = ks.lookup(a.addr)
        && end - start < 1 << 20
    {
        return if a.addr == start {
            name.to_owned()
        } else {
            format!("{name}+{:#x}", a.addr - start)
        };
    }
    let caller = a
        .stack
        .iter()
        .filter_map(|&f| ks.lookup(f.wrapping_sub(1)).filter(|s| s.3).map(|s| s.2))
        .find(|n| !is_lock_function(n));
    let kind = a.kind.as_str().trim_start_matches("kernel-");
    match caller {
        Some(c) => format!("{kind} in {c}"),
        None => format!("{kind} {:#x}", a.addr),
    }
}

/// Builds one profile per process that waited, the root first, then by pid. `frames` bounds
/// each of the kernel and user parts of a stack.
pub fn build_profiles(raw: &Raw, ks: &Kallsyms, frames: usize) -> Vec<Profile> {
    let trimmed: Vec<RawAgg> = raw
        .aggs
        .iter()
        .map(|a| {
            let mut a = a.clone();
            if !is_user_kind(a.kind) {
                a.stack = without_tracing_frames(&a.stack, ks);
            }
            a
        })
        .collect();
    let mut by_proc: BTreeMap<u32, Vec<&RawAgg>> = BTreeMap::new();
    for a in &trimmed {
        by_proc.entry(a.tgid).or_default().push(a);
    }
    let mut order: Vec<u32> = by_proc.keys().copied().collect();
    if let Some(r) = raw.root {
        order.retain(|&p| p != r);
        order.insert(0, r);
    }
    let mut out = Vec::new();
    for (i, pid) in order.into_iter().enumerate() {
        let aggs = by_proc.get(&pid).map(Vec::as_slice).unwrap_or(&[]);
        let mut p = one_profile(raw, pid, aggs, ks, frames);
        if i == 0 {
            // The BPF maps' losses are global: they are told once, with the first profile.
            p.dropped = Dropped {
                acquisitions: raw.drops[0] + raw.drops[1] + raw.drops[3],
                stacks: raw.drops[2],
                ..Dropped::default()
            };
        }
        out.push(p);
    }
    out
}

/// The profile of a process that never waited on anything traced.
pub(crate) fn empty_profile(raw: &Raw, pid: u32) -> Profile {
    one_profile(raw, pid, &[], &Kallsyms::default(), 0)
}

fn one_profile(raw: &Raw, pid: u32, aggs: &[&RawAgg], ks: &Kallsyms, frames: usize) -> Profile {
    let snap = raw.procs.get(&pid).cloned().unwrap_or_default();
    let mut p = Profile {
        header: Header {
            collector: "kernel".into(),
            lockmeter_version: env!("CARGO_PKG_VERSION").into(),
            pid,
            ppid: snap.ppid,
            image_seq: 0,
            cmdline: snap.cmdline.clone(),
            exe: snap.exe.clone(),
            start_unix_ns: raw.start_unix_ns,
            end_unix_ns: raw.end_unix_ns,
            duration_ns: raw.duration_ns,
            clock: ClockInfo { source: 2, hz: 1_000_000_000, hz_run: 0 },
            cpu_count: raw.cpu_count,
            hold_timing: HoldTiming::Off,
            end_reason: EndReason::Exit(None),
        },
        maps: snap.maps.clone(),
        notes: raw.go.get(&pid).map(|g| g.note.clone()).into_iter().collect(),
        ..Profile::default()
    };
    let mut threads: HashMap<u32, u32> = HashMap::new();
    let mut locks: HashMap<(u64, LockKind), u32> = HashMap::new();
    let mut stacks: HashMap<Vec<u64>, u32> = HashMap::new();
    let mut kernel_addrs: Vec<u64> = Vec::new();
    let mut memo: HashMap<u64, bool> = HashMap::new();
    let mut records: HashMap<(u32, u32, u64, Mode), Stats> = HashMap::new();
    let mut intern = |frames: Vec<u64>, p: &mut Profile| -> u32 {
        let next = stacks.len() as u32 + 1;
        *stacks.entry(frames.clone()).or_insert_with(|| {
            p.stacks.push(Stack { id: next, frames });
            next
        })
    };
    for a in aggs {
        let thread = *threads.entry(a.tid).or_insert_with(|| {
            let index = p.threads.len() as u32 + 1;
            let name = snap.threads.get(&a.tid).cloned().unwrap_or_default();
            p.threads.push(ThreadInfo { index, tid: a.tid, name });
            index
        });
        let kernel = !is_user_kind(a.kind);
        let new_lock = !locks.contains_key(&(a.addr, a.kind));
        let lock = *locks.entry((a.addr, a.kind)).or_insert_with(|| {
            let id = p.locks.len() as u32 + 1;
            let name = if kernel {
                Some(kernel_lock_name(a, ks, &raw.rq_locks))
            } else {
                raw.join_words.get(&(a.tgid, a.addr)).map(|tid| {
                    let who = snap.threads.get(tid).filter(|n| !n.is_empty());
                    match who {
                        Some(n) => format!("exit of thread {tid} ({n}), awaited by pthread_join"),
                        None => format!("exit of thread {tid}, awaited by pthread_join"),
                    }
                })
            };
            p.locks.push(LockInfo { id, address: a.addr, generation: 0, kind: a.kind, name });
            id
        });
        let (wleaf, oleaf) = (if kernel { 0 } else { a.leaf }, a.oleaf);
        let waiter: Vec<u64> = with_leaf(a.stack.clone(), wleaf, &snap.maps, &mut memo)
            .into_iter()
            .take(frames)
            .collect();
        let other: Vec<u64> = with_leaf(a.other.clone(), oleaf, &snap.maps, &mut memo)
            .into_iter()
            .take(frames)
            .collect();
        // Kernel locks: the kernel stack, then the user stack that led there. The call site is
        // the first kernel function outside the locking code.
        let (stack, site, holder) = if kernel {
            kernel_addrs.extend(&waiter);
            // The stack starts there too: the locking code's own frames are how, not where.
            let from = waiter
                .iter()
                .position(|&f| {
                    ks.lookup(f.wrapping_sub(1)).is_some_and(|s| s.3 && !is_lock_function(s.2))
                })
                .unwrap_or(0);
            let site = waiter.get(from).copied().unwrap_or(0);
            let mut all = waiter[from..].to_vec();
            all.extend(&other);
            (all, site, None)
        } else {
            // A Go mutex's stacks start in the Go runtime and the sync package instead.
            let go = raw.go.get(&pid).filter(|_| a.kind != LockKind::Futex);
            let system = |f: u64| match go {
                Some(g) => g.is_runtime(&snap.maps, f),
                None => in_libc(&snap.maps, f),
            };
            let site = waiter
                .iter()
                .copied()
                .find(|&f| !system(f))
                .or(waiter.first().copied())
                .unwrap_or(0);
            // As the preload's stacks start at the caller of the lock function, a futex stack
            // starts at the first frame outside the C library (the C library's futex wrappers
            // are how, not where); a stack that never leaves it is kept whole.
            let user_part = |st: Vec<u64>| -> Vec<u64> {
                match st.iter().position(|&f| !system(f)) {
                    Some(i) => st[i..].to_vec(),
                    None => st,
                }
            };
            let holder = (!other.is_empty()).then(|| user_part(other));
            (user_part(waiter), site, holder)
        };
        let stack_id = intern(stack, &mut p);
        let holder_stack = holder.map(|h| intern(h, &mut p));
        let holder_site = holder_stack
            .and_then(|id| p.stacks.iter().find(|s| s.id == id))
            .and_then(|s| s.frames.iter().copied().find(|&f| !in_libc(&snap.maps, f)))
            .unwrap_or(0);
        let s = records.entry((thread, lock, site, a.mode)).or_default();
        s.acquisitions += a.count;
        s.contended += a.count;
        s.cnt_lock += a.count;
        s.wait_ns_total += a.total_ns;
        s.wait_ns_max = s.wait_ns_max.max(a.max_ns);
        for (d, v) in s.wait_hist.iter_mut().zip(a.hist.iter()) {
            *d += v;
        }
        if new_lock {
            p.events.push(Event {
                thread,
                lock,
                mode: a.mode,
                kind: EventKind::FirstUse,
                stack: stack_id,
                holder_site: 0,
                holder_stack: None,
                count: 1,
                wait_ns: 0,
                wait_ns_max: 0,
            });
        }
        p.events.push(Event {
            thread,
            lock,
            mode: a.mode,
            kind: EventKind::Contended,
            stack: stack_id,
            holder_site,
            holder_stack,
            count: a.count,
            wait_ns: a.total_ns,
            wait_ns_max: a.max_ns,
        });
    }
    // Lock-holder preemption: carried by a lock entry at the user lock's address, for the merge
    // with the preload's profile to attach to that lock.
    for pr in raw.preempts.iter().filter(|pr| pr.tgid == pid) {
        let id = *locks.entry((pr.addr, LockKind::Futex)).or_insert_with(|| {
            let id = p.locks.len() as u32 + 1;
            p.locks.push(LockInfo {
                id,
                address: pr.addr,
                generation: 0,
                kind: LockKind::Futex,
                name: None,
            });
            id
        });
        p.lock_sleeps.push(lockmeter_format::LockSleep {
            lock: id,
            preempted_holds: pr.holds,
            preempted_ns: pr.ns,
            preempted_wait_ns: pr.wait_ns,
            ..Default::default()
        });
    }
    let mut recs: Vec<Record> = records
        .into_iter()
        .map(|((thread, lock, site, mode), stats)| Record { thread, lock, site, mode, stats })
        .collect();
    recs.sort_by_key(|r| (r.thread, r.lock, r.site, r.mode));
    p.records = recs;
    // The kernel functions the stacks went through, named in the profile itself.
    kernel_addrs.sort_unstable();
    kernel_addrs.dedup();
    let mut seen = std::collections::HashSet::new();
    for f in kernel_addrs {
        if let Some((start, end, name, true)) = ks.lookup(f.wrapping_sub(1))
            && seen.insert(start)
        {
            p.maps.push(MapEntry {
                start,
                end,
                offset: 0,
                perms: "r-xk".into(),
                path: format!("[kernel] {name}"),
            });
        }
    }
    p.maps.sort_by_key(|m| m.start);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agg(kind: LockKind, addr: u64, tid: u32, stack: Vec<u64>, other: Vec<u64>) -> RawAgg {
        let mut hist = [0; lockmeter_core::hist::BUCKETS];
        hist[11] = 3;
        RawAgg {
            addr,
            tgid: 100,
            tid,
            kind,
            mode: Mode::Write,
            hint: 0,
            stack,
            other,
            leaf: 0,
            oleaf: 0,
            count: 3,
            total_ns: 3000,
            max_ns: 1500,
            hist,
        }
    }

    #[test]
    fn kernel_locks_and_futexes_become_one_profile_per_process() {
        let ks = Kallsyms::parse(
            "ffffffff81000000 T down_write\nffffffff81000100 T vm_mmap_pgoff\nffffffff81000200 T do_syscall_64\nffffffff82000000 D jiffies_lock\nffffffff82000100 D other\n",
        );
        let mut raw =
            Raw { root: Some(100), cpu_count: 2, duration_ns: 1_000_000, ..Raw::default() };
        raw.drops = [1, 0, 2, 0];
        raw.aggs.push(agg(
            LockKind::KernelRwsem,
            0xffff888000001000,
            101,
            vec![0xffffffff81000010, 0xffffffff81000110, 0xffffffff81000210],
            vec![0x401000],
        ));
        raw.aggs.push(agg(LockKind::KernelSpinlock, 0xffffffff82000000, 101, vec![], vec![]));
        raw.aggs.push(agg(
            LockKind::Futex,
            0x601040,
            102,
            vec![0x401234, 0x401300],
            vec![0x401500],
        ));
        raw.aggs.push(agg(LockKind::Futex, 0x601040, 101, vec![0x401234, 0x401300], vec![]));
        let ps = build_profiles(&raw, &ks, 16);
        assert_eq!(ps.len(), 1);
        let p = &ps[0];
        assert_eq!(p.header.collector, "kernel");
        assert_eq!(p.threads.len(), 2);
        assert_eq!(p.locks.len(), 3);
        assert_eq!(p.locks[0].name.as_deref(), Some("rwsem in vm_mmap_pgoff"));
        assert_eq!(p.locks[1].name.as_deref(), Some("jiffies_lock"));
        assert_eq!(p.locks[2].name, None); // named by the report's symbolizer
        // Exact totals: every wait counted once.
        let waits: u64 = p.records.iter().map(|r| r.stats.contended).sum();
        assert_eq!(waits, 12);
        let wait_ns: u64 = p.records.iter().map(|r| r.stats.wait_ns_total).sum();
        assert_eq!(wait_ns, 12_000);
        // The kernel lock's site is its caller, and the stack goes on into user space.
        let r = p.records.iter().find(|r| r.lock == 1).unwrap();
        assert_eq!(r.site, 0xffffffff81000110);
        let e = p.events.iter().find(|e| e.lock == 1 && e.kind == EventKind::Contended).unwrap();
        let s = p.stacks.iter().find(|s| s.id == e.stack).unwrap();
        assert_eq!(s.frames.last(), Some(&0x401000));
        // The futex wait with a known waker carries the waker's stack as the holder's.
        let e = p
            .events
            .iter()
            .find(|e| e.lock == 3 && e.thread == 2 && e.kind == EventKind::Contended)
            .unwrap();
        assert!(e.holder_stack.is_some());
        assert_eq!(e.holder_site, 0x401500);
        // Kernel functions are named inside the profile.
        assert!(p.maps.iter().any(|m| m.path == "[kernel] vm_mmap_pgoff"));
        assert_eq!(p.dropped.acquisitions, 1);
        assert_eq!(p.dropped.stacks, 2);
        // It survives the file format.
        let back = lockmeter_format::read_profile(&lockmeter_format::to_bytes(p).unwrap()).unwrap();
        assert_eq!(&back, p);
    }

    #[test]
    fn go_mutex_stacks_start_at_the_programs_own_code() {
        // The executable is mapped at 0x400000 from file offset 0; the runtime and sync code
        // is at file offsets [0x1000, 0x3000) and [0x8000, 0x8100).
        let exe = "/srv/app".to_owned();
        let mut raw = Raw { root: Some(100), cpu_count: 2, ..Raw::default() };
        let maps = vec![MapEntry {
            start: 0x400000,
            end: 0x500000,
            offset: 0,
            perms: "r-xp".into(),
            path: exe.clone(),
        }];
        raw.procs.insert(100, Snapshot { maps, exe: exe.clone(), ..Snapshot::default() });
        let note = "/srv/app (pid 100) is a Go 1.26.8 program: its waits are traced".to_owned();
        raw.go.insert(
            100,
            GoProc {
                exe,
                runtime_code: vec![(0x1000, 0x3000), (0x8000, 0x8100)],
                note: note.clone(),
            },
        );
        // semacquire wrapper, lockSlow, main.worker, main.main, runtime.goexit.
        let waiter = vec![0x401000, 0x402345, 0x404010, 0x404567, 0x408010];
        // Semrelease wrapper, unlockSlow, main.worker.
        let waker = vec![0x401100, 0x402400, 0x404020];
        let mut a = agg(LockKind::GoMutex, 0x5afe38, 101, waiter, waker);
        a.mode = Mode::Exclusive;
        let mut r = agg(LockKind::GoRwMutex, 0x5b00b0, 102, vec![0x401200, 0x404100], vec![]);
        r.mode = Mode::Read;
        raw.aggs.push(a);
        raw.aggs.push(r);
        let ps = build_profiles(&raw, &Kallsyms::default(), 16);
        assert_eq!(ps.len(), 1);
        let p = &ps[0];
        assert_eq!(p.notes, vec![note]);
        assert_eq!(p.locks.len(), 2);
        assert_eq!((p.locks[0].kind, p.locks[0].name.as_deref()), (LockKind::GoMutex, None));
        assert_eq!(p.locks[1].kind, LockKind::GoRwMutex);
        // The site is the program's function that called Lock; the stack starts there and keeps
        // the runtime frames after it (goexit).
        let rec = p.records.iter().find(|r| r.lock == 1).unwrap();
        assert_eq!((rec.site, rec.mode, rec.stats.contended), (0x404010, Mode::Exclusive, 3));
        let e = p.events.iter().find(|e| e.lock == 1 && e.kind == EventKind::Contended).unwrap();
        let frames = |id: u32| p.stacks.iter().find(|s| s.id == id).unwrap().frames.clone();
        assert_eq!(frames(e.stack), vec![0x404010, 0x404567, 0x408010]);
        assert_eq!(frames(e.holder_stack.unwrap()), vec![0x404020]);
        assert_eq!(e.holder_site, 0x404020);
        let rec = p.records.iter().find(|r| r.lock == 2).unwrap();
        assert_eq!((rec.site, rec.mode), (0x404100, Mode::Read));
        // A futex wait of the same process keeps the futex rules: its own frames are not
        // trimmed as the Go runtime's.
        let mut raw2 = Raw { root: Some(100), ..Raw::default() };
        raw2.procs = raw.procs.clone();
        raw2.go = raw.go.clone();
        raw2.aggs.push(agg(LockKind::Futex, 0x600000, 101, vec![0x401000, 0x404010], vec![]));
        let p = &build_profiles(&raw2, &Kallsyms::default(), 16)[0];
        assert_eq!(p.records[0].site, 0x401000);
        let back = lockmeter_format::read_profile(&lockmeter_format::to_bytes(p).unwrap()).unwrap();
        assert_eq!(&back, p);
    }
}

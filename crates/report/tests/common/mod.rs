//! A hand-built profile and a fake symbolizer shared by the integration tests.
#![allow(dead_code)]

use std::collections::HashMap;

use lockmeter_core::hist::bucket;
use lockmeter_format::model::*;
use lockmeter_report::{Analysis, Frame, InlinedFrame, Symbolize};

/// Statistics with histograms consistent with the sums (every wait in the bucket of the mean).
pub fn stats(acq: u64, cont: u64, wait: u64, wait_max: u64, hold: u64, hold_max: u64) -> Stats {
    let mut s = Stats {
        acquisitions: acq,
        contended: cont,
        wait_ns_total: wait,
        wait_ns_max: wait_max,
        hold_ns_total: hold,
        hold_ns_max: hold_max,
        holds_timed: acq,
        owner_changes: cont / 2,
        cnt_hold: cont,
        cnt_lock: cont,
        ..Stats::default()
    };
    if cont > 0 {
        s.wait_hist[bucket(wait / cont)] = cont;
    }
    if acq > 0 {
        s.hold_hist[bucket(hold / acq)] = acq;
    }
    s
}

pub fn rec(thread: u32, lock: u32, site: u64, mode: Mode, stats: Stats) -> Record {
    Record { thread, lock, site, mode, stats }
}

pub const QUEUE: u64 = 0x5555_5555_8040;
pub const CONFIG: u64 = 0x5555_5555_8100;
pub const HEAP_SPIN: u64 = 0x7f3a_2c00_1000;
pub const HEAP_MUTEX: u64 = 0x7f3a_2c00_2040;

pub const SITE_PUSH: u64 = 0x5555_5555_1234;
pub const SITE_POP: u64 = 0x5555_5555_1300;
pub const SITE_POP_TOO: u64 = 0x5555_5555_1301;
pub const SITE_READ: u64 = 0x5555_5555_2000;
pub const SITE_WRITE: u64 = 0x5555_5555_2100;
pub const SITE_LIBC: u64 = 0x7f3a_2b00_0a10;

/// A deterministic profile: 3 threads, 4 locks (mutex, rwlock, spinlock, re-initialized
/// mutex), several sites per lock, read and write modes, per-CPU totals.
pub fn sample_profile() -> Profile {
    let header = Header {
        collector: "preload".into(),
        lockmeter_version: "0.1.0".into(),
        pid: 4242,
        ppid: 4000,
        image_seq: 0,
        cmdline: vec!["./app".into(), "--threads".into(), "2".into()],
        exe: "/opt/app/app".into(),
        start_unix_ns: 1_700_000_000_000_000_000,
        end_unix_ns: 1_700_000_002_000_000_000,
        duration_ns: 2_000_000_000,
        clock: ClockInfo { source: 1, hz: 2_400_000_000, hz_run: 2_400_000_100 },
        cpu_count: 4,
        hold_timing: HoldTiming::On,
        end_reason: EndReason::Exit(None),
    };
    let threads = vec![
        ThreadInfo { index: 1, tid: 4242, name: "app".into() },
        ThreadInfo { index: 2, tid: 4243, name: "worker-1".into() },
        ThreadInfo { index: 3, tid: 4244, name: "worker-2".into() },
    ];
    let locks = vec![
        LockInfo { id: 1, address: QUEUE, generation: 0, kind: LockKind::Mutex, name: None },
        LockInfo { id: 2, address: CONFIG, generation: 0, kind: LockKind::RwLock, name: None },
        LockInfo { id: 3, address: HEAP_SPIN, generation: 0, kind: LockKind::SpinLock, name: None },
        LockInfo { id: 4, address: HEAP_MUTEX, generation: 2, kind: LockKind::Mutex, name: None },
    ];
    let records = vec![
        // queue_lock: pushed by workers, popped by app; two addresses symbolize to one pop site.
        rec(
            2,
            1,
            SITE_PUSH,
            Mode::Exclusive,
            stats(40_000, 12_000, 180_000_000, 2_500_000, 60_000_000, 900_000),
        ),
        rec(
            3,
            1,
            SITE_PUSH,
            Mode::Exclusive,
            stats(38_000, 11_000, 170_000_000, 3_100_000, 57_000_000, 1_200_000),
        ),
        rec(
            1,
            1,
            SITE_POP,
            Mode::Exclusive,
            stats(50_000, 9_000, 90_000_000, 1_000_000, 40_000_000, 300_000),
        ),
        rec(
            1,
            1,
            SITE_POP_TOO,
            Mode::Exclusive,
            stats(1_000, 100, 1_000_000, 40_000, 800_000, 5_000),
        ),
        // config_lock: many readers, one writer.
        rec(
            2,
            2,
            SITE_READ,
            Mode::Read,
            stats(200_000, 500, 2_000_000, 90_000, 30_000_000, 20_000),
        ),
        rec(
            3,
            2,
            SITE_READ,
            Mode::Read,
            stats(190_000, 450, 1_900_000, 80_000, 29_000_000, 25_000),
        ),
        rec(1, 2, SITE_WRITE, Mode::Write, stats(100, 60, 40_000_000, 4_000_000, 500_000, 9_000)),
        // a heap spinlock, barely contended
        rec(2, 3, SITE_LIBC, Mode::Exclusive, stats(5_000, 3, 1_500, 900, 400_000, 2_000)),
        // a re-initialized heap mutex, uncontended, unknown call site
        rec(1, 4, 0, Mode::Exclusive, stats(10, 0, 0, 0, 9_000, 2_000)),
    ];
    let cpus = vec![
        CpuStats { cpu: 1, acquisitions: 260_000, contended: 18_000, wait_ns: 250_000_000 },
        CpuStats { cpu: 0, acquisitions: 264_110, contended: 15_113, wait_ns: 234_901_500 },
    ];
    Profile {
        header,
        maps: Vec::new(),
        threads,
        locks,
        records,
        cpus,
        stacks: Vec::new(),
        events: Vec::new(),
        lock_sleeps: Vec::new(),
        lock_classes: Vec::new(),
        dropped: Dropped::default(),
        lost: Vec::new(),
        notes: Vec::new(),
        timeline: Vec::new(),
        long_waits: None,
        overhead: Overhead {
            ns_per_pair: 24,
            estimated_total_ns: 12_578_640,
            memory_bytes: 4 << 20,
            ns_per_stack: 0,
            ..Default::default()
        },
    }
}

/// A symbolizer with fixed answers.
#[derive(Debug, Default)]
pub struct FakeSymbols {
    pub code: HashMap<u64, (&'static str, &'static str, u64)>,
    pub data: HashMap<u64, &'static str>,
    /// file:line of code addresses (debug information).
    pub lines: HashMap<u64, (&'static str, u32)>,
    /// Functions inlined at code addresses.
    pub inlined: HashMap<u64, Vec<InlinedFrame>>,
}

impl FakeSymbols {
    pub fn sample() -> Self {
        let mut s = FakeSymbols::default();
        s.code.insert(SITE_PUSH, ("app", "queue_push", 0x24));
        // Two return addresses that a symbolizer names alike (e.g. without offsets) merge.
        s.code.insert(SITE_POP, ("app", "queue_pop", 0x1c));
        s.code.insert(SITE_POP_TOO, ("app", "queue_pop", 0x1c));
        s.code.insert(SITE_READ, ("app", "config_get", 0x10));
        s.code.insert(SITE_WRITE, ("app", "config_reload", 0x88));
        s.data.insert(QUEUE, "queue_lock");
        s.data.insert(CONFIG, "config_lock");
        s
    }
}

impl Symbolize for FakeSymbols {
    fn code(&mut self, addr: u64) -> Frame {
        match self.code.get(&addr) {
            Some((m, f, off)) => {
                let (file, line) = match self.lines.get(&addr) {
                    Some((file, line)) => (Some((*file).to_owned()), Some(*line)),
                    None => (None, None),
                };
                Frame {
                    address: addr,
                    module: Some((*m).into()),
                    module_offset: addr & 0xffff,
                    function: Some((*f).into()),
                    function_offset: *off,
                    file,
                    line,
                    inlined: self.inlined.get(&addr).cloned().unwrap_or_default(),
                    ..Frame::default()
                }
            }
            None if addr == SITE_LIBC => Frame {
                address: addr,
                module: Some("libc.so.6".into()),
                module_offset: 0xa10,
                ..Frame::default()
            },
            None => Frame { address: addr, ..Frame::default() },
        }
    }
    fn data(&mut self, addr: u64) -> Option<String> {
        self.data.get(&addr).map(|s| (*s).to_owned())
    }
}

pub const WORKER_MAIN: u64 = 0x5555_5555_3010;
pub const APP_MAIN: u64 = 0x5555_5555_3100;
pub const POP_RELEASE: u64 = 0x5555_5555_1340;
pub const SESSION_NEW: u64 = 0x5555_5555_4020;
pub const START_THREAD: u64 = 0x7f3a_2b00_1000;

/// `sample_profile` with call stacks and events: waiters on `queue_lock` (pushers waiting on
/// the popper and the other way round), holders, and first uses (the heap mutex is named by
/// its first use, `session_new`).
pub fn events_profile() -> Profile {
    let mut p = sample_profile();
    p.stacks = vec![
        Stack { id: 1, frames: vec![SITE_PUSH, WORKER_MAIN, START_THREAD] },
        Stack { id: 2, frames: vec![SITE_POP, APP_MAIN] },
        Stack { id: 3, frames: vec![POP_RELEASE, APP_MAIN] },
        Stack { id: 4, frames: vec![SESSION_NEW, APP_MAIN] },
        Stack { id: 5, frames: vec![SITE_WRITE, APP_MAIN] },
    ];
    let ev =
        |thread, lock, kind, stack, holder_site, holder_stack, count, wait_ns, wait_ns_max| Event {
            thread,
            lock,
            mode: Mode::Exclusive,
            kind,
            stack,
            holder_site,
            holder_stack,
            count,
            wait_ns,
            wait_ns_max,
        };
    use EventKind::*;
    p.events = vec![
        // Two pushers wait on the popper: one pair, two threads.
        ev(2, 1, Contended, 1, SITE_POP, Some(2), 12_000, 180_000_000, 2_500_000),
        ev(3, 1, Contended, 1, SITE_POP, Some(2), 11_000, 170_000_000, 3_100_000),
        // The popper waits on the pushers, and once on an unknown holder.
        ev(1, 1, Contended, 2, SITE_PUSH, Some(1), 9_000, 90_000_000, 1_000_000),
        ev(1, 1, Contended, 2, 0, None, 100, 1_000_000, 40_000),
        // The config writer waits on readers.
        ev(1, 2, Contended, 5, SITE_READ, None, 60, 40_000_000, 4_000_000),
        // Holders of queue_lock while others waited.
        ev(1, 1, Holding, 3, 0, None, 9_100, 40_800_000, 300_000),
        ev(2, 1, Holding, 1, 0, None, 12_000, 60_000_000, 900_000),
        ev(3, 1, Holding, 1, 0, None, 11_000, 57_000_000, 1_200_000),
        // First uses: a static lock (its symbol wins) and the heap mutex.
        ev(2, 1, FirstUse, 1, 0, None, 1, 0, 0),
        ev(1, 4, FirstUse, 4, 0, None, 1, 0, 0),
        ev(2, 3, Sampled, 1, 0, None, 7, 0, 0),
    ];
    // The heap locks live in private anonymous memory (malloc's): first-use names say `heap`.
    p.maps.push(MapEntry {
        start: 0x7f3a_2c00_0000,
        end: 0x7f3a_2c10_0000,
        offset: 0,
        perms: "rw-p".into(),
        path: String::new(),
    });
    p
}

impl FakeSymbols {
    /// `sample()` plus the stack frames of `events_profile`, with file:line and one inlined
    /// function.
    pub fn with_lines() -> Self {
        let mut s = FakeSymbols::sample();
        s.code.insert(WORKER_MAIN, ("app", "worker_main", 0x40));
        s.code.insert(APP_MAIN, ("app", "main", 0x130));
        s.code.insert(POP_RELEASE, ("app", "queue_pop", 0x5c));
        s.code.insert(SESSION_NEW, ("app", "session_new", 0x30));
        s.code.insert(START_THREAD, ("libc.so.6", "start_thread", 0x305));
        s.lines.insert(SITE_PUSH, ("/src/app/queue.c", 41));
        s.lines.insert(SITE_POP, ("/src/app/queue.c", 58));
        s.lines.insert(POP_RELEASE, ("/src/app/queue.c", 66));
        s.lines.insert(WORKER_MAIN, ("/src/app/worker.c", 17));
        s.lines.insert(APP_MAIN, ("/src/app/main.c", 88));
        s.lines.insert(SESSION_NEW, ("/src/app/session.c", 12));
        s.lines.insert(SITE_WRITE, ("/src/app/config.c", 140));
        s.inlined.insert(
            SITE_PUSH,
            vec![InlinedFrame {
                function: Some("queue_lock_acquire".into()),
                file: Some("/src/app/queue.h".into()),
                line: Some(9),
            }],
        );
        s
    }
}

pub fn events_analysis() -> Analysis {
    Analysis::with_symbolizer(&events_profile(), &mut FakeSymbols::with_lines())
}

pub fn sample_analysis() -> Analysis {
    Analysis::with_symbolizer(&sample_profile(), &mut FakeSymbols::sample())
}

pub fn render_to(
    a: &Analysis,
    f: impl Fn(&Analysis, &mut Vec<u8>) -> std::io::Result<()>,
) -> String {
    let mut out = Vec::new();
    f(a, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

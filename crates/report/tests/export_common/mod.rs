//! Hand-built profiles with stacks and events, and a fake symbolizer, for the export tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use lockmeter_core::hist::bucket;
use lockmeter_format::model::*;
use lockmeter_report::{Frame, InlinedFrame, Symbolize};

/// Functions of the fake program: (start, name).
pub const FUNCTIONS: [(u64, &str); 6] = [
    (0x1000, "main"),
    (0x2000, "worker"),
    (0x3000, "push_job"),
    (0x4000, "pop_job"),
    (0x5000, "read_config"),
    (0x6000, "std::vec::Vec<T; 4>::push"),
];

/// Static locks of the fake program.
pub const QUEUE: u64 = 0x9000;
pub const CONFIG: u64 = 0x9100;
/// A heap lock (no symbol).
pub const HEAP: u64 = 0x7f00_0000_1000;

/// Resolves code in [0x1000, 0x7000) to `FUNCTIONS`, and the two static locks. With `debug`,
/// frames also get `app.c:<offset>` and `worker+0x20` has `next_job` (queue.h:7) inlined in it.
#[derive(Debug, Default)]
pub struct FakeSymbols {
    /// How many code lookups were made (to check caching).
    pub code_calls: usize,
    /// Give file, line and inlined frames, as DWARF would.
    pub debug: bool,
}

impl Symbolize for FakeSymbols {
    fn code(&mut self, addr: u64) -> Frame {
        self.code_calls += 1;
        let mut f = Frame { address: addr, ..Frame::default() };
        if let Some(&(start, name)) =
            FUNCTIONS.iter().find(|(s, _)| addr > *s && addr <= *s + 0x1000)
        {
            f.module = Some("app".into());
            f.module_offset = addr;
            f.function = Some(name.into());
            f.function_offset = addr - start;
            if self.debug {
                f.file = Some("/src/app.c".into());
                f.line = Some((addr - start) as u32);
                if addr == 0x2020 {
                    f.inlined = vec![InlinedFrame {
                        function: Some("next_job".into()),
                        file: Some("/src/queue.h".into()),
                        line: Some(7),
                    }];
                }
            }
        }
        f
    }
    fn data(&mut self, addr: u64) -> Option<String> {
        match addr {
            QUEUE => Some("queue_lock".into()),
            CONFIG => Some("config_lock".into()),
            _ => None,
        }
    }
}

/// Statistics with histograms consistent with the sums: every wait in the bucket of the mean,
/// every hold in the bucket of the mean hold.
pub fn stats(acq: u64, cont: u64, wait: u64, hold: u64) -> Stats {
    let mut s = Stats {
        acquisitions: acq,
        contended: cont,
        wait_ns_total: wait,
        wait_ns_max: wait.checked_div(cont).unwrap_or(0) * 2,
        hold_ns_total: hold,
        hold_ns_max: hold.checked_div(acq).unwrap_or(0) * 2,
        holds_timed: acq,
        cnt_hold: cont / 2,
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

pub fn lock(id: u32, address: u64, kind: LockKind) -> LockInfo {
    LockInfo { id, address, generation: 0, kind, name: None }
}

pub fn rec(thread: u32, lock: u32, site: u64, mode: Mode, stats: Stats) -> Record {
    Record { thread, lock, site, mode, stats }
}

#[allow(clippy::too_many_arguments)]
pub fn event(
    thread: u32,
    lock: u32,
    mode: Mode,
    kind: EventKind,
    stack: u32,
    count: u64,
    ns: u64,
    max: u64,
) -> Event {
    Event {
        thread,
        lock,
        mode,
        kind,
        stack,
        holder_site: 0,
        holder_stack: None,
        count,
        wait_ns: ns,
        wait_ns_max: max,
    }
}

pub const PUSH_SITE: u64 = 0x3010;
pub const POP_SITE: u64 = 0x4010;
pub const READ_SITE: u64 = 0x5008;

/// Three locks (a named static mutex, a heap mutex, a static rwlock), four stacks, contended,
/// holding, sampled and first-use events, one contended event whose stack was lost.
///
/// Contended events by (lock, stack), merged over threads:
/// - queue_lock, main;worker;push_job: 10+5 = 15 contentions, 1000+700 = 1700 ns (max 400)
/// - queue_lock, main;worker;pop_job: 3, 300 ns (max 150)
/// - queue_lock, lost stack: 1, 7 ns
/// - heap lock, main;worker;pop_job: 2, 50 ns
/// - config_lock (read), main;read_config: 1, 40 ns
///
/// Holding: queue_lock, main;worker;pop_job+0x18: 4, 900 ns; heap lock, same stack: 1, 100 ns.
pub fn stack_profile() -> Profile {
    let stacks = vec![
        Stack { id: 1, frames: vec![PUSH_SITE, 0x2020, 0x1030] },
        Stack { id: 2, frames: vec![POP_SITE, 0x2020, 0x1030] },
        Stack { id: 3, frames: vec![READ_SITE, 0x1040] },
        Stack { id: 4, frames: vec![0x4018, 0x2020, 0x1030] },
    ];
    use EventKind::*;
    use Mode::*;
    let events = vec![
        event(1, 1, Exclusive, Contended, 1, 10, 1000, 400),
        event(2, 1, Exclusive, Contended, 1, 5, 700, 300),
        event(2, 1, Exclusive, Contended, 2, 3, 300, 150),
        event(2, 1, Exclusive, Contended, 99, 1, 7, 7),
        event(1, 2, Exclusive, Contended, 2, 2, 50, 30),
        event(1, 3, Read, Contended, 3, 1, 40, 40),
        event(1, 1, Exclusive, Holding, 4, 4, 900, 500),
        event(2, 2, Exclusive, Holding, 4, 1, 100, 100),
        event(1, 1, Exclusive, Sampled, 1, 1000, 0, 0),
        event(1, 1, Exclusive, FirstUse, 1, 1, 0, 0),
    ];
    Profile {
        header: Header {
            collector: "preload".into(),
            lockmeter_version: "0.1.0".into(),
            pid: 4242,
            cmdline: vec!["./app".into(), "--threads".into(), "2".into()],
            exe: "/opt/app/app".into(),
            start_unix_ns: 1_700_000_000_000_000_000,
            end_unix_ns: 1_700_000_001_000_000_000,
            duration_ns: 1_000_000_000,
            cpu_count: 2,
            ..Header::default()
        },
        maps: vec![MapEntry {
            start: 0x1000,
            end: 0x8000,
            offset: 0x1000,
            perms: "r-xp".into(),
            path: "/opt/app/app".into(),
        }],
        threads: vec![
            ThreadInfo { index: 1, tid: 4242, name: "app".into() },
            ThreadInfo { index: 2, tid: 4243, name: "worker".into() },
        ],
        locks: vec![
            lock(1, QUEUE, LockKind::Mutex),
            lock(2, HEAP, LockKind::Mutex),
            lock(3, CONFIG, LockKind::RwLock),
        ],
        records: vec![
            rec(1, 1, PUSH_SITE, Exclusive, stats(1000, 10, 1000, 50_000)),
            rec(2, 1, PUSH_SITE, Exclusive, stats(500, 5, 700, 20_000)),
            rec(2, 1, POP_SITE, Exclusive, stats(300, 4, 307, 9_000)),
            rec(1, 2, POP_SITE, Exclusive, stats(100, 2, 50, 1_000)),
            rec(1, 3, READ_SITE, Read, stats(2000, 1, 40, 4_000)),
        ],
        stacks,
        events,
        ..Profile::default()
    }
}

/// `go tool pprof -top EXTRA FILE`: its output, or `None` (with the reason printed) when Go is
/// not installed. Go builds its `pprof` tool on first use into the build cache (a minute on a
/// small machine), so the user's cache is kept; `HOME` is set only when missing.
pub fn go_pprof_top(file: &Path, extra: &[&str]) -> Option<String> {
    if Command::new("go").arg("version").output().is_err() {
        eprintln!("skipped: `go` is not installed, so `go tool pprof` cannot be tried");
        return None;
    }
    let mut cmd = Command::new("go");
    cmd.args(["tool", "pprof", "-top"]).args(extra).arg(file);
    cmd.env("GOFLAGS", "-mod=mod").env("GOTOOLCHAIN", "local");
    if std::env::var_os("HOME").is_none() {
        let home = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("lockmeter-export-gohome");
        std::fs::create_dir_all(&home).unwrap();
        cmd.env("HOME", &home);
    }
    let out = cmd.output().expect("go runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "go tool pprof failed: {}\n{stdout}\n{stderr}", out.status);
    Some(stdout)
}

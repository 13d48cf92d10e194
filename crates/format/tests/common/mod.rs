//! Shared test data.
#![allow(dead_code)]

use lockmeter_format::*;

/// A small deterministic PRNG (xorshift64*), so tests never depend on time or entropy.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { (self.next() % n as u64) as usize }
    }
}

pub fn stats(seed: u64) -> Stats {
    let mut r = Rng(seed | 1);
    let mut s = Stats {
        acquisitions: r.next() >> 20,
        contended: r.next() >> 30,
        trylock_failures: r.next() % 7,
        wait_ns_total: r.next() >> 10,
        wait_ns_max: r.next() >> 30,
        hold_ns_total: r.next() >> 10,
        hold_ns_max: r.next() >> 30,
        holds_timed: r.next() >> 40,
        owner_changes: r.next() >> 40,
        cnt_hold: r.next() >> 40,
        cnt_lock: r.next() >> 40,
        cond_waits: r.next() % 3,
        cond_wait_ns: u64::MAX,
        ..Stats::default()
    };
    for _ in 0..(seed % 9) {
        let i = r.below(65);
        s.wait_hist[i] = r.next() >> 35;
        let j = r.below(65);
        s.hold_hist[j] = r.next() >> 35;
    }
    s.hold_hist[64] = u64::MAX; // the last bucket too
    s
}

/// A profile exercising every field, every enum variant and awkward strings.
pub fn rich_profile() -> Profile {
    let kinds = [LockKind::Mutex, LockKind::RwLock, LockKind::SpinLock, LockKind::Library];
    let modes = [Mode::Exclusive, Mode::Read, Mode::Write];
    Profile {
        header: Header {
            collector: "preload".into(),
            lockmeter_version: "0.1.0-dev+ünïcödé".into(),
            pid: 4242,
            ppid: 1,
            image_seq: 2,
            cmdline: vec!["./server".into(), "".into(), "--name=日本語 with spaces".into()],
            exe: "/usr/local/bin/server (deleted)".into(),
            start_unix_ns: 1_763_700_000_000_000_000,
            end_unix_ns: 1_763_700_005_000_000_000,
            duration_ns: 5_000_000_000,
            clock: ClockInfo { source: 1, hz: 2_994_000_000, hz_run: 2_994_123_456 },
            cpu_count: 64,
            hold_timing: HoldTiming::Sampled(64),
            end_reason: EndReason::Signal(-15),
        },
        maps: vec![
            MapEntry {
                start: 0x5555_5555_4000,
                end: 0x5555_5556_0000,
                offset: 0x1000,
                perms: "r-xp".into(),
                path: "/usr/local/bin/server".into(),
            },
            MapEntry {
                start: 0x7ffd_0000_0000,
                end: u64::MAX,
                offset: 0,
                perms: "rw-p".into(),
                path: "".into(),
            },
            MapEntry { start: 1, end: 2, offset: 3, perms: "---p".into(), path: "[heap]".into() },
        ],
        threads: (1..=5)
            .map(|i| ThreadInfo {
                index: i,
                tid: 4242 + i,
                name: if i == 3 { String::new() } else { format!("worker-{i}") },
            })
            .collect(),
        locks: (0..8)
            .map(|i| LockInfo {
                id: i,
                address: 0x5555_0000_0000 + u64::from(i) * 64,
                generation: i % 3,
                kind: kinds[i as usize % 4],
                name: match i % 3 {
                    0 => None,
                    1 => Some(format!("lock-{i}")),
                    _ => Some(String::new()),
                },
            })
            .collect(),
        records: (0..40u64)
            .map(|i| Record {
                thread: (i % 5) as u32 + 1,
                lock: (i % 8) as u32,
                site: 0x4000_0000 + i * 0x10,
                mode: modes[i as usize % 3],
                stats: stats(i),
            })
            .collect(),
        cpus: (0..4)
            .map(|c| CpuStats {
                cpu: c,
                acquisitions: 1000 + u64::from(c),
                contended: 7,
                wait_ns: 99,
            })
            .collect(),
        stacks: (0..6u32)
            .map(|id| Stack {
                id,
                frames: (0..u64::from(id) * 3 + 1).map(|f| 0x4000_0000 + f * 0x40).collect(),
            })
            .collect(),
        timeline: (0..3u64)
            .map(|i| lockmeter_format::Interval {
                start_ns: i * 1_000_000,
                end_ns: (i + 1) * 1_000_000,
                locks: (0..i as u32)
                    .map(|l| lockmeter_format::IntervalLock {
                        lock: l,
                        acquisitions: 10 + i,
                        contended: i,
                        wait_ns: 1000 * i,
                        hold_ns: 77,
                    })
                    .collect(),
            })
            .collect(),
        long_waits: Some(lockmeter_format::LongWaits {
            per_thread: 32,
            lost: 3,
            waits: (0..4u64)
                .map(|i| lockmeter_format::LongWait {
                    thread: 1 + i as u32 % 2,
                    lock: i as u32,
                    mode: if i == 3 { Mode::Read } else { Mode::Exclusive },
                    start_ns: 1000 * i,
                    end_ns: 1000 * i + 500_000,
                    stack: (i != 1).then_some(i as u32),
                    holder_thread: i as u32 % 3,
                    holder_site: 0x4010 * i,
                    holder_stack: (i == 2).then_some(7),
                    holder_acquired_ns: (i != 0).then(|| 1000 * i - 300),
                })
                .collect(),
        }),
        notes: vec![
            "Go binary /srv/app: its sync.Mutex waits were not traced (stripped)".into(),
            String::new(),
            "ünïcödé note".into(),
        ],
        events: (0..12u64)
            .map(|i| Event {
                thread: (i % 5) as u32 + 1,
                lock: (i % 8) as u32,
                mode: modes[i as usize % 3],
                kind: [EventKind::Contended, EventKind::Sampled, EventKind::FirstUse]
                    [i as usize % 3],
                stack: (i % 6) as u32,
                holder_site: if i % 3 == 0 { 0x4000_1000 + i } else { 0 },
                holder_stack: if i % 4 == 0 { Some((i % 6) as u32) } else { None },
                count: i + 1,
                wait_ns: i * 1000,
                wait_ns_max: i * 500,
            })
            .collect(),
        lock_sleeps: vec![LockSleep {
            lock: 1,
            sleeps: 7,
            sleep_ns: 7_000,
            sleep_ns_max: 2_000,
            preempted_holds: 3,
            preempted_ns: 9_000,
            preempted_wait_ns: 4_000,
        }],
        lock_classes: vec![LockClass {
            lock: 2,
            site: 0x401234,
            initialized: true,
            lifetimes: 1_000_000,
            sample_address: 0x5555_0000_1000,
        }],
        dropped: Dropped {
            acquisitions: 5,
            locks: 1,
            threads: 2,
            holds: 3,
            stacks: 4,
            acquisitions_no_thread: 1,
            acquisitions_table_full: 2,
            acquisitions_registry_full: 2,
        },
        lost: vec![
            Lost { lock: 1, site: 0x401000, mode: Mode::Exclusive, acquisitions: 2 },
            Lost { lock: 2, site: 0x401234, mode: Mode::Write, acquisitions: 1 },
        ],
        overhead: Overhead {
            ns_per_pair: 14,
            estimated_total_ns: 140_000,
            memory_bytes: 1 << 24,
            ns_per_stack: 900,
            estimated_slowdown_milli: 1_250,
            contended_ns: 30_000,
            serialized_ns: 20_000,
            cpu_ns: 900_000,
            hooks_ns: 180_000,
            start_ns: 700_000,
            end_ns: 400_000,
            other_images: 3,
            other_fixed_ns: 9_000_000,
        },
    }
}

pub fn encoded() -> Vec<u8> {
    to_bytes(&rich_profile()).expect("encode")
}

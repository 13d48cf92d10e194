//! End-to-end tests of `lockmeter export --perfetto`: the longest waits the collector kept
//! (`run --longest-waits N`) as a Chrome trace-event JSON with wait slices on the waiters'
//! threads, hold slices on the holder's thread and flow arrows from holds to waits; and its
//! one-line error for a profile without them.
//!
//! Ground-truth program (`tests/programs/`): convoy.c, which prints its holder's and waiters'
//! thread ids and its contended waits.
//!
//! Needs gcc. Run with `cargo test -p lockmeter --test perfetto`.

mod common;

use common::*;
use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// The program's own account: (holder tid, waiter tids, waits).
fn truth(stdout: &str) -> (u64, Vec<u64>, u64) {
    let (mut holder, mut waiters, mut waits) = (0, Vec::new(), 0);
    for l in stdout.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        match w.as_slice() {
            ["holder", t] => holder = t.parse().expect("a tid"),
            ["waiter", t] => waiters.push(t.parse().expect("a tid")),
            ["waits", n] => waits = n.parse().expect("a count"),
            _ => {}
        }
    }
    (holder, waiters, waits)
}

#[test]
fn a_convoy_has_waits_holds_and_flows() {
    let s = Scratch::new("perfetto_convoy");
    let exe = s.compile("convoy");
    // 4 waiters, 3 rounds, 30 ms holds; 2 kept per thread: fewer than each thread's 3 waits.
    let ran = run_metered(&s, "c.lmp", &["--longest-waits", "2"], &exe, &["4", "3", "30"]);
    ran.expect_code(0);
    let (holder, waiters, waits) = truth(&ran.stdout);
    assert_eq!((waiters.len(), waits), (4, 12), "{ran}");
    let p = Profile::load(&s.path("c.lmp"), &ran);
    let lock = p.lock("convoy_lock");
    // Every waiter's acquisition found the lock held (the holder keeps it until all asked).
    p.check(u(lock, "contended") >= waits, "every waiter waited");

    let out = s.path("c.json");
    let ex = lockmeter(&s.dir, &["export", "c.lmp", "--perfetto", "c.json"]);
    ex.expect_code(0);
    let trace: Value = serde_json::from_slice(&std::fs::read(&out).unwrap())
        .unwrap_or_else(|e| panic!("the trace is not JSON: {e}\n{ex}"));
    let events = trace["traceEvents"].as_array().expect("traceEvents");
    let field = |e: &Value, f: &str| e[f].as_str().unwrap_or_default().to_owned();
    let of = |ph: &str, name: &str| -> Vec<&Value> {
        events.iter().filter(|e| field(e, "ph") == ph && field(e, "name") == name).collect()
    };

    // Thread names from the profile: the program named its threads.
    let names: HashMap<u64, String> = of("M", "thread_name")
        .iter()
        .map(|e| (u(e, "tid"), e["args"]["name"].as_str().unwrap_or_default().to_owned()))
        .collect();
    assert!(names.get(&holder).is_some_and(|n| n.starts_with("holder")), "{names:?}");

    // Wait slices: each waiter's 2 longest (it waited 3 times), on its own thread.
    let wait_slices = of("X", "wait on convoy_lock");
    for &t in &waiters {
        let mine = wait_slices.iter().filter(|e| u(e, "tid") == t).count();
        assert_eq!(mine, 2, "wait slices of waiter {t}: {wait_slices:?}");
        assert!(names.get(&t).is_some_and(|n| n.starts_with("waiter-")), "{names:?}");
    }
    assert_eq!(wait_slices.len(), 8, "only the waiters waited");
    for e in &wait_slices {
        assert_eq!(e["args"]["lock"], "convoy_lock");
        assert_eq!(e["cat"], "lock");
        assert!(e["args"]["waiter_site"].is_string(), "{e}");
        // ts and dur in microseconds, the wait in ns among the args.
        let (dur, ns) = (e["dur"].as_f64().unwrap(), u(&e["args"], "wait_ns"));
        assert!((dur * 1000.0 - ns as f64).abs() < 1.0, "{e}");
    }
    // The longest wait of the run is kept: the longest slice is the profile's longest wait.
    let longest = wait_slices.iter().map(|e| u(&e["args"], "wait_ns")).max().unwrap();
    p.eq("longest wait slice = the lock's wait_ns_max", longest, u(lock, "wait_ns_max"));

    // Hold slices on the holder's thread, each before the waits it caused.
    let holds = of("X", "hold convoy_lock");
    assert!(!holds.is_empty() && holds.iter().all(|e| u(e, "tid") == holder), "{holds:?}");
    assert!(holds.iter().all(|e| e["args"]["holder_site"].as_str().is_some()), "{holds:?}");

    // Flows: each start on the holder's thread at a hold's start, its finish (bound to the
    // enclosing slice) at a wait's start on a waiter's thread; every start has its finish.
    let starts: HashMap<u64, &Value> =
        of("s", "convoy_lock held").into_iter().map(|e| (u(e, "id"), e)).collect();
    let finishes: HashMap<u64, &Value> =
        of("f", "convoy_lock held").into_iter().map(|e| (u(e, "id"), e)).collect();
    assert!(!starts.is_empty());
    let ids: HashSet<_> = starts.keys().collect();
    assert_eq!(ids, finishes.keys().collect(), "flow starts and finishes pair up");
    let hold_ts: Vec<f64> = holds.iter().map(|e| e["ts"].as_f64().unwrap()).collect();
    let wait_at: Vec<(u64, f64)> =
        wait_slices.iter().map(|e| (u(e, "tid"), e["ts"].as_f64().unwrap())).collect();
    for (id, st) in &starts {
        let f = finishes[id];
        assert_eq!(u(st, "tid"), holder);
        assert!(hold_ts.contains(&st["ts"].as_f64().unwrap()), "flow {id} starts at a hold");
        assert_eq!(f["bp"], "e");
        assert!(wait_at.contains(&(u(f, "tid"), f["ts"].as_f64().unwrap())), "flow {id}");
    }
}

#[test]
fn without_longest_waits_it_says_to_record_again() {
    let s = Scratch::new("perfetto_none");
    let exe = s.compile("convoy");
    let ran = run_metered(&s, "c.lmp", &["--longest-waits", "0"], &exe, &["2", "1", "5"]);
    ran.expect_code(0);
    let ex = lockmeter(&s.dir, &["export", "c.lmp", "--perfetto", "c.json"]);
    assert_ne!(ex.code(), 0, "{ex}");
    assert!(ex.stderr.contains("--longest-waits") && ex.stderr.trim().lines().count() == 1, "{ex}");
    assert!(!s.path("c.json").exists());
}

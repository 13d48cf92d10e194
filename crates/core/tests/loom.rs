//! Loom models of the concurrent tables of `core`: the fixed table (`core::fixed`) with one
//! writer and with many, and the lock registry (`core::registry`). Two inserters of one key get
//! one entry, inserters of colliding keys get one each, and a reader never sees an entry half
//! published (its key's other words or its initial value missing).
//!
//! Loom keeps one last access per atomic, so a thread's own load before its store hides another
//! thread's earlier load of it: a reader that must be raced with a publication waits for it in a
//! yielding loop (then loom branches at the reader's loads after each store).
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p lockmeter-core --release --test loom`
//! (preemption bound 3 unless `LOOM_MAX_PREEMPTIONS` says otherwise).
#![cfg(loom)]

use core::sync::atomic::Ordering::Relaxed;
use lockmeter_core::LockKind;
use lockmeter_core::fixed::{Entry, FixedTable};
use lockmeter_core::registry::{Registry, Slot};
use loom::thread;

fn builder() -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    if std::env::var("LOOM_MAX_PREEMPTIONS").is_err() {
        b.preemption_bound = Some(3);
    }
    b
}

/// Memory the model's threads share for one execution (loom threads need `'static`).
fn leak<T>(v: T) -> &'static T {
    Box::leak(Box::new(v))
}

mod common;

/// Test entries on loom's atomics, every key hashing to entry 0.
mod entries {
    crate::test_entries!(loom::sync::atomic::AtomicU64, |_: u64| 0u64);
}

use entries::{Pair, Word};

fn table<E: Entry + Default>(n: usize) -> &'static FixedTable<'static, E> {
    let mem: &'static Vec<E> = leak((0..n).map(|_| E::default()).collect());
    leak(FixedTable::new(mem, n, n))
}

#[test]
fn two_inserters_of_one_key_get_one_entry() {
    builder().check(|| {
        let t = table::<Word>(4);
        let h = thread::spawn(move || {
            let (i, e) = t.insert(&7, |_| {}).unwrap();
            e.v.fetch_add(1, Relaxed);
            i
        });
        let (i, e) = t.insert(&7, |_| {}).unwrap();
        e.v.fetch_add(1, Relaxed);
        assert_eq!(h.join().unwrap(), i);
        assert_eq!(t.len(), 1);
        assert_eq!(t.find(&7).unwrap().v.load(Relaxed), 2);
    });
}

#[test]
fn inserters_of_colliding_keys_get_an_entry_each() {
    builder().check(|| {
        let t = table::<Word>(4);
        let h = thread::spawn(move || t.insert(&1, |e| e.v.store(10, Relaxed)).unwrap().0);
        // Meanwhile, a lookup sees the key whole or not at all.
        if let Some(e) = t.find(&1) {
            assert_eq!(e.k.load(Relaxed), 1);
        }
        let (j, _) = t.insert(&2, |e| e.v.store(20, Relaxed)).unwrap();
        let i = h.join().unwrap();
        assert_ne!(i, j);
        assert_eq!(t.find(&1).unwrap().v.load(Relaxed), 10);
        assert_eq!(t.find(&2).unwrap().v.load(Relaxed), 20);
        assert_eq!(t.len(), 2);
    });
}

/// The reader waits (yielding) until it sees each key, so that loom explores every point of the
/// writer's publication the reader can see the key from.
#[test]
fn a_reader_never_sees_a_half_published_entry() {
    builder().check(|| {
        let t = table::<Pair>(4);
        let h = thread::spawn(move || {
            t.insert_one(&(5, 1), |e| e.v.store(11, Relaxed)).unwrap();
            t.insert_one(&(5, 2), |e| e.v.store(22, Relaxed)).unwrap();
        });
        for (k, v) in [((5, 1), 11), ((5, 2), 22)] {
            let e = loop {
                if let Some(e) = t.find(&k) {
                    break e;
                }
                thread::yield_now();
            };
            assert_eq!((e.b.load(Relaxed), e.v.load(Relaxed)), (k.1, v), "half published");
        }
        t.for_each(|_, e| assert_eq!(e.v.load(Relaxed), e.b.load(Relaxed) * 11));
        h.join().unwrap();
        assert_eq!(t.len(), 2);
    });
}

fn registry(n: usize) -> &'static Registry<'static> {
    let mem: &'static Vec<Slot> = leak((0..n).map(|_| Slot::new()).collect());
    leak(Registry::new(mem))
}

#[test]
fn registry_two_lookups_of_one_address_get_one_slot() {
    builder().check(|| {
        let r = registry(8);
        let h = thread::spawn(move || r.lookup(0x40, LockKind::Mutex).unwrap().0);
        let (i, s) = r.lookup(0x40, LockKind::Mutex).unwrap();
        assert_eq!(h.join().unwrap(), i);
        assert_eq!(s.addr(), 0x40);
        assert_eq!(r.len(), 1);
    });
}

#[test]
fn registry_lookups_race_into_a_tombstone_without_duplicates() {
    builder().check(|| {
        let r = registry(4);
        // Three of four slots usable: fill two, retire one (a tombstone), then race.
        r.lookup(0x40, LockKind::Mutex).unwrap();
        r.lookup(0x80, LockKind::Mutex).unwrap();
        r.retire(0x40);
        let h = thread::spawn(move || r.lookup(0xc0, LockKind::Mutex).map(|(i, _)| i));
        let mine = r.lookup(0xc0, LockKind::Mutex).map(|(i, _)| i);
        let theirs = h.join().unwrap();
        assert_eq!(mine, theirs);
        assert!(mine.is_some());
        assert_eq!(r.find(0xc0).map(|(i, _)| i), mine);
        assert_eq!(r.find(0x80).map(|(_, s)| s.addr()), Some(0x80));
        assert_eq!(r.len(), 2);
        assert_eq!(r.iter().count(), 2);
    });
}

#[test]
fn registry_retire_races_a_lookup_of_another_address() {
    builder().check(|| {
        let r = registry(4);
        r.lookup(0x40, LockKind::Mutex).unwrap();
        let h = thread::spawn(move || r.lookup(0x80, LockKind::Mutex).unwrap().0);
        r.retire(0x40);
        let i = h.join().unwrap();
        assert!(r.find(0x40).is_none());
        assert_eq!(r.find(0x80).map(|(j, _)| j), Some(i));
        assert_eq!(r.len(), 1);
    });
}

//! The fixed concurrent table (`core::fixed`): unit tests, and property tests against `HashMap`
//! of it and of the lock registry (`core::registry`): under any sequence of operations they hold
//! what the map holds, refuse only when the map says they are full, and count what they refuse.

use lockmeter_core::LockKind;
use lockmeter_core::fixed::FixedTable;
use lockmeter_core::registry::{Registry, Slot};
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;

mod common;

/// Entries placed by a mix of their tag.
mod mixed {
    crate::test_entries!(std::sync::atomic::AtomicU64, lockmeter_core::mix64);
}

/// Entries whose keys all start probing at entry 3: probing does all the work (only `Word` used).
#[allow(dead_code)]
mod colliding {
    crate::test_entries!(std::sync::atomic::AtomicU64, |_: u64| 3u64);
}

use mixed::{Pair, Word};

#[derive(Debug, Clone)]
enum Op {
    Insert(u64, u64),
    Find(u64, u64),
    Clear,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        30 => (1..=6u64, 0..8u64).prop_map(|(a, b)| Op::Insert(a, b)),
        10 => (1..=6u64, 0..8u64).prop_map(|(a, b)| Op::Find(a, b)),
        1 => Just(Op::Clear),
    ]
}

#[derive(Debug, Clone)]
enum RegOp {
    Lookup(u64),
    Find(u64),
    Retire(u64),
}

fn reg_op(space: u64) -> impl Strategy<Value = RegOp> {
    prop_oneof![
        6 => (1..=space).prop_map(RegOp::Lookup),
        2 => (1..=space).prop_map(RegOp::Find),
        3 => (1..=space).prop_map(RegOp::Retire),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// One writer, keys of two words: the table holds exactly the map's keys with their counts,
    /// and refuses (counting it) only a new key once `limit` keys are in.
    #[test]
    fn one_writer_agrees_with_a_hashmap(
        limit in 1usize..=32,
        ops in proptest::collection::vec(op(), 1..400),
    ) {
        let mem: Vec<Pair> = (0..32).map(|_| Pair::default()).collect();
        let t = FixedTable::new(&mem, 32, limit);
        let mut model: HashMap<(u64, u64), u64> = HashMap::new();
        let mut refused = 0;
        for o in ops {
            match o {
                Op::Insert(a, b) => match t.insert_one(&(a, b), |_| {}) {
                    Some((_, e)) => {
                        e.v.fetch_add(1, Relaxed);
                        *model.entry((a, b)).or_default() += 1;
                    }
                    None => {
                        prop_assert!(!model.contains_key(&(a, b)), "a kept key refused");
                        prop_assert_eq!(model.len(), limit, "refused before full");
                        refused += 1;
                    }
                },
                Op::Find(a, b) => {
                    let got = t.find(&(a, b)).map(|e| e.v.load(Relaxed));
                    prop_assert_eq!(got, model.get(&(a, b)).copied());
                }
                Op::Clear => {
                    t.clear_one(|e| e.v.store(0, Relaxed));
                    model.clear();
                }
            }
        }
        let mut got = HashMap::new();
        t.for_each(|_, e| {
            got.insert((e.a.load(Relaxed), e.b.load(Relaxed)), e.v.load(Relaxed));
        });
        prop_assert_eq!(&got, &model);
        prop_assert_eq!(t.len(), model.len());
        prop_assert_eq!(t.overflow(), refused);
    }

    /// Many writers (here taking turns), one-word keys: the same, without clearing.
    #[test]
    fn many_writers_agree_with_a_hashmap(
        limit in 1usize..=64,
        keys in proptest::collection::vec(1..200u64, 1..400),
    ) {
        let mem: Vec<Word> = (0..64).map(|_| Word::default()).collect();
        let t = FixedTable::new(&mem, 64, limit);
        let mut model: HashMap<u64, u64> = HashMap::new();
        for k in keys {
            match t.insert(&k, |_| {}) {
                Some((_, e)) => {
                    e.v.fetch_add(1, Relaxed);
                    *model.entry(k).or_default() += 1;
                }
                None => {
                    prop_assert!(!model.contains_key(&k), "a kept key refused");
                    prop_assert_eq!(model.len(), limit, "refused before full");
                }
            }
        }
        let mut got = HashMap::new();
        t.for_each(|_, e| {
            got.insert(e.k.load(Relaxed), e.v.load(Relaxed));
        });
        prop_assert_eq!(&got, &model);
        prop_assert_eq!(t.len(), model.len());
    }

    /// The registry: an address keeps its slot while registered (past any tombstone), a retired
    /// one is gone, no two addresses share a slot, and a lookup is refused (and counted) only
    /// when 15/16 of the slots are in use.
    #[test]
    fn registry_agrees_with_a_hashmap(
        space in prop::sample::select(vec![8u64, 40, 100]),
        ops in proptest::collection::vec(reg_op(100), 1..600),
    ) {
        let mem: Vec<Slot> = (0..64).map(|_| Slot::new()).collect();
        let r = Registry::new(&mem);
        let usable = 60;
        let mut model: HashMap<u64, u32> = HashMap::new();
        let mut refused = 0;
        for o in ops {
            match o {
                RegOp::Lookup(a) => {
                    let addr = (a % space + 1) * 64;
                    match r.lookup(addr, LockKind::Mutex) {
                        Some((i, s)) => {
                            prop_assert_eq!(s.addr(), addr);
                            match model.get(&addr) {
                                Some(&j) => prop_assert_eq!(i, j, "an address moved"),
                                None => {
                                    prop_assert!(
                                        !model.values().any(|&j| j == i),
                                        "two addresses in one slot"
                                    );
                                    model.insert(addr, i);
                                }
                            }
                        }
                        None => {
                            prop_assert!(!model.contains_key(&addr), "a registered address refused");
                            prop_assert_eq!(model.len(), usable, "refused before full");
                            refused += 1;
                        }
                    }
                }
                RegOp::Find(a) => {
                    let addr = (a % space + 1) * 64;
                    prop_assert_eq!(r.find(addr).map(|(i, _)| i), model.get(&addr).copied());
                }
                RegOp::Retire(a) => {
                    let addr = (a % space + 1) * 64;
                    r.retire(addr);
                    model.remove(&addr);
                    prop_assert!(r.find(addr).is_none());
                }
            }
        }
        let got: HashMap<u64, u32> = r.iter().map(|(i, s)| (s.addr(), i)).collect();
        prop_assert_eq!(&got, &model);
        prop_assert_eq!(r.len(), model.len());
        prop_assert_eq!(r.refused_lookups(), refused);
    }
}

fn mem<E: Default>(n: usize) -> Vec<E> {
    (0..n).map(|_| E::default()).collect()
}

#[test]
fn keys_with_one_tag_are_told_apart_and_found_again() {
    let m = mem::<Pair>(16);
    let t = FixedTable::new(&m, 16, 16);
    let a = t.insert_one(&(5, 1), |e| e.v.store(10, Relaxed)).unwrap().1;
    let b = t.insert_one(&(5, 2), |e| e.v.store(20, Relaxed)).unwrap().1;
    assert!(!std::ptr::eq(a, b));
    assert_eq!(t.find(&(5, 1)).unwrap().v.load(Relaxed), 10);
    assert_eq!(t.find(&(5, 2)).unwrap().v.load(Relaxed), 20);
    assert!(std::ptr::eq(t.insert_one(&(5, 1), |_| panic!("present")).unwrap().1, a));
    assert!(t.find(&(5, 3)).is_none() && t.find(&(6, 1)).is_none());
    assert_eq!((t.len(), t.overflow()), (2, 0));
}

#[test]
fn the_fill_limit_and_the_probe_limit_refuse_and_count() {
    let m = mem::<Pair>(16);
    let t = FixedTable::new(&m, 16, 14);
    let ok = (1..=20u64).filter(|&k| t.insert_one(&(k, 0), |_| {}).is_some()).count();
    assert_eq!((ok, t.len(), t.overflow()), (14, 14, 6));
    // Every key starts at one entry: the probe limit (4) admits four of them.
    let m = mem::<colliding::Word>(16);
    let t = FixedTable::new(&m, 4, 16);
    let ok = (1..=6u64).filter(|&k| t.insert(&k, |_| {}).is_some()).count();
    assert_eq!((ok, t.overflow()), (4, 2));
    assert!((1..=4u64).all(|k| t.find(&k).is_some()));
    assert!(t.find(&5).is_none());
}

/// Tombstones are the registry's (`Entry::TOMBSTONES`): in a table without them the word 1 is a
/// key like any other, found, listed and kept.
#[test]
fn without_tombstones_one_is_a_key() {
    let m = mem::<Word>(8);
    let t = FixedTable::new(&m, 8, 8);
    let (i, _) = t.insert(&1, |e| e.v.store(7, Relaxed)).unwrap();
    assert_eq!(t.find_index(&1).map(|(j, e)| (j, e.v.load(Relaxed))), Some((i, 7)));
    assert!(t.at(i).is_some());
    assert_eq!(t.iter().map(|(j, _)| j).collect::<Vec<_>>(), vec![i]);
    assert_eq!(t.insert(&1, |_| panic!("present")).unwrap().0, i);
}

#[test]
fn capacity_is_a_power_of_two_and_an_empty_table_refuses() {
    let m = mem::<Word>(100);
    assert_eq!(FixedTable::new(&m, 8, 100).capacity(), 64);
    let t = FixedTable::new(&m[..0], 8, 8);
    assert!(t.insert(&1, |_| {}).is_none() && t.find(&1).is_none());
    assert_eq!(t.overflow(), 1);
}

#[test]
fn clear_empties_and_entries_start_afresh() {
    let m = mem::<Pair>(8);
    let t = FixedTable::new(&m, 8, 8);
    t.insert_one(&(1, 1), |e| e.v.store(5, Relaxed)).unwrap();
    t.clear_one(|e| e.v.store(0, Relaxed));
    assert!(t.is_empty() && t.find(&(1, 1)).is_none());
    let mut n = 0;
    t.for_each(|_, _| n += 1);
    assert_eq!(n, 0);
    assert_eq!(t.insert_one(&(1, 1), |_| {}).unwrap().1.v.load(Relaxed), 0);
}

#[test]
fn many_writers_get_one_entry_per_key() {
    let m = mem::<Word>(1024);
    let t = FixedTable::new(&m, 1024, 1024);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for k in 1..=500u64 {
                    t.insert(&k, |_| {}).unwrap().1.v.fetch_add(1, Relaxed);
                }
            });
        }
    });
    assert_eq!(t.len(), 500);
    let mut n = 0;
    t.for_each(|_, e| {
        assert_eq!(e.v.load(Relaxed), 4);
        n += 1
    });
    assert_eq!(n, 500);
}

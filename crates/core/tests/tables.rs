//! Property tests against `HashMap` of the fixed concurrent table (`core::fixed`) and of the
//! lock registry (`core::registry`): under any sequence of operations they hold what the map
//! holds, refuse only when the map says they are full, and count what they refuse.

use lockmeter_core::LockKind;
use lockmeter_core::fixed::{Entry, FixedTable};
use lockmeter_core::registry::{Registry, Slot};
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// A two-word key whose first word (the tag) takes few values: many keys share a tag.
#[derive(Debug, Default)]
struct Pair {
    a: AtomicU64,
    b: AtomicU64,
    v: AtomicU64,
}

impl Entry for Pair {
    type Key = (u64, u64);
    type Word = AtomicU64;
    const TAG_IS_KEY: bool = false;
    fn word(&self) -> &AtomicU64 {
        &self.a
    }
    fn tag(k: &(u64, u64)) -> u64 {
        k.0
    }
    fn matches(&self, k: &(u64, u64)) -> bool {
        self.b.load(Relaxed) == k.1
    }
    fn write(&self, k: &(u64, u64)) {
        self.b.store(k.1, Relaxed);
        self.v.store(0, Relaxed);
    }
}

/// A one-word key (many writers).
#[derive(Debug, Default)]
struct Word {
    k: AtomicU64,
    v: AtomicU64,
}

impl Entry for Word {
    type Key = u64;
    type Word = AtomicU64;
    const TAG_IS_KEY: bool = true;
    fn word(&self) -> &AtomicU64 {
        &self.k
    }
    fn tag(k: &u64) -> u64 {
        *k
    }
    fn matches(&self, _: &u64) -> bool {
        true
    }
    fn write(&self, _: &u64) {
        self.v.store(0, Relaxed);
    }
}

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

//! The table's tests: records, histograms, growth, the memory cap.

use super::*;
use std::collections::HashMap;

#[test]
fn insert_find_and_iterate() {
    let mem = HeapMemory::new(usize::MAX);
    let t = Table::new(&mem, 16);
    for k in 1..=100u64 {
        t.get(k, k * 7).unwrap().stats.acquisitions.add(k);
    }
    for k in 1..=100u64 {
        assert_eq!(t.get(k, k * 7).unwrap().stats.acquisitions.get(), k);
    }
    assert_eq!(t.len(), 100);
    assert_eq!(t.capacity(), 16 + 32 + 64);
    let sum: u64 = t.iter().map(|(_, _, s)| s.acquisitions.get()).sum();
    assert_eq!(sum, 5050);
    let order: Vec<u64> = t.iter().map(|(k, _, _)| k).collect();
    assert_eq!(order, (1..=100).collect::<Vec<_>>(), "insertion order");
    assert!(t.get(0, 1).is_none());
}

#[test]
fn records_never_move_and_keep_their_histograms() {
    let mem = HeapMemory::new(usize::MAX);
    let t = Table::new(&mem, 16);
    let first = t.get(1, 1).unwrap() as *const Entry;
    t.get(1, 1).unwrap().stats.record_wait(1000);
    t.get(1, 1).unwrap().stats.record_hold(5);
    for k in 2..=10_000u64 {
        t.get(k, 0).unwrap();
    }
    let e = t.get(1, 1).unwrap();
    assert_eq!(e as *const Entry, first, "growth moved a record");
    let s = e.stats.snapshot();
    assert_eq!(s.wait_hist[crate::hist::bucket(1000)], 1);
    assert_eq!(s.hold_hist[crate::hist::bucket(5)], 1);
    assert_eq!(t.len(), 10_000);
}

#[test]
fn a_pairs_fields_are_on_the_records_first_line() {
    let mem = HeapMemory::new(usize::MAX);
    let t = Table::new(&mem, 16);
    for k in 1..=100u64 {
        let e = t.get(k, 7).unwrap();
        let base = e as *const Entry as usize;
        assert_eq!(base % 64, 0, "record {k} is not on a line of its own");
        let st = &e.stats;
        // What an uncontended acquisition and a timed release write.
        let hot = [
            &st.acquisitions as *const _ as usize,
            &st.holds_timed as *const _ as usize,
            &st.hold_ns_total as *const _ as usize,
            &st.hold_ns_max as *const _ as usize,
            st.hold_hist() as *const _ as usize + 24,
        ];
        assert!(hot.iter().all(|&a| a >= base && a + 8 <= base + 64), "record {k}");
    }
}

#[test]
fn promoted_histograms_of_every_record_stay_its_own() {
    // Records across several segments, each promoting both histograms (values 40 buckets
    // apart) with counts of its own: each snapshot has exactly its values.
    let mem = HeapMemory::new(usize::MAX);
    let t = Table::new(&mem, 16);
    for k in 1..=300u64 {
        let st = &t.get(k, 3).unwrap().stats;
        for i in 0..k % 7 + 1 {
            st.record_wait(1 << (i % 2 * 40));
            st.record_hold(3 << (i % 2 * 40));
        }
    }
    for k in 1..=300u64 {
        let s = t.get(k, 3).unwrap().stats.snapshot();
        let n = k % 7 + 1;
        let (lo, hi) = (n.div_ceil(2), n / 2);
        let mut want = [0u64; crate::hist::BUCKETS];
        want[crate::hist::bucket(1)] += lo;
        want[crate::hist::bucket(1 << 40)] += hi;
        assert_eq!(s.wait_hist, want, "record {k}");
        let mut want = [0u64; crate::hist::BUCKETS];
        want[crate::hist::bucket(3)] += lo;
        want[crate::hist::bucket(3 << 40)] += hi;
        assert_eq!(s.hold_hist, want, "record {k}");
    }
}

#[test]
fn a_refused_mapping_is_refused_not_corrupting() {
    // Room for the index (first two sizes) and the first segment, not the second.
    let seg0 = seg_layout(16, 0).3;
    let mem = HeapMemory::new(seg0 + page_up(64 * 8));
    let t = Table::new(&mem, 16);
    let mut ok = 0;
    for k in 1..=1000u64 {
        if let Some(e) = t.get(k, 0) {
            e.stats.acquisitions.add(1);
            ok += 1;
        }
    }
    assert_eq!(ok, 16);
    assert_eq!(t.len(), 16);
    // Existing keys are still found and intact.
    let found = (1..=1000u64).filter(|&k| t.get(k, 0).is_some()).count();
    assert_eq!(found, 16);
    assert_eq!(t.iter().map(|(_, _, s)| s.acquisitions.get()).sum::<u64>(), 16);
    assert!(mem.used() <= seg0 + page_up(64 * 8));
}

/// Charges records against a budget of `n` records.
struct Budget(HeapMemory, AtomicUsize);

// SAFETY: maps through `HeapMemory`.
unsafe impl Memory for Budget {
    fn map(&self, bytes: usize) -> *mut u8 {
        self.0.map(bytes)
    }
    unsafe fn unmap(&self, p: *mut u8, bytes: usize) {
        // SAFETY: the caller's contract.
        unsafe { self.0.unmap(p, bytes) }
    }
    fn charge(&self, bytes: usize) -> bool {
        assert_eq!(bytes, RECORD_BYTES);
        self.1.fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1)).is_ok()
    }
    fn refund(&self, bytes: usize) {
        self.1.fetch_add(bytes / RECORD_BYTES, Relaxed);
    }
}

#[test]
fn clear_gives_back_the_charge_of_its_records() {
    let mem = Budget(HeapMemory::new(usize::MAX), AtomicUsize::new(100));
    let t = Table::new(&mem, 16);
    for round in 0..3u64 {
        let kept = (1..=150u64).filter(|&k| t.get(k + round * 1000, 0).is_some()).count();
        assert_eq!(kept, 100, "round {round}: the cap holds, and a cleared table refills");
        t.clear();
    }
    assert_eq!(mem.1.load(Relaxed), 100);
}

#[test]
fn a_refused_charge_refuses_the_record_only() {
    let mem = Budget(HeapMemory::new(usize::MAX), AtomicUsize::new(100));
    let t = Table::new(&mem, 16);
    let kept = (1..=1000u64).filter(|&k| t.get(k, 0).is_some()).count();
    assert_eq!(kept, 100);
    assert_eq!((1..=1000u64).filter(|&k| t.get(k, 0).is_some()).count(), 100, "kept stay");
    assert_eq!(t.len(), 100);
}

#[test]
fn clear_empties_and_the_table_refills() {
    let mem = HeapMemory::new(usize::MAX);
    let t = Table::new(&mem, 16);
    for k in 1..=56u64 {
        t.get(k, 3).unwrap().stats.record_hold(k);
    }
    let mapped = t.mapped_bytes();
    t.clear();
    assert_eq!(t.len(), 0);
    assert_eq!(t.iter().count(), 0);
    let e = t.get(9, 4).unwrap();
    assert_eq!(e.stats.snapshot(), crate::Stats::default(), "a reused record starts at zero");
    e.stats.acquisitions.add(1);
    assert_eq!(t.iter().map(|(_, _, s)| s.acquisitions.get()).sum::<u64>(), 1);
    assert_eq!(t.mapped_bytes(), mapped, "clear keeps the memory");
}

#[test]
fn drop_returns_every_mapping() {
    let mem = HeapMemory::new(usize::MAX);
    {
        let t = Table::new(&mem, 16);
        for k in 1..=5000u64 {
            t.get(k, 0).unwrap();
        }
        assert_eq!(t.mapped_bytes(), mem.used() as u64);
    }
    assert_eq!(mem.used(), 0);
}

#[test]
fn readers_see_whole_records_while_the_writer_grows() {
    let mem = HeapMemory::new(usize::MAX);
    let t = Table::new(&mem, 16);
    std::thread::scope(|sc| {
        sc.spawn(|| {
            for k in 1..=20_000u64 {
                t.get(k, k).unwrap().stats.acquisitions.add(1);
            }
        });
        sc.spawn(|| {
            let mut last = 0;
            while last < 20_000 {
                let mut n = 0;
                for (k1, k2, _) in t.iter() {
                    assert_eq!(k1, k2, "a torn key");
                    n += 1;
                }
                assert!(n >= last, "records vanished");
                last = n;
            }
        });
    });
}

/// One step of the model test: a lookup-or-insert of `(k1, k2)`, or a `clear`.
#[derive(Debug, Clone)]
enum Op {
    Get(u64, u64),
    Clear,
}

fn op(space: u64) -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![40 => (1..=space, 0u64..3).prop_map(|(a, b)| Op::Get(a, b)), 1 => Just(Op::Clear)]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// The table agrees with a `HashMap` under any sequence of operations, with or without a
    /// cap that refuses growth: a refused key is never one it kept, and an uncapped table
    /// refuses nothing.
    #[test]
    fn agrees_with_a_hashmap(
        space in proptest::sample::select(vec![4u64, 64, 3000]),
        capped in proptest::bool::ANY,
        ops in proptest::collection::vec(op(3000), 1..4000),
    ) {
        let cap = if capped { 300_000 } else { usize::MAX };
        let mem = HeapMemory::new(cap);
        let t = Table::new(&mem, 16);
        let mut model: HashMap<(u64, u64), u64> = HashMap::new();
        for o in ops {
            match o {
                Op::Clear => {
                    t.clear();
                    model.clear();
                }
                Op::Get(a, b) => {
                    let key = (a % space + 1, b);
                    match t.get(key.0, key.1) {
                        Some(e) => {
                            e.stats.acquisitions.add(1);
                            *model.entry(key).or_default() += 1;
                        }
                        None => {
                            proptest::prop_assert!(!model.contains_key(&key), "kept key refused");
                            proptest::prop_assert!(capped, "an uncapped table refused");
                        }
                    }
                }
            }
        }
        let got: HashMap<(u64, u64), u64> =
            t.iter().map(|(a, b, st)| ((a, b), st.acquisitions.get())).collect();
        proptest::prop_assert_eq!(&got, &model);
        proptest::prop_assert_eq!(t.len(), model.len());
        proptest::prop_assert!(mem.used() <= cap);
    }
}

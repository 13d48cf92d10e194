//! Stress tests with a checked counter, and the oversubscription (no-starvation) test.
//!
//! The checked counter: two plain (non-atomic) fields written inside the critical section; a
//! thread that ever sees them differ, or a final total other than threads × iterations, proves a
//! mutual-exclusion failure. No timing is checked anywhere, except the generous deadline of the
//! starvation test.

use lock_api::{RawMutex, RawMutexTimed, RawRwLock};
use lockmeter_locks::relax::{Backoff, Delay, Park, Pause, Tight};
use lockmeter_locks::{
    Adaptive, Clh, FutexMutex, Mcs, Metered, QRwLock, QSpin, Tas, Ticket, Ttas, UnfairQ,
};
use std::cell::UnsafeCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

struct Checked {
    a: UnsafeCell<u64>,
    b: UnsafeCell<u64>,
}
// SAFETY: only accessed under the lock being tested (that is what the test checks).
unsafe impl Sync for Checked {}

impl Checked {
    fn new() -> Self {
        Checked { a: UnsafeCell::new(0), b: UnsafeCell::new(0) }
    }
    /// The critical section: must run under the lock.
    fn bump(&self) {
        // SAFETY: the caller holds the lock; a race here is what the test detects.
        unsafe {
            let a = std::ptr::read_volatile(self.a.get());
            std::hint::spin_loop();
            let b = std::ptr::read_volatile(self.b.get());
            assert_eq!(a, b, "mutual exclusion violated");
            std::ptr::write_volatile(self.a.get(), a + 1);
            std::ptr::write_volatile(self.b.get(), b + 1);
        }
    }
    fn total(&self) -> u64 {
        // SAFETY: called after all threads joined.
        unsafe { *self.a.get() }
    }
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// `threads` threads × `iters` lock/bump/unlock, one in `try_every` through `try_lock`.
fn stress<R: RawMutex + Send + Sync + 'static>(
    lock: R,
    threads: usize,
    iters: u64,
    try_every: u64,
) {
    let shared = Arc::new((lock, Checked::new()));
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            let s = shared.clone();
            std::thread::spawn(move || {
                for i in 0..iters {
                    if try_every != 0 && i % try_every == 0 {
                        while !s.0.try_lock() {
                            std::hint::spin_loop();
                        }
                    } else {
                        s.0.lock();
                    }
                    s.1.bump();
                    // SAFETY: locked just above.
                    unsafe { s.0.unlock() };
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(shared.1.total(), threads as u64 * iters);
    assert!(!shared.0.is_locked());
}

fn stress_timed<R: RawMutexTimed<Duration = Duration> + Send + Sync + 'static>(lock: R) {
    let shared = Arc::new((lock, Checked::new(), AtomicU64::new(0)));
    let threads = 4;
    let iters = 3000u64;
    let hs: Vec<_> = (0..threads)
        .map(|_| {
            let s = shared.clone();
            std::thread::spawn(move || {
                let mut done = 0;
                while done < iters {
                    if s.0.try_lock_for(Duration::from_micros(20)) {
                        s.1.bump();
                        // SAFETY: locked just above.
                        unsafe { s.0.unlock() };
                        done += 1;
                    } else {
                        s.2.fetch_add(1, Relaxed);
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(shared.1.total(), threads as u64 * iters);
    // Holding the lock, a timed attempt from another thread must time out.
    shared.0.lock();
    let s = shared.clone();
    let got =
        std::thread::spawn(move || s.0.try_lock_for(Duration::from_millis(5))).join().unwrap();
    assert!(!got, "timed lock succeeded while the lock was held");
    // SAFETY: locked above.
    unsafe { shared.0.unlock() };
}

// Spinning FIFO locks collapse when a waiter is preempted, and this machine may be shared: the
// spin locks run with threads = CPUs and fewer iterations; the parking ones with 2 × CPUs.
const SPIN_ITERS: u64 = 5_000;
const PARK_ITERS: u64 = 20_000;

#[test]
fn tas() {
    stress(Tas::<Pause>::new(), cpus(), SPIN_ITERS, 7);
    stress(Tas::<Tight>::new(), cpus(), SPIN_ITERS, 0);
    stress_timed(Tas::<Pause>::new());
}

#[test]
fn ttas() {
    stress(Ttas::<Backoff>::new(), cpus(), SPIN_ITERS, 7);
    stress(Ttas::<Delay>::new(), cpus(), SPIN_ITERS, 0);
    stress_timed(Ttas::<Backoff>::new());
}

#[test]
fn ticket() {
    stress(Ticket::<Pause>::new(), cpus(), SPIN_ITERS, 7);
}

#[test]
fn mcs() {
    stress(Mcs::<Pause>::new(), cpus(), SPIN_ITERS, 7);
    stress(Mcs::<Park>::new(), 2 * cpus(), PARK_ITERS / 4, 0);
}

#[test]
fn clh() {
    stress(Clh::<Pause>::new(), cpus(), SPIN_ITERS, 0);
    stress(Clh::<Park>::new(), 2 * cpus(), PARK_ITERS / 4, 0);
    // try_lock works on a fresh lock only, and a later one never wrongly succeeds.
    let l = Clh::<Pause>::new();
    assert!(l.try_lock());
    assert!(!l.try_lock());
    // SAFETY: locked above.
    unsafe { l.unlock() };
}

#[test]
fn qspin() {
    stress(QSpin::<Pause>::new(), cpus(), SPIN_ITERS, 7);
    stress(QSpin::<Backoff>::new(), cpus() + 1, SPIN_ITERS / 5, 0);
}

#[test]
fn unfair_q() {
    let l = Arc::new(UnfairQ::<Pause>::new());
    struct ArcLock(Arc<UnfairQ<Pause>>);
    // SAFETY: forwards to the inner lock.
    unsafe impl RawMutex for ArcLock {
        #[allow(clippy::declare_interior_mutable_const)]
        const INIT: Self = panic!("not used");
        type GuardMarker = lock_api::GuardSend;
        fn lock(&self) {
            self.0.lock()
        }
        fn try_lock(&self) -> bool {
            self.0.try_lock()
        }
        unsafe fn unlock(&self) {
            // SAFETY: forwarded contract.
            unsafe { self.0.unlock() }
        }
    }
    stress(ArcLock(l.clone()), cpus() + 2, SPIN_ITERS, 11);
    let st = l.steal_stats();
    assert!(
        st.head_acquisitions + st.steals.iter().sum::<u64>() <= (cpus() as u64 + 2) * SPIN_ITERS
    );
}

#[test]
fn futex() {
    stress(FutexMutex::new(), 2 * cpus(), PARK_ITERS, 7);
    stress_timed(FutexMutex::new());
}

#[test]
fn adaptive() {
    stress(Adaptive::new(), 2 * cpus(), PARK_ITERS, 7);
    stress(Adaptive::new(), 4 * cpus(), PARK_ITERS / 2, 0);
    stress_timed(Adaptive::new());
}

#[cfg(not(feature = "metering"))]
#[test]
fn metered_is_transparent() {
    assert_eq!(std::mem::size_of::<Metered<Adaptive>>(), std::mem::size_of::<Adaptive>());
    stress(Metered::new(Adaptive::new()), 2 * cpus(), PARK_ITERS / 2, 5);
    assert!(Metered::new(FutexMutex::new()).stats().is_empty());
}

#[cfg(feature = "metering")]
#[test]
fn metered() {
    stress(Metered::new(Adaptive::new()), 2 * cpus(), PARK_ITERS / 2, 5);
    let m = Metered::new(FutexMutex::new());
    let shared = Arc::new((m, Checked::new()));
    let hs: Vec<_> = (0..4)
        .map(|_| {
            let s = shared.clone();
            std::thread::spawn(move || {
                for _ in 0..2000 {
                    s.0.lock();
                    s.1.bump();
                    // SAFETY: locked just above.
                    unsafe { s.0.unlock() };
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let st = shared.0.stats();
    assert_eq!(st.acquisitions, 8000);
    assert_eq!(st.holds_timed, 8000);
    assert!(st.contended <= st.acquisitions);
    assert_eq!(st.wait_hist.iter().sum::<u64>(), st.contended);
    assert!(shared.0.try_lock());
    assert!(!shared.0.try_lock());
    // SAFETY: locked above.
    unsafe { shared.0.unlock() };
    let st = shared.0.stats();
    assert_eq!(st.trylock_failures, 1);
    assert_eq!(st.acquisitions, 8001);
}

#[test]
fn qrwlock() {
    let l = Arc::new((QRwLock::<Pause>::new(), Checked::new(), AtomicU64::new(0)));
    let hs: Vec<_> = (0..cpus() + 1)
        .map(|t| {
            let s = l.clone();
            std::thread::spawn(move || {
                for i in 0..SPIN_ITERS / 2 {
                    if (i + t as u64).is_multiple_of(4) {
                        s.0.lock_exclusive();
                        s.1.bump();
                        // SAFETY: locked just above.
                        unsafe { s.0.unlock_exclusive() };
                        s.2.fetch_add(1, Relaxed);
                    } else {
                        s.0.lock_shared();
                        // SAFETY: readers only read; a writer inside would be a violation.
                        let (a, b) = unsafe {
                            (
                                std::ptr::read_volatile(s.1.a.get()),
                                std::ptr::read_volatile(s.1.b.get()),
                            )
                        };
                        assert_eq!(a, b, "reader saw a writer inside");
                        // SAFETY: locked just above.
                        unsafe { s.0.unlock_shared() };
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(l.1.total(), l.2.load(Relaxed));
    assert!(l.0.try_lock_shared());
    assert!(l.0.try_lock_shared());
    assert!(!l.0.try_lock_exclusive());
    // SAFETY: two shared locks taken above.
    unsafe {
        l.0.unlock_shared();
        l.0.unlock_shared();
    }
    assert!(l.0.try_lock_exclusive());
    assert!(!l.0.try_lock_shared());
}

/// Oversubscription: threads = 4 × CPUs, each in a tight lock loop. Fails if, within a generous
/// deadline, some thread has not completed `WANT` acquisitions (it starved). Only the fair and
/// adaptive locks promise this; TAS, TTAS, futex (barging) and the unfair queued lock do not.
fn no_starvation<R: RawMutex + Send + Sync + 'static>(name: &str, lock: R) {
    const WANT: u64 = 20;
    let deadline = Duration::from_secs(40);
    let threads = 4 * cpus();
    let shared = Arc::new((lock, Checked::new(), AtomicBool::new(false)));
    let counts: Arc<Vec<AtomicU64>> = Arc::new((0..threads).map(|_| AtomicU64::new(0)).collect());
    let hs: Vec<_> = (0..threads)
        .map(|t| {
            let s = shared.clone();
            let c = counts.clone();
            std::thread::spawn(move || {
                while !s.2.load(Relaxed) {
                    s.0.lock();
                    s.1.bump();
                    // SAFETY: locked just above.
                    unsafe { s.0.unlock() };
                    c[t].fetch_add(1, Relaxed);
                }
            })
        })
        .collect();
    let start = Instant::now();
    let ok = loop {
        if counts.iter().all(|c| c.load(Relaxed) >= WANT) {
            break true;
        }
        if start.elapsed() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // Let the slow ones run a little longer, so the sum check below sees activity.
    shared.2.store(true, Relaxed);
    for h in hs {
        h.join().unwrap();
    }
    let snap: Vec<u64> = counts.iter().map(|c| c.load(Relaxed)).collect();
    assert!(
        ok,
        "{name}: a thread starved at {threads} threads on {} CPUs: counts {snap:?}",
        cpus()
    );
    assert_eq!(shared.1.total(), snap.iter().sum::<u64>());
}

#[test]
fn oversubscription_adaptive() {
    no_starvation("adaptive", Adaptive::new());
}

#[test]
fn oversubscription_fair_parking() {
    no_starvation("mcs:park", Mcs::<Park>::new());
    no_starvation("clh:park", Clh::<Park>::new());
}

#[test]
fn oversubscription_fair_spinning() {
    no_starvation("ticket", Ticket::<Pause>::new());
    no_starvation("mcs", Mcs::<Pause>::new());
    no_starvation("clh", Clh::<Pause>::new());
    no_starvation("qspin", QSpin::<Pause>::new());
}

#[test]
fn oversubscription_qrwlock_writers() {
    struct W(QRwLock<Pause>);
    // SAFETY: forwards to the write side of the inner lock.
    unsafe impl RawMutex for W {
        #[allow(clippy::declare_interior_mutable_const)]
        const INIT: Self = W(QRwLock::new());
        type GuardMarker = lock_api::GuardSend;
        fn lock(&self) {
            self.0.lock_exclusive()
        }
        fn try_lock(&self) -> bool {
            self.0.try_lock_exclusive()
        }
        unsafe fn unlock(&self) {
            // SAFETY: forwarded contract.
            unsafe { self.0.unlock_exclusive() }
        }
    }
    no_starvation("qrwlock", W(QRwLock::new()));
}

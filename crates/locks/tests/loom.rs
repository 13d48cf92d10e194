//! Loom models of every algorithm: mutual exclusion (loom's `UnsafeCell` reports any
//! concurrent access, and the final count is checked) and no lost wake-up (a sleeper that is
//! never woken leaves every thread blocked, which loom reports as a deadlock).
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p lockmeter-locks --release --test loom`
//! (preemption bound 2 unless `LOOM_MAX_PREEMPTIONS` says otherwise).
#![cfg(loom)]

use lock_api::{RawMutex, RawRwLock};
use lockmeter_locks::relax::{Backoff, Park, Pause, Tight};
use lockmeter_locks::{Adaptive, Clh, FutexMutex, Mcs, QRwLock, QSpin, Tas, Ticket, Ttas, UnfairQ};
use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::thread;

fn builder() -> loom::model::Builder {
    builder_with(2)
}

/// A model builder with preemption bound `preemptions` unless `LOOM_MAX_PREEMPTIONS` is set.
fn builder_with(preemptions: usize) -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    if std::env::var("LOOM_MAX_PREEMPTIONS").is_err() {
        b.preemption_bound = Some(preemptions);
    }
    if std::env::var("LOOM_MAX_BRANCHES").is_err() {
        b.max_branches = 10_000;
    }
    b
}

fn work<R: RawMutex>(s: &(R, UnsafeCell<usize>), iters: usize) {
    for _ in 0..iters {
        s.0.lock();
        // SAFETY: under the lock; loom flags any concurrent access.
        s.1.with_mut(|p| unsafe { *p += 1 });
        // SAFETY: locked just above.
        unsafe { s.0.unlock() };
    }
}

/// `threads` threads (the model's main thread included) each take the lock `iters` times and
/// increment a loom cell inside.
fn model<R: RawMutex + Send + Sync + 'static>(mk: fn() -> R, threads: usize, iters: usize) {
    model_with(builder(), mk, threads, iters)
}

/// Three threads on a pure spin lock (two spinners): with a preemption bound of 2, the two
/// spinners yielding to each other make executions longer than loom's branch bound (loom cannot
/// tell that the holder will run), so these models use a bound of 1.
fn model_spin3<R: RawMutex + Send + Sync + 'static>(mk: fn() -> R) {
    model_with(builder_with(1), mk, 3, 1)
}

fn model_with<R: RawMutex + Send + Sync + 'static>(
    b: loom::model::Builder,
    mk: fn() -> R,
    threads: usize,
    iters: usize,
) {
    b.check(move || {
        let s = Arc::new((mk(), UnsafeCell::new(0usize)));
        let hs: Vec<_> = (1..threads)
            .map(|_| {
                let s = s.clone();
                thread::spawn(move || work(&s, iters))
            })
            .collect();
        work(&s, iters);
        for h in hs {
            h.join().unwrap();
        }
        // SAFETY: every thread joined.
        let n = s.1.with(|p| unsafe { *p });
        assert_eq!(n, threads * iters);
    });
}

#[test]
fn tas_2x2() {
    model(Tas::<Pause>::new, 2, 2);
}

#[test]
fn tas_3x1() {
    model_spin3(Tas::<Tight>::new);
}

#[test]
fn ttas_2x2() {
    model(Ttas::<Backoff>::new, 2, 2);
}

#[test]
fn ttas_3x1() {
    model_spin3(Ttas::<Backoff>::new);
}

#[test]
fn ticket_2x2() {
    model(Ticket::<Pause>::new, 2, 2);
}

#[test]
fn ticket_3x1() {
    model_spin3(Ticket::<Pause>::new);
}

#[test]
fn mcs_2x2() {
    model(Mcs::<Pause>::new, 2, 2);
}

#[test]
fn mcs_3x1() {
    model(Mcs::<Pause>::new, 3, 1);
}

#[test]
fn mcs_park_2x2() {
    model(Mcs::<Park>::new, 2, 2);
}

#[test]
fn mcs_park_3x1() {
    model(Mcs::<Park>::new, 3, 1);
}

#[test]
fn clh_2x2() {
    model(Clh::<Pause>::new, 2, 2);
}

#[test]
fn clh_3x1() {
    model(Clh::<Pause>::new, 3, 1);
}

#[test]
fn clh_park_2x2() {
    model(Clh::<Park>::new, 2, 2);
}

#[test]
fn clh_park_3x1() {
    model(Clh::<Park>::new, 3, 1);
}

#[test]
fn qspin_2x2() {
    model(QSpin::<Pause>::new, 2, 2);
}

#[test]
fn qspin_3x1() {
    model_spin3(QSpin::<Pause>::new);
}

#[test]
fn unfair_q_2x2() {
    model(UnfairQ::<Pause>::new, 2, 2);
}

#[test]
fn unfair_q_3x1() {
    model(UnfairQ::<Pause>::new, 3, 1);
}

#[test]
fn futex_2x2() {
    model(FutexMutex::new, 2, 2);
}

#[test]
fn futex_3x1() {
    model(FutexMutex::new, 3, 1);
}

#[test]
fn adaptive_2x2() {
    model(Adaptive::new, 2, 2);
}

#[test]
fn adaptive_3x1() {
    model(Adaptive::new, 3, 1);
}

#[test]
fn qrwlock() {
    builder().check(|| {
        let s = Arc::new((QRwLock::<Pause>::new(), UnsafeCell::new(0usize)));
        let w = {
            let s = s.clone();
            thread::spawn(move || {
                s.0.lock_exclusive();
                // SAFETY: write-locked.
                s.1.with_mut(|p| unsafe { *p += 1 });
                // SAFETY: locked just above.
                unsafe { s.0.unlock_exclusive() };
            })
        };
        let r = {
            let s = s.clone();
            thread::spawn(move || {
                s.0.lock_shared();
                // SAFETY: read-locked: no writer inside.
                let v = s.1.with(|p| unsafe { *p });
                assert!(v <= 2);
                // SAFETY: locked just above.
                unsafe { s.0.unlock_shared() };
            })
        };
        s.0.lock_exclusive();
        // SAFETY: write-locked.
        s.1.with_mut(|p| unsafe { *p += 1 });
        // SAFETY: locked just above.
        unsafe { s.0.unlock_exclusive() };
        w.join().unwrap();
        r.join().unwrap();
        // SAFETY: joined.
        assert_eq!(s.1.with(|p| unsafe { *p }), 2);
    });
}

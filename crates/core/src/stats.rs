//! Per-record lock statistics.
//!
//! A record is one (thread, lock, call site, mode): the finest grain a collector keeps. Every
//! coarser view (per lock, per site, per thread, the totals) is a sum of records, so the report
//! derives them all from one table and they always agree.

use crate::Counter;
use crate::hist::{BUCKETS, LiveHist, Log2Hist};
use core::sync::atomic::{AtomicUsize, Ordering::*};

/// Bytes from a record's full wait histogram to its full hold histogram, for arrays of `n`
/// (the record table lays them out so: see [`LiveStats::attach`]).
pub const fn hold_offset(n: usize) -> usize {
    crate::memory::page_up(n * size_of::<Log2Hist>())
}

/// What kind of lock a record belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum LockKind {
    /// `pthread_mutex_t` (any type: normal, recursive, error-checking, robust, PI).
    Mutex = 1,
    /// `pthread_rwlock_t`.
    RwLock = 2,
    /// `pthread_spinlock_t`.
    SpinLock = 3,
    /// A lock of the lockmeter lock library, metered by `Metered<L>`.
    Library = 4,
    /// A POSIX unnamed semaphore (`sem_t`: `sem_wait` / `sem_post`), which is also what CPython's
    /// `threading.Lock` is.
    Semaphore = 5,
    /// A futex word of any program, seen by the kernel collector (its waits in the kernel).
    Futex = 6,
    /// A kernel spinlock (`spinlock_t`, `raw_spinlock_t`).
    KernelSpinlock = 7,
    /// A kernel reader-writer spinlock (`rwlock_t`).
    KernelRwlock = 8,
    /// A kernel `struct mutex`.
    KernelMutex = 9,
    /// A kernel reader-writer semaphore (`struct rw_semaphore`, e.g. `mmap_lock`).
    KernelRwsem = 10,
    /// A kernel real-time mutex (`struct rt_mutex`).
    KernelRtMutex = 11,
    /// A kernel per-CPU reader-writer semaphore.
    KernelPercpuRwsem = 12,
    /// A kernel counting semaphore (`struct semaphore`).
    KernelSemaphore = 13,
    /// A Go `sync.Mutex`, seen by the kernel collector's uprobes on the Go runtime (its waits in
    /// the runtime's semaphore).
    GoMutex = 14,
    /// A Go `sync.RWMutex` (read waits, and write waits for readers or another writer).
    GoRwMutex = 15,
}

/// Every lock kind, in code order.
pub const LOCK_KINDS: [LockKind; 15] = [
    LockKind::Mutex,
    LockKind::RwLock,
    LockKind::SpinLock,
    LockKind::Library,
    LockKind::Semaphore,
    LockKind::Futex,
    LockKind::KernelSpinlock,
    LockKind::KernelRwlock,
    LockKind::KernelMutex,
    LockKind::KernelRwsem,
    LockKind::KernelRtMutex,
    LockKind::KernelPercpuRwsem,
    LockKind::KernelSemaphore,
    LockKind::GoMutex,
    LockKind::GoRwMutex,
];

impl LockKind {
    /// The kind from its numeric code.
    pub fn from_u8(v: u8) -> Option<Self> {
        LOCK_KINDS.into_iter().find(|k| *k as u8 == v)
    }
    /// Where locks of this kind are seen from: `preload` (the LD_PRELOAD collector), `futex`
    /// and `kernel` (the eBPF collector), `go` (the eBPF collector's uprobes on the Go runtime),
    /// `library` (`Metered<L>` in a program).
    pub fn origin(self) -> &'static str {
        match self {
            LockKind::Mutex | LockKind::RwLock | LockKind::SpinLock | LockKind::Semaphore => {
                "preload"
            }
            LockKind::Library => "library",
            LockKind::Futex => "futex",
            LockKind::GoMutex | LockKind::GoRwMutex => "go",
            _ => "kernel",
        }
    }
    /// The name used in reports and JSON: `mutex`, `rwlock`, `spinlock`, `library`, `semaphore`,
    /// `futex`, `kernel-spinlock`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            LockKind::Mutex => "mutex",
            LockKind::RwLock => "rwlock",
            LockKind::SpinLock => "spinlock",
            LockKind::Library => "library",
            LockKind::Semaphore => "semaphore",
            LockKind::Futex => "futex",
            LockKind::KernelSpinlock => "kernel-spinlock",
            LockKind::KernelRwlock => "kernel-rwlock",
            LockKind::KernelMutex => "kernel-mutex",
            LockKind::KernelRwsem => "kernel-rwsem",
            LockKind::KernelRtMutex => "kernel-rtmutex",
            LockKind::KernelPercpuRwsem => "kernel-percpu-rwsem",
            LockKind::KernelSemaphore => "kernel-semaphore",
            LockKind::GoMutex => "go-mutex",
            LockKind::GoRwMutex => "go-rwmutex",
        }
    }
}

/// How a lock was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Mode {
    /// Exclusive acquisition of a mutex or spinlock.
    Exclusive = 0,
    /// Shared (read) acquisition of a rwlock.
    Read = 1,
    /// Exclusive (write) acquisition of a rwlock.
    Write = 2,
}

impl Mode {
    /// The mode from its numeric code.
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => Mode::Exclusive,
            1 => Mode::Read,
            2 => Mode::Write,
            _ => return None,
        })
    }
    /// `exclusive`, `read` or `write`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Exclusive => "exclusive",
            Mode::Read => "read",
            Mode::Write => "write",
        }
    }
}

/// Statistics of one record, plain and mergeable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stats {
    /// Successful acquisitions (blocking, timed and successful trylocks; condvar re-acquisitions).
    pub acquisitions: u64,
    /// Acquisitions whose first attempt found the lock held.
    pub contended: u64,
    /// Trylocks that failed (EBUSY), and timed locks that timed out.
    pub trylock_failures: u64,
    /// Total time from first attempt to acquisition, over contended acquisitions (ns).
    pub wait_ns_total: u64,
    /// Longest such wait (ns).
    pub wait_ns_max: u64,
    /// Total hold time over timed holds (ns).
    pub hold_ns_total: u64,
    /// Longest hold (ns).
    pub hold_ns_max: u64,
    /// Holds that were timed (all of them with full timing, a sample when sampled, none when off).
    pub holds_timed: u64,
    /// Acquisitions by a thread other than the previous owner (exclusive and write modes).
    pub owner_changes: u64,
    /// FreeBSD `cnt_hold`: times the lock was held from here while another thread wanted it.
    pub cnt_hold: u64,
    /// FreeBSD `cnt_lock`: times an attempt from here found the lock held.
    pub cnt_lock: u64,
    /// `pthread_cond_*wait` calls that released and re-acquired the lock here.
    pub cond_waits: u64,
    /// Time asleep in those calls (ns): condvar wait, kept apart from lock wait.
    pub cond_wait_ns: u64,
    /// Log2 histogram of wait time (ns), contended acquisitions only.
    pub wait_hist: [u64; BUCKETS],
    /// Log2 histogram of hold time (ns), timed holds only.
    pub hold_hist: [u64; BUCKETS],
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            acquisitions: 0,
            contended: 0,
            trylock_failures: 0,
            wait_ns_total: 0,
            wait_ns_max: 0,
            hold_ns_total: 0,
            hold_ns_max: 0,
            holds_timed: 0,
            owner_changes: 0,
            cnt_hold: 0,
            cnt_lock: 0,
            cond_waits: 0,
            cond_wait_ns: 0,
            wait_hist: [0; BUCKETS],
            hold_hist: [0; BUCKETS],
        }
    }
}

impl Stats {
    /// Adds `o` into `self`: sums, maxima and histograms.
    pub fn merge(&mut self, o: &Stats) {
        self.acquisitions += o.acquisitions;
        self.contended += o.contended;
        self.trylock_failures += o.trylock_failures;
        self.wait_ns_total += o.wait_ns_total;
        self.wait_ns_max = self.wait_ns_max.max(o.wait_ns_max);
        self.hold_ns_total += o.hold_ns_total;
        self.hold_ns_max = self.hold_ns_max.max(o.hold_ns_max);
        self.holds_timed += o.holds_timed;
        self.owner_changes += o.owner_changes;
        self.cnt_hold += o.cnt_hold;
        self.cnt_lock += o.cnt_lock;
        self.cond_waits += o.cond_waits;
        self.cond_wait_ns += o.cond_wait_ns;
        for (a, b) in self.wait_hist.iter_mut().zip(o.wait_hist.iter()) {
            *a += b;
        }
        for (a, b) in self.hold_hist.iter_mut().zip(o.hold_hist.iter()) {
            *a += b;
        }
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.acquisitions == 0 && self.trylock_failures == 0 && self.cond_waits == 0
    }
}

/// The live, single-writer form of [`Stats`], updated on the hot path.
///
/// Only the owning thread writes; any thread may [`snapshot`](LiveStats::snapshot) it. The two
/// histograms are compact [`LiveHist`]s inside the record (32 bytes each), promoted to full
/// histograms that live apart ([`LiveStats::attach`]: one word for both) only when their
/// values do not fit, so that the full histograms' memory (most of a record's size at most) is
/// touched only by the records that need it (see [`crate::table`]). Without full histograms
/// attached, values still count in the totals and maxima, and in the compact histograms while
/// they fit. `cnt_lock` is not kept: it is `contended + trylock_failures` (the two ways an attempt
/// finds the lock held).
///
/// The fields are in the order of how often the hooks touch them: what every acquisition and
/// every timed release writes (`acquisitions`, `holds_timed`, `hold_ns_total`, `hold_ns_max` and
/// the compact hold histogram's counts) fills the first 64 bytes, so that a record placed on a
/// cache line (`table::Entry`, 192 bytes, is 64-byte aligned) costs an uncontended pair one
/// line; the pointer to the full histograms (read once one is promoted), the owner changes, the
/// wait figures and the rest follow.
#[derive(Debug, Default)]
#[repr(C)]
pub struct LiveStats {
    /// See [`Stats::acquisitions`].
    pub acquisitions: Counter,
    /// See [`Stats::holds_timed`].
    pub holds_timed: Counter,
    /// See [`Stats::hold_ns_total`].
    pub hold_ns_total: Counter,
    /// See [`Stats::hold_ns_max`].
    pub hold_ns_max: Counter,
    hold_hist: LiveHist,
    /// The full wait histogram's address, with log2 of its array's length in the top byte (the
    /// hold histogram lies [`hold_offset`] of that length after it); 0 when none are attached.
    full: AtomicUsize,
    /// See [`Stats::owner_changes`].
    pub owner_changes: Counter,
    /// See [`Stats::contended`].
    pub contended: Counter,
    /// See [`Stats::trylock_failures`].
    pub trylock_failures: Counter,
    /// See [`Stats::wait_ns_total`].
    pub wait_ns_total: Counter,
    /// See [`Stats::wait_ns_max`].
    pub wait_ns_max: Counter,
    /// See [`Stats::cnt_hold`].
    pub cnt_hold: Counter,
    /// See [`Stats::cond_waits`].
    pub cond_waits: Counter,
    /// See [`Stats::cond_wait_ns`].
    pub cond_wait_ns: Counter,
    wait_hist: LiveHist,
}

/// The hot fields fill the record's first line: the compact hold counts end at byte 64.
const _: () = assert!(
    core::mem::offset_of!(LiveStats, hold_hist) + size_of::<LiveHist>() == 64
        && size_of::<LiveStats>() == 168
);

impl LiveStats {
    /// Empty statistics.
    pub const fn new() -> Self {
        LiveStats {
            acquisitions: Counter::new(),
            holds_timed: Counter::new(),
            hold_ns_total: Counter::new(),
            hold_ns_max: Counter::new(),
            hold_hist: LiveHist::new(),
            full: AtomicUsize::new(0),
            owner_changes: Counter::new(),
            contended: Counter::new(),
            trylock_failures: Counter::new(),
            wait_ns_total: Counter::new(),
            wait_ns_max: Counter::new(),
            cnt_hold: Counter::new(),
            cond_waits: Counter::new(),
            cond_wait_ns: Counter::new(),
            wait_hist: LiveHist::new(),
        }
    }

    /// Gives the record the full wait histogram `wait` its compact one is promoted to, an entry
    /// of an array of `n` (a power of two); its full hold histogram is the entry at the same index
    /// of the array that starts [`hold_offset`]`(n)` bytes after that one. Single writer only.
    ///
    /// # Safety
    /// Both point at zeroed histograms that outlive `self` and that only `self`'s writer writes.
    pub unsafe fn attach(&self, wait: *const Log2Hist, n: usize) {
        debug_assert!(n.is_power_of_two() && (wait as usize) >> 56 == 0);
        let word = wait.expose_provenance() | (n.trailing_zeros() as usize) << 56;
        // Release: a reader that sees the word sees the (zeroed) histograms behind it.
        self.full.store(word, Release);
    }

    /// The full histogram `i` (0 wait, 1 hold), if attached.
    #[inline(always)]
    fn full(&self, i: usize) -> Option<&Log2Hist> {
        let word = self.full.load(Acquire);
        if word == 0 {
            return None;
        }
        let wait = word & ((1 << 56) - 1);
        let at = if i == 0 { wait } else { wait + hold_offset(1 << (word >> 56)) };
        // SAFETY: attached by `attach`, whose caller promised both histograms outlive `self`.
        Some(unsafe { &*core::ptr::with_exposed_provenance::<Log2Hist>(at) })
    }

    /// The wait histogram.
    #[inline(always)]
    pub fn wait_hist(&self) -> &LiveHist {
        &self.wait_hist
    }

    /// The hold histogram.
    #[inline(always)]
    pub fn hold_hist(&self) -> &LiveHist {
        &self.hold_hist
    }

    /// Records a contended wait of `ns`.
    #[inline(always)]
    pub fn record_wait(&self, ns: u64) {
        self.contended.add(1);
        self.wait_ns_total.add(ns);
        self.wait_ns_max.max(ns);
        self.wait_hist.record(ns, || self.full(0));
    }

    /// Records a timed hold of `ns`.
    #[inline(always)]
    pub fn record_hold(&self, ns: u64) {
        self.holds_timed.add(1);
        self.hold_ns_total.add(ns);
        self.hold_ns_max.max(ns);
        self.hold_hist.record(ns, || self.full(1));
    }

    /// Adds `o` to these statistics (totals add up, maxima take the larger). Single writer (of
    /// `self`) only.
    pub fn absorb(&self, o: &LiveStats) {
        self.acquisitions.add(o.acquisitions.get());
        self.contended.add(o.contended.get());
        self.trylock_failures.add(o.trylock_failures.get());
        self.wait_ns_total.add(o.wait_ns_total.get());
        self.wait_ns_max.max(o.wait_ns_max.get());
        self.hold_ns_total.add(o.hold_ns_total.get());
        self.hold_ns_max.max(o.hold_ns_max.get());
        self.holds_timed.add(o.holds_timed.get());
        self.owner_changes.add(o.owner_changes.get());
        self.cnt_hold.add(o.cnt_hold.get());
        self.cond_waits.add(o.cond_waits.get());
        self.cond_wait_ns.add(o.cond_wait_ns.get());
        self.wait_hist.absorb_counts(&o.wait_hist.snapshot(o.full(0)), self.full(0));
        self.hold_hist.absorb_counts(&o.hold_hist.snapshot(o.full(1)), self.full(1));
    }

    /// Adds a snapshot `o` to these statistics, like [`LiveStats::absorb`]. Single writer (of
    /// `self`) only.
    pub fn absorb_stats(&self, o: &Stats) {
        self.acquisitions.add(o.acquisitions);
        self.contended.add(o.contended);
        self.trylock_failures.add(o.trylock_failures);
        self.wait_ns_total.add(o.wait_ns_total);
        self.wait_ns_max.max(o.wait_ns_max);
        self.hold_ns_total.add(o.hold_ns_total);
        self.hold_ns_max.max(o.hold_ns_max);
        self.holds_timed.add(o.holds_timed);
        self.owner_changes.add(o.owner_changes);
        self.cnt_hold.add(o.cnt_hold);
        self.cond_waits.add(o.cond_waits);
        self.cond_wait_ns.add(o.cond_wait_ns);
        self.wait_hist.absorb_counts(&o.wait_hist, self.full(0));
        self.hold_hist.absorb_counts(&o.hold_hist, self.full(1));
    }

    /// Zeroes every figure. Single writer only.
    pub fn clear(&self) {
        for c in [
            &self.acquisitions,
            &self.contended,
            &self.trylock_failures,
            &self.wait_ns_total,
            &self.wait_ns_max,
            &self.hold_ns_total,
            &self.hold_ns_max,
            &self.holds_timed,
            &self.owner_changes,
            &self.cnt_hold,
            &self.cond_waits,
            &self.cond_wait_ns,
        ] {
            c.set(0);
        }
        self.wait_hist.clear(self.full(0));
        self.hold_hist.clear(self.full(1));
    }

    /// A plain copy.
    #[inline(never)]
    pub fn snapshot(&self) -> Stats {
        Stats {
            acquisitions: self.acquisitions.get(),
            contended: self.contended.get(),
            trylock_failures: self.trylock_failures.get(),
            wait_ns_total: self.wait_ns_total.get(),
            wait_ns_max: self.wait_ns_max.get(),
            hold_ns_total: self.hold_ns_total.get(),
            hold_ns_max: self.hold_ns_max.get(),
            holds_timed: self.holds_timed.get(),
            owner_changes: self.owner_changes.get(),
            cnt_hold: self.cnt_hold.get(),
            cnt_lock: self.contended.get() + self.trylock_failures.get(),
            cond_waits: self.cond_waits.get(),
            cond_wait_ns: self.cond_wait_ns.get(),
            wait_hist: self.wait_hist.snapshot(self.full(0)),
            hold_hist: self.hold_hist.snapshot(self.full(1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live() -> LiveStats {
        let l = LiveStats::new();
        // Zeroed memory for arrays of one wait and one hold histogram, laid out as a table's.
        let words = (hold_offset(1) + size_of::<Log2Hist>()) / 8;
        let h: &'static [u64] = Box::leak(vec![0u64; words].into_boxed_slice());
        // SAFETY: leaked, so they outlive `l`; zeroed is an empty histogram; only this test
        // writes them.
        unsafe { l.attach(h.as_ptr().cast(), 1) };
        l
    }

    #[test]
    fn live_snapshot_and_merge() {
        let l = live();
        l.acquisitions.add(3);
        l.record_wait(100);
        l.record_wait(300);
        l.record_hold(50);
        let s = l.snapshot();
        assert_eq!(s.acquisitions, 3);
        assert_eq!(s.contended, 2);
        assert_eq!(s.wait_ns_total, 400);
        assert_eq!(s.wait_ns_max, 300);
        assert_eq!(s.hold_ns_max, 50);
        let mut m = s.clone();
        m.merge(&s);
        assert_eq!(m.acquisitions, 6);
        assert_eq!(m.wait_ns_max, 300);
        assert_eq!(m.wait_hist.iter().sum::<u64>(), 4);
        assert!(Stats::default().is_empty());
    }

    #[test]
    fn live_absorb_equals_snapshot_merge_and_clear_empties() {
        let a = live();
        a.acquisitions.add(5);
        a.record_wait(700);
        a.record_hold(20);
        a.cond_waits.add(1);
        let b = live();
        b.acquisitions.add(2);
        b.record_wait(100);
        b.record_hold(90);
        b.owner_changes.add(1);
        let mut want = a.snapshot();
        want.merge(&b.snapshot());
        a.absorb(&b);
        assert_eq!(a.snapshot(), want);
        assert_eq!(a.snapshot().acquisitions, 7);
        assert_eq!(a.snapshot().hold_ns_max, 90);
        a.clear();
        assert!(a.snapshot().is_empty());
        assert_eq!(a.snapshot(), Stats::default());
    }

    #[test]
    fn without_full_histograms_the_totals_still_count() {
        let l = LiveStats::new();
        l.record_wait(100);
        l.record_wait(1 << 40);
        l.record_hold(7);
        let s = l.snapshot();
        assert_eq!(
            (s.contended, s.wait_ns_total, s.holds_timed, s.hold_ns_max),
            (2, 100 + (1 << 40), 1, 7)
        );
        assert_eq!(s.wait_hist.iter().sum::<u64>(), 1, "the compact window kept what fit");
        assert_eq!(
            size_of::<LiveStats>(),
            12 * 8 + 2 * 32 + 8,
            "a record's counters and compact histograms stay small"
        );
    }

    #[test]
    fn a_record_whose_values_spread_promotes_and_stays_exact() {
        let l = live();
        let full = Log2Hist::new();
        for i in 0..40u64 {
            let v = 1u64 << i;
            l.record_hold(v);
            full.record(v);
        }
        assert!(l.hold_hist().promoted());
        assert!(!l.wait_hist().promoted());
        assert_eq!(l.snapshot().hold_hist, full.snapshot());
    }

    #[test]
    fn codes_round_trip() {
        for k in LOCK_KINDS {
            assert_eq!(LockKind::from_u8(k as u8), Some(k));
        }
        assert_eq!(LockKind::from_u8(5), Some(LockKind::Semaphore));
        assert_eq!(LockKind::Semaphore.as_str(), "semaphore");
        assert_eq!(LockKind::Semaphore.origin(), "preload");
        assert_eq!(LockKind::from_u8(14), Some(LockKind::GoMutex));
        assert_eq!(LockKind::GoRwMutex.as_str(), "go-rwmutex");
        assert_eq!(LockKind::GoMutex.origin(), "go");
        for m in [Mode::Exclusive, Mode::Read, Mode::Write] {
            assert_eq!(Mode::from_u8(m as u8), Some(m));
        }
        assert_eq!(LockKind::from_u8(0), None);
    }
}

//! The collector's estimate of its own cost: what it measures in the run, and the model that
//! turns that into `overhead.estimated_slowdown` (estimated metered wall / unmetered wall).
//!
//! Measured per thread with the clock the hooks already use, cheaply:
//! - one acquisition and one release in [`SAMPLE`], under the run's real cache traffic: the
//!   hooks' work inside critical sections (from the real lock's return to the end of the
//!   acquisition hook, and from the release hook's start to the real unlock), their work outside
//!   (the record's lookup before the real lock call, the hold's record after the real unlock)
//!   and the real trylock and unlock between them; the hook's first and last reads are ordered
//!   ([`edge_if`]), so that the parts add up to the whole;
//! - every lookup that missed the thread's lookup cache ([`SlowLookup`]: first uses);
//! - one lock initialization or destruction in [`SAMPLE`] ([`Lifetime`]), all counted;
//! - the contended path: gathering a waiter's side (its stack) before it blocks, always timed (it
//!   waits anyway), and the holder's side after releasing a wanted lock, timed one time in
//!   [`SAMPLE`] and counted every time;
//! - the process's CPU time over the run ([`process_cpu_ns`]), and the share of it that was
//!   system time ([`process_sys_share`]): the kernel's work for the contention the hooks caused.
//!
//! A sampled interval in which the thread was preempted is left out (see [`MAX_TICKS`]).
//!
//! The model is `lockmeter_core::cost_model` (what it assumes is written there; FORMAT.md,
//! OVERHEAD): the hooks' CPU time is the pair as the run paid it x acquisitions, plus the slow
//! lookups and the contended path; the unmetered run does the rest of the CPU time at the rate
//! the run had (CPU time / wall time); hook time inside critical sections that another thread
//! waited for adds to wall time undivided.

use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use lockmeter_core::Counter;
use lockmeter_core::clock;

/// One acquisition, release or holder-side capture in this many is timed. Prime, so that it
/// does not keep step with a power-of-two sampling of the hooks' own (`--hold sample:16`, stack
/// resampling): in step, every timed hold would be a sampled one, or none.
pub(crate) const SAMPLE: u32 = 61;

/// A thread's cost measurements (single writer: the thread).
#[derive(Default)]
pub(crate) struct CostCounters {
    /// Timed acquisitions and their in-critical-section hook ticks.
    pub(crate) acq_timed: Counter,
    pub(crate) acq_ticks: Counter,
    /// Timed releases and their in-critical-section hook ticks.
    pub(crate) rel_timed: Counter,
    pub(crate) rel_ticks: Counter,
    /// The same sampled acquisitions' and releases' hook ticks outside the critical section:
    /// from the hook's start to the real lock call (the record's lookup), and from the real
    /// unlock's return to the hook's end (the hold's record; releases of wanted locks left out,
    /// their holder-side work is timed as `holding`).
    pub(crate) acq_out_timed: Counter,
    pub(crate) acq_out_ticks: Counter,
    pub(crate) rel_out_timed: Counter,
    pub(crate) rel_out_ticks: Counter,
    /// Ticks spent gathering waiters' sides (every contended acquisition).
    pub(crate) gather_ticks: Counter,
    /// Holder-side captures (releases of wanted locks), timed ones, and their ticks.
    pub(crate) holding: Counter,
    pub(crate) holding_timed: Counter,
    pub(crate) holding_ticks: Counter,
    /// The same sampled acquisitions' and releases' real calls: the real trylock that took the
    /// lock at once, and the real unlock (releases of wanted locks left out). Compared with the
    /// calibration's, they show what the collector's memory traffic costs the program's own lock
    /// calls (its records evict the program's lock lines from the caches).
    pub(crate) acq_real_timed: Counter,
    pub(crate) acq_real_ticks: Counter,
    /// Sampled acquisitions of locks another thread took last, whose real call is left out of
    /// `acq_real_*`: their line came from another CPU's cache or from memory, by the program's
    /// own sharing, which the unmetered run pays too.
    pub(crate) acq_moved: Counter,
    pub(crate) rel_real_timed: Counter,
    pub(crate) rel_real_ticks: Counter,
    /// Lookups that missed the thread's lookup cache, those timed and their ticks, every one
    /// timed (see [`SlowLookup`]) but those preempted: mostly the first use of each record.
    /// A sampled acquisition whose lookup missed leaves its lookup out of `acq_out_ticks`.
    pub(crate) slow: Counter,
    pub(crate) slow_timed: Counter,
    pub(crate) slow_ticks: Counter,
    /// Lock initializations and destructions the collector metered (`hooks::begin`, `end`: a
    /// new identity and its class, an ended one's slot retired), one in [`SAMPLE`] timed (see
    /// [`Lifetime`]), and the timed ones' ticks. A program that makes and destroys millions of
    /// locks pays them as much as its lock calls.
    pub(crate) life: Counter,
    pub(crate) life_timed: Counter,
    pub(crate) life_ticks: Counter,
}

/// Whether to time this one: true one time in [`SAMPLE`] of `counter` (counted down: no
/// division on the hook path).
#[inline(always)]
pub(crate) fn sample(counter: &mut u32) -> bool {
    if *counter == 0 {
        *counter = SAMPLE - 1;
        return true;
    }
    *counter -= 1;
    false
}

/// Times a lookup that missed the thread's lookup cache (the registry, the record table, a
/// record's first use with its stack and the memory it faults in), every one: added to
/// `slow_timed` and `slow_ticks` when dropped (unless the thread was preempted inside it: see
/// [`MAX_TICKS`]), counted in `slow` always.
pub(crate) struct SlowLookup<'a> {
    pub(crate) counters: &'a CostCounters,
    pub(crate) t0: u64,
}

impl Drop for SlowLookup<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        let c = self.counters;
        c.slow.add(1);
        add(&c.slow_timed, &c.slow_ticks, self.t0, clock::now());
    }
}

/// Counts a lock's initialization or destruction metered by the calling thread (its shard's
/// `cx`) and times one in [`SAMPLE`] of them: added to `life_timed` and `life_ticks` when dropped
/// (unless the thread was preempted inside it: see [`MAX_TICKS`]). The real `*_init` or
/// `*_destroy` call is the program's, outside it.
pub(crate) struct Lifetime<'a> {
    counters: &'a CostCounters,
    t0: u64,
}

impl<'a> Lifetime<'a> {
    /// Starts counting (and maybe timing) the hook's work in the thread of `cx`.
    #[inline(always)]
    pub(crate) fn start(cx: &'a crate::state::Cx) -> Self {
        let counters = &cx.shard.cost;
        counters.life.add(1);
        // SAFETY: busy flag held (the caller entered metering); the borrow ends here.
        let timed = sample(&mut unsafe { cx.private() }.cost_life);
        Lifetime { counters, t0: now_if(timed) }
    }
}

impl Drop for Lifetime<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.t0 != 0 {
            let c = self.counters;
            add(&c.life_timed, &c.life_ticks, self.t0, clock::now());
        }
    }
}

/// The clock now when `timed`, else 0.
#[inline(always)]
pub(crate) fn now_if(timed: bool) -> u64 {
    if timed { clock::now() } else { 0 }
}

/// [`now_if`] read in order, at the edges of a timed hook (its start, its end): once every
/// earlier instruction completed (cache misses included) and before any later one starts, so
/// that the timed parts add up to the hook's whole latency. A plain `rdtsc` lets a load that
/// missed inside the hook complete after the last read, in untimed code: on 4096 mutexes the
/// plain reads saw half the hooks' cost. Inside the hook the reads stay plain, so that the
/// fences do not take away the overlap the hook's own parts have.
#[inline(always)]
pub(crate) fn edge_if(timed: bool) -> u64 {
    if !timed {
        return 0;
    }
    #[cfg(target_arch = "x86_64")]
    if clock::source() == clock::Source::Tsc {
        // SAFETY: `lfence` and `rdtsc` have no memory effects and exist on every x86_64 CPU.
        unsafe {
            core::arch::x86_64::_mm_lfence();
            let t = core::arch::x86_64::_rdtsc();
            core::arch::x86_64::_mm_lfence();
            return t;
        }
    }
    clock::now()
}

/// Timed intervals longer than this (ticks: about 40 us at 3 GHz) are left out: the thread was
/// preempted or interrupted inside it, which one sample would multiply by [`SAMPLE`].
pub(crate) const MAX_TICKS: u64 = 1 << 17;

/// Adds one timed interval `t0..t1` (ticks) to `ticks` and `n`, unless it is longer than
/// [`MAX_TICKS`].
#[inline(always)]
pub(crate) fn add(n: &Counter, ticks: &Counter, t0: u64, t1: u64) {
    let d = t1.saturating_sub(t0);
    if d <= MAX_TICKS {
        n.add(1);
        ticks.add(d);
    }
}

/// Timed work outside the critical section longer than this (ticks: about 1.5 us at 3 GHz) did
/// one-time work, a lock's first use in the thread (its record made, its first-use stack
/// unwound, new memory faulted in), not the cost of a pair: left out, as one sample would
/// multiply it by [`SAMPLE`] (a thread that takes 4096 locks pays it 4096 times in all, not once
/// in 64 acquisitions).
pub(crate) const MAX_OUT_TICKS: u64 = 1 << 12;

/// [`add`] for the work outside the critical section: intervals longer than [`MAX_OUT_TICKS`]
/// are left out.
#[inline(always)]
pub(crate) fn add_out(n: &Counter, ticks: &Counter, t0: u64, t1: u64) {
    if t1.saturating_sub(t0) <= MAX_OUT_TICKS {
        add(n, ticks, t0, t1);
    }
}

/// The hooks' in-critical-section time per pair measured on the calibration pairs (hot caches,
/// no other thread), in ns x 1000; the run's own measurement is compared with it.
pub(crate) static CALIB_CS_PS: AtomicU64 = AtomicU64::new(0);

/// The same for the hooks' timed work outside the critical section.
pub(crate) static CALIB_OUT_PS: AtomicU64 = AtomicU64::new(0);

/// The same for the real lock and unlock calls.
pub(crate) static CALIB_REAL_PS: AtomicU64 = AtomicU64::new(0);

/// A bare uncontended lock+unlock pair, without the hooks, measured on the calibration lock, in
/// ns x 1000 (0: not measured): the least the unmetered run spends on each acquisition.
pub(crate) static RAW_PAIR_PS: AtomicU64 = AtomicU64::new(0);

/// The process's CPU time (user and system, all its threads) when the run's clock started, in
/// ns: the run's CPU time is measured from it (see [`process_cpu_ns`]).
pub(crate) static START_CPU_NS: AtomicU64 = AtomicU64::new(0);

/// CPU time of process `pid` so far (user and system, all its threads, those that exited
/// included), in ns; 0 when it cannot be read. By pid rather than `CLOCK_PROCESS_CPUTIME_ID`:
/// the guardian, which writes the profile of a program that died, is another process.
pub(crate) fn process_cpu_ns(pid: u32) -> u64 {
    // The kernel's CPU-time clock of a whole process: (~pid << 3) | CPUCLOCK_SCHED.
    let id = ((!(pid as libc::clockid_t)) << 3) | 2;
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    if unsafe { libc::clock_gettime(id, &mut ts) } != 0 {
        return 0;
    }
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

/// The share of process `pid`'s CPU time that was system time, from `/proc/PID/stat` (utime and
/// stime, fields 14 and 15, in clock ticks: the kernel's split of the exact total, sampled at
/// its tick); 0 when it cannot be read or no tick was counted.
pub(crate) fn process_sys_share(pid: u32) -> f64 {
    let mut path = crate::sys::PathBuf::new();
    path.push(b"/proc/").push_u64(u64::from(pid)).push(b"/stat");
    let mut buf = [0u8; 2048];
    let stat = crate::sys::read_file(path.as_cstr(), &mut buf);
    let field = |n| lockmeter_core::procstat::field_bytes(stat, n).and_then(crate::sys::parse_u64);
    match (field(14), field(15)) {
        (Some(u), Some(s)) if u.saturating_add(s) > 0 => s as f64 / u.saturating_add(s) as f64,
        _ => 0.0,
    }
}

/// What one round of calibration pairs measured, per pair in ns x 1000 (`to_ns` converts
/// ticks): the hooks' work inside the critical section, outside it, and the real calls (0: none
/// timed); `c` is cleared, so that the next round's figures, and at the end the run's, are their
/// own.
pub(crate) fn calibration_round(c: &CostCounters, to_ns: impl Fn(u64) -> u64) -> [u64; 3] {
    let mean = |t: &Counter, n: &Counter| {
        if n.get() == 0 { 0 } else { to_ns(t.get() * 1000) / n.get() }
    };
    let part = |a: u64, b: u64| if a == 0 || b == 0 { 0 } else { a + b };
    let round = [
        part(mean(&c.acq_ticks, &c.acq_timed), mean(&c.rel_ticks, &c.rel_timed)),
        part(mean(&c.acq_out_ticks, &c.acq_out_timed), mean(&c.rel_out_ticks, &c.rel_out_timed)),
        part(
            mean(&c.acq_real_ticks, &c.acq_real_timed),
            mean(&c.rel_real_ticks, &c.rel_real_timed),
        ),
    ];
    for x in [
        &c.acq_timed,
        &c.acq_ticks,
        &c.rel_timed,
        &c.rel_ticks,
        &c.acq_out_timed,
        &c.acq_out_ticks,
        &c.rel_out_timed,
        &c.rel_out_ticks,
        &c.gather_ticks,
        &c.holding,
        &c.holding_timed,
        &c.holding_ticks,
        &c.acq_real_timed,
        &c.acq_real_ticks,
        &c.acq_moved,
        &c.rel_real_timed,
        &c.rel_real_ticks,
        &c.slow,
        &c.slow_timed,
        &c.slow_ticks,
    ] {
        x.set(0);
    }
    round
}

/// Keeps the least of each of the calibration rounds' figures ([`calibration_round`]) in
/// [`CALIB_CS_PS`], [`CALIB_OUT_PS`] and [`CALIB_REAL_PS`]. The least, not the mean: a round is
/// about 30 timed pairs, and one interrupt inside one of them (microseconds) doubled a round's
/// mean; the run compared with it counts thousands, where such a sample weighs little.
pub(crate) fn end_calibration(rounds: &[[u64; 3]]) {
    for (i, keep) in [&CALIB_CS_PS, &CALIB_OUT_PS, &CALIB_REAL_PS].into_iter().enumerate() {
        if let Some(least) = rounds.iter().map(|r| r[i]).filter(|&x| x > 0).min() {
            keep.store(least, Relaxed);
        }
    }
}

pub(crate) use lockmeter_core::cost_model::{Inputs, estimate, parallelism};

//! Lock swapping (`lockmeter run --lock ALGO`): the program's default pthread mutexes run on a
//! lab algorithm of `lockmeter_locks::cabi`, and its condvars on a futex sequence-number condvar
//! built on that lock (glibc's `pthread_cond_wait` relocks the mutex through internal calls that
//! cannot be interposed, so a swapped mutex needs a swapped condvar, as in LiTL).
//!
//! # Where the state lives (glibc's `pthread_mutex_t`, 40 bytes on x86_64 and aarch64)
//! - offset 24 (`__list.__prev`, which glibc only uses for robust mutexes, never swapped): the
//!   mode word: 0 undecided, [`SWAPPED`], [`NATIVE`]. `PTHREAD_MUTEX_INITIALIZER` and
//!   `pthread_mutex_init` (a `memset`) leave it 0.
//! - offsets 0..16 (`__lock`, `__count`, `__owner`, `__nusers`): the lab lock's state
//!   ([`cabi::STATE_BYTES`]) once the mutex is swapped: glibc never touches them then, as no
//!   glibc call reaches a swapped mutex (destroy is ours too).
//! - offset 16 (`__kind`): read, never written.
//!
//! # The decision, once per mutex, at its first lock after the constructor
//! The mode word is set by one compare-and-swap, so every thread agrees. A mutex stays native
//! (glibc's implementation) when its type is not the default one (recursive, error-checking,
//! robust, priority-inheritance or -protection, process-shared: counted by reason), when it is
//! outside the `LOCKMETER_LOCK_FILTER` range (`run --lock-filter NAME`) or was neither
//! initialized (decided at its init then) nor first locked at its code ranges
//! (`run --lock-filter FILE:LINE`), or when
//! glibc's lock word shows it held: it was locked through glibc before swapping began (in
//! another constructor, say), and the lab algorithm must never unlock a glibc hold. An unlock of
//! an undecided mutex is glibc's (only glibc can have locked it).
//!
//! # Condvars (`pthread_cond_t`, 48 bytes)
//! A wait on a swapped mutex uses offsets 40 (sequence number) and 44 (waiters) of the condvar,
//! `__g_signals`, which glibc's signal and broadcast never touch while `__wrefs` (offset 36)
//! counts no glibc waiter; both our signal and glibc's run on every signal, so waiters on native
//! mutexes are woken too. A condvar used with both swapped and native mutexes over its life is
//! not supported (glibc's waiters would read our sequence number as signals).
//!
//! Condvars are in `swap_cond.rs`, rwlocks (`--rwlock qrwlock`) in `swap_rw.rs`.
//!
//! Every function here leaves `errno` as it found it (the lab locks' futex calls may set it).

use core::ffi::c_int;
use core::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering::*};
use libc::{clockid_t, pthread_mutex_t, timespec};
use lockmeter_locks::cabi::{self, Algo};

/// The algorithm (`Algo as u8`; 0: swapping off). Set once by the constructor.
pub(crate) static ALGO: &AtomicU8 = &crate::state::HOT.swap_algo;

const MODE_OFFSET: usize = 24;
const KIND_OFFSET: usize = 16;
/// The mode word of a swapped mutex.
pub(crate) const SWAPPED: u32 = 0x5357_4150;
/// The mode word of a mutex that keeps glibc's implementation.
pub(crate) const NATIVE: u32 = 0x4e41_5456;

/// Why mutexes were not swapped (the profile's note counts each).
#[derive(Clone, Copy)]
enum Reason {
    Recursive = 0,
    ErrorCheck,
    Robust,
    Priority,
    Shared,
    HeldBeforeSwap,
    Filtered,
}
const REASONS: usize = 7;
const REASON_TEXT: [&[u8]; REASONS] = [
    b"recursive",
    b"error-checking",
    b"robust",
    b"priority-inheritance or -protection",
    b"process-shared",
    b"held through glibc when first seen",
    b"outside --lock-filter",
];
static NOT_SWAPPED: [AtomicU64; REASONS] = [const { AtomicU64::new(0) }; REASONS];
/// Mutexes swapped (decisions made).
static SWAPPED_COUNT: AtomicU64 = AtomicU64::new(0);

/// `--lock-filter`: the address range of the mutexes to swap (`FILTER_HI` 0: every mutex).
static FILTER_LO: AtomicUsize = AtomicUsize::new(0);
static FILTER_HI: AtomicUsize = AtomicUsize::new(0);
/// `--lock-filter FILE:LINE`: the code ranges (absolute addresses) of the sites whose mutexes
/// are swapped: those initialized or first locked by a call there (`SITES` 0: no site filter).
const MAX_SITE_RANGES: usize = 32;
static SITE_LO: [AtomicUsize; MAX_SITE_RANGES] = [const { AtomicUsize::new(0) }; MAX_SITE_RANGES];
static SITE_HI: [AtomicUsize; MAX_SITE_RANGES] = [const { AtomicUsize::new(0) }; MAX_SITE_RANGES];
static SITES: AtomicUsize = AtomicUsize::new(0);

/// Reads `LOCKMETER_LOCK` and `LOCKMETER_LOCK_FILTER` (constructor). An unknown name or a
/// malformed filter stops the program with a message: running it otherwise would measure
/// something else than was asked.
pub(crate) fn init(raw: Option<&[u8]>, filter: Option<&[u8]>) {
    let Some(name) = raw.filter(|v| !v.is_empty() && *v != b"pthread") else { return };
    let Some(a) = Algo::from_name(name) else {
        crate::sys::fatal(
            "lockmeter: unknown LOCKMETER_LOCK; use pthread, tas, ttas, ticket, mcs, mcs:park, futex, adaptive, clh, qspin or unfair-q\n",
        )
    };
    if let Some(f) = filter.and_then(|f| f.strip_prefix(b"@")) {
        init_sites(f);
    } else if let Some(f) = filter.filter(|f| !f.is_empty()) {
        let parsed = f
            .iter()
            .position(|&c| c == b'+')
            .and_then(|i| Some((parse_hex(f.get(..i)?)?, parse_hex(f.get(i + 1..)?)?)));
        let Some((off, size)) = parsed.filter(|&(_, n)| n > 0) else {
            crate::sys::fatal(
                "lockmeter: LOCKMETER_LOCK_FILTER is OFFSET+SIZE in hex (lockmeter run --lock-filter NAME computes it)\n",
            )
        };
        let lo = exe_base().wrapping_add(off);
        FILTER_LO.store(lo, Relaxed);
        FILTER_HI.store(lo.wrapping_add(size), Relaxed);
    }
    ALGO.store(a as u8, Relaxed);
}

/// Reads the `START-END,...` code ranges of `--lock-filter FILE:LINE` (hex ELF addresses of the
/// executable); malformed: stops the program with a message.
fn init_sites(f: &[u8]) {
    let base = exe_base();
    let mut n = 0;
    for part in f.split(|&c| c == b',') {
        let range = part
            .iter()
            .position(|&c| c == b'-')
            .and_then(|i| Some((parse_hex(part.get(..i)?)?, parse_hex(part.get(i + 1..)?)?)));
        match (range.filter(|&(lo, hi)| lo < hi), SITE_LO.get(n), SITE_HI.get(n)) {
            (Some((lo, hi)), Some(l), Some(h)) => {
                l.store(base.wrapping_add(lo), Relaxed);
                h.store(base.wrapping_add(hi), Relaxed);
                n += 1;
            }
            _ => crate::sys::fatal(
                "lockmeter: LOCKMETER_LOCK_FILTER=@START-END,... takes at most 32 hex code ranges (lockmeter run --lock-filter FILE:LINE computes them)\n",
            ),
        }
    }
    SITES.store(n, Relaxed);
}

/// Whether the call that returns to `site` is inside a `--lock-filter FILE:LINE` code range.
fn site_matches(site: usize) -> bool {
    let at = site.wrapping_sub(1); // inside the call instruction
    let n = SITES.load(Relaxed).min(MAX_SITE_RANGES);
    SITE_LO
        .iter()
        .zip(&SITE_HI)
        .take(n)
        .any(|(lo, hi)| (lo.load(Relaxed)..hi.load(Relaxed)).contains(&at))
}

/// `pthread_mutex_init` of `m` returned 0 at `site`: with `--lock-filter FILE:LINE`, a mutex
/// initialized at that line is decided now (swapped unless its type keeps it glibc's), so that
/// its first lock elsewhere does not filter it out.
///
/// # Safety
/// `m` points at a mutex that `pthread_mutex_init` has just initialized.
pub(crate) unsafe fn at_init(m: *mut pthread_mutex_t, site: usize) {
    if algo().is_none() || SITES.load(Relaxed) == 0 || !site_matches(site) {
        return;
    }
    // SAFETY: the caller's contract.
    let w = unsafe { mode(m) };
    if w.load(Acquire) == 0 {
        // SAFETY: as above.
        unsafe { decide(m, w, site) };
    }
}

/// A hexadecimal number (no prefix).
fn parse_hex(b: &[u8]) -> Option<usize> {
    if b.is_empty() || b.len() > 16 {
        return None;
    }
    b.iter().try_fold(0usize, |v, &c| Some(v << 4 | (c as char).to_digit(16)? as usize))
}

/// The main executable's load address: where its program headers are, minus their address in
/// the file's layout (`PT_PHDR`); 0 for a position-dependent executable.
fn exe_base() -> usize {
    // SAFETY: getauxval has no preconditions.
    let (phdr, phnum) =
        unsafe { (libc::getauxval(libc::AT_PHDR) as usize, libc::getauxval(libc::AT_PHNUM)) };
    for i in 0..phnum as usize {
        // SAFETY: the kernel's auxiliary vector points at the executable's `phnum` mapped
        // program headers.
        let ph = unsafe { &*(phdr as *const libc::Elf64_Phdr).add(i) };
        if ph.p_type == libc::PT_PHDR {
            return phdr.wrapping_sub(ph.p_vaddr as usize);
        }
    }
    0
}

/// Whether swapping is on (`run --lock`).
#[inline(always)]
pub(crate) fn active() -> bool {
    ALGO.load(Relaxed) != 0
}

/// The algorithm, when swapping is on.
#[inline(always)]
fn algo() -> Option<Algo> {
    let v = ALGO.load(Relaxed);
    if v == 0 { None } else { Algo::from_u8(v) }
}

/// The mode word of mutex `m`.
///
/// # Safety
/// `m` points at a `pthread_mutex_t`.
#[inline(always)]
unsafe fn mode(m: *mut pthread_mutex_t) -> &'static AtomicU32 {
    // SAFETY: offset 24 is inside the 40-byte, 8-aligned mutex; an AtomicU32 has the layout of
    // the u32 there.
    unsafe { &*((m as *mut u8).add(MODE_OFFSET) as *const AtomicU32) }
}

/// A swapped mutex: its algorithm and state.
#[derive(Clone, Copy)]
pub(crate) struct Swapped {
    algo: Algo,
    state: *mut u8,
}

/// The swapped lock of `m` if `m` is swapped, deciding now when it is undecided (for the lock
/// calls, whose return address is `site`).
///
/// # Safety
/// `m` points at an initialized `pthread_mutex_t`.
#[inline(always)]
pub(crate) unsafe fn for_lock(m: *mut pthread_mutex_t, site: usize) -> Option<Swapped> {
    let algo = algo()?;
    // SAFETY: the caller's contract.
    let w = unsafe { mode(m) };
    let v = match w.load(Acquire) {
        0 => {
            // SAFETY: as above.
            unsafe { decide(m, w, site) }
        }
        v => v,
    };
    (v == SWAPPED).then_some(Swapped { algo, state: m as *mut u8 })
}

/// The swapped lock of `m` if `m` was swapped (for unlock, destroy and condvar waits: an
/// undecided mutex is glibc's).
///
/// # Safety
/// `m` points at a `pthread_mutex_t`.
#[inline(always)]
pub(crate) unsafe fn existing(m: *mut pthread_mutex_t) -> Option<Swapped> {
    let algo = algo()?;
    // SAFETY: the caller's contract.
    let v = unsafe { mode(m) }.load(Acquire);
    (v == SWAPPED).then_some(Swapped { algo, state: m as *mut u8 })
}

/// Decides the mode of undecided mutex `m`, initialized or locked by the call that returns to
/// `site` (one CAS; the loser takes the winner's decision).
///
/// # Safety
/// `m` points at an initialized `pthread_mutex_t`; `w` is its mode word.
#[cold]
#[inline(never)]
unsafe fn decide(m: *mut pthread_mutex_t, w: &AtomicU32, site: usize) -> u32 {
    // SAFETY: __kind is the int at offset 16; __lock the int at offset 0 (a racy read: the CAS
    // below is the decision, this only chooses what to propose).
    let (kind, word) = unsafe {
        (
            core::ptr::read_volatile((m as *const u8).add(KIND_OFFSET) as *const c_int),
            core::ptr::read_volatile(m as *const c_int),
        )
    };
    let (lo, hi) = (FILTER_LO.load(Relaxed), FILTER_HI.load(Relaxed));
    let reason = if (hi != 0 && !(lo..hi).contains(&(m as usize)))
        || (SITES.load(Relaxed) != 0 && !site_matches(site))
    {
        Some(Reason::Filtered)
    } else if kind & 16 != 0 {
        Some(Reason::Robust)
    } else if kind & (32 | 64) != 0 {
        Some(Reason::Priority)
    } else if kind & 128 != 0 {
        Some(Reason::Shared)
    } else if kind & 3 == 1 {
        Some(Reason::Recursive)
    } else if kind & 3 == 2 {
        Some(Reason::ErrorCheck)
    } else if word != 0 {
        Some(Reason::HeldBeforeSwap)
    } else {
        None
    };
    settle(w, reason.map(|r| r as usize), &NOT_SWAPPED, &SWAPPED_COUNT)
}

/// Records the decision for a lock whose mode word is `w`: native when there is a `reason` not
/// to swap it (counted in `not_swapped[reason]`), else swapped (counted in `swapped`), unless
/// another thread decided first. Returns the decision that holds.
pub(crate) fn settle(
    w: &AtomicU32,
    reason: Option<usize>,
    not_swapped: &[AtomicU64],
    swapped: &AtomicU64,
) -> u32 {
    let want = if reason.is_some() { NATIVE } else { SWAPPED };
    match w.compare_exchange(0, want, AcqRel, Acquire) {
        Ok(_) => {
            match reason {
                Some(r) => not_swapped.get(r).map(|c| c.fetch_add(1, Relaxed)),
                None => Some(swapped.fetch_add(1, Relaxed)),
            };
            want
        }
        Err(v) => v,
    }
}

/// Runs `f` and puts `errno` back as it was.
#[inline(always)]
pub(crate) fn keep_errno<T>(f: impl FnOnce() -> T) -> T {
    let e = crate::sys::errno();
    let r = f();
    crate::sys::set_errno(e);
    r
}

impl Swapped {
    /// `pthread_mutex_lock`.
    #[inline(always)]
    pub(crate) fn lock(self) -> c_int {
        // SAFETY: `state` is a swapped mutex's state, used by this algorithm only.
        keep_errno(|| unsafe { cabi::lock(self.algo, self.state) });
        0
    }

    /// `pthread_mutex_trylock`: 0 or EBUSY.
    #[inline(always)]
    pub(crate) fn try_lock(self) -> c_int {
        // SAFETY: as in `lock`.
        if keep_errno(|| unsafe { cabi::try_lock(self.algo, self.state) }) {
            0
        } else {
            libc::EBUSY
        }
    }

    /// `pthread_mutex_unlock`.
    #[inline(always)]
    pub(crate) fn unlock(self) -> c_int {
        // SAFETY: as in `lock`; the caller holds the lock (else the program's error, as with a
        // glibc normal mutex, which does not check either).
        keep_errno(|| unsafe { cabi::unlock(self.algo, self.state) });
        0
    }

    /// `pthread_mutex_timedlock` / `clocklock` with an absolute deadline on `clock`: tries, then
    /// polls with growing sleeps (every lab lock can be tried; not all can leave a queue) until
    /// the deadline. EINVAL for a clock other than realtime or monotonic, or a bad `tv_nsec`
    /// when the lock is not free (as glibc).
    ///
    /// # Safety
    /// `t` points at a readable `timespec` (the caller's argument, which glibc reads too).
    pub(crate) unsafe fn timed_lock(self, clock: clockid_t, t: *const timespec) -> c_int {
        // SAFETY: the caller's contract.
        unsafe { poll_until(clock, t, || self.try_lock() == 0) }
    }

    /// `pthread_mutex_destroy`: EBUSY while held; otherwise the state is cleared and glibc's
    /// destroy runs (it finds its own fields clear).
    ///
    /// # Safety
    /// `m` is the mutex of this state.
    pub(crate) unsafe fn destroy(self, m: *mut pthread_mutex_t) -> c_int {
        // SAFETY: as in `lock`.
        if unsafe { cabi::is_locked(self.algo, self.state) } {
            return libc::EBUSY;
        }
        // SAFETY: the unlocked state's bytes, which no thread may use during a destroy.
        unsafe { core::ptr::write_bytes(self.state, 0, cabi::STATE_BYTES) };
        // SAFETY: forwarded: an initialized, unlocked mutex.
        unsafe { crate::real::mutex_destroy(m) }
    }
}

/// A timed acquisition by polling `try_`: tries, then polls with growing sleeps (every lab lock
/// can be tried; not all can leave a queue) until the absolute deadline `t` on `clock`. EINVAL
/// for a clock other than realtime or monotonic, or a bad `tv_nsec` when the lock is not free
/// (as glibc).
///
/// # Safety
/// `t` points at a readable `timespec` (the caller's argument, which glibc reads too).
pub(crate) unsafe fn poll_until(
    clock: clockid_t,
    t: *const timespec,
    try_: impl Fn() -> bool,
) -> c_int {
    if clock != libc::CLOCK_REALTIME && clock != libc::CLOCK_MONOTONIC {
        return libc::EINVAL;
    }
    if try_() {
        return 0;
    }
    // SAFETY: the caller's contract.
    let dl = unsafe { *t };
    if !(0..1_000_000_000).contains(&dl.tv_nsec) {
        return libc::EINVAL;
    }
    keep_errno(|| {
        let mut sleep_ns: i64 = 1_000;
        let mut spins = 0u32;
        loop {
            if try_() {
                return 0;
            }
            let mut now = timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: a valid clock and output.
            unsafe { libc::clock_gettime(clock, &mut now) };
            if (now.tv_sec, now.tv_nsec) >= (dl.tv_sec, dl.tv_nsec) {
                return libc::ETIMEDOUT;
            }
            if spins < 64 {
                spins += 1;
                core::hint::spin_loop();
                continue;
            }
            let ts = timespec { tv_sec: 0, tv_nsec: sleep_ns };
            // SAFETY: a valid request; the remainder is not needed.
            unsafe { libc::nanosleep(&ts, core::ptr::null_mut()) };
            sleep_ns = (sleep_ns * 2).min(1_000_000);
        }
    })
}

// ---- the profile's note ----

/// Writes the note about swapping into `buf` ("lock swapping: ..."); returns its length (0 when
/// swapping was off).
pub(crate) fn note(buf: &mut [u8]) -> usize {
    let Some(a) = algo() else { return 0 };
    let mut w = Writer { buf, len: 0 };
    w.put(b"lock swapping: ");
    w.num(SWAPPED_COUNT.load(Relaxed));
    w.put(b" mutexes ran on ");
    w.put(a.name().as_bytes());
    let total: u64 = NOT_SWAPPED.iter().map(|c| c.load(Relaxed)).sum();
    w.put(b"; ");
    w.num(total);
    w.put(b" kept glibc's implementation");
    let mut first = true;
    for (i, c) in NOT_SWAPPED.iter().enumerate() {
        let n = c.load(Relaxed);
        if n == 0 {
            continue;
        }
        w.put(if first { b" (" } else { b", " });
        first = false;
        w.num(n);
        w.put(b" ");
        w.put(REASON_TEXT[i]);
    }
    if !first {
        w.put(b")");
    }
    w.len
}

/// Writes into a fixed buffer, dropping what does not fit (no allocation).
pub(crate) struct Writer<'a> {
    pub(crate) buf: &'a mut [u8],
    pub(crate) len: usize,
}

impl Writer<'_> {
    pub(crate) fn put(&mut self, b: &[u8]) {
        for &c in b {
            if let Some(slot) = self.buf.get_mut(self.len) {
                *slot = c;
                self.len += 1;
            }
        }
    }
    pub(crate) fn num(&mut self, n: u64) {
        self.put(crate::sys::decimal(n, &mut [0; 20]));
    }
}

/// After `fork`: the child keeps the swapped mutexes (their mode words are in its copy of the
/// memory) and counts only the decisions it makes itself; the parent's profile has the others.
pub(crate) fn reset_for_child() {
    SWAPPED_COUNT.store(0, Relaxed);
    for c in NOT_SWAPPED.iter() {
        c.store(0, Relaxed);
    }
}

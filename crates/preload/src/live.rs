//! Run-time state shared by the control thread (`control.rs`) and the profile writer (`dump/`):
//! whether metering is paused, the control socket's path, and the reset baseline.
//!
//! - **Pause**: the state machine's `PAUSED` value (hooks pass through at the cost of the one
//!   relaxed load of `STATE` they always make). A hold that began before a pause and ends after
//!   the resume is not timed (see [`RESUMED_TICKS`]).
//! - **Reset**: counters are single-writer (their thread's), so nobody else may zero them. A
//!   reset instead records a *baseline*: every record's statistics at that moment and the lock
//!   identity they belonged to (its tag), keyed by (owner id, record key, site), and the per-CPU
//!   sums. Snapshots and the final profile subtract it: from the record while it still holds that
//!   identity, else from the record its counts were folded into when the identity ended (its
//!   class's, `dump/records.rs`). The baseline is only touched by the thread that holds the profile writer's lock (the
//!   `DUMP` flag of `dump/mod.rs`), so never concurrently.

use crate::state;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use lockmeter_core::Stats;
use lockmeter_core::fixed::{Entry, FixedTable};

/// Set while metering is paused on request (`ctl pause`, before `--delay`, after `--duration`).
pub(crate) static PAUSED: AtomicBool = AtomicBool::new(false);
/// Ticks of the last resume: holds acquired before it are not timed (their release may have
/// been missed while paused).
pub(crate) static RESUMED_TICKS: &AtomicU64 = &crate::state::HOT.resumed_ticks;

/// Pauses metering: hooks pass through from now on. Changes nothing once the profile was written.
pub(crate) fn pause() {
    PAUSED.store(true, Relaxed);
    let _ = state::STATE.compare_exchange(state::READY, state::PAUSED, AcqRel, Relaxed);
}

/// Resumes metering after [`pause`].
pub(crate) fn resume() {
    RESUMED_TICKS.store(lockmeter_core::clock::now(), Relaxed);
    PAUSED.store(false, Relaxed);
    let _ = state::STATE.compare_exchange(state::PAUSED, state::READY, AcqRel, Relaxed);
}

/// The metering state to go back to after an exec that failed.
pub(crate) fn running_state() -> u8 {
    if PAUSED.load(Relaxed) { state::PAUSED } else { state::READY }
}

/// Room for the socket path (`/tmp/lockmeter-UID/PID.sock`, NUL-terminated).
pub(crate) const SOCK_PATH_MAX: usize = 108;

struct SockPath(UnsafeCell<[u8; SOCK_PATH_MAX]>);
// SAFETY: written only by `set_sock_path`, once per image (the constructor before the control
// thread starts, a fork child's handler as its only thread, or a pending fork child's control
// thread before it serves); read only after `SOCK_BOUND` says it was written.
unsafe impl Sync for SockPath {}
static SOCK_PATH: SockPath = SockPath(UnsafeCell::new([0; SOCK_PATH_MAX]));
/// Whether `SOCK_PATH` names a socket we bound.
static SOCK_BOUND: AtomicBool = AtomicBool::new(false);
/// Set by [`unlink_sock`]: the image ends. A pending fork child's control thread may bind its
/// socket while another thread ends the image; whichever of the two comes second unlinks it.
static SOCK_ENDED: AtomicBool = AtomicBool::new(false);

/// Records the control socket's path (NUL-terminated, at most `SOCK_PATH_MAX` bytes).
///
/// # Safety
/// Once per image, by the thread that binds the socket (`control::bind_socket`), while
/// `SOCK_BOUND` is false (nobody reads the buffer).
pub(crate) unsafe fn set_sock_path(p: &[u8]) {
    // SAFETY: by the caller's contract nobody reads the buffer now.
    let buf = unsafe { &mut *SOCK_PATH.0.get() };
    let n = p.len().min(SOCK_PATH_MAX - 1);
    buf[..n].copy_from_slice(&p[..n]);
    buf[n] = 0;
    SOCK_BOUND.store(true, SeqCst);
    // The image ended meanwhile (its `unlink_sock` may have found nothing bound): not left behind.
    if SOCK_ENDED.load(SeqCst) {
        unlink_sock();
    }
}

/// Forgets the socket path (a fork child: the parent's socket is not ours).
pub(crate) fn forget_sock_path() {
    SOCK_BOUND.store(false, Release);
    SOCK_ENDED.store(false, Release);
}

/// Removes the control socket (the process image ends: exit, exec, fatal signal).
pub(crate) fn unlink_sock() {
    SOCK_ENDED.store(true, SeqCst);
    if SOCK_BOUND.swap(false, SeqCst) {
        // SAFETY: NUL-terminated path written before the flag was set, not written since.
        unsafe { libc::unlink(SOCK_PATH.0.get().cast()) };
    }
}

/// One record's baseline: key (owner, key, site), published by `key` (never 0), the lock
/// identity its figures belonged to (its tag) and its statistics at the reset.
#[repr(C)]
struct BaseEntry {
    key: AtomicU64,
    owner: AtomicU64,
    site: AtomicU64,
    tag: AtomicU64,
    stats: UnsafeCell<Stats>,
}

impl Entry for BaseEntry {
    type Key = [u64; 3];
    type Word = AtomicU64;
    const TAG_IS_KEY: bool = false;
    fn word(&self) -> &AtomicU64 {
        &self.key
    }
    fn tag(k: &[u64; 3]) -> u64 {
        k[1]
    }
    fn hash(k: &[u64; 3]) -> u64 {
        lockmeter_core::mix64(k[0] ^ k[1].rotate_left(17) ^ k[2].rotate_left(41))
    }
    fn matches(&self, k: &[u64; 3]) -> bool {
        self.owner.load(Relaxed) == k[0] && self.site.load(Relaxed) == k[2]
    }
    fn write(&self, k: &[u64; 3]) {
        self.owner.store(k[0], Relaxed);
        self.site.store(k[2], Relaxed);
    }
}

/// The reset baseline (see the module docs).
struct Base {
    /// Per record (owner, key, site; owner 0 marks the exited threads' row): a
    /// `lockmeter_core::fixed::FixedTable` with one writer over a mapping (`mem`, `bytes`).
    table: FixedTable<'static, BaseEntry>,
    mem: *mut u8,
    bytes: usize,
    /// Per-CPU (acquisitions, contended, wait) sums over all threads at the reset.
    cpus: [[u64; 3]; state::MAX_CPUS],
    /// Whether a reset happened.
    set: bool,
}

struct Shared(UnsafeCell<Base>);
// SAFETY: only the holder of the profile writer's lock (`dump/mod.rs`'s DUMP flag) touches it.
unsafe impl Sync for Shared {}
static BASE: Shared = Shared(UnsafeCell::new(Base {
    table: FixedTable::new(&[], 0, 0),
    mem: core::ptr::null_mut(),
    bytes: 0,
    cpus: [[0; 3]; state::MAX_CPUS],
    set: false,
}));

/// The baseline, for the holder of the writer's lock.
///
/// # Safety
/// The caller holds the profile writer's lock (or is the only thread), and does not keep two of
/// these alive at once.
#[allow(clippy::mut_from_ref)]
unsafe fn base() -> &'static mut Base {
    // SAFETY: by the caller's contract.
    unsafe { &mut *BASE.0.get() }
}

/// Starts a new, empty baseline with room for `n` records. False when it cannot be mapped (the
/// old baseline is then gone too: the caller reports the failure).
///
/// # Safety
/// As [`base`].
pub(crate) unsafe fn begin(n: usize) -> bool {
    // SAFETY: by the caller's contract.
    let b = unsafe { base() };
    drop_mapping(b);
    let cap = (n.max(8) * 2).next_power_of_two();
    let bytes = cap * size_of::<BaseEntry>();
    let mem = state::map_kept(bytes);
    b.cpus = [[0; 3]; state::MAX_CPUS];
    if mem.is_null() {
        b.set = false;
        return false;
    }
    // SAFETY: `bytes` zeroed bytes, page-aligned, hold `cap` entries (zeroed atomics and a zeroed
    // `Stats`, plain integers, are valid); the mapping lives until `drop_mapping` empties the
    // table first.
    let entries = unsafe { core::slice::from_raw_parts(mem as *const BaseEntry, cap) };
    b.table = FixedTable::new(entries, cap, cap);
    b.mem = mem;
    b.bytes = bytes;
    b.set = true;
    true
}

fn drop_mapping(b: &mut Base) {
    b.table = FixedTable::new(&[], 0, 0);
    if !b.mem.is_null() {
        // SAFETY: the mapping made by `begin`; the table over it is gone, and no reference into
        // it outlives this call.
        unsafe { state::unmap_kept(b.mem, b.bytes) };
    }
    b.mem = core::ptr::null_mut();
    b.bytes = 0;
}

/// Forgets the baseline (a fork child starts a fresh profile).
///
/// # Safety
/// Only the process's single thread (fork child).
pub(crate) unsafe fn clear() {
    // SAFETY: by the caller's contract.
    let b = unsafe { base() };
    drop_mapping(b);
    b.set = false;
    b.cpus = [[0; 3]; state::MAX_CPUS];
}

/// Records `st` as the baseline of record (owner, key, site), whose tag is `tag`.
///
/// # Safety
/// As [`base`].
pub(crate) unsafe fn put(owner: u64, key: u64, site: u64, tag: u64, st: &Stats) {
    // SAFETY: by the caller's contract.
    let b = unsafe { base() };
    if key == 0 {
        return; // 0 is an empty entry's key word
    }
    if let Some((_, e)) = b.table.insert_one(&[owner, key, site], |_| {}) {
        e.tag.store(tag, Relaxed);
        // SAFETY: an entry of the mapping; only this thread touches it (the caller's contract),
        // and no reference to its statistics is alive.
        unsafe { e.stats.get().write(st.clone()) };
    }
}

/// Whether a reset happened (snapshots and the profile subtract its baseline).
///
/// # Safety
/// As [`base`].
pub(crate) unsafe fn is_set() -> bool {
    // SAFETY: by the caller's contract.
    unsafe { base() }.set
}

/// The baseline of record (owner, key, site): its tag at the reset and its figures then.
///
/// # Safety
/// As [`base`]; the reference is not used after the next reset (`begin`) or `clear`.
pub(crate) unsafe fn baseline(owner: u64, key: u64, site: u64) -> Option<(u64, &'static Stats)> {
    // SAFETY: by the caller's contract.
    let b = unsafe { base() };
    if !b.set || key == 0 {
        return None;
    }
    let e = b.table.find(&[owner, key, site])?;
    // SAFETY: an entry written by `put`; the mapping lives until the next `begin` or `clear`
    // (the caller's contract).
    Some((e.tag.load(Relaxed), unsafe { &*e.stats.get() }))
}

/// Adds per-CPU figures to the CPU baseline.
///
/// # Safety
/// As [`base`].
pub(crate) unsafe fn put_cpu(cpu: usize, acq: u64, contended: u64, wait: u64) {
    // SAFETY: by the caller's contract.
    let b = unsafe { base() };
    if let Some(c) = b.cpus.get_mut(cpu) {
        c[0] += acq;
        c[1] += contended;
        c[2] += wait;
    }
}

/// `st` less a baseline `o` (a record's at the reset, or what a record owes for the identities
/// folded into it since). Maxima cannot be taken back: they stay (since the start) while the
/// record has waits (holds) after the reset, and are 0 otherwise.
pub(crate) fn subtract(st: &mut Stats, o: &Stats) {
    let sub = |a: &mut u64, b: u64| *a = a.saturating_sub(b);
    sub(&mut st.acquisitions, o.acquisitions);
    sub(&mut st.contended, o.contended);
    sub(&mut st.trylock_failures, o.trylock_failures);
    sub(&mut st.wait_ns_total, o.wait_ns_total);
    sub(&mut st.hold_ns_total, o.hold_ns_total);
    sub(&mut st.holds_timed, o.holds_timed);
    sub(&mut st.owner_changes, o.owner_changes);
    sub(&mut st.cnt_hold, o.cnt_hold);
    sub(&mut st.cnt_lock, o.cnt_lock);
    sub(&mut st.cond_waits, o.cond_waits);
    sub(&mut st.cond_wait_ns, o.cond_wait_ns);
    for (a, b) in st.wait_hist.iter_mut().zip(o.wait_hist.iter()) {
        sub(a, *b);
    }
    for (a, b) in st.hold_hist.iter_mut().zip(o.hold_hist.iter()) {
        sub(a, *b);
    }
    if st.contended == 0 {
        st.wait_ns_max = 0;
    }
    if st.holds_timed == 0 {
        st.hold_ns_max = 0;
    }
}

/// Per-CPU figures less the CPU baseline.
///
/// # Safety
/// As [`base`].
pub(crate) unsafe fn subtract_cpu(cpu: usize, acq: &mut u64, contended: &mut u64, wait: &mut u64) {
    // SAFETY: by the caller's contract.
    let b = unsafe { base() };
    if let Some(c) = b.cpus.get(cpu).filter(|_| b.set) {
        *acq = acq.saturating_sub(c[0]);
        *contended = contended.saturating_sub(c[1]);
        *wait = wait.saturating_sub(c[2]);
    }
}

/// Whether a record's statistics (after subtraction) hold nothing at all.
pub(crate) fn is_zero(st: &Stats) -> bool {
    st.is_empty() && st.holds_timed == 0 && st.hold_ns_total == 0 && st.contended == 0
}

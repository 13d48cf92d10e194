//! A fork child's start, deferred to its first lock.
//!
//! A fork child shares the collector's data and tables with its parent (`shared.rs`: shared
//! mappings, so that the watcher sees them) until it copies them (`shared::after_fork`: the
//! parent's pagemap read, the ranges copied and moved over the inherited ones). Most fork
//! children take no lock: a shell's child execs at once. So the fork handler (`init.rs`)
//! does only what needs no table ([`defer`]): it notes the child's start on a page of its own and
//! closes the descriptors of its parent's guardian and control socket; the copy and the rest of
//! the child's start ([`child_start`]) wait for its first metered call ([`start_pending`],
//! from `state::enter`), or for its end when that must write a profile file. A child that execs
//! or exits before its first lock appends its idle line (`dump/pending.rs`) and builds the exec's
//! environment (`dump/exec.rs`) in buffers of that page, reading only what its parent never
//! changes after its constructor (settings, the manifest's name, the calibration).
//!
//! The page is the one of `state::own_process` (`MADV_WIPEONFORK`: zero in every child with a
//! memory of its own; private): its first byte says whether the process owns the tables (1),
//! is a fork child that has not copied them yet ([`PENDING`]), is copying them ([`STARTING`]),
//! or is a `_Fork`/raw `clone` child, which never meters (0; a child whose copy failed stores it
//! too). Until its first lock a pending child's hooks pass through, as a `_Fork` child's do. Its
//! threads' first locks race: one copies, the others wait for it (`sched_yield`) and are then
//! counted in the child's own tables.
//!
//! Where a control socket is wanted, the fork handler of a deferred child starts its control
//! thread (`control::start_waiter`: no hook creates a thread), which first waits on a futex on
//! the word of that byte ([`wait_until_own`]), touching nothing of ours (our memory is still the
//! parent's), until the copy is done (the copying thread, having reset the control's statics as
//! `control::after_fork` does, wakes it) or failed (it ends); it then binds the child's socket
//! and serves. A child that execs or exits before its first lock never bound a socket.
//!
//! The child starts deferred only where its parent was metering plainly at the fork (state
//! `READY`, no `--delay`/`--duration`/`--interval` timer, no lock swapping) and shares its data
//! (else the fork handler starts it at once, as before). The parent's state at the fork is
//! passed on through a page the fork copies ([`Inherit`], written by the parent's prepare
//! handler): a copy made later holds the parent's state then, which an exec or exit of the
//! parent right after the fork has ended (so did the fork handler's copy, when the parent got
//! there first: such a child was not metered). What the copy takes from the parent is what the
//! parent had at the child's first lock rather than at the fork: the same settings and
//! calibration, and lock identities and names that the parent may have added since (its tables
//! of counts, the parent's shards, are not the child's: reset as at a fork). A parent that
//! exec'd meanwhile no longer maps the shared pages: the copy then learns which pages hold data
//! from `mincore` (`shared::after_fork`).

use crate::dump;
use crate::state::{self, READY, STATE};
use core::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering::*};
use lockmeter_core::clock;

/// The process owns the collector's tables.
const OWN: u8 = 1;
/// A fork child that has not copied its tables yet.
const PENDING: u8 = state::OWN_PENDING;
/// A fork child copying them (its first lock, on one thread).
const STARTING: u8 = 3;
/// What a fork child whose copy failed stores: the byte of a `_Fork` child (never metered).
const FAILED: u8 = 0;

thread_local! {
    /// Set on the thread that copies the tables, while it does.
    static COPYING: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
}

/// The facts of a pending child, on the first page of [`Private`].
#[repr(C, align(4096))]
struct Facts {
    /// `state::own_process`'s byte: first, where that page's pointer points.
    own: AtomicU8,
    /// Set while the child's end (idle line) is written, and after.
    ending: AtomicBool,
    /// Set while a thread builds the exec environment.
    exec_busy: AtomicBool,
    /// Whether the child's guardian is armed (its parent had one or was to get one).
    armed: AtomicBool,
    /// Whether the fork handler started a control thread that waits for the copy
    /// ([`wait_until_own`]: woken on the first 4 bytes, `own` to `armed`).
    waiter: AtomicBool,
    start_unix_ns: AtomicU64,
    start_mono_ns: AtomicU64,
    start_ticks: AtomicU64,
    /// What the fork handler cost.
    start_cost_ns: AtomicU64,
}

/// What a fork child inherits from its parent (a page the fork copies, not wiped), written by
/// the parent just before the fork: its state then (the shared memory holds the parent's state
/// now, which may have changed before the child looks: an exec right after the fork writes the
/// parent's profile and ends its metering), and a pending parent's verdict.
#[repr(C, align(4096))]
struct Inherit {
    /// The parent is a pending fork child itself.
    pending: AtomicBool,
    armed: AtomicBool,
    /// The parent's `STATE` and `live::PAUSED` at the fork.
    state: AtomicU8,
    paused: AtomicBool,
}

/// The process's private pages (`state::init_own` maps [`PRIVATE_LEN`] bytes, the first
/// [`WIPED_LEN`] zero in every child): the facts, the buffers of a pending child's end and exec
/// (touched only then), and what a pending process's fork children inherit.
#[repr(C)]
struct Private {
    facts: Facts,
    idle: dump::IdleBufs,
    env: dump::ExecEnv,
    inherit: Inherit,
}

/// The size of the private mapping (`MAP_NORESERVE`: pages never touched cost nothing).
pub(crate) const PRIVATE_LEN: usize = size_of::<Private>().next_multiple_of(4096);
/// The part of it that the kernel zeroes in a child (`MADV_WIPEONFORK`).
pub(crate) const WIPED_LEN: usize = core::mem::offset_of!(Private, inherit);

/// The private pages, or null where there are none (no `MADV_WIPEONFORK`: a fork child then
/// starts at once).
fn private() -> *mut Private {
    state::own_page().cast()
}

fn facts() -> Option<&'static Facts> {
    // SAFETY: the private mapping lives as long as the process and holds a `Facts` first (all
    // atomics: any bytes, zero included, are valid).
    unsafe { private().cast::<Facts>().as_ref() }
}

fn inherit() -> Option<&'static Inherit> {
    // SAFETY: as in `facts`; `inherit` is a field of the mapping's `Private`.
    unsafe { private().as_ref().map(|p| &p.inherit) }
}

/// Before a fork (`init::on_fork_prepare`): a pending process passes its verdict on (its own
/// state is still its parent's, which may have changed since).
pub(crate) fn before_fork() {
    if let (Some(f), Some(i)) = (facts(), inherit()) {
        i.armed.store(f.armed.load(Relaxed), Relaxed);
        i.pending.store(pending(), Relaxed);
        let st = if pending() { READY } else { STATE.load(Relaxed) };
        i.state.store(st, Relaxed);
        i.paused.store(!pending() && crate::live::PAUSED.load(Relaxed), Relaxed);
    }
}

/// In a fork child whose tables were just copied (`init.rs`, or [`start_pending`]): the state
/// its parent had at the fork, if it was metering or paused then (the copy holds the parent's
/// state now). Where the page could not be made, the copy's state stands.
pub(crate) fn restore_state() {
    if let Some(i) = inherit() {
        let st = i.state.load(Relaxed);
        if st == READY || st == crate::state::PAUSED {
            crate::live::PAUSED.store(i.paused.load(Relaxed), Relaxed);
            STATE.store(st, Release);
        }
    }
}

/// After a fork, in the parent (`init::on_fork_parent`).
pub(crate) fn after_fork_in_parent() {
    if let Some(i) = inherit() {
        i.pending.store(false, Relaxed);
    }
}

/// Whether this process is a fork child that has not copied its tables yet.
#[inline(always)]
pub(crate) fn pending() -> bool {
    state::fork_pending()
}

/// The fork handler: defers the child's start when it can. True: the child is pending (its
/// start is [`start_pending`]); false: the caller starts it now. `t0`: when the handler began.
pub(crate) fn defer(t0: u64) -> bool {
    let (Some(f), Some(i)) = (facts(), inherit()) else { return false };
    // The child of a pending parent: the state in memory is its grandparent's (or older), the
    // verdict its parent's, whose descriptors of theirs were closed at its own fork.
    let from_pending = i.pending.swap(false, Relaxed);
    if !from_pending
        && (i.state.load(Relaxed) != READY
            || i.paused.load(Relaxed)
            || crate::control::timers()
            || crate::swap::active()
            || crate::swap_rw::RW_ON.load(Relaxed) != 0
            || !crate::shared::active())
    {
        return false;
    }
    f.start_unix_ns.store(clock::realtime_ns(), Relaxed);
    f.start_mono_ns.store(clock::monotonic_ns(), Relaxed);
    f.start_ticks.store(clock::now(), Relaxed);
    if from_pending {
        f.armed.store(i.armed.load(Relaxed), Relaxed);
    } else {
        // The parent's descriptors that must not stay open in the child (its guardian's exec
        // pipe: the guardian learns of the parent's exec from its hang-up; its listening
        // socket).
        f.armed.store(crate::guard::close_inherited(), Relaxed);
        crate::control::close_inherited();
    }
    f.own.store(PENDING, Release);
    // The control thread (if a socket is wanted) starts now, outside any hook, and waits until
    // the tables are the child's own: it writes nothing of ours before (they may still be
    // shared with the parent).
    f.waiter
        .store(crate::control::start_waiter(control_waiter, own_word(f).as_ptr().cast()), Relaxed);
    f.start_cost_ns.store(clock::monotonic_ns().saturating_sub(t0).max(1), Relaxed);
    true
}

/// The aligned 4 bytes that begin with `own` (the futex word of [`wait_until_own`]).
fn own_word(f: &Facts) -> &AtomicU32 {
    // SAFETY: `Facts` is page-aligned and starts with four one-byte atomics: its first 4 bytes
    // are an aligned u32 of atomics, valid for any value.
    unsafe { &*(f as *const Facts).cast::<AtomicU32>() }
}

/// The control thread of a pending child (`control::start_waiter`): once the child's tables are
/// its own, binds its socket and serves; ends if they could not be copied.
extern "C" fn control_waiter(word: *mut core::ffi::c_void) -> *mut core::ffi::c_void {
    crate::control::name_thread();
    if wait_until_own(word.cast()) {
        crate::control::bind_and_serve();
    }
    core::ptr::null_mut()
}

/// [`control_waiter`], before anything else: waits (futex) until the child's tables are its own
/// (true), or their copy failed (false). Touches only `word`, `own`'s futex word on the private
/// page.
fn wait_until_own(word: *const AtomicU32) -> bool {
    // SAFETY: `own_word`'s pointer, on the private mapping, which lives as long as the process.
    let word = unsafe { &*word };
    loop {
        let w = word.load(Acquire);
        match w.to_ne_bytes()[0] {
            OWN => return true,
            PENDING | STARTING => {
                // Returns at once if the word changed meanwhile (another of its bytes did, or
                // `own`): the loop looks again.
                crate::guard::raw(
                    libc::SYS_futex,
                    [word.as_ptr() as usize, libc::FUTEX_WAIT as usize, w as usize, 0],
                );
            }
            _ => return false,
        }
    }
}

/// A pending child's first metered call (or an end that writes a profile file): copies its
/// tables and starts it as the fork handler would have, with its start as noted then. True when
/// the process owns its tables now (this call or another thread's copied them: a call that finds
/// another thread copying waits for it); false when they could not be copied (then it is never
/// metered).
#[cold]
#[inline(never)]
pub(crate) fn start_pending() -> bool {
    let Some(f) = facts() else { return false };
    if let Err(mut was) = f.own.compare_exchange(PENDING, STARTING, AcqRel, Acquire) {
        if COPYING.get() {
            // The copying thread itself (a lock in a signal handler during the copy): passes.
            return false;
        }
        // Another thread copies them: this one's acquisition must wait for the tables it is to
        // be counted in (a copy takes well under a millisecond).
        while was == STARTING {
            // SAFETY: sched_yield has no preconditions.
            unsafe { libc::sched_yield() };
            was = f.own.load(Acquire);
        }
        return was == OWN;
    }
    let saved = crate::sys::errno();
    let t0 = clock::monotonic_ns();
    COPYING.set(true);
    let ok = child_start(f.armed.load(Relaxed), Some(f.waiter.load(Relaxed)));
    COPYING.set(false);
    if ok {
        // The copy holds what the parent has now: the child's own state is the fork's.
        restore_state();
        dump::START_UNIX_NS.store(f.start_unix_ns.load(Relaxed), Relaxed);
        dump::START_MONO_NS.store(f.start_mono_ns.load(Relaxed), Relaxed);
        dump::START_TICKS.store(f.start_ticks.load(Relaxed), Relaxed);
        // The child's CPU clock started at the fork.
        crate::cost::START_CPU_NS.store(0, Relaxed);
        let took = clock::monotonic_ns().saturating_sub(t0).max(1);
        dump::START_COST_NS.store(f.start_cost_ns.load(Relaxed).saturating_add(took), Relaxed);
    }
    f.own.store(if ok { OWN } else { FAILED }, Release);
    if f.waiter.load(Relaxed) {
        // The control thread waits for this (`wait_until_own`).
        crate::guard::raw(
            libc::SYS_futex,
            [own_word(f).as_ptr() as usize, libc::FUTEX_WAKE as usize, 1, 0],
        );
    }
    crate::sys::set_errno(saved);
    ok
}

/// Whether this process owns its tables, starting a pending child first (a call of the program
/// that writes them outside a lock's hooks, such as `lockmeter_name_lock`).
pub(crate) fn own_or_start() -> bool {
    state::own_process() || (pending() && start_pending())
}

/// A pending child's facts for its end (`dump/pending.rs`): its start (realtime ns) and what
/// its fork handler cost.
pub(crate) fn start_facts() -> Option<(u64, u64)> {
    facts().map(|f| (f.start_unix_ns.load(Relaxed), f.start_cost_ns.load(Relaxed)))
}

/// A pending child's end, once: true for the caller that is to write it (until [`end_undone`]).
pub(crate) fn end_once() -> bool {
    facts().is_some_and(|f| !f.ending.swap(true, AcqRel))
}

/// The buffers of a pending child's idle line, for the caller [`end_once`] chose.
///
/// # Safety
/// Only that caller uses them, and drops the borrow before it could call this again.
#[allow(clippy::mut_from_ref)]
pub(crate) unsafe fn idle_bufs() -> Option<&'static mut dump::IdleBufs> {
    let p = private();
    // SAFETY: the private pages' buffer (all zero is valid), by the caller's contract its only
    // user.
    (!p.is_null()).then(|| unsafe { &mut *core::ptr::addr_of_mut!((*p).idle) })
}

/// The exec environment's buffer of a pending child, for the one thread that sets the flag
/// (`None`: another thread is exec-ing, or there are no private pages).
pub(crate) fn exec_env_buf() -> Option<&'static mut dump::ExecEnv> {
    let f = facts()?;
    if f.exec_busy.swap(true, Acquire) {
        return None;
    }
    // SAFETY: the private pages' buffer (all zero is valid), ours while `exec_busy` is set.
    Some(unsafe { &mut *core::ptr::addr_of_mut!((*private()).env) })
}

/// A pending child's exec failed, or its environment did not fit: it may end (or exec) again.
pub(crate) fn end_undone() {
    if let Some(f) = facts() {
        f.exec_busy.store(false, Release);
        f.ending.store(false, Release);
    }
}

/// A fork child's start, in its fork handler (`init::on_fork_child`) or at its first lock
/// ([`start_pending`]): its own copy of the collector's shared memory, then a fresh state
/// (`armed`: its guardian starts at its first metered acquisition; `waiter`: at the first lock,
/// whether a control thread waits for the copy, see `control::after_fork`). False when it cannot
/// be metered (nothing of ours may then be written: the caller leaves `own_process` false).
pub(crate) fn child_start(armed: bool, waiter: Option<bool>) -> bool {
    // First of all, the child's own copy of the collector's shared memory.
    match crate::shared::after_fork(dump::PID.load(Relaxed)) {
        crate::shared::Fork::Own => {}
        crate::shared::Fork::DataOnly => {
            STATE.store(state::DISABLED, Release);
            return false;
        }
        crate::shared::Fork::Nothing => return false,
    }
    // The parent's shards stay behind, unused.
    state::NEXT_THREAD.store(0, Relaxed);
    for s in state::SHARDS.iter() {
        s.store(core::ptr::null_mut(), Relaxed);
    }
    state::THREADS_REFUSED.store(0, Relaxed);
    state::ACQ_NO_SHARD.store(0, Relaxed);
    crate::unwind::reset_pool();
    dump::reset_for_child();
    crate::longest::reset_for_child();
    crate::lost::reset_for_child();
    crate::control::after_fork(waiter);
    crate::swap::reset_for_child();
    crate::swap_rw::reset_for_child();
    crate::guard::after_fork(armed);
    true
}

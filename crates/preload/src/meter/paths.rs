//! The acquire and release paths the hooks call: a blocking lock (trylock first, then the timed
//! wait), a trylock, an unlock, and a condvar wait's release and re-acquisition.

use super::record::{
    Contention, acq_cost_sample, cost_sample, decisions_quiet, held_site, holding, refill,
};
use super::{
    How, acquired, acquired_found, fast, find_held, hold_is_timed, lookup, released, releasing,
    try_failed, try_failed_found, wait_begin, wait_end,
};
use crate::state::{CFG, Cx};
use core::ffi::c_int;
use core::sync::atomic::Ordering::Relaxed;
use lockmeter_core::{LockKind, Mode, clock};

/// A whole blocking acquisition: trylock first, then the blocking call only if that found the
/// lock held. Returns exactly what `lock()` alone would have returned.
///
/// The usual case (the trylock succeeds, no sampling decision is due, the record is in the
/// thread's lookup cache) runs straight through here (`fast`); the timed acquisition (one in
/// `cost::SAMPLE`) and everything after a failed trylock run out of line.
#[inline(always)]
pub(crate) fn lock_with(
    addr: usize,
    kind: LockKind,
    mode: Mode,
    site: usize,
    try_lock: impl FnOnce() -> c_int,
    lock: impl FnOnce() -> c_int,
) -> c_int {
    let Some(cx) = crate::state::enter() else { return lock_unmetered(lock) };
    let Some(found) = fast::quiet_hit::<false>(&cx, addr, kind, mode, site) else {
        core::hint::cold_path();
        return lock_general(cx, addr, kind, mode, site, try_lock, lock);
    };
    // The trylock before the identity's check: the locked instruction waits for every load
    // before it, and the slot's line is one more miss on a cold pair.
    let r = try_lock();
    if r != 0 && r != libc::EOWNERDEAD {
        core::hint::cold_path();
        return after_trylock_then_leave::<false>(cx, r, addr, kind, mode, site, lock);
    }
    if !super::current(&found) {
        return after_trylock_then_leave::<true>(cx, r, addr, kind, mode, site, lock);
    }
    fast::acquired_fast::<false>(&cx, found, addr, kind, mode, site);
    crate::state::leave(cx);
    r
}

/// [`lock_with`] of an acquisition outside metering (out of line, as [`lock_general`]).
#[cold]
#[inline(never)]
fn lock_unmetered(lock: impl FnOnce() -> c_int) -> c_int {
    crate::state::unmetered(lock())
}

/// [`lock_with`] of an acquisition the fast path does not take (out of line: the hook's fast path
/// stays short).
#[inline(never)]
fn lock_general(
    cx: Cx,
    addr: usize,
    kind: LockKind,
    mode: Mode,
    site: usize,
    try_lock: impl FnOnce() -> c_int,
    lock: impl FnOnce() -> c_int,
) -> c_int {
    let r = if acq_cost_sample(&cx) {
        lock_timed(&cx, addr, kind, mode, site, try_lock, lock)
    } else {
        lock_metered::<false>(&cx, addr, kind, mode, site, try_lock, lock)
    };
    crate::state::leave(cx);
    r
}

/// [`lock_metered`] of an acquisition the cost estimate times.
#[cold]
#[inline(never)]
fn lock_timed(
    cx: &Cx,
    addr: usize,
    kind: LockKind,
    mode: Mode,
    site: usize,
    try_lock: impl FnOnce() -> c_int,
    lock: impl FnOnce() -> c_int,
) -> c_int {
    lock_metered::<true>(cx, addr, kind, mode, site, try_lock, lock)
}

/// The metered acquisition of [`lock_with`]; `TIMED`: timed for the cost estimate.
#[inline(always)]
fn lock_metered<const TIMED: bool>(
    cx: &Cx,
    addr: usize,
    kind: LockKind,
    mode: Mode,
    site: usize,
    try_lock: impl FnOnce() -> c_int,
    lock: impl FnOnce() -> c_int,
) -> c_int {
    let l0 = crate::cost::edge_if(TIMED);
    // Lookups that missed the thread's cache are timed on their own (`cost::SlowLookup`).
    let slow0 = if TIMED { cx.shard.cost.slow.get() } else { 0 };
    // The record is found before the lock is taken: its cache misses stay out of the critical
    // section (another thread may be waiting for it). Timed, as the fast path does it (its
    // identity checked after the trylock: `lock_with`).
    let found = if TIMED {
        lookup::<false>(cx, addr, kind, mode, site)
    } else {
        lookup::<true>(cx, addr, kind, mode, site)
    };
    let l1 = crate::cost::now_if(TIMED);
    let r = try_lock();
    if r == 0 || r == libc::EOWNERDEAD {
        let a0 = crate::cost::now_if(TIMED);
        // A stale line (rare): the record found again, inside the critical section; that
        // lookup is timed on its own, so this acquisition's part inside is not.
        let (found, stale) = match found {
            Ok(f) if TIMED && !super::current(&f) => {
                (lookup::<true>(cx, addr, kind, mode, site), true)
            }
            found => (found, false),
        };
        // Read before the acquisition is recorded (which makes this thread the last owner).
        let moved = TIMED && moved_here(cx, &found);
        // A timed acquisition that the fast path would have taken but for this decision records
        // with the fast path's code: the cost estimate times the path most acquisitions take.
        let quick = match found {
            Ok(f) if TIMED && kind != LockKind::Semaphore && decisions_quiet(cx, mode) => {
                fast::record_immediate::<false>(cx, f, addr, kind, mode, site);
                true
            }
            found => {
                acquired_found(cx, found, addr, kind, mode, site, How::Immediate, None);
                false
            }
        };
        if TIMED {
            let c = &cx.shard.cost;
            if !stale {
                crate::cost::add(&c.acq_timed, &c.acq_ticks, a0, crate::cost::edge_if(true));
            }
            if c.slow.get() == slow0 {
                crate::cost::add(&c.acq_out_timed, &c.acq_out_ticks, l0, l1);
            }
            if moved {
                c.acq_moved.add(1);
            } else {
                crate::cost::add_out(&c.acq_real_timed, &c.acq_real_ticks, l1, a0);
            }
        }
        if quick {
            // SAFETY: busy flag held.
            refill(unsafe { cx.private() });
        }
        r
    } else {
        lock_not_taken(cx, r, addr, kind, mode, site, lock)
    }
}

/// Whether the lock of a timed acquisition was taken last by another thread (its record found),
/// for the cost estimate: its line came from another CPU, metered or not. The slot keeps the
/// last exclusive owner: a read acquisition counts as moved when another thread wrote last.
#[inline(always)]
fn moved_here(cx: &Cx, found: &Result<super::Found, super::Lost>) -> bool {
    // SAFETY: busy flag held; the borrow ends here.
    let me = unsafe { cx.private() }.owner;
    found.as_ref().is_ok_and(|(_, slot, _)| {
        let last = slot.last_owner.load(Relaxed);
        last != 0 && last != me
    })
}

/// What [`lock_with`]'s fast path does after a trylock that answered `r`, then leaves metering
/// (`cx` by value: the fast path keeps it in registers). `TAKEN`: the trylock took the lock but
/// the cached line was stale (the lock was initialized or destroyed at its address since the
/// line was placed: rare), and the metered path records the acquisition, its trylock being the
/// one already made (never timed: it would time nothing). Else [`lock_not_taken`].
#[inline(never)]
fn after_trylock_then_leave<const TAKEN: bool>(
    cx: Cx,
    r: c_int,
    addr: usize,
    kind: LockKind,
    mode: Mode,
    site: usize,
    lock: impl FnOnce() -> c_int,
) -> c_int {
    let r = if TAKEN {
        // Its decision made as the general path makes it (every countdown moves exactly: see
        // `record::refill`), the timing left out.
        let _ = acq_cost_sample(&cx);
        lock_metered::<false>(&cx, addr, kind, mode, site, move || r, lock)
    } else {
        lock_not_taken(&cx, r, addr, kind, mode, site, lock)
    };
    crate::state::leave(cx);
    r
}

/// The trylock of a blocking acquisition answered `r`, not a success.
#[inline(never)]
fn lock_not_taken(
    cx: &Cx,
    r: c_int,
    addr: usize,
    kind: LockKind,
    mode: Mode,
    site: usize,
    lock: impl FnOnce() -> c_int,
) -> c_int {
    if r == libc::ENOTRECOVERABLE {
        // What the blocking call would answer too (and it must not be called: glibc's trylock
        // may leave a not-recoverable robust mutex's word set).
        r
    } else if r == libc::EBUSY {
        wait_for(cx, addr, kind, mode, site, lock)
    } else {
        // Another error (EINVAL, EAGAIN, EDEADLK...): let the blocking call give its own answer.
        lock_uncontended(cx, addr, kind, mode, site, lock)
    }
}

/// The lock was found held: gathers who holds it and where we are (before the clock starts, so
/// that unwinding is never counted as wait), then blocks in `lock` and records the wait.
#[inline(always)]
pub(super) fn wait_for(
    cx: &Cx,
    addr: usize,
    kind: LockKind,
    mode: Mode,
    site: usize,
    lock: impl FnOnce() -> c_int,
) -> c_int {
    let slot = wait_begin(addr, kind);
    let g0 = clock::now();
    let who = Contention::gather(cx, slot, site);
    let t0 = clock::now();
    cx.shard.cost.gather_ticks.add(t0.saturating_sub(g0));
    let r = lock();
    let t1 = clock::now();
    wait_end(slot);
    if r == 0 || r == libc::EOWNERDEAD {
        let timed = acq_cost_sample(cx);
        acquired(cx, addr, kind, mode, site, How::Waited { t0, t1 }, Some(&who));
        if timed {
            let c = &cx.shard.cost;
            crate::cost::add(&c.acq_timed, &c.acq_ticks, t1, crate::cost::edge_if(true));
        }
    } else if r == libc::ETIMEDOUT {
        try_failed(cx, addr, kind, mode, site);
    }
    r
}

/// Calls `lock` without timing it, and records the acquisition if it succeeded.
#[inline(always)]
pub(super) fn lock_uncontended(
    cx: &Cx,
    addr: usize,
    kind: LockKind,
    mode: Mode,
    site: usize,
    lock: impl FnOnce() -> c_int,
) -> c_int {
    let r = lock();
    if r == 0 || r == libc::EOWNERDEAD {
        acquired(cx, addr, kind, mode, site, How::Immediate, None);
    }
    r
}

/// A whole blocking acquisition that must not try the lock first (robust mutexes, whose trylock
/// has side effects): contention is read from the lock word instead. `held_by_other(tid)` tells
/// whether another thread than `tid` holds the lock now.
#[inline(always)]
pub(crate) fn lock_peek(
    addr: usize,
    kind: LockKind,
    mode: Mode,
    site: usize,
    held_by_other: impl FnOnce(u32) -> bool,
    lock: impl FnOnce() -> c_int,
) -> c_int {
    let Some(cx) = crate::state::enter() else { return crate::state::unmetered(lock()) };
    let r = if held_by_other(cx.shard.tid.load(Relaxed)) {
        wait_for(&cx, addr, kind, mode, site, lock)
    } else {
        lock_uncontended(&cx, addr, kind, mode, site, lock)
    };
    crate::state::leave(cx);
    r
}

/// A trylock.
#[inline(always)]
pub(crate) fn trylock_with(
    addr: usize,
    kind: LockKind,
    mode: Mode,
    site: usize,
    try_lock: impl FnOnce() -> c_int,
) -> c_int {
    let Some(cx) = crate::state::enter() else { return crate::state::unmetered(try_lock()) };
    if let Some(found) = fast::quiet_hit::<true>(&cx, addr, kind, mode, site) {
        let r = try_lock();
        if r == 0 || r == libc::EOWNERDEAD {
            fast::acquired_fast::<true>(&cx, found, addr, kind, mode, site);
        } else if r == libc::EBUSY {
            try_failed_found(&cx, Ok(found));
        }
        crate::state::leave(cx);
        return r;
    }
    let found = lookup::<true>(&cx, addr, kind, mode, site);
    let r = try_lock();
    if r == 0 || r == libc::EOWNERDEAD {
        acquired_found(&cx, found, addr, kind, mode, site, How::Immediate, None);
    } else if r == libc::EBUSY {
        try_failed_found(&cx, found);
    }
    crate::state::leave(cx);
    r
}

/// Notes that this thread enters a condvar wait on mutex `addr` at `t0`, and whether another
/// thread wanted the mutex then (for `cnt_hold` of the hold that the wait ends).
#[inline(always)]
pub(crate) fn cond_begin(cx: &Cx, addr: usize, site: usize, t0: u64) {
    let wanted = find_held(cx, addr).is_some_and(|i| {
        // SAFETY: busy flag held.
        let p = unsafe { cx.private() };
        // SAFETY: registry slots are never unmapped.
        p.held
            .get(i)
            .is_some_and(|h| !h.slot.is_null() && unsafe { &*h.slot }.wanted.load(Relaxed) != 0)
    });
    // SAFETY: busy flag held.
    let p = unsafe { cx.private() };
    p.cond_addr = addr;
    p.cond_site = site;
    p.cond_t0 = t0;
    p.cond_wanted = wanted;
}

/// The condvar wait returned normally.
#[inline(always)]
pub(crate) fn cond_end(cx: &Cx) {
    // SAFETY: busy flag held.
    unsafe { cx.private() }.cond_addr = 0;
}

/// A condvar wait released mutex `addr` at `t0` and re-acquired it at `t1`: ends the hold that
/// was on the held stack, and records the re-acquisition (condvar wait, kept apart from lock
/// wait).
pub(crate) fn cond_reacquired(cx: &Cx, addr: usize, site: usize, t0: u64, t1: u64) {
    // SAFETY: busy flag held.
    let wanted = unsafe { cx.private() }.cond_wanted;
    if let Some(i) = find_held(cx, addr) {
        releasing(cx, i);
        released(cx, i, t0, wanted);
    }
    acquired(cx, addr, LockKind::Mutex, Mode::Exclusive, site, How::CondWait { t0, t1 }, None);
}

/// An unlock of the mutex of a condvar wait this thread is still in: the thread was cancelled
/// inside the wait, and glibc re-acquired the mutex while unwinding. Records that now.
#[cold]
pub(super) fn cancelled_cond_reacquire(cx: &Cx, addr: usize) {
    let (site, t0) = {
        // SAFETY: busy flag held; the borrow ends before `cond_reacquired` takes its own.
        let p = unsafe { cx.private() };
        p.cond_addr = 0;
        (p.cond_site, p.cond_t0)
    };
    cond_reacquired(cx, addr, site, t0, clock::now());
}

/// An unlock. As in [`lock_with`], the usual case runs straight through (`fast`), the release the
/// cost estimate times out of line.
#[inline(always)]
pub(crate) fn unlock_with(addr: usize, unlock: impl FnOnce() -> c_int) -> c_int {
    let Some(cx) = crate::state::enter() else { return unlock() };
    if let Some(len) = fast::releasable(&cx, addr) {
        if fast::release_is_timed(&cx) {
            return fast::release_timed(cx, len, false, unlock);
        }
        return fast::release(cx, addr, len, unlock);
    }
    unlock_general(cx, addr, unlock)
}

/// [`unlock_with`] of a mutex; `infallible`: its real unlock cannot fail (glibc's normal and
/// adaptive mutexes: it returns 0 without checking the owner). `None`: the caller makes the real
/// unlock call itself, as its last (a tail call): metering is off, or an untimed hold ended
/// before it (nothing to record after it).
#[inline(always)]
pub(crate) fn unlock_mutex_with(
    addr: usize,
    infallible: bool,
    unlock: impl FnOnce() -> c_int + Copy,
) -> Option<c_int> {
    let cx = match crate::state::enter_quick() {
        crate::state::Entered::Yes(cx) => cx,
        crate::state::Entered::No => return None,
        crate::state::Entered::Slow => {
            return Some(unlock_mutex_entering(addr, infallible, unlock));
        }
    };
    unlock_mutex_metered(cx, addr, infallible, unlock)
}

/// [`unlock_mutex_with`] of a thread that [`crate::state::enter_quick`] could not enter (out of
/// line: nothing is kept across its call).
#[cold]
#[inline(never)]
fn unlock_mutex_entering(
    addr: usize,
    infallible: bool,
    unlock: impl FnOnce() -> c_int + Copy,
) -> c_int {
    let Some(cx) = crate::state::enter() else { return unlock() };
    unlock_mutex_metered(cx, addr, infallible, unlock).unwrap_or_else(unlock)
}

/// [`unlock_mutex_with`] in metering.
#[inline(always)]
fn unlock_mutex_metered(
    cx: crate::state::Cx,
    addr: usize,
    infallible: bool,
    unlock: impl FnOnce() -> c_int + Copy,
) -> Option<c_int> {
    let Some(len) = fast::releasable(&cx, addr) else {
        core::hint::cold_path();
        return Some(unlock_general(cx, addr, unlock));
    };
    if fast::release_is_timed(&cx) {
        core::hint::cold_path();
        return Some(fast::release_timed(cx, len, infallible, unlock));
    }
    if infallible && fast::untimed(&cx, len) {
        fast::end_untimed(&cx, len);
        crate::state::leave(cx);
        return None;
    }
    Some(fast::release_out(cx, addr, len, unlock))
}

/// [`unlock_with`] of a release the fast path does not take.
#[inline(never)]
fn unlock_general(cx: Cx, addr: usize, unlock: impl FnOnce() -> c_int) -> c_int {
    // SAFETY: busy flag held.
    if unsafe { cx.private() }.cond_addr == addr {
        cancelled_cond_reacquire(&cx, addr);
    }
    let Some(i) = find_held(&cx, addr) else {
        crate::state::leave(cx);
        return unlock();
    };
    let r = if cost_sample(&cx, |p| &mut p.cost_rel) {
        unlock_timed(&cx, i, unlock)
    } else {
        unlock_metered::<false>(&cx, i, unlock)
    };
    crate::state::leave(cx);
    r
}

/// [`unlock_metered`] of a release the cost estimate times.
#[cold]
#[inline(never)]
fn unlock_timed(cx: &Cx, i: usize, unlock: impl FnOnce() -> c_int) -> c_int {
    unlock_metered::<true>(cx, i, unlock)
}

/// The metered release of held index `i` in [`unlock_with`]; `TIMED`: timed for the cost
/// estimate.
#[inline(always)]
fn unlock_metered<const TIMED: bool>(cx: &Cx, i: usize, unlock: impl FnOnce() -> c_int) -> c_int {
    let u0 = crate::cost::edge_if(TIMED);
    let t_rel = if hold_is_timed(cx, i) { clock::now() } else { 0 };
    let wanted = releasing(cx, i);
    let c = &cx.shard.cost;
    let (mut r0, mut u1) = (0, 0);
    let r = end_hold(cx, i, t_rel, wanted, || {
        if TIMED {
            r0 = clock::now();
            crate::cost::add(&c.rel_timed, &c.rel_ticks, u0, r0);
        }
        let r = unlock();
        u1 = crate::cost::now_if(TIMED && !wanted);
        r
    });
    if TIMED && u1 != 0 {
        crate::cost::add_out(&c.rel_out_timed, &c.rel_out_ticks, u1, crate::cost::edge_if(true));
        crate::cost::add_out(&c.rel_real_timed, &c.rel_real_ticks, r0, u1);
    }
    r
}

/// Runs the real release `release` of held index `i` and records the hold when it succeeds.
/// For lock-holder preemption (`run --kernel` reads the held stack of a switched-out thread),
/// the hold ends before the real call: a waker preempted inside it by the thread it woke is not
/// a preempted holder. The entry is put back if the release fails.
#[inline(always)]
pub(super) fn end_hold(
    cx: &Cx,
    i: usize,
    t_rel: u64,
    wanted: bool,
    release: impl FnOnce() -> c_int,
) -> c_int {
    // The site that took the lock, read while we still hold it (for the holder's stack).
    let acq_site = if wanted && CFG.frames.load(Relaxed) > 1 { held_site(cx, i) } else { 0 };
    // SAFETY: busy flag held.
    let held_addr = unsafe { cx.private() }.held.get_mut(i).map(|h| core::mem::take(&mut h.addr));
    let r = release();
    if r != 0 {
        release_failed(cx, i, held_addr);
        return r;
    }
    if wanted && CFG.frames.load(Relaxed) > 1 {
        holder_side(cx, i, t_rel, acq_site);
    }
    released(cx, i, t_rel, wanted);
    r
}

/// The real release of held index `i` failed: puts back the entry's address `held_addr`.
#[cold]
#[inline(never)]
fn release_failed(cx: &Cx, i: usize, held_addr: Option<usize>) {
    // SAFETY: busy flag held.
    if let (Some(h), Some(a)) = (unsafe { cx.private() }.held.get_mut(i), held_addr) {
        h.addr = a;
    }
}

/// The lock at held index `i`, acquired at call site `acq_site`, was released while another
/// thread wanted it: records the holder's side (counted, and timed one time in `cost::SAMPLE`).
#[inline(never)]
fn holder_side(cx: &Cx, i: usize, t_rel: u64, acq_site: u64) {
    let c = &cx.shard.cost;
    c.holding.add(1);
    let timed = cost_sample(cx, |p| &mut p.cost_holding);
    let h0 = crate::cost::now_if(timed);
    holding(cx, i, t_rel, acq_site);
    if timed {
        crate::cost::add(&c.holding_timed, &c.holding_ticks, h0, clock::now());
    }
}

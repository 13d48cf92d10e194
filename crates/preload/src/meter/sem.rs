//! The semaphore paths the hooks call (`sem_wait`, `sem_trywait`, `sem_timedwait`,
//! `sem_clockwait`, `sem_post`).
//!
//! `sem_*` return 0, or -1 with errno set. A semaphore is metered like a mutex whose trylock is
//! `sem_trywait` (EAGAIN: no token): an acquisition is a wait that returned 0, contended when the
//! first try found no token; a failed `sem_trywait` and a timed wait that timed out are trylock
//! failures; a wait interrupted by a signal (EINTR) is neither. A `sem_post` by a thread with the
//! semaphore on its held stack ends that hold (a binary semaphore used as a lock gets hold times);
//! any other post (a producer's) ends no hold and bumps the slot's epoch, which retires the
//! semaphore's entries on every thread's held stack (see `live`). Each function returns what the
//! real call returned and leaves errno as that call left it: errno is read right after it and set
//! again last.
//!
//! The usual calls take a fast path, as a mutex's do (`fast.rs`): a wait or try that takes a
//! token at once while no sampling decision is due and the thread's lookup cache holds the
//! record ([`sem_quiet_hit`], [`sem_acquired_fast`]), and a post that ends the hold on top of the
//! thread's held stack, of this semaphore, that no one waits for ([`sem_releasable`]). They
//! record what the general path records for the same call; between the real call and the hook's return they call nothing
//! that can set errno, so errno is the real call's without being read and set again.

use super::fast::{self, none_ended};
use super::paths::end_hold;
use super::record::{Contention, refill};
use super::{
    Found, How, TRY_WANTED, acquired, drop_ended_holds, find_held, hold_is_timed, lookup_hit,
    releasing, try_failed,
};
use crate::state::{CFG, Cx};
use core::ffi::c_int;
use core::sync::atomic::Ordering::Relaxed;
use lockmeter_core::{LockKind, Mode, clock};

/// The record and slot of a semaphore acquisition that may take the fast path (the caller
/// entered metering): a lookup-cache hit with no sampling decision due, and whether it is a quiet
/// one (`Private::quiet`, see `record::refill`). Without quiet acquisitions, no decision is due
/// when no countdown makes one (hold timing on or off, no stack samples: the defaults), as in a
/// thread that takes semaphores alone, whose cost countdown never starts (semaphore
/// acquisitions are not timed for the cost estimate). `None`: the general path.
#[inline(always)]
fn sem_quiet_hit(cx: &Cx, addr: usize, site: usize) -> Option<(Found, bool)> {
    // SAFETY: busy flag held; the borrow ends here.
    let quiet = unsafe { cx.private() }.quiet != 0;
    if !quiet && (CFG.hold_every.load(Relaxed) >= 2 || CFG.stack_sample.load(Relaxed) != 0) {
        return None;
    }
    lookup_hit::<true>(cx, addr, Mode::Exclusive, site).map(|f| (f, quiet))
}

/// Records a semaphore acquisition taken at once whose record and slot [`sem_quiet_hit`] gave
/// (`quiet`: a quiet one): what `acquired` records for it ([`fast::record_immediate`] of a
/// semaphore's hold).
#[inline(always)]
fn sem_acquired_fast(cx: &Cx, (found, quiet): (Found, bool), addr: usize, site: usize) {
    if quiet {
        // SAFETY: busy flag held; the borrow ends with this block.
        let p = unsafe { cx.private() };
        p.quiet -= 1;
        // A semaphore's general path does not move the cost estimate's countdown: its step
        // given back (see `record::refill`).
        p.cost_acq += 1;
    }
    fast::record_immediate::<true>(cx, found, addr, LockKind::Semaphore, Mode::Exclusive, site);
    // SAFETY: busy flag held.
    let p = unsafe { cx.private() };
    // The general path ends with `refill`, which makes quiet acquisitions of the cost
    // countdown's steps (none while it is 0).
    if !quiet && p.cost_acq != 0 {
        refill(p);
    }
}

/// Whether the post of `addr` may take the fast path (the caller entered metering): the top of
/// the thread's held stack is this semaphore's live hold, no other hold on it has ended, and no
/// one wants it (no failed try marked it, no thread is blocked in glibc on it). Then the general
/// path of [`sem_post_with`] has nothing to drop (`drop_ended_holds`), finds this hold on top
/// (`find_held`), and has no holder's side to record. Returns the held stack's length.
#[inline(always)]
fn sem_releasable(cx: &Cx, addr: usize) -> Option<usize> {
    // SAFETY: busy flag held; the borrow ends here.
    let p = unsafe { cx.private() };
    let len = p.held_len;
    let top = p.held.get(len.wrapping_sub(1))?;
    let ok = top.addr == addr
        && top.sem
        && !top.slot.is_null()
        && none_ended(p)
        // SAFETY: registry slots are never unmapped.
        && unsafe { &*top.slot }.wanted.load(Relaxed) == 0
        && !sem_has_waiters(addr);
    ok.then_some(len)
}

/// Whether threads are blocked in glibc on the semaphore at `addr`: glibc's `struct new_sem` on
/// 64-bit targets keeps the number of blocked waiters in the high half of its first `u64`.
#[inline(always)]
pub(super) fn sem_has_waiters(addr: usize) -> bool {
    // SAFETY: `addr` is the `sem_t` the program passed to `sem_post` (initialized, mapped and
    // 8-aligned), which glibc itself reads and writes with 64-bit atomics; a racy read is a hint.
    let data = unsafe { core::ptr::read_volatile(addr as *const u64) };
    data >> 32 != 0
}

/// `r` from a call made without metering, with errno `e` as that call left it.
#[inline(always)]
pub(super) fn sem_unmetered(r: c_int, e: c_int) -> c_int {
    let r = crate::state::unmetered(r);
    crate::sys::set_errno(e);
    r
}

/// A blocking semaphore wait (`sem_wait`, `sem_timedwait`, `sem_clockwait`): when `probe`,
/// `try_wait` (the real `sem_trywait`) first, and the real `wait` only when that found no token;
/// without `probe` (arguments glibc refuses before trying) only `wait`.
///
/// The real wait is a cancellation point, so it runs outside metering, like a condvar wait: the
/// busy flag is clear and no counter is raised across it (the holder's post learns of blocked
/// waiters from glibc's own count), so a thread cancelled inside it leaves nothing behind.
#[inline(always)]
pub(crate) fn sem_wait_with(
    addr: usize,
    site: usize,
    probe: bool,
    try_wait: impl FnOnce() -> c_int,
    wait: impl FnOnce() -> c_int,
) -> c_int {
    use crate::sys::{errno, set_errno};
    let kind = LockKind::Semaphore;
    let mode = Mode::Exclusive;
    let e0 = errno();
    let Some(cx) = crate::state::enter() else {
        let r = wait();
        return sem_unmetered(r, errno());
    };
    let mut who = None;
    if probe {
        let quick = sem_quiet_hit(&cx, addr, site);
        let r = try_wait();
        if r == 0
            && let Some(found) = quick
        {
            sem_acquired_fast(&cx, found, addr, site);
            crate::state::leave(cx);
            return 0;
        }
        let e = errno();
        if r == 0 {
            acquired(&cx, addr, kind, mode, site, How::Immediate, None);
            crate::state::leave(cx);
            set_errno(e);
            return 0;
        }
        if e == libc::EAGAIN {
            // Contended. The mark tells the holder's post that the lock was wanted even if this
            // thread takes the token before glibc counts it as a waiter; the next acquisition
            // clears it.
            let slot = crate::state::registry()
                .and_then(|reg| reg.lookup(addr as u64, kind))
                .map(|(_, s)| s);
            if let Some(s) = slot
                && s.wanted.load(Relaxed) & TRY_WANTED == 0
            {
                s.wanted.fetch_or(TRY_WANTED, Relaxed);
            }
            who = Some(Contention::gather(&cx, slot, site));
        }
    }
    crate::state::leave(cx);
    set_errno(e0);
    let t0 = if who.is_some() { clock::now() } else { 0 };
    let r = wait();
    let t1 = if who.is_some() { clock::now() } else { 0 };
    let e = errno();
    if let Some(cx) = crate::state::enter() {
        if r == 0 {
            let how = if who.is_some() { How::Waited { t0, t1 } } else { How::Immediate };
            acquired(&cx, addr, kind, mode, site, how, who.as_ref());
        } else if e == libc::ETIMEDOUT {
            try_failed(&cx, addr, kind, mode, site);
        }
        crate::state::leave(cx);
    }
    set_errno(e);
    r
}

/// `sem_trywait`: an acquisition, or a trylock failure (EAGAIN).
#[inline(always)]
pub(crate) fn sem_trywait_with(
    addr: usize,
    site: usize,
    try_wait: impl FnOnce() -> c_int,
) -> c_int {
    let Some(cx) = crate::state::enter() else {
        let r = try_wait();
        return sem_unmetered(r, crate::sys::errno());
    };
    let quick = sem_quiet_hit(&cx, addr, site);
    let r = try_wait();
    if r == 0
        && let Some(found) = quick
    {
        sem_acquired_fast(&cx, found, addr, site);
        crate::state::leave(cx);
        return 0;
    }
    let e = crate::sys::errno();
    if r == 0 {
        acquired(&cx, addr, LockKind::Semaphore, Mode::Exclusive, site, How::Immediate, None);
    } else if e == libc::EAGAIN {
        try_failed(&cx, addr, LockKind::Semaphore, Mode::Exclusive, site);
    }
    crate::state::leave(cx);
    crate::sys::set_errno(e);
    r
}

/// `sem_post`: the end of this thread's hold, or (a post by a thread that holds no token of it)
/// the end of every hold of the semaphore without a hold time.
#[inline(always)]
pub(crate) fn sem_post_with(addr: usize, post: impl FnOnce() -> c_int) -> c_int {
    let Some(cx) = crate::state::enter() else { return post() };
    if let Some(len) = sem_releasable(&cx, addr) {
        // What the general path records for it (the hold, when timed): the hold ended before
        // the real post and put back if the post fails.
        let r = fast::end_top::<false>(&cx, addr, len, post);
        crate::state::leave(cx);
        return r;
    }
    {
        // SAFETY: busy flag held; this borrow ends before `find_held` takes its own.
        let p = unsafe { cx.private() };
        if p.held_len > 0 {
            drop_ended_holds(p);
        }
    }
    let (r, e);
    if let Some(i) = find_held(&cx, addr) {
        let t_rel = if hold_is_timed(&cx, i) { clock::now() } else { 0 };
        let wanted = releasing(&cx, i);
        let wanted = wanted || sem_has_waiters(addr);
        // errno is read right after the real post, before the hold is recorded.
        let mut post_errno = 0;
        r = end_hold(&cx, i, t_rel, wanted, || {
            let r = post();
            post_errno = crate::sys::errno();
            r
        });
        e = post_errno;
    } else {
        r = post();
        e = crate::sys::errno();
        if r == 0
            && let Some((_, slot)) = crate::state::registry()
                .and_then(|reg| reg.lookup(addr as u64, LockKind::Semaphore))
        {
            slot.epoch.fetch_add(1, Relaxed);
        }
    }
    crate::state::leave(cx);
    crate::sys::set_errno(e);
    r
}

//! The uncontended fast paths: an acquisition that is quiet (no sampling decision due: see
//! `record::refill`), whose record the thread's lookup cache holds, and that the trylock takes
//! at once; a release of the lock on top of the held stack that no one wants. They record
//! exactly what the general paths (`mod.rs`, `paths.rs`) record for the same call; anything
//! else takes the general path, out of line. The acquisitions and releases that the cost
//! estimate times (`cost::SAMPLE`) run this same code when they could have taken the fast path
//! but for being timed, so that the estimate measures the path most calls take.

use super::{Found, lookup_hit, publish_holder, push_held};
use crate::state::{CFG, Cx, Held, Private, ticks_to_ns};
use core::ffi::c_int;
use core::sync::atomic::Ordering::Relaxed;
use lockmeter_core::stats::LiveStats;
use lockmeter_core::{LockKind, Mode};

/// The record and slot of an acquisition that may take the fast path (the caller entered
/// metering): not a semaphore, quiet, and a lookup-cache hit. `None`: the general path.
/// `CURRENT`: as for [`lookup_hit`].
#[inline(always)]
pub(super) fn quiet_hit<const CURRENT: bool>(
    cx: &Cx,
    addr: usize,
    kind: LockKind,
    mode: Mode,
    site: usize,
) -> Option<Found> {
    // SAFETY: busy flag held; the borrow ends here.
    if kind == LockKind::Semaphore || unsafe { cx.private() }.quiet == 0 {
        return None;
    }
    lookup_hit::<CURRENT>(cx, addr, mode, site)
}

/// Records an acquisition taken at once whose record and slot [`quiet_hit`] gave: what
/// `acquired_found` records for it, its sampling decisions known not due. `TRY`: a trylock
/// (whose general path does not move the cost estimate's countdown).
#[inline(always)]
pub(super) fn acquired_fast<const TRY: bool>(
    cx: &Cx,
    found: Found,
    addr: usize,
    kind: LockKind,
    mode: Mode,
    site: usize,
) {
    {
        // SAFETY: busy flag held; the borrow ends with this block.
        let p = unsafe { cx.private() };
        p.quiet -= 1;
        // The steps the general path would not have taken, given back (see `record::refill`).
        if TRY {
            p.cost_acq += 1;
        }
        if mode == Mode::Read && CFG.stack_sample.load(Relaxed) != 0 {
            p.stack_sample += 1;
        }
    }
    record_immediate::<false>(cx, found, addr, kind, mode, site);
}

/// What `acquired_found` records for an acquisition taken at once whose record and slot are
/// `found`, its sampling decisions made and none due. `SEM`: a semaphore's (`meter/sem.rs`): the
/// hold is pushed as a semaphore's, with the slot's epoch, and onto a held stack with other holds
/// too when none of them has ended (as each Python thread holds its own `_tstate_lock`).
#[inline(always)]
pub(super) fn record_immediate<const SEM: bool>(
    cx: &Cx,
    found: Found,
    addr: usize,
    kind: LockKind,
    mode: Mode,
    site: usize,
) {
    let (st, slot, _) = found;
    count_cpu(cx);
    st.acquisitions.add(1);
    // Hold timing on times every hold; off, none; sampled, this one is not due (it is quiet).
    let t_acq = if CFG.hold_every.load(Relaxed) == 0 { crate::state::now().max(1) } else { 0 };
    publish_holder(cx, st, slot, mode, site, t_acq, 0);
    let epoch = if SEM { slot.epoch.load(Relaxed) } else { 0 };
    // SAFETY: busy flag held.
    let p = unsafe { cx.private() };
    let len = p.held_len;
    if len == 0 {
        // The usual case: no other lock held, nothing on the stack to check.
        let h = &mut p.held[0];
        h.addr = addr;
        h.entry = st;
        h.slot = slot;
        h.t_acq = t_acq;
        h.mode = mode as u8;
        h.sem = SEM;
        h.epoch = epoch;
        p.held_len = 1;
        return;
    }
    // `push_held` of a semaphore hold when no hold on the stack has ended and there is room:
    // nothing to drop, no earlier entry to take out (a semaphore's holds are not matched by
    // address), nothing to give up.
    if SEM
        && none_ended(p)
        && let Some(top) = p.held.get_mut(len)
    {
        *top = Held { addr, entry: st, slot, t_acq, mode: mode as u8, sem: SEM, epoch };
        p.held_len = len + 1;
        return;
    }
    push_nested::<SEM>(cx.tls, cx.shard, addr, st, slot, t_acq, mode, kind);
}

/// Whether no semaphore hold on the thread's held stack `p` was ended by another thread's post
/// (see `live`): then `drop_ended_holds` would drop nothing.
#[inline(always)]
pub(super) fn none_ended(p: &Private) -> bool {
    p.held.get(..p.held_len).is_some_and(|hs| hs.iter().all(super::live))
}

/// `push_held` onto a non-empty held stack of the hold [`record_immediate`] records (out of
/// line: the fast path stays short). Everything in registers or the caller's argument area: a
/// `&Cx` or a `Held` by value would keep them in the hooks' stack frame, a cache line more there.
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn push_nested<const SEM: bool>(
    tls: crate::state::Here,
    shard: &'static crate::state::Shard,
    addr: usize,
    entry: &'static LiveStats,
    slot: &'static lockmeter_core::registry::Slot,
    t_acq: u64,
    mode: Mode,
    kind: LockKind,
) {
    let epoch = if SEM { slot.epoch.load(Relaxed) } else { 0 };
    let h = Held { addr, entry, slot, t_acq, mode: mode as u8, sem: SEM, epoch };
    push_held(&Cx { tls, shard }, h, kind);
}

/// Whether the release of `addr` may take the fast path (the caller entered metering): the top
/// of the held stack is `addr`, not a semaphore hold nor the mutex of a condvar wait, and no
/// other thread wants it (nothing to record for them). Returns the held stack's length.
#[inline(always)]
pub(super) fn releasable(cx: &Cx, addr: usize) -> Option<usize> {
    // SAFETY: busy flag held; the borrow ends here.
    let p = unsafe { cx.private() };
    let len = p.held_len;
    let top = p.held.get(len.wrapping_sub(1))?;
    if top.addr != addr || top.sem || top.slot.is_null() || p.cond_addr == addr {
        return None;
    }
    // SAFETY: registry slots are never unmapped.
    if unsafe { &*top.slot }.wanted.load(Relaxed) != 0 {
        return None;
    }
    Some(len)
}

/// Whether the cost estimate times this release (its countdown is due).
#[inline(always)]
pub(super) fn release_is_timed(cx: &Cx) -> bool {
    // SAFETY: busy flag held; the borrow ends here.
    unsafe { cx.private() }.cost_rel == 0
}

/// A release that [`releasable`] allowed and that the cost estimate times: the fast path's
/// work, timed at the points `paths::unlock_metered` times (inside the critical section: from
/// the hook's start to the real unlock; the real unlock; after it: to the hook's end), and
/// leaves metering. `infallible` as for `paths::unlock_mutex_with`.
#[cold]
#[inline(never)]
pub(super) fn release_timed(
    cx: Cx,
    len: usize,
    infallible: bool,
    unlock: impl FnOnce() -> c_int,
) -> c_int {
    let c = &cx.shard.cost;
    let i = len - 1;
    let u0 = crate::cost::edge_if(true);
    let (h, first) = {
        // SAFETY: busy flag held; the borrow ends with this block.
        let p = unsafe { cx.private() };
        crate::cost::sample(&mut p.cost_rel);
        let Some(top) = p.held.get_mut(i) else {
            crate::state::leave(cx);
            return unlock();
        };
        let h = *top;
        // As on the fast path: an untimed hold of a lock whose release cannot fail ends before
        // the real call, the others' entries are taken out of the stack before and popped after.
        let first = infallible && h.t_acq == 0;
        if first {
            p.held_len = i;
        } else {
            top.addr = 0;
        }
        (h, first)
    };
    let t_rel = if h.t_acq != 0 { crate::state::now() } else { 0 };
    let r0 = crate::state::now();
    crate::cost::add(&c.rel_timed, &c.rel_ticks, u0, r0);
    let r = unlock();
    let u1 = crate::state::now();
    if !first {
        // SAFETY: busy flag held (the real call does not meter).
        let p = unsafe { cx.private() };
        if r != 0 {
            if let Some(top) = p.held.get_mut(i) {
                top.addr = h.addr;
            }
        } else {
            if !h.entry.is_null() {
                // SAFETY: as in `release_top`.
                record_hold(unsafe { &*h.entry }, h.t_acq, t_rel);
            }
            p.held_len = i;
        }
    }
    crate::cost::add_out(&c.rel_out_timed, &c.rel_out_ticks, u1, crate::cost::edge_if(true));
    crate::cost::add_out(&c.rel_real_timed, &c.rel_real_ticks, r0, u1);
    crate::state::leave(cx);
    r
}

/// Whether the hold on top of a held stack of `len` entries is untimed.
#[inline(always)]
pub(super) fn untimed(cx: &Cx, len: usize) -> bool {
    // SAFETY: busy flag held; the borrow ends here.
    unsafe { cx.private() }.held.get(len.wrapping_sub(1)).is_some_and(|h| h.t_acq == 0)
}

/// Ends the untimed hold ([`untimed`]) on top of a held stack of `len` entries that
/// [`releasable`] allowed, before a real release that cannot fail (nothing to record after the
/// real call, which can then be the hook's last): what [`release`] records for it.
#[inline(always)]
pub(super) fn end_untimed(cx: &Cx, len: usize) {
    // SAFETY: busy flag held.
    let p = unsafe { cx.private() };
    p.cost_rel -= 1;
    p.held_len = len - 1;
}

/// The release of the top of a held stack of `len` entries that [`releasable`] allowed: what
/// `unlock_with` records for it (the hold, when timed; its end before the real call, as in
/// `end_hold`), around the real release `unlock`.
/// Leaves metering.
#[inline(always)]
pub(super) fn release(cx: Cx, addr: usize, len: usize, unlock: impl FnOnce() -> c_int) -> c_int {
    let r = release_top(&cx, addr, len, unlock);
    crate::state::leave(cx);
    r
}

/// [`release`] out of line: the mutex unlock hook's usual path (an untimed hold, ended before
/// the real call, which is the hook's last) then calls nothing but the real unlock, as a tail
/// call, and saves no register.
#[inline(never)]
#[unsafe(link_section = ".text.hot.lockmeter")]
pub(super) fn release_out(
    cx: Cx,
    addr: usize,
    len: usize,
    unlock: impl FnOnce() -> c_int,
) -> c_int {
    release(cx, addr, len, unlock)
}

/// [`release`] in metering. The entry is read again after the real call (which does not meter),
/// rather than kept across it.
#[inline(always)]
fn release_top(cx: &Cx, addr: usize, len: usize, unlock: impl FnOnce() -> c_int) -> c_int {
    end_top::<true>(cx, addr, len, unlock)
}

/// Ends the hold on top of a held stack of `len` entries around the real release `unlock`: the
/// entry taken out before the call (its end time read when the hold is timed), put back if the
/// release fails, its hold recorded and the stack popped if it succeeds. `COST_REL`: the release
/// moves the cost estimate's release countdown (a semaphore's post does not).
#[inline(always)]
pub(super) fn end_top<const COST_REL: bool>(
    cx: &Cx,
    addr: usize,
    len: usize,
    unlock: impl FnOnce() -> c_int,
) -> c_int {
    let i = len - 1;
    let t_rel = {
        // SAFETY: busy flag held; the borrow ends with this block.
        let p = unsafe { cx.private() };
        if COST_REL {
            p.cost_rel -= 1;
        }
        let Some(top) = p.held.get_mut(i) else { return unlock() };
        top.addr = 0;
        if top.t_acq != 0 { crate::state::now() } else { 0 }
    };
    let r = unlock();
    // SAFETY: busy flag held (the real call does not meter).
    let p = unsafe { cx.private() };
    let Some(top) = p.held.get_mut(i) else { return r };
    if r != 0 {
        core::hint::cold_path();
        // Put back: the lock is still held.
        top.addr = addr;
        return r;
    }
    if !top.entry.is_null() {
        // SAFETY: `entry` points at a LiveStats inside this thread's table (never unmapped).
        record_hold(unsafe { &*top.entry }, top.t_acq, t_rel);
    }
    p.held_len = i;
    r
}

/// Counts an acquisition on the CPU the thread runs on; returns that CPU. The count goes to the
/// thread's pending count (`Private::cpu_pending`, in the line the pair reads anyway) while the
/// CPU stays the same, to the CPU's counter in `Shard::cpus` (a line more) when it changes.
#[inline(always)]
pub(super) fn count_cpu(cx: &Cx) -> u32 {
    let cpu = crate::sys::current_cpu();
    // SAFETY: busy flag held; the borrow ends here.
    let p = unsafe { cx.private() };
    if p.cpu_last.load(Relaxed) == cpu {
        p.cpu_pending.store(p.cpu_pending.load(Relaxed) + 1, Relaxed);
    } else {
        count_cpu_moved(cx.shard, cpu);
    }
    cpu
}

/// [`count_cpu`] on another CPU than the pending count's: the pending count added to its CPU's
/// counter, a new one started for `cpu` (out of line: rare).
#[cold]
#[inline(never)]
fn count_cpu_moved(shard: &crate::state::Shard, cpu: u32) {
    shard.flush_cpu_pending();
    // SAFETY: the calling thread's shard, its busy flag held (as for `Cx::private`); the borrow
    // ends here.
    let p = unsafe { &mut *shard.private.get() };
    // The count before the CPU: a reader that finds the CPU finds its count.
    p.cpu_pending.store(1, Relaxed);
    p.cpu_last.store(cpu, Relaxed);
}

/// Records in `st` the hold from `t_acq` to `t_rel` (ticks; either 0: not timed).
#[inline(always)]
pub(super) fn record_hold(st: &LiveStats, t_acq: u64, t_rel: u64) {
    // A hold older than the last resume may have spanned a pause: not timed.
    if t_acq != 0 && t_rel != 0 && t_acq >= crate::live::RESUMED_TICKS.load(Relaxed) {
        st.record_hold(ticks_to_ns(t_rel.saturating_sub(t_acq)));
    }
}

//! The metering logic shared by every hook.
//!
//! An acquisition first tries the lock (`*_trylock`); only when that finds it held does it read
//! the clock, mark the lock wanted, and block in the real lock function. So the uncontended path
//! costs one trylock, two table lookups (usually one cache hit), a few relaxed stores, and, with
//! hold timing on, one clock read; the release path one clock read more.
//!
//! This file holds the per-thread bookkeeping of every path: the record lookup, the held stack,
//! an acquisition, a failed try, a wait's mark, a release; `paths.rs` the acquire and release
//! paths the hooks call, `sem.rs` the semaphores', `record.rs` what is recorded besides the
//! counts (stacks, events, the longest waits, the sampling decisions).

mod paths;
mod record;
mod sem;

pub(crate) use paths::{
    cond_begin, cond_end, cond_reacquired, lock_peek, lock_with, trylock_with, unlock_with,
};
pub(crate) use sem::{sem_post_with, sem_trywait_with, sem_wait_with};

use crate::classes::{CLASSES, NAMED, event_key, idents, key, tag};
use crate::state::{CFG, Cx, HELD_MAX, Held, ticks_to_ns};
use core::sync::atomic::Ordering::Relaxed;
use lockmeter_core::registry::{ClassOrigin, Slot};
use lockmeter_core::reservoir::pack_time;
use lockmeter_core::stats::LiveStats;
use lockmeter_core::{LockKind, Mode, clock};
use record::{
    Contention, first_use, keep_wait, record_contention, record_sample, sample_this, time_this_hold,
};

/// Bit of `Slot::wanted` set by a failed trylock; the low bits count blocked waiters.
const TRY_WANTED: u32 = 1 << 31;

/// The class of the identity in `slot`, given now if it has none: the site of its first use (a
/// lock never initialized by a call).
#[inline]
fn class_of(slot: &Slot, addr: usize, kind: LockKind, site: usize) -> u32 {
    let c = slot.class.load(Relaxed);
    if c != 0 || crate::state::CALIBRATING.load(Relaxed) {
        return c;
    }
    let c = CLASSES.intern(site as u64, kind, ClassOrigin::FirstUse, addr as u64);
    match slot.class.compare_exchange(0, c, Relaxed, Relaxed) {
        Ok(_) => c,
        Err(cur) => cur,
    }
}

/// The record and registry slot for (lock, site, mode), through the thread's lookup cache, and
/// the lock's event key.
#[inline(always)]
fn lookup(
    cx: &Cx,
    addr: usize,
    kind: LockKind,
    mode: Mode,
    site: usize,
) -> Option<(&'static LiveStats, &'static Slot, u64)> {
    // SAFETY: we hold the busy flag (we are inside `enter`/`leave`); no other `&mut Private`.
    let p = unsafe { cx.private() };
    let ci = ((addr >> 4) ^ (site >> 2)) & (p.cache.len() - 1);
    if let Some(c) = p.cache.get(ci)
        && c.addr == addr
        && c.site == site
        && c.mode == mode as u8
        && !c.slot.is_null()
    {
        // SAFETY: cached pointers point into the registry and the shard table, never unmapped.
        let slot = unsafe { &*c.slot };
        if slot.generation() == c.gen_ {
            let k = event_key(c.slot_idx, c.gen_, slot.class.load(Relaxed), kind, mode);
            // SAFETY: as above.
            return Some((unsafe { &(*c.entry).stats }, slot, k));
        }
    }
    let reg = crate::state::registry()?;
    // The constructor's calibration lock is left out of the profile, its losses too (a cap
    // below the collector's fixed tables refuses every record).
    let calibrating = || crate::state::CALIBRATING.load(Relaxed);
    let Some((idx, slot)) = reg.lookup(addr as u64, kind) else {
        if !calibrating() {
            cx.shard.dropped_registry.add(1);
        }
        return None;
    };
    let gen_ = slot.generation();
    let class = class_of(slot, addr, kind, site);
    let ek = event_key(idx, gen_, class, kind, mode);
    if CFG.frames.load(Relaxed) > 0 {
        first_use(cx, slot, ek, site, class);
    }
    let k1 = key(idx, 0, kind, mode);
    let named = if slot.named.load(Relaxed) == gen_.wrapping_add(1) { NAMED } else { 0 };
    let want = tag(gen_, class) | named;
    let entry = match cx.shard.table.get(k1, site as u64) {
        Some(e) if e.tag.load(Relaxed) & !NAMED == want & !NAMED => {
            if named != 0 && e.tag.load(Relaxed) & NAMED == 0 {
                e.tag.fetch_or(NAMED, Relaxed);
            }
            Some(e)
        }
        Some(e) => {
            let moved = e.stats.acquisitions.get();
            if idents(Some(reg)).retag(&cx.shard.table, e, k1, site as u64, want) {
                Some(e)
            } else {
                // The dead identity's counts had nowhere to go: counted as dropped.
                cx.shard.dropped.add(moved);
                e.stats.clear();
                e.tag.store(want, Relaxed);
                Some(e)
            }
        }
        None => None,
    };
    let Some(entry) = entry else {
        if !calibrating() {
            cx.shard.dropped.add(1);
            crate::lost::note(ek, site as u64);
            // A lock identity is (address, generation): count identities, not addresses.
            reg.note_unrecorded(addr as u64 ^ (gen_ as u64).rotate_right(17));
        }
        return None;
    };
    if let Some(c) = p.cache.get_mut(ci) {
        c.addr = addr;
        c.site = site;
        c.mode = mode as u8;
        c.gen_ = gen_;
        c.slot_idx = idx;
        c.slot = slot;
        c.entry = entry;
    }
    Some((&entry.stats, slot, ek))
}

/// How an acquisition went.
#[derive(Clone, Copy)]
pub(crate) enum How {
    /// The first attempt succeeded.
    Immediate,
    /// The first attempt found the lock held; waited from `t0` to `t1` (ticks).
    Waited { t0: u64, t1: u64 },
    /// Re-acquired inside a condvar wait that slept from `t0` to `t1`.
    CondWait { t0: u64, t1: u64 },
}

/// Records a successful acquisition.
#[inline(always)]
pub(crate) fn acquired(
    cx: &Cx,
    addr: usize,
    kind: LockKind,
    mode: Mode,
    site: usize,
    how: How,
    who: Option<&Contention>,
) {
    let cpu = crate::sys::current_cpu() as usize;
    let cpuc = cx.shard.cpus.get(cpu);
    if let Some(c) = cpuc {
        c.acquisitions.add(1);
    }
    let Some((st, slot, k1)) = lookup(cx, addr, kind, mode, site) else { return };
    st.acquisitions.add(1);
    let mut t_now = 0;
    let mut my_stack = 0;
    match how {
        How::Immediate => {}
        How::Waited { t0, t1 } => {
            // At least 1 ns: the acquisition found the lock held, so it waited, but when the lock
            // came free at once the two clock reads can land within one ns of each other (rdtsc
            // is not ordered against the lock's atomic instruction).
            let ns = ticks_to_ns(t1.wrapping_sub(t0)).max(1);
            st.record_wait(ns);
            if let Some(c) = who {
                my_stack = record_contention(cx, k1, c, ns);
                keep_wait(cx, k1, c, t0, t1, my_stack);
            }
            if let Some(c) = cpuc {
                c.contended.add(1);
                c.wait_ns.add(ns);
            }
            t_now = t1;
        }
        How::CondWait { t0, t1 } => {
            st.cond_waits.add(1);
            st.cond_wait_ns.add(ticks_to_ns(t1.wrapping_sub(t0)));
            t_now = t1;
        }
    }
    let t_acq = if time_this_hold(cx) {
        if t_now == 0 { clock::now().max(1) } else { t_now.max(1) }
    } else {
        0
    };
    let me = cx.shard.owner.load(Relaxed);
    if mode != Mode::Read {
        let prev = slot.last_owner.load(Relaxed);
        if prev != me {
            if prev != 0 {
                st.owner_changes.add(1);
            }
            slot.last_owner.store(me, Relaxed);
        }
        // The holder fields are stored only when they change (a release leaves them unless
        // someone waits): a lock one thread takes again and again leaves them unwritten. The
        // acquisition time changes every time: one store, to a line the holder owns while no
        // one waits.
        if slot.holder_thread.load(Relaxed) != me {
            slot.holder_thread.store(me, Relaxed);
        }
        if slot.holder_site.load(Relaxed) != site as u64 {
            slot.holder_site.store(site as u64, Relaxed);
        }
        slot.holder_t_acq.store(pack_time(t_acq), Relaxed);
        if my_stack == 0 && sample_this(cx) {
            my_stack = record_sample(cx, k1, site);
        }
        if my_stack != 0 || slot.holder_stack.load(Relaxed) != 0 {
            slot.holder_stack.store(my_stack, Relaxed);
        }
    } else if slot.holder_thread.load(Relaxed) != 0 {
        // Readers hold it now: no exclusive holder to name.
        slot.holder_thread.store(0, Relaxed);
    }
    if slot.wanted.load(Relaxed) & TRY_WANTED != 0 {
        slot.wanted.fetch_and(!TRY_WANTED, Relaxed);
    }
    let sem = kind == LockKind::Semaphore;
    let epoch = if sem { slot.epoch.load(Relaxed) } else { 0 };
    push_held(cx, Held { addr, entry: st, slot, t_acq, mode: mode as u8, sem, epoch }, kind);
}

/// Whether the mutex at `addr` is recursive (glibc: the low bits of `__kind`, the `int` at offset
/// 16, are `PTHREAD_MUTEX_RECURSIVE_NP`).
#[inline(always)]
fn is_recursive_mutex(addr: usize) -> bool {
    // SAFETY: `addr` is a mutex the caller just acquired: initialized and mapped.
    let kind = unsafe { core::ptr::read_volatile((addr as *const i32).add(4)) };
    kind & 3 == 1
}

/// Whether held entry `h` is still a hold. A semaphore hold ends without its thread when another
/// thread posts the semaphore or it gets a new identity (its slot's epoch moved on).
#[inline(always)]
fn live(h: &Held) -> bool {
    // SAFETY: registry slots are never unmapped.
    !h.sem || h.slot.is_null() || unsafe { &*h.slot }.epoch.load(Relaxed) == h.epoch
}

/// Drops from the held stack the semaphore holds that other threads ended (see [`live`]), keeping
/// the other entries in order; no hold time is recorded for the dropped ones.
#[inline(never)]
fn drop_ended_holds(p: &mut crate::state::Private) {
    let len = p.held_len.min(p.held.len());
    let mut kept = 0;
    for i in 0..len {
        if let Some(h) = p.held.get(i).copied()
            && live(&h)
        {
            if let Some(d) = p.held.get_mut(kept) {
                *d = h;
            }
            kept += 1;
        }
    }
    p.held_len = kept;
}

/// Pushes a hold on the thread's held stack.
///
/// A thread cannot hold a non-recursive lock twice: if the lock is already on its stack, that
/// entry is stale (another thread unlocked it, a hand-off glibc allows for normal mutexes) and is
/// replaced. A semaphore can be held several times (a counting semaphore's tokens); its stale
/// entries are those whose hold another thread's post ended (see [`live`]), dropped before each
/// semaphore push, so that a thread that only waits (a consumer) never fills its stack. A full
/// stack first drops such entries, then gives up its oldest entry (that hold goes untimed, and is
/// counted).
#[inline(always)]
fn push_held(cx: &Cx, h: Held, kind: LockKind) {
    // SAFETY: busy flag held.
    let p = unsafe { cx.private() };
    if h.sem && p.held_len > 0 {
        drop_ended_holds(p);
    }
    if p.held_len > 0
        && h.mode != Mode::Read as u8
        && !h.sem
        && !(kind == LockKind::Mutex && is_recursive_mutex(h.addr))
        && let Some(i) =
            p.held.get(..p.held_len).and_then(|hs| hs.iter().rposition(|x| x.addr == h.addr))
    {
        p.held.copy_within(i + 1..p.held_len, i);
        p.held_len -= 1;
    }
    if p.held_len >= p.held.len() {
        drop_ended_holds(p);
    }
    if p.held_len >= p.held.len() {
        p.held.copy_within(1.., 0);
        p.held_len -= 1;
        cx.shard.held_overflow.add(1);
    }
    if let Some(slot) = p.held.get_mut(p.held_len) {
        *slot = h;
        p.held_len += 1;
    }
}

/// Records a failed trylock (EBUSY) or a timed-out timed lock.
#[inline]
pub(crate) fn try_failed(cx: &Cx, addr: usize, kind: LockKind, mode: Mode, site: usize) {
    let Some((st, slot, _)) = lookup(cx, addr, kind, mode, site) else { return };
    st.trylock_failures.add(1);
    st.cnt_lock.add(1);
    if slot.wanted.load(Relaxed) & TRY_WANTED == 0 {
        slot.wanted.fetch_or(TRY_WANTED, Relaxed);
    }
}

/// Marks `addr` as waited on (before blocking); returns its slot to pass to [`unwait`].
#[inline]
pub(crate) fn wait_begin(addr: usize, kind: LockKind) -> Option<&'static Slot> {
    let (_, slot) = crate::state::registry()?.lookup(addr as u64, kind)?;
    slot.wanted.fetch_add(1, Relaxed);
    Some(slot)
}

/// Ends a wait started by [`wait_begin`].
#[inline]
pub(crate) fn wait_end(slot: Option<&'static Slot>) {
    if let Some(s) = slot {
        s.wanted.fetch_sub(1, Relaxed);
    }
}

/// Finds `addr` on the held stack: its index.
#[inline(always)]
pub(crate) fn find_held(cx: &Cx, addr: usize) -> Option<usize> {
    // SAFETY: busy flag held.
    let p = unsafe { cx.private() };
    let held = p.held.get(..p.held_len)?;
    held.iter().rposition(|h| h.addr == addr && live(h))
}

/// The lock at held index `i` is being released at `t_rel` (ticks, 0 if not read): clears the
/// holder, and tells whether another thread wanted the lock during the hold.
#[inline(always)]
pub(crate) fn releasing(cx: &Cx, i: usize) -> bool {
    // SAFETY: busy flag held.
    let p = unsafe { cx.private() };
    let Some(h) = p.held.get(i) else { return false };
    if h.slot.is_null() {
        return false;
    }
    // SAFETY: registry slots are never unmapped.
    let slot = unsafe { &*h.slot };
    let wanted = slot.wanted.load(Relaxed) != 0;
    // Cleared only for a waiter: without one, the next holder overwrites it (see `acquired`).
    if wanted && h.mode != Mode::Read as u8 && slot.holder_thread.load(Relaxed) != 0 {
        slot.holder_thread.store(0, Relaxed);
    }
    wanted
}

/// The release of held index `i` completed: records the hold and pops it.
#[inline(always)]
pub(crate) fn released(cx: &Cx, i: usize, t_rel: u64, was_wanted: bool) {
    // SAFETY: busy flag held.
    let p = unsafe { cx.private() };
    let Some(h) = p.held.get(i).copied() else { return };
    if !h.entry.is_null() {
        // SAFETY: `entry` points at a LiveStats inside this thread's table (never unmapped); we
        // stored it in `acquired` as a pointer to the record's stats.
        let st = unsafe { &*h.entry };
        // A hold older than the last resume may have spanned a pause: not timed.
        if h.t_acq != 0 && t_rel != 0 && h.t_acq >= crate::live::RESUMED_TICKS.load(Relaxed) {
            st.record_hold(ticks_to_ns(t_rel.saturating_sub(h.t_acq)));
        }
        if was_wanted {
            st.cnt_hold.add(1);
        }
    }
    let len = p.held_len;
    if i + 1 == len {
        p.held_len = i; // the usual case: the most recent lock is released first
    } else if i < len {
        p.held.copy_within(i + 1..len, i);
        p.held_len = len - 1;
    }
}

/// Whether the hold at index `i` is timed.
#[inline(always)]
pub(crate) fn hold_is_timed(cx: &Cx, i: usize) -> bool {
    // SAFETY: busy flag held.
    let p = unsafe { cx.private() };
    p.held.get(i).is_some_and(|h| h.t_acq != 0)
}

/// Keeps `HELD_MAX` referenced for docs.
const _: () = assert!(HELD_MAX >= 8);

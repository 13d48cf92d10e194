//! The metering logic shared by every hook.
//!
//! An acquisition first tries the lock (`*_trylock`); only when that finds it held does it read
//! the clock, mark the lock wanted, and block in the real lock function. So the uncontended path
//! costs one trylock, two table lookups (usually one cache hit), a few relaxed stores, and, with
//! hold timing on, one clock read; the release path one clock read more.
//!
//! This file holds the per-thread bookkeeping of every path: the record lookup, the held stack,
//! an acquisition, a failed try, a wait's mark, a release; `paths.rs` the acquire and release
//! paths the hooks call, `fast.rs` their uncontended fast paths, `sem.rs` the semaphores',
//! `record.rs` what is recorded besides the counts (stacks, events, the longest waits, the
//! sampling decisions).

mod fast;
mod paths;
mod record;
mod sem;

pub(crate) use paths::{
    cond_begin, cond_end, cond_reacquired, lock_peek, lock_with, trylock_with, unlock_mutex_with,
    unlock_with,
};
pub(crate) use sem::{sem_post_with, sem_trywait_with, sem_wait_with};

use crate::classes::{CLASSES, NAMED, event_key, idents, key, tag};
use crate::state::{
    CFG, Cached, Cx, HELD_MAX, Held, LOOKUP_BITS, Private, grow_lookups, ticks_to_ns,
};
use core::sync::atomic::Ordering::Relaxed;
use fast::{count_cpu, record_hold};
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

/// The first of the two lines (a set, one 64-byte cache line) of the thread's lookup cache that
/// may hold (`addr`, `site_mode`): the cache is two-way set-associative, the most recently used
/// line first.
#[inline(always)]
fn lookup_set(bits: u32, addr: usize, site_mode: usize) -> usize {
    let h = (addr ^ site_mode.rotate_left(23)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // Masked to the reserved lines whatever `bits` is (it is at most `LOOKUP_BITS`).
    (h.wrapping_shr(65u32.wrapping_sub(bits)) * 2) & ((1 << LOOKUP_BITS) - 2)
}

/// The number of lines in use of the lookup cache of the thread whose private part is `p`, as a
/// power of two: from `LOOKUP_MIN_BITS` (set when the shard is made, `state::shards`) to
/// `LOOKUP_BITS` (see `lookup_miss`). (`lookup_set` masks whatever it is.)
#[inline(always)]
fn lookup_bits(p: &Private) -> u32 {
    p.lookup_bits
}

/// The line of the thread's lookup cache `lines` (`1 << bits` in use) that holds (`addr`,
/// `site_mode`), if one does.
///
/// # Safety
/// `lines` is the calling thread's cache (`Shard::lookups`), the busy flag is held, and the
/// caller holds no other reference into it.
#[inline(always)]
unsafe fn cached_line<'a>(
    lines: *mut Cached,
    bits: u32,
    addr: usize,
    site_mode: usize,
) -> Option<&'a mut Cached> {
    let set = lookup_set(bits, addr, site_mode);
    // SAFETY: the cache has `1 << LOOKUP_BITS` lines and `set + 1` is below that (see
    // `lookup_set`); zeroed memory is an empty line; the caller's contract.
    let a = unsafe { &mut *lines.add(set) };
    if a.addr == addr && a.site_mode == site_mode {
        return Some(a);
    }
    core::hint::cold_path();
    // SAFETY: as above.
    unsafe { second_way(lines.add(set), addr, site_mode) }
}

/// [`cached_line`] when the first line of the set is not (`addr`, `site_mode`)'s: the second,
/// moved first when it is (out of line: the usual hit's code stays short).
///
/// # Safety
/// `a` is the first line of a set of the calling thread's cache, as in [`cached_line`].
#[inline(never)]
unsafe fn second_way<'a>(a: *mut Cached, addr: usize, site_mode: usize) -> Option<&'a mut Cached> {
    // SAFETY: the set's two lines (the caller's contract).
    let (a, b) = unsafe { (&mut *a, &mut *a.add(1)) };
    if b.addr == addr && b.site_mode == site_mode {
        // The most recently used line first.
        core::mem::swap(a, b);
        return Some(a);
    }
    None
}

/// What [`lookup`] finds: the record, the registry slot, and the slot's index and generation
/// (`index << 32 | generation`), from which [`found_key`] makes the lock's event key when it is
/// needed (rarely: a contended or sampled acquisition).
pub(crate) type Found = (&'static LiveStats, &'static Slot, u64);

/// The event key of the lock of a [`Found`] (`slot` at `idx_gen`: `index << 32 | generation`),
/// taken in `kind` and `mode`.
#[inline]
fn found_key(slot: &Slot, idx_gen: u64, kind: LockKind, mode: Mode) -> u64 {
    event_key((idx_gen >> 32) as u32, idx_gen as u32, slot.class.load(Relaxed), kind, mode)
}

/// Why [`lookup`] found no record; counted by [`lost`] only when the acquisition it was for
/// happened (a lookup made before the real lock call may be for one that fails).
#[derive(Clone, Copy)]
pub(crate) enum Lost {
    /// No registry, or the constructor's calibration lock: nothing to count.
    Nothing,
    /// The registry was full.
    Registry,
    /// The thread's record table was full: the lock identity (address ^ generation), its event
    /// key and the call site (the loss is counted against them, `crate::lost`).
    Table {
        /// address ^ generation
        identity: u64,
        /// The lock's event key.
        ek: u64,
        /// The call site.
        site: u64,
    },
}

/// Counts an acquisition that [`lookup`] found no record for.
#[cold]
fn lost(cx: &Cx, why: Lost) {
    match why {
        Lost::Nothing => {}
        Lost::Registry => cx.shard.dropped_registry.add(1),
        Lost::Table { identity, ek, site } => {
            cx.shard.dropped.add(1);
            crate::lost::note(ek, site);
            if let Some(reg) = crate::state::registry() {
                // A lock identity is (address, generation): count identities, not addresses.
                reg.note_unrecorded(identity);
            }
        }
    }
}

/// The record and registry slot for (lock, site, mode), through the thread's lookup cache (one
/// probe of a thread-private line; the registry and the record table only when it misses), and
/// the slot's index and generation (see [`Found`]). Counts nothing when it finds none (see
/// [`Lost`]). Without `CURRENT`, a line of the cache is taken unchecked (see [`lookup_hit`]).
#[inline(always)]
pub(crate) fn lookup<const CURRENT: bool>(
    cx: &Cx,
    addr: usize,
    kind: LockKind,
    mode: Mode,
    site: usize,
) -> Result<Found, Lost> {
    match lookup_hit::<CURRENT>(cx, addr, mode, site) {
        Some(f) => Ok(f),
        None => lookup_miss(cx, addr, kind, mode, site),
    }
}

/// [`lookup`] through the thread's lookup cache alone: `None` when it has no line for (lock,
/// site, mode), or, with `CURRENT`, only a stale one (see [`current`]; without, the caller
/// checks it).
#[inline(always)]
pub(crate) fn lookup_hit<const CURRENT: bool>(
    cx: &Cx,
    addr: usize,
    mode: Mode,
    site: usize,
) -> Option<Found> {
    let hit = cached_hit(cx, addr, mode, site);
    if CURRENT { hit.filter(current) } else { hit }
}

/// Whether the identity of a [`cached_hit`] is its slot's current one (no `*_init` or
/// `*_destroy` at its address since the line was placed).
#[inline(always)]
pub(crate) fn current(found: &Found) -> bool {
    let (_, slot, slot_gen) = found;
    if slot.generation() != *slot_gen as u32 {
        core::hint::cold_path();
        return false;
    }
    true
}

/// The line of the thread's lookup cache for (lock, site, mode), unchecked: its slot's identity
/// may have ended since (see [`current`]). Its record's and slot's lines are requested
/// (prefetched) before anything reads them: a cold pair (a program whose own work evicted them
/// between two lock calls, on many locks) then waits for one miss on them, overlapped with the
/// lock word's, rather than for each in turn.
#[inline(always)]
fn cached_hit(cx: &Cx, addr: usize, mode: Mode, site: usize) -> Option<Found> {
    // SAFETY: we hold the busy flag (we are inside `enter`/`leave`); no other `&mut Private`.
    let p = unsafe { cx.private() };
    let site_mode = site | ((mode as usize) << 56);
    let base = p.slot_base;
    let (lines, bits) = (cx.shard.lookups(), lookup_bits(p));
    // SAFETY: this thread's cache, busy flag held; the line is not kept past this block.
    let c = unsafe { cached_line(lines, bits, addr, site_mode) }?;
    if c.entry.is_null() || base.is_null() {
        core::hint::cold_path();
        return None;
    }
    // SAFETY: a line is placed only with an index the registry gave (below its length), after
    // `slot_base` was set to the registry's first slot; slots are never unmapped.
    let slot = unsafe { base.add((c.slot_gen >> 32) as usize) };
    crate::sys::prefetch(c.entry);
    crate::sys::prefetch(slot);
    // SAFETY: as above; cached records live in the thread's table, never unmapped.
    Some(unsafe { (&(*c.entry).stats, &*slot, c.slot_gen) })
}

/// [`lookup`] when the thread's cache has no line for (lock, site, mode): through the registry
/// and the record table, placing a line.
#[inline(never)]
fn lookup_miss(
    cx: &Cx,
    addr: usize,
    kind: LockKind,
    mode: Mode,
    site: usize,
) -> Result<Found, Lost> {
    // The image's first: its guardian and watcher start (before the lookup is timed).
    crate::guard::metering(crate::watch::start);
    // SAFETY: as in `lookup`, whose borrow ended.
    let p = unsafe { cx.private() };
    let site_mode = site | ((mode as usize) << 56);
    let (lines, bits) = (cx.shard.lookups(), lookup_bits(p));
    let _slow = crate::cost::SlowLookup { counters: &cx.shard.cost, t0: clock::now() };
    let Some(reg) = crate::state::registry() else { return Err(Lost::Nothing) };
    // The constructor's calibration lock is left out of the profile, its losses too (a cap
    // below the collector's fixed tables refuses every record).
    let calibrating = || crate::state::CALIBRATING.load(Relaxed);
    let Some((idx, slot)) = reg.lookup(addr as u64, kind) else {
        return Err(if calibrating() { Lost::Nothing } else { Lost::Registry });
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
        return Err(if calibrating() {
            Lost::Nothing
        } else {
            Lost::Table {
                identity: addr as u64 ^ (gen_ as u64).rotate_right(17),
                ek,
                site: site as u64,
            }
        });
    };
    p.slot_base = reg.slot(0).map_or(core::ptr::null(), |s| s as *const Slot);
    let slot_gen = (u64::from(idx) << 32) | u64::from(gen_);
    let line = Cached { addr, site_mode, entry, slot_gen };
    // SAFETY: as above.
    if let Some(c) = unsafe { cached_line(lines, bits, addr, site_mode) } {
        *c = line;
    } else {
        let set = lookup_set(bits, addr, site_mode);
        // SAFETY: as in `cached_line`: the set's two lines, the older one dropped.
        unsafe {
            *lines.add(set + 1) = *lines.add(set);
            *lines.add(set) = line;
        }
    }
    // Twice as many lines once the records are more than a quarter as many: lines placed for the
    // smaller cache are found no more (they miss once and are placed again); none can be
    // mistaken for another key's.
    if bits < LOOKUP_BITS && cx.shard.table.len() * 4 > 1 << bits && grow_lookups(bits) {
        p.lookup_bits = bits + 1;
    }
    Ok((&entry.stats, slot, slot_gen))
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
    let found = lookup::<true>(cx, addr, kind, mode, site);
    acquired_found(cx, found, addr, kind, mode, site, how, who);
}

/// Records a successful acquisition whose record [`lookup`] gave `found` (looked up before the
/// real lock call, outside the critical section).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn acquired_found(
    cx: &Cx,
    found: Result<Found, Lost>,
    addr: usize,
    kind: LockKind,
    mode: Mode,
    site: usize,
    how: How,
    who: Option<&Contention>,
) {
    let cpu = count_cpu(cx);
    let (st, slot, idx_gen) = match found {
        Ok(f) => f,
        Err(why) => return lost(cx, why),
    };
    let k1 = || found_key(slot, idx_gen, kind, mode);
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
                let k1 = k1();
                my_stack = record_contention(cx, k1, c, ns);
                keep_wait(cx, k1, c, t0, t1, my_stack);
            }
            if let Some(c) = cx.shard.cpus.get(cpu as usize) {
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
        if t_now == 0 { crate::state::now().max(1) } else { t_now.max(1) }
    } else {
        0
    };
    if mode != Mode::Read && my_stack == 0 && sample_this(cx) {
        my_stack = record_sample(cx, k1(), site);
    }
    publish_holder(cx, st, slot, mode, site, t_acq, my_stack);
    let sem = kind == LockKind::Semaphore;
    let epoch = if sem { slot.epoch.load(Relaxed) } else { 0 };
    push_held(cx, Held { addr, entry: st, slot, t_acq, mode: mode as u8, sem, epoch }, kind);
    // SAFETY: busy flag held.
    record::refill(unsafe { cx.private() });
}

/// Publishes this thread as the holder of the lock of `slot` (record `st`), acquired in `mode`
/// at `site` at `t_acq` (0: not timed) with the sampled stack `my_stack` (0: none), and clears a
/// failed trylock's mark.
#[inline(always)]
fn publish_holder(
    cx: &Cx,
    st: &LiveStats,
    slot: &Slot,
    mode: Mode,
    site: usize,
    t_acq: u64,
    my_stack: u64,
) {
    // SAFETY: busy flag held; the borrow ends here. (`owner`: the shard's, in the private line
    // the fast path reads anyway.)
    let me = unsafe { cx.private() }.owner;
    // The usual case, one thread taking the lock again at the same site, no stack sampled, no
    // reader since and no failed trylock: nothing to store but the acquisition time, when timed
    // (one test, no branch per field).
    if mode != Mode::Read
        && ((slot.last_owner.load(Relaxed) ^ me)
            | (slot.holder_thread.load(Relaxed) ^ me)
            | (slot.wanted.load(Relaxed) & TRY_WANTED)) as u64
            | (slot.holder_site.load(Relaxed) ^ site as u64)
            | slot.holder_stack.load(Relaxed)
            | my_stack
            == 0
    {
        let packed = pack_time(t_acq);
        if packed != 0 || slot.holder_t_acq.load(Relaxed) != 0 {
            slot.holder_t_acq.store(packed, Relaxed);
        }
        return;
    }
    core::hint::cold_path();
    publish_changed(slot, me, (mode, site), st, t_acq, my_stack);
}

/// [`publish_holder`] when something is to be stored (out of line).
#[inline(never)]
fn publish_changed(
    slot: &Slot,
    me: u32,
    (mode, site): (Mode, usize),
    st: &LiveStats,
    t_acq: u64,
    my_stack: u64,
) {
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
        // acquisition time changes every time it is read (one store, to a line the holder owns
        // while no one waits); untimed holds leave it 0, unwritten.
        if slot.holder_thread.load(Relaxed) != me {
            slot.holder_thread.store(me, Relaxed);
        }
        if slot.holder_site.load(Relaxed) != site as u64 {
            slot.holder_site.store(site as u64, Relaxed);
        }
        let packed = pack_time(t_acq);
        if packed != 0 || slot.holder_t_acq.load(Relaxed) != 0 {
            slot.holder_t_acq.store(packed, Relaxed);
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
    let found = lookup::<true>(cx, addr, kind, mode, site);
    try_failed_found(cx, found);
}

/// Records a failed trylock whose record [`lookup`] gave `found`.
#[inline]
pub(crate) fn try_failed_found(cx: &Cx, found: Result<Found, Lost>) {
    let (st, slot, _) = match found {
        Ok(f) => f,
        Err(why) => return lost(cx, why),
    };
    st.trylock_failures.add(1);
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
        record_hold(st, h.t_acq, t_rel);
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

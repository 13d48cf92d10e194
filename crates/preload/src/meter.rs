//! The metering logic shared by every hook.
//!
//! An acquisition first tries the lock (`*_trylock`); only when that finds it held does it read
//! the clock, mark the lock wanted, and block in the real lock function. So the uncontended path
//! costs one trylock, two table lookups (usually one cache hit), a few relaxed stores, and, with
//! hold timing on, one clock read; the release path one clock read more.

use crate::classes::{CLASSES, NAMED, event_key, key, retag, tag};
use crate::state::{CFG, Cx, HELD_MAX, Held, SITE_STACKS, SiteStack, ticks_to_ns};
use core::ffi::c_int;
use core::sync::atomic::Ordering::Relaxed;
use core::sync::atomic::{AtomicU32, Ordering::AcqRel};
use lockmeter_core::registry::{ClassOrigin, Slot};
use lockmeter_core::reservoir::{Wait, pack_time, unpack_time};
use lockmeter_core::stacks::{EventEntry, EventKey, EventKind, MAX_FRAMES};
use lockmeter_core::stats::LiveStats;
use lockmeter_core::{LockKind, Mode, clock};

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
            if retag(Some(reg), &cx.shard.table, e, k1, site as u64, want) {
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

/// First uses recorded so far (bounded: a program that makes a million locks pays for 4096).
static FIRST_USES: AtomicU32 = AtomicU32::new(0);
const MAX_FIRST_USES: u32 = 4096;

/// Identities of a class initialized by a call whose first uses are recorded: the class names
/// the others (a program that makes a million locks at one site pays for these few).
const FIRST_USES_PER_INIT_CLASS: u32 = 64;

/// Records where a lock identity was first used (how the report names heap locks), once per
/// identity (the thread that first marks the slot with this generation does it), at most
/// [`FIRST_USES_PER_INIT_CLASS`] per class of initialized locks.
#[cold]
fn first_use(cx: &Cx, slot: &Slot, k1: u64, site: usize, class: u32) {
    if crate::state::CALIBRATING.load(Relaxed) {
        return;
    }
    let mark = slot.generation().wrapping_add(1);
    if slot.first_use.load(Relaxed) == mark || slot.first_use.swap(mark, AcqRel) == mark {
        return;
    }
    if let Some(c) = CLASSES.get(class)
        && c.origin() == ClassOrigin::Init
        && !c.take_first_use(FIRST_USES_PER_INIT_CLASS)
    {
        return;
    }
    if FIRST_USES.fetch_add(1, Relaxed) >= MAX_FIRST_USES {
        return;
    }
    let mut frames = [0u64; MAX_FRAMES];
    let n = capture_stack(cx, site, &mut frames);
    let Some(hash) = cx.shard.stacks.intern(frames.get(..n).unwrap_or(&[])) else {
        cx.shard.stacks_dropped.add(1);
        return;
    };
    let k = EventKey {
        lock: k1,
        kind: EventKind::FirstUse,
        stack: hash,
        holder_site: 0,
        holder_stack: 0,
    };
    match cx.shard.events.get(&k) {
        Some(e) => e.count.add(1),
        None => cx.shard.stacks_dropped.add(1),
    }
}

/// The caller's stack, innermost first, into `out`; at least the call site. Returns the length.
#[inline(never)]
pub(crate) fn capture_stack(cx: &Cx, site: usize, out: &mut [u64; MAX_FRAMES]) -> usize {
    let want = (CFG.frames.load(Relaxed) as usize).min(MAX_FRAMES);
    // SAFETY: busy flag held.
    let cache = unsafe { cx.private() }.unwind_cache;
    let mut n = 0;
    if want > 1 && !cache.is_null() {
        // SAFETY: the cache was given to this thread alone (taken from the pool with its shard).
        let cache = unsafe { &mut *cache };
        n = crate::unwind::capture(
            cache,
            out.get_mut(..want).unwrap_or(&mut []),
            cx.shard.stack_top.load(Relaxed),
        );
    }
    // The first frame must be the call site (the trampolines pass it exactly); if unwinding
    // failed or disagrees, keep just the site. Site 0 (an unlock) keeps what unwinding found.
    if site == 0 {
        return n;
    }
    if n == 0 || out[0] != site as u64 {
        out[0] = site as u64;
        n = 1;
    }
    n
}

/// How often a cached stack is unwound again: the first time a thread goes through a key (a
/// call site), then one time in this many, so that other stacks through the same site are found.
/// Counts per site stay exact; only their split between stacks through one site is sampled.
pub(crate) const STACK_RESAMPLE: u32 = 64;

/// The interned stack of this call (its hash), through the thread's cache by `key`: the call
/// site of a contended acquisition, or the hold's record for a release (a record is one lock,
/// site and mode). Unwound the first time a key is seen and then one time in
/// [`STACK_RESAMPLE`]; the other times the key's last stack. `key` 0: always unwound. `acq`: the
/// hold's acquisition site, put back into a release's stack ([`with_acquirer`]); 0 for none.
/// None: the stack store was full (counted by the caller).
#[inline(never)]
fn site_stack(cx: &Cx, key: usize, site: usize, acq: u64) -> Option<u64> {
    let line = site_line(key);
    if key != 0 {
        // SAFETY: busy flag held; this borrow ends before `capture_stack` takes its own.
        let p = unsafe { cx.private() };
        if let Some(c) = p.site_stacks.get_mut(line)
            && c.key == key
            && c.hash != 0
        {
            c.uses = c.uses.wrapping_add(1);
            if c.uses % STACK_RESAMPLE != 0 {
                return Some(c.hash);
            }
        }
    }
    let mut frames = [0u64; MAX_FRAMES];
    let mut n = capture_stack(cx, site, &mut frames);
    if acq != 0 {
        n = with_acquirer(&mut frames, n, acq);
    }
    let hash = cx.shard.stacks.intern(frames.get(..n).unwrap_or(&[]))?;
    if key != 0 {
        // SAFETY: busy flag held; the borrow above ended.
        let p = unsafe { cx.private() };
        if let Some(c) = p.site_stacks.get_mut(line) {
            if c.key != key {
                *c = SiteStack { key, hash, uses: 0, event_lock: 0, event: core::ptr::null() };
            } else if c.hash != hash {
                c.hash = hash;
                c.event = core::ptr::null();
            }
        }
    }
    Some(hash)
}

/// The line of the stack cache for `key`.
#[inline(always)]
fn site_line(key: usize) -> usize {
    ((key >> 4) ^ (key >> 12)) & (SITE_STACKS - 1)
}

/// The event entry of `k` (a key whose stack `site_stack(cx, key, ..)` just gave), through the
/// stack cache's line for `key`: looked up in the event table only when the line names another
/// lock or stack.
#[inline(always)]
fn cached_event(cx: &Cx, key: usize, k: &EventKey) -> Option<&'static EventEntry> {
    let line = site_line(key);
    {
        // SAFETY: busy flag held; this borrow ends before the next one.
        let p = unsafe { cx.private() };
        if let Some(c) = p.site_stacks.get(line)
            && key != 0
            && c.key == key
            && c.hash == k.stack
            && c.event_lock == k.lock
            && !c.event.is_null()
        {
            // SAFETY: event entries live in the thread's shard, never unmapped; the cache is
            // zeroed whenever the event table is cleared (a shard take-over).
            return Some(unsafe { &*c.event });
        }
    }
    let e = cx.shard.events.get(k)?;
    // SAFETY: busy flag held; the borrow above ended.
    let p = unsafe { cx.private() };
    if let Some(c) = p.site_stacks.get_mut(line)
        && key != 0
        && c.key == key
        && c.hash == k.stack
    {
        c.event_lock = k.lock;
        c.event = e;
    }
    Some(e)
}

/// The waiter's side of a contended acquisition, gathered before it blocks.
pub(crate) struct Contention {
    /// The waiter's interned stack (None: the stack store was full).
    stack: Option<u64>,
    holder_site: u64,
    holder_stack: u64,
    /// The holder's owner id (0: unknown) and its acquisition time, packed (0: unknown).
    holder: u32,
    holder_t_acq: u32,
}

impl Contention {
    /// Reads who holds `slot` now and finds the waiter's stack.
    #[inline(never)]
    pub(crate) fn gather(cx: &Cx, slot: Option<&Slot>, site: usize) -> Self {
        // A holder that just acquired may not have published itself yet: if the slot still names
        // no holder, or ourselves, the holder is unknown (within that window it can also still
        // name the previous holder, whose release cleared it only if someone waited then).
        let me = cx.shard.owner.load(Relaxed);
        let (holder, holder_site, holder_stack, holder_t_acq) = slot
            .map(|s| (s, s.holder_thread.load(Relaxed)))
            .filter(|&(_, h)| h != 0 && h != me)
            .map(|(s, h)| {
                let (site, stack) = (s.holder_site.load(Relaxed), s.holder_stack.load(Relaxed));
                (h, site, stack, s.holder_t_acq.load(Relaxed))
            })
            .unwrap_or((0, 0, 0, 0));
        let stack = site_stack(cx, site, site, 0);
        Contention { stack, holder_site, holder_stack, holder, holder_t_acq }
    }
}

/// Records the event of a contended acquisition; returns the waiter's stack hash (0 if dropped).
#[inline(never)]
fn record_contention(cx: &Cx, k1: u64, c: &Contention, wait_ns: u64) -> u64 {
    let Some(hash) = c.stack else {
        cx.shard.stacks_dropped.add(1);
        return 0;
    };
    let k = EventKey {
        lock: k1,
        kind: EventKind::Contended,
        stack: hash,
        holder_site: c.holder_site,
        holder_stack: c.holder_stack,
    };
    match cx.shard.events.get(&k) {
        Some(e) => {
            e.count.add(1);
            e.wait_ns.add(wait_ns);
            e.wait_ns_max.max(wait_ns);
        }
        None => cx.shard.stacks_dropped.add(1),
    }
    hash
}

/// Offers a contended wait from `t0` to `t1` (ticks) to the thread's reservoir of its longest
/// waits, with the holder `c` found; `stack` is the waiter's stack hash.
#[inline(always)]
fn keep_wait(cx: &Cx, k1: u64, c: &Contention, t0: u64, t1: u64, stack: u64) {
    if !crate::longest::on() {
        return;
    }
    let w = Wait {
        start: t0,
        len: t1.wrapping_sub(t0),
        lock: k1,
        stack,
        holder_site: c.holder_site,
        holder_stack: c.holder_stack,
        waiter: cx.shard.owner.load(Relaxed),
        holder: c.holder,
        holder_acq: unpack_time(t0, c.holder_t_acq).unwrap_or(0),
    };
    crate::longest::offer(cx, &w);
}

/// Records a sampled acquisition's stack; returns its hash (0 if dropped).
#[cold]
fn record_sample(cx: &Cx, k1: u64, site: usize) -> u64 {
    let mut frames = [0u64; MAX_FRAMES];
    let n = capture_stack(cx, site, &mut frames);
    let Some(hash) = cx.shard.stacks.intern(frames.get(..n).unwrap_or(&[])) else {
        cx.shard.stacks_dropped.add(1);
        return 0;
    };
    let k = EventKey {
        lock: k1,
        kind: EventKind::Sampled,
        stack: hash,
        holder_site: 0,
        holder_stack: 0,
    };
    match cx.shard.events.get(&k) {
        Some(e) => e.count.add(1),
        None => cx.shard.stacks_dropped.add(1),
    }
    hash
}

/// Whether this acquisition's stack is sampled.
#[inline(always)]
fn sample_this(cx: &Cx) -> bool {
    let every = CFG.stack_sample.load(Relaxed);
    if every == 0 {
        return false;
    }
    // SAFETY: busy flag held.
    let p = unsafe { cx.private() };
    p.stack_sample = p.stack_sample.wrapping_add(1);
    p.stack_sample % every == 0
}

/// Whether to time this one for the cost estimate (see `cost`), by the sampling counter `which`
/// picks from the thread's private part.
#[inline(always)]
fn cost_sample(cx: &Cx, which: impl FnOnce(&mut crate::state::Private) -> &mut u32) -> bool {
    // SAFETY: busy flag held; the borrow ends here.
    crate::cost::sample(which(unsafe { cx.private() }))
}

/// Whether this hold should be timed (hold timing on, or this one sampled).
#[inline(always)]
fn time_this_hold(cx: &Cx) -> bool {
    match CFG.hold_every.load(Relaxed) {
        0 => true,
        1 => false,
        n => {
            // SAFETY: busy flag held, as in `lookup`.
            let p = unsafe { cx.private() };
            p.sample = p.sample.wrapping_add(1);
            p.sample % n == 0
        }
    }
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

/// A whole blocking acquisition: trylock first, then the blocking call only if that found the
/// lock held. Returns exactly what `lock()` alone would have returned.
#[inline(always)]
pub(crate) fn lock_with(
    addr: usize,
    kind: LockKind,
    mode: Mode,
    site: usize,
    try_lock: impl FnOnce() -> c_int,
    lock: impl FnOnce() -> c_int,
) -> c_int {
    let Some(cx) = crate::state::enter() else { return crate::state::unmetered(lock()) };
    let r = try_lock();
    let r = if r == libc::ENOTRECOVERABLE {
        // What the blocking call would answer too (and it must not be called: glibc's trylock
        // may leave a not-recoverable robust mutex's word set).
        r
    } else if r == 0 || r == libc::EOWNERDEAD {
        let timed = cost_sample(&cx, |p| &mut p.cost_acq);
        let a0 = crate::cost::now_if(timed);
        acquired(&cx, addr, kind, mode, site, How::Immediate, None);
        if timed {
            let c = &cx.shard.cost;
            crate::cost::add(&c.acq_timed, &c.acq_ticks, a0, clock::now());
        }
        r
    } else if r == libc::EBUSY {
        wait_for(&cx, addr, kind, mode, site, lock)
    } else {
        // Another error (EINVAL, EAGAIN, EDEADLK...): let the blocking call give its own answer.
        lock_uncontended(&cx, addr, kind, mode, site, lock)
    };
    crate::state::leave(cx);
    r
}

/// The lock was found held: gathers who holds it and where we are (before the clock starts, so
/// that unwinding is never counted as wait), then blocks in `lock` and records the wait.
#[inline(always)]
fn wait_for(
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
        let timed = cost_sample(cx, |p| &mut p.cost_acq);
        acquired(cx, addr, kind, mode, site, How::Waited { t0, t1 }, Some(&who));
        if timed {
            let c = &cx.shard.cost;
            crate::cost::add(&c.acq_timed, &c.acq_ticks, t1, clock::now());
        }
    } else if r == libc::ETIMEDOUT {
        try_failed(cx, addr, kind, mode, site);
    }
    r
}

/// Calls `lock` without timing it, and records the acquisition if it succeeded.
#[inline(always)]
fn lock_uncontended(
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
    let r = try_lock();
    if r == 0 || r == libc::EOWNERDEAD {
        acquired(&cx, addr, kind, mode, site, How::Immediate, None);
    } else if r == libc::EBUSY {
        try_failed(&cx, addr, kind, mode, site);
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
fn cancelled_cond_reacquire(cx: &Cx, addr: usize) {
    let (site, t0) = {
        // SAFETY: busy flag held; the borrow ends before `cond_reacquired` takes its own.
        let p = unsafe { cx.private() };
        p.cond_addr = 0;
        (p.cond_site, p.cond_t0)
    };
    cond_reacquired(cx, addr, site, t0, clock::now());
}

/// An unlock.
#[inline(always)]
pub(crate) fn unlock_with(addr: usize, unlock: impl FnOnce() -> c_int) -> c_int {
    let Some(cx) = crate::state::enter() else { return unlock() };
    // SAFETY: busy flag held.
    if unsafe { cx.private() }.cond_addr == addr {
        cancelled_cond_reacquire(&cx, addr);
    }
    let Some(i) = find_held(&cx, addr) else {
        crate::state::leave(cx);
        return unlock();
    };
    let timed = cost_sample(&cx, |p| &mut p.cost_rel);
    let u0 = crate::cost::now_if(timed);
    let t_rel = if hold_is_timed(&cx, i) { clock::now() } else { 0 };
    let wanted = releasing(&cx, i);
    let c = &cx.shard.cost;
    let r = end_hold(&cx, i, t_rel, wanted, || {
        if timed {
            crate::cost::add(&c.rel_timed, &c.rel_ticks, u0, clock::now());
        }
        unlock()
    });
    crate::state::leave(cx);
    r
}

/// Runs the real release `release` of held index `i` and records the hold when it succeeds.
/// For lock-holder preemption (`run --kernel` reads the held stack of a switched-out thread),
/// the hold ends before the real call: a waker preempted inside it by the thread it woke is not
/// a preempted holder. The entry is put back if the release fails.
#[inline(always)]
fn end_hold(cx: &Cx, i: usize, t_rel: u64, wanted: bool, release: impl FnOnce() -> c_int) -> c_int {
    // The site that took the lock, read while we still hold it (for the holder's stack).
    let acq_site = if wanted && CFG.frames.load(Relaxed) > 1 { held_site(cx, i) } else { 0 };
    // SAFETY: busy flag held.
    let held_addr = unsafe { cx.private() }.held.get_mut(i).map(|h| core::mem::take(&mut h.addr));
    let r = release();
    if r != 0 {
        // SAFETY: busy flag held.
        if let (Some(h), Some(a)) = (unsafe { cx.private() }.held.get_mut(i), held_addr) {
            h.addr = a;
        }
        return r;
    }
    if wanted && CFG.frames.load(Relaxed) > 1 {
        let c = &cx.shard.cost;
        c.holding.add(1);
        let timed = cost_sample(cx, |p| &mut p.cost_holding);
        let h0 = crate::cost::now_if(timed);
        holding(cx, i, t_rel, acq_site);
        if timed {
            crate::cost::add(&c.holding_timed, &c.holding_ticks, h0, clock::now());
        }
    }
    released(cx, i, t_rel, wanted);
    r
}

/// The call site that acquired the hold at held index `i` (its lock's published holder site, ours
/// while we hold it exclusively); 0 for a read hold, whose site is not published.
#[inline(never)]
fn held_site(cx: &Cx, i: usize) -> u64 {
    // SAFETY: busy flag held.
    let Some(h) = unsafe { cx.private() }.held.get(i) else { return 0 };
    if h.slot.is_null() || h.mode == Mode::Read as u8 {
        return 0;
    }
    // SAFETY: registry slots are never unmapped.
    unsafe { &*h.slot }.holder_site.load(Relaxed)
}

/// The holder's stack `frames[..n]`, captured at the release, with the function that held the lock
/// in it: when no frame is in the function of the acquisition site `acq` (the release was a tail
/// call from it, or made by a callee of a function that returned since), `acq` goes first as the
/// innermost frame (the outermost is given up when the stack is full). Returns the new length.
fn with_acquirer(frames: &mut [u64; MAX_FRAMES], n: usize, acq: u64) -> usize {
    let want = (CFG.frames.load(Relaxed) as usize).min(MAX_FRAMES);
    let Some(have) = frames.get(..n) else { return n };
    if acq == 0 || n == 0 || have.iter().any(|&f| crate::funcs::same_function(f, acq)) {
        return n;
    }
    // Unknown functions (no unwind table) are left as they are.
    if crate::funcs::start_of(acq.wrapping_sub(1)).is_none() {
        return n;
    }
    let n = (n + 1).min(want.max(1));
    frames.copy_within(0..n - 1, 1);
    frames[0] = acq;
    n
}

/// The lock at held index `i` was released while other threads wanted it: records the holder's
/// stack (captured now, after the release, so the hold was not lengthened) and the hold time.
#[cold]
#[inline(never)]
fn holding(cx: &Cx, i: usize, t_rel: u64, acq_site: u64) {
    // SAFETY: busy flag held.
    let Some(h) = (unsafe { cx.private() }).held.get(i).copied() else { return };
    if h.slot.is_null() {
        return;
    }
    // The record key of this hold: find it through the registry slot's index.
    let Some(reg) = crate::state::registry() else { return };
    // SAFETY: registry slots are never unmapped.
    let slot = unsafe { &*h.slot };
    let Some(idx) = reg.index_of(slot) else { return };
    let kind = slot.kind().unwrap_or(LockKind::Mutex);
    let mode = Mode::from_u8(h.mode).unwrap_or(Mode::Exclusive);
    let k1 = event_key(idx, slot.generation(), slot.class.load(Relaxed), kind, mode);
    let Some(hash) = site_stack(cx, h.entry as usize, 0, acq_site) else {
        cx.shard.stacks_dropped.add(1);
        return;
    };
    let hold_ns =
        if h.t_acq != 0 && t_rel != 0 { ticks_to_ns(t_rel.saturating_sub(h.t_acq)) } else { 0 };
    let k = EventKey {
        lock: k1,
        kind: EventKind::Holding,
        stack: hash,
        holder_site: 0,
        holder_stack: 0,
    };
    match cached_event(cx, h.entry as usize, &k) {
        Some(e) => {
            e.count.add(1);
            e.wait_ns.add(hold_ns);
            e.wait_ns_max.max(hold_ns);
        }
        None => cx.shard.stacks_dropped.add(1),
    }
}

// ---- POSIX semaphores ----
//
// `sem_*` return 0, or -1 with errno set. A semaphore is metered like a mutex whose trylock is
// `sem_trywait` (EAGAIN: no token): an acquisition is a wait that returned 0, contended when the
// first try found no token; a failed `sem_trywait` and a timed wait that timed out are trylock
// failures; a wait interrupted by a signal (EINTR) is neither. A `sem_post` by a thread with the
// semaphore on its held stack ends that hold (a binary semaphore used as a lock gets hold times);
// any other post (a producer's) ends no hold and bumps the slot's epoch, which retires the
// semaphore's entries on every thread's held stack (see `live`). Each function returns what the
// real call returned and leaves errno as that call left it: errno is read right after it and set
// again last.

/// Whether threads are blocked in glibc on the semaphore at `addr`: glibc's `struct new_sem` on
/// 64-bit targets keeps the number of blocked waiters in the high half of its first `u64`.
#[inline(always)]
fn sem_has_waiters(addr: usize) -> bool {
    // SAFETY: `addr` is the `sem_t` the program passed to `sem_post` (initialized, mapped and
    // 8-aligned), which glibc itself reads and writes with 64-bit atomics; a racy read is a hint.
    let data = unsafe { core::ptr::read_volatile(addr as *const u64) };
    data >> 32 != 0
}

/// `r` from a call made without metering, with errno `e` as that call left it.
#[inline(always)]
fn sem_unmetered(r: c_int, e: c_int) -> c_int {
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
        let r = try_wait();
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
    let r = try_wait();
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

/// Keeps `HELD_MAX` referenced for docs.
const _: () = assert!(HELD_MAX >= 8);

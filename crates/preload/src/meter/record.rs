//! Recording what the meter learns besides the counts: first uses, stacks (the per-site stack
//! cache), events (contended acquisitions, samples, holds that made others wait), the longest
//! waits, and the sampling decisions (stacks, hold timing, cost).

use crate::classes::{CLASSES, event_key};
use crate::state::{CFG, Cx, SITE_STACKS, SiteStack, ticks_to_ns};
use core::sync::atomic::Ordering::Relaxed;
use core::sync::atomic::{AtomicU32, Ordering::AcqRel};
use lockmeter_core::registry::{ClassOrigin, Slot};
use lockmeter_core::reservoir::{Wait, unpack_time};
use lockmeter_core::stacks::{EventEntry, EventKey, EventKind, MAX_FRAMES};
use lockmeter_core::{LockKind, Mode};

/// First uses recorded so far (bounded: a program that makes a million locks pays for 4096).
pub(super) static FIRST_USES: AtomicU32 = AtomicU32::new(0);

pub(super) const MAX_FIRST_USES: u32 = 4096;

/// Identities of a class initialized by a call whose first uses are recorded: the class names
/// the others (a program that makes a million locks at one site pays for these few).
pub(super) const FIRST_USES_PER_INIT_CLASS: u32 = 64;

/// Records where a lock identity was first used (how the report names heap locks), once per
/// identity (the thread that first marks the slot with this generation does it), at most
/// [`FIRST_USES_PER_INIT_CLASS`] per class of initialized locks.
#[cold]
pub(super) fn first_use(cx: &Cx, slot: &Slot, k1: u64, site: usize, class: u32) {
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
    let _ = count_stack_event(cx, k1, EventKind::FirstUse, site);
}

/// Captures the caller's stack and counts one `kind` event of lock `k1` with it (no holder).
/// Returns the stack's hash, `None` when the stack did not fit; a stack or event that did not
/// fit is counted as a dropped stack.
#[inline(never)]
fn count_stack_event(cx: &Cx, k1: u64, kind: EventKind, site: usize) -> Option<u64> {
    let mut frames = [0u64; MAX_FRAMES];
    let n = capture_stack(cx, site, &mut frames);
    let Some(hash) = cx.shard.stacks.intern(frames.get(..n).unwrap_or(&[])) else {
        cx.shard.stacks_dropped.add(1);
        return None;
    };
    let k = EventKey { lock: k1, kind, stack: hash, holder_site: 0, holder_stack: 0 };
    match cx.shard.events.get(&k) {
        Some(e) => e.count.add(1),
        None => cx.shard.stacks_dropped.add(1),
    }
    Some(hash)
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
pub(super) fn site_stack(cx: &Cx, key: usize, site: usize, acq: u64) -> Option<u64> {
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
pub(super) fn site_line(key: usize) -> usize {
    ((key >> 4) ^ (key >> 12)) & (SITE_STACKS - 1)
}

/// The event entry of `k` (a key whose stack `site_stack(cx, key, ..)` just gave), through the
/// stack cache's line for `key`: looked up in the event table only when the line names another
/// lock or stack.
#[inline(always)]
pub(super) fn cached_event(cx: &Cx, key: usize, k: &EventKey) -> Option<&'static EventEntry> {
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
pub(super) fn record_contention(cx: &Cx, k1: u64, c: &Contention, wait_ns: u64) -> u64 {
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
pub(super) fn keep_wait(cx: &Cx, k1: u64, c: &Contention, t0: u64, t1: u64, stack: u64) {
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
pub(super) fn record_sample(cx: &Cx, k1: u64, site: usize) -> u64 {
    count_stack_event(cx, k1, EventKind::Sampled, site).unwrap_or(0)
}

/// Whether this acquisition's stack is sampled.
#[inline(always)]
pub(super) fn sample_this(cx: &Cx) -> bool {
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
pub(super) fn cost_sample(
    cx: &Cx,
    which: impl FnOnce(&mut crate::state::Private) -> &mut u32,
) -> bool {
    // SAFETY: busy flag held; the borrow ends here.
    crate::cost::sample(which(unsafe { cx.private() }))
}

/// Whether this hold should be timed (hold timing on, or this one sampled).
#[inline(always)]
pub(super) fn time_this_hold(cx: &Cx) -> bool {
    match CFG.hold_every.load(Relaxed) {
        0 => true,
        1 => false,
        n => {
            // SAFETY: busy flag held, as in `lookup`.
            let p = unsafe { cx.private() };
            // One in n, counted down (no division on the acquisition path).
            if p.sample == 0 || p.sample > n {
                p.sample = n;
            }
            p.sample -= 1;
            p.sample == 0
        }
    }
}

/// The call site that acquired the hold at held index `i` (its lock's published holder site, ours
/// while we hold it exclusively); 0 for a read hold, whose site is not published.
#[inline(never)]
pub(super) fn held_site(cx: &Cx, i: usize) -> u64 {
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
pub(super) fn with_acquirer(frames: &mut [u64; MAX_FRAMES], n: usize, acq: u64) -> usize {
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
pub(super) fn holding(cx: &Cx, i: usize, t_rel: u64, acq_site: u64) {
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

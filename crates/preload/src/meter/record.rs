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

/// Whether this acquisition's stack is sampled (one in `--stack-sample`, counted down).
#[inline(always)]
pub(super) fn sample_this(cx: &Cx) -> bool {
    let every = CFG.stack_sample.load(Relaxed);
    if every == 0 {
        return false;
    }
    // SAFETY: busy flag held.
    let p = unsafe { cx.private() };
    settle(p);
    countdown(&mut p.stack_sample, every)
}

/// Whether to time this acquisition for the cost estimate (see `cost`).
#[inline(always)]
pub(super) fn acq_cost_sample(cx: &Cx) -> bool {
    // SAFETY: busy flag held; the borrow ends here.
    let p = unsafe { cx.private() };
    settle(p);
    crate::cost::sample(&mut p.cost_acq)
}

/// Whether to time this one for the cost estimate (see `cost`), by the sampling counter `which`
/// picks from the thread's private part (not `cost_acq`: see [`acq_cost_sample`]).
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
            settle(p);
            countdown(&mut p.sample, n)
        }
    }
}

/// The hold and stack sampling decisions of an acquisition in `mode` made on the general path
/// (the cost estimate's made already), when neither is due: then they are made (both not due)
/// and true returned, so that the acquisition may be recorded as a fast one is. False: one is
/// due, none made.
#[inline(always)]
pub(super) fn decisions_quiet(cx: &Cx, mode: Mode) -> bool {
    // SAFETY: busy flag held.
    let p = unsafe { cx.private() };
    settle(p);
    let (hold, stack) = (CFG.hold_every.load(Relaxed), CFG.stack_sample.load(Relaxed));
    let stack = if mode == Mode::Read { 0 } else { stack };
    if (hold >= 2 && countdown_start(p.sample, hold) == 1)
        || (stack != 0 && countdown_start(p.stack_sample, stack) == 1)
    {
        return false;
    }
    if hold >= 2 {
        countdown(&mut p.sample, hold);
    }
    if stack != 0 {
        countdown(&mut p.stack_sample, stack);
    }
    true
}

/// One in `n` (n >= 1), counted down in `c` (no division on the acquisition path): true when it
/// reaches 0.
#[inline(always)]
fn countdown(c: &mut u32, n: u32) -> bool {
    *c = countdown_start(*c, n) - 1;
    *c == 0
}

/// Where countdown `c` of one in `n` goes on from (1..=n): 0 or out of range start afresh.
#[inline(always)]
fn countdown_start(c: u32, n: u32) -> u32 {
    if c == 0 || c > n { n } else { c }
}

// The quiet acquisitions (`Private::quiet`). The three sampling decisions of an acquisition (the
// cost estimate's timed acquisition, `cost::SAMPLE`; the hold sample, `--hold sample:N`; the
// stack sample, `--stack-sample`) are each a countdown. After the decisions of an acquisition
// made on the general path, [`refill`] finds how many of the next acquisitions none of the
// three is due for (`quiet`), and advances each countdown over them at once; the fast path
// (`meter::fast`) then only counts `quiet` down. Any decision made while `quiet` is not zero
// (another path: a contended acquisition, a semaphore, a trylock...) first gives the unused
// quiet acquisitions back ([`settle`]), so that each countdown moves exactly as if every
// acquisition had made its decisions one by one. A fast acquisition whose general path would not
// have moved a countdown (a trylock does not move the cost estimate's, a read acquisition not
// the stack sample's) gives its step back (`fast::acquired_fast`).

/// Gives back the quiet acquisitions not used (see above): the countdowns as if decided one by
/// one.
#[inline(always)]
pub(super) fn settle(p: &mut crate::state::Private) {
    if p.quiet != 0 {
        give_back(p, p.quiet);
        p.quiet = 0;
    }
}

/// Moves the countdowns back by `q` acquisitions not made.
#[inline(always)]
fn give_back(p: &mut crate::state::Private, q: u32) {
    p.cost_acq += q;
    if CFG.hold_every.load(Relaxed) >= 2 {
        p.sample += q;
    }
    if CFG.stack_sample.load(Relaxed) != 0 {
        p.stack_sample += q;
    }
}

/// After an acquisition's decisions: the next acquisitions that none of the countdowns is due for
/// become quiet (see above), each countdown advanced over them.
#[inline(never)]
pub(super) fn refill(p: &mut crate::state::Private) {
    if p.quiet != 0 {
        return;
    }
    let (hold, stack) = (CFG.hold_every.load(Relaxed), CFG.stack_sample.load(Relaxed));
    // `cost::sample` is due when its counter is 0: that many acquisitions before it are not.
    let mut q = p.cost_acq;
    if hold >= 2 {
        q = q.min(countdown_start(p.sample, hold) - 1);
    }
    if stack != 0 {
        q = q.min(countdown_start(p.stack_sample, stack) - 1);
    }
    if q == 0 {
        return;
    }
    p.cost_acq -= q;
    if hold >= 2 {
        p.sample = countdown_start(p.sample, hold) - q;
    }
    if stack != 0 {
        p.stack_sample = countdown_start(p.stack_sample, stack) - q;
    }
    p.quiet = q;
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

//! A fixed-size reservoir of the longest waits: the collector keeps one per thread
//! (`run --longest-waits N`), so that an export can show the worst waits one by one, with the
//! holder that caused each.
//!
//! One thread writes a reservoir ([`offer`], on its contended path: no allocation, no lock, a
//! scan of N slots); any thread may read it ([`read`]) while it is written. Each slot is a
//! sequence lock: a read that overlaps a write of the same slot is told so and skips the slot.
//!
//! A wait is kept when the reservoir has room or it is longer than the shortest one kept, which
//! it replaces: after any sequence of offers the reservoir holds the N longest waits offered
//! (ties between equal lengths broken by order), whatever the order.

use core::sync::atomic::{AtomicU64, Ordering::*, fence};

/// One wait as the collector sees it, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Wait {
    /// Start of the wait (ticks).
    pub start: u64,
    /// Its length (ticks); at least 1 once kept.
    pub len: u64,
    /// The lock's event key (the collector's own encoding).
    pub lock: u64,
    /// The waiter's stack hash (0: none).
    pub stack: u64,
    /// The holder's call site (0: unknown).
    pub holder_site: u64,
    /// The holder's stack hash (0: none).
    pub holder_stack: u64,
    /// The waiter's owner id.
    pub waiter: u32,
    /// The holder's owner id (0: unknown).
    pub holder: u32,
    /// When the holder acquired the lock (ticks, 0: unknown).
    pub holder_acq: u64,
}

/// One slot of a reservoir. All-zero is empty (a reservoir can live in zeroed memory).
#[derive(Debug, Default)]
#[repr(C)]
pub struct WaitSlot {
    seq: AtomicU64,
    len: AtomicU64,
    start: AtomicU64,
    lock: AtomicU64,
    stack: AtomicU64,
    holder_site: AtomicU64,
    holder_stack: AtomicU64,
    who: AtomicU64,
    holder_acq: AtomicU64,
}

/// Offers `w` to the reservoir `slots`, whose only writer the caller is. Returns whether it was
/// kept (false for an empty reservoir, or a wait no longer than the shortest of a full one).
#[inline]
pub fn offer(slots: &[WaitSlot], w: &Wait) -> bool {
    let len = w.len.max(1);
    let mut shortest: Option<(&WaitSlot, u64)> = None;
    for s in slots {
        let l = s.len.load(Relaxed);
        if shortest.is_none_or(|(_, m)| l < m) {
            shortest = Some((s, l));
            if l == 0 {
                break;
            }
        }
    }
    let Some((s, l)) = shortest else { return false };
    if len <= l {
        return false;
    }
    let seq = s.seq.load(Relaxed);
    s.seq.store(seq.wrapping_add(1), Relaxed);
    fence(Release);
    s.len.store(len, Relaxed);
    s.start.store(w.start, Relaxed);
    s.lock.store(w.lock, Relaxed);
    s.stack.store(w.stack, Relaxed);
    s.holder_site.store(w.holder_site, Relaxed);
    s.holder_stack.store(w.holder_stack, Relaxed);
    s.who.store(((w.waiter as u64) << 32) | w.holder as u64, Relaxed);
    s.holder_acq.store(w.holder_acq, Relaxed);
    s.seq.store(seq.wrapping_add(2), Release);
    true
}

/// The wait in slot `s`: `None` when empty, or when a write of the slot overlapped this read.
pub fn read(s: &WaitSlot) -> Option<Wait> {
    let seq = s.seq.load(Acquire);
    if seq % 2 == 1 {
        return None;
    }
    let who = s.who.load(Relaxed);
    let w = Wait {
        len: s.len.load(Relaxed),
        start: s.start.load(Relaxed),
        lock: s.lock.load(Relaxed),
        stack: s.stack.load(Relaxed),
        holder_site: s.holder_site.load(Relaxed),
        holder_stack: s.holder_stack.load(Relaxed),
        waiter: (who >> 32) as u32,
        holder: who as u32,
        holder_acq: s.holder_acq.load(Relaxed),
    };
    fence(Acquire);
    (s.seq.load(Relaxed) == seq && w.len != 0).then_some(w)
}

/// Empties a reservoir (its only writer, or nobody, may be running).
pub fn clear(slots: &[WaitSlot]) {
    for s in slots {
        let seq = s.seq.load(Relaxed);
        s.seq.store(seq.wrapping_add(1), Relaxed);
        fence(Release);
        s.len.store(0, Relaxed);
        s.seq.store(seq.wrapping_add(2), Release);
    }
}

/// An acquisition time packed in 32 bits for the lock registry's slot: ticks / 256 (a shift, for
/// the acquire path), 0 meaning unknown (also what a time whose packed bits are all 0 reads as,
/// 256 ticks in every 2^40). [`unpack_time`] recovers it to 256 ticks for holds shorter than
/// 2^40 ticks.
#[inline(always)]
pub fn pack_time(t: u64) -> u32 {
    (t >> 8) as u32
}

/// The acquisition time packed by [`pack_time`], from a later clock reading `now`: `None` when
/// unknown (0). Exact to 256 ticks when `now` is less than 2^40 ticks after it.
pub fn unpack_time(now: u64, packed: u32) -> Option<u64> {
    if packed == 0 {
        return None;
    }
    let back = ((now >> 8) as u32).wrapping_sub(packed) as u64;
    Some((now >> 8).saturating_sub(back) << 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(n: usize) -> Vec<WaitSlot> {
        (0..n).map(|_| WaitSlot::default()).collect()
    }

    fn kept(r: &[WaitSlot]) -> Vec<u64> {
        let mut v: Vec<u64> = r.iter().filter_map(read).map(|w| w.len).collect();
        v.sort_unstable();
        v
    }

    /// A small deterministic generator (xorshift).
    fn next(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    #[test]
    fn keeps_the_longest_whatever_the_order() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..200 {
            let k = 1 + round % 9;
            let n = round % 50;
            let mut lens: Vec<u64> = (0..n).map(|_| 1 + next(&mut x) % 40).collect();
            let r = slots(k);
            for (i, &len) in lens.iter().enumerate() {
                let w = Wait { start: i as u64, len, lock: len * 3, ..Wait::default() };
                offer(&r, &w);
            }
            lens.sort_unstable();
            let want: Vec<u64> = lens.iter().rev().take(k).rev().copied().collect();
            assert_eq!(kept(&r), want, "k {k}, offered {lens:?}");
            // Each kept slot is whole: its fields are those of one offer.
            for w in r.iter().filter_map(read) {
                assert_eq!(w.lock, w.len * 3);
            }
        }
    }

    #[test]
    fn fields_round_trip_and_clear() {
        let r = slots(2);
        let w = Wait {
            start: 10,
            len: 5,
            lock: 7,
            stack: 8,
            holder_site: 9,
            holder_stack: 11,
            waiter: 12,
            holder: u32::MAX,
            holder_acq: 13,
        };
        assert!(offer(&r, &w));
        assert_eq!(r.iter().filter_map(read).collect::<Vec<_>>(), vec![w]);
        assert!(!offer(&[], &w));
        clear(&r);
        assert!(kept(&r).is_empty());
        // A zero length is kept as 1 (a wait that found the lock held waited).
        assert!(offer(&r, &Wait { len: 0, ..w }));
        assert_eq!(kept(&r), vec![1]);
    }

    #[test]
    fn a_torn_read_is_refused() {
        let r = slots(1);
        offer(&r, &Wait { len: 4, ..Wait::default() });
        // A write in progress (odd sequence) is not read.
        r[0].seq.fetch_add(1, Relaxed);
        assert_eq!(read(&r[0]), None);
    }

    #[test]
    fn packed_times() {
        assert_eq!(pack_time(0), 0);
        assert_eq!(unpack_time(5000, 0), None);
        assert_eq!(pack_time(10), 0);
        for t in [256u64, 1 << 20, (1 << 45) + 12345, u64::MAX >> 2] {
            for later in [0u64, 1, 1 << 30, (1 << 40) - 256] {
                let got = unpack_time(t + later, pack_time(t)).unwrap();
                assert_eq!(got, t & !255, "t {t} later {later}");
            }
        }
    }
}

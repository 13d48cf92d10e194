//! A bounded time series of per-lock sums, over caller-provided memory (no allocation).
//!
//! The collector's control thread sums every record's raw counters per lock once per period
//! ([`Timeline::begin_sums`], [`Timeline::add`]) and closes an interval
//! ([`Timeline::close_interval`]): the interval keeps, per lock, the difference from the previous
//! sample. At most [`MAX_INTERVALS`] intervals and `rows.len()` (interval, lock) rows are kept;
//! when either is full, neighbouring intervals are merged (half as many, twice as wide) and the
//! period doubles. What still does not fit is counted ([`Timeline::lost`]).
//!
//! The profile writer sums the records it writes and asks for the open interval
//! ([`Timeline::open_deltas`]): the same figures less the last sample, so that per lock the
//! intervals add up exactly to the totals written.
//!
//! ```
//! use lockmeter_core::timeline::{Row, Slot, Timeline};
//! let (mut s1, mut u1, mut s2, mut u2) = (vec![Slot::default(); 64], vec![0; 64], vec![Slot::default(); 64], vec![0; 64]);
//! let (mut r1, mut r2) = (vec![Row::default(); 64], vec![Row::default(); 64]);
//! let mut t = Timeline::new(&mut s1, &mut u1, &mut s2, &mut u2, &mut r1, &mut r2, 1000);
//! t.begin_sums();
//! t.add(7, 0, [10, 1, 50, 20]);
//! t.close_interval(1000);
//! t.begin_sums();
//! t.add(7, 0, [15, 1, 50, 30]);
//! let mut open = Vec::new();
//! t.open_deltas(|pair, v| open.push((pair, v)));
//! assert_eq!(t.intervals().next().unwrap().2[0].v, [10, 1, 50, 20]);
//! assert_eq!(open, vec![(7, [5, 0, 0, 10])]);
//! ```

use crate::probe::Probe;

/// Most intervals kept before neighbours are merged.
pub const MAX_INTERVALS: usize = 512;

/// One lock's figures (acquisitions, contended, wait ns, hold ns) in one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Row {
    /// The lock's identity (the collector's slot << 32 | generation).
    pub pair: u64,
    /// acquisitions, contended, wait_ns, hold_ns.
    pub v: [u64; 4],
}

/// One slot of a per-lock sum map; zeroed memory is an empty slot.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C)]
pub struct Slot {
    pair: u64,
    stamp: u64,
    /// Where the lock's sums go when it ends (its class; 0: nowhere).
    heir: u64,
    v: [u64; 4],
}

/// An open-addressed map lock -> four sums, emptied in O(1) by moving its stamp on; kept at
/// most half full.
#[derive(Debug)]
struct SumMap<'a> {
    slots: &'a mut [Slot],
    /// Indices of the slots in use under the current stamp, in insertion order.
    used: &'a mut [u32],
    nused: usize,
    stamp: u64,
}

impl<'a> SumMap<'a> {
    fn new(slots: &'a mut [Slot], used: &'a mut [u32]) -> Self {
        let cap = crate::pow2_floor(slots.len().min(used.len()));
        let (slots, _) = slots.split_at_mut(cap);
        // Empty (zeroed) slots have stamp 0.
        SumMap { slots, used, nused: 0, stamp: 1 }
    }

    fn clear(&mut self) {
        self.stamp += 1;
        self.nused = 0;
    }

    /// The sums of `pair`, inserted as zero if absent; `None` when full.
    fn get(&mut self, pair: u64) -> Option<&mut [u64; 4]> {
        self.slot(pair).map(|s| &mut s.v)
    }

    /// The slot of `pair`, inserted empty if absent; `None` when full.
    fn slot(&mut self, pair: u64) -> Option<&mut Slot> {
        let cap = self.slots.len();
        let mut found = None;
        for i in Probe::new(crate::mix64(pair.wrapping_add(1)), cap, cap) {
            let s = self.slots.get(i)?;
            if s.stamp == self.stamp && s.pair == pair {
                found = Some(i);
                break;
            }
            if s.stamp != self.stamp {
                if self.nused >= cap / 2 {
                    return None;
                }
                *self.used.get_mut(self.nused)? = i as u32;
                self.nused += 1;
                *self.slots.get_mut(i)? = Slot { pair, stamp: self.stamp, heir: 0, v: [0; 4] };
                found = Some(i);
                break;
            }
        }
        self.slots.get_mut(found?)
    }

    /// The slot of `pair`, if present (nothing inserted).
    fn find(&self, pair: u64) -> Option<&Slot> {
        let cap = self.slots.len();
        for i in Probe::new(crate::mix64(pair.wrapping_add(1)), cap, cap) {
            let s = self.slots.get(i)?;
            if s.stamp != self.stamp {
                return None;
            }
            if s.pair == pair {
                return Some(s);
            }
        }
        None
    }

    /// The entry at position `k` of the insertion order.
    fn at(&self, k: usize) -> Option<(u64, [u64; 4])> {
        self.slot_at(k).map(|s| (s.pair, s.v))
    }

    /// The slot at position `k` of the insertion order.
    fn slot_at(&self, k: usize) -> Option<&Slot> {
        let i = *self.used.get(k).filter(|_| k < self.nused)? as usize;
        self.slots.get(i)
    }
}

/// The heir of the lock of `s` (a slot of the last sample) if that lock ended since: the sums
/// just made (`cur`) no longer have it, and it has an heir other than itself.
fn ended_heir(cur: &SumMap<'_>, s: &Slot) -> Option<u64> {
    (s.heir != 0 && s.heir != s.pair && cur.find(s.pair).is_none()).then_some(s.heir)
}

#[derive(Debug, Clone, Copy, Default)]
struct Interval {
    start_ns: u64,
    end_ns: u64,
    first: usize,
    len: usize,
}

/// The time series (see the module docs).
#[derive(Debug)]
pub struct Timeline<'a> {
    prev: SumMap<'a>,
    cur: SumMap<'a>,
    intervals: [Interval; MAX_INTERVALS],
    n: usize,
    rows: &'a mut [Row],
    spare: &'a mut [Row],
    used: usize,
    open_start_ns: u64,
    lost: u64,
    period_ns: u64,
}

impl<'a> Timeline<'a> {
    /// A time series over two sum maps (`slots`, empty, i.e. default or zeroed, and `used` each;
    /// sized for twice the locks expected) and two row arrays of the same size, sampled every
    /// `period_ns`.
    pub fn new(
        prev_slots: &'a mut [Slot],
        prev_used: &'a mut [u32],
        cur_slots: &'a mut [Slot],
        cur_used: &'a mut [u32],
        rows: &'a mut [Row],
        spare: &'a mut [Row],
        period_ns: u64,
    ) -> Self {
        let n = rows.len().min(spare.len());
        let (rows, _) = rows.split_at_mut(n);
        let (spare, _) = spare.split_at_mut(n);
        Timeline {
            prev: SumMap::new(prev_slots, prev_used),
            cur: SumMap::new(cur_slots, cur_used),
            intervals: [Interval::default(); MAX_INTERVALS],
            n: 0,
            rows,
            spare,
            used: 0,
            open_start_ns: 0,
            lost: 0,
            period_ns,
        }
    }

    /// The sampling period now (it doubles at each merge).
    pub fn period_ns(&self) -> u64 {
        self.period_ns
    }

    /// Rows (or locks) that did not fit so far.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Starts summing the records' raw figures per lock.
    pub fn begin_sums(&mut self) {
        self.cur.clear();
    }

    /// Adds one record's raw figures to lock `pair`'s sums. `heir` is where the lock's figures
    /// will be summed once it ends (its class, 0: none): when a later sample no longer has
    /// `pair`, its figures so far move to `heir`, in every interval (see `Timeline::inherit`).
    pub fn add(&mut self, pair: u64, heir: u64, v: [u64; 4]) {
        match self.cur.slot(pair) {
            Some(s) => {
                for (a, b) in s.v.iter_mut().zip(v) {
                    *a = a.wrapping_add(b);
                }
                if heir != 0 {
                    s.heir = heir;
                }
            }
            None => self.lost += 1,
        }
    }

    /// Locks of the last sample that the sums just made no longer have ended since (their
    /// figures are now summed under their heir, a class): their figures of the last sample join
    /// the heir's, so that the heir's next difference does not count them again, and their rows
    /// in the closed intervals become the heir's. Without it a class would get every lifetime
    /// that ended in one interval, all at once.
    fn inherit(&mut self) {
        let mut moved = false;
        let mut k = 0;
        while let Some(s) = self.prev.slot_at(k).copied() {
            k += 1;
            let Some(heir) = ended_heir(&self.cur, &s) else { continue };
            moved = true;
            match self.prev.get(heir) {
                Some(h) => {
                    for (a, b) in h.iter_mut().zip(s.v) {
                        *a = a.wrapping_add(b);
                    }
                }
                None => self.lost += 1,
            }
        }
        if !moved {
            return;
        }
        // Rows of ended locks become their heir's: renamed, then merged within each interval.
        for n in 0..self.n {
            let Some(iv) = self.intervals.get(n).copied() else { break };
            let Some(rows) = self.rows.get_mut(iv.first..iv.first + iv.len) else { continue };
            let mut renamed = false;
            for r in rows.iter_mut() {
                if let Some(heir) = self.prev.find(r.pair).and_then(|s| ended_heir(&self.cur, s)) {
                    r.pair = heir;
                    renamed = true;
                }
            }
            if !renamed {
                continue;
            }
            rows.sort_unstable_by_key(|r| r.pair);
            let mut out = 0usize;
            for i in 0..rows.len() {
                let r = rows[i];
                if out > 0 && rows[out - 1].pair == r.pair {
                    let o = &mut rows[out - 1];
                    o.v = core::array::from_fn(|j| o.v[j].wrapping_add(r.v[j]));
                } else {
                    rows[out] = r;
                    out += 1;
                }
            }
            if let Some(iv) = self.intervals.get_mut(n) {
                iv.len = out;
            }
        }
    }

    /// Forgets every interval: the sums just made are the new base, the open interval starts at
    /// `now_ns` (a reset of the counts).
    pub fn reset(&mut self, now_ns: u64) {
        core::mem::swap(&mut self.prev, &mut self.cur);
        self.n = 0;
        self.used = 0;
        self.lost = 0;
        self.open_start_ns = now_ns;
    }

    /// Forgets everything, sums included (a new process: counts start from zero).
    pub fn clear(&mut self, now_ns: u64) {
        self.prev.clear();
        self.cur.clear();
        self.n = 0;
        self.used = 0;
        self.lost = 0;
        self.open_start_ns = now_ns;
    }

    /// Closes the open interval at `now_ns` with the sums just made.
    pub fn close_interval(&mut self, now_ns: u64) {
        if self.n >= MAX_INTERVALS {
            self.merge();
        }
        while self.used + self.cur.nused > self.rows.len() && self.n > 1 {
            self.merge();
        }
        self.inherit();
        let first = self.used;
        let mut k = 0;
        while let Some((pair, now)) = self.cur.at(k) {
            k += 1;
            let prev = self.prev.find(pair).map_or([0; 4], |s| s.v);
            let d: [u64; 4] = core::array::from_fn(|i| now[i].saturating_sub(prev[i]));
            if d == [0; 4] {
                continue;
            }
            match self.rows.get_mut(self.used) {
                Some(r) => {
                    *r = Row { pair, v: d };
                    self.used += 1;
                }
                None => self.lost += 1,
            }
        }
        // Sorted by lock, so that a merge is one pass over two sorted lists.
        if let Some(new) = self.rows.get_mut(first..self.used) {
            new.sort_unstable_by_key(|r| r.pair);
        }
        if let Some(iv) = self.intervals.get_mut(self.n) {
            *iv = Interval {
                start_ns: self.open_start_ns,
                end_ns: now_ns.max(self.open_start_ns),
                first,
                len: self.used - first,
            };
            self.n += 1;
        }
        self.open_start_ns = now_ns.max(self.open_start_ns);
        // The sums just made are the next interval's base.
        core::mem::swap(&mut self.prev, &mut self.cur);
    }

    /// Merges neighbouring intervals (0+1, 2+3, ...) and doubles the period.
    fn merge(&mut self) {
        let mut out = 0usize;
        let mut n = 0usize;
        let mut i = 0usize;
        while i < self.n {
            let a = self.intervals.get(i).copied().unwrap_or_default();
            let b = self.intervals.get(i + 1).copied().filter(|_| i + 1 < self.n);
            let la = self.rows.get(a.first..a.first + a.len).unwrap_or_default();
            let lb = b.and_then(|b| self.rows.get(b.first..b.first + b.len)).unwrap_or_default();
            let first = out;
            let (mut x, mut y) = (0, 0);
            loop {
                let r = match (la.get(x), lb.get(y)) {
                    (Some(p), Some(q)) if p.pair == q.pair => {
                        x += 1;
                        y += 1;
                        Row {
                            pair: p.pair,
                            v: core::array::from_fn(|k| p.v[k].wrapping_add(q.v[k])),
                        }
                    }
                    (Some(p), Some(q)) if p.pair < q.pair => {
                        x += 1;
                        *p
                    }
                    (Some(p), None) => {
                        x += 1;
                        *p
                    }
                    (_, Some(q)) => {
                        y += 1;
                        *q
                    }
                    (None, None) => break,
                };
                // The output never outgrows the input, which fits.
                if let Some(o) = self.spare.get_mut(out) {
                    *o = r;
                    out += 1;
                }
            }
            let end_ns = b.map_or(a.end_ns, |b| b.end_ns);
            if let Some(iv) = self.intervals.get_mut(n) {
                *iv = Interval { start_ns: a.start_ns, end_ns, first, len: out - first };
            }
            n += 1;
            i += 2;
        }
        self.n = n;
        self.used = out;
        core::mem::swap(&mut self.rows, &mut self.spare);
        self.period_ns = self.period_ns.saturating_mul(2);
    }

    /// The closed intervals: (start_ns, end_ns, rows sorted by lock).
    pub fn intervals(&self) -> impl Iterator<Item = (u64, u64, &[Row])> {
        self.intervals.iter().take(self.n).map(|iv| {
            (iv.start_ns, iv.end_ns, self.rows.get(iv.first..iv.first + iv.len).unwrap_or_default())
        })
    }

    /// Where the open interval started.
    pub fn open_start_ns(&self) -> u64 {
        self.open_start_ns
    }

    /// The open interval: calls `f` with each lock's sums just made less the last sample (only
    /// non-zero ones). Changes nothing but what `Timeline::inherit` does for locks that ended
    /// since the last sample.
    pub fn open_deltas(&mut self, mut f: impl FnMut(u64, [u64; 4])) {
        self.inherit();
        let mut k = 0;
        while let Some((pair, now)) = self.cur.at(k) {
            k += 1;
            let prev = self.prev.find(pair).map_or([0; 4], |s| s.v);
            let d: [u64; 4] = core::array::from_fn(|i| now[i].saturating_sub(prev[i]));
            if d != [0; 4] {
                f(pair, d);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mem(n: usize) -> (Vec<Slot>, Vec<u32>) {
        (vec![Slot::default(); n], vec![0; n])
    }

    /// Sampling past the caps merges neighbours: at most MAX_INTERVALS are kept, in order and
    /// contiguous, the period doubles, and the rows still add up to the counts exactly.
    #[test]
    fn merges_keep_sums_exact_and_memory_bounded() {
        let ((mut s1, mut u1), (mut s2, mut u2)) = (mem(64), mem(64));
        let (mut r1, mut r2) = (vec![Row::default(); 700], vec![Row::default(); 700]);
        let mut t = Timeline::new(&mut s1, &mut u1, &mut s2, &mut u2, &mut r1, &mut r2, 1000);
        let (a, b) = (1u64 << 32 | 1, 2u64 << 32 | 1);
        let (mut va, mut vb) = ([0u64; 4], [0u64; 4]);
        let samples = 3 * MAX_INTERVALS as u64 + 7;
        for i in 1..=samples {
            va[0] += i % 5;
            va[2] += 3 * i;
            if i % 7 == 0 {
                vb[0] += 1;
                vb[3] += 10;
            }
            t.begin_sums();
            t.add(a, 0, va);
            t.add(b, 0, vb);
            t.close_interval(i * 1000);
        }
        assert!(t.n <= MAX_INTERVALS, "{}", t.n);
        assert!(t.period_ns() >= 4000, "merged at least twice: {}", t.period_ns());
        let mut end = 0;
        let mut sums = [[0u64; 4]; 2];
        for (start, stop, rows) in t.intervals() {
            assert_eq!(start, end);
            assert!(stop > start);
            end = stop;
            assert!(rows.windows(2).all(|w| w[0].pair < w[1].pair));
            for r in rows {
                let k = usize::from(r.pair != a);
                for (s, v) in sums[k].iter_mut().zip(r.v) {
                    *s += v;
                }
            }
        }
        assert_eq!(end, samples * 1000);
        assert_eq!(sums, [va, vb]);
        assert_eq!(t.lost(), 0);

        // The open interval brings the sums up to date; a reset starts from the sums then.
        va[0] += 5;
        t.begin_sums();
        t.add(a, 0, va);
        t.add(b, 0, vb);
        let mut open = Vec::new();
        t.open_deltas(|p, d| open.push((p, d)));
        assert_eq!(open, vec![(a, [5, 0, 0, 0])]);
        t.reset(end + 500);
        assert_eq!(t.intervals().count(), 0);
        va[1] += 2;
        t.begin_sums();
        t.add(a, 0, va);
        t.add(b, 0, vb);
        t.close_interval(end + 900);
        let (s, e, rows) = t.intervals().next().unwrap();
        assert_eq!((s, e, rows), (end + 500, end + 900, &[Row { pair: a, v: [0, 2, 0, 0] }][..]));
    }

    #[test]
    fn what_does_not_fit_is_counted() {
        let ((mut s1, mut u1), (mut s2, mut u2)) = (mem(4), mem(4));
        let (mut r1, mut r2) = (vec![Row::default(); 4], vec![Row::default(); 4]);
        let mut t = Timeline::new(&mut s1, &mut u1, &mut s2, &mut u2, &mut r1, &mut r2, 10);
        t.begin_sums();
        for p in 1..=5u64 {
            t.add(p, 0, [1, 0, 0, 0]);
        }
        // Half of 4 slots: 2 locks fit, 3 are counted.
        assert_eq!(t.lost(), 3);
        t.close_interval(10);
        assert_eq!(t.intervals().next().unwrap().2.len(), 2);
    }

    /// A lock that ends while the series runs: its figures move to its class (the heir) in every
    /// interval, and the class's interval where the lock ended gets only what happened in it.
    #[test]
    fn an_ended_lock_hands_its_intervals_to_its_class() {
        let ((mut s1, mut u1), (mut s2, mut u2)) = (mem(64), mem(64));
        let (mut r1, mut r2) = (vec![Row::default(); 64], vec![Row::default(); 64]);
        let mut t = Timeline::new(&mut s1, &mut u1, &mut s2, &mut u2, &mut r1, &mut r2, 10);
        let (lock, other, class) = (3u64 << 32 | 1, 4u64 << 32 | 1, 99u64);
        // Interval 1: the lock and another lock of the class; the class has an earlier lifetime.
        t.begin_sums();
        t.add(lock, class, [10, 1, 5, 7]);
        t.add(other, class, [1, 0, 0, 0]);
        t.add(class, 0, [100, 0, 0, 0]);
        t.close_interval(10);
        // Interval 2: the lock did 4 more, then ended: its 14 are summed under the class now.
        t.begin_sums();
        t.add(other, class, [2, 0, 0, 0]);
        t.add(class, 0, [114, 1, 5, 7]);
        t.close_interval(20);
        // Interval 3 (open): the class gets 6 more from a later lifetime, and `other` ends too.
        t.begin_sums();
        t.add(class, 0, [122, 1, 5, 7]);
        let mut open = Vec::new();
        t.open_deltas(|p, d| open.push((p, d)));
        let iv: Vec<_> = t.intervals().map(|(_, _, r)| r.to_vec()).collect();
        assert_eq!(iv[0], vec![Row { pair: class, v: [111, 1, 5, 7] }]);
        assert_eq!(iv[1], vec![Row { pair: class, v: [5, 0, 0, 0] }]);
        assert_eq!(open, vec![(class, [6, 0, 0, 0])]);
        // Every figure once: 100 before, 10 + 4 of the lock, 2 of `other`, 6 later.
        let total: u64 = iv.iter().flatten().map(|r| r.v[0]).sum::<u64>() + open[0].1[0];
        assert_eq!(total, 122);
        assert_eq!(t.lost(), 0);
    }
}

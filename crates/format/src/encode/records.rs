//! The record methods after the header: maps, threads, locks, statistics, the time series,
//! stacks, events, the longest waits, notes, and what was dropped and what it cost.

use crate::layout::tag;
use crate::model::{
    CpuStats, Dropped, Event, IntervalLock, LockClass, LockKind, LockSleep, LongWait, Lost, Mode,
    Overhead, Record, Stats,
};

use super::{EncodeError, Encoder, MAX_STACK_FRAMES, MapRef, Rec, Sink, cap};

impl<S: Sink> Encoder<S> {
    /// Writes one memory-map line.
    pub fn map(&mut self, m: &MapRef<'_>) -> Result<(), EncodeError> {
        self.map_line(m.start, m.end, m.offset, m.perms, m.path)
    }

    /// Writes one memory-map line from its parts.
    pub fn map_line(
        &mut self,
        start: u64,
        end: u64,
        offset: u64,
        perms: &[u8],
        path: &[u8],
    ) -> Result<(), EncodeError> {
        let mut t = false;
        let perms = cap(perms, &mut t);
        let path = cap(path, &mut t);
        let mut r = Rec::new();
        r.u64(start);
        r.u64(end);
        r.u64(offset);
        r.len32(perms);
        r.len32(path);
        self.emit(tag::MAP, 0, &mut r, &[perms, path], t)
    }

    /// Writes one thread.
    pub fn thread(&mut self, index: u32, tid: u32, name: &[u8]) -> Result<(), EncodeError> {
        let mut t = false;
        let name = cap(name, &mut t);
        let mut r = Rec::new();
        r.u32(index);
        r.u32(tid);
        r.len32(name);
        self.emit(tag::THREAD, 0, &mut r, &[name], t)
    }

    /// Writes one lock identity.
    pub fn lock(
        &mut self,
        id: u32,
        address: u64,
        generation: u32,
        kind: LockKind,
        name: Option<&[u8]>,
    ) -> Result<(), EncodeError> {
        let mut t = false;
        let name = name.map(|n| cap(n, &mut t));
        let mut r = Rec::new();
        r.u32(id);
        r.u64(address);
        r.u32(generation);
        r.u8(kind as u8);
        r.u8(u8::from(name.is_some()));
        let bytes = name.unwrap_or_default();
        r.len32(bytes);
        self.emit(tag::LOCK, 0, &mut r, &[bytes], t)
    }

    /// Writes one record of statistics.
    pub fn record(&mut self, rec: &Record) -> Result<(), EncodeError> {
        self.stats(rec.thread, rec.lock, rec.site, rec.mode, &rec.stats)
    }

    /// Writes one record of statistics from its parts (no [`Record`] needs to be built).
    pub fn stats(
        &mut self,
        thread: u32,
        lock: u32,
        site: u64,
        mode: Mode,
        s: &Stats,
    ) -> Result<(), EncodeError> {
        let mut r = Rec::new();
        r.u32(thread);
        r.u32(lock);
        r.u64(site);
        r.u8(mode as u8);
        for v in [
            s.acquisitions,
            s.contended,
            s.trylock_failures,
            s.wait_ns_total,
            s.wait_ns_max,
            s.hold_ns_total,
            s.hold_ns_max,
            s.holds_timed,
            s.owner_changes,
            s.cnt_hold,
            s.cnt_lock,
            s.cond_waits,
            s.cond_wait_ns,
        ] {
            r.u64(v);
        }
        r.hist(&s.wait_hist);
        r.hist(&s.hold_hist);
        self.emit(tag::RECORD, 0, &mut r, &[], false)
    }

    /// Writes the totals of one CPU.
    pub fn cpu(&mut self, c: &CpuStats) -> Result<(), EncodeError> {
        let mut r = Rec::new();
        r.u32(c.cpu);
        r.u64(c.acquisitions);
        r.u64(c.contended);
        r.u64(c.wait_ns);
        self.emit(tag::CPU, 0, &mut r, &[], false)
    }

    /// Writes interval number `index` of the time series (numbered from 0, in time order).
    pub fn interval(&mut self, index: u32, start_ns: u64, end_ns: u64) -> Result<(), EncodeError> {
        let mut r = Rec::new();
        r.u32(index);
        r.u64(start_ns);
        r.u64(end_ns);
        self.emit(tag::INTERVAL, 0, &mut r, &[], false)
    }

    /// Writes what one lock did in interval `index` (written after that interval).
    pub fn interval_lock(&mut self, index: u32, l: &IntervalLock) -> Result<(), EncodeError> {
        let mut r = Rec::new();
        r.u32(index);
        r.u32(l.lock);
        r.u64(l.acquisitions);
        r.u64(l.contended);
        r.u64(l.wait_ns);
        r.u64(l.hold_ns);
        self.emit(tag::INTERVAL_LOCK, 0, &mut r, &[], false)
    }

    /// Writes the kernel sleeps of one lock.
    pub fn lock_sleep(&mut self, l: &LockSleep) -> Result<(), EncodeError> {
        let mut r = Rec::new();
        r.u32(l.lock);
        r.u64(l.sleeps);
        r.u64(l.sleep_ns);
        r.u64(l.sleep_ns_max);
        r.u64(l.preempted_holds);
        r.u64(l.preempted_ns);
        r.u64(l.preempted_wait_ns);
        self.emit(tag::LOCK_SLEEP, 0, &mut r, &[], false)
    }

    /// Writes acquisitions of one (lock, site, mode) that were not recorded.
    pub fn lost(&mut self, l: &Lost) -> Result<(), EncodeError> {
        let mut r = Rec::new();
        r.u32(l.lock);
        r.u64(l.site);
        r.u8(l.mode as u8);
        r.u64(l.acquisitions);
        self.emit(tag::LOST, 0, &mut r, &[], false)
    }

    /// Writes that lock `c.lock` is a class.
    pub fn lock_class(&mut self, c: &LockClass) -> Result<(), EncodeError> {
        let mut r = Rec::new();
        r.u32(c.lock);
        r.u64(c.site);
        r.u8(if c.initialized { 1 } else { 2 });
        r.u64(c.lifetimes);
        r.u64(c.sample_address);
        self.emit(tag::LOCK_CLASS, 0, &mut r, &[], false)
    }

    /// Writes one interned stack (at most [`MAX_STACK_FRAMES`] frames are kept).
    pub fn stack(&mut self, id: u32, frames: &[u64]) -> Result<(), EncodeError> {
        let frames = frames.get(..frames.len().min(MAX_STACK_FRAMES)).unwrap_or_default();
        let mut r = Rec::new();
        r.u32(id);
        r.u32(frames.len() as u32);
        for &f in frames {
            r.u64(f);
        }
        self.emit(tag::STACK, 0, &mut r, &[], false)
    }

    /// Writes one aggregated event.
    pub fn event(&mut self, e: &Event) -> Result<(), EncodeError> {
        let mut r = Rec::new();
        r.u32(e.thread);
        r.u32(e.lock);
        r.u8(e.mode as u8);
        r.u8(e.kind as u8);
        r.u32(e.stack);
        r.u64(e.holder_site);
        r.u32(e.holder_stack.unwrap_or(u32::MAX));
        r.u64(e.count);
        r.u64(e.wait_ns);
        r.u64(e.wait_ns_max);
        self.emit(tag::EVENT, 0, &mut r, &[], false)
    }

    /// Writes how the longest waits were kept (once, before the LONG_WAIT records).
    pub fn long_waits(&mut self, per_thread: u32, lost: u64) -> Result<(), EncodeError> {
        let mut r = Rec::new();
        r.u32(per_thread);
        r.u64(lost);
        self.emit(tag::LONG_WAITS, 0, &mut r, &[], false)
    }

    /// Writes one of the longest waits (after the LONG_WAITS record).
    pub fn long_wait(&mut self, w: &LongWait) -> Result<(), EncodeError> {
        let mut r = Rec::new();
        r.u32(w.thread);
        r.u32(w.lock);
        r.u8(w.mode as u8);
        r.u64(w.start_ns);
        r.u64(w.end_ns);
        r.u32(w.stack.unwrap_or(u32::MAX));
        r.u32(w.holder_thread);
        r.u64(w.holder_site);
        r.u32(w.holder_stack.unwrap_or(u32::MAX));
        r.u64(w.holder_acquired_ns.unwrap_or(u64::MAX));
        self.emit(tag::LONG_WAIT, 0, &mut r, &[], false)
    }

    /// A NOTE record: one sentence about what the collector could not see.
    pub fn note(&mut self, text: &[u8]) -> Result<(), EncodeError> {
        let mut t = false;
        let text = cap(text, &mut t);
        let mut r = Rec::new();
        r.len32(text);
        self.emit(tag::NOTE, 0, &mut r, &[text], t)
    }

    /// Writes what did not fit. At most once.
    pub fn dropped(&mut self, d: &Dropped) -> Result<(), EncodeError> {
        self.check()?;
        if self.dropped_done {
            return Err(EncodeError::Misuse("dropped written twice"));
        }
        let mut r = Rec::new();
        r.u64(d.acquisitions);
        r.u64(d.locks);
        r.u64(d.threads);
        r.u64(d.holds);
        r.u64(d.stacks);
        r.u64(d.acquisitions_no_thread);
        r.u64(d.acquisitions_table_full);
        r.u64(d.acquisitions_registry_full);
        self.emit(tag::DROPPED, 0, &mut r, &[], false)?;
        self.dropped_done = true;
        Ok(())
    }

    /// Writes the profiler's own cost. At most once.
    pub fn overhead(&mut self, o: &Overhead) -> Result<(), EncodeError> {
        self.check()?;
        if self.overhead_done {
            return Err(EncodeError::Misuse("overhead written twice"));
        }
        let mut r = Rec::new();
        r.u64(o.ns_per_pair);
        r.u64(o.estimated_total_ns);
        r.u64(o.memory_bytes);
        r.u64(o.ns_per_stack);
        r.u64(o.estimated_slowdown_milli);
        r.u64(o.contended_ns);
        r.u64(o.serialized_ns);
        r.u64(o.cpu_ns);
        r.u64(o.hooks_ns);
        r.u64(o.start_ns);
        r.u64(o.end_ns);
        r.u64(o.other_images);
        r.u64(o.other_fixed_ns);
        self.emit(tag::OVERHEAD, 0, &mut r, &[], false)?;
        self.overhead_done = true;
        Ok(())
    }
}

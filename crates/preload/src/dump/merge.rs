//! Merging the rows of the profile: one per shard, then the accumulations of exited threads
//! merged into one scratch row (`Merged`), and what each record of their tables is in the
//! profile (`record_row`: its own row, its class's, or left out).

use super::ids::class_pair;
use crate::state;
use core::sync::atomic::Ordering::*;
use lockmeter_core::stacks::{EventEntry, EventTable, StackEntry, StackStore};
use lockmeter_core::table::Table;
use lockmeter_core::{LockKind, Mode};

/// What a record of the tables is in the profile (see [`record_row`]).
pub(super) struct RecordRow {
    /// A row of its own, a class, or left out.
    pub(super) ident: crate::classes::Ident,
    /// The key of its row: a live identity's `(slot << 32) | generation`, a class's
    /// [`class_pair`] (the time series and the lock ids use it).
    pub(super) row: u64,
    /// The row its figures join when its identity ends (its class's), 0 for a class row: the
    /// time series hands the identity's intervals over to it.
    pub(super) heir: u64,
    pub(super) kind: LockKind,
    pub(super) mode: Mode,
}

/// What record `k1` tagged `tag` is in the profile; `None` for the calibration lock, records not
/// yet tagged and keys that do not decode.
pub(super) fn record_row(
    reg: &lockmeter_core::registry::Registry<'_>,
    k1: u64,
    tag: u64,
) -> Option<RecordRow> {
    let (_, _, kind, mode) = crate::classes::unkey(k1);
    let (kind, mode) = (LockKind::from_u8(kind)?, Mode::from_u8(mode)?);
    let ident = crate::classes::idents(Some(reg)).resolve(k1, tag);
    let (row, heir) = match ident {
        crate::classes::Ident::Live(pair) => {
            (pair, class_pair(crate::classes::untag(tag).1, kind as u8))
        }
        crate::classes::Ident::Class(c) => (class_pair(c, kind as u8), 0),
        crate::classes::Ident::Skip => return None,
    };
    Some(RecordRow { ident, row, heir, kind, mode })
}

/// The owner id a row's baseline is keyed by: the shard's current owner (a new thread that takes
/// a dead thread's table over starts from zero), 0 for the exited threads' row.
pub(super) fn row_owner(row: &Row<'_>) -> u64 {
    match row.who {
        Who::Thread(sh) => sh.owner.load(Relaxed) as u64,
        Who::Exited(_) => 0,
    }
}

/// The thread index of the row of exited threads (above every shard's index).
const EXITED_INDEX: u32 = state::MAX_THREADS as u32 + 1;

/// Whose records a [`Row`] holds.
pub(super) enum Who<'a> {
    /// A shard's current (or last) thread.
    Thread(&'a state::Shard),
    /// The dead threads of every taken-over shard, this many.
    Exited(u64),
}

/// One thread row of the profile and its tables.
pub(super) struct Row<'a> {
    pub(super) index: u32,
    pub(super) table: &'a Table<'static>,
    pub(super) stacks: &'a StackStore<'static>,
    pub(super) events: &'a EventTable<'static>,
    pub(super) who: Who<'a>,
}

/// Every row: one per shard, then the exited threads (if any).
pub(super) fn rows(merged: &Merged) -> impl Iterator<Item = Row<'_>> {
    let shards = state::shards().map(|sh| Row {
        index: sh.index,
        table: &sh.table,
        stacks: &sh.stacks,
        events: &sh.events,
        who: Who::Thread(sh),
    });
    let exited = (merged.threads > 0).then_some(Row {
        index: EXITED_INDEX,
        table: &merged.table,
        stacks: &merged.stacks,
        events: &merged.events,
        who: Who::Exited(merged.threads),
    });
    shards.chain(exited)
}

/// The exited accumulations of all shards merged, in a scratch mapping (the dumping thread is
/// its only writer). What does not fit is counted as dropped.
pub(super) struct Merged {
    pub(super) threads: u64,
    pub(super) table: Table<'static>,
    pub(super) stacks: StackStore<'static>,
    pub(super) events: EventTable<'static>,
    pub(super) lost_acquisitions: u64,
    pub(super) lost_stacks: u64,
    pub(super) mem: *mut u8,
    pub(super) bytes: usize,
}

impl Merged {
    pub(super) fn of_exited() -> Merged {
        let exited = || {
            state::shards().filter_map(|sh| {
                // SAFETY: null or an accumulation published by a shard's owner, never unmapped.
                unsafe { sh.exited.load(Acquire).as_ref() }
            })
        };
        let (mut threads, mut nr, mut ns, mut ne) = (0u64, 0usize, 0usize, 0usize);
        for ex in exited() {
            threads += ex.threads.get();
            nr += ex.table.len();
            ns += ex.stacks.table().len();
            ne += ex.events.table().len();
        }
        // At most half full: the merge never finds a table full.
        let cap = |n: usize| (n.max(8) * 2).next_power_of_two();
        let (nr, ns, ne) = if threads > 0 { (cap(nr), cap(ns), cap(ne)) } else { (0, 0, 0) };
        let stacks_off = 0;
        let events_off = stacks_off + ns * size_of::<StackEntry>();
        let bytes = events_off + ne * size_of::<EventEntry>();
        let mem = if bytes > 0 { state::map_zeroed(bytes) } else { core::ptr::null_mut() };
        let mut m = Merged {
            threads,
            table: Table::new(&state::SCRATCH, nr),
            stacks: StackStore::new(&[]),
            events: EventTable::new(&[]),
            lost_acquisitions: 0,
            lost_stacks: 0,
            mem,
            bytes,
        };
        if !mem.is_null() {
            // SAFETY: a fresh zeroed mapping of `bytes` bytes holding the two entry arrays one
            // after the other (each size a multiple of 8); zeroed memory is a valid empty entry.
            // It lives until `free`, after the last use of the tables. The record table maps its
            // own scratch memory.
            unsafe {
                m.stacks = StackStore::new(core::slice::from_raw_parts(
                    mem.add(stacks_off) as *const StackEntry,
                    ns,
                ));
                m.events = EventTable::new(core::slice::from_raw_parts(
                    mem.add(events_off) as *const EventEntry,
                    ne,
                ));
            }
        }
        for ex in exited() {
            for e in ex.table.entries() {
                if !crate::classes::idents(state::registry()).merge_record(&m.table, e) {
                    m.lost_acquisitions += e.stats.acquisitions.get();
                }
            }
            ex.stacks.for_each(|_, frames| {
                if m.stacks.intern(frames).is_none() {
                    m.lost_stacks += 1;
                }
            });
            ex.events.for_each(|k, e| match m.events.get(&k) {
                Some(d) => {
                    d.count.add(e.count.get());
                    d.wait_ns.add(e.wait_ns.get());
                    d.wait_ns_max.max(e.wait_ns_max.get());
                }
                None => m.lost_stacks += 1,
            });
        }
        m
    }

    pub(super) fn free(self) {
        if !self.mem.is_null() {
            // SAFETY: the mapping made in `of_exited`; its tables are not used after this.
            unsafe { libc::munmap(self.mem.cast(), self.bytes) };
        }
    }
}

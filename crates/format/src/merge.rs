//! Merging the profiles two collectors wrote of one process in one run: the one place where a
//! lock seen by both becomes one lock.
//!
//! `lockmeter run --kernel` meters a program with the preload collector (user-space locks, exact
//! counts, holds) and the eBPF collector (kernel locks, futex waits) at once. For each process,
//! [`merge_kernel`] folds the kernel's profile into the preload's:
//! - a futex word inside a metered lock object (a `pthread_mutex_t`'s word is at its address, an
//!   rwlock's words within its 56 bytes) is that lock: its waits become the lock's
//!   [`LockSleep`] (how often and how long its waiters slept in the kernel), not a second
//!   lock;
//! - every other lock the kernel saw (kernel locks, futex words of locks the preload does not
//!   meter) is added beside the user's locks, with its threads, stacks and events renumbered.

use crate::model::{LockInfo, LockKind, LockSleep, MapEntry, Profile, ThreadInfo};
use std::collections::HashMap;

/// Bytes of a lock object that may hold its futex words (glibc x86_64 / aarch64 layouts).
fn span(kind: LockKind) -> u64 {
    match kind {
        LockKind::Mutex => 40,
        LockKind::RwLock => 56,
        LockKind::SpinLock => 4,
        _ => 0,
    }
}

/// The user lock whose object holds the futex word at `addr` (the latest generation there).
fn owner_of(user: &[LockInfo], addr: u64) -> Option<u32> {
    user.iter()
        .filter(|l| addr >= l.address && addr < l.address.saturating_add(span(l.kind)))
        .max_by_key(|l| (l.address, l.generation))
        .map(|l| l.id)
}

/// Folds `kernel` (the eBPF collector's profile of the same process) into `user` (the preload's).
pub fn merge_kernel(user: &mut Profile, kernel: &Profile) {
    // Kernel lock id -> Some(user lock it belongs to) or None (added as its own lock).
    let mut folded: HashMap<u32, u32> = HashMap::new();
    for l in &kernel.locks {
        if l.kind == LockKind::Futex
            && let Some(owner) = owner_of(&user.locks, l.address)
        {
            folded.insert(l.id, owner);
        }
    }
    let mut sleeps: HashMap<u32, LockSleep> =
        user.lock_sleeps.drain(..).map(|s| (s.lock, s)).collect();
    for r in &kernel.records {
        if let Some(&owner) = folded.get(&r.lock) {
            let s = sleeps
                .entry(owner)
                .or_insert_with(|| LockSleep { lock: owner, ..LockSleep::default() });
            s.sleeps += r.stats.contended;
            s.sleep_ns += r.stats.wait_ns_total;
            s.sleep_ns_max = s.sleep_ns_max.max(r.stats.wait_ns_max);
        }
    }
    // Lock-holder preemption comes as the kernel profile's LockSleep of a lock at the user lock's
    // own address (the lock on top of the preempted thread's held stack).
    let mut preempt_only: std::collections::HashSet<u32> = std::collections::HashSet::new();
    for ks in &kernel.lock_sleeps {
        let Some(kl) = kernel.locks.iter().find(|l| l.id == ks.lock) else { continue };
        let Some(owner) =
            user.locks.iter().filter(|l| l.address == kl.address).max_by_key(|l| l.generation)
        else {
            continue;
        };
        preempt_only.insert(kl.id);
        let s = sleeps
            .entry(owner.id)
            .or_insert_with(|| LockSleep { lock: owner.id, ..LockSleep::default() });
        s.preempted_holds += ks.preempted_holds;
        s.preempted_ns += ks.preempted_ns;
        s.preempted_wait_ns += ks.preempted_wait_ns;
    }
    let mut sleeps: Vec<LockSleep> = sleeps.into_values().collect();
    sleeps.sort_by_key(|s| s.lock);
    user.lock_sleeps = sleeps;

    // The rest joins the user's profile with new ids.
    let mut lock_ids: HashMap<u32, u32> = HashMap::new();
    let mut next_lock = user.locks.iter().map(|l| l.id).max().unwrap_or(0);
    for l in
        kernel.locks.iter().filter(|l| !folded.contains_key(&l.id) && !preempt_only.contains(&l.id))
    {
        next_lock += 1;
        lock_ids.insert(l.id, next_lock);
        user.locks.push(LockInfo { id: next_lock, ..l.clone() });
    }
    let mut thread_ids: HashMap<u32, u32> = HashMap::new();
    let mut next_thread = user.threads.iter().map(|t| t.index).max().unwrap_or(0);
    for t in &kernel.threads {
        let index = match user.threads.iter().find(|u| u.tid == t.tid) {
            Some(u) => u.index,
            None => {
                next_thread += 1;
                user.threads.push(ThreadInfo { index: next_thread, ..t.clone() });
                next_thread
            }
        };
        thread_ids.insert(t.index, index);
    }
    let mut stack_ids: HashMap<u32, u32> = HashMap::new();
    let mut next_stack = user.stacks.iter().map(|s| s.id).max().unwrap_or(0);
    let thread = |i: u32| thread_ids.get(&i).copied().unwrap_or(i);
    for r in &kernel.records {
        if let Some(&lock) = lock_ids.get(&r.lock) {
            let mut r = r.clone();
            r.lock = lock;
            r.thread = thread(r.thread);
            user.records.push(r);
        }
    }
    for e in &kernel.events {
        let Some(&lock) = lock_ids.get(&e.lock) else { continue };
        let mut stack_of = |id: u32, user: &mut Profile| -> u32 {
            *stack_ids.entry(id).or_insert_with(|| {
                next_stack += 1;
                let frames = kernel
                    .stacks
                    .iter()
                    .find(|s| s.id == id)
                    .map(|s| s.frames.clone())
                    .unwrap_or_default();
                user.stacks.push(crate::model::Stack { id: next_stack, frames });
                next_stack
            })
        };
        let mut e = e.clone();
        e.lock = lock;
        e.thread = thread(e.thread);
        e.stack = stack_of(e.stack, user);
        e.holder_stack = e.holder_stack.map(|h| stack_of(h, user));
        user.events.push(e);
    }
    // Kernel functions are named by map entries of their own ("[kernel] NAME").
    let known: std::collections::HashSet<(u64, u64)> =
        user.maps.iter().map(|m| (m.start, m.end)).collect();
    let kernel_maps: Vec<MapEntry> = kernel
        .maps
        .iter()
        .filter(|m| m.path.starts_with("[kernel] ") && !known.contains(&(m.start, m.end)))
        .cloned()
        .collect();
    user.maps.extend(kernel_maps);
    user.dropped.acquisitions += kernel.dropped.acquisitions;
    user.dropped.stacks += kernel.dropped.stacks;
    user.header.collector = format!("{}+{}", user.header.collector, kernel.header.collector);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Event, EventKind, Record, Stack};
    use lockmeter_core::{Mode, Stats};

    fn lock(id: u32, address: u64, kind: LockKind) -> LockInfo {
        LockInfo { id, address, generation: 0, kind, name: None }
    }

    fn rec(thread: u32, lock: u32, contended: u64, wait: u64) -> Record {
        let stats = Stats {
            acquisitions: contended,
            contended,
            wait_ns_total: wait,
            wait_ns_max: wait / contended.max(1),
            ..Stats::default()
        };
        Record { thread, lock, site: 0x10, mode: Mode::Exclusive, stats }
    }

    #[test]
    fn a_mutex_and_its_futex_word_are_one_lock_and_kernel_locks_join() {
        let mut user = Profile::default();
        user.header.collector = "preload".into();
        user.threads.push(ThreadInfo { index: 1, tid: 500, name: "main".into() });
        user.locks.push(lock(1, 0x1000, LockKind::Mutex));
        user.locks.push(lock(2, 0x2000, LockKind::RwLock));
        user.records.push(rec(1, 1, 10, 1000));
        user.stacks.push(Stack { id: 1, frames: vec![0x10] });

        let mut k = Profile::default();
        k.header.collector = "kernel".into();
        k.threads.push(ThreadInfo { index: 1, tid: 501, name: "worker".into() });
        k.threads.push(ThreadInfo { index: 2, tid: 500, name: "main".into() });
        k.locks.push(lock(1, 0x1000, LockKind::Futex)); // the mutex's word
        k.locks.push(lock(2, 0x2000 + 12, LockKind::Futex)); // an rwlock word inside it
        k.locks.push(lock(3, 0xffff_8000_0000_0000, LockKind::KernelRwsem));
        k.locks.push(lock(4, 0x9000, LockKind::Futex)); // not a metered lock
        k.records.push(rec(1, 1, 4, 400));
        k.records.push(rec(2, 1, 2, 600));
        k.records.push(rec(1, 2, 1, 50));
        k.records.push(rec(2, 3, 7, 70));
        k.records.push(rec(1, 4, 3, 30));
        k.stacks.push(Stack { id: 1, frames: vec![0xffff_8000_0000_1000] });
        k.events.push(Event {
            thread: 2,
            lock: 3,
            mode: Mode::Exclusive,
            kind: EventKind::Contended,
            stack: 1,
            holder_site: 0,
            holder_stack: None,
            count: 7,
            wait_ns: 70,
            wait_ns_max: 10,
        });
        // Lock-holder preemption of the mutex, carried by the kernel's lock at its address.
        k.lock_sleeps.push(LockSleep {
            lock: 1,
            preempted_holds: 2,
            preempted_ns: 20,
            preempted_wait_ns: 5,
            ..LockSleep::default()
        });
        k.maps.push(MapEntry {
            start: 0xffff_8000_0000_0f00,
            end: 0xffff_8000_0000_2000,
            offset: 0,
            perms: "r-xp".into(),
            path: "[kernel] down_write".into(),
        });

        merge_kernel(&mut user, &k);
        assert_eq!(user.header.collector, "preload+kernel");
        assert_eq!(
            user.lock_sleeps,
            vec![
                LockSleep {
                    lock: 1,
                    sleeps: 6,
                    sleep_ns: 1000,
                    sleep_ns_max: 300,
                    preempted_holds: 2,
                    preempted_ns: 20,
                    preempted_wait_ns: 5,
                },
                LockSleep {
                    lock: 2,
                    sleeps: 1,
                    sleep_ns: 50,
                    sleep_ns_max: 50,
                    ..LockSleep::default()
                },
            ]
        );
        // The kernel rwsem and the unmetered futex word join as locks 3 and 4.
        assert_eq!(user.locks.len(), 4);
        assert_eq!((user.locks[2].id, user.locks[2].kind), (3, LockKind::KernelRwsem));
        assert_eq!((user.locks[3].id, user.locks[3].address), (4, 0x9000));
        // Thread 500 is the user's thread 1; thread 501 is new (2).
        assert_eq!(user.threads.len(), 2);
        let r = user.records.iter().find(|r| r.lock == 3).unwrap();
        assert_eq!(r.thread, 1);
        let r = user.records.iter().find(|r| r.lock == 4).unwrap();
        assert_eq!(r.thread, 2);
        // The event's stack is renumbered after the user's stacks.
        let e = user.events.iter().find(|e| e.lock == 3).unwrap();
        assert_eq!((e.thread, e.stack), (1, 2));
        assert_eq!(user.stacks.last().unwrap().frames, vec![0xffff_8000_0000_1000]);
        assert!(user.maps.iter().any(|m| m.path == "[kernel] down_write"));
        // The user's own records are untouched.
        assert_eq!(user.records[0], rec(1, 1, 10, 1000));
    }
}

//! The fold of a profile into an [`Analysis`], in four steps: name the locks, fold the records
//! (per lock, site, thread), fold the events (waiter, holder and sampled stacks, waiter–holder
//! pairs), then sort and apply the filter.

use std::collections::{HashMap, HashSet};

use lockmeter_format::model::{
    Event, EventKind, LockClass, LockInfo, LockKind, Mode, Profile, Record,
};

use super::naming::{first_use_name, naming_depths};
use super::{
    Agg, Analysis, Filter, LockAgg, NameSource, PairAgg, SiteAgg, StackAgg, ThreadAgg, Totals,
};
use crate::frames::FrameCache;
use crate::options::SortKey;
use crate::storage::Storage;
use crate::symbolize::{Frame, Symbolize};

pub(super) fn build(profile: &Profile, sym: &mut dyn Symbolize, filter: &Filter) -> Analysis {
    let mut b = Builder::new(profile, sym, filter);
    b.name_locks();
    let unfiltered_locks = b.locks.len();
    b.fold_records();
    b.fold_events();
    b.finish(unfiltered_locks)
}

/// The fold in progress.
struct Builder<'p, 's> {
    profile: &'p Profile,
    filter: &'p Filter,
    frames: FrameCache<'s>,
    /// Stack id → frames.
    stacks: HashMap<u32, &'p [u64]>,
    /// Stack id → the lowest id with the same frames (a collector may intern one stack twice).
    canon: HashMap<u32, u32>,
    locks: Vec<LockAgg>,
    lock_idx: HashMap<u32, usize>,
    /// Locks the filter leaves something of.
    lock_kept: Vec<bool>,
    threads: Vec<ThreadAgg>,
    thread_idx: HashMap<u32, usize>,
    thread_kept: Vec<bool>,
    totals: Agg,
}

impl<'p, 's> Builder<'p, 's> {
    fn new(profile: &'p Profile, sym: &'s mut dyn Symbolize, filter: &'p Filter) -> Self {
        let stacks: HashMap<u32, &[u64]> =
            profile.stacks.iter().map(|s| (s.id, s.frames.as_slice())).collect();
        let mut lowest: HashMap<&[u64], u32> = HashMap::new();
        for s in &profile.stacks {
            let id = lowest.entry(s.frames.as_slice()).or_insert(s.id);
            *id = (*id).min(s.id);
        }
        let canon = profile.stacks.iter().map(|s| (s.id, lowest[s.frames.as_slice()])).collect();
        let threads: Vec<ThreadAgg> = profile
            .threads
            .iter()
            .map(|t| ThreadAgg {
                index: t.index,
                tid: t.tid,
                name: t.name.clone(),
                agg: Agg::default(),
                locks: 0,
            })
            .collect();
        Builder {
            profile,
            filter,
            frames: FrameCache::new(sym),
            stacks,
            canon,
            locks: Vec::with_capacity(profile.locks.len()),
            lock_idx: HashMap::new(),
            lock_kept: Vec::new(),
            thread_idx: threads.iter().enumerate().map(|(i, t)| (t.index, i)).collect(),
            thread_kept: vec![false; threads.len()],
            threads,
            totals: Agg::default(),
        }
    }

    fn frame(&mut self, addr: u64) -> Frame {
        self.frames.frame(addr).clone()
    }

    fn stack(&mut self, id: u32) -> Vec<Frame> {
        match self.stacks.get(&id) {
            Some(frames) => frames.iter().map(|&a| self.frames.frame(a).clone()).collect(),
            None => Vec::new(),
        }
    }

    /// Step 1: one [`LockAgg`] per lock of the profile, named by precedence (the program's name,
    /// the static symbol, the first use, the address).
    fn name_locks(&mut self) {
        let mut first_uses: HashMap<u32, u32> = HashMap::new();
        for e in &self.profile.events {
            if e.kind == EventKind::FirstUse {
                first_uses.entry(e.lock).or_insert(e.stack);
            }
        }
        // Class rows, names given by the program or a symbol first; the others by their first
        // use, each at the depth that tells locks first used through one wrapper apart.
        let classes: HashMap<u32, &LockClass> =
            self.profile.lock_classes.iter().map(|c| (c.lock, c)).collect();
        let profile = self.profile;
        let mut given: Vec<Option<(String, NameSource)>> = Vec::new();
        let mut stacks: Vec<Option<Vec<Frame>>> = Vec::new();
        for l in &profile.locks {
            given.push(if let Some(c) = classes.get(&l.id) {
                Some((self.class_name(l, c), NameSource::Class))
            } else {
                match &l.name {
                    Some(n) => Some((n.clone(), NameSource::Program)),
                    None => {
                        self.frames.symbolizer().data(l.address).map(|n| (n, NameSource::Symbol))
                    }
                }
            });
            stacks.push(first_uses.get(&l.id).map(|&id| self.stack(id)));
        }
        let depths = naming_depths(
            &stacks
                .iter()
                .zip(&given)
                .map(|(f, g)| if g.is_some() { None } else { f.as_deref() })
                .collect::<Vec<_>>(),
        );
        for (i, l) in profile.locks.iter().enumerate() {
            let first_use = stacks[i].take();
            let (name, name_source) = if let Some((n, src)) = given[i].take() {
                (Some(n), src)
            } else if let Some(n) = first_use.as_deref().and_then(|f| {
                first_use_name(l, Storage::of(&self.profile.maps, l.address), f, depths[i])
            }) {
                (Some(n), NameSource::FirstUse)
            } else {
                (None, NameSource::Address)
            };
            let sleep = self.profile.lock_sleeps.iter().find(|s| s.lock == l.id).cloned();
            let mut agg = new_lock(l.id, l.address, l.generation, l.kind, name, name_source);
            agg.first_use = first_use;
            agg.sleep = sleep;
            self.push_lock(agg);
        }
    }

    /// The name of a class lock: `N heap locks initialized at <function> (<file>:<line>)` (or
    /// `first used at`, for locks never initialized by a call); a static lock's class reads
    /// `N lifetimes of <symbol> initialized at ...`.
    fn class_name(&mut self, l: &LockInfo, c: &LockClass) -> String {
        let how = if c.initialized { "initialized at" } else { "first used at" };
        let n = c.lifetimes;
        if c.site == 0 {
            return format!(
                "{n} ended {} locks of no class (the class table was full)",
                l.kind.as_str()
            );
        }
        let f = self.frame(c.site);
        let at = match (&f.function, f.short_location()) {
            (Some(func), Some(loc)) => format!("{func} ({loc})"),
            (Some(func), None) => func.clone(),
            _ => f.to_string(),
        };
        if let Some(sym) = self.frames.symbolizer().data(c.sample_address) {
            let s = if n == 1 { "" } else { "s" };
            return format!("{n} lifetime{s} of {sym} {how} {at}");
        }
        let storage = Storage::of(&self.profile.maps, c.sample_address);
        let what = if storage == Storage::Unknown { "" } else { storage.as_str() };
        let locks = if n == 1 { "lock" } else { "locks" };
        let what = if what.is_empty() { locks.to_owned() } else { format!("{what} {locks}") };
        format!("{n} {what} {how} {at}")
    }

    fn push_lock(&mut self, l: LockAgg) -> usize {
        self.lock_idx.insert(l.id, self.locks.len());
        self.locks.push(l);
        self.lock_kept.push(false);
        self.locks.len() - 1
    }

    /// The index of lock `id`; a record or event naming a lock the profile does not describe
    /// still counts, under a placeholder.
    fn lock(&mut self, id: u32, mode: Mode) -> usize {
        if let Some(&i) = self.lock_idx.get(&id) {
            return i;
        }
        let kind = if mode == Mode::Exclusive { LockKind::Mutex } else { LockKind::RwLock };
        let name = Some(format!("[unknown lock #{id}]"));
        self.push_lock(new_lock(id, 0, 0, kind, name, NameSource::Program))
    }

    fn thread(&mut self, index: u32) -> usize {
        let threads = &mut self.threads;
        let kept = &mut self.thread_kept;
        *self.thread_idx.entry(index).or_insert_with(|| {
            threads.push(ThreadAgg {
                index,
                tid: 0,
                name: String::new(),
                agg: Agg::default(),
                locks: 0,
            });
            kept.push(false);
            threads.len() - 1
        })
    }

    /// Step 2: records summed per lock, per (lock, site name) and per thread, and the totals.
    fn fold_records(&mut self) {
        let profile = self.profile;
        // (lock, site address) → site, then (lock, site name) → site: addresses that get the
        // same name merge.
        let mut addr_site: HashMap<(usize, u64), Option<usize>> = HashMap::new();
        let mut site_idx: HashMap<(usize, String), usize> = HashMap::new();
        let mut lock_threads: HashSet<(usize, usize)> = HashSet::new();
        for r in &profile.records {
            let li = self.lock(r.lock, r.mode);
            if !self.filter.lock_matches(&self.locks[li]) {
                continue;
            }
            let si = match addr_site.get(&(li, r.site)) {
                Some(&si) => si,
                None => {
                    let si = self.site(li, r, &mut site_idx);
                    addr_site.insert((li, r.site), si);
                    si
                }
            };
            let Some(si) = si else { continue };
            self.totals.add(r);
            let ti = self.thread(r.thread);
            self.lock_kept[li] = true;
            self.thread_kept[ti] = true;
            let lock = &mut self.locks[li];
            lock.agg.add(r);
            lock.sites[si].agg.add(r);
            self.threads[ti].agg.add(r);
            if lock_threads.insert((li, ti)) {
                lock.threads += 1;
                self.threads[ti].locks += 1;
            }
        }
        // Acquisitions not recorded, by lock (the lock may have no record at all).
        for l in &profile.lost {
            let li = self.lock(l.lock, l.mode);
            if self.filter.lock_matches(&self.locks[li]) {
                self.locks[li].lost += l.acquisitions;
                self.lock_kept[li] = true;
            }
        }
    }

    /// The site of record `r` of lock `li` (`None` when the function filter drops it).
    fn site(
        &mut self,
        li: usize,
        r: &Record,
        site_idx: &mut HashMap<(usize, String), usize>,
    ) -> Option<usize> {
        let frame = self.frame(r.site);
        if !self.filter.function_matches(&frame) {
            return None;
        }
        let name = frame.to_string();
        let lock = &mut self.locks[li];
        let si = *site_idx.entry((li, name.clone())).or_insert_with(|| {
            lock.sites.push(SiteAgg {
                lock: lock.id,
                function: name,
                frame: frame.clone(),
                address: r.site,
                agg: Agg::default(),
            });
            lock.sites.len() - 1
        });
        let site = &mut lock.sites[si];
        if r.site < site.address {
            site.address = r.site;
            site.frame = frame;
        }
        Some(si)
    }

    /// Step 3: events summed per lock by stack (waiters, holders, samples), and the waiter–holder
    /// pairs.
    fn fold_events(&mut self) {
        let profile = self.profile;
        let mut lists: HashMap<(usize, EventKind, u32), usize> = HashMap::new();
        let mut pair_idx: HashMap<(usize, String, String), usize> = HashMap::new();
        for e in &profile.events {
            if e.kind == EventKind::FirstUse {
                continue;
            }
            let li = self.lock(e.lock, e.mode);
            if !self.filter.lock_matches(&self.locks[li]) {
                continue;
            }
            let holder = match e.kind {
                EventKind::Contended => Some(self.holder_site(e)),
                _ => None,
            };
            if self.filter.function.is_some() && !self.event_matches(e, holder.as_ref()) {
                continue;
            }
            self.lock_kept[li] = true;
            let stack = self.canon.get(&e.stack).copied().unwrap_or(e.stack);
            let si = match lists.get(&(li, e.kind, stack)) {
                Some(&si) => si,
                None => {
                    let frames = self.stack(stack);
                    let list = self.list(li, e.kind);
                    list.push(StackAgg { stack, frames, count: 0, ns_total: 0, ns_max: 0 });
                    lists.insert((li, e.kind, stack), list.len() - 1);
                    list.len() - 1
                }
            };
            let s = &mut self.list(li, e.kind)[si];
            s.count += e.count;
            s.ns_total += e.wait_ns;
            s.ns_max = s.ns_max.max(e.wait_ns_max);
            let Some(holder) = holder else { continue };
            let lock = &mut self.locks[li];
            let waiter = lock.waiters[si].frames.first().cloned().unwrap_or_default();
            let key = (li, waiter.to_string(), holder.to_string());
            let pi = *pair_idx.entry(key).or_insert_with(|| {
                lock.pairs.push(PairAgg {
                    lock: lock.id,
                    lock_name: lock.display_name(),
                    waiter,
                    holder,
                    count: 0,
                    wait_ns: 0,
                    wait_ns_max: 0,
                });
                lock.pairs.len() - 1
            });
            let p = &mut lock.pairs[pi];
            p.count += e.count;
            p.wait_ns += e.wait_ns;
            p.wait_ns_max = p.wait_ns_max.max(e.wait_ns_max);
        }
    }

    /// The stack list of lock `li` that events of `kind` go to.
    fn list(&mut self, li: usize, kind: EventKind) -> &mut Vec<StackAgg> {
        let l = &mut self.locks[li];
        match kind {
            EventKind::Contended => &mut l.waiters,
            EventKind::Holding => &mut l.holders,
            EventKind::Sampled | EventKind::FirstUse => &mut l.sampled,
        }
    }

    /// The holder's call site of a contended event (`address` 0 when unknown).
    fn holder_site(&mut self, e: &Event) -> Frame {
        let addr = if e.holder_site != 0 {
            e.holder_site
        } else {
            e.holder_stack
                .and_then(|h| self.stacks.get(&h).and_then(|f| f.first().copied()))
                .unwrap_or(0)
        };
        self.frame(addr)
    }

    /// Whether the function filter selects an event: a frame of its stack, or of its holder's.
    fn event_matches(&mut self, e: &Event, holder: Option<&Frame>) -> bool {
        let filter = self.filter;
        if self.stack(e.stack).iter().any(|f| filter.function_matches(f)) {
            return true;
        }
        let Some(holder) = holder else { return false };
        filter.function_matches(holder)
            || e.holder_stack
                .is_some_and(|h| self.stack(h).iter().any(|f| filter.function_matches(f)))
    }

    /// Step 4: everything in its default order, the filter's leftovers removed.
    fn finish(mut self, unfiltered_locks: usize) -> Analysis {
        for l in &mut self.locks {
            l.sites.sort_by(|a, b| {
                SortKey::Wait
                    .compare(&a.agg.stats, &b.agg.stats)
                    .then_with(|| SortKey::Acquisitions.compare(&a.agg.stats, &b.agg.stats))
                    .then_with(|| a.address.cmp(&b.address))
            });
            sort_stacks(&mut l.waiters);
            sort_stacks(&mut l.holders);
            sort_stacks(&mut l.sampled);
            l.pairs.sort_by(|a, b| PairAgg::compare(SortKey::Wait, a, b));
        }
        let (mut locks, mut threads) = (self.locks, self.threads);
        if self.filter.is_active() {
            let mut k = self.lock_kept.iter();
            locks.retain(|_| *k.next().unwrap_or(&false));
            let mut k = self.thread_kept.iter();
            threads.retain(|_| *k.next().unwrap_or(&false));
        }
        let mut pairs: Vec<PairAgg> = locks.iter().flat_map(|l| l.pairs.iter().cloned()).collect();
        pairs.sort_by(|a, b| PairAgg::compare(SortKey::Wait, a, b));
        let profile = self.profile;
        let kept: HashSet<u32> = locks.iter().map(|l| l.id).collect();
        let h = &profile.header;
        locks.iter_mut().for_each(|l| (l.pid, l.image_seq) = (h.pid, h.image_seq));
        let timeline = profile
            .timeline
            .iter()
            .map(|iv| super::TimelineInterval::of(h.pid, iv, &kept))
            .collect();
        let mut cpus = profile.cpus.clone();
        cpus.sort_by_key(|c| c.cpu);
        let totals = Totals {
            agg: self.totals,
            locks: locks.len(),
            sites: locks.iter().map(|l| l.sites.len()).sum(),
            threads: threads.len(),
        };
        let processes = vec![super::ProcessAgg::of(&profile.header, &totals)];
        Analysis {
            header: profile.header.clone(),
            overhead: profile.overhead.clone(),
            dropped: profile.dropped.clone(),
            totals,
            locks,
            threads,
            cpus,
            pairs,
            has_stacks: !(profile.stacks.is_empty() && profile.events.is_empty()),
            maps: vec![super::ImageMaps {
                pid: h.pid,
                image_seq: h.image_seq,
                maps: profile.maps.clone(),
            }],
            filter: self.filter.clone(),
            unfiltered_locks,
            notes: profile.notes.iter().cloned().chain(self.frames.symbolizer().notes()).collect(),
            timeline,
            processes,
        }
    }
}

fn new_lock(
    id: u32,
    address: u64,
    generation: u32,
    kind: LockKind,
    name: Option<String>,
    name_source: NameSource,
) -> LockAgg {
    LockAgg {
        id,
        address,
        generation,
        kind,
        name,
        name_source,
        agg: Agg::default(),
        sites: Vec::new(),
        threads: 0,
        first_use: None,
        waiters: Vec::new(),
        holders: Vec::new(),
        sampled: Vec::new(),
        pairs: Vec::new(),
        sleep: None,
        pid: 0,
        image_seq: 0,
        lost: 0,
    }
}

fn sort_stacks(v: &mut [StackAgg]) {
    v.sort_by(|a, b| {
        b.ns_total.cmp(&a.ns_total).then(b.count.cmp(&a.count)).then(a.stack.cmp(&b.stack))
    });
}

//! Aggregation: records → per-lock, per-site, per-thread, per-CPU views and totals.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};

use lockmeter_core::hist::percentile;
use lockmeter_format::model::{
    CpuStats, Dropped, Header, LockKind, Mode, Overhead, Profile, Record, Stats,
};

use crate::SortKey;
use crate::symbolize::{ElfSymbolizer, Frame, NoSymbols, Symbolize};

/// Symbolization settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SymbolizeOptions {
    /// Read the ELF files of the memory map to name call sites and static locks. When off,
    /// sites print as raw addresses and locks keep only collector-given names.
    pub enabled: bool,
}

impl Default for SymbolizeOptions {
    fn default() -> Self {
        SymbolizeOptions { enabled: true }
    }
}

/// Summed statistics of a group of records, with the read/write split of acquisitions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Agg {
    /// The merged statistics ([`Stats::merge`] of every record of the group).
    pub stats: Stats,
    /// Acquisitions in [`Mode::Read`].
    pub read_acquisitions: u64,
    /// Acquisitions in [`Mode::Write`]. ([`Mode::Exclusive`] counts in `stats.acquisitions` only.)
    pub write_acquisitions: u64,
}

impl Agg {
    /// Adds one record.
    pub fn add(&mut self, r: &Record) {
        self.stats.merge(&r.stats);
        match r.mode {
            Mode::Read => self.read_acquisitions += r.stats.acquisitions,
            Mode::Write => self.write_acquisitions += r.stats.acquisitions,
            Mode::Exclusive => {}
        }
    }

    /// Adds another aggregate.
    pub fn merge(&mut self, o: &Agg) {
        self.stats.merge(&o.stats);
        self.read_acquisitions += o.read_acquisitions;
        self.write_acquisitions += o.write_acquisitions;
    }

    /// Contended acquisitions as a percentage of acquisitions (0 when none).
    pub fn contention_pct(&self) -> f64 {
        ratio_pct(self.stats.contended, self.stats.acquisitions)
    }

    /// Mean wait of a contended acquisition (ns), `None` when none was contended.
    pub fn wait_avg_ns(&self) -> Option<u64> {
        (self.stats.contended > 0).then(|| self.stats.wait_ns_total / self.stats.contended)
    }

    /// Mean timed hold (ns), `None` when no hold was timed.
    pub fn hold_avg_ns(&self) -> Option<u64> {
        (self.stats.holds_timed > 0).then(|| self.stats.hold_ns_total / self.stats.holds_timed)
    }

    /// Percentile `p` (0..=100) of wait time: upper bound of the log2 bucket holding it, clamped
    /// to the maximum. `None` without contended acquisitions.
    pub fn wait_percentile_ns(&self, p: f64) -> Option<u64> {
        percentile(&self.stats.wait_hist, p, Some(self.stats.wait_ns_max))
    }

    /// Percentile `p` (0..=100) of hold time, like [`Agg::wait_percentile_ns`].
    pub fn hold_percentile_ns(&self, p: f64) -> Option<u64> {
        percentile(&self.stats.hold_hist, p, Some(self.stats.hold_ns_max))
    }
}

/// `num / den` in percent, 0 when `den` is 0.
pub(crate) fn ratio_pct(num: u64, den: u64) -> f64 {
    if den == 0 { 0.0 } else { num as f64 * 100.0 / den as f64 }
}

/// One lock (address + generation) over all threads, sites and modes.
#[derive(Debug, Clone, PartialEq)]
pub struct LockAgg {
    /// `LockInfo::id`.
    pub id: u32,
    /// Address of the lock object.
    pub address: u64,
    /// Generation of the address (bumped by each init/destroy).
    pub generation: u32,
    /// Kind of lock.
    pub kind: LockKind,
    /// Collector-given name, else the static object covering the address (`my_lock`,
    /// `locks+0x28`), else `None` (heap or stack lock).
    pub name: Option<String>,
    /// The sums.
    pub agg: Agg,
    /// Call sites that took this lock, by default order: total wait, then acquisitions.
    pub sites: Vec<SiteAgg>,
    /// Number of distinct threads that took it.
    pub threads: usize,
}

impl LockAgg {
    /// The name, or the address in hex; ` (gen N)` appended for a re-initialized address.
    pub fn display_name(&self) -> String {
        let base = match &self.name {
            Some(n) => n.clone(),
            None => format!("{:#x}", self.address),
        };
        if self.generation > 0 { format!("{base} (gen {})", self.generation) } else { base }
    }

    /// The lock's sites in report order for `key` (ties: address).
    pub fn sorted_sites(&self, key: SortKey) -> Vec<&SiteAgg> {
        let mut v: Vec<&SiteAgg> = self.sites.iter().collect();
        v.sort_by(|a, b| {
            let o = if key == SortKey::Name {
                a.function.cmp(&b.function)
            } else {
                key.compare(&a.agg, &b.agg)
            };
            o.then(a.address.cmp(&b.address))
        });
        v
    }
}

/// One call site of one lock: records with the same lock and the same symbolized site name.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteAgg {
    /// `LockInfo::id` of the lock.
    pub lock: u32,
    /// The site's name: `function+0xOFF`, `module+0xOFF`, a raw address, or `[unknown]`.
    pub function: String,
    /// The resolved frame (of the lowest address that got this name).
    pub frame: Frame,
    /// The return address of the lock call (lowest of those merged).
    pub address: u64,
    /// The sums.
    pub agg: Agg,
}

/// One thread over all its locks.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadAgg {
    /// `ThreadInfo::index`.
    pub index: u32,
    /// Kernel thread id (0 when the record named an unknown thread).
    pub tid: u32,
    /// Thread name (`comm`), possibly empty.
    pub name: String,
    /// The sums.
    pub agg: Agg,
    /// Number of distinct locks it took.
    pub locks: usize,
}

/// Whole-profile sums.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Totals {
    /// Every record merged.
    pub agg: Agg,
    /// Number of locks in the profile.
    pub locks: usize,
    /// Number of (lock, site) pairs.
    pub sites: usize,
    /// Number of threads in the profile.
    pub threads: usize,
}

/// The analysed profile: every view the reports print, computed once.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    /// The profile header.
    pub header: Header,
    /// The profiler's own cost.
    pub overhead: Overhead,
    /// What the collector could not record.
    pub dropped: Dropped,
    /// Whole-profile sums.
    pub totals: Totals,
    /// Per lock, in profile order (use [`Analysis::sorted_locks`] for a report order).
    pub locks: Vec<LockAgg>,
    /// Per thread, in profile order.
    pub threads: Vec<ThreadAgg>,
    /// Per CPU, by CPU number.
    pub cpus: Vec<CpuStats>,
}

impl Analysis {
    /// Analyses `profile`, symbolizing with an [`ElfSymbolizer`] over its memory map when
    /// `opts.enabled`, else with [`NoSymbols`].
    pub fn new(profile: &Profile, opts: &SymbolizeOptions) -> Analysis {
        if opts.enabled {
            Self::with_symbolizer(profile, &mut ElfSymbolizer::new(&profile.maps))
        } else {
            Self::with_symbolizer(profile, &mut NoSymbols)
        }
    }

    /// Analyses `profile` with any symbolizer.
    pub fn with_symbolizer(profile: &Profile, sym: &mut dyn Symbolize) -> Analysis {
        let mut locks: Vec<LockAgg> = profile
            .locks
            .iter()
            .map(|l| LockAgg {
                id: l.id,
                address: l.address,
                generation: l.generation,
                kind: l.kind,
                name: l.name.clone().or_else(|| sym.data(l.address)),
                agg: Agg::default(),
                sites: Vec::new(),
                threads: 0,
            })
            .collect();
        let mut lock_idx: HashMap<u32, usize> =
            locks.iter().enumerate().map(|(i, l)| (l.id, i)).collect();

        let mut threads: Vec<ThreadAgg> = profile
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
        let mut thread_idx: HashMap<u32, usize> =
            threads.iter().enumerate().map(|(i, t)| (t.index, i)).collect();

        let mut frames: HashMap<u64, (Frame, String)> = HashMap::new();
        let mut site_idx: HashMap<(usize, String), usize> = HashMap::new();
        let mut addr_site: HashMap<(usize, u64), usize> = HashMap::new();
        let mut pairs: HashSet<(usize, usize)> = HashSet::new();
        let mut totals = Agg::default();

        for r in &profile.records {
            totals.add(r);
            // Records naming an unknown lock or thread still count: they get a placeholder.
            let li = *lock_idx.entry(r.lock).or_insert_with(|| {
                locks.push(LockAgg {
                    id: r.lock,
                    address: 0,
                    generation: 0,
                    kind: if r.mode == Mode::Exclusive {
                        LockKind::Mutex
                    } else {
                        LockKind::RwLock
                    },
                    name: Some(format!("[unknown lock #{}]", r.lock)),
                    agg: Agg::default(),
                    sites: Vec::new(),
                    threads: 0,
                });
                locks.len() - 1
            });
            let ti = *thread_idx.entry(r.thread).or_insert_with(|| {
                threads.push(ThreadAgg {
                    index: r.thread,
                    tid: 0,
                    name: String::new(),
                    agg: Agg::default(),
                    locks: 0,
                });
                threads.len() - 1
            });
            let lock = &mut locks[li];
            lock.agg.add(r);
            threads[ti].agg.add(r);
            if pairs.insert((li, ti)) {
                lock.threads += 1;
                threads[ti].locks += 1;
            }
            // (lock, site address) → site, then (lock, site name) → site: addresses that get
            // the same name merge.
            let si = match addr_site.get(&(li, r.site)) {
                Some(&si) => si,
                None => {
                    let (frame, name) = frames.entry(r.site).or_insert_with(|| {
                        let f = sym.code(r.site);
                        let n = f.to_string();
                        (f, n)
                    });
                    let si = *site_idx.entry((li, name.clone())).or_insert_with(|| {
                        lock.sites.push(SiteAgg {
                            lock: lock.id,
                            function: name.clone(),
                            frame: frame.clone(),
                            address: r.site,
                            agg: Agg::default(),
                        });
                        lock.sites.len() - 1
                    });
                    addr_site.insert((li, r.site), si);
                    let site = &mut lock.sites[si];
                    if r.site < site.address {
                        site.address = r.site;
                        site.frame = frame.clone();
                    }
                    si
                }
            };
            lock.sites[si].agg.add(r);
        }
        for l in &mut locks {
            l.sites.sort_by(|a, b| {
                SortKey::Wait
                    .compare(&a.agg, &b.agg)
                    .then_with(|| SortKey::Acquisitions.compare(&a.agg, &b.agg))
                    .then_with(|| a.address.cmp(&b.address))
            });
        }
        let mut cpus = profile.cpus.clone();
        cpus.sort_by_key(|c| c.cpu);
        let totals = Totals {
            agg: totals,
            locks: locks.len(),
            sites: locks.iter().map(|l| l.sites.len()).sum(),
            threads: threads.len(),
        };
        Analysis {
            header: profile.header.clone(),
            overhead: profile.overhead.clone(),
            dropped: profile.dropped.clone(),
            totals,
            locks,
            threads,
            cpus,
        }
    }

    /// Locks in report order for `key` (ties: address, then generation).
    pub fn sorted_locks(&self, key: SortKey) -> Vec<&LockAgg> {
        let mut v: Vec<&LockAgg> = self.locks.iter().collect();
        v.sort_by(|a, b| {
            let o = if key == SortKey::Name {
                a.display_name().cmp(&b.display_name())
            } else {
                key.compare(&a.agg, &b.agg)
            };
            o.then(a.address.cmp(&b.address)).then(a.generation.cmp(&b.generation))
        });
        v
    }

    /// All (lock, site) pairs in report order for `key` (name: site name, then lock).
    pub fn sorted_sites(&self, key: SortKey) -> Vec<(&LockAgg, &SiteAgg)> {
        let mut v: Vec<(&LockAgg, &SiteAgg)> =
            self.locks.iter().flat_map(|l| l.sites.iter().map(move |s| (l, s))).collect();
        v.sort_by(|(la, a), (lb, b)| {
            let o = if key == SortKey::Name {
                a.function.cmp(&b.function)
            } else {
                key.compare(&a.agg, &b.agg)
            };
            o.then(a.address.cmp(&b.address))
                .then(la.address.cmp(&lb.address))
                .then(la.generation.cmp(&lb.generation))
        });
        v
    }

    /// Threads in report order for `key` (name: thread name, then tid).
    pub fn sorted_threads(&self, key: SortKey) -> Vec<&ThreadAgg> {
        let mut v: Vec<&ThreadAgg> = self.threads.iter().collect();
        v.sort_by(|a, b| {
            let o = if key == SortKey::Name {
                a.name.cmp(&b.name)
            } else {
                key.compare(&a.agg, &b.agg)
            };
            o.then(a.tid.cmp(&b.tid)).then(a.index.cmp(&b.index))
        });
        v
    }

    /// CPUs in report order. CPUs carry only acquisitions, contended and wait: hold keys sort
    /// by wait; `name` sorts by CPU number.
    pub fn sorted_cpus(&self, key: SortKey) -> Vec<&CpuStats> {
        let mut v: Vec<&CpuStats> = self.cpus.iter().collect();
        let as_agg = |c: &CpuStats| Agg {
            stats: Stats {
                acquisitions: c.acquisitions,
                contended: c.contended,
                wait_ns_total: c.wait_ns,
                ..Stats::default()
            },
            ..Agg::default()
        };
        let key = match key {
            SortKey::WaitMax | SortKey::Hold | SortKey::HoldMax => SortKey::Wait,
            k => k,
        };
        v.sort_by(|a, b| {
            let o = if key == SortKey::Name {
                Ordering::Equal
            } else {
                key.compare(&as_agg(a), &as_agg(b))
            };
            o.then(a.cpu.cmp(&b.cpu))
        });
        v
    }
}

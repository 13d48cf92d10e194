//! Aggregation: records → per-lock, per-site, per-thread, per-CPU views and totals; events →
//! waiter and holder stacks, waiter–holder pairs and the first use of each lock.

use std::cmp::Ordering;

use lockmeter_core::hist::{bucket_high, bucket_low, percentile};
use lockmeter_format::model::{
    CpuStats, Dropped, Header, LockKind, MapEntry, Mode, Overhead, Profile, Record, Stats,
};

use crate::options::SortKey;
use crate::symbolize::{Frame, Symbolize, SymbolizeOptions, Symbolizer};

/// What a report keeps: locks by name or address, call sites and stacks by function.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Filter {
    /// Keep locks whose display name contains this, or whose address it is (`0x...`, exact).
    pub lock: Option<String>,
    /// Keep call sites whose function contains this (stacks: any frame's function).
    pub function: Option<String>,
}

impl Filter {
    /// Whether anything is filtered.
    pub fn is_active(&self) -> bool {
        self.lock.is_some() || self.function.is_some()
    }

    /// Whether the lock pattern selects `l`.
    pub fn lock_matches(&self, l: &LockAgg) -> bool {
        let Some(p) = &self.lock else { return true };
        if l.display_name().contains(p.as_str()) {
            return true;
        }
        let hex = p.trim().strip_prefix("0x").or_else(|| p.trim().strip_prefix("0X"));
        hex.and_then(|h| u64::from_str_radix(h, 16).ok()).is_some_and(|a| a == l.address)
    }

    /// Whether the function pattern selects a call site or stack frame.
    pub fn function_matches(&self, f: &Frame) -> bool {
        match &self.function {
            None => true,
            Some(p) => f.matches_function(p),
        }
    }

    /// `--lock P --function Q`, the way the command line spells it (empty when inactive).
    pub fn describe(&self) -> String {
        let mut v = Vec::new();
        if let Some(p) = &self.lock {
            v.push(format!("--lock {p}"));
        }
        if let Some(p) = &self.function {
            v.push(format!("--function {p}"));
        }
        v.join(" ")
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
    /// The lock's name, by precedence: the name the program gave, else the static object
    /// covering the address (`my_lock`, `locks+0x28`), else `heap lock first used at <function>
    /// (<file>:<line>)` from the stack of its first use, else `None` (printed as the address).
    pub name: Option<String>,
    /// Where `name` came from.
    pub name_source: NameSource,
    /// The sums.
    pub agg: Agg,
    /// Call sites that took this lock, by default order: total wait, then acquisitions.
    pub sites: Vec<SiteAgg>,
    /// Number of distinct threads that took it.
    pub threads: usize,
    /// The stack of the lock's first acquisition, when the collector recorded one.
    pub first_use: Option<Vec<Frame>>,
    /// Waiters: contended acquisitions by the waiter's stack, by total wait.
    pub waiters: Vec<StackAgg>,
    /// Holders: releases while others wanted the lock, by the holder's stack, by total hold.
    pub holders: Vec<StackAgg>,
    /// Acquisitions sampled with `run --stack-sample N`, by the acquirer's stack, by count.
    pub sampled: Vec<StackAgg>,
    /// Waiter–holder pairs of this lock, by total wait.
    pub pairs: Vec<PairAgg>,
    /// What the kernel saw of it (`run --kernel`): its futex waits, i.e. waits that slept.
    pub sleep: Option<lockmeter_format::LockSleep>,
    /// The process whose lock it is (its profile's pid).
    pub pid: u32,
    /// The process image whose lock it is (its profile's `image_seq`: 0, then +1 per exec);
    /// its addresses are that image's ([`ImageMaps`]).
    pub image_seq: u32,
    /// Its acquisitions the collector counted but could not record (its memory cap was
    /// reached): part of the profile's dropped acquisitions, not in `agg`.
    pub lost: u64,
}

/// The memory map of one process image (a run holds one per image of each process).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ImageMaps {
    /// The process.
    pub pid: u32,
    /// The image (0, then +1 per exec).
    pub image_seq: u32,
    /// Its mappings, from the profile.
    pub maps: Vec<MapEntry>,
}

/// One interval of a process's time series (`run --interval`), on the run's time axis.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TimelineInterval {
    /// The process whose interval it is (a run's processes each keep their own intervals).
    pub pid: u32,
    /// Start, ns since the start of the run (the earliest profile's start, wall clock).
    pub start_ns: u64,
    /// End (exclusive), ns since the start of the run.
    pub end_ns: u64,
    /// What each of the process's locks did in it (those that did anything and pass the
    /// filter), by [`LockAgg::id`].
    pub locks: Vec<lockmeter_format::IntervalLock>,
}

impl TimelineInterval {
    /// Interval `iv` of process `pid`'s profile, with the locks in `kept` only.
    fn of(
        pid: u32,
        iv: &lockmeter_format::Interval,
        kept: &std::collections::HashSet<u32>,
    ) -> Self {
        let locks = iv.locks.iter().filter(|l| kept.contains(&l.lock)).cloned().collect();
        TimelineInterval { pid, start_ns: iv.start_ns, end_ns: iv.end_ns, locks }
    }
}

/// Where a lock's name came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NameSource {
    /// Given by the program (`lockmeter_name_lock`) or the collector.
    Program,
    /// The static object (symbol) covering the address.
    Symbol,
    /// Derived from the stack of the lock's first use (heap locks).
    FirstUse,
    /// A class: the folded lock identities that ended, named by their init (or first-use) site.
    Class,
    /// No name: the address is printed.
    #[default]
    Address,
}

impl NameSource {
    /// `program`, `symbol`, `first_use`, `class`, or `None` for [`NameSource::Address`].
    pub fn as_str(self) -> Option<&'static str> {
        match self {
            NameSource::Program => Some("program"),
            NameSource::Symbol => Some("symbol"),
            NameSource::FirstUse => Some("first_use"),
            NameSource::Class => Some("class"),
            NameSource::Address => None,
        }
    }
}

/// Events of one lock summed by call stack.
#[derive(Debug, Clone, PartialEq)]
pub struct StackAgg {
    /// `Stack::id` of the stack (the lowest of those merged).
    pub stack: u32,
    /// The symbolized frames, innermost first (empty when the stack was not recorded).
    pub frames: Vec<Frame>,
    /// Number of events (contended acquisitions for waiters, holds for holders).
    pub count: u64,
    /// Total time: wait for waiters, hold for holders (ns).
    pub ns_total: u64,
    /// Longest single time (ns).
    pub ns_max: u64,
}

/// Contended acquisitions of one lock from one waiter site while the lock was held from one
/// holder site: "site W waited T ns on lock L held from site H".
#[derive(Debug, Clone, PartialEq)]
pub struct PairAgg {
    /// `LockInfo::id` of the lock.
    pub lock: u32,
    /// The lock's display name.
    pub lock_name: String,
    /// The waiter's call site (the innermost frame of its stack).
    pub waiter: Frame,
    /// The holder's call site (`address` 0 when unknown).
    pub holder: Frame,
    /// Contended acquisitions.
    pub count: u64,
    /// Their total wait (ns).
    pub wait_ns: u64,
    /// The longest of them (ns).
    pub wait_ns_max: u64,
}

impl PairAgg {
    /// Orders two pairs for `key` (`Less`: `a` first): wait keys by total or longest wait,
    /// count keys by contentions, hold keys by total wait, `name` by waiter then holder.
    pub fn compare(key: SortKey, a: &PairAgg, b: &PairAgg) -> Ordering {
        let o = match key {
            SortKey::WaitMax => b.wait_ns_max.cmp(&a.wait_ns_max),
            SortKey::Acquisitions | SortKey::Contended | SortKey::ContentionRate => {
                b.count.cmp(&a.count)
            }
            SortKey::Name => a
                .waiter
                .to_string()
                .cmp(&b.waiter.to_string())
                .then_with(|| a.holder.to_string().cmp(&b.holder.to_string())),
            SortKey::Wait | SortKey::Hold | SortKey::HoldMax => b.wait_ns.cmp(&a.wait_ns),
        };
        o.then_with(|| b.wait_ns.cmp(&a.wait_ns))
            .then_with(|| b.count.cmp(&a.count))
            .then_with(|| a.lock.cmp(&b.lock))
            .then_with(|| a.waiter.address.cmp(&b.waiter.address))
            .then_with(|| a.holder.address.cmp(&b.holder.address))
    }
}

/// One row of a log2 histogram table.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistRow {
    /// Bucket index: values `v` with `2^(i-1) <= v < 2^i` (bucket 0: `v = 0`).
    pub bucket: usize,
    /// Lowest value of the bucket (ns).
    pub low: u64,
    /// One past the highest value of the bucket (ns).
    pub high: u64,
    /// Values in the bucket.
    pub count: u64,
    /// `count` as a percentage of all values.
    pub pct: f64,
    /// Percentage of values in this bucket or below.
    pub cum_pct: f64,
}

/// The rows of a log2 histogram from its first to its last non-empty bucket (empty buckets in
/// between included), with percentages and cumulative percentages. Empty for an empty histogram.
pub fn hist_rows(h: &[u64]) -> Vec<HistRow> {
    let total: u64 = h.iter().sum();
    let (Some(first), Some(last)) = (h.iter().position(|&c| c > 0), h.iter().rposition(|&c| c > 0))
    else {
        return Vec::new();
    };
    let mut cum = 0u64;
    (first..=last)
        .map(|i| {
            cum += h[i];
            HistRow {
                bucket: i,
                low: bucket_low(i),
                high: bucket_high(i),
                count: h[i],
                pct: ratio_pct(h[i], total),
                cum_pct: ratio_pct(cum, total),
            }
        })
        .collect()
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
                key.compare(&a.agg.stats, &b.agg.stats)
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
    /// Per CPU, by CPU number (never filtered: the profile has no per-lock CPU data).
    pub cpus: Vec<CpuStats>,
    /// Every waiter–holder pair of every lock, by total wait.
    pub pairs: Vec<PairAgg>,
    /// Whether the profile carries call stacks. Profiles without any stack or event (from a
    /// collector that records none) are exported by call site: each site a one-frame stack.
    pub has_stacks: bool,
    /// The memory map of each process image (for exports that name modules, such as pprof's
    /// mappings): one for a profile, one per image for a run.
    pub maps: Vec<ImageMaps>,
    /// The filter the analysis was built with.
    pub filter: Filter,
    /// Locks in the profile before filtering.
    pub unfiltered_locks: usize,
    /// Caveats, one sentence each: what the collector could not see (the profile's notes), then
    /// about the analysis itself (e.g. files changed since the run).
    pub notes: Vec<String>,
    /// The time series of `run --interval`, with only the locks that pass the filter; lock ids
    /// as in [`LockAgg::id`]. A run's processes' intervals on one time axis (each shifted by its
    /// profile's start), by start then pid: one process's intervals follow each other, another
    /// process's may overlap them.
    pub timeline: Vec<TimelineInterval>,
    /// The processes analysed, by pid: one for a profile, one per pid for a run
    /// ([`Analysis::merge`]), with each one's sums.
    pub processes: Vec<ProcessAgg>,
}

mod build;
mod merge;
mod naming;
mod samples;

pub use merge::ProcessAgg;

pub use samples::StackSample;

impl Analysis {
    /// Analyses `profile` with the symbolizer [`Symbolizer::new`] chooses for `opts` (a
    /// command that reads a file gets both from [`crate::open`]).
    pub fn new(profile: &Profile, opts: &SymbolizeOptions) -> Analysis {
        Self::build(profile, &mut Symbolizer::new(profile, opts), &Filter::default())
    }

    /// Analyses `profile` with any symbolizer.
    pub fn with_symbolizer(profile: &Profile, sym: &mut dyn Symbolize) -> Analysis {
        Self::build(profile, sym, &Filter::default())
    }

    /// Analyses `profile` with any symbolizer, keeping only what `filter` selects: locks whose
    /// display name contains the lock pattern (or whose address it is), records whose site's
    /// function contains the function pattern, events whose stacks do. Totals, threads and
    /// views then cover the selection only; per-CPU totals cannot be filtered. The analysis's
    /// notes are the symbolizer's ([`Symbolize::notes`]).
    ///
    /// This is the one fold of a profile: every view (text, JSON, CSV, HTML, diff, plots, and
    /// the stack exports through [`Analysis::stack_samples`]) reads its result.
    pub fn build(profile: &Profile, sym: &mut dyn Symbolize, filter: &Filter) -> Analysis {
        build::build(profile, sym, filter)
    }

    /// All waiter–holder pairs in report order for `key`.
    pub fn sorted_pairs(&self, key: SortKey) -> Vec<&PairAgg> {
        let mut v: Vec<&PairAgg> = self.pairs.iter().collect();
        v.sort_by(|a, b| PairAgg::compare(key, a, b));
        v
    }

    /// Locks in report order for `key` (ties: address, then generation).
    pub fn sorted_locks(&self, key: SortKey) -> Vec<&LockAgg> {
        let mut v: Vec<&LockAgg> = self.locks.iter().collect();
        v.sort_by(|a, b| {
            let o = if key == SortKey::Name {
                a.display_name().cmp(&b.display_name())
            } else {
                key.compare(&a.agg.stats, &b.agg.stats)
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
                key.compare(&a.agg.stats, &b.agg.stats)
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
                key.compare(&a.agg.stats, &b.agg.stats)
            };
            o.then(a.tid.cmp(&b.tid)).then(a.index.cmp(&b.index))
        });
        v
    }

    /// CPUs in report order. CPUs carry only acquisitions, contended and wait: hold keys sort
    /// by wait; `name` sorts by CPU number.
    pub fn sorted_cpus(&self, key: SortKey) -> Vec<&CpuStats> {
        let mut v: Vec<&CpuStats> = self.cpus.iter().collect();
        let as_stats = |c: &CpuStats| Stats {
            acquisitions: c.acquisitions,
            contended: c.contended,
            wait_ns_total: c.wait_ns,
            ..Stats::default()
        };
        let key = match key {
            SortKey::WaitMax | SortKey::Hold | SortKey::HoldMax => SortKey::Wait,
            k => k,
        };
        v.sort_by(|a, b| {
            let o = if key == SortKey::Name {
                Ordering::Equal
            } else {
                key.compare(&as_stats(a), &as_stats(b))
            };
            o.then(a.cpu.cmp(&b.cpu))
        });
        v
    }
}

//! A run of several processes as one analysis: each process image is folded on its own (its
//! addresses, stacks and lock ids mean nothing in another), then [`Analysis::merge`] joins the
//! folds. Every view then reads the one merged analysis, so totals sum across processes.

use std::collections::BTreeMap;

use lockmeter_format::model::{CpuStats, Dropped, Header, Overhead};

use super::{Agg, Analysis, Totals};
use crate::options::SortKey;

/// One process of a run (all the images of one pid, a process that exec'd being one process).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ProcessAgg {
    /// Its pid.
    pub pid: u32,
    /// Its parent's pid (as its first image saw it).
    pub ppid: u32,
    /// Its name: the file name of its final image's executable (what it exec'd last).
    pub name: String,
    /// Process images (1, plus one per exec) whose profiles the run holds.
    pub images: usize,
    /// The sums over its locks.
    pub agg: Agg,
    /// Threads that took locks.
    pub threads: usize,
    /// Locks it took.
    pub locks: usize,
}

impl ProcessAgg {
    /// The process of one profile header.
    pub(crate) fn of(h: &Header, totals: &Totals) -> ProcessAgg {
        ProcessAgg {
            pid: h.pid,
            ppid: h.ppid,
            name: image_name(h),
            images: 1,
            agg: totals.agg.clone(),
            threads: totals.threads,
            locks: totals.locks,
        }
    }

    /// `python3[1234]`: how a merged view names the process.
    pub fn label(&self) -> String {
        format!("{}[{}]", self.name, self.pid)
    }
}

/// An analysis of nothing, the start of a merge.
fn empty() -> Analysis {
    use lockmeter_format::model::Profile;
    Analysis::build(
        &Profile::default(),
        &mut crate::symbolize::NoSymbols,
        &super::Filter::default(),
    )
}

/// The file name of the image's executable, else of its first argument, else `?`.
fn image_name(h: &Header) -> String {
    let base = |s: &str| s.rsplit('/').next().unwrap_or(s).to_owned();
    if !h.exe.is_empty() {
        return base(&h.exe);
    }
    match h.cmdline.first() {
        Some(c) if !c.is_empty() => base(c),
        _ => "?".to_owned(),
    }
}

impl Analysis {
    /// Processes in report order for `key` (name: process name, then pid).
    pub fn sorted_processes(&self, key: SortKey) -> Vec<&ProcessAgg> {
        let mut v: Vec<&ProcessAgg> = self.processes.iter().collect();
        v.sort_by(|a, b| {
            let o = if key == SortKey::Name {
                a.name.cmp(&b.name)
            } else {
                key.compare(&a.agg.stats, &b.agg.stats)
            };
            o.then(a.pid.cmp(&b.pid))
        });
        v
    }

    /// Whether more than one process took locks: then each lock's name carries its process
    /// (`python3[1234]: gil_lock`).
    pub fn several_processes(&self) -> bool {
        self.processes.iter().filter(|p| p.agg.stats.acquisitions > 0).count() > 1
    }

    /// Joins the analyses of a run's process images, the root's first, into one: locks,
    /// threads, pairs and sites of every process (lock ids and thread indices renumbered so
    /// they stay distinct), totals, dropped counts, the profiler's cost and per-CPU figures
    /// summed; the header is the root's (its command line), spanning the whole run, ending as
    /// the root process's last image ended. When more than one process took locks, each lock's
    /// name starts with its process (`python3[1234]: `). One analysis is returned as it is,
    /// its estimate joined by what the run's images left out of the file cost (see
    /// [`lockmeter_core::cost_model::combine`]).
    pub fn merge(mut parts: Vec<Analysis>) -> Analysis {
        if parts.len() <= 1 {
            let mut a = parts.pop().unwrap_or_else(empty);
            let o = &mut a.overhead;
            if o.other_fixed_ns > 0 {
                o.estimated_slowdown_milli = lockmeter_core::cost_model::combine(
                    &[(a.header.duration_ns, o.estimated_slowdown_milli, o.start_ns + o.end_ns)],
                    a.header.duration_ns,
                    o.other_fixed_ns,
                );
            }
            return a;
        }
        // Processes by pid: the images of one pid are one process, named by its last image.
        let mut procs: BTreeMap<u32, (u32, ProcessAgg)> = BTreeMap::new();
        for a in &parts {
            let seq = a.header.image_seq;
            for p in &a.processes {
                let e = procs
                    .entry(p.pid)
                    .or_insert_with(|| (seq, ProcessAgg { images: 0, ..p.clone() }));
                if seq >= e.0 {
                    e.0 = seq;
                    e.1.name = p.name.clone();
                }
                if seq == 0 {
                    e.1.ppid = p.ppid;
                }
                if e.1.images > 0 {
                    e.1.agg.merge(&p.agg);
                    e.1.threads += p.threads;
                    e.1.locks += p.locks;
                }
                e.1.images += p.images;
            }
        }
        let several = procs.values().filter(|(_, p)| p.agg.stats.acquisitions > 0).count() > 1;
        let label = |pid: u32| procs.get(&pid).map(|(_, p)| p.label()).unwrap_or_default();

        let root = parts[0].header.clone();
        let mut header = Header {
            start_unix_ns: parts.iter().map(|a| a.header.start_unix_ns).min().unwrap_or(0),
            end_unix_ns: parts.iter().map(|a| a.header.end_unix_ns).max().unwrap_or(0),
            cpu_count: parts.iter().map(|a| a.header.cpu_count).max().unwrap_or(0),
            ..root.clone()
        };
        let span = header.end_unix_ns.saturating_sub(header.start_unix_ns);
        header.duration_ns =
            parts.iter().map(|a| a.header.duration_ns).max().unwrap_or(0).max(span);
        if let Some(last) =
            parts.iter().filter(|a| a.header.pid == root.pid).max_by_key(|a| a.header.image_seq)
        {
            header.end_reason = last.header.end_reason;
        }
        // Every process's time series on the run's time axis: each image's intervals shifted by
        // its start (wall clock) after the run's.
        let mut notes = Vec::new();
        let mut timeline = Vec::new();
        let mut lock_base = 0u32;

        let mut out = empty();
        out.filter = parts[0].filter.clone();
        let mut thread_base = 0u32;
        let mut overhead = Overhead::default();
        let mut dropped = Dropped::default();
        let mut cpus: BTreeMap<u32, CpuStats> = BTreeMap::new();
        let mut totals = Totals::default();
        let estimates: Vec<(u64, u64, u64)> = parts
            .iter()
            .map(|a| {
                let o = &a.overhead;
                (a.header.duration_ns, o.estimated_slowdown_milli, o.start_ns + o.end_ns)
            })
            .collect();
        for a in parts {
            let prefix = several.then(|| format!("{}: ", label(a.header.pid)));
            let next_lock = lock_base
                .saturating_add(a.locks.iter().map(|l| l.id).max().unwrap_or(0))
                .saturating_add(1);
            let next_thread = thread_base
                .saturating_add(a.threads.iter().map(|t| t.index).max().unwrap_or(0))
                .saturating_add(1);
            for mut l in a.locks {
                l.id = l.id.saturating_add(lock_base);
                if let Some(p) = &prefix {
                    l.name = Some(format!(
                        "{p}{}",
                        l.name.take().unwrap_or_else(|| format!("{:#x}", l.address))
                    ));
                }
                let name = l.display_name();
                for s in &mut l.sites {
                    s.lock = l.id;
                }
                for pr in &mut l.pairs {
                    pr.lock = l.id;
                    pr.lock_name = name.clone();
                }
                out.pairs.extend(l.pairs.iter().cloned());
                out.locks.push(l);
            }
            for mut t in a.threads {
                t.index = t.index.saturating_add(thread_base);
                out.threads.push(t);
            }
            let shift = a.header.start_unix_ns.saturating_sub(header.start_unix_ns);
            timeline.extend(a.timeline.into_iter().map(|mut iv| {
                iv.start_ns = iv.start_ns.saturating_add(shift);
                iv.end_ns = iv.end_ns.saturating_add(shift);
                for l in &mut iv.locks {
                    l.lock = l.lock.saturating_add(lock_base);
                }
                iv
            }));
            totals.agg.merge(&a.totals.agg);
            totals.locks += a.totals.locks;
            totals.sites += a.totals.sites;
            totals.threads += a.totals.threads;
            overhead.estimated_total_ns += a.overhead.estimated_total_ns;
            overhead.memory_bytes += a.overhead.memory_bytes;
            overhead.cpu_ns += a.overhead.cpu_ns;
            overhead.hooks_ns += a.overhead.hooks_ns;
            overhead.ns_per_pair = overhead.ns_per_pair.max(a.overhead.ns_per_pair);
            overhead.ns_per_stack = overhead.ns_per_stack.max(a.overhead.ns_per_stack);
            overhead.start_ns += a.overhead.start_ns;
            overhead.end_ns += a.overhead.end_ns;
            overhead.other_images += a.overhead.other_images;
            overhead.other_fixed_ns += a.overhead.other_fixed_ns;
            let d = &a.dropped;
            dropped.acquisitions += d.acquisitions;
            dropped.locks += d.locks;
            dropped.threads += d.threads;
            dropped.holds += d.holds;
            dropped.stacks += d.stacks;
            dropped.acquisitions_no_thread += d.acquisitions_no_thread;
            dropped.acquisitions_table_full += d.acquisitions_table_full;
            dropped.acquisitions_registry_full += d.acquisitions_registry_full;
            for c in a.cpus {
                let e = cpus.entry(c.cpu).or_insert(CpuStats { cpu: c.cpu, ..CpuStats::default() });
                e.acquisitions += c.acquisitions;
                e.contended += c.contended;
                e.wait_ns += c.wait_ns;
            }
            out.has_stacks |= a.has_stacks;
            out.maps.extend(a.maps);
            out.unfiltered_locks += a.unfiltered_locks;
            for n in a.notes {
                let n = match &prefix {
                    Some(p) => format!("{p}{n}"),
                    None => n,
                };
                if !notes.contains(&n) {
                    notes.push(n);
                }
            }
            lock_base = next_lock;
            thread_base = next_thread;
        }
        out.pairs.sort_by(|a, b| super::PairAgg::compare(SortKey::Wait, a, b));
        out.header = header;
        overhead.estimated_slowdown_milli = lockmeter_core::cost_model::combine(
            &estimates,
            out.header.duration_ns,
            overhead.other_fixed_ns,
        );
        out.overhead = overhead;
        out.dropped = dropped;
        out.totals = totals;
        out.cpus = cpus.into_values().collect();
        out.notes = notes;
        timeline.sort_by_key(|iv| (iv.start_ns, iv.pid));
        out.timeline = timeline;
        out.processes = procs.into_values().map(|(_, p)| p).collect();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbolize::NoSymbols;
    use lockmeter_format::model::{LockInfo, LockKind, Mode, Profile, Record, Stats, ThreadInfo};

    /// The profile of a process image with one lock `name` (id 1) taken `acq` times by thread 1.
    fn one_lock(pid: u32, seq: u32, exe: &str, name: &str, acq: u64) -> Profile {
        let stats = Stats { acquisitions: acq, ..Stats::default() };
        Profile {
            header: Header { pid, ppid: 1, image_seq: seq, exe: exe.into(), ..Header::default() },
            threads: vec![ThreadInfo { index: 1, tid: pid, name: "t".into() }],
            locks: vec![LockInfo {
                id: 1,
                address: 0x1000,
                generation: 0,
                kind: LockKind::Mutex,
                name: Some(name.into()),
            }],
            records: if acq > 0 {
                vec![Record { thread: 1, lock: 1, site: 0x10, mode: Mode::Exclusive, stats }]
            } else {
                Vec::new()
            },
            ..Profile::default()
        }
    }

    /// The analysis of [`one_lock`]'s profile.
    fn image(pid: u32, seq: u32, exe: &str, name: &str, acq: u64) -> Analysis {
        let p = one_lock(pid, seq, exe, name, acq);
        Analysis::build(&p, &mut NoSymbols, &super::super::Filter::default())
    }

    /// `image` with a time series: intervals of 10 ns from `start_unix_ns`, lock 1 taken
    /// `per[i]` times in interval i.
    fn timed(pid: u32, start_unix_ns: u64, per: &[u64]) -> Analysis {
        use lockmeter_format::{Interval, IntervalLock};
        let mut p = one_lock(pid, 0, "/x/w", "l", per.iter().sum());
        p.header.start_unix_ns = start_unix_ns;
        p.timeline = per
            .iter()
            .enumerate()
            .map(|(i, &n)| Interval {
                start_ns: i as u64 * 10,
                end_ns: (i as u64 + 1) * 10,
                locks: vec![IntervalLock { lock: 1, acquisitions: n, ..IntervalLock::default() }],
            })
            .collect();
        Analysis::build(&p, &mut NoSymbols, &super::super::Filter::default())
    }

    #[test]
    fn every_process_time_series_is_on_the_run_axis() {
        // The second process started 5 ns after the first: its intervals overlap the first's.
        let a = Analysis::merge(vec![timed(10, 1000, &[1, 2, 3]), timed(11, 1005, &[4, 5])]);
        let got: Vec<(u32, u64, u64, u64)> = a
            .timeline
            .iter()
            .map(|iv| (iv.pid, iv.start_ns, iv.end_ns, iv.locks[0].acquisitions))
            .collect();
        assert_eq!(
            got,
            [(10, 0, 10, 1), (11, 5, 15, 4), (10, 10, 20, 2), (11, 15, 25, 5), (10, 20, 30, 3)]
        );
        // Each interval names its own process's lock, and per lock they add up to its totals.
        for l in &a.locks {
            let sum: u64 = a
                .timeline
                .iter()
                .flat_map(|iv| iv.locks.iter().filter(|x| x.lock == l.id).map(move |x| (iv, x)))
                .map(|(iv, x)| {
                    assert_eq!(iv.pid, l.pid, "{}", l.display_name());
                    x.acquisitions
                })
                .sum();
            assert_eq!(sum, l.agg.stats.acquisitions, "{}", l.display_name());
        }
        assert_eq!(a.totals.agg.stats.acquisitions, 15);
    }

    #[test]
    fn one_process_with_locks_keeps_its_names_and_an_exec_is_one_process() {
        let a = Analysis::merge(vec![
            image(10, 0, "/bin/sh", "unused", 0),
            image(10, 1, "/usr/bin/python3.11", "gil", 500),
        ]);
        assert!(!a.several_processes());
        assert_eq!(a.totals.agg.stats.acquisitions, 500);
        let names: Vec<String> = a.locks.iter().map(|l| l.display_name()).collect();
        assert!(names.contains(&"gil".to_owned()), "{names:?}");
        assert_eq!(a.processes.len(), 1);
        assert_eq!((a.processes[0].name.as_str(), a.processes[0].images), ("python3.11", 2));
    }

    #[test]
    fn several_processes_sum_and_name_each_lock_with_its_process() {
        let a = Analysis::merge(vec![
            image(10, 0, "/x/forker", "l", 3),
            image(11, 0, "/x/forker", "l", 4),
        ]);
        assert!(a.several_processes());
        assert_eq!(a.totals.agg.stats.acquisitions, 7);
        assert_eq!(a.totals.locks, 2);
        let mut names: Vec<String> = a.locks.iter().map(|l| l.display_name()).collect();
        names.sort();
        assert_eq!(names, ["forker[10]: l", "forker[11]: l"]);
        // Lock ids and thread indices stay distinct, and sites follow their lock.
        assert_ne!(a.locks[0].id, a.locks[1].id);
        assert_ne!(a.threads[0].index, a.threads[1].index);
        for l in &a.locks {
            assert!(l.sites.iter().all(|s| s.lock == l.id));
        }
        let by_pid: Vec<(u32, u64)> =
            a.processes.iter().map(|p| (p.pid, p.agg.stats.acquisitions)).collect();
        assert_eq!(by_pid, [(10, 3), (11, 4)]);
    }

    #[test]
    fn a_run_of_several_processes_has_one_estimate_of_its_slowdown() {
        let mut a = image(10, 0, "/bin/sh", "unused", 0);
        let mut b = image(10, 1, "/usr/bin/python3.11", "gil", 500);
        (a.header.duration_ns, a.overhead.estimated_slowdown_milli) = (1_000_000_000, 2000);
        (b.header.duration_ns, b.overhead.estimated_slowdown_milli) = (3_000_000_000, 1500);
        (a.header.start_unix_ns, a.header.end_unix_ns) = (1, 1 + 1_000_000_000);
        (b.header.start_unix_ns, b.header.end_unix_ns) = (1 + 1_000_000_000, 1 + 4_000_000_000);
        let m = Analysis::merge(vec![a.clone(), b.clone()]);
        assert_eq!(m.header.duration_ns, 4_000_000_000);
        assert_eq!(m.overhead.estimated_slowdown(), Some(1.6));
        // 30 images left out of the file (no locks), 20 ms each to start and end: 0.6 s more
        // of the run is the collector's, 1.9 s unmetered.
        (a.overhead.other_images, a.overhead.other_fixed_ns) = (30, 600_000_000);
        let m = Analysis::merge(vec![a.clone(), b]);
        assert_eq!((m.overhead.other_images, m.overhead.other_fixed_ns), (30, 600_000_000));
        assert_eq!(m.overhead.estimated_slowdown_milli, 2105);
        // A file of one profile counts them too: 1 s at 2x (0.5 s unmetered), 0.25 s less.
        a.overhead.other_fixed_ns = 250_000_000;
        assert_eq!(Analysis::merge(vec![a]).overhead.estimated_slowdown_milli, 4000);
    }
}

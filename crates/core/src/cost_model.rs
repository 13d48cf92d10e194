//! The preload collector's model of its own cost: `overhead.estimated_slowdown` (estimated
//! metered wall / unmetered wall) from what it measured in the run (the preload's `cost.rs`).
//!
//! The pair as the run paid it is the calibrated uncontended pair with its in-critical-section
//! part replaced by the run's measurement. Work outside critical sections runs in parallel, so
//! pairs x acquisitions plus the contended path's time is divided over the threads that ran at
//! once; the hooks' time inside the critical section of a hold that another thread waited for
//! delays that thread directly, so holds waited for x in-critical-section time adds to wall time
//! undivided.

/// What the model is given, summed over the threads (ns, already converted from ticks).
#[derive(Debug, Default, Clone, Copy)]
pub struct Inputs {
    /// Wall time of the run so far.
    pub duration_ns: u64,
    /// The program's acquisitions.
    pub acquisitions: u64,
    /// Holds another thread wanted (waited for, or failed a trylock on).
    pub wanted_holds: u64,
    /// Calibrated uncontended lock+unlock pair.
    pub ns_per_pair: u64,
    /// Of it, the in-critical-section part measured on the calibration pairs.
    pub calib_cs_ns: f64,
    /// Mean in-critical-section hook time of one acquisition and one release (measured).
    pub cs_acq_ns: f64,
    pub cs_rel_ns: f64,
    /// Of the calibrated pair, the hooks' timed work outside the critical section (the record's
    /// lookup before the real lock call, the hold's record after the real unlock).
    pub calib_out_ns: f64,
    /// The same measured in the run (per acquisition and release together; 0: none timed).
    pub out_ns: f64,
    /// Time on the contended path (measured: waiters' sides, holders' sides extrapolated).
    pub contended_ns: u64,
    /// Threads that ran at once, on average ([`parallelism`]; at least 1).
    pub parallel: f64,
}

/// How many threads ran at once, on average: of the `threads` that took locks (at most the
/// `cpus`), those that were not waiting for a lock. A saturated lock serializes the program (4
/// threads on one hot mutex, 3 of them asleep in its queue at any moment: 1), and then every
/// hook's cost adds to wall time undivided, not only its in-critical-section part.
pub fn parallelism(threads: u64, cpus: u64, duration_ns: u64, wait_ns: u64) -> f64 {
    let most = threads.min(cpus).max(1) as f64;
    if duration_ns == 0 {
        return most;
    }
    let running = threads as f64 - wait_ns as f64 / duration_ns as f64;
    running.clamp(1.0, most)
}

/// The estimate: (slowdown x 1000, contended-path ns, serialized ns). Slowdown 0: no duration.
pub fn estimate(i: &Inputs) -> (u64, u64, u64) {
    let cs = i.cs_acq_ns + i.cs_rel_ns;
    // The pair as the run paid it: the calibrated pair with its timed parts, inside and outside
    // the critical section, as measured in the run (cache misses on shared lines, records and
    // registry slots that miss the CPU's caches when a thread takes thousands of locks).
    let (calib_out, out) = if i.out_ns > 0.0 { (i.calib_out_ns, i.out_ns) } else { (0.0, 0.0) };
    let pair = (i.ns_per_pair as f64 - i.calib_cs_ns - calib_out).max(0.0) + cs + out;
    let pair = pair.max(i.ns_per_pair as f64);
    let serial = i.wanted_holds as f64 * cs;
    let parallel = (i.acquisitions as f64 * pair - serial).max(0.0) + i.contended_ns as f64;
    let parallel = parallel / i.parallel.max(1.0);
    let t = i.duration_ns as f64;
    if t <= 0.0 {
        return (0, i.contended_ns, serial as u64);
    }
    // The unmetered run cannot take less than a hundredth of the metered one in this model.
    let bare = (t - serial - parallel).max(t / 100.0);
    (((t / bare) * 1000.0).round() as u64, i.contended_ns, serial as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialized_time_is_not_divided_over_threads() {
        let base = Inputs {
            duration_ns: 1_000_000_000,
            acquisitions: 10_000_000,
            ns_per_pair: 10,
            parallel: 4.0,
            ..Inputs::default()
        };
        // 100 ms of uncontended pairs over 4 threads: 25 ms of a 1 s run.
        assert_eq!(estimate(&base).0, 1026);
        // Every hold waited for, 30 ns inside each critical section: 300 ms more, undivided.
        let sat = Inputs { wanted_holds: 10_000_000, cs_acq_ns: 20.0, cs_rel_ns: 10.0, ..base };
        let (x, _, serial) = estimate(&sat);
        assert_eq!(serial, 300_000_000);
        assert_eq!(x, 1481);
        // The calibration's own in-critical-section part is replaced by the run's.
        assert_eq!(estimate(&Inputs { calib_cs_ns: 5.0, ..sat }).0, 1455);
        // The work outside critical sections as measured in the run replaces its calibrated
        // part (a record that missed the caches: 30 ns a pair, over 4 threads); none timed:
        // the calibration stands.
        let missed = Inputs { calib_out_ns: 4.0, out_ns: 24.0, ..base };
        assert_eq!(estimate(&missed).0, 1081);
        assert_eq!(estimate(&Inputs { out_ns: 0.0, ..missed }).0, 1026);
        // No duration: no estimate.
        assert_eq!(estimate(&Inputs { duration_ns: 0, ..sat }).0, 0);
        // Added time beyond the run is capped.
        assert_eq!(estimate(&Inputs { wanted_holds: 1 << 40, ..sat }).0, 100_000);
    }

    #[test]
    fn waiting_threads_do_not_run_in_parallel() {
        let s = 1_000_000_000;
        // No waits: as many as ran, at most the CPUs.
        assert_eq!(parallelism(4, 2, s, 0), 2.0);
        assert_eq!(parallelism(1, 16, s, 0), 1.0);
        // 4 threads, 3 of them waiting all along: one ran at a time.
        assert_eq!(parallelism(4, 16, s, 3 * s), 1.0);
        // Half of one thread's time waiting out of 4 on 16 CPUs: 3.5.
        assert_eq!(parallelism(4, 16, s, s / 2), 3.5);
        // Waits beyond the threads' time (threads that came and went): at least one.
        assert_eq!(parallelism(4, 16, s, 9 * s), 1.0);
        assert_eq!(parallelism(0, 2, 0, 0), 1.0);
    }
}

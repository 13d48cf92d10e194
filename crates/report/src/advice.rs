//! Per-lock advice: what the measurements suggest about a mutex's algorithm, stated as a
//! hypothesis with the `lockmeter compare` command that tests it (the lab algorithms are swapped
//! in under the unmodified program with `run --lock`; see the preload's `swap.rs`).
//!
//! The rules, first match wins, for mutexes with at least [`MIN_ACQUISITIONS`] acquisitions of
//! which at least 1% waited:
//! 1. holders switched out while holding (`run --kernel`) for at least 10% of the wait:
//!    spinning waiters would take the CPU the holder needs: a parking lock;
//! 2. short holds (average under 2 µs) and at least 10% of acquisitions waited: the handover
//!    costs more than the hold: a queued spinlock or a spin-then-park lock;
//! 3. long holds (average over 50 µs) and at least 10% waited: waiters should sleep, and a FIFO
//!    parking lock bounds the longest wait; the hold itself is the cost;
//! 4. otherwise: the adaptive lock, whose spin phase is bounded in time.
//!
//! Reader-writer advice ("writers are rare: an rwlock") needs reads and writes told apart on a
//! mutex, which the collector cannot see, so it is not given.

use lockmeter_core::Stats;
use lockmeter_format::model::{LockKind, LockSleep};

use crate::analysis::Analysis;
use crate::options::SortKey;
use crate::units::{fmt_ns, fmt_pct};

/// Fewer acquisitions than this give no advice.
pub const MIN_ACQUISITIONS: u64 = 100;

/// One lock's advice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Advice {
    /// The lock's display name.
    pub lock: String,
    /// What was measured and what it suggests (a hypothesis, not a verdict).
    pub hypothesis: String,
    /// The `lockmeter compare` command that tests it.
    pub command: String,
}

/// The hypothesis for one mutex and the algorithms (`--locks`) that test it, or `None` when the
/// measurements suggest nothing.
pub fn hypothesis(
    kind: LockKind,
    s: &Stats,
    sleep: Option<&LockSleep>,
) -> Option<(String, &'static str)> {
    if kind != LockKind::Mutex
        || s.acquisitions < MIN_ACQUISITIONS
        || s.contended.saturating_mul(100) < s.acquisitions
        || s.wait_ns_total == 0
    {
        return None;
    }
    let con_pct = s.contended as f64 * 100.0 / s.acquisitions as f64;
    let hold_avg = (s.holds_timed > 0).then(|| s.hold_ns_total / s.holds_timed);
    if let Some(k) = sleep
        .filter(|k| k.preempted_holds > 0 && k.preempted_ns.saturating_mul(10) >= s.wait_ns_total)
    {
        return Some((
            format!(
                "its holders were switched out while holding it {} times ({} in all, against {} of waiting): spinning waiters would take the CPU a holder needs, so a parking lock (futex, adaptive) should beat a spinning one (mcs)",
                k.preempted_holds,
                fmt_ns(k.preempted_ns),
                fmt_ns(s.wait_ns_total)
            ),
            "pthread,futex,adaptive,mcs",
        ));
    }
    match hold_avg {
        Some(h) if h < 2_000 && con_pct >= 10.0 => Some((
            format!(
                "holds are short ({} on average) and {} of acquisitions waited: handing the lock over costs more than holding it, so a queued spinlock (mcs) or a spin-then-park lock (adaptive) may beat glibc's sleep and wake-up",
                fmt_ns(h),
                fmt_pct(con_pct)
            ),
            "pthread,mcs,adaptive",
        )),
        Some(h) if h > 50_000 && con_pct >= 10.0 => Some((
            format!(
                "holds are long ({} on average) and {} of acquisitions waited: waiters should sleep, not spin, and a FIFO parking lock (mcs:park) bounds the longest wait ({} now); the hold itself is the cost to cut",
                fmt_ns(h),
                fmt_pct(con_pct),
                fmt_ns(s.wait_ns_max)
            ),
            "pthread,futex,mcs:park",
        )),
        _ => Some((
            format!(
                "{} of acquisitions waited ({} of waiting in all): a spin-then-park lock with a time-bounded spin (adaptive) may cut the sleeps",
                fmt_pct(con_pct),
                fmt_ns(s.wait_ns_total)
            ),
            "pthread,adaptive,futex",
        )),
    }
}

/// A shell word: quoted when it holds anything but safe characters.
fn shell_word(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c)) {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// `lockmeter compare --locks LOCKS --runs 5 -- CMDLINE`.
pub fn compare_command(locks: &str, cmdline: &[String]) -> String {
    let cmd: Vec<String> = cmdline.iter().map(|a| shell_word(a)).collect();
    format!("lockmeter compare --locks {locks} --runs 5 -- {}", cmd.join(" "))
}

/// Advice for the top `n` mutexes by total wait that have any.
pub fn advice(a: &Analysis, n: usize) -> Vec<Advice> {
    a.sorted_locks(SortKey::Wait)
        .into_iter()
        .filter_map(|l| {
            let (hypothesis, locks) = hypothesis(l.kind, &l.agg.stats, l.sleep.as_ref())?;
            Some(Advice {
                lock: l.display_name(),
                hypothesis,
                command: compare_command(locks, &a.header.cmdline),
            })
        })
        .take(n)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(acq: u64, contended: u64, hold_total: u64, wait_total: u64) -> Stats {
        Stats {
            acquisitions: acq,
            contended,
            holds_timed: acq,
            hold_ns_total: hold_total,
            wait_ns_total: wait_total,
            wait_ns_max: wait_total / contended.max(1),
            ..Stats::default()
        }
    }

    #[test]
    fn each_rule_with_its_command() {
        // Short holds, 20% contended: queued spin or adaptive.
        let (h, l) =
            hypothesis(LockKind::Mutex, &stats(1000, 200, 500_000, 9_000_000), None).unwrap();
        assert_eq!(l, "pthread,mcs,adaptive");
        assert!(h.starts_with("holds are short (500 ns on average) and 20.0%"), "{h}");
        // Long holds: parking.
        let (h, l) =
            hypothesis(LockKind::Mutex, &stats(1000, 500, 100_000_000, 9_000_000), None).unwrap();
        assert_eq!(l, "pthread,futex,mcs:park");
        assert!(h.starts_with("holds are long (100 µs on average)"), "{h}");
        // Preempted holders win over the hold rules.
        let k = LockSleep { preempted_holds: 7, preempted_ns: 2_000_000, ..LockSleep::default() };
        let (h, l) =
            hypothesis(LockKind::Mutex, &stats(1000, 200, 500_000, 9_000_000), Some(&k)).unwrap();
        assert_eq!(l, "pthread,futex,adaptive,mcs");
        assert!(h.contains("switched out while holding it 7 times"), "{h}");
        // Moderate contention: adaptive.
        let (_, l) =
            hypothesis(LockKind::Mutex, &stats(1000, 50, 5_000_000, 1_000_000), None).unwrap();
        assert_eq!(l, "pthread,adaptive,futex");
        // Nothing to say: too few acquisitions, under 1% waited, not a mutex.
        assert_eq!(hypothesis(LockKind::Mutex, &stats(99, 50, 100, 1000), None), None);
        assert_eq!(hypothesis(LockKind::Mutex, &stats(1000, 9, 100, 1000), None), None);
        assert_eq!(hypothesis(LockKind::RwLock, &stats(1000, 500, 100, 1000), None), None);
    }

    #[test]
    fn the_command_quotes_what_the_shell_would_split() {
        let c = compare_command("pthread,mcs", &["./app".into(), "--name".into(), "a b".into()]);
        assert_eq!(c, "lockmeter compare --locks pthread,mcs --runs 5 -- ./app --name 'a b'");
    }
}

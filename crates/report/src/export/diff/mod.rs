//! Two profiles compared, per lock or per call site: the change in acquisitions, contention rate,
//! wait and hold time, largest change first. This is seed 004's before/after table (FreeBSD's
//! `LOCK_PROFILING` counts per acquisition point, before and after a redesign).
//!
//! Matching across profiles (the two runs' addresses differ):
//!
//! * a lock with a name (given by the program or collector, or the static symbol covering it)
//!   is matched by its display name;
//! * a lock without one (heap, stack; a name from its first use does not count, as it holds a
//!   line number or offset) is matched by the set of functions that took it, and
//!   is shown as `[lock taken in f, g]`; heap locks with the same set (a lock per object, striped
//!   locks) are summed into one row, and the row counts how many locks it sums;
//! * a call site is matched by lock and by its symbolized name, `function+0xOFF`, or by
//!   `function` alone with [`DiffOptions::by_function`] (offsets move when the code changes).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::analysis::{Agg, Analysis, LockAgg, NameSource, SiteAgg};

mod text;

pub use text::{json, text};

/// Rows of the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DiffBy {
    /// One row per lock.
    #[default]
    Lock,
    /// One row per (lock, call site).
    Site,
}

impl std::str::FromStr for DiffBy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "lock" => Ok(DiffBy::Lock),
            "site" => Ok(DiffBy::Site),
            _ => Err(format!("unknown view {s:?} (expected lock or site)")),
        }
    }
}

/// What "largest change" measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DiffKey {
    /// Total wait time (ns).
    #[default]
    Wait,
    /// Total hold time (ns).
    Hold,
    /// Acquisitions.
    Acquisitions,
    /// Contended acquisitions.
    Contended,
    /// Contended acquisitions as a share of acquisitions (percentage points).
    ContentionRate,
}

impl std::str::FromStr for DiffKey {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "wait" => DiffKey::Wait,
            "hold" => DiffKey::Hold,
            "acquisitions" => DiffKey::Acquisitions,
            "contended" => DiffKey::Contended,
            "contention-rate" => DiffKey::ContentionRate,
            _ => {
                return Err(format!(
                    "unknown sort key {s:?} (expected wait, hold, acquisitions, contended or \
                     contention-rate)"
                ));
            }
        })
    }
}

impl DiffKey {
    fn describe(self) -> &'static str {
        match self {
            DiffKey::Wait => "total wait",
            DiffKey::Hold => "total hold",
            DiffKey::Acquisitions => "acquisitions",
            DiffKey::Contended => "contended acquisitions",
            DiffKey::ContentionRate => "contention rate",
        }
    }
}

/// Options of [`diff`].
#[derive(Debug, Clone, Default)]
pub struct DiffOptions {
    /// Rows per lock or per site.
    pub by: DiffBy,
    /// Sort by the absolute change of this.
    pub sort: DiffKey,
    /// Match sites by function only, not function+offset.
    pub by_function: bool,
    /// Keep the first N rows.
    pub top: Option<usize>,
}

/// One side of a row: the sums of its records.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Side {
    /// Profile locks summed in this row (heap locks with the same sites merge).
    pub locks: usize,
    /// Acquisitions.
    pub acquisitions: u64,
    /// Contended acquisitions.
    pub contended: u64,
    /// `contended / acquisitions` in percent.
    pub contention_pct: f64,
    /// Failed trylocks and timed-out timed locks.
    pub trylock_failures: u64,
    /// Total wait, ns.
    pub wait_ns_total: u64,
    /// Longest wait, ns.
    pub wait_ns_max: u64,
    /// Mean wait of a contended acquisition, ns.
    pub wait_ns_avg: Option<u64>,
    /// Total timed hold, ns.
    pub hold_ns_total: u64,
    /// Longest hold, ns.
    pub hold_ns_max: u64,
    /// Mean timed hold, ns.
    pub hold_ns_avg: Option<u64>,
    /// Holds that were timed.
    pub holds_timed: u64,
    /// FreeBSD's `cnt_hold`: held from here while another thread wanted it.
    pub cnt_hold: u64,
    /// FreeBSD's `cnt_lock`: an attempt from here found it held.
    pub cnt_lock: u64,
}

impl Side {
    fn new(g: &Agg, locks: usize) -> Side {
        let s = &g.stats;
        Side {
            locks,
            acquisitions: s.acquisitions,
            contended: s.contended,
            contention_pct: g.contention_pct(),
            trylock_failures: s.trylock_failures,
            wait_ns_total: s.wait_ns_total,
            wait_ns_max: s.wait_ns_max,
            wait_ns_avg: g.wait_avg_ns(),
            hold_ns_total: s.hold_ns_total,
            hold_ns_max: s.hold_ns_max,
            hold_ns_avg: g.hold_avg_ns(),
            holds_timed: s.holds_timed,
            cnt_hold: s.cnt_hold,
            cnt_lock: s.cnt_lock,
        }
    }
}

/// Whether a row is in both profiles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// In both.
    Both,
    /// Only in the after profile.
    New,
    /// Only in the before profile.
    Gone,
}

/// The change from before to after (after − before; a missing side counts as zero).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    /// Acquisitions.
    pub acquisitions: i64,
    /// Relative change of acquisitions in percent (`None` when there were none before).
    pub acquisitions_pct: Option<f64>,
    /// Contended acquisitions.
    pub contended: i64,
    /// Relative change of contended acquisitions in percent.
    pub contended_pct: Option<f64>,
    /// Contention rate, percentage points.
    pub contention_pct_points: f64,
    /// Total wait, ns.
    pub wait_ns: i64,
    /// Relative change of total wait in percent.
    pub wait_pct: Option<f64>,
    /// Total hold, ns.
    pub hold_ns: i64,
    /// Relative change of total hold in percent.
    pub hold_pct: Option<f64>,
    /// `cnt_hold`.
    pub cnt_hold: i64,
    /// `cnt_lock`.
    pub cnt_lock: i64,
}

fn rel(before: u64, after: u64) -> Option<f64> {
    (before > 0).then(|| (after as f64 - before as f64) * 100.0 / before as f64)
}

impl Change {
    fn new(b: Option<&Side>, a: Option<&Side>) -> Change {
        let zero = Side::new(&Agg::default(), 0);
        let (b, a) = (b.unwrap_or(&zero), a.unwrap_or(&zero));
        let d = |x: u64, y: u64| {
            (i128::from(y) - i128::from(x)).clamp(i64::MIN.into(), i64::MAX.into()) as i64
        };
        Change {
            acquisitions: d(b.acquisitions, a.acquisitions),
            acquisitions_pct: rel(b.acquisitions, a.acquisitions),
            contended: d(b.contended, a.contended),
            contended_pct: rel(b.contended, a.contended),
            contention_pct_points: a.contention_pct - b.contention_pct,
            wait_ns: d(b.wait_ns_total, a.wait_ns_total),
            wait_pct: rel(b.wait_ns_total, a.wait_ns_total),
            hold_ns: d(b.hold_ns_total, a.hold_ns_total),
            hold_pct: rel(b.hold_ns_total, a.hold_ns_total),
            cnt_hold: d(b.cnt_hold, a.cnt_hold),
            cnt_lock: d(b.cnt_lock, a.cnt_lock),
        }
    }

    /// The size of the change by `key`, for sorting.
    fn magnitude(&self, key: DiffKey) -> f64 {
        match key {
            DiffKey::Wait => self.wait_ns.unsigned_abs() as f64,
            DiffKey::Hold => self.hold_ns.unsigned_abs() as f64,
            DiffKey::Acquisitions => self.acquisitions.unsigned_abs() as f64,
            DiffKey::Contended => self.contended.unsigned_abs() as f64,
            DiffKey::ContentionRate => self.contention_pct_points.abs(),
        }
    }
}

/// One row: a lock, or a (lock, site).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DiffRow {
    /// The lock's matching name.
    pub lock: String,
    /// The site's matching name (rows by site only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site: Option<String>,
    /// In both profiles, new, or gone.
    pub status: Status,
    /// Before (`null` when new).
    pub before: Option<Side>,
    /// After (`null` when gone).
    pub after: Option<Side>,
    /// After − before.
    pub change: Change,
}

impl DiffRow {
    fn new(lock: String, site: Option<String>, b: Option<Side>, a: Option<Side>) -> DiffRow {
        let status = match (&b, &a) {
            (Some(_), Some(_)) | (None, None) => Status::Both,
            (None, Some(_)) => Status::New,
            (Some(_), None) => Status::Gone,
        };
        let change = Change::new(b.as_ref(), a.as_ref());
        DiffRow { lock, site, status, before: b, after: a, change }
    }
}

/// What a profile was, for the header.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProfileInfo {
    /// The file (as given).
    pub file: String,
    /// Command line.
    pub cmdline: Vec<String>,
    /// Process id.
    pub pid: u32,
    /// Duration of metering, ns.
    pub duration_ns: u64,
}

/// The comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    /// `lockmeter-diff/1`.
    pub schema: &'static str,
    /// The before profile.
    pub before: ProfileInfo,
    /// The after profile.
    pub after: ProfileInfo,
    /// Rows per lock or per site.
    pub by: DiffBy,
    /// Sort key.
    pub sort: DiffKey,
    /// Whether sites were matched by function only.
    pub by_function: bool,
    /// The whole profiles.
    pub totals: DiffRow,
    /// Rows in the profiles (before `top` was applied).
    pub rows_total: usize,
    /// The rows, largest change first.
    pub rows: Vec<DiffRow>,
}

/// The JSON schema name of [`Diff`].
pub const DIFF_SCHEMA: &str = "lockmeter-diff/1";

/// The function of a site: the symbol without offset, else the site's name.
fn site_function(s: &SiteAgg) -> String {
    s.frame.function.clone().unwrap_or_else(|| s.function.clone())
}

/// The matching name of a lock: its display name when the program named it or a symbol covers
/// it, else the functions that took it (a heap lock's first-use name carries a line number or
/// an offset, which move when the code changes).
fn lock_key(l: &LockAgg) -> String {
    if l.name.is_some() && matches!(l.name_source, NameSource::Program | NameSource::Symbol) {
        return l.display_name();
    }
    let fns: BTreeSet<String> = l.sites.iter().map(site_function).collect();
    if fns.is_empty() {
        return l.display_name();
    }
    format!("[lock taken in {}]", fns.into_iter().collect::<Vec<_>>().join(", "))
}

/// Rows of one profile: key → (sums, locks summed).
fn group(a: &Analysis, opts: &DiffOptions) -> BTreeMap<(String, Option<String>), (Agg, usize)> {
    let mut m: BTreeMap<(String, Option<String>), (Agg, usize)> = BTreeMap::new();
    for l in &a.locks {
        let key = lock_key(l);
        match opts.by {
            DiffBy::Lock => {
                let e = m.entry((key, None)).or_default();
                e.0.merge(&l.agg);
                e.1 += 1;
            }
            DiffBy::Site => {
                let mut seen = BTreeSet::new();
                for s in &l.sites {
                    let site = if opts.by_function { site_function(s) } else { s.function.clone() };
                    let e = m.entry((key.clone(), Some(site.clone()))).or_default();
                    e.0.merge(&s.agg);
                    if seen.insert(site) {
                        e.1 += 1;
                    }
                }
            }
        }
    }
    m
}

fn info(file: &str, a: &Analysis) -> ProfileInfo {
    ProfileInfo {
        file: file.to_owned(),
        cmdline: a.header.cmdline.clone(),
        pid: a.header.pid,
        duration_ns: a.header.duration_ns,
    }
}

/// Compares two analysed profiles. `before_file` and `after_file` only label them.
pub fn diff(
    before_file: &str,
    before: &Analysis,
    after_file: &str,
    after: &Analysis,
    opts: &DiffOptions,
) -> Diff {
    let b = group(before, opts);
    let mut a = group(after, opts);
    let mut rows: Vec<DiffRow> = Vec::new();
    for (key, (agg, n)) in b {
        let after_side = a.remove(&key).map(|(g, n)| Side::new(&g, n));
        rows.push(DiffRow::new(key.0, key.1, Some(Side::new(&agg, n)), after_side));
    }
    for (key, (agg, n)) in a {
        rows.push(DiffRow::new(key.0, key.1, None, Some(Side::new(&agg, n))));
    }
    let key = opts.sort;
    rows.sort_by(|x, y| {
        y.change
            .magnitude(key)
            .partial_cmp(&x.change.magnitude(key))
            .unwrap_or(Ordering::Equal)
            .then_with(|| x.lock.cmp(&y.lock))
            .then_with(|| x.site.cmp(&y.site))
    });
    let rows_total = rows.len();
    if let Some(n) = opts.top {
        rows.truncate(n);
    }
    let totals = DiffRow::new(
        "(all locks)".into(),
        None,
        Some(Side::new(&before.totals.agg, before.totals.locks)),
        Some(Side::new(&after.totals.agg, after.totals.locks)),
    );
    Diff {
        schema: DIFF_SCHEMA,
        before: info(before_file, before),
        after: info(after_file, after),
        by: opts.by,
        sort: opts.sort,
        by_function: opts.by_function,
        totals,
        rows_total,
        rows,
    }
}

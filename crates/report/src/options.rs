//! Report options: view, sort key, top-N, output format.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use lockmeter_format::model::Stats;

/// What one row of the report is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum By {
    /// One row per lock, its top call sites beneath (text).
    #[default]
    Lock,
    /// One row per (lock, call site).
    Site,
    /// One row per thread.
    Thread,
    /// One row per CPU.
    Cpu,
    /// One row per (lock, waiter site, holder site): who waited on whom.
    Pair,
    /// One row per process of a run (its pid, parent, name: its final image's file name).
    Process,
}

/// Order of the rows. Numeric keys sort descending, `name` ascending.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortKey {
    /// Total wait time (the default).
    #[default]
    Wait,
    /// Longest wait.
    WaitMax,
    /// Total hold time.
    Hold,
    /// Longest hold.
    HoldMax,
    /// Acquisitions.
    Acquisitions,
    /// Contended acquisitions.
    Contended,
    /// Contended / acquisitions.
    ContentionRate,
    /// Name (lock name or address, site name, thread name, CPU number).
    Name,
}

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Aligned human-readable tables.
    #[default]
    Text,
    /// One JSON document (see `SCHEMA.md`).
    Json,
    /// CSV with a header row, one row per entry of the view.
    Csv,
    /// One self-contained HTML page (see `html`).
    Html,
}

/// Options of a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReportOptions {
    /// Rows of the report.
    pub by: By,
    /// Order of the rows.
    pub sort: SortKey,
    /// How many rows. `None`: [`DEFAULT_TOP`] in text, everything in JSON and CSV.
    pub top: Option<usize>,
    /// Output format.
    pub format: Format,
    /// Text: print the log2 histograms of wait and hold time of the top locks.
    pub hist: bool,
    /// Text: print the top waiter and holder stacks of the top locks.
    pub stacks: bool,
}

/// Rows shown by the text report when no `top` is given.
pub const DEFAULT_TOP: usize = 20;

/// Rows shown by the short summary `lockmeter run` prints.
pub const SUMMARY_TOP: usize = 10;

/// An option value that did not parse; its message lists the valid values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseOptionError {
    what: &'static str,
    got: String,
    valid: &'static [&'static str],
}

impl fmt::Display for ParseOptionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown {} '{}' (valid: {})", self.what, self.got, self.valid.join(", "))
    }
}

impl std::error::Error for ParseOptionError {}

fn norm(s: &str) -> String {
    s.trim().to_ascii_lowercase().replace('-', "_")
}

impl By {
    /// Valid spellings.
    pub const VALUES: &'static [&'static str] =
        &["lock", "site", "thread", "cpu", "pair", "process"];
    /// The canonical spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            By::Lock => "lock",
            By::Site => "site",
            By::Thread => "thread",
            By::Cpu => "cpu",
            By::Pair => "pair",
            By::Process => "process",
        }
    }
}

impl FromStr for By {
    type Err = ParseOptionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match norm(s).as_str() {
            "lock" | "locks" => By::Lock,
            "site" | "sites" | "caller" | "callers" => By::Site,
            "thread" | "threads" | "task" | "tid" => By::Thread,
            "cpu" | "cpus" => By::Cpu,
            "pair" | "pairs" | "holder" | "holders" | "waiter_holder" => By::Pair,
            "process" | "processes" | "pid" => By::Process,
            _ => return Err(ParseOptionError { what: "view", got: s.into(), valid: By::VALUES }),
        })
    }
}

impl fmt::Display for By {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl SortKey {
    /// Canonical spellings (JSON field names where one exists).
    pub const VALUES: &'static [&'static str] = &[
        "wait_ns_total",
        "wait_ns_max",
        "hold_ns_total",
        "hold_ns_max",
        "acquisitions",
        "contended",
        "contention_rate",
        "name",
    ];

    /// The canonical spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SortKey::Wait => "wait_ns_total",
            SortKey::WaitMax => "wait_ns_max",
            SortKey::Hold => "hold_ns_total",
            SortKey::HoldMax => "hold_ns_max",
            SortKey::Acquisitions => "acquisitions",
            SortKey::Contended => "contended",
            SortKey::ContentionRate => "contention_rate",
            SortKey::Name => "name",
        }
    }

    /// What the key means, for headings ("by total wait").
    pub fn describe(self) -> &'static str {
        match self {
            SortKey::Wait => "total wait",
            SortKey::WaitMax => "longest wait",
            SortKey::Hold => "total hold",
            SortKey::HoldMax => "longest hold",
            SortKey::Acquisitions => "acquisitions",
            SortKey::Contended => "contended acquisitions",
            SortKey::ContentionRate => "contention rate",
            SortKey::Name => "name",
        }
    }

    /// Order of two rows' statistics: `Less` when `x` comes first (larger value). `Equal` for
    /// [`SortKey::Name`], which the caller orders by its own names.
    pub fn compare(self, x: &Stats, y: &Stats) -> Ordering {
        match self {
            SortKey::Wait => y.wait_ns_total.cmp(&x.wait_ns_total),
            SortKey::WaitMax => y.wait_ns_max.cmp(&x.wait_ns_max),
            SortKey::Hold => y.hold_ns_total.cmp(&x.hold_ns_total),
            SortKey::HoldMax => y.hold_ns_max.cmp(&x.hold_ns_max),
            SortKey::Acquisitions => y.acquisitions.cmp(&x.acquisitions),
            SortKey::Contended => y.contended.cmp(&x.contended),
            SortKey::ContentionRate => {
                // x.c / x.a vs y.c / y.a without rounding; no acquisitions ranks as 0.
                let l = if x.acquisitions == 0 { 0 } else { x.contended as u128 };
                let r = if y.acquisitions == 0 { 0 } else { y.contended as u128 };
                (r * x.acquisitions.max(1) as u128).cmp(&(l * y.acquisitions.max(1) as u128))
            }
            SortKey::Name => Ordering::Equal,
        }
    }
}

impl FromStr for SortKey {
    type Err = ParseOptionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match norm(s).as_str() {
            "wait" | "wait_total" | "wait_ns_total" | "wait_ns" => SortKey::Wait,
            "wait_max" | "wait_ns_max" | "max_wait" => SortKey::WaitMax,
            "hold" | "hold_total" | "hold_ns_total" | "hold_ns" => SortKey::Hold,
            "hold_max" | "hold_ns_max" | "max_hold" => SortKey::HoldMax,
            "acquisitions" | "acquired" | "acq" | "count" => SortKey::Acquisitions,
            "contended" | "contentions" => SortKey::Contended,
            "contention_rate" | "contention" | "rate" | "con%" | "con" => SortKey::ContentionRate,
            "name" | "address" => SortKey::Name,
            _ => {
                return Err(ParseOptionError {
                    what: "sort key",
                    got: s.into(),
                    valid: SortKey::VALUES,
                });
            }
        })
    }
}

impl fmt::Display for SortKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Format {
    /// Valid spellings.
    pub const VALUES: &'static [&'static str] = &["text", "json", "csv", "html"];
    /// The canonical spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Json => "json",
            Format::Csv => "csv",
            Format::Html => "html",
        }
    }
}

impl FromStr for Format {
    type Err = ParseOptionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match norm(s).as_str() {
            "text" | "txt" => Format::Text,
            "json" => Format::Json,
            "csv" => Format::Csv,
            "html" | "htm" => Format::Html,
            _ => {
                return Err(ParseOptionError {
                    what: "format",
                    got: s.into(),
                    valid: Format::VALUES,
                });
            }
        })
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_round_trips_and_errors() {
        for v in SortKey::VALUES {
            assert_eq!(v.parse::<SortKey>().unwrap().as_str(), *v);
        }
        for v in By::VALUES {
            assert_eq!(v.parse::<By>().unwrap().as_str(), *v);
        }
        for v in Format::VALUES {
            assert_eq!(v.parse::<Format>().unwrap().as_str(), *v);
        }
        assert_eq!("wait-max".parse::<SortKey>(), Ok(SortKey::WaitMax));
        assert_eq!("Wait".parse::<SortKey>(), Ok(SortKey::Wait));
        let e = "bogus".parse::<SortKey>().unwrap_err().to_string();
        assert!(e.contains("'bogus'") && e.contains("wait_ns_total") && e.contains("name"), "{e}");
        assert!(
            "x".parse::<By>().unwrap_err().to_string().contains("lock, site, thread, cpu, pair")
        );
    }
}

//! The comparison as a text table (and as JSON).

use std::io::{self, Write};

use std::cmp::Ordering;

use super::{Change, Diff, DiffBy, DiffRow, ProfileInfo, Side, Status};
use crate::export::fmt_ns_short;

/// `+12`, `-3`, `0`.
fn signed(v: i64) -> String {
    if v > 0 { format!("+{v}") } else { v.to_string() }
}

/// `+1.50 ms`, `-446 ms`, `0`.
fn signed_ns(v: i64) -> String {
    let m = fmt_ns_short(v.unsigned_abs() as f64);
    match v.cmp(&0) {
        Ordering::Greater => format!("+{m}"),
        Ordering::Less => format!("-{m}"),
        Ordering::Equal => "0".into(),
    }
}

/// `(+12.5%)`, or nothing when there is no base.
fn pct(p: Option<f64>) -> String {
    match p {
        Some(p) if p.abs() < 0.05 => " (0%)".into(),
        Some(p) => format!(" ({p:+.1}%)"),
        None => String::new(),
    }
}

/// A contention rate: `12.5%`, `0.02%` (two decimals below 0.1%), `<0.01%`, `0%`.
fn rate(p: f64) -> String {
    if p == 0.0 {
        "0%".into()
    } else if p < 0.01 {
        "<0.01%".into()
    } else if p < 0.1 {
        format!("{p:.2}%")
    } else {
        format!("{p:.1}%")
    }
}

/// A change of contention rate in percentage points: `+1.3 pp`, `-0.02 pp`, `0 pp`.
fn points(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 {
        "0 pp".into()
    } else if a < 0.01 {
        format!("{}<0.01 pp", if v < 0.0 { '-' } else { '+' })
    } else if a < 0.1 {
        format!("{v:+.2} pp")
    } else {
        format!("{v:+.1} pp")
    }
}

/// A change cell: `new` / `gone` for rows in one profile only.
fn change_cell(r: &DiffRow, s: impl FnOnce(&Change) -> String) -> String {
    match r.status {
        Status::New => "new".into(),
        Status::Gone => "gone".into(),
        Status::Both => s(&r.change),
    }
}

fn side_cell(s: Option<&Side>, f: impl FnOnce(&Side) -> String) -> String {
    s.map_or_else(|| "-".into(), f)
}

/// Text cells of a row: acquisitions, contention rate, wait, hold (before, after, change each).
fn cells(r: &DiffRow) -> Vec<String> {
    let (b, a) = (r.before.as_ref(), r.after.as_ref());
    vec![
        side_cell(b, |s| s.acquisitions.to_string()),
        side_cell(a, |s| s.acquisitions.to_string()),
        change_cell(r, |c| format!("{}{}", signed(c.acquisitions), pct(c.acquisitions_pct))),
        side_cell(b, |s| rate(s.contention_pct)),
        side_cell(a, |s| rate(s.contention_pct)),
        change_cell(r, |c| points(c.contention_pct_points)),
        side_cell(b, |s| fmt_ns_short(s.wait_ns_total as f64)),
        side_cell(a, |s| fmt_ns_short(s.wait_ns_total as f64)),
        change_cell(r, |c| format!("{}{}", signed_ns(c.wait_ns), pct(c.wait_pct))),
        side_cell(b, |s| fmt_ns_short(s.hold_ns_total as f64)),
        side_cell(a, |s| fmt_ns_short(s.hold_ns_total as f64)),
        change_cell(r, |c| format!("{}{}", signed_ns(c.hold_ns), pct(c.hold_pct))),
    ]
}

/// Column groups of the text table.
const GROUPS: [&str; 4] = ["ACQUISITIONS", "CONTENTION RATE", "WAIT TOTAL", "HOLD TOTAL"];

/// Writes rows under two heading lines: the groups, then BEFORE AFTER CHANGE under each, then
/// the name columns (left-aligned).
fn write_table(
    rows: &[(Vec<String>, Vec<String>)],
    names: &[&str],
    w: &mut dyn Write,
) -> io::Result<()> {
    let sub = ["BEFORE", "AFTER", "CHANGE"];
    let ncols = GROUPS.len() * 3;
    let mut widths: Vec<usize> = (0..ncols).map(|i| sub[i % 3].len()).collect();
    let mut name_w: Vec<usize> = names.iter().map(|n| n.len()).collect();
    for (c, n) in rows {
        for (wd, s) in widths.iter_mut().zip(c) {
            *wd = (*wd).max(s.chars().count());
        }
        for (wd, s) in name_w.iter_mut().zip(n) {
            *wd = (*wd).max(s.chars().count());
        }
    }
    // A group is as wide as its three columns and the two gaps between them, at least its title.
    for (g, title) in GROUPS.iter().enumerate() {
        let span: usize = widths[g * 3..g * 3 + 3].iter().sum::<usize>() + 4;
        if title.len() > span {
            widths[g * 3] += title.len() - span;
        }
    }
    let mut line = String::from(" ");
    for (g, title) in GROUPS.iter().enumerate() {
        if g > 0 {
            line.push_str("   ");
        }
        let span: usize = widths[g * 3..g * 3 + 3].iter().sum::<usize>() + 4;
        line.push_str(&format!("{title:^span$}"));
    }
    writeln!(w, "{}", line.trim_end())?;
    let mut heads: Vec<String> = (0..ncols).map(|i| sub[i % 3].to_owned()).collect();
    heads.extend(names.iter().map(|s| (*s).to_owned()));
    let head_names: Vec<String> = heads.split_off(ncols);
    let all = std::iter::once((heads, head_names)).chain(rows.iter().cloned());
    for (c, n) in all {
        let mut line = String::from(" ");
        for (i, (s, wd)) in c.iter().zip(&widths).enumerate() {
            if i > 0 {
                line.push_str(if i % 3 == 0 { "   " } else { "  " });
            }
            line.push_str(&format!("{s:>wd$}"));
        }
        for (s, wd) in n.iter().zip(&name_w) {
            line.push_str("   ");
            line.push_str(&format!("{s:<wd$}"));
        }
        writeln!(w, "{}", line.trim_end())?;
    }
    Ok(())
}

/// One line describing a profile.
fn describe(label: &str, p: &ProfileInfo, s: Option<&Side>) -> String {
    let mut t = format!(
        "{label} {}: {} (pid {}), {}",
        p.file,
        p.cmdline.join(" "),
        p.pid,
        fmt_ns_short(p.duration_ns as f64)
    );
    if let Some(s) = s {
        t.push_str(&format!(
            "; {} acquisitions, {} contended, wait {}, hold {}",
            s.acquisitions,
            s.contended,
            fmt_ns_short(s.wait_ns_total as f64),
            fmt_ns_short(s.hold_ns_total as f64)
        ));
    }
    t
}

/// Writes the comparison as an aligned text table.
pub fn text(d: &Diff, w: &mut dyn Write) -> io::Result<()> {
    writeln!(w, "{}", describe("before", &d.before, d.totals.before.as_ref()))?;
    writeln!(w, "{}", describe("after ", &d.after, d.totals.after.as_ref()))?;
    writeln!(w)?;
    let what = match (d.by, d.by_function) {
        (DiffBy::Lock, _) => "locks",
        (DiffBy::Site, false) => "call sites",
        (DiffBy::Site, true) => "call sites (by function)",
    };
    let shown = if d.rows.len() < d.rows_total {
        format!("{} of {}", d.rows.len(), d.rows_total)
    } else {
        d.rows_total.to_string()
    };
    writeln!(w, "{what} by change in {} ({shown}):", d.sort.describe())?;
    let names: &[&str] = match d.by {
        DiffBy::Lock => &["NAME"],
        DiffBy::Site => &["LOCK", "SITE"],
    };
    let mut rows: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    let mut total_name = vec![d.totals.lock.clone()];
    if d.by == DiffBy::Site {
        total_name.push(String::new());
    }
    rows.push((cells(&d.totals), total_name));
    for r in &d.rows {
        let mut n = vec![r.lock.clone()];
        if let Some(s) = &r.site {
            n.push(s.clone());
        }
        rows.push((cells(r), n));
    }
    write_table(&rows, names, w)
}

/// Writes the comparison as JSON (schema [`DIFF_SCHEMA`](super::DIFF_SCHEMA)).
pub fn json(d: &Diff, w: &mut dyn Write) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, d)?;
    writeln!(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_points() {
        assert_eq!(rate(0.0), "0%");
        assert_eq!(rate(0.004), "<0.01%");
        assert_eq!(rate(0.0312), "0.03%");
        assert_eq!(rate(45.51), "45.5%");
        assert_eq!(points(0.0), "0 pp");
        assert_eq!(points(-0.004), "-<0.01 pp");
        assert_eq!(points(0.021), "+0.02 pp");
        assert_eq!(points(-7.114), "-7.1 pp");
        assert_eq!(signed(-3), "-3");
        assert_eq!(signed(3), "+3");
        assert_eq!(signed_ns(-446_000_000), "-446 ms");
        assert_eq!(signed_ns(0), "0");
        assert_eq!(pct(Some(-99.109)), " (-99.1%)");
        assert_eq!(pct(Some(0.01)), " (0%)");
        assert_eq!(pct(None), "");
    }
}

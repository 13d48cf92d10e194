//! Human units and aligned tables for the text report.

/// A duration in ns with a human unit and about three significant digits: `0`, `850 ns`,
/// `12.3 µs`, `1.50 ms`, `2.00 s`.
pub fn fmt_ns(ns: u64) -> String {
    if ns == 0 {
        return "0".into();
    }
    if ns < 1_000 {
        return format!("{ns} ns");
    }
    let (v, unit) = if ns < 1_000_000 {
        (ns as f64 / 1e3, "µs")
    } else if ns < 1_000_000_000 {
        (ns as f64 / 1e6, "ms")
    } else {
        (ns as f64 / 1e9, "s")
    };
    format!("{} {unit}", sig3(v))
}

/// `v` (≥ 1) with about three significant digits.
fn sig3(v: f64) -> String {
    if v < 9.995 {
        format!("{v:.2}")
    } else if v < 99.95 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// An optional duration; `-` for none.
pub fn fmt_opt_ns(ns: Option<u64>) -> String {
    ns.map_or_else(|| "-".into(), fmt_ns)
}

/// A byte count: `512 B`, `4.00 KiB`, `12.5 MiB`, `1.20 GiB`.
pub fn fmt_bytes(b: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64 / 1024.0;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{} {}", sig3(v), UNITS[u])
}

/// A percentage with one decimal: `12.3%`.
pub fn fmt_pct(p: f64) -> String {
    format!("{p:.1}%")
}

/// Column alignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Numbers.
    Right,
    /// Names.
    Left,
}

/// A table whose columns are as wide as their widest cell (counted in chars, so `µ` is one).
#[derive(Debug)]
pub struct Table {
    cols: Vec<(&'static str, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these headings.
    pub fn new(cols: &[(&'static str, Align)]) -> Self {
        Table { cols: cols.to_vec(), rows: Vec::new() }
    }

    /// Adds a row (missing cells are blank).
    pub fn row(&mut self, mut cells: Vec<String>) {
        cells.resize(self.cols.len(), String::new());
        self.rows.push(cells);
    }

    /// Writes the table, each line prefixed by `indent`, no trailing blanks.
    pub fn write(&self, indent: &str, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        let mut widths: Vec<usize> = self.cols.iter().map(|(h, _)| h.chars().count()).collect();
        for r in &self.rows {
            for (wd, c) in widths.iter_mut().zip(r) {
                *wd = (*wd).max(c.chars().count());
            }
        }
        let heads: Vec<String> = self.cols.iter().map(|(h, _)| (*h).to_owned()).collect();
        for r in std::iter::once(&heads).chain(&self.rows) {
            let mut line = String::from(indent);
            for (i, ((c, (_, align)), wd)) in r.iter().zip(&self.cols).zip(&widths).enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                match align {
                    Align::Right => line.push_str(&format!("{c:>wd$}")),
                    Align::Left => line.push_str(&format!("{c:<wd$}")),
                }
            }
            writeln!(w, "{}", line.trim_end())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(fmt_ns(0), "0");
        assert_eq!(fmt_ns(999), "999 ns");
        assert_eq!(fmt_ns(1_000), "1.00 µs");
        assert_eq!(fmt_ns(12_345), "12.3 µs");
        assert_eq!(fmt_ns(123_456), "123 µs");
        assert_eq!(fmt_ns(1_500_000), "1.50 ms");
        assert_eq!(fmt_ns(2_000_000_000), "2.00 s");
        assert_eq!(fmt_ns(3_600_000_000_000), "3600 s");
        assert_eq!(fmt_bytes(100), "100 B");
        assert_eq!(fmt_bytes(4096), "4.00 KiB");
        assert_eq!(fmt_bytes(3 << 20), "3.00 MiB");
        assert_eq!(fmt_pct(12.345), "12.3%");
    }

    #[test]
    fn table_aligns_by_chars() {
        let mut t = Table::new(&[("A", Align::Right), ("NAME", Align::Left)]);
        t.row(vec!["12.3 µs".into(), "x".into()]);
        t.row(vec!["1 ns".into(), "longer".into()]);
        let mut out = Vec::new();
        t.write(" ", &mut out).unwrap();
        let s = String::from_utf8(out).unwrap();
        assert_eq!(s, "       A  NAME\n 12.3 µs  x\n    1 ns  longer\n");
    }
}

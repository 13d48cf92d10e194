//! Statistics over runs: median, mean, spread, Jain's fairness index, and the noise warning.

use serde::Serialize;

/// A summary of one quantity over R runs.
#[derive(Debug, Clone, Serialize, Default)]
pub struct Summary {
    /// Median.
    pub median: f64,
    /// Mean.
    pub mean: f64,
    /// Sample standard deviation (0 for one run).
    pub stddev: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Runs.
    pub n: usize,
}

impl Summary {
    /// Summarises `v` (empty: all zero).
    pub fn of(v: &[f64]) -> Summary {
        if v.is_empty() {
            return Summary::default();
        }
        let mut s = v.to_vec();
        s.sort_by(|a, b| a.total_cmp(b));
        let n = s.len();
        let median = if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 };
        let mean = s.iter().sum::<f64>() / n as f64;
        let var = if n > 1 {
            s.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        Summary { median, mean, stddev: var.sqrt(), min: s[0], max: s[n - 1], n }
    }

    /// Spread (max - min) relative to the median.
    pub fn rel_spread(&self) -> f64 {
        if self.median.abs() < f64::EPSILON {
            0.0
        } else {
            (self.max - self.min) / self.median.abs()
        }
    }

    /// Whether the runs disagree: spread above 20% of the median (LiTL's lock-sensitivity
    /// threshold is a 10% relative std-dev; spread is the stricter, simpler test for few runs).
    pub fn noisy(&self) -> bool {
        self.n > 1 && self.rel_spread() > 0.20
    }
}

/// Jain's fairness index (Σx)² / (n·Σx²): 1 = perfectly even, 1/n = one thread got everything.
pub fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    if s2 == 0.0 { 1.0 } else { s * s / (x.len() as f64 * s2) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_and_jain() {
        let s = Summary::of(&[3.0, 1.0, 2.0]);
        assert_eq!(s.median, 2.0);
        assert_eq!(s.mean, 2.0);
        assert_eq!(s.min, 1.0);
        assert!((s.stddev - 1.0).abs() < 1e-12);
        assert!(s.noisy());
        assert!(!Summary::of(&[10.0, 10.5]).noisy());
        assert_eq!(Summary::of(&[1.0, 2.0, 3.0, 4.0]).median, 2.5);
        assert!((jain(&[1.0, 1.0, 1.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
    }
}

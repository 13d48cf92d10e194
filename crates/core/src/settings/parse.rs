//! The settings' values from their text: numbers, sizes, hold timing, durations, the clock.
//! No allocation but [`show_size`]'s: the preload calls these in its constructor.

/// Parses a decimal `u64` (no sign, no spaces); `None` when empty, not a number or too large.
pub fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &c in b {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((c - b'0') as u64)?;
    }
    Some(v)
}

/// Parses a size: a decimal number of bytes, or of KiB, MiB, GiB or TiB with a `K`, `M`, `G` or
/// `T` suffix (either case). `None` when malformed or too large.
pub fn parse_size(b: &[u8]) -> Option<u64> {
    let (digits, shift) = match b.last()? {
        b'k' | b'K' => (&b[..b.len() - 1], 10),
        b'm' | b'M' => (&b[..b.len() - 1], 20),
        b'g' | b'G' => (&b[..b.len() - 1], 30),
        b't' | b'T' => (&b[..b.len() - 1], 40),
        _ => (b, 0),
    };
    parse_u64(digits)?.checked_mul(1u64 << shift)
}

/// A size as the shortest exact text [`parse_size`] reads back (`64M`, `1500`).
pub fn show_size(n: u64) -> String {
    for (shift, unit) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if n != 0 && n.is_multiple_of(1u64 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
}

/// Hold timing from its text: `on` → 0 (time every hold), `off` → 1 (none), `sample:N` → N
/// (one hold in N, N ≥ 2, at most 2^30). `None` for anything else.
pub fn parse_hold(b: &[u8]) -> Option<u32> {
    match b {
        b"on" => Some(0),
        b"off" => Some(1),
        _ => {
            let n = parse_u64(b.strip_prefix(b"sample:")?)?;
            (2..=1 << 30).contains(&n).then_some(n as u32)
        }
    }
}

/// A duration in milliseconds from its text: digits and a unit, `ms`, `s`, `m` or `h` (digits
/// alone are seconds). `None` for anything else or more than 2^40 ms.
pub fn parse_duration_ms(b: &[u8]) -> Option<u64> {
    let digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    let n = parse_u64(b.get(..digits)?)?;
    let mult = match b.get(digits..)? {
        b"ms" => 1,
        b"" | b"s" => 1000,
        b"m" => 60_000,
        b"h" => 3_600_000,
        _ => return None,
    };
    n.checked_mul(mult).filter(|&v| v <= 1 << 40)
}

/// The clock from its text: `tsc` → `Some(true)`, `monotonic` → `Some(false)`.
pub fn parse_clock(b: &[u8]) -> Option<bool> {
    match b {
        b"tsc" => Some(true),
        b"monotonic" => Some(false),
        _ => None,
    }
}

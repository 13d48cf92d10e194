//! The borrowed inputs of the header and map records: [`HeaderRef`] and [`MapRef`].

crate::model::header_type! {
    /// The header, borrowed: what the preload has at hand, nothing owned.
    #[derive(Debug, Clone, Copy, Default)]
    HeaderRef<'a>,
    text: &'a str,
    /// The command line exactly as `/proc/self/cmdline` gives it: each argument followed by a NUL.
    cmdline: &'a [u8],
    /// Path of the executable (bytes of `readlink /proc/self/exe`).
    exe: &'a [u8],
}

/// One memory-map line, borrowed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MapRef<'a> {
    /// Start address.
    pub start: u64,
    /// End address (exclusive).
    pub end: u64,
    /// File offset of `start`.
    pub offset: u64,
    /// Permissions, e.g. `r-xp`.
    pub perms: &'a [u8],
    /// Path, `[heap]`, ..., or empty.
    pub path: &'a [u8],
}

impl<'a> MapRef<'a> {
    /// Parses one line of `/proc/PID/maps`
    /// (`start-end perms offset dev inode [path]`, numbers in hex), without allocating.
    /// A trailing newline is ignored. `None` if the line is malformed.
    pub fn parse_line(line: &'a [u8]) -> Option<MapRef<'a>> {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let mut rest = line;
        let mut field = || -> Option<&'a [u8]> {
            let start = rest.iter().position(|&b| b != b' ')?;
            let r = rest.get(start..)?;
            let end = r.iter().position(|&b| b == b' ').unwrap_or(r.len());
            let (f, tail) = r.split_at_checked(end)?;
            rest = tail;
            Some(f)
        };
        let range = field()?;
        let perms = field()?;
        let offset = field()?;
        let _dev = field()?;
        let _inode = field()?;
        let dash = range.iter().position(|&b| b == b'-')?;
        let (lo, hi) = range.split_at_checked(dash)?;
        let hi = hi.get(1..)?;
        let path_start = rest.iter().position(|&b| b != b' ').unwrap_or(rest.len());
        Some(MapRef {
            start: parse_hex(lo)?,
            end: parse_hex(hi)?,
            offset: parse_hex(offset)?,
            perms,
            path: rest.get(path_start..).unwrap_or_default(),
        })
    }
}

fn parse_hex(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        let d = match b {
            b'0'..=b'9' => b.wrapping_sub(b'0'),
            b'a'..=b'f' => b.wrapping_sub(b'a').wrapping_add(10),
            b'A'..=b'F' => b.wrapping_sub(b'A').wrapping_add(10),
            _ => return None,
        };
        v = v.checked_mul(16)?.checked_add(u64::from(d))?;
    }
    Some(v)
}

//! `/proc/PID/stat`: one line `pid (comm) state ppid ...`, whose command name may hold spaces
//! and parentheses, so fields are counted after its last `)`. The one parser of it, for the
//! CLI's guardians, the kernel collector and the preload (as bytes).

use core::str::FromStr;

/// Field `n` of a `/proc/PID/stat` line, numbered as proc(5) numbers them (4: the parent pid,
/// 22: the start time in clock ticks); `None` for fields 1 and 2 (pid, name) and past the end.
pub fn field(stat: &str, n: usize) -> Option<&str> {
    core::str::from_utf8(field_bytes(stat.as_bytes(), n)?).ok()
}

/// [`field`] of a line read as bytes (the preload reads `/proc` without allocating, and a command
/// name need not be UTF-8).
pub fn field_bytes(stat: &[u8], n: usize) -> Option<&[u8]> {
    let close = stat.iter().rposition(|&c| c == b')')?;
    let rest = stat.get(close + 1..)?;
    rest.split(|c| c.is_ascii_whitespace()).filter(|f| !f.is_empty()).nth(n.checked_sub(3)?)
}

/// Field `n` (see [`field`]) of `DIR/stat`, parsed; `None` when the file cannot be read or the
/// field does not parse. `dir` is a process's directory (`/proc/PID`, `/proc/self`).
pub fn read_field<T: FromStr>(dir: &str, n: usize) -> Option<T> {
    let stat = std::fs::read_to_string(format!("{dir}/stat")).ok()?;
    field(&stat, n)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_counted_after_the_last_parenthesis() {
        let stat =
            "4242 (a) b (c) d) S 17 4242 4242 0 -1 4194560 9 0 0 0 0 0 0 0 20 0 1 0 123456 0";
        assert_eq!(field(stat, 3), Some("S"));
        assert_eq!(field(stat, 4), Some("17"));
        assert_eq!(field(stat, 22), Some("123456"));
        assert_eq!(field(stat, 2), None);
        assert_eq!(field(stat, 99), None);
        assert_eq!(field("no name here", 3), None);
        let raw = b"7 (\xff) Z 1 2\n";
        assert_eq!(field_bytes(raw, 3), Some(&b"Z"[..]));
        assert_eq!(field_bytes(raw, 5), Some(&b"2"[..]), "the line's newline is not part of it");
        assert_eq!(field_bytes(raw, 6), None);
    }

    #[test]
    fn this_process_has_a_parent_and_a_start_time() {
        let ppid: u32 = read_field("/proc/self", 4).unwrap();
        // SAFETY: getppid has no preconditions.
        assert_eq!(ppid, unsafe { libc::getppid() } as u32);
        assert!(read_field::<u64>("/proc/self", 22).is_some());
        assert_eq!(read_field::<u32>("/proc/self", 2), None, "the name is not a number field");
        assert_eq!(read_field::<u32>("/nonexistent", 4), None);
    }
}

//! Tests of the settings table and of its values' parsing.

use super::*;

#[test]
fn names_are_unique_and_consistent() {
    for (i, a) in SETTINGS.iter().enumerate() {
        assert_eq!(a.env_c.to_bytes(), a.env.as_bytes());
        assert!(a.env.starts_with("LOCKMETER_"), "{}", a.env);
        for b in &SETTINGS[i + 1..] {
            assert_ne!(a.env, b.env);
            if let (Cli::Flag(x) | Cli::Own(x), Cli::Flag(y) | Cli::Own(y)) = (a.cli, b.cli) {
                assert_ne!(x, y);
            }
        }
        if let Value::Count { default, min, max } | Value::Size { default, min, max } = a.value {
            assert!(min <= default && default <= max, "{}", a.env);
        }
    }
}

#[test]
fn counts_default_and_clamp() {
    assert_eq!(FRAMES.count(None), 16);
    assert_eq!(FRAMES.count(Some(b"4")), 4);
    assert_eq!(FRAMES.count(Some(b"0")), 0);
    assert_eq!(FRAMES.count(Some(b"1000")), crate::stacks::MAX_FRAMES as u64);
    assert_eq!(RECORDS.count(Some(b"1")), 16);
    assert_eq!(RECORDS.count(Some(b"x")), 256);
    assert_eq!(RECORDS.count(Some(b"")), 256);
    assert_eq!(RECORDS.count(Some(b"99999999999999999999999")), 256);
}

#[test]
fn sizes_parse_clamp_and_show() {
    assert_eq!(parse_size(b"4096"), Some(4096));
    assert_eq!(parse_size(b"64k"), Some(64 << 10));
    assert_eq!(parse_size(b"512M"), Some(512 << 20));
    assert_eq!(parse_size(b"2G"), Some(2 << 30));
    assert_eq!(parse_size(b"1T"), Some(1 << 40));
    for bad in [&b""[..], b"M", b"12MB", b"-1", b"1.5G", b"99999999999T"] {
        assert_eq!(parse_size(bad), None, "{:?}", std::str::from_utf8(bad));
    }
    assert_eq!(MAX_MEMORY.count(None), 1 << 30);
    assert_eq!(MAX_MEMORY.count(Some(b"64M")), 64 << 20);
    assert_eq!(MAX_MEMORY.count(Some(b"1")), 1 << 20, "clamped up");
    assert_eq!(MAX_MEMORY.count(Some(b"lots")), 1 << 30);
    assert!(MAX_MEMORY.validate("256M").is_ok());
    let e = MAX_MEMORY.validate("1K").unwrap_err();
    assert!(e.contains("--max-memory takes a size from 1M to 16T"), "{e}");
    assert!(MAX_MEMORY.validate("much").unwrap_err().contains("such as 512M"));
    for n in [1500u64, 1 << 20, 3 << 30, 1 << 44] {
        assert_eq!(parse_size(show_size(n).as_bytes()), Some(n));
    }
    assert_eq!(show_size(64 << 20), "64M");
}

#[test]
fn hold_and_clock() {
    assert_eq!(parse_hold(b"on"), Some(0));
    assert_eq!(parse_hold(b"off"), Some(1));
    assert_eq!(parse_hold(b"sample:16"), Some(16));
    assert_eq!(parse_hold(b"sample:1"), None);
    assert_eq!(parse_hold(b"sample:"), None);
    assert_eq!(parse_hold(b"16"), None);
    assert_eq!(parse_clock(b"tsc"), Some(true));
    assert_eq!(parse_clock(b"monotonic"), Some(false));
    assert_eq!(parse_clock(b"TSC"), None);
}

#[test]
fn durations() {
    assert_eq!(parse_duration_ms(b"500ms"), Some(500));
    assert_eq!(parse_duration_ms(b"2"), Some(2000));
    assert_eq!(parse_duration_ms(b"2s"), Some(2000));
    assert_eq!(parse_duration_ms(b"3m"), Some(180_000));
    assert_eq!(parse_duration_ms(b"1h"), Some(3_600_000));
    assert_eq!(parse_duration_ms(b"ms"), None);
    assert_eq!(parse_duration_ms(b"1.5s"), None);
    assert_eq!(parse_duration_ms(b"10d"), None);
    assert_eq!(parse_duration_ms(b""), None);
    let e = DELAY.validate("soon").unwrap_err();
    assert!(e.contains("--delay takes a duration"), "{e}");
}

#[test]
fn validate_says_what_is_allowed() {
    assert!(FRAMES.validate("8").is_ok());
    let e = FRAMES.validate("65").unwrap_err();
    assert!(e.contains("--frames takes a number from 0 to 64"), "{e}");
    assert!(RECORDS.validate("ten").unwrap_err().contains("takes a number"));
    assert!(HOLD.validate("sample:4").is_ok());
    assert!(HOLD.validate("sometimes").is_err());
    assert!(CLOCK.validate("monotonic").is_ok());
    assert!(CLOCK.validate("hpet").is_err());
}

#[test]
fn markdown_has_every_setting() {
    let t = markdown_table();
    for s in SETTINGS {
        assert!(t.contains(s.env), "{}", s.env);
    }
    assert_eq!(t.lines().count(), SETTINGS.len() + 2);
}

//! The binary search table of an `.eh_frame_hdr` (one entry per FDE, sorted by the start
//! address of the code it describes): which function a code address is in. Pure: the preload's
//! `funcs.rs` keeps the loaded objects' tables and reads their entries.

/// The size of a value of DWARF pointer encoding `enc` (`None`: one the table cannot use).
fn size_of_enc(enc: u8) -> Option<usize> {
    match enc & 0x0f {
        0x03 | 0x0b => Some(4),
        0x04 | 0x0c => Some(8),
        _ => None,
    }
}

/// The table of `hdr`, an `.eh_frame_hdr`: (offset of the table in it, entries). Only the layout
/// every linker writes is used: a `datarel sdata4` table, a `udata4` count; the whole table must
/// lie inside `hdr`.
pub fn table_of(hdr: &[u8]) -> Option<(usize, u64)> {
    let (&version, &ptr_enc, &count_enc, &table_enc) =
        (hdr.first()?, hdr.get(1)?, hdr.get(2)?, hdr.get(3)?);
    if version != 1 || count_enc != 0x03 || table_enc != 0x3b {
        return None;
    }
    let at = 4 + size_of_enc(ptr_enc)?;
    let count = u32::from_le_bytes(hdr.get(at..at + 4)?.try_into().ok()?) as u64;
    let table = at + 4;
    // The whole table must lie inside the header.
    (hdr.len() as u64 >= table as u64 + count * 8).then_some((table, count))
}

/// The start of the function `pc` is in: the last of the `count` entries (`start(i)`, sorted)
/// starting at or before `pc`; `None` when `pc` is before the first.
pub fn last_at_or_before(count: u64, start: impl Fn(u64) -> u64, pc: u64) -> Option<u64> {
    let (mut lo, mut hi) = (0u64, count);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if start(mid) <= pc { lo = mid + 1 } else { hi = mid }
    }
    lo.checked_sub(1).map(start)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `.eh_frame_hdr` with pointer encoding `ptr_enc` and `entries` (start, fde) pairs.
    fn hdr(ptr_enc: u8, entries: &[(i32, i32)]) -> Vec<u8> {
        let mut h = vec![1, ptr_enc, 0x03, 0x3b];
        h.extend(std::iter::repeat_n(0, size_of_enc(ptr_enc).unwrap()));
        h.extend((entries.len() as u32).to_le_bytes());
        for (s, f) in entries {
            h.extend(s.to_le_bytes());
            h.extend(f.to_le_bytes());
        }
        h
    }

    #[test]
    fn the_table_is_found_after_the_pointer_and_the_count() {
        assert_eq!(table_of(&hdr(0x1b, &[(16, 0), (32, 0)])), Some((12, 2)));
        assert_eq!(table_of(&hdr(0x0c, &[(16, 0)])), Some((16, 1)));
        assert_eq!(table_of(&hdr(0x1b, &[])), Some((12, 0)));
    }

    #[test]
    fn other_layouts_and_short_headers_are_refused() {
        let good = hdr(0x1b, &[(16, 0), (32, 0)]);
        let mut v2 = good.clone();
        v2[0] = 2;
        let mut udata8 = good.clone();
        udata8[2] = 0x04;
        let mut absptr = good.clone();
        absptr[3] = 0x03;
        let mut omit = good.clone();
        omit[1] = 0xff;
        for bad in [v2, udata8, absptr, omit] {
            assert_eq!(table_of(&bad), None);
        }
        for n in 0..good.len() {
            assert_eq!(table_of(&good[..n]), None, "cut to {n} bytes");
        }
    }

    #[test]
    fn an_address_is_in_the_last_function_starting_at_or_before_it() {
        let starts = [0x100u64, 0x180, 0x200, 0x400];
        let f = |pc| last_at_or_before(starts.len() as u64, |i| starts[i as usize], pc);
        assert_eq!(f(0xff), None);
        assert_eq!(f(0x100), Some(0x100));
        assert_eq!(f(0x17f), Some(0x100));
        assert_eq!(f(0x180), Some(0x180));
        assert_eq!(f(0x3ff), Some(0x200));
        assert_eq!(f(u64::MAX), Some(0x400));
        assert_eq!(last_at_or_before(0, |_| unreachable!(), 5), None);
    }
}

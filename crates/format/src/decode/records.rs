//! The decoders of the records with more than a few fields: header, map, thread, lock, stack,
//! longest wait, event and statistics.

use crate::layout;
use crate::model::{
    ClockInfo, Event, EventKind, Header, LockInfo, LockKind, MapEntry, Mode, Record, Stack, Stats,
    ThreadInfo,
};

use super::{Payload, R};

pub(super) fn decode_header(c: &mut Payload<'_>) -> R<Header> {
    let pid = c.u32()?;
    let ppid = c.u32()?;
    let image_seq = c.u32()?;
    let cpu_count = c.u32()?;
    let start_unix_ns = c.u64()?;
    let end_unix_ns = c.u64()?;
    let duration_ns = c.u64()?;
    let hz = c.u64()?;
    let hz_run = c.u64()?;
    let source = c.u8()?;
    let ht = c.u8()?;
    let er = c.u8()?;
    let end_flags = c.u8()?;
    let sample = c.u32()?;
    let signal = c.i32()?;
    let collector_len = c.u32()?;
    let version_len = c.u32()?;
    let exe_len = c.u32()?;
    let cmdline_len = c.u32()?;
    let hold_timing =
        layout::hold_timing_from_code(ht, sample).ok_or_else(|| c.bad_code("hold timing", ht))?;
    let end_reason = layout::end_reason_from_code(er, end_flags, signal)
        .ok_or_else(|| c.bad_code("end reason", er))?;
    let collector = c.strict(collector_len, "collector")?;
    let lockmeter_version = c.strict(version_len, "lockmeter version")?;
    let exe = c.lossy(exe_len, "exe")?;
    let raw = c.bytes(cmdline_len, "cmdline")?;
    let raw = raw.strip_suffix(&[0]).unwrap_or(raw);
    let cmdline = if cmdline_len == 0 {
        Vec::new()
    } else {
        raw.split(|&b| b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect()
    };
    Ok(Header {
        collector,
        lockmeter_version,
        pid,
        ppid,
        image_seq,
        cmdline,
        exe,
        start_unix_ns,
        end_unix_ns,
        duration_ns,
        clock: ClockInfo { source, hz, hz_run },
        cpu_count,
        hold_timing,
        end_reason,
    })
}

pub(super) fn decode_map(c: &mut Payload<'_>) -> R<MapEntry> {
    let start = c.u64()?;
    let end = c.u64()?;
    let offset = c.u64()?;
    let perms_len = c.u32()?;
    let path_len = c.u32()?;
    Ok(MapEntry {
        start,
        end,
        offset,
        perms: c.lossy(perms_len, "perms")?,
        path: c.lossy(path_len, "path")?,
    })
}

pub(super) fn decode_thread(c: &mut Payload<'_>) -> R<ThreadInfo> {
    let index = c.u32()?;
    let tid = c.u32()?;
    let name_len = c.u32()?;
    Ok(ThreadInfo { index, tid, name: c.lossy(name_len, "name")? })
}

pub(super) fn decode_lock(c: &mut Payload<'_>) -> R<LockInfo> {
    let id = c.u32()?;
    let address = c.u64()?;
    let generation = c.u32()?;
    let kind = c.u8()?;
    let has_name = c.u8()?;
    let name_len = c.u32()?;
    let kind = LockKind::from_u8(kind).ok_or_else(|| c.bad_code("lock kind", kind))?;
    let name = match has_name {
        0 if name_len == 0 => None,
        1 => Some(c.lossy(name_len, "name")?),
        _ => return Err(c.bad_code("name presence", has_name)),
    };
    Ok(LockInfo { id, address, generation, kind, name })
}

pub(super) fn decode_stack(c: &mut Payload<'_>) -> R<Stack> {
    let id = c.u32()?;
    let n = c.u32()?;
    if n as usize > crate::encode::MAX_STACK_FRAMES {
        return Err(c.bad_code("frame count", n));
    }
    let mut frames = Vec::with_capacity(n as usize);
    for _ in 0..n {
        frames.push(c.u64()?);
    }
    Ok(Stack { id, frames })
}

pub(super) fn decode_long_wait(c: &mut Payload<'_>) -> R<crate::model::LongWait> {
    let thread = c.u32()?;
    let lock = c.u32()?;
    let mode = c.u8()?;
    let mode = Mode::from_u8(mode).ok_or_else(|| c.bad_code("mode", mode))?;
    let (start_ns, end_ns) = (c.u64()?, c.u64()?);
    if end_ns < start_ns {
        return Err(c.bad_code("end_ns below start_ns", 0u32));
    }
    let stack = c.u32()?;
    let holder_thread = c.u32()?;
    let holder_site = c.u64()?;
    let holder_stack = c.u32()?;
    let holder_acquired_ns = c.u64()?;
    Ok(crate::model::LongWait {
        thread,
        lock,
        mode,
        start_ns,
        end_ns,
        stack: (stack != u32::MAX).then_some(stack),
        holder_thread,
        holder_site,
        holder_stack: (holder_stack != u32::MAX).then_some(holder_stack),
        holder_acquired_ns: (holder_acquired_ns != u64::MAX).then_some(holder_acquired_ns),
    })
}

pub(super) fn decode_event(c: &mut Payload<'_>) -> R<Event> {
    let thread = c.u32()?;
    let lock = c.u32()?;
    let mode = c.u8()?;
    let mode = Mode::from_u8(mode).ok_or_else(|| c.bad_code("mode", mode))?;
    let kind = c.u8()?;
    let kind = EventKind::from_u8(kind).ok_or_else(|| c.bad_code("event kind", kind))?;
    let stack = c.u32()?;
    let holder_site = c.u64()?;
    let holder_stack = c.u32()?;
    Ok(Event {
        thread,
        lock,
        mode,
        kind,
        stack,
        holder_site,
        holder_stack: (holder_stack != u32::MAX).then_some(holder_stack),
        count: c.u64()?,
        wait_ns: c.u64()?,
        wait_ns_max: c.u64()?,
    })
}

pub(super) fn decode_record(c: &mut Payload<'_>) -> R<Record> {
    let thread = c.u32()?;
    let lock = c.u32()?;
    let site = c.u64()?;
    let mode = c.u8()?;
    let mode = Mode::from_u8(mode).ok_or_else(|| c.bad_code("mode", mode))?;
    let stats = Stats {
        acquisitions: c.u64()?,
        contended: c.u64()?,
        trylock_failures: c.u64()?,
        wait_ns_total: c.u64()?,
        wait_ns_max: c.u64()?,
        hold_ns_total: c.u64()?,
        hold_ns_max: c.u64()?,
        holds_timed: c.u64()?,
        owner_changes: c.u64()?,
        cnt_hold: c.u64()?,
        cnt_lock: c.u64()?,
        cond_waits: c.u64()?,
        cond_wait_ns: c.u64()?,
        wait_hist: c.hist("wait_hist")?,
        hold_hist: c.hist("hold_hist")?,
    };
    Ok(Record { thread, lock, site, mode, stats })
}

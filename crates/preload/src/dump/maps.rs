//! The memory maps of the profile: `/proc/self/maps` streamed into map records, anonymous
//! mappings that hold a thread's stack named as such.
//!
//! The watcher (a process with a memory of its own, copied when it started) would see the
//! program's maps as they were then: libraries `dlopen`ed later would be missing. So each
//! successful `dlopen` (`hooks/dl.rs`) copies `/proc/self/maps` into a buffer of the shared arena
//! ([`note_loaded`]), and a writer that is not in the program's memory (the watcher: its
//! `state::own_process` reads zero) writes the maps from that copy.

use super::{Bufs, Enc};
use crate::{state, sys};
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering::*};
use lockmeter_format::MapRef;

/// The shared copy of `/proc/self/maps` as of the last `dlopen`: its buffer (from the arena),
/// its length (0 while written, or when it did not fit), the generation asked for and the one
/// copied, and the flag of the thread copying it.
const COPY_CAP: usize = 1 << 20;
static COPY: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());
static COPY_LEN: AtomicUsize = AtomicUsize::new(0);
static ASKED: AtomicUsize = AtomicUsize::new(0);
static COPYING: AtomicBool = AtomicBool::new(false);

/// After a successful `dlopen`: copies `/proc/self/maps` for the watcher. Never waits: when
/// another thread is copying, that one copies again after it. Leaves errno alone.
pub(crate) fn note_loaded() {
    if !state::own_process() || !crate::shared::active() {
        return;
    }
    ASKED.fetch_add(1, AcqRel);
    let saved = sys::errno();
    while !COPYING.swap(true, Acquire) {
        let asked = ASKED.load(Acquire);
        copy_maps();
        COPYING.store(false, Release);
        if ASKED.load(Acquire) == asked {
            break; // nobody asked since we read the maps (or whoever did copies them)
        }
    }
    sys::set_errno(saved);
}

/// Reads `/proc/self/maps` into the shared copy (its length stays 0 while it is written, and
/// when it does not fit). The caller holds `COPYING`.
fn copy_maps() {
    let mut buf = COPY.load(Relaxed);
    if buf.is_null() {
        let Some(p) = crate::shared::map(COPY_CAP) else { return };
        COPY.store(p, Release);
        buf = p;
    }
    COPY_LEN.store(0, Release);
    // SAFETY: the buffer is `COPY_CAP` bytes of the arena, ours while we hold COPYING.
    let dst = unsafe { core::slice::from_raw_parts_mut(buf, COPY_CAP) };
    let n = sys::read_file(c"/proc/self/maps", dst).len();
    if n < COPY_CAP {
        COPY_LEN.store(n, Release);
    }
}

/// The shared copy of the maps, when a writer outside the program's memory should use it.
fn copied_maps() -> Option<&'static [u8]> {
    if state::own_process() {
        return None; // the program, or its guardian (same memory): /proc/self/maps is current
    }
    let (p, n) = (COPY.load(Acquire), COPY_LEN.load(Acquire));
    // SAFETY: the buffer lives as long as the arena; its first `n` bytes were written before
    // `n` was published (the program is gone when the watcher writes: nothing writes it now).
    (!p.is_null() && n > 0).then(|| unsafe { core::slice::from_raw_parts(p, n) })
}

/// Streams `/proc/self/maps` into map records.
/// The path given to an anonymous mapping that holds a thread's stack (the report's
/// `lockmeter_report::storage::THREAD_STACK`): the report names a lock there a stack lock.
const THREAD_STACK: &[u8] = b"[thread stack]";

/// Whether `[start, end)` holds the stack of a thread that has a shard: glibc maps a thread's
/// stack with its descriptor on top, where `stack_top` points (the main thread's is `[stack]`).
fn holds_thread_stack(start: u64, end: u64) -> bool {
    state::shards().any(|sh| {
        let top = sh.stack_top.load(Relaxed);
        start < top && top < end
    })
}

/// Writes the map records of the complete lines of `data`; returns where the last one ended.
fn write_lines(data: &[u8], enc: &mut Enc, result: &mut Option<()>) -> usize {
    let mut start = 0;
    while let Some(nl) = data.get(start..).and_then(|d| d.iter().position(|&c| c == b'\n')) {
        let line = data.get(start..start + nl).unwrap_or(&[]);
        if let Some(mut m) = MapRef::parse_line(line) {
            if m.path.is_empty() && holds_thread_stack(m.start, m.end) {
                m.path = THREAD_STACK;
            }
            if enc.map(&m).is_err() {
                *result = None;
            }
        }
        start += nl + 1;
    }
    start
}

pub(super) fn write_maps(b: &mut Bufs, enc: &mut Enc) -> Option<()> {
    if let Some(copy) = copied_maps() {
        let mut result = Some(());
        write_lines(copy, enc, &mut result);
        return result;
    }
    // SAFETY: NUL-terminated path.
    let fd = unsafe { libc::open(c"/proc/self/maps".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Some(());
    }
    let mut have = 0usize;
    let mut result = Some(());
    while let Some(rest) = b.chunk.get_mut(have..) {
        if rest.is_empty() {
            // A single line longer than the buffer: drop it.
            have = 0;
            continue;
        }
        // SAFETY: `rest` is a valid writable buffer.
        let r = unsafe { libc::read(fd, rest.as_mut_ptr().cast(), rest.len()) };
        if r < 0 && sys::errno() == libc::EINTR {
            continue;
        }
        if r <= 0 {
            break;
        }
        have += r as usize;
        let data = b.chunk.get(..have).unwrap_or(&[]);
        let start = write_lines(data, enc, &mut result);
        b.chunk.copy_within(start..have, 0);
        have -= start;
        if result.is_none() {
            break;
        }
    }
    // SAFETY: `fd` is ours.
    unsafe { libc::close(fd) };
    result
}

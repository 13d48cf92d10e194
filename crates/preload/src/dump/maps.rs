//! The memory maps of the profile: `/proc/self/maps` streamed into map records, anonymous
//! mappings that hold a thread's stack named as such.

use super::{Bufs, Enc};
use crate::{state, sys};
use core::sync::atomic::Ordering::*;
use lockmeter_format::MapRef;

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

pub(super) fn write_maps(b: &mut Bufs, enc: &mut Enc) -> Option<()> {
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
        let mut start = 0;
        while let Some(nl) = data.get(start..).and_then(|d| d.iter().position(|&c| c == b'\n')) {
            let line = data.get(start..start + nl).unwrap_or(&[]);
            if let Some(mut m) = MapRef::parse_line(line) {
                if m.path.is_empty() && holds_thread_stack(m.start, m.end) {
                    m.path = THREAD_STACK;
                }
                if enc.map(&m).is_err() {
                    result = None;
                }
            }
            start += nl + 1;
        }
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

//! The end of a fork child before its first lock, whose tables (and this module's buffers) are
//! still its parent's (`fork.rs`): its idle line is built in its private pages (its exec's
//! environment too: `exec.rs`), from what it noted at the fork and what its parent never changes
//! after its constructor (settings, the manifest's name, the calibration). Not under `run` (no
//! idle line wanted), it copies its tables first and writes its profile as any process does.

use super::{End, idle};
use lockmeter_core::clock;

/// [`super::write_profile`] of a pending child. Returns whether something was written.
pub(super) fn end(end: End) -> bool {
    if matches!(end, End::Snapshot) {
        return false;
    }
    if !idle::wanted_in_fork_child() {
        return crate::fork::start_pending() && super::write_profile_inner(end);
    }
    let Some((start_unix_ns, start_cost)) = crate::fork::start_facts() else { return false };
    if !crate::fork::end_once() {
        return false;
    }
    let t_end = clock::monotonic_ns();
    let line = idle::Facts {
        // SAFETY: getpid/getppid have no preconditions.
        pid: unsafe { libc::getpid() } as u32,
        // SAFETY: as above.
        ppid: unsafe { libc::getppid() } as u64,
        seq: 0,
        start_unix_ns,
    };
    let fixed = || start_cost.saturating_add(clock::monotonic_ns().saturating_sub(t_end).max(1));
    // SAFETY: `end_once` chose this caller; the borrow ends here.
    match unsafe { crate::fork::idle_bufs() } {
        Some(bufs) => idle::write_for_fork_child(bufs, line, fixed),
        None => false,
    }
}

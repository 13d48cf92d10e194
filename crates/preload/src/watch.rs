//! The watcher: writes the profile when the program was killed together with its guardian (the
//! OOM killer kills every process that shares the victim's memory, so the guardian too).
//!
//! The guardian's `start` also starts one watcher per process image, with a raw `clone` without
//! `CLONE_VM` (exit signal 0: the program's `wait` never sees it): a copy of the program with an
//! address space of its own, which the OOM killer does not kill with the program. It sees the
//! collector's live state through the memory the two share (`shared.rs`: the preload's data and
//! the arena every long-lived table is carved from). It lowers its own OOM score to the minimum
//! (where permitted: it has its own `oom_score_adj`, the program's is left alone), is otherwise
//! tiny, and idles in `ppoll` on a pidfd of the program and the guardian's exec pipe (it leaves at
//! an exec, like the guardian).
//!
//! While the program lives the watcher writes nothing shared (its libc state is its own copy).
//! Once the program is gone it waits for the guardian to be gone too; if neither wrote the
//! profile, it writes it with the ordinary writer: how the program ended from the zombie's
//! `/proc/PID/stat` (`run` keeps it), whether the OOM killer killed it from the kernel's log
//! (`/dev/kmsg`, read from where it stood when the watcher started; without access the profile
//! says only "killed"). The memory maps in the profile are the program's as of its last `dlopen`
//! (a copy in the shared arena, `dump/maps.rs`), or else the watcher's own: the program's as they
//! were when the watcher started.
//!
//! It carries the guardian's name, so `run` waits for it only while it writes (`cli/src/guards.rs`).

use crate::dump::{self, End};
use crate::guard::{STACK, map_stack, raw, wait_gone};
use core::sync::atomic::{AtomicU32, Ordering::*};
/// What the watcher needs, at the top of its stack.
#[repr(C)]
struct Args {
    pid: i32,
    guardian: i32,
    exec_fd: i32,
    done_fd: i32,
}

/// Starts the watcher of program `pid` whose guardian is `guardian` (`exec_fd`: the read end of
/// the exec pipe; `done_fd`: run's pipe or -1). Called with every signal blocked; raw system calls
/// only, apart from libc's `mmap`/`munmap` (the caller keeps errno). Without shared memory (or on failure) there is none.
#[cfg(target_arch = "x86_64")]
pub(crate) fn start(pid: i32, guardian: i32, exec_fd: i32, done_fd: i32) {
    if !crate::shared::active() {
        return;
    }
    let stack = map_stack();
    if stack == libc::MAP_FAILED {
        return;
    }
    let top = (stack as usize + STACK - 64) & !15;
    let args = top as *mut Args;
    // SAFETY: the top of the new mapping, aligned, unused by anything else.
    unsafe { args.write(Args { pid, guardian, exec_fd, done_fd }) };
    let big = private_bytes() >= WAIT_FOR_DROP;
    DROPPED.store(0, Release);
    // SAFETY: `top` is the aligned top of a fresh stack; `watcher` never returns into this frame
    // (the trampoline calls exit). Without CLONE_VM the watcher runs on its own copy of the
    // stack, so ours is unmapped at once.
    let pid = unsafe { crate::guard::clone_on(0, top - 64, watcher, args) };
    crate::guard::set_watcher(pid as i32);
    // SAFETY: our copy of the watcher's stack, used by nothing of ours.
    unsafe { libc::munmap(stack, STACK) };
    if pid > 0 && big {
        wait_for_drop();
    }
}

/// Private resident memory from which [`start`] waits until the watcher let go of its copy
/// ([`drop_program_memory`]) before the program goes on: below it, the pages the program could
/// copy meanwhile cost less than the wait.
const WAIT_FOR_DROP: u64 = 16 << 20;

/// Set by the watcher (the one word of the shared data it writes while the program lives) once
/// [`drop_program_memory`] is done.
static DROPPED: AtomicU32 = AtomicU32::new(0);

/// The program's resident memory that is not shared (`/proc/self/statm`: resident - shared).
fn private_bytes() -> u64 {
    let mut buf = [0u8; 128];
    let s = crate::sys::read_file(c"/proc/self/statm", &mut buf);
    let mut f = s.split(|&c| c == b' ').map(crate::sys::parse_u64);
    let (_, Some(Some(res)), Some(Some(shared))) = (f.next(), f.next(), f.next()) else {
        return 0;
    };
    res.saturating_sub(shared).saturating_mul(4096)
}

/// Waits (at most 200 ms) until the watcher has let go of its copy of the program's memory.
fn wait_for_drop() {
    let limit = libc::timespec { tv_sec: 0, tv_nsec: 200_000_000 };
    let t0 = lockmeter_core::clock::monotonic_ns();
    while DROPPED.load(Acquire) == 0 && lockmeter_core::clock::monotonic_ns() - t0 < 200_000_000 {
        // A shared futex: the word is in memory the watcher maps too.
        raw(
            libc::SYS_futex,
            [DROPPED.as_ptr() as usize, libc::FUTEX_WAIT as usize, 0, &limit as *const _ as usize],
        );
    }
}

#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn start(_: i32, _: i32, _: i32, _: i32) {}

/// The watcher's body (see the module docs).
#[cfg(target_arch = "x86_64")]
extern "C" fn watcher(args: *mut Args) -> i32 {
    // SAFETY: written by `start` before the clone, on our copy of this stack.
    let Args { pid, guardian, exec_fd, done_fd } = unsafe { args.read() };
    crate::guard::leave_program(exec_fd, done_fd);
    lowest_oom_score();
    drop_program_memory();
    DROPPED.store(1, Release);
    raw(libc::SYS_futex, [DROPPED.as_ptr() as usize, libc::FUTEX_WAKE as usize, 1, 0]);
    let kmsg = open_kmsg();
    // The guardian's pidfd first: once the program is gone, the guardian may end at any time.
    let gpidfd = raw(libc::SYS_pidfd_open, [guardian as usize, 0, 0, 0]);
    if !wait_gone(pid, exec_fd) {
        return 0;
    }
    if gpidfd >= 0 {
        // The guardian writes the profile unless it died with the program: wait until it is gone.
        loop {
            let mut p = libc::pollfd { fd: gpidfd as i32, events: libc::POLLIN, revents: 0 };
            let r = raw(libc::SYS_ppoll, [&mut p as *mut libc::pollfd as usize, 1, 0, 0]);
            if r > 0 || (r < 0 && r != -(libc::EINTR as isize)) {
                break;
            }
        }
    }
    if dump::image_left() {
        return 0;
    }
    if !crate::shared::complete() {
        crate::sys::write_stderr(
            b"lockmeter: the program and its guardian were killed; a table of the collector was not shared with its watcher, so no profile was written\n",
        );
        return 0;
    }
    let (mut end, ppid) = crate::guard::how_it_ended(pid);
    // The kernel's word settles it even when the zombie was reaped before we looked.
    if matches!(end, End::Killed(libc::SIGKILL) | End::Vanished)
        && kmsg >= 0
        && oom_killed(kmsg as i32, pid, guardian)
    {
        end = End::OomKilled;
    }
    dump::write_by_guardian(ppid, end, true);
    0
}

/// Smallest private mapping [`drop_program_memory`] lets go of.
const DROP_MIN: usize = 1 << 20;

/// Lets go of our copy of the program's large private memory (anonymous, writable, at least
/// [`DROP_MIN`] bytes: its heap, its data, other threads' stacks), which the writer never reads
/// (it reads the collector's shared memory): started at the program's first lock, perhaps after
/// the program filled much memory, the watcher would otherwise hold each of those pages
/// copy-on-write, and the program would copy every page it writes from then on. Kept: the
/// mapping of our stack and the one holding this thread's TLS (the thread pointer), file
/// mappings, shared ones, `[stack]` (the environment). Raw system calls only.
fn drop_program_memory() {
    let marker = 0u8;
    let here = &marker as *const u8 as usize; // on our stack: its mapping is kept
    let tp: usize;
    // SAFETY: reads the thread pointer (%fs:0 holds its own address on x86_64 Linux).
    unsafe { core::arch::asm!("mov {}, qword ptr fs:0", out(reg) tp, options(nostack, readonly)) };
    let path = c"/proc/self/maps";
    let fd = raw(
        libc::SYS_openat,
        [libc::AT_FDCWD as usize, path.as_ptr() as usize, libc::O_RDONLY as usize, 0],
    );
    if fd < 0 {
        return;
    }
    let mut buf = [0u8; 8192];
    let mut have = 0;
    while let Some(room) = buf.get_mut(have..) {
        let n = raw(libc::SYS_read, [fd as usize, room.as_mut_ptr() as usize, room.len(), 0]);
        if n <= 0 {
            break;
        }
        have += n as usize;
        let data = buf.get(..have).unwrap_or(&[]);
        let Some(last) = data.iter().rposition(|&c| c == b'\n') else {
            break; // a line longer than the buffer: stop here
        };
        for line in data.get(..last).unwrap_or(&[]).split(|&c| c == b'\n') {
            if let Some((start, end)) = droppable(line, here, tp) {
                raw(libc::SYS_madvise, [start, end - start, libc::MADV_DONTNEED as usize, 0]);
            }
        }
        buf.copy_within(last + 1..have, 0);
        have -= last + 1;
    }
    raw(libc::SYS_close, [fd as usize, 0, 0, 0]);
}

/// The range of a `/proc/self/maps` line that [`drop_program_memory`] lets go of, if it does.
fn droppable(line: &[u8], here: usize, tp: usize) -> Option<(usize, usize)> {
    let mut f = line.split(|&c| c == b' ').filter(|w| !w.is_empty());
    let (range, perms, _off, _dev, inode) = (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
    let name = f.next().unwrap_or(b"");
    let hex = |b: &[u8]| usize::from_str_radix(core::str::from_utf8(b).ok()?, 16).ok();
    let mut r = range.split(|&c| c == b'-');
    let (start, end) = (hex(r.next()?)?, hex(r.next()?)?);
    let anon = inode == b"0" && (name.is_empty() || name == b"[heap]");
    let ours = (start..end).contains(&here) || (start..end).contains(&tp);
    (perms.starts_with(b"rw") && perms.get(3) == Some(&b'p') && anon && !ours)
        .then_some((start, end))
        .filter(|(s, e)| e - s >= DROP_MIN)
}

/// Sets our `oom_score_adj` to -1000 where permitted (root): the OOM killer never picks us.
fn lowest_oom_score() {
    let path = c"/proc/self/oom_score_adj";
    let fd = raw(
        libc::SYS_openat,
        [libc::AT_FDCWD as usize, path.as_ptr() as usize, libc::O_WRONLY as usize, 0],
    );
    if fd >= 0 {
        let v = b"-1000";
        raw(libc::SYS_write, [fd as usize, v.as_ptr() as usize, v.len(), 0]);
        raw(libc::SYS_close, [fd as usize, 0, 0, 0]);
    }
}

/// The kernel's log from now on (`/dev/kmsg` at its end), or -1 when it is not readable.
fn open_kmsg() -> isize {
    let path = c"/dev/kmsg";
    let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_CLOEXEC;
    let fd =
        raw(libc::SYS_openat, [libc::AT_FDCWD as usize, path.as_ptr() as usize, flags as usize, 0]);
    if fd >= 0 {
        raw(libc::SYS_lseek, [fd as usize, 0, libc::SEEK_END as usize, 0]);
    }
    fd
}

/// Whether the kernel logged, since [`open_kmsg`], that the OOM killer killed process `pid` or
/// its `guardian` ("Killed process PID (name)", after "Out of memory" or "Memory cgroup out of
/// memory"): it names the one it chose of the processes sharing the memory, and kills them all.
fn oom_killed(kmsg: i32, pid: i32, guardian: i32) -> bool {
    let (mut a, mut b) = (crate::sys::PathBuf::new(), crate::sys::PathBuf::new());
    a.push(b"Killed process ").push_u64(pid as u64).push(b" (");
    b.push(b"Killed process ").push_u64(guardian as u64).push(b" (");
    let (a, b) = (a.bytes(), b.bytes());
    let mut rec = [0u8; 8192];
    loop {
        let n = raw(libc::SYS_read, [kmsg as usize, rec.as_mut_ptr() as usize, rec.len(), 0]);
        if n == -(libc::EPIPE as isize) || n == -(libc::EINTR as isize) {
            continue; // records overwritten before we read them: go on with the next
        }
        if n <= 0 {
            return false;
        }
        let rec = rec.get(..n as usize).unwrap_or(&[]);
        if rec.windows(a.len()).any(|w| w == a) || rec.windows(b.len()).any(|w| w == b) {
            return true;
        }
    }
}

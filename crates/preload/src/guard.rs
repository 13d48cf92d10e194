//! The guardian: a process that writes the profile when the program ends where no handler of
//! ours runs (SIGKILL, a crash, the raw `exit_group` Go programs leave with).
//!
//! The constructor (and each fork child) arms it ([`ready`]); the image's first metered
//! acquisition (the first record lookup that misses a thread's cache, `meter::lookup_miss`)
//! starts it ([`metering`]): an image that never takes a lock (a launcher, a shell between fork and
//! exec) has no profile to lose and pays for neither process. It is a raw `clone(CLONE_VM)`: a
//! process of its own (own pid and thread group, a copy of the descriptor table, exit signal 0 so
//! that the program's `wait` never sees it) on its own stack, sharing the program's whole address
//! space.
//! SIGKILL, `exit_group` and fatal signals end the program's thread group only: the memory stays
//! while the guardian holds it, and the guardian runs the ordinary profile writer on it.
//!
//! While the program lives the guardian shares the creating thread's TLS, so until then it makes
//! raw system calls only (nothing that writes errno). It polls a pidfd of the program (readable
//! once the whole thread group is gone) and the read end of a pipe whose close-on-exec write end
//! only the program holds (hung up by a successful exec, whose profile the exec hook wrote:
//! the guardian then leaves at once, letting the old image's memory go). When the program is
//! gone, no thread of it runs any more, and libc is safe to use: if the program wrote its
//! profile, the guardian leaves; else it learns how the program ended from the zombie's
//! `/proc/PID/stat` and writes the profile.
//!
//! All signals are blocked in the guardian and it leaves the program's process group
//! (`kill -9 -PGID` spares it). It does not lower its OOM score: the kernel copies
//! `oom_score_adj` to every process sharing the memory, so the program itself would become
//! unkillable by the OOM killer. The OOM killer kills it with the program; `start` also starts the
//! watcher (`watch.rs`), which has memory of its own and writes the profile then.

use crate::dump::{self, End};
use core::sync::atomic::{AtomicI32, AtomicU8, AtomicU64, Ordering::*};

/// The write end of this image's exec pipe (held by the program only), -1 when none.
static EXEC_FD: AtomicI32 = AtomicI32::new(-1);
/// `lockmeter run`'s pipe (`LOCKMETER_GUARD_FD`), -1 when none.
static DONE_FD: AtomicI32 = AtomicI32::new(-1);
/// The inode of `lockmeter run`'s pipe: [`metering`] checks that `DONE_FD` is still it.
static DONE_INO: AtomicU64 = AtomicU64::new(0);
/// This image's guardian and watcher (children of the process that started them), 0 when none.
static HELPERS: [AtomicI32; 2] = [const { AtomicI32::new(0) }; 2];
/// Where this image stands with its first metered acquisition and its guardian: `STARTING` (the
/// constructor, whose calibration is not the program's), `IDLE` (none yet; no guardian wanted:
/// `--guardian 0`, or none in the parent of a fork child), `ARMED` (none yet; the guardian starts
/// at the first), `METERED` (one was made; the guardian started, or its start failed, or none was
/// wanted).
static LAZY: AtomicU8 = AtomicU8::new(STARTING);
const STARTING: u8 = 0;
const IDLE: u8 = 1;
const ARMED: u8 = 2;
const METERED: u8 = 3;

/// The pids of this process's guardian and watcher (0 for one not running); `hooks/wait.rs` keeps
/// them out of the program's waits for any child.
pub(crate) fn helpers() -> [i32; 2] {
    [HELPERS[0].load(Relaxed), HELPERS[1].load(Relaxed)]
}

/// Records the watcher's pid (`watch::start`).
pub(crate) fn set_watcher(pid: i32) {
    HELPERS[1].store(pid.max(0), Relaxed);
}

/// The stack of a guardian or watcher (reserved, touched as used).
pub(crate) const STACK: usize = 8 << 20;

/// Maps a fresh stack of [`STACK`] bytes for a guardian or watcher (`MAP_FAILED` when refused).
pub(crate) fn map_stack() -> *mut core::ffi::c_void {
    // SAFETY: a fresh anonymous private mapping; nothing else refers to it.
    unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            STACK,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE | libc::MAP_STACK,
            -1,
            0,
        )
    }
}

/// What the guardian needs, at the top of its stack.
#[repr(C)]
struct Args {
    pid: i32,
    exec_fd: i32,
    done_fd: i32,
}

/// A raw system call: returns the result or `-errno`; never touches errno.
#[cfg(target_arch = "x86_64")]
pub(crate) fn raw(n: libc::c_long, a: [usize; 4]) -> isize {
    let r: isize;
    // SAFETY: the Linux x86_64 system call convention; the kernel clobbers rcx and r11 only.
    // Callers pass arguments valid for the call `n`.
    unsafe {
        core::arch::asm!(
            "syscall",
            inlateout("rax") n as isize => r,
            in("rdi") a[0],
            in("rsi") a[1],
            in("rdx") a[2],
            in("r10") a[3],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack)
        )
    };
    r
}

/// A raw system call: returns the result or `-errno`; never touches errno.
#[cfg(target_arch = "aarch64")]
pub(crate) fn raw(n: libc::c_long, a: [usize; 4]) -> isize {
    let r: isize;
    // SAFETY: the Linux aarch64 system call convention (x8: the number, x0-x3: the arguments,
    // x0: the result); the kernel preserves every other register. Callers pass arguments valid
    // for the call `n`.
    unsafe {
        core::arch::asm!(
            "svc 0",
            in("x8") n,
            inlateout("x0") a[0] as isize => r,
            in("x1") a[1],
            in("x2") a[2],
            in("x3") a[3],
            options(nostack)
        )
    };
    r
}

/// Parses `LOCKMETER_GUARD_FD` (`FD:INODE`): the descriptor, if it is still the pipe `run` made.
pub(crate) fn set_done_fd(v: &[u8]) {
    let mut it = v.splitn(2, |&c| c == b':');
    let (Some(fd), Some(ino)) = (it.next(), it.next()) else { return };
    let (Some(fd), Some(ino)) = (crate::sys::parse_u64(fd), crate::sys::parse_u64(ino)) else {
        return;
    };
    let Ok(fd) = i32::try_from(fd) else { return };
    if is_pipe(fd, ino) {
        DONE_INO.store(ino, Relaxed);
        DONE_FD.store(fd, Relaxed);
    }
}

/// Whether descriptor `fd` is the pipe of inode `ino` (a raw `fstat`: errno is left alone).
fn is_pipe(fd: i32, ino: u64) -> bool {
    // SAFETY: an all-zero stat is a valid buffer for fstat to fill.
    let mut st: libc::stat = unsafe { core::mem::zeroed() };
    let r = raw(libc::SYS_fstat, [fd as usize, &mut st as *mut libc::stat as usize, 0, 0]);
    r == 0 && st.st_mode & libc::S_IFMT == libc::S_IFIFO && st.st_ino == ino
}

/// Forgets run's pipe if its descriptor is no longer that pipe (the program closed it, and may
/// have opened something else under its number: the guardian must not hold that open).
fn recheck_done_fd() {
    let fd = DONE_FD.load(Relaxed);
    if fd < 0 {
        return;
    }
    if !is_pipe(fd, DONE_INO.load(Relaxed)) {
        DONE_FD.store(-1, Relaxed);
    }
}

/// The end of the constructor: from now on acquisitions are the program's; `guardian`: its
/// guardian (and watcher) start at the first one ([`metering`]), unless `--guardian 0`.
pub(crate) fn ready(guardian: bool) {
    LAZY.store(if guardian { ARMED } else { IDLE }, Release);
}

/// Whether this image made no metered acquisition since the constructor (or its fork): its
/// profile would hold nothing of the program's.
pub(crate) fn never_metered() -> bool {
    matches!(LAZY.load(Acquire), IDLE | ARMED)
}

/// A metered acquisition's record lookup that missed the thread's cache (only the image's first
/// does anything): notes that the image metered, and starts the armed guardian and `beside` (the
/// watcher), once. Leaves errno as it was; what it took is added to the image's start cost
/// (`start_ns`), outside the hooks' timed paths (it runs before a lookup's timing starts).
#[inline(always)]
pub(crate) fn metering(beside: Beside) {
    if matches!(LAZY.load(Relaxed), IDLE | ARMED) {
        first_metering(beside);
    }
}

#[cold]
#[inline(never)]
fn first_metering(beside: Beside) {
    // A vfork child shares our memory: the state and the guardian are its parent's.
    if raw(libc::SYS_getpid, [0; 4]) != dump::PID.load(Relaxed) as isize {
        return;
    }
    // Another thread's first acquisition got here first: it starts them (without waiting for it).
    if LAZY.swap(METERED, AcqRel) != ARMED {
        return;
    }
    let saved = crate::sys::errno();
    let t0 = lockmeter_core::clock::monotonic_ns();
    recheck_done_fd();
    start(beside);
    let took = lockmeter_core::clock::monotonic_ns().saturating_sub(t0);
    dump::START_COST_NS.fetch_add(took, Relaxed);
    crate::sys::set_errno(saved);
}

/// What starts with the guardian, with every signal blocked and raw system calls only: the
/// watcher (`watch::start`), given the program's pid, the guardian's, the exec pipe's read end
/// and run's pipe (or -1).
pub(crate) type Beside = fn(i32, i32, i32, i32);

/// In a fork child's handler: closes its copy of the parent's exec pipe (the parent's guardian
/// learns of the parent's exec from its hang-up), writing nothing of ours (the child may still
/// share it with its parent). Returns whether the child's guardian is to be armed: where the
/// parent had one or was to get one.
pub(crate) fn close_inherited() -> bool {
    let fd = EXEC_FD.load(Relaxed);
    if fd >= 0 {
        raw(libc::SYS_close, [fd as usize, 0, 0, 0]);
    }
    fd >= 0 || LAZY.load(Relaxed) == ARMED
}

/// In a fork child with its own copy of our memory ([`close_inherited`] closed the parent's exec
/// pipe): our own guardian is armed (to start at the child's first metered acquisition) if
/// `armed`.
pub(crate) fn after_fork(armed: bool) {
    EXEC_FD.store(-1, Relaxed);
    // The parent's guardian and watcher are not this child's children.
    HELPERS.iter().for_each(|h| h.store(0, Relaxed));
    LAZY.store(if armed { ARMED } else { IDLE }, Relaxed);
}

/// Starts this image's guardian, then `beside` ([`first_metering`]). On failure the program runs on
/// without them.
#[cfg(target_arch = "x86_64")]
pub(crate) fn start(beside: Beside) {
    let mut fds = [-1i32; 2];
    let r = raw(libc::SYS_pipe2, [fds.as_mut_ptr() as usize, libc::O_CLOEXEC as usize, 0, 0]);
    if r < 0 {
        return;
    }
    let close = |fd: i32| raw(libc::SYS_close, [fd as usize, 0, 0, 0]);
    let stack = map_stack();
    if stack == libc::MAP_FAILED {
        close(fds[0]);
        close(fds[1]);
        return;
    }
    // A guard page at the bottom: an overflow faults instead of writing over other memory.
    // SAFETY: the first page of the mapping just made.
    unsafe { libc::mprotect(stack, 4096, libc::PROT_NONE) };
    let top = (stack as usize + STACK - 64) & !15;
    let args = top as *mut Args;
    // SAFETY: the top of the new mapping, aligned, unused by anything else.
    unsafe {
        args.write(Args {
            pid: dump::PID.load(Relaxed) as i32,
            exec_fd: fds[0],
            done_fd: DONE_FD.load(Relaxed),
        })
    };
    // All signals blocked across the clone, so the guardian starts with them blocked (it has a
    // copy of the program's handlers, which must never run in it).
    let all: u64 = !0;
    let mut old: u64 = 0;
    raw(
        libc::SYS_rt_sigprocmask,
        [libc::SIG_SETMASK as usize, &all as *const u64 as usize, &mut old as *mut u64 as usize, 8],
    );
    // SAFETY: `top` is the aligned top of a fresh stack; `guardian` never returns into this
    // frame (the trampoline calls exit), and takes `args`, which lives on that stack.
    let pid = unsafe { clone_on(libc::CLONE_VM as usize, top - 64, guardian, args.cast()) };
    if pid > 0 {
        HELPERS[0].store(pid as i32, Relaxed);
        beside(dump::PID.load(Relaxed) as i32, pid as i32, fds[0], DONE_FD.load(Relaxed));
    }
    raw(libc::SYS_rt_sigprocmask, [libc::SIG_SETMASK as usize, &old as *const u64 as usize, 0, 8]);
    close(fds[0]);
    if pid < 0 {
        close(fds[1]);
        // SAFETY: the mapping made above, unused (no guardian runs on it).
        unsafe { libc::munmap(stack, STACK) };
        return;
    }
    EXEC_FD.store(fds[1], Relaxed);
}

#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn start(_: Beside) {}

/// `clone(flags, stack)` (exit signal 0) whose child calls `f(arg)` on `stack`, then `exit`s with
/// its result. Returns the child's pid or `-errno`.
///
/// # Safety
/// `stack` is the 16-byte aligned top of a mapping that nothing else uses; `f` must not unwind.
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn clone_on<T>(
    flags: usize,
    stack: usize,
    f: extern "C" fn(*mut T) -> i32,
    arg: *mut T,
) -> isize {
    let r: isize;
    // SAFETY: the caller's contract. The child starts on `stack` with the registers of the
    // parent: r12/r13 carry `f` and `arg` across the system call; it never returns here.
    unsafe {
        core::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "xor ebp, ebp",
            "mov rdi, r13",
            "call r12",
            "mov edi, eax",
            "mov eax, {exit}",
            "syscall",
            "ud2",
            "2:",
            exit = const libc::SYS_exit,
            inlateout("rax") libc::SYS_clone as isize => r,
            in("rdi") flags,
            in("rsi") stack,
            in("rdx") 0usize,
            in("r10") 0usize,
            in("r8") 0usize,
            in("r12") f as usize,
            in("r13") arg as usize,
            lateout("rcx") _,
            lateout("r11") _,
        )
    };
    r
}

/// The guardian's body (see the module docs). Raw system calls only until the program is gone.
#[cfg(target_arch = "x86_64")]
extern "C" fn guardian(args: *mut Args) -> i32 {
    // SAFETY: written by `start` before the clone, on this stack; never written again.
    let Args { pid, exec_fd, done_fd } = unsafe { args.read() };
    leave_program(exec_fd, done_fd);
    if !wait_gone(pid, exec_fd) {
        return 0; // an exec (its profile was written before it), or no pidfd: no guardian
    }
    // The program is gone: no thread of it runs, libc is ours.
    if dump::image_left() {
        return 0;
    }
    let (end, ppid) = how_it_ended(pid);
    dump::write_by_guardian(ppid, end, false);
    0
}

/// What the guardian and the watcher do first: their own process group (`kill -9 -PGID` spares
/// them), the guardian's name (`run` and the kernel collector know them by it), and only the
/// descriptors they need: the exec pipe, run's pipe, stderr (holding the program's others could
/// keep a pipe open that someone waits to see closed).
pub(crate) fn leave_program(exec_fd: i32, done_fd: i32) {
    raw(libc::SYS_setpgid, [0, 0, 0, 0]);
    raw(
        libc::SYS_prctl,
        [libc::PR_SET_NAME as usize, lockmeter_core::GUARDIAN_NAME.as_ptr() as usize, 0, 0],
    );
    let mut keep = [exec_fd, done_fd, 2];
    keep.sort_unstable();
    let mut from = 0u32;
    for k in keep {
        if k >= from as i32 {
            if k > from as i32 {
                close_range(from, k as u32 - 1);
            }
            from = k as u32 + 1;
        }
    }
    close_range(from, u32::MAX);
}

/// Waits (raw system calls only) until program `pid`, our parent, is gone: true; or until it
/// exec'd (`exec_fd` hung up, the exec's profile written): false. Also false when the kernel has
/// no pidfd (Linux < 5.3); true at once when the program ended and was reaped before this
/// process first ran (`pidfd_open`: ESRCH; a fork child killed at once on a loaded machine): its
/// memory is still ours.
pub(crate) fn wait_gone(pid: i32, exec_fd: i32) -> bool {
    let pidfd = raw(libc::SYS_pidfd_open, [pid as usize, 0, 0, 0]);
    if pidfd < 0 {
        return pidfd == -(libc::ESRCH as isize);
    }
    // The program may have died before we asked: then we were given to another parent already.
    let mut watch_exec = true;
    while raw(libc::SYS_getppid, [0; 4]) == pid as isize {
        let mut p = [
            libc::pollfd { fd: pidfd as i32, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: if watch_exec { exec_fd } else { -1 }, events: 0, revents: 0 },
        ];
        let r = raw(libc::SYS_ppoll, [p.as_mut_ptr() as usize, 2, 0, 0]);
        if r < 0 {
            continue;
        }
        if p[0].revents != 0 {
            break;
        }
        if p[1].revents != 0 {
            if dump::image_left() {
                return false; // an exec: its profile was written before it
            }
            watch_exec = false; // the program closed our descriptor: death will tell
        }
    }
    // Reparented: the program's last thread is exiting; wait (bounded) until it is a zombie, so
    // that no thread of it runs and its exit status can be read.
    let mut p = libc::pollfd { fd: pidfd as i32, events: libc::POLLIN, revents: 0 };
    let second = libc::timespec { tv_sec: 1, tv_nsec: 0 };
    raw(
        libc::SYS_ppoll,
        [&mut p as *mut libc::pollfd as usize, 1, &second as *const _ as usize, 0],
    );
    true
}

/// `close_range(first, last)`, or a loop of `close` where the kernel lacks it.
fn close_range(first: u32, last: u32) {
    if raw(libc::SYS_close_range, [first as usize, last as usize, 0, 0]) == 0 {
        return;
    }
    for fd in first..last.min(4096) {
        raw(libc::SYS_close, [fd as usize, 0, 0, 0]);
    }
}

/// How the dead program ended and its parent, from the zombie's `/proc/PID/stat` (fields 4 and
/// 52); `Vanished` when it was reaped already.
pub(crate) fn how_it_ended(pid: i32) -> (End, u32) {
    let mut path = crate::sys::PathBuf::new();
    path.push(b"/proc/").push_u64(pid as u64).push(b"/stat");
    let mut buf = [0u8; 2048];
    let stat = crate::sys::read_file(path.as_cstr(), &mut buf);
    if !stat.contains(&b')') {
        return (End::Vanished, 0);
    }
    let fields = |n: usize| lockmeter_core::procstat::field_bytes(stat, n);
    let ppid = fields(4).and_then(crate::sys::parse_u64).unwrap_or(0) as u32;
    let state = fields(3).and_then(|s| s.first().copied());
    let code = fields(52).and_then(crate::sys::parse_u64);
    match (state, code) {
        (Some(b'Z' | b'X'), Some(c)) if c & 0x7f != 0 => (End::Killed((c & 0x7f) as i32), ppid),
        (Some(b'Z' | b'X'), Some(c)) => (End::ExitGroup(((c >> 8) & 0xff) as i32), ppid),
        _ => (End::Vanished, ppid),
    }
}

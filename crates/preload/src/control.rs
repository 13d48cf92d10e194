//! The control thread: run-time control of a metered process (`lockmeter ctl PID ...`, `top`),
//! the timers of `--delay` and `--duration`, and the samples of the time series (`--interval`).
//!
//! The channel is a unix socket, `/tmp/lockmeter-UID/PID.sock`, in a directory that must be
//! ours and mode 0700 (else no socket, said once on stderr); every connection is checked again
//! with `SO_PEERCRED` (same user or root). The socket gets its name only once it listens (bound
//! as `PID.sock.new`, then renamed), so one that refuses a connection is a dead process's, which
//! `lockmeter run` removes (`cli/src/stale.rs`). No signal is used, so nothing the program does
//! with its signals can interfere. The thread is a plain `pthread_create` thread (no Rust runtime, no
//! allocation), with every signal blocked (the program's handlers, and ours that write the final
//! profile, never run on it); it takes no lock of the program. The constructor binds the socket
//! and starts the thread ([`start_if_needed`]: a socket wanted, or a timer). A fork child starts
//! its own (the parent's does not exist there), with its own socket: in its fork handler, after
//! its copy of the collector's tables, where that copy is made there; a fork child whose copy
//! waits for its first lock (`fork.rs`) starts the thread in its fork handler too
//! ([`start_waiter`]: no hook ever creates a thread), but that thread first waits until the
//! tables are the child's own (`fork::wait_until_own`), writing nothing of ours before (they are
//! still shared with the parent), then binds the child's socket and serves. So a fork child
//! binds its socket at its first lock; one that execs or exits before binds none (its waiting
//! thread ends with it), and `lockmeter ctl` on it says so.
//!
//! Requests are one line: `snapshot`, `pause`, `resume`, `reset`, `status`. The answer starts
//! with a line `ok ...` or `error: ...`; a snapshot's `ok` line is followed by the profile.

use crate::dump;
use crate::live;
use crate::sys::{self, PathBuf};
use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering::*};
use lockmeter_core::clock;

/// The listening socket (-1: none), and its identity (device, inode): a program that closes
/// every descriptor (daemons do) may reuse the number for a file or socket of its own, which is
/// then never touched.
static LISTEN_FD: AtomicI32 = AtomicI32::new(-1);
static LISTEN_DEV: AtomicU64 = AtomicU64::new(0);
static LISTEN_INO: AtomicU64 = AtomicU64::new(0);
/// Monotonic ns at which metering starts (`--delay`); 0 when not pending.
static DELAY_END_NS: AtomicU64 = AtomicU64::new(0);
/// The `--duration` in ns (u64::MAX: unlimited), and when it ends once metering started.
static DURATION_NS: AtomicU64 = AtomicU64::new(u64::MAX);
static DURATION_END_NS: AtomicU64 = AtomicU64::new(0);
/// Monotonic ns of the next sample of the time series (0: none).
static NEXT_SAMPLE_NS: AtomicU64 = AtomicU64::new(0);
/// Whether the thread runs (in this process).
static RUNNING: AtomicBool = AtomicBool::new(false);
/// Whether a socket is wanted (`LOCKMETER_CONTROL`, default on).
static WANT_SOCKET: AtomicBool = AtomicBool::new(false);

/// Socket I/O time limit: a stuck client never holds a snapshot (and so the final profile) up
/// for longer.
const IO_TIMEOUT_S: i64 = 5;

/// Reads the settings (constructor). Returns whether metering starts paused (`--delay`).
pub(crate) fn configure(want_socket: bool, delay_ms: u64, duration_ms: Option<u64>) -> bool {
    WANT_SOCKET.store(want_socket, Relaxed);
    let now = clock::monotonic_ns();
    arm_sampling(now);
    if let Some(d) = duration_ms {
        DURATION_NS.store(d.saturating_mul(1_000_000), Relaxed);
    }
    if delay_ms > 0 {
        DELAY_END_NS.store(now.saturating_add(delay_ms.saturating_mul(1_000_000)).max(1), Relaxed);
        true
    } else {
        arm_duration(now);
        false
    }
}

fn arm_sampling(now: u64) {
    let p = crate::timeline::PERIOD_NS.load(Relaxed);
    NEXT_SAMPLE_NS.store(if p == 0 { 0 } else { now.saturating_add(p) }, Relaxed);
}

fn arm_duration(now: u64) {
    let d = DURATION_NS.load(Relaxed);
    if d != u64::MAX {
        DURATION_END_NS.store(now.saturating_add(d).max(1), Relaxed);
    }
}

/// Whether a timer is pending (the thread must run from the start).
pub(crate) fn timers() -> bool {
    DELAY_END_NS.load(Relaxed) != 0
        || DURATION_END_NS.load(Relaxed) != 0
        || NEXT_SAMPLE_NS.load(Relaxed) != 0
}

/// Whether the thread has work: a socket or a pending timer.
fn needed() -> bool {
    WANT_SOCKET.load(Relaxed) || timers()
}

/// Binds the socket and starts the thread, if either is wanted (constructor, or a fork child's
/// handler after its copy).
pub(crate) fn start_if_needed() {
    if !needed() {
        return;
    }
    if WANT_SOCKET.load(Relaxed) {
        bind_socket();
    }
    let ok = spawn(thread_main, core::ptr::null_mut());
    RUNNING.store(ok, Relaxed);
    if !ok {
        sys::write_stderr(
            b"lockmeter: cannot start the control thread; ctl, --delay and --duration are off\n",
        );
        close_listen();
    }
}

/// In the fork handler of a child whose copy of the tables waits for its first lock
/// (`fork::defer`; no timer runs there): starts the control thread, `f(arg)`, if a socket is
/// wanted; it waits until the tables are the child's own (`fork.rs`), then calls
/// [`bind_and_serve`]. Writes nothing of ours (our memory may still be the parent's). Returns
/// whether the thread runs.
pub(crate) fn start_waiter(f: extern "C" fn(*mut c_void) -> *mut c_void, arg: *mut c_void) -> bool {
    if !WANT_SOCKET.load(Relaxed) {
        return false;
    }
    let ok = spawn(f, arg);
    if !ok {
        sys::write_stderr(
            b"lockmeter: cannot start a fork child's control thread; ctl is off in it\n",
        );
    }
    ok
}

/// Names the calling thread as the control thread.
pub(crate) fn name_thread() {
    // SAFETY: PR_SET_NAME reads a NUL-terminated name of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"lockmeter-ctl".as_ptr()) };
}

/// A pending fork child's control thread ([`start_waiter`]), once the child's tables are its own
/// (`fork::start_pending` did what [`after_fork`] does for it): binds its socket and serves.
pub(crate) fn bind_and_serve() {
    bind_socket();
    thread_main(core::ptr::null_mut());
}

/// Starts a detached thread running `f(arg)` with every signal blocked. Returns whether it runs.
fn spawn(f: extern "C" fn(*mut c_void) -> *mut c_void, arg: *mut c_void) -> bool {
    // Every signal blocked in the new thread: it inherits the mask set around its creation.
    // SAFETY: plain sigset and pthread calls with valid pointers; the attribute is initialized
    // before use and destroyed after.
    unsafe {
        let mut all: libc::sigset_t = core::mem::zeroed();
        let mut old: libc::sigset_t = core::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let mut attr: libc::pthread_attr_t = core::mem::zeroed();
        libc::pthread_attr_init(&mut attr);
        libc::pthread_attr_setdetachstate(&mut attr, libc::PTHREAD_CREATE_DETACHED);
        let mut t: libc::pthread_t = 0;
        // The real `pthread_create`, not our hook: the control thread takes no lock, so it is
        // not counted among the program's threads, and no unwind cache is built for it.
        let ok = crate::real::thread_create(&mut t, &attr, f, arg) == 0;
        libc::pthread_attr_destroy(&mut attr);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, core::ptr::null_mut());
        ok
    }
}

/// In a fork child's handler (which keeps errno for the program): closes its copy of the
/// parent's listening socket, writing nothing of ours (the child may still share it with its
/// parent).
pub(crate) fn close_inherited() {
    let fd = LISTEN_FD.load(Relaxed);
    if fd >= 0 {
        // SAFETY: the parent's socket, inherited; nothing of the child uses it.
        unsafe { libc::close(fd) };
    }
}

/// In a fork child with its own copy of our memory ([`close_inherited`] closed the parent's
/// socket): the parent's thread is not here, and its socket is not ours. `waiter`: `None` in the
/// fork handler, which starts the child's thread and socket now; at a pending child's first lock
/// (a hook: no thread is created there), whether its handler's thread waits for this
/// ([`start_waiter`]: it binds the socket once the tables are the child's own).
pub(crate) fn after_fork(waiter: Option<bool>) {
    live::forget_sock_path();
    LISTEN_FD.store(-1, Relaxed);
    arm_sampling(clock::monotonic_ns());
    match waiter {
        None => {
            RUNNING.store(false, Relaxed);
            start_if_needed();
        }
        Some(w) => RUNNING.store(w, Relaxed),
    }
}

fn close_listen() {
    let fd = LISTEN_FD.swap(-1, Relaxed);
    if fd >= 0 {
        // SAFETY: our descriptor.
        unsafe { libc::close(fd) };
    }
}

/// The control directory of user `uid`: `/tmp/lockmeter-UID`.
fn control_dir(p: &mut PathBuf, uid: u32) {
    p.clear().push(b"/tmp/lockmeter-").push_u64(uid as u64);
}

/// Creates (or checks) the 0700 control directory and binds `PID.sock` in it.
fn bind_socket() {
    // SAFETY: geteuid/getpid have no preconditions.
    let (uid, pid) = unsafe { (libc::geteuid(), libc::getpid()) };
    let mut path = PathBuf::new();
    control_dir(&mut path, uid);
    // SAFETY: NUL-terminated path; a zeroed stat is a valid out-buffer.
    let ok_dir = unsafe {
        libc::mkdir(path.as_ptr(), 0o700);
        let mut st: libc::stat = core::mem::zeroed();
        libc::lstat(path.as_ptr(), &mut st) == 0
            && st.st_mode & libc::S_IFMT == libc::S_IFDIR
            && st.st_uid == uid
            && st.st_mode & 0o077 == 0
    };
    if !ok_dir {
        sys::write_stderr(b"lockmeter: ");
        sys::write_stderr(path.bytes());
        sys::write_stderr(
            b" is not a directory of this user with mode 0700; remove it to use lockmeter ctl\n",
        );
        return;
    }
    path.push(b"/").push_u64(pid as u64).push(b".sock");
    // Bound under a temporary name, `PID.sock.new`, and renamed to `PID.sock` once it listens:
    // a connection to `PID.sock` is never refused while we live, so `lockmeter` can remove a
    // socket that refuses one as a dead process's (`cli/src/stale.rs`).
    // SAFETY: zeroed sockaddr_un is valid; the path fits (checked) and is copied in, and the
    // temporary name in `sun_path` stays NUL-terminated (the zeroes after it).
    unsafe {
        let mut addr: libc::sockaddr_un = core::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let bytes = path.bytes();
        const NEW: &[u8] = b".new";
        if bytes.len() + NEW.len() >= addr.sun_path.len() || bytes.len() >= live::SOCK_PATH_MAX {
            return;
        }
        for (d, &s) in addr.sun_path.iter_mut().zip(bytes.iter().chain(NEW)) {
            *d = s as libc::c_char;
        }
        let tmp = addr.sun_path.as_ptr();
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return;
        }
        // Left by a process of this pid killed between its bind and its rename. The rename
        // replaces a socket left by an earlier image of this pid (exec) or a dead process of it.
        libc::unlink(tmp);
        let len = size_of::<libc::sockaddr_un>() as libc::socklen_t;
        if libc::bind(fd, (&addr as *const libc::sockaddr_un).cast(), len) != 0 {
            libc::close(fd);
            return;
        }
        if libc::listen(fd, 8) != 0 || libc::rename(tmp, path.as_ptr()) != 0 {
            libc::close(fd);
            libc::unlink(tmp);
            return;
        }
        live::set_sock_path(bytes);
        let (dev, ino) = identity(fd).unwrap_or((0, 0));
        LISTEN_DEV.store(dev, Relaxed);
        LISTEN_INO.store(ino, Relaxed);
        LISTEN_FD.store(fd, Relaxed);
    }
}

/// The (device, inode) of descriptor `fd`.
fn identity(fd: c_int) -> Option<(u64, u64)> {
    // SAFETY: a zeroed stat is a valid out-buffer.
    unsafe {
        let mut st: libc::stat = core::mem::zeroed();
        (libc::fstat(fd, &mut st) == 0).then_some((st.st_dev as u64, st.st_ino))
    }
}

/// Whether `fd` is still our listening socket (the program may have closed it).
fn still_ours(fd: c_int) -> bool {
    identity(fd) == Some((LISTEN_DEV.load(Relaxed), LISTEN_INO.load(Relaxed)))
}

extern "C" fn thread_main(_: *mut c_void) -> *mut c_void {
    name_thread();
    loop {
        let now = clock::monotonic_ns();
        let delay = DELAY_END_NS.load(Relaxed);
        if delay != 0 && now >= delay {
            DELAY_END_NS.store(0, Relaxed);
            live::resume();
            arm_duration(now);
        }
        let dur = DURATION_END_NS.load(Relaxed);
        if dur != 0 && now >= dur {
            DURATION_END_NS.store(0, Relaxed);
            live::pause();
        }
        let sample = NEXT_SAMPLE_NS.load(Relaxed);
        if sample != 0 && now >= sample {
            dump::sample();
            // The period doubles when the time series merges its intervals.
            let p = crate::timeline::PERIOD_NS.load(Relaxed).max(1);
            let next = sample.saturating_add(p);
            NEXT_SAMPLE_NS.store(if next > now { next } else { now.saturating_add(p) }, Relaxed);
        }
        let next = [
            DELAY_END_NS.load(Relaxed),
            DURATION_END_NS.load(Relaxed),
            NEXT_SAMPLE_NS.load(Relaxed),
        ]
        .into_iter()
        .filter(|&t| t != 0)
        .min();
        let fd = LISTEN_FD.load(Relaxed);
        if fd < 0 && next.is_none() {
            RUNNING.store(false, Relaxed);
            return core::ptr::null_mut();
        }
        let timeout_ms = match next {
            // Rounded up, so that the deadline has passed when poll returns.
            Some(t) => (t.saturating_sub(now).div_ceil(1_000_000)).min(60_000) as c_int,
            None => -1,
        };
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd (a negative fd is ignored by poll).
        let r = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if fd >= 0 && r > 0 && (pfd.revents & !libc::POLLIN != 0 || !still_ours(fd)) {
            // Closed by the program (POLLNVAL), or the number now names something of its own:
            // control ends here (the descriptor, if any, is the program's: left alone).
            LISTEN_FD.store(-1, Relaxed);
            live::unlink_sock();
            continue;
        }
        if r > 0 && pfd.revents & libc::POLLIN != 0 {
            // SAFETY: accepting on our listening socket; no address wanted.
            let c = unsafe {
                libc::accept4(fd, core::ptr::null_mut(), core::ptr::null_mut(), libc::SOCK_CLOEXEC)
            };
            if c >= 0 {
                serve(c);
                // SAFETY: the connection is ours.
                unsafe { libc::close(c) };
            }
        }
    }
}

/// Whether the peer of `c` is this process's user or root.
fn peer_allowed(c: c_int) -> bool {
    // SAFETY: a zeroed ucred is a valid out-buffer of the given length.
    unsafe {
        let mut cred: libc::ucred = core::mem::zeroed();
        let mut len = size_of::<libc::ucred>() as libc::socklen_t;
        libc::getsockopt(
            c,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        ) == 0
            && (cred.uid == 0 || cred.uid == libc::geteuid())
    }
}

fn set_timeouts(c: c_int) {
    let tv = libc::timeval { tv_sec: IO_TIMEOUT_S, tv_usec: 0 };
    for opt in [libc::SO_RCVTIMEO, libc::SO_SNDTIMEO] {
        // SAFETY: a valid timeval of the given length.
        unsafe {
            libc::setsockopt(
                c,
                libc::SOL_SOCKET,
                opt,
                (&tv as *const libc::timeval).cast(),
                size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
    }
}

/// Reads one request line (at most 64 bytes) into `buf`.
fn read_line(c: c_int, buf: &mut [u8; 64]) -> &[u8] {
    let mut n = 0;
    while n < buf.len() {
        let Some(rest) = buf.get_mut(n..) else { break };
        // SAFETY: `rest` is a valid writable buffer.
        let r = unsafe { libc::recv(c, rest.as_mut_ptr().cast(), rest.len(), 0) };
        if r < 0 && sys::errno() == libc::EINTR {
            continue;
        }
        if r <= 0 {
            break;
        }
        n += r as usize;
        if buf.get(..n).is_some_and(|b| b.contains(&b'\n')) {
            break;
        }
    }
    let line = buf.get(..n).unwrap_or(&[]);
    let end = line.iter().position(|&c| c == b'\n').unwrap_or(line.len());
    line.get(..end).unwrap_or(&[])
}

fn serve(c: c_int) {
    set_timeouts(c);
    if !peer_allowed(c) {
        dump::send_all(c, b"error: only the user who runs the program, or root, may control it\n");
        return;
    }
    let mut buf = [0u8; 64];
    match read_line(c, &mut buf) {
        b"snapshot" => {
            dump::snapshot(c);
        }
        b"pause" => {
            live::pause();
            // A pending --delay no longer resumes it.
            DELAY_END_NS.store(0, Relaxed);
            reply_state(c);
        }
        b"resume" => {
            DELAY_END_NS.store(0, Relaxed);
            if live::PAUSED.load(Relaxed) {
                live::resume();
            }
            reply_state(c);
        }
        b"reset" => match dump::reset() {
            Ok(()) => reply_state(c),
            Err(msg) => {
                dump::send_all(c, msg);
            }
        },
        b"status" => reply_state(c),
        _ => {
            dump::send_all(
                c,
                b"error: unknown request; use snapshot, pause, resume, reset or status\n",
            );
        }
    }
}

fn reply_state(c: c_int) {
    let mut p = PathBuf::new();
    p.clear().push(b"ok ");
    p.push(if live::PAUSED.load(Relaxed) { b"paused" } else { b"metering" });
    p.push(b"\n");
    dump::send_all(c, p.bytes());
}

//! `wait4`, `waitpid`, `waitid`: a wait for *any* child that includes clone children (`__WALL`,
//! `__WCLONE`) would also wait for this process's guardian and watcher, which are its children
//! (exit signal 0: a plain `wait` never sees them) and leave only after it is gone. A program that
//! waits that way until there is no child left (`strace -f` does, for its tracees) would wait
//! forever. So when such a wait finds no child but ours (`/proc/self/task/*/children`) and no
//! tracee (a tracer's wait reports them too: no process whose `TracerPid` is a thread of ours),
//! it returns what it would have returned without us: `ECHILD`. Every other wait goes to libc as it
//! was made. Left as it was: a wait that blocked while another child existed and that child was
//! then reaped by another thread still waits for ours.

use crate::guard::{helpers, raw};
use crate::real;
use core::ffi::c_int;

/// Whether a wait for `any` child with `options` would see our guardian or watcher, and neither
/// a child but them nor a tracee is left: then the real call would only block (or say 0 with
/// `WNOHANG`) on them.
fn only_ours_left(any: bool, options: c_int) -> bool {
    if !any || options & (libc::__WALL | libc::__WCLONE) == 0 {
        return false;
    }
    let ours = helpers();
    if ours == [0, 0] {
        return false;
    }
    let saved = crate::sys::errno();
    let left = nothing_else_to_wait_for(ours);
    crate::sys::set_errno(saved);
    left
}

/// Most threads of the program [`nothing_else_to_wait_for`] looks at (more: it says false).
const MAX_THREADS: usize = 64;

/// Whether no thread of this process has a child other than `ours` and none traces a process: a
/// tracer's wait for any child also reports its tracees (`strace -f` traces our guardian and
/// watcher in the programs it runs). False whenever `/proc` does not say.
fn nothing_else_to_wait_for(ours: [i32; 2]) -> bool {
    let mut tids = [0u64; MAX_THREADS];
    let mut n = 0;
    let mut other = false;
    let listed = each_number(c"/proc/self/task", |tid| {
        match (thread_has_other_child(tid, ours), tids.get_mut(n)) {
            (Some(false), Some(slot)) => {
                *slot = tid;
                n += 1;
                true
            }
            _ => {
                other = true;
                false
            }
        }
    });
    if !listed || other {
        return false;
    }
    let tids = tids.get(..n).unwrap_or(&[]);
    let mut traced = false;
    let listed = each_number(c"/proc", |pid| match tracer_of(pid) {
        Some(t) if !tids.contains(&t) => true,
        Some(_) => {
            traced = true;
            false
        }
        None => true, // gone, or not ours to read: not traced by us (we could read our tracees)
    });
    listed && !traced
}

/// Calls `f` with each numeric entry of directory `dir` until it returns false; false when the
/// directory could not be read.
fn each_number(dir: &core::ffi::CStr, mut f: impl FnMut(u64) -> bool) -> bool {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC;
    let at = libc::AT_FDCWD as usize;
    let fd = raw(libc::SYS_openat, [at, dir.as_ptr() as usize, flags as usize, 0]);
    if fd < 0 {
        return false;
    }
    let mut ok = true;
    let mut buf = [0u8; 4096];
    'dir: loop {
        let n = raw(libc::SYS_getdents64, [fd as usize, buf.as_mut_ptr() as usize, buf.len(), 0]);
        if n <= 0 {
            ok = n == 0;
            break;
        }
        let got = buf.get(..n as usize).unwrap_or(&[]);
        let mut off = 0usize;
        // linux_dirent64: ino u64, off i64, reclen u16, type u8, then the NUL-terminated name.
        while let Some(&[lo, hi]) = got.get(off + 16..off + 18) {
            let reclen = u16::from_ne_bytes([lo, hi]) as usize;
            if reclen == 0 {
                break;
            }
            let name = got.get(off + 19..off + reclen).unwrap_or(&[]);
            let name = name.split(|&c| c == 0).next().unwrap_or(&[]);
            if let Some(v) = crate::sys::parse_u64(name)
                && !f(v)
            {
                break 'dir;
            }
            off += reclen;
        }
    }
    raw(libc::SYS_close, [fd as usize, 0, 0, 0]);
    ok
}

/// Reads the whole file at `path` into `buf` (`None`: unreadable, or longer than `buf`).
fn read_small<'b>(path: &crate::sys::PathBuf, buf: &'b mut [u8]) -> Option<&'b [u8]> {
    let cap = buf.len();
    crate::sys::try_read_file(path.as_cstr(), buf).filter(|got| got.len() < cap)
}

/// Whether thread `tid` of this process has a child not in `ours` (`None`: unreadable, or more
/// children than we read).
fn thread_has_other_child(tid: u64, ours: [i32; 2]) -> Option<bool> {
    let mut path = crate::sys::PathBuf::new();
    path.push(b"/proc/self/task/").push_u64(tid).push(b"/children");
    let mut buf = [0u8; 4096];
    let list = read_small(&path, &mut buf)?;
    Some(
        list.split(|&c| c == b' ' || c == b'\n')
            .filter_map(crate::sys::parse_u64)
            .any(|pid| !ours.contains(&(pid as i32))),
    )
}

/// The thread that traces process `pid` (0: none), from its `/proc/PID/status`.
fn tracer_of(pid: u64) -> Option<u64> {
    let mut path = crate::sys::PathBuf::new();
    path.push(b"/proc/").push_u64(pid).push(b"/status");
    let mut buf = [0u8; 4096];
    let status = read_small(&path, &mut buf)?;
    let key = b"TracerPid:";
    let at = status.windows(key.len()).position(|w| w == key)? + key.len();
    let rest = status.get(at..)?;
    let v = rest.split(|&c| c == b'\n').next()?;
    let v: &[u8] = v.trim_ascii();
    crate::sys::parse_u64(v)
}

/// `ECHILD`, as the wait returns with no child to wait for.
fn echild() -> c_int {
    crate::sys::set_errno(libc::ECHILD);
    -1
}

/// Interposed `wait4`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn wait4(
    pid: libc::pid_t,
    status: *mut c_int,
    options: c_int,
    usage: *mut libc::rusage,
) -> libc::pid_t {
    if only_ours_left(pid == -1, options) {
        return echild();
    }
    // SAFETY: forwarded with the caller's arguments and contract.
    unsafe { real::wait4(pid, status, options, usage) }
}

/// Interposed `waitpid`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn waitpid(
    pid: libc::pid_t,
    status: *mut c_int,
    options: c_int,
) -> libc::pid_t {
    if only_ours_left(pid == -1, options) {
        return echild();
    }
    // SAFETY: forwarded with the caller's arguments and contract.
    unsafe { real::waitpid(pid, status, options) }
}

/// Interposed `waitid`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn waitid(
    idtype: libc::idtype_t,
    id: libc::id_t,
    info: *mut libc::siginfo_t,
    options: c_int,
) -> c_int {
    if only_ours_left(idtype == libc::P_ALL, options) {
        return echild();
    }
    // SAFETY: forwarded with the caller's arguments and contract.
    unsafe { real::waitid(idtype, id, info, options) }
}

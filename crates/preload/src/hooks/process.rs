//! The process hooks: `_exit`, `_Exit` and the `exec*` family write the profile first (an exec
//! that fails withdraws it).

use crate::real;
use core::ffi::{c_char, c_int};

/// Interposed `_exit`: writes the profile, then exits.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _exit(status: c_int) -> ! {
    crate::dump::write_profile(crate::dump::End::UnderscoreExit(status));
    // SAFETY: forwarded.
    unsafe { real::exit_(status) };
    // SAFETY: _exit does not return; if the real one somehow did, end the process by syscall.
    unsafe { libc::syscall(libc::SYS_exit_group, status) };
    #[allow(clippy::empty_loop)]
    loop {}
}

/// Interposed `_Exit`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _Exit(status: c_int) -> ! {
    crate::dump::write_profile(crate::dump::End::UnderscoreExit(status));
    // SAFETY: forwarded.
    unsafe { real::exit_upper(status) };
    // SAFETY: as in `_exit`.
    unsafe { libc::syscall(libc::SYS_exit_group, status) };
    #[allow(clippy::empty_loop)]
    loop {}
}

/// Runs an exec call with the profile written first; if the exec fails, the written profile is
/// withdrawn and metering goes on, with `errno` as the exec left it. `f` gets the environment to
/// pass: `envp` plus `LOCKMETER_IMAGE_SEQ`, so that the new image knows its place in the pid.
fn exec_common(envp: *const *const c_char, f: impl FnOnce(*const *const c_char) -> c_int) -> c_int {
    let token = crate::dump::before_exec();
    let env = crate::dump::env_with_image_seq(envp);
    let r = f(env);
    let e = crate::sys::errno();
    crate::dump::exec_failed(token);
    crate::sys::set_errno(e);
    r
}

unsafe extern "C" {
    static environ: *const *const c_char;
}

/// The process environment.
fn current_env() -> *const *const c_char {
    // SAFETY: reading the libc global `environ` (a pointer), as exec* itself does.
    unsafe { environ }
}

/// Interposed `execve`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execve(
    p: *const c_char,
    a: *const *const c_char,
    e: *const *const c_char,
) -> c_int {
    // SAFETY: forwarded with the caller's arguments.
    exec_common(e, |e| unsafe { real::execve(p, a, e) })
}

/// Interposed `execv`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execv(p: *const c_char, a: *const *const c_char) -> c_int {
    // SAFETY: forwarded with the caller's arguments; execv is execve with `environ`.
    exec_common(current_env(), |e| unsafe { real::execve(p, a, e) })
}

/// Interposed `execvp`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execvp(p: *const c_char, a: *const *const c_char) -> c_int {
    // SAFETY: forwarded with the caller's arguments; execvp is execvpe with `environ`.
    exec_common(current_env(), |e| unsafe { real::execvpe(p, a, e) })
}

/// Interposed `execvpe`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execvpe(
    p: *const c_char,
    a: *const *const c_char,
    e: *const *const c_char,
) -> c_int {
    // SAFETY: forwarded with the caller's arguments.
    exec_common(e, |e| unsafe { real::execvpe(p, a, e) })
}

/// Interposed `fexecve`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fexecve(
    fd: c_int,
    a: *const *const c_char,
    e: *const *const c_char,
) -> c_int {
    // SAFETY: forwarded with the caller's arguments.
    exec_common(e, |e| unsafe { real::fexecve(fd, a, e) })
}

/// Interposed `execveat`.
///
/// # Safety
/// The libc contract.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn execveat(
    fd: c_int,
    p: *const c_char,
    a: *const *const c_char,
    e: *const *const c_char,
    f: c_int,
) -> c_int {
    // SAFETY: forwarded with the caller's arguments.
    exec_common(e, |e| unsafe { real::execveat(fd, p, a, e, f) })
}

// ---- execl, execlp, execle: variadic, so a trampoline spills the argument registers ----
//
// On entry: rdi = path, rsi = arg0, rdx/rcx/r8/r9 = the next arguments, [rsp] = return address,
// [rsp+8..] = the remaining arguments. The trampoline pushes the six argument registers so that
// they sit right below the return address, passes a pointer to them, and returns what the Rust
// side returns (it only returns when the exec failed).

#[cfg(target_arch = "x86_64")]
macro_rules! execl_trampoline {
    ($name:ident => $imp:ident) => {
        #[doc = concat!("Interposed `", stringify!($name), "` (variadic).")]
        ///
        /// # Safety
        /// The libc contract: a NULL-terminated list of `char *` arguments.
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name() -> c_int {
            core::arch::naked_asm!(
                "push r9",
                "push r8",
                "push rcx",
                "push rdx",
                "push rsi",
                "push rdi",
                "mov rdi, rsp",
                "sub rsp, 8",
                "call {}",
                "add rsp, 56",
                "ret",
                sym $imp
            );
        }
    };
}

#[cfg(target_arch = "x86_64")]
execl_trampoline!(execl => imp_execl);
#[cfg(target_arch = "x86_64")]
execl_trampoline!(execlp => imp_execlp);
#[cfg(target_arch = "x86_64")]
execl_trampoline!(execle => imp_execle);

/// Most arguments an `execl*` call may pass (the kernel's own limit is far above any real use).
#[cfg(target_arch = "x86_64")]
const EXECL_MAX_ARGS: usize = 4096;

/// The variadic arguments saved by the trampoline: slots 0..6 are the registers (path first),
/// slot 6 the return address, slots 7.. the arguments passed on the stack.
#[cfg(target_arch = "x86_64")]
struct VaArgs(*const usize);

#[cfg(target_arch = "x86_64")]
impl VaArgs {
    /// Argument `i` (0 = path).
    ///
    /// # Safety
    /// `i` must not go past the argument list the caller passed.
    unsafe fn get(&self, i: usize) -> usize {
        let slot = if i < 6 { i } else { i + 1 };
        // SAFETY: the trampoline saved six registers below the return address, and the caller's
        // stack arguments follow it; the caller guarantees `i` is within the list.
        unsafe { *self.0.add(slot) }
    }
}

/// Collects `arg0, arg1, ..., NULL` into `argv`; returns the index after the NULL, or None when
/// the list is longer than `argv`.
///
/// # Safety
/// `va` must be the trampoline's save area of an `execl*` call.
#[cfg(target_arch = "x86_64")]
unsafe fn collect_args(
    va: &VaArgs,
    argv: &mut [*const c_char; EXECL_MAX_ARGS + 1],
) -> Option<usize> {
    for (n, slot) in argv.iter_mut().enumerate() {
        // SAFETY: arguments are read up to and including the terminating NULL.
        let a = unsafe { va.get(n + 1) };
        *slot = a as *const c_char;
        if a == 0 {
            return Some(n + 2);
        }
    }
    None
}

#[cfg(target_arch = "x86_64")]
fn e2big() -> c_int {
    crate::sys::set_errno(libc::E2BIG);
    -1
}

#[cfg(target_arch = "x86_64")]
unsafe extern "C" fn imp_execl(regs: *const usize) -> c_int {
    let va = VaArgs(regs);
    let mut argv = [core::ptr::null(); EXECL_MAX_ARGS + 1];
    // SAFETY: `regs` is the trampoline's save area.
    if unsafe { collect_args(&va, &mut argv) }.is_none() {
        return e2big();
    }
    // SAFETY: slot 0 is the path argument.
    let path = unsafe { va.get(0) } as *const c_char;
    // SAFETY: a NULL-terminated argument vector built from the caller's arguments.
    exec_common(current_env(), |e| unsafe { real::execve(path, argv.as_ptr(), e) })
}

#[cfg(target_arch = "x86_64")]
unsafe extern "C" fn imp_execlp(regs: *const usize) -> c_int {
    let va = VaArgs(regs);
    let mut argv = [core::ptr::null(); EXECL_MAX_ARGS + 1];
    // SAFETY: `regs` is the trampoline's save area.
    if unsafe { collect_args(&va, &mut argv) }.is_none() {
        return e2big();
    }
    // SAFETY: slot 0 is the file argument.
    let file = unsafe { va.get(0) } as *const c_char;
    // SAFETY: as in `imp_execl`.
    exec_common(current_env(), |e| unsafe { real::execvpe(file, argv.as_ptr(), e) })
}

#[cfg(target_arch = "x86_64")]
unsafe extern "C" fn imp_execle(regs: *const usize) -> c_int {
    let va = VaArgs(regs);
    let mut argv = [core::ptr::null(); EXECL_MAX_ARGS + 1];
    // SAFETY: `regs` is the trampoline's save area.
    let Some(after) = (unsafe { collect_args(&va, &mut argv) }) else { return e2big() };
    // SAFETY: execle passes envp right after the NULL that ends the arguments.
    let envp = unsafe { va.get(after) } as *const *const c_char;
    // SAFETY: slot 0 is the path argument.
    let path = unsafe { va.get(0) } as *const c_char;
    // SAFETY: as in `imp_execl`.
    exec_common(envp, |e| unsafe { real::execve(path, argv.as_ptr(), e) })
}

//! The exec environment: `LOCKMETER_IMAGE_SEQ`, `LOCKMETER_CALIBRATION` and (on the TSC clock)
//! `LOCKMETER_TSC_HZ` passed to the next image, the profile written before an exec and withdrawn
//! when the exec fails.

use super::{
    BUFS, CALIBRATED, DUMP, DUMP_IDLE, End, IMAGE_SEQ, NS_PER_PAIR, NS_PER_STACK, PID,
    write_profile,
};
use crate::state::STATE;
use crate::sys::PathBuf;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};

/// Room for the environment passed to an exec.
const EXEC_ENV_MAX: usize = 16384;
const SEQ_VAR: &[u8] = b"LOCKMETER_IMAGE_SEQ=";
const CALIB_VAR: &[u8] = b"LOCKMETER_CALIBRATION=";
const HZ_VAR: &[u8] = b"LOCKMETER_TSC_HZ=";

/// The environment passed to an exec, built in place (ours, or a pending fork child's:
/// `fork.rs`). All zero is a valid value.
#[repr(C)]
pub(crate) struct ExecEnv {
    ptrs: [*const core::ffi::c_char; EXEC_ENV_MAX],
    var: [u8; 48],
    calib: [u8; 128],
    hz: [u8; 48],
}

struct SharedEnv(UnsafeCell<ExecEnv>);
// SAFETY: only the thread that sets EXEC_BUSY from false to true touches it.
unsafe impl Sync for SharedEnv {}

static EXEC_ENV: SharedEnv = SharedEnv(UnsafeCell::new(ExecEnv {
    ptrs: [core::ptr::null(); EXEC_ENV_MAX],
    var: [0; 48],
    calib: [0; 128],
    hz: [0; 48],
}));
pub(super) static EXEC_BUSY: AtomicBool = AtomicBool::new(false);

/// The calibration an exec'd image takes from the image before (`LOCKMETER_CALIBRATION`, these
/// figures in this order, `:`-separated): ns per metered pair, ns per stack, and the pair's
/// parts inside and outside the critical section and the real lock calls, and the bare pair,
/// in ps.
fn calibration() -> [&'static AtomicU64; 6] {
    use crate::cost::{CALIB_CS_PS, CALIB_OUT_PS, CALIB_REAL_PS, RAW_PAIR_PS};
    [&NS_PER_PAIR, &NS_PER_STACK, &CALIB_CS_PS, &CALIB_OUT_PS, &CALIB_REAL_PS, &RAW_PAIR_PS]
}

/// Takes the calibration `v` (`LOCKMETER_CALIBRATION`) passed on by the image before; false,
/// and nothing taken, unless it has every figure of [`calibration`].
pub(crate) fn inherit_calibration(v: Option<&[u8]>) -> bool {
    let fields = calibration();
    let mut got = [0u64; 6];
    let mut it = v.unwrap_or(&[]).split(|&c| c == b':');
    for x in got.iter_mut() {
        match it.next().and_then(crate::sys::parse_u64) {
            Some(n) => *x = n,
            None => return false,
        }
    }
    if it.next().is_some() {
        return false;
    }
    for (f, n) in fields.iter().zip(got) {
        f.store(n, Relaxed);
    }
    true
}

/// `envp` with `LOCKMETER_IMAGE_SEQ=<next>`, once calibrated `LOCKMETER_CALIBRATION`, and on the
/// TSC clock `LOCKMETER_TSC_HZ` (the rate this image measured or was given: the next image does
/// not busy-wait 3 ms to measure it again) in front (any older ones left out), built in a static
/// array; `envp` itself if metering is off, another thread is exec-ing, or it does not fit.
pub(crate) fn env_with_image_seq(
    envp: *const *const core::ffi::c_char,
) -> *const *const core::ffi::c_char {
    if crate::state::fork_pending() {
        return pending_env(envp); // a fork child before its first lock
    }
    // A vfork child shares our memory (and the exec'd image is a new pid, which starts at 0):
    // leave both its environment and our state alone.
    // SAFETY: getpid has no preconditions.
    if envp.is_null() || unsafe { libc::getpid() } as u32 != PID.load(Relaxed) {
        return envp;
    }
    if EXEC_BUSY.swap(true, Acquire) {
        return envp;
    }
    // SAFETY: we own EXEC_ENV (EXEC_BUSY).
    let env = unsafe { &mut *EXEC_ENV.0.get() };
    match fill_exec_env(env, IMAGE_SEQ.load(Relaxed), envp) {
        Some(e) => e,
        None => {
            EXEC_BUSY.store(false, Release);
            envp
        }
    }
}

/// [`env_with_image_seq`] of a fork child before its first lock (`fork.rs`), in its private
/// pages: the next image is its first exec (1).
fn pending_env(envp: *const *const core::ffi::c_char) -> *const *const core::ffi::c_char {
    if envp.is_null() {
        return envp;
    }
    let Some(env) = crate::fork::exec_env_buf() else { return envp };
    fill_exec_env(env, 0, envp).unwrap_or_else(|| {
        crate::fork::end_undone();
        envp
    })
}

/// Builds in `env` the environment [`env_with_image_seq`] describes, for an image numbered
/// `seq`; `None` when it does not fit. `envp` is not null.
fn fill_exec_env(
    env: &mut ExecEnv,
    seq: u32,
    envp: *const *const core::ffi::c_char,
) -> Option<*const *const core::ffi::c_char> {
    let mut v = PathBuf::new();
    v.push(SEQ_VAR).push_u64(seq as u64 + 1);
    let bytes = v.bytes();
    let n = bytes.len().min(env.var.len() - 1);
    env.var[..n].copy_from_slice(&bytes[..n]);
    env.var[n] = 0;
    env.ptrs[0] = env.var.as_ptr().cast();
    let mut out = 1;
    if CALIBRATED.load(Relaxed) {
        let mut c = PathBuf::new();
        c.push(CALIB_VAR);
        for (i, f) in calibration().iter().enumerate() {
            c.push(if i == 0 { b"" } else { b":" }).push_u64(f.load(Relaxed));
        }
        let bytes = c.bytes();
        let n = bytes.len().min(env.calib.len() - 1);
        env.calib[..n].copy_from_slice(&bytes[..n]);
        env.calib[n] = 0;
        env.ptrs[out] = env.calib.as_ptr().cast();
        out += 1;
    }
    let calib_set = out > 1;
    let hz_set = lockmeter_core::clock::source() == lockmeter_core::clock::Source::Tsc;
    if hz_set {
        let mut h = PathBuf::new();
        h.push(HZ_VAR).push_u64(crate::state::CFG.calib_hz.load(Relaxed));
        let bytes = h.bytes();
        let n = bytes.len().min(env.hz.len() - 1);
        env.hz[..n].copy_from_slice(&bytes[..n]);
        env.hz[n] = 0;
        env.ptrs[out] = env.hz.as_ptr().cast();
        out += 1;
    }
    let mut i = 0;
    loop {
        // SAFETY: `envp` is a NULL-terminated array of C strings (the exec contract).
        let e = unsafe { *envp.add(i) };
        if e.is_null() {
            break;
        }
        i += 1;
        // SAFETY: `e` is a NUL-terminated string.
        let s = unsafe { core::ffi::CStr::from_ptr(e) }.to_bytes();
        if s.starts_with(SEQ_VAR)
            || (calib_set && s.starts_with(CALIB_VAR))
            || (hz_set && s.starts_with(HZ_VAR))
        {
            continue;
        }
        if out + 1 >= EXEC_ENV_MAX {
            return None;
        }
        env.ptrs[out] = e;
        out += 1;
    }
    env.ptrs[out] = core::ptr::null();
    Some(env.ptrs.as_ptr())
}

/// Before an exec: writes the profile. Returns whether one was written (to withdraw on failure).
pub(crate) fn before_exec() -> bool {
    write_profile(End::Exec)
}

/// The exec failed: withdraws the profile just written and goes on metering.
pub(crate) fn exec_failed(written: bool) {
    if crate::state::fork_pending() {
        crate::fork::end_undone(); // a fork child before its first lock: its line stays
        return;
    }
    // SAFETY: getpid has no preconditions.
    if unsafe { libc::getpid() } as u32 != PID.load(Relaxed) {
        return; // a vfork child: nothing of ours was taken
    }
    EXEC_BUSY.store(false, Release);
    if !written {
        return;
    }
    // SAFETY: DUMP is 2 (we wrote it) and no other thread dumps while it is not 0.
    let b = unsafe { &mut *BUFS.0.get() };
    // The file we just wrote (none when the image left a line in the manifest instead: the line
    // stays; `run` keeps the image's last entry).
    if !b.path.bytes().is_empty() {
        // SAFETY: NUL-terminated path of the file we just wrote.
        unsafe { libc::unlink(b.path.as_ptr()) };
    }
    DUMP.store(DUMP_IDLE, Release);
    STATE.store(crate::live::running_state(), Release);
}

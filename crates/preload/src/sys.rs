//! Small async-signal-safe helpers: errno, environment, raw file I/O, the current CPU.
//!
//! Nothing here allocates or takes a lock; file I/O uses raw `open`/`read`/`write` calls.

use core::ffi::{CStr, c_char, c_int};
use core::sync::atomic::{AtomicI32, AtomicU8, Ordering::Relaxed};

/// Writes `msg` to stderr and aborts. For the impossible only.
pub(crate) fn fatal(msg: &str) -> ! {
    write_stderr(msg.as_bytes());
    // SAFETY: abort has no preconditions.
    unsafe { libc::abort() }
}

/// Writes bytes to fd 2, ignoring errors.
pub(crate) fn write_stderr(b: &[u8]) {
    write_all(2, b);
}

/// Writes all of `b` to `fd`; false on error.
pub(crate) fn write_all(fd: c_int, mut b: &[u8]) -> bool {
    while !b.is_empty() {
        // SAFETY: `b` is a valid readable buffer of `b.len()` bytes.
        let n = unsafe { libc::write(fd, b.as_ptr().cast(), b.len()) };
        if n < 0 {
            if errno() == libc::EINTR {
                continue;
            }
            return false;
        }
        b = b.get(n as usize..).unwrap_or(&[]);
    }
    true
}

/// The calling thread's errno.
#[inline]
pub(crate) fn errno() -> c_int {
    // SAFETY: __errno_location always returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() }
}

/// Restores errno.
#[inline]
pub(crate) fn set_errno(v: c_int) {
    // SAFETY: as in `errno`.
    unsafe { *libc::__errno_location() = v };
}

/// The value of environment variable `name` (NUL-terminated), without allocating.
pub(crate) fn getenv(name: &CStr) -> Option<&'static [u8]> {
    // SAFETY: `name` is NUL-terminated; getenv returns a pointer into the environment, valid until
    // the environment is modified (we only read it during start-up).
    let p = unsafe { libc::getenv(name.as_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: getenv returned a NUL-terminated string.
    Some(unsafe { CStr::from_ptr(p) }.to_bytes())
}

pub(crate) use lockmeter_core::settings::parse_u64;

/// A [`Setting`](lockmeter_core::settings::Setting) of kind count, from the environment.
pub(crate) fn env_count(s: &lockmeter_core::settings::Setting) -> u64 {
    s.count(getenv(s.env_c))
}

/// Reads the file at `path` (NUL-terminated) into `buf`; returns the bytes read (none when it
/// cannot be opened).
pub(crate) fn read_file<'b>(path: &CStr, buf: &'b mut [u8]) -> &'b [u8] {
    try_read_file(path, buf).unwrap_or(&[])
}

/// Reads the file at `path` (NUL-terminated) into `buf` until its end or `buf` is full; returns
/// the bytes read, `None` when it cannot be opened.
pub(crate) fn try_read_file<'b>(path: &CStr, buf: &'b mut [u8]) -> Option<&'b [u8]> {
    // SAFETY: `path` is NUL-terminated.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return None;
    }
    let mut n = 0usize;
    while n < buf.len() {
        let rest = buf.get_mut(n..).unwrap_or(&mut []);
        // SAFETY: `rest` is a valid writable buffer.
        let r = unsafe { libc::read(fd, rest.as_mut_ptr().cast(), rest.len()) };
        if r < 0 && errno() == libc::EINTR {
            continue;
        }
        if r <= 0 {
            break;
        }
        n += r as usize;
    }
    // SAFETY: `fd` is ours.
    unsafe { libc::close(fd) };
    buf.get(..n)
}

/// Kernel thread id of the caller.
pub(crate) fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}

/// Offset of glibc's `struct rseq` from the thread pointer, when glibc registered rseq.
/// (In `state::HOT`'s line, as `CPU_MODE`: see there.)
static RSEQ_OFFSET: &AtomicI32 = &crate::state::HOT.rseq_offset;
/// 0 = unknown, 1 = rseq usable, 2 = use sched_getcpu, 3 = `rdpid` (x86_64).
static CPU_MODE: &AtomicU8 = &crate::state::HOT.cpu_mode;

/// [`CPU_MODE`]: the CPU number from `rdpid`.
const CPU_RDPID: u8 = 3;

/// Chooses how [`current_cpu`] reads the CPU number (constructor): `rdpid` where the CPU has it
/// and the kernel keeps the CPU number in `TSC_AUX` (x86_64 Linux stores `node << 12 | cpu` there
/// for its own `getcpu`; checked against `sched_getcpu`), as it reads no memory (a cache line less
/// per acquisition than the rseq area, which a program like memcached evicts between two lock
/// calls); else glibc's rseq area; else `sched_getcpu`.
///
/// # Safety
/// As for [`init_rseq`].
pub(crate) unsafe fn init_cpu_id(off: *const isize, size: *const u32) {
    // SAFETY: the caller's contract.
    unsafe { init_rseq(off, size) };
    if rdpid_agrees() {
        CPU_MODE.store(CPU_RDPID, Relaxed);
    }
}

/// Whether the CPU has `rdpid` (CPUID leaf 7, ECX bit 22) and it gives the CPU number
/// `sched_getcpu` gives (a read between two `rdpid` that agree, so that no migration came
/// between; a few tries).
#[cfg(target_arch = "x86_64")]
fn rdpid_agrees() -> bool {
    use core::arch::x86_64::{__cpuid, __cpuid_count};
    // Leaf 7 only when the maximum leaf allows it.
    let has = __cpuid(0).eax >= 7 && __cpuid_count(7, 0).ecx & (1 << 22) != 0;
    if !has {
        return false;
    }
    for _ in 0..8 {
        let a = rdpid_cpu();
        // SAFETY: sched_getcpu has no preconditions.
        let b = unsafe { libc::sched_getcpu() };
        if a == rdpid_cpu() && b >= 0 {
            return a == b as u32;
        }
    }
    false
}

#[cfg(not(target_arch = "x86_64"))]
fn rdpid_agrees() -> bool {
    false
}

/// The CPU number in `TSC_AUX` (Linux: `node << 12 | cpu`), read by `rdpid`: no memory access.
/// Only where [`rdpid_agrees`].
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn rdpid_cpu() -> u32 {
    let v: u64;
    // SAFETY: only executed once CPUID reported `rdpid` (`rdpid_agrees`); reads TSC_AUX only.
    unsafe {
        core::arch::asm!("rdpid {v}", v = out(reg) v, options(nomem, nostack, preserves_flags))
    };
    (v & 0xfff) as u32
}

/// Asks the CPU to bring the line at `p` into its caches without waiting for it: a hint, which
/// never faults (an unmapped address is ignored), so `p` need not be valid. Unlike a load, it
/// does not hold back a later `lock`-prefixed instruction on x86, so a miss on it overlaps with
/// the trylock's.
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` is in every x86_64 CPU (SSE); a prefetch never faults nor writes.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast())
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: `prfm` is a hint in every AArch64 CPU; it never faults nor writes.
    unsafe {
        core::arch::asm!("prfm pldl1keep, [{p}]", p = in(reg) p, options(nostack, preserves_flags, readonly))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    let _ = p;
}

/// Finds glibc's rseq area from the addresses of glibc's `__rseq_offset` and `__rseq_size` (glibc
/// >= 2.35 exports them; null when it does not).
///
/// # Safety
/// Each pointer is null or points at the glibc variable of that name.
unsafe fn init_rseq(off: *const isize, size: *const u32) {
    if off.is_null()
        || size.is_null()
        || !cfg!(any(target_arch = "x86_64", target_arch = "aarch64"))
    {
        CPU_MODE.store(2, Relaxed);
        return;
    }
    // SAFETY: both point at glibc's exported, initialized read-only variables (the caller's
    // contract).
    let (off, size) = unsafe { (*off, *size) };
    let Ok(off) = i32::try_from(off) else {
        CPU_MODE.store(2, Relaxed);
        return;
    };
    if size < 8 {
        CPU_MODE.store(2, Relaxed);
        return;
    }
    RSEQ_OFFSET.store(off, Relaxed);
    CPU_MODE.store(1, Relaxed);
}

/// The thread pointer (x86_64 reads the rseq area `%fs`-relative instead: see `rseq_cpu_id`).
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn thread_pointer() -> usize {
    let tp: usize;
    #[cfg(target_arch = "aarch64")]
    // SAFETY: tpidr_el0 holds the thread pointer on aarch64 Linux.
    unsafe {
        core::arch::asm!("mrs {}, tpidr_el0", out(reg) tp, options(nostack, nomem, preserves_flags))
    };
    #[cfg(not(target_arch = "aarch64"))]
    {
        tp = 0;
    }
    tp
}

/// The `cpu_id` of the calling thread's `struct rseq`, `off` bytes from the thread pointer: read
/// `%fs`-relative on x86_64 (the thread pointer itself, `%fs:0`, is not loaded: a line less).
///
/// glibc registered rseq for every thread (checked at start-up: `__rseq_size` > 0); `cpu_id` is
/// the u32 at offset 4 of `struct rseq`, which the kernel keeps current.
#[inline(always)]
fn rseq_cpu_id(off: isize) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        let cpu: u32;
        // SAFETY: `off` is glibc's `__rseq_offset`: the thread's rseq area lies there, for every
        // thread (see above). Not `pure`: the kernel changes it between two reads.
        unsafe {
            core::arch::asm!(
                "mov {c:e}, dword ptr fs:[{o} + 4]",
                c = out(reg) cpu,
                o = in(reg) off,
                options(nostack, readonly, preserves_flags)
            );
        }
        cpu
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let p = thread_pointer().wrapping_add(off as usize).wrapping_add(4);
        // SAFETY: as above.
        unsafe { core::ptr::read_volatile(p as *const u32) }
    }
}

/// The CPU the caller runs on (may be stale by the time it is used, as any CPU number).
#[inline(always)]
pub(crate) fn current_cpu() -> u32 {
    #[cfg(target_arch = "x86_64")]
    if CPU_MODE.load(Relaxed) == CPU_RDPID {
        return rdpid_cpu();
    }
    current_cpu_read()
}

/// [`current_cpu`] from glibc's rseq area, else `sched_getcpu` (out of line on x86_64, where
/// `rdpid` is the usual way: the hooks' code stays short).
#[cfg_attr(target_arch = "x86_64", inline(never))]
#[cfg_attr(not(target_arch = "x86_64"), inline(always))]
fn current_cpu_read() -> u32 {
    if CPU_MODE.load(Relaxed) == 1 {
        let cpu = rseq_cpu_id(RSEQ_OFFSET.load(Relaxed) as isize);
        if cpu < u32::MAX - 1 {
            return cpu;
        }
    }
    // SAFETY: sched_getcpu has no preconditions.
    let c = unsafe { libc::sched_getcpu() };
    if c < 0 { 0 } else { c as u32 }
}

/// `v` in decimal, written at the end of `buf` (20 digits hold any `u64`): the digits.
pub(crate) fn decimal(mut v: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    // No indexing: nothing here can panic (hooks call it).
    while let Some(d) = i.checked_sub(1).and_then(|j| buf.get_mut(j)) {
        *d = b'0' + (v % 10) as u8;
        i -= 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.get(i..).unwrap_or(&[])
}

/// A NUL-terminated path built in a fixed buffer.
pub(crate) struct PathBuf {
    buf: [u8; 4096],
    len: usize,
}

impl PathBuf {
    pub(crate) const fn new() -> Self {
        PathBuf { buf: [0; 4096], len: 0 }
    }
    /// Appends bytes, truncating at capacity (the last byte stays NUL).
    pub(crate) fn push(&mut self, b: &[u8]) -> &mut Self {
        for &c in b {
            if self.len + 1 >= self.buf.len() {
                break;
            }
            if let Some(d) = self.buf.get_mut(self.len) {
                *d = c;
            }
            self.len += 1;
        }
        if let Some(d) = self.buf.get_mut(self.len) {
            *d = 0;
        }
        self
    }
    /// Appends a decimal number.
    pub(crate) fn push_u64(&mut self, v: u64) -> &mut Self {
        self.push(decimal(v, &mut [0; 20]))
    }
    pub(crate) fn clear(&mut self) -> &mut Self {
        self.len = 0;
        if let Some(d) = self.buf.get_mut(0) {
            *d = 0;
        }
        self
    }
    pub(crate) fn as_ptr(&self) -> *const c_char {
        self.buf.as_ptr().cast()
    }
    /// The path as a C string (`push` keeps it NUL-terminated).
    pub(crate) fn as_cstr(&self) -> &CStr {
        CStr::from_bytes_until_nul(&self.buf).unwrap_or(c"")
    }
    pub(crate) fn bytes(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&[])
    }
}

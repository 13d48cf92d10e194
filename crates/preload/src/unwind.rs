//! Call stacks of the program, unwound inside the process from `.eh_frame` (framehop).
//!
//! Works without frame pointers: the unwind information every x86_64 and aarch64 binary carries
//! for C++ exceptions and Rust panics describes every frame. At start-up the constructor lists the
//! loaded objects (`dl_iterate_phdr`) and gives framehop each one's `.eh_frame_hdr`, `.eh_frame`
//! and code, as slices of the mapped image (nothing is read from disk). Unwind caches (about
//! 32 KiB each) come from a pool that stays a few caches ahead of the threads the program
//! creates: built at start-up and topped up in `pthread_create` (hooks/thread.rs), never in a
//! lock hook; a thread takes one with its table. Unwinding itself allocates nothing,
//! takes no lock and makes no system call: stack reads are bounded to the thread's own stack.
//!
//! Libraries loaded later with `dlopen` are not known: a stack is cut at the first frame in one.

use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering::*};
use framehop::{
    ExplicitModuleSectionInfo, FrameAddress, Module, MustNotAllocateDuringUnwind, Unwinder,
};

#[cfg(target_arch = "aarch64")]
use framehop::aarch64::{CacheAarch64 as Cache, UnwindRegsAarch64 as Regs, UnwinderAarch64 as Unw};
#[cfg(target_arch = "x86_64")]
use framehop::x86_64::{CacheX86_64 as Cache, UnwindRegsX86_64 as Regs, UnwinderX86_64 as Unw};

type Data = &'static [u8];
type TheUnwinder = Unw<Data, MustNotAllocateDuringUnwind>;
/// A per-thread unwind cache.
pub(crate) type TheCache = Cache<MustNotAllocateDuringUnwind>;

static UNWINDER: AtomicPtr<TheUnwinder> = AtomicPtr::new(core::ptr::null_mut());
/// Most caches the pool holds.
const POOL_MAX: usize = 512;
/// Caches built ahead of the threads created so far, once the program created one.
const SPARE: usize = 16;
/// Caches built ahead before that: the one the constructor's stack calibration borrows. A process
/// that never creates a thread (most of a build's or a launcher's) builds 2 caches instead of 17:
/// about 0.5 MiB less memory touched at start-up.
const SPARE_AT_START: usize = 1;
/// The caches; threads take them in order. Entries below `POOL_LEN` never change.
static POOL: [AtomicPtr<TheCache>; POOL_MAX] =
    [const { AtomicPtr::new(core::ptr::null_mut()) }; POOL_MAX];
/// Caches built (published with Release after their entry).
static POOL_LEN: AtomicUsize = AtomicUsize::new(0);
/// Caches taken.
static POOL_NEXT: AtomicUsize = AtomicUsize::new(0);
/// The most caches the pool builds (the thread limit, at most `POOL_MAX`; 0: no unwinding).
static POOL_WANT: AtomicUsize = AtomicUsize::new(0);
/// Threads created through `pthread_create` since start-up.
static CREATED: AtomicUsize = AtomicUsize::new(0);
/// Held by the thread building caches (others skip: it builds for them).
static BUILDING: AtomicBool = AtomicBool::new(false);
/// Our own code: frames in it are left out.
static OWN_START: AtomicU64 = AtomicU64::new(0);
static OWN_END: AtomicU64 = AtomicU64::new(0);
/// Top of the main thread's stack.
pub(crate) static MAIN_STACK_TOP: AtomicU64 = AtomicU64::new(0);

struct Collect {
    unwinder: TheUnwinder,
    own: usize,
}

/// Builds the unwinder and `caches` caches. Constructor only (allocates).
pub(crate) fn init(caches: usize) {
    let mut c = Collect { unwinder: TheUnwinder::new(), own: init as *const () as usize };
    // SAFETY: the callback only reads the program headers dl_iterate_phdr hands it, and the
    // mapped memory they describe; `c` outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(add_object), &mut c as *mut Collect as *mut c_void) };
    UNWINDER.store(Box::into_raw(Box::new(c.unwinder)), Release);
    POOL_WANT.store(caches.min(POOL_MAX), Relaxed);
    // First: `stack_room` finds the main thread's stack from it.
    MAIN_STACK_TOP.store(main_stack_top(), Relaxed);
    top_up();
}

/// Builds caches until the pool holds one for each thread created so far and for the main
/// thread, plus [`SPARE`] ([`SPARE_AT_START`] until a thread is created; within the thread limit),
/// in memory mapped for them first: none when that is refused (out of memory: the thread will have
/// no stacks; `pthread_create` then fails or not exactly as it would have without us). Allocates: called by the constructor and by
/// `pthread_create`, never by a lock hook. A thread that finds another building returns at once.
pub(crate) fn top_up() {
    let want = POOL_WANT.load(Relaxed);
    let target = || {
        let created = CREATED.load(Relaxed);
        (created + 1 + if created > 0 { SPARE } else { SPARE_AT_START }).min(want)
    };
    if POOL_LEN.load(Acquire) >= target() || BUILDING.swap(true, Acquire) {
        return;
    }
    // Building a cache may put its parts on the stack first (tens of KiB): not on a small one.
    if !stack_room(256 << 10) {
        BUILDING.store(false, Release);
        return;
    }
    let mut len = POOL_LEN.load(Relaxed);
    let first = len;
    let count = target().saturating_sub(len);
    // The caches' memory is mapped first, where a refusal is seen (no cache is built then): a
    // failed allocation inside framehop would abort the program (crate::alloc).
    if let Some(_region) = crate::alloc::Region::map(count * crate::alloc::PER_CACHE) {
        while len < target() && len < first + count {
            POOL[len].store(Box::into_raw(Box::new(TheCache::new_in())), Relaxed);
            len += 1;
            POOL_LEN.store(len, Release);
        }
    }
    BUILDING.store(false, Release);
}

/// Whether the calling thread's stack has at least `bytes` free below this frame.
fn stack_room(bytes: usize) -> bool {
    let here = &bytes as *const usize as usize;
    // On the main thread's stack (within RLIMIT_STACK below its top), what glibc's
    // pthread_getattr_np would say, without the read of /proc/self/maps it makes for the main
    // thread: the stack may grow down to the limit below its top (the kernel keeps other
    // mappings further away). An unlimited stack is left to glibc.
    let top = MAIN_STACK_TOP.load(Relaxed) as usize;
    let mut rl = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    if top != 0
        && here < top
        // SAFETY: a valid out-pointer.
        && unsafe { libc::getrlimit(libc::RLIMIT_STACK, &mut rl) } == 0
        && rl.rlim_cur != libc::RLIM_INFINITY
        && ((top - here) as u64) < rl.rlim_cur
    {
        return (rl.rlim_cur - (top - here) as u64) >= bytes as u64;
    }
    // SAFETY: a zeroed attribute object is what pthread_getattr_np initializes; it is destroyed
    // after use; the out-pointers are valid locals.
    unsafe {
        let mut attr: libc::pthread_attr_t = core::mem::zeroed();
        if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
            return false;
        }
        let (mut lo, mut size) = (core::ptr::null_mut(), 0usize);
        let ok = libc::pthread_attr_getstack(&attr, &mut lo, &mut size) == 0;
        libc::pthread_attr_destroy(&mut attr);
        ok && here.saturating_sub(lo as usize) >= bytes
    }
}

/// Counts a thread the program is creating (`pthread_create`), before the pool is topped up.
pub(crate) fn thread_created() {
    CREATED.fetch_add(1, Relaxed);
}

/// Takes a cache for the calling thread (no allocation); null when the pool is used up.
pub(crate) fn take_cache() -> *mut TheCache {
    let mut i = POOL_NEXT.load(Relaxed);
    loop {
        if i >= POOL_LEN.load(Acquire) {
            return core::ptr::null_mut();
        }
        match POOL_NEXT.compare_exchange_weak(i, i + 1, Relaxed, Relaxed) {
            // The entry was stored before `POOL_LEN` passed `i` (Release, read with Acquire).
            Ok(_) => return POOL[i].load(Relaxed),
            Err(now) => i = now,
        }
    }
}

/// Returns the cache most recently taken, if it was the last one taken (start-up only).
pub(crate) fn return_cache(c: *mut TheCache) {
    let n = POOL_NEXT.load(Relaxed);
    if n > 0 && n <= POOL_LEN.load(Acquire) && POOL[n - 1].load(Relaxed) == c {
        let _ = POOL_NEXT.compare_exchange(n, n - 1, Relaxed, Relaxed);
    }
}

/// Resets the cache pool in a fork child (the parent's threads are gone; their caches are free,
/// and a build the fork cut short is over).
pub(crate) fn reset_pool() {
    POOL_NEXT.store(0, Relaxed);
    CREATED.store(0, Relaxed);
    BUILDING.store(false, Relaxed);
}

/// The top of the `[stack]` mapping (constructor only). The kernel's exec fills it from the top:
/// a pointer-sized end marker, then the executable's name (`AT_EXECFN`), so the name's end gives
/// the top without reading `/proc/self/maps` (perf: about half of what [`init`] cost an image
/// that takes no lock); from the maps when that layout does not hold (the result is not
/// page-aligned) or there is no `AT_EXECFN`.
fn main_stack_top() -> u64 {
    // SAFETY: getauxval has no preconditions.
    let name = unsafe { libc::getauxval(libc::AT_EXECFN) } as usize;
    if name != 0 {
        // SAFETY: AT_EXECFN points at the NUL-terminated name the kernel copied to the stack.
        let len = unsafe { libc::strlen(name as *const core::ffi::c_char) };
        let top = name.saturating_add(len + 1 + core::mem::size_of::<usize>());
        if top.is_multiple_of(4096) {
            return top as u64;
        }
    }
    stack_top_from_maps()
}

/// Parses the top of the `[stack]` mapping from `/proc/self/maps` (constructor only).
fn stack_top_from_maps() -> u64 {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else { return 0 };
    maps.lines()
        .find(|l| l.ends_with("[stack]"))
        .and_then(|l| l.split('-').nth(1))
        .and_then(|r| r.split(' ').next())
        .and_then(|e| u64::from_str_radix(e, 16).ok())
        .unwrap_or(0)
}

unsafe extern "C" fn add_object(
    info: *mut libc::dl_phdr_info,
    _size: usize,
    data: *mut c_void,
) -> c_int {
    // SAFETY: dl_iterate_phdr passes a valid info and our `Collect`.
    let (info, c) = unsafe { (&*info, &mut *(data as *mut Collect)) };
    if info.dlpi_phdr.is_null() {
        return 0;
    }
    // SAFETY: dlpi_phdr points at dlpi_phnum program headers.
    let phdrs = unsafe { core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    let bias = info.dlpi_addr;
    let loads = || phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD);
    let (Some(lo), Some(hi)) =
        (loads().map(|p| p.p_vaddr).min(), loads().map(|p| p.p_vaddr + p.p_memsz).max())
    else {
        return 0;
    };
    let mem = |vaddr: u64, len: u64| -> Data {
        // SAFETY: the range lies inside a PT_LOAD segment of a loaded object: mapped and readable.
        unsafe { core::slice::from_raw_parts(bias.wrapping_add(vaddr) as *const u8, len as usize) }
    };
    let mut si = ExplicitModuleSectionInfo::<Data> { base_svma: 0, ..Default::default() };
    if let Some(text) = loads().find(|p| p.p_flags & libc::PF_X != 0) {
        si.text_svma = Some(text.p_vaddr..text.p_vaddr + text.p_memsz);
        si.text = Some(mem(text.p_vaddr, text.p_filesz.min(text.p_memsz)));
        let (start, end) = (bias + text.p_vaddr, bias + text.p_vaddr + text.p_memsz);
        if (start as usize..end as usize).contains(&c.own) {
            OWN_START.store(start, Relaxed);
            OWN_END.store(end, Relaxed);
        }
    }
    let Some(hdr) = phdrs.iter().find(|p| p.p_type == libc::PT_GNU_EH_FRAME) else { return 0 };
    let hdr_data = mem(hdr.p_vaddr, hdr.p_memsz);
    si.eh_frame_hdr_svma = Some(hdr.p_vaddr..hdr.p_vaddr + hdr.p_memsz);
    si.eh_frame_hdr = Some(hdr_data);
    crate::funcs::add(bias + lo, bias + hi, hdr_data);
    // .eh_frame: its address is the header's eh_frame_ptr; it ends with its segment.
    if let Some(eh) = eh_frame_ptr(hdr_data, hdr.p_vaddr)
        && let Some(seg) = loads().find(|p| (p.p_vaddr..p.p_vaddr + p.p_filesz).contains(&eh))
    {
        let end = seg.p_vaddr + seg.p_filesz;
        si.eh_frame_svma = Some(eh..end);
        si.eh_frame = Some(mem(eh, end - eh));
    }
    let name = if info.dlpi_name.is_null() {
        String::new()
    } else {
        // SAFETY: dlpi_name is a NUL-terminated string (possibly empty).
        unsafe { core::ffi::CStr::from_ptr(info.dlpi_name) }.to_string_lossy().into_owned()
    };
    c.unwinder.add_module(Module::new(name, bias + lo..bias + hi, bias, si));
    0
}

/// The SVMA of `.eh_frame` from an `.eh_frame_hdr` at SVMA `hdr_svma`.
fn eh_frame_ptr(hdr: &[u8], hdr_svma: u64) -> Option<u64> {
    let (&version, &enc) = (hdr.first()?, hdr.get(1)?);
    if version != 1 {
        return None;
    }
    let field = hdr_svma + 4;
    let raw = |n: usize| -> Option<u64> {
        let b = hdr.get(4..4 + n)?;
        let mut v = [0u8; 8];
        v.get_mut(..n)?.copy_from_slice(b);
        Some(u64::from_le_bytes(v))
    };
    let (val, signed) = match enc & 0x0f {
        0x03 => (raw(4)?, false),                            // udata4
        0x0b => (raw(4)? as u32 as i32 as i64 as u64, true), // sdata4
        0x04 | 0x0c => (raw(8)?, false),                     // udata8 / sdata8
        _ => return None,
    };
    let _ = signed;
    match enc & 0x70 {
        0x00 => Some(val),                        // absptr
        0x10 => Some(field.wrapping_add(val)),    // pcrel
        0x30 => Some(hdr_svma.wrapping_add(val)), // datarel (relative to the header)
        _ => None,
    }
}

/// Captures the caller's stack into `out` (return addresses, innermost first, our own frames left
/// out); returns how many frames were written. `stack_top` bounds every stack read.
#[inline(never)]
pub(crate) fn capture(cache: &mut TheCache, out: &mut [u64], stack_top: u64) -> usize {
    // SAFETY: the unwinder is written once at start-up and never freed.
    let Some(unwinder) = (unsafe { UNWINDER.load(Acquire).as_ref() }) else { return 0 };
    let (pc, regs, sp) = here();
    if stack_top <= sp {
        return 0;
    }
    let mut read = |addr: u64| -> Result<u64, ()> {
        if addr >= sp
            && addr.checked_add(8).is_some_and(|e| e <= stack_top)
            && addr.is_multiple_of(8)
        {
            // SAFETY: `addr` lies within this thread's live stack, [sp, stack_top).
            Ok(unsafe { core::ptr::read_volatile(addr as *const u64) })
        } else {
            Err(())
        }
    };
    let (own_lo, own_hi) = (OWN_START.load(Relaxed), OWN_END.load(Relaxed));
    let mut regs = regs;
    let mut addr = FrameAddress::from_instruction_pointer(pc);
    let mut n = 0;
    for _ in 0..(out.len() + 64) {
        let a = addr.address();
        if !(own_lo..own_hi).contains(&a) {
            let Some(slot) = out.get_mut(n) else { break };
            *slot = a;
            n += 1;
        }
        match unwinder.unwind_frame(addr, &mut regs, cache, &mut read) {
            Ok(Some(ra)) => match FrameAddress::from_return_address(ra) {
                Some(next) => addr = next,
                None => break,
            },
            _ => break,
        }
    }
    n
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn here() -> (u64, Regs, u64) {
    let (pc, sp, bp): (u64, u64, u64);
    // SAFETY: reads the instruction pointer, stack pointer and frame pointer; no memory access.
    unsafe {
        core::arch::asm!("lea {pc}, [rip]", "mov {sp}, rsp", "mov {bp}, rbp", pc = out(reg) pc, sp = out(reg) sp, bp = out(reg) bp, options(nomem, nostack, preserves_flags));
    }
    (pc, Regs::new(pc, sp, bp), sp)
}

#[cfg(target_arch = "aarch64")]
#[inline(always)]
fn here() -> (u64, Regs, u64) {
    let (pc, lr, sp, fp): (u64, u64, u64, u64);
    // SAFETY: reads pc, lr, sp and fp; no memory access.
    unsafe {
        core::arch::asm!("adr {pc}, .", "mov {lr}, x30", "mov {sp}, sp", "mov {fp}, x29", pc = out(reg) pc, lr = out(reg) lr, sp = out(reg) sp, fp = out(reg) fp, options(nomem, nostack, preserves_flags));
    }
    (pc, Regs::new(lr, sp, fp), sp)
}

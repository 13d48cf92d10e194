//! The collector's memory, shared with its watcher (`watch.rs`): a process with an address
//! space of its own (so the OOM killer, which kills every process sharing the program's memory,
//! spares it) that writes the profile when the program and its guardian were killed together.
//!
//! Two ranges are `MAP_SHARED`, at the same addresses in the program and its watcher:
//! - the *arena*: one large reserved mapping (`MAP_NORESERVE`, touched only as it fills; sized
//!   from `--max-memory`, within the address space `RLIMIT_AS` leaves) made in
//!   the constructor before the watcher starts, from which every long-lived table of the
//!   collector is carved ([`map`], a lock-free bump pointer), so that tables made later (a new
//!   thread's) are seen by the watcher too; a table given back ([`release`]) has its pages freed
//!   (`MADV_REMOVE`), its addresses are not used again;
//! - the preload library's own writable data (`.data`/`.bss` after RELRO, where every `static` of
//!   the collector lives): copied at start-up into a shared mapping moved over the original.
//!
//! A fork child must not write into its parent's tables: before anything of ours writes in it
//! (its first metered call, `fork.rs`; or its fork handler) it copies both ranges into fresh
//! shared mappings moved over the inherited ones ([`after_fork`]), before it starts its own
//! guardian and watcher. A table that did not fit in the arena is mapped privately
//! and the watcher, which cannot see it, writes no profile ([`complete`]).

use crate::sys;
use core::ffi::{c_int, c_void};
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};

/// The arena's size: [`arena_size`] of `--max-memory`, halved on refusal down to [`ARENA_MIN`].
const ARENA_MAX: usize = 64 << 30;
const ARENA_MIN: usize = 16 << 20;
/// The arena's size under strict overcommit (`vm.overcommit_memory=2`), where a shared mapping
/// is charged in full to the system's commit limit (`MAP_NORESERVE` is ignored).
const ARENA_STRICT: usize = 64 << 20;

/// The arena's size for `max_memory` (`--max-memory`): room for the records four times over
/// (record tables are reserved larger than they fill; the fixed tables, stacks and events come
/// on top) plus 256 MiB, at most [`ARENA_MAX`]; at most a quarter of the address space left
/// under `RLIMIT_AS`; [`ARENA_STRICT`] under strict overcommit.
fn arena_size(max_memory: u64) -> usize {
    let want = (max_memory as usize).saturating_mul(4).saturating_add(256 << 20).min(ARENA_MAX);
    let mut size = want;
    let mut buf = [0u8; 16];
    if crate::sys::read_file(c"/proc/sys/vm/overcommit_memory", &mut buf).first() == Some(&b'2') {
        size = size.min(ARENA_STRICT);
    }
    // SAFETY: an all-zero rlimit is a valid buffer for getrlimit to fill.
    let mut lim: libc::rlimit = unsafe { core::mem::zeroed() };
    // SAFETY: `lim` is a valid, writable rlimit.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } == 0
        && lim.rlim_cur != libc::RLIM_INFINITY
    {
        let mut statm = [0u8; 128];
        let used = crate::sys::read_file(c"/proc/self/statm", &mut statm);
        let pages = used.split(|&c| c == b' ').next().and_then(crate::sys::parse_u64).unwrap_or(0);
        let used = (pages as usize).saturating_mul(page());
        size = size.min((lim.rlim_cur as usize).saturating_sub(used) / 4);
    }
    size
}

static PAGE: AtomicUsize = AtomicUsize::new(4096);
static BASE: AtomicUsize = AtomicUsize::new(0);
static SIZE: AtomicUsize = AtomicUsize::new(0);
static USED: AtomicUsize = AtomicUsize::new(0);
/// The preload's writable data, shared: start and length (0: not shared).
static DATA_START: AtomicUsize = AtomicUsize::new(0);
static DATA_LEN: AtomicUsize = AtomicUsize::new(0);
/// A long-lived table was mapped outside the arena (it was full): the watcher cannot see it.
static OUTSIDE: AtomicBool = AtomicBool::new(false);

fn page() -> usize {
    PAGE.load(Relaxed)
}

fn page_up(n: usize) -> usize {
    n.div_ceil(page()) * page()
}

/// A fresh shared anonymous mapping of `len` bytes, or null.
fn map_anon_shared(len: usize) -> *mut u8 {
    map_anon(len, libc::MAP_SHARED)
}

/// A fresh anonymous mapping (`MAP_SHARED` or `MAP_PRIVATE`) of `len` bytes, or null (errno
/// set). `MAP_NORESERVE`: an address-space limit (`ulimit -v`) or strict overcommit still refuses
/// it.
pub(crate) fn map_anon(len: usize, kind: c_int) -> *mut u8 {
    // SAFETY: an anonymous mapping at an address of the kernel's choice has no preconditions.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            kind | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED { core::ptr::null_mut() } else { p.cast() }
}

/// Makes the preload's data and the arena shared (the constructor, before any table is mapped
/// and before any other thread of ours runs), the arena sized for `max_memory` (`--max-memory`).
/// False, and everything private as before, on failure (said on stderr when no arena could be
/// reserved: then no watcher runs).
pub(crate) fn init(max_memory: u64) -> bool {
    // SAFETY: sysconf has no preconditions.
    let pg = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if pg > 0 {
        PAGE.store(pg as usize, Relaxed);
    }
    let Some((start, len, file_len)) = own_data() else { return false };
    // Pages past the file's part that the page tables do not map were never written (zero): left
    // out (reading them would map them, most of the data being the writer's buffers). Without
    // pagemap, every page is copied.
    let ok = crate::resident::with_pagemap(Some(c"/proc/self/pagemap"), |pagemap| {
        let sparse = (pagemap >= 0).then_some(Sparse { pagemap, dense: file_len, mincore: false });
        // SAFETY: the range is our own writable data, and the constructor is the only thread of
        // ours.
        unsafe { reshare(start, len, len, sparse, libc::MAP_SHARED) }
    });
    if !ok {
        return false;
    }
    DATA_START.store(start, Relaxed);
    DATA_LEN.store(len, Relaxed);
    let mut size = page_up(arena_size(max_memory));
    while size >= ARENA_MIN {
        let p = map_anon_shared(size);
        if !p.is_null() {
            BASE.store(p as usize, Relaxed);
            SIZE.store(size, Relaxed);
            return true;
        }
        size = page_up(size / 2);
    }
    sys::write_stderr(b"lockmeter: no address space to share the collector's tables with its watcher (ulimit -v, vm.overcommit_memory=2): if an OOM kill ends the program, no profile is written; raise the limit to keep one\n");
    false
}

/// `n` zeroed bytes from the arena (page-aligned, never handed out again), or `None` when there
/// is no arena or it is full (then a watcher writes no profile). Leaves errno alone.
pub(crate) fn map(n: usize) -> Option<*mut u8> {
    let base = BASE.load(Relaxed);
    if base == 0 {
        return None;
    }
    let len = page_up(n);
    let size = SIZE.load(Relaxed);
    let mut used = USED.load(Relaxed);
    loop {
        if used.saturating_add(len) > size {
            OUTSIDE.store(true, Relaxed);
            return None;
        }
        match USED.compare_exchange_weak(used, used + len, Relaxed, Relaxed) {
            Ok(_) => return Some((base + used) as *mut u8),
            Err(u) => used = u,
        }
    }
}

/// Gives back `n` bytes at `p` if they are the arena's (their pages are freed; the addresses
/// stay reserved). False when `p` is not in the arena (the caller unmaps it). Leaves errno alone.
pub(crate) fn release(p: *mut u8, n: usize) -> bool {
    let (base, size) = (BASE.load(Relaxed), SIZE.load(Relaxed));
    let a = p as usize;
    if base == 0 || a < base || a >= base + size {
        return false;
    }
    let saved = sys::errno();
    // SAFETY: `[p, p+n)` was handed out by `map` and is no longer used by the caller; punching a
    // hole only frees its pages (they read as zero afterwards).
    unsafe { libc::madvise(p.cast(), page_up(n), libc::MADV_REMOVE) };
    sys::set_errno(saved);
    true
}

/// Whether the preload's data and the arena are shared (a watcher can be started).
pub(crate) fn active() -> bool {
    DATA_LEN.load(Relaxed) != 0 && BASE.load(Relaxed) != 0
}

/// Whether every long-lived table is in shared memory, so a watcher sees the whole profile.
pub(crate) fn complete() -> bool {
    DATA_LEN.load(Relaxed) != 0 && BASE.load(Relaxed) != 0 && !OUTSIDE.load(Relaxed)
}

/// What [`after_fork`] achieved.
#[derive(PartialEq)]
pub(crate) enum Fork {
    /// The child's data and tables are its own.
    Own,
    /// Its data is its own, its tables may still be its parent's: the collector must stay off.
    DataOnly,
    /// Nothing could be copied: nothing of ours may be written in the child.
    Nothing,
}

/// In a fork child, before anything of ours writes: the inherited shared ranges become fresh
/// copies of their own (the data privately where no shared mapping could be made; the child then
/// has no watcher). `parent`: the pid that forked us.
pub(crate) fn after_fork(parent: u32) -> Fork {
    let (start, len) = (DATA_START.load(Relaxed), DATA_LEN.load(Relaxed));
    let (base, size, used) = (BASE.load(Relaxed), SIZE.load(Relaxed), USED.load(Relaxed));
    if len == 0 {
        return Fork::Own; // nothing shared: the fork gave the child private copies
    }
    // Which pages hold data: the parent's page tables map every page of the shared ranges that
    // it (or its guardian, or the copy that made them) wrote; ours map none of them since the
    // fork. Read from its pagemap (the descriptor reads the page tables of the process it was
    // opened on: the parent's, if it was still our parent after the open), else from the page
    // cache (`mincore`: one lookup per page, a third of a millisecond per fork for the tables of
    // a process that took no lock).
    let mut path = sys::PathBuf::new();
    path.push(b"/proc/").push_u64(parent as u64).push(b"/pagemap");
    crate::resident::with_pagemap(Some(path.as_cstr()), |pagemap| {
        // SAFETY: getppid has no preconditions.
        let ours =
            pagemap >= 0 && unsafe { libc::getppid() } as u32 == parent && maps_our_data(pagemap);
        copy_after_fork(start, len, base, size, used, if ours { pagemap } else { -1 })
    })
}

/// Whether the page tables of `pagemap` map our shared data (the page of [`DATA_LEN`], written
/// after it was shared, is mapped or in swap): not when the parent exec'd since the fork (a
/// child copies its tables at its first lock, `fork.rs`), whose new image maps none of it.
fn maps_our_data(pagemap: c_int) -> bool {
    let pg = page();
    let at = &DATA_LEN as *const AtomicUsize as usize / pg * pg;
    let mut v = [0u8; 1];
    crate::resident::pages_from_pagemap(pagemap, at, pg, &mut v, true) && v[0] == 1
}

/// [`after_fork`]'s copies, `pagemap` the parent's (or -1).
fn copy_after_fork(
    start: usize,
    len: usize,
    base: usize,
    size: usize,
    used: usize,
    pagemap: i32,
) -> Fork {
    let sparse = Some(Sparse { pagemap, dense: 0, mincore: true });
    // SAFETY: the ranges are ours (data, arena); only the forking thread exists in the child.
    // The parent's threads may still write them: each word is copied with one atomic load, as
    // any concurrent reader of the tables reads them. The data is a shared mapping since `init`,
    // which copied only its non-zero words: a page of it that is not resident was never written
    // (zero), and reading it would allocate it in the parent's memory (most of the data is
    // buffers the writer uses at the end): left out, like the arena's (half a millisecond in
    // each fork child).
    unsafe {
        if !reshare(start, len, len, sparse, libc::MAP_SHARED) {
            if !reshare(start, len, len, None, libc::MAP_PRIVATE) {
                sys::write_stderr(b"lockmeter: cannot copy the collector's data in a fork child; its counts may mix with its parent's\n");
                return Fork::Nothing;
            }
            DATA_LEN.store(0, Relaxed);
        }
        if base == 0 || reshare(base, size, used, sparse, libc::MAP_SHARED) {
            Fork::Own
        } else {
            sys::write_stderr(b"lockmeter: cannot copy the collector's tables in a fork child; it is not metered\n");
            Fork::DataOnly
        }
    }
}

/// How [`reshare`] tells the pages to copy from those never written (zero): the pages from
/// `dense` bytes on that `pagemap` (an open `/proc/PID/pagemap` of the process whose page tables
/// map every written page, or -1) says are neither present nor in swap are left out; where it
/// cannot say, those `mincore` (the page cache: for a shared mapping) says are not resident if
/// `mincore`, else none.
#[derive(Clone, Copy)]
struct Sparse {
    pagemap: c_int,
    dense: usize,
    mincore: bool,
}

/// Copies `[addr, addr+used)` of the mapping `[addr, addr+len)` into a fresh mapping (`kind`)
/// and moves it over the original. With `sparse`, pages that hold nothing are left out (never
/// touched: zero; reading them would allocate them).
///
/// # Safety
/// `[addr, addr+len)` is a page-aligned mapping of ours that nothing else of ours uses during the
/// call.
unsafe fn reshare(
    addr: usize,
    len: usize,
    used: usize,
    sparse: Option<Sparse>,
    kind: c_int,
) -> bool {
    let new = map_anon(len, kind);
    if new.is_null() {
        return false;
    }
    let pg = page();
    let mut vec = [0u8; 256];
    let mut off = 0;
    while off < used {
        let pages = (used - off).div_ceil(pg).min(vec.len());
        let chunk = (pages * pg).min(used - off);
        // A pagemap that cannot be read (the parent exited meanwhile) falls back to mincore.
        let known = sparse.is_some_and(|s| {
            (s.pagemap >= 0
                && vec.get_mut(..pages).is_some_and(|v| {
                    crate::resident::pages_from_pagemap(s.pagemap, addr + off, pg, v, true)
                }))
                // SAFETY: a page-aligned range of the mapping; `vec` has room for `pages` entries.
                || s.mincore && unsafe {
                    libc::mincore((addr + off) as *mut c_void, chunk, vec.as_mut_ptr()) == 0
                }
        });
        for (i, v) in vec.iter().enumerate().take(pages) {
            let at = off + i * pg;
            // Left out: a page past the dense part that holds nothing. An unreadable pagemap or
            // a failed mincore copies every page.
            if known && sparse.is_some_and(|s| at >= s.dense) && v & 1 == 0 {
                continue;
            }
            // SAFETY: both pages lie inside their mappings (`at < used <= len`, page-aligned),
            // readable and writable; atomics of the size of a word at aligned addresses.
            unsafe { copy_page(addr + at, new as usize + at, pg) };
        }
        off += pages * pg;
    }
    // SAFETY: moves our fresh mapping over our own range (MREMAP_FIXED unmaps what was there).
    let r = unsafe {
        libc::mremap(new.cast(), len, len, libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED, addr)
    };
    if r == libc::MAP_FAILED {
        // SAFETY: the fresh mapping, unused.
        unsafe { libc::munmap(new.cast(), len) };
        return false;
    }
    true
}

/// Copies one page word by word, leaving all-zero words unwritten (a page of zeros stays
/// unallocated in the copy).
///
/// # Safety
/// `from` and `to` are page-aligned, readable (and `to` writable) for `pg` bytes.
unsafe fn copy_page(from: usize, to: usize, pg: usize) {
    for w in (0..pg).step_by(8) {
        // SAFETY: by the caller's contract; an aligned word read as an atomic, so a parent thread
        // writing it at the same time is no data race.
        let v = unsafe { (*((from + w) as *const AtomicU64)).load(Relaxed) };
        if v != 0 {
            // SAFETY: by the caller's contract; nothing else sees the copy yet.
            unsafe { ((to + w) as *mut u64).write(v) };
        }
    }
}

/// The page-aligned range of this library's writable data past RELRO: the `PT_LOAD` segment
/// with `PF_W` that holds our statics; start, length and the length of its part mapped from the
/// file (`.data`; the rest is `.bss`, zero until written).
fn own_data() -> Option<(usize, usize, usize)> {
    let mut f = Found { addr: &USED as *const AtomicUsize as usize, start: 0, end: 0, file_end: 0 };
    // SAFETY: the callback only reads the headers it is given and writes `f`, which outlives the
    // call.
    unsafe { libc::dl_iterate_phdr(Some(phdr_cb), (&mut f as *mut Found).cast()) };
    let file_len = f.file_end.clamp(f.start, f.end) - f.start;
    (f.end > f.start).then(|| (f.start, f.end - f.start, file_len))
}

struct Found {
    addr: usize,
    start: usize,
    end: usize,
    file_end: usize,
}

unsafe extern "C" fn phdr_cb(info: *mut libc::dl_phdr_info, _: usize, data: *mut c_void) -> c_int {
    // SAFETY: dl_iterate_phdr passes a valid info and our `Found`.
    let (info, f) = unsafe { (&*info, &mut *data.cast::<Found>()) };
    if info.dlpi_phdr.is_null() {
        return 0;
    }
    // SAFETY: the object's program headers, `dlpi_phnum` of them.
    let phdrs = unsafe { core::slice::from_raw_parts(info.dlpi_phdr, info.dlpi_phnum as usize) };
    let base = info.dlpi_addr as usize;
    let relro_end = phdrs
        .iter()
        .filter(|p| p.p_type == libc::PT_GNU_RELRO)
        .map(|p| base + (p.p_vaddr + p.p_memsz) as usize)
        .max()
        .unwrap_or(0);
    let pg = page();
    for p in phdrs.iter().filter(|p| p.p_type == libc::PT_LOAD && p.p_flags & libc::PF_W != 0) {
        let (s, e) = (base + p.p_vaddr as usize, base + (p.p_vaddr + p.p_memsz) as usize);
        if s <= f.addr && f.addr < e {
            // ld.so write-protects only the whole pages of RELRO: a partial last page stays
            // writable, with our data on it.
            let s = if relro_end > s && relro_end <= e { relro_end } else { s };
            f.start = s / pg * pg;
            f.end = page_up(e);
            f.file_end = page_up(base + (p.p_vaddr + p.p_filesz) as usize);
            return 1;
        }
    }
    0
}

//! The collector's memory as the profile reports it: the bytes of its own long-lived mappings
//! (registry, thread tables, exited-thread table, name arena) that are resident in RAM, measured
//! when the profile is written: from the process's page tables (`/proc/self/pagemap`: a page the
//! collector wrote is mapped in them) by the program and its guardian, which share them; with
//! `mincore` by the watcher, whose own page tables never mapped the shared tables' pages, and
//! where pagemap cannot be read. (Most of the tables are in the arena, a shared mapping, where
//! `mincore` looks each page up in the page cache: a third of a millisecond for the tables of a
//! process that took no lock, where pagemap skips the unmapped page tables.) The address space it reserves is much larger
//! (each thread's table is mapped whole, `MAP_NORESERVE`, and touched only as it fills), so the
//! reserved size ("2 GiB for 400 threads") says nothing about what the program paid.
//!
//! Mappings are noted, lock-free and without allocation, in a fixed table; one that does not fit
//! is counted whole (an upper bound, never an undercount).

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Mappings remembered one by one (a thread's table is one; `--threads` bounds the live ones).
const CAP: usize = 4096;

static ADDR: [AtomicUsize; CAP] = [const { AtomicUsize::new(0) }; CAP];
static LEN: [AtomicUsize; CAP] = [const { AtomicUsize::new(0) }; CAP];
static NEXT: AtomicUsize = AtomicUsize::new(0);
/// Bytes of mappings that did not fit in the table.
static UNTRACKED: AtomicU64 = AtomicU64::new(0);

/// Notes a long-lived mapping of the collector (`addr` page-aligned, as `mmap` returns it).
pub(crate) fn note(addr: *mut u8, len: usize) {
    let i = NEXT.fetch_add(1, Relaxed);
    match (ADDR.get(i), LEN.get(i)) {
        (Some(a), Some(l)) => {
            l.store(len, Relaxed);
            a.store(addr as usize, Relaxed);
        }
        _ => {
            UNTRACKED.fetch_add(len as u64, Relaxed);
        }
    }
}

/// Forgets a mapping noted by [`note`] before it is unmapped (a record table's index when it
/// doubles), so that its range, which the program may map again, is no longer measured.
pub(crate) fn forget(addr: *mut u8) {
    let n = NEXT.load(Relaxed).min(CAP);
    for (a, l) in ADDR.iter().zip(LEN.iter()).take(n) {
        if a.load(Relaxed) == addr as usize {
            a.store(0, Relaxed);
            l.store(0, Relaxed);
            return;
        }
    }
}

/// The collector's resident bytes when the dump began, [`measure`]d before it reads its tables
/// (reading an untouched page maps it, and it would count).
static AT_DUMP: AtomicU64 = AtomicU64::new(0);

/// Measures the resident bytes now, for [`at_dump`] (called as the dump starts); `mapped`: the
/// caller's page tables map every page the collector wrote (the program, its guardian; not the
/// watcher).
pub(crate) fn measure(mapped: bool) {
    let path = mapped.then_some(c"/proc/self/pagemap");
    AT_DUMP.store(with_pagemap(path, resident_bytes), Relaxed);
}

/// `f` given the pagemap file `path` (`/proc/PID/pagemap`) open for reading, or -1 (no `path`, or
/// it cannot be opened); the file is closed after.
pub(crate) fn with_pagemap<T>(path: Option<&core::ffi::CStr>, f: impl FnOnce(i32) -> T) -> T {
    // SAFETY: a NUL-terminated path; the flags create nothing.
    let fd =
        path.map_or(-1, |p| unsafe { libc::open(p.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) });
    let r = f(fd);
    if fd >= 0 {
        // SAFETY: our own descriptor, which `f` did not keep.
        unsafe { libc::close(fd) };
    }
    r
}

/// Fills `vec[i]` with 1 for each of the `vec.len()` pages from `addr` (page-aligned) that the
/// page tables of `pagemap` (an open `/proc/PID/pagemap`) map (or, with `swapped`, that are in
/// swap), else 0, as `mincore` fills its vector. False when the file could not be read.
pub(crate) fn pages_from_pagemap(
    pagemap: i32,
    addr: usize,
    page: usize,
    vec: &mut [u8],
    swapped: bool,
) -> bool {
    const PRESENT: u64 = 1 << 63;
    const SWAPPED: u64 = 1 << 62;
    let want = if swapped { PRESENT | SWAPPED } else { PRESENT };
    let mut entries = [0u64; 256];
    let mut done = 0;
    while done < vec.len() {
        let n = (vec.len() - done).min(entries.len());
        let off = ((addr / page + done) * 8) as libc::off_t;
        // SAFETY: `entries` has room for `n` entries of 8 bytes.
        let r = unsafe { libc::pread(pagemap, entries.as_mut_ptr().cast(), n * 8, off) };
        if r != (n * 8) as isize {
            return false;
        }
        for (v, e) in vec.iter_mut().skip(done).zip(entries.iter().take(n)) {
            *v = u8::from(e & want != 0);
        }
        done += n;
    }
    true
}

/// What [`measure`] found.
pub(crate) fn at_dump() -> u64 {
    AT_DUMP.load(Relaxed)
}

/// Resident bytes of the noted mappings (pages in RAM now), plus the untracked ones whole: from
/// `pagemap` where it is open (not -1), else `mincore`.
fn resident_bytes(pagemap: i32) -> u64 {
    // SAFETY: sysconf has no preconditions.
    let page = match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        p if p > 0 => p as usize,
        _ => 4096,
    };
    let mut total = UNTRACKED.load(Relaxed);
    let n = NEXT.load(Relaxed).min(CAP);
    let mut vec = [0u8; 1024];
    for i in 0..n {
        let (Some(a), Some(l)) = (ADDR.get(i), LEN.get(i)) else { break };
        let (addr, len) = (a.load(Relaxed), l.load(Relaxed));
        if addr == 0 || len == 0 {
            continue;
        }
        let mut off = 0;
        while off < len {
            let pages = (len - off).div_ceil(page).min(vec.len());
            let chunk = (pages * page).min(len - off);
            let from_map = pagemap >= 0
                && vec
                    .get_mut(..pages)
                    .is_some_and(|v| pages_from_pagemap(pagemap, addr + off, page, v, false));
            // SAFETY: [addr+off, addr+off+chunk) lies in a mapping the collector made and has not
            // unmapped (see `forget`), page-aligned at its start; `vec` has room for `pages` entries.
            let r = from_map
                || unsafe {
                    libc::mincore((addr + off) as *mut libc::c_void, chunk, vec.as_mut_ptr())
                } == 0;
            if !r {
                total += chunk as u64;
            } else {
                let resident = vec.iter().take(pages).filter(|&&v| v & 1 != 0).count();
                total += (resident * page) as u64;
            }
            off += pages * page;
        }
    }
    total
}

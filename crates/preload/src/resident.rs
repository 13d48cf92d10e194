//! The collector's memory as the profile reports it: the bytes of its own long-lived mappings
//! (registry, thread tables, exited-thread table, name arena) that are resident in RAM, measured
//! with `mincore` when the profile is written. The address space it reserves is much larger
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

/// Measures the resident bytes now, for [`at_dump`] (called as the dump starts).
pub(crate) fn measure() {
    AT_DUMP.store(resident_bytes(), Relaxed);
}

/// What [`measure`] found.
pub(crate) fn at_dump() -> u64 {
    AT_DUMP.load(Relaxed)
}

/// Resident bytes of the noted mappings (pages in RAM now), plus the untracked ones whole.
fn resident_bytes() -> u64 {
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
            // SAFETY: [addr+off, addr+off+chunk) lies in a mapping the collector made and has not
            // unmapped (see `forget`), page-aligned at its start; `vec` has room for `pages` entries.
            let r = unsafe {
                libc::mincore((addr + off) as *mut libc::c_void, chunk, vec.as_mut_ptr())
            };
            if r != 0 {
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

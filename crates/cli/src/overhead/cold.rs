//! The cold pair of `lockmeter overhead`: one lock+unlock pair timed alone after the caches were
//! evicted, as in a program whose own work (memcached's request handling, a server's TCP stack)
//! evicts the collector's code and data between two lock calls. The tight loop of the uncontended
//! workload keeps every line the hooks touch in L1 and shows a fraction of that cost.
//!
//! Before each pair the workload writes one byte per 64-byte line of a buffer of `--cold-mib`
//! MiB (allocated and written once before, so that no page fault is timed) and, on x86_64, runs
//! 64 KiB of code (`nop`s) so that the hooks' code leaves the instruction caches too. Then it
//! times the pair alone: `lfence; rdtsc; lfence` on both sides on x86_64, converted to ns by a
//! calibration of the TSC against `Instant` once per run. It prints the median ns per pair.

use std::time::{Duration, Instant};

/// Pairs run before the timed ones, not counted: the first one resolves the PLT entries and
/// registers the lock with the collector.
const WARMUP: usize = 5;

/// How long the TSC is calibrated against `Instant`.
const CALIBRATION: Duration = Duration::from_millis(20);

// 64 KiB of `nop` and a `ret`, in its own section, called between pairs so that the code the
// hooks ran last leaves the L1 instruction cache and most of L2. The block is written for x86_64
// only: other architectures skip the code part, and only the data is evicted there.
#[cfg(target_arch = "x86_64")]
core::arch::global_asm!(
    ".pushsection .text.lockmeter_cold_code,\"ax\",@progbits",
    ".p2align 6",
    ".globl lockmeter_cold_code",
    ".hidden lockmeter_cold_code",
    ".type lockmeter_cold_code,@function",
    "lockmeter_cold_code:",
    ".rept 65536",
    "nop",
    ".endr",
    "ret",
    ".size lockmeter_cold_code, .-lockmeter_cold_code",
    ".popsection",
);

#[cfg(target_arch = "x86_64")]
unsafe extern "C" {
    /// The 64 KiB block above: no arguments, no memory touched, returns at once.
    fn lockmeter_cold_code();
}

/// The clock the pair is timed with. x86_64: the TSC, fenced so that the pair's loads and
/// stores (its cache misses) all complete between the two reads; other architectures: ns from
/// `Instant` (no portable cycle counter; the calibration then gives 1 tick per ns).
#[inline(always)]
fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `lfence` and `rdtsc` have no memory effects and exist on every x86_64 CPU.
    unsafe {
        core::arch::x86_64::_mm_lfence();
        let t = core::arch::x86_64::_rdtsc();
        core::arch::x86_64::_mm_lfence();
        t
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Ticks of [`ticks`] per ns, measured against `Instant` over [`CALIBRATION`].
fn ticks_per_ns() -> f64 {
    let (start, t0) = (Instant::now(), ticks());
    while start.elapsed() < CALIBRATION {
        std::hint::spin_loop();
    }
    let (t1, ns) = (ticks(), start.elapsed().as_nanos());
    (t1.wrapping_sub(t0) as f64 / ns as f64).max(1e-9)
}

/// Evicts the caches: one byte written per line of `buf`, then (x86_64) the 64 KiB of code.
#[inline(never)]
fn evict(buf: &mut [u8], value: u8) {
    for b in buf.iter_mut().step_by(64) {
        // SAFETY: `b` is a valid, exclusive reference; volatile so that no store is left out.
        unsafe { std::ptr::write_volatile(b, value) };
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the block is only `nop`s and a `ret` (above); `mfence` has no other effect than
    // letting the buffer's stores drain before the pair is timed.
    unsafe {
        lockmeter_cold_code();
        core::arch::x86_64::_mm_mfence();
    }
}

/// The cold workload: `pairs` pairs (at least 1) after [`WARMUP`] ones, each after evicting
/// `mib` MiB of data (at least 1) and the code block; prints the median ns per pair. An error
/// (the buffer cannot be allocated) is one line for the caller to show.
pub(super) fn workload(pairs: u64, mib: u64) -> Result<(), String> {
    let bytes = usize::try_from(mib.max(1))
        .ok()
        .and_then(|m| m.checked_mul(1 << 20))
        .ok_or_else(|| format!("--cold-mib {mib} is too large for this machine"))?;
    let mut buf: Vec<u8> = Vec::new();
    buf.try_reserve_exact(bytes)
        .map_err(|_| format!("cannot allocate {mib} MiB for the cold pair: lower --cold-mib"))?;
    // Written once here: every page is mapped before the first timed pair.
    buf.resize(bytes, 1);
    let pairs = usize::try_from(pairs.max(1)).unwrap_or(usize::MAX);
    let mut timed: Vec<u64> = Vec::new();
    timed
        .try_reserve_exact(pairs)
        .map_err(|_| format!("cannot hold {pairs} timings: lower --cold-pairs"))?;
    timed.resize(pairs, 0);
    let per_ns = ticks_per_ns();
    let m = super::BENCH_LOCK.0.get();
    let mut value = 0u8;
    let mut pair = || {
        value = value.wrapping_add(1);
        evict(&mut buf, value);
        let t0 = ticks();
        // SAFETY: a statically initialized mutex, locked and unlocked by this thread.
        unsafe {
            libc::pthread_mutex_lock(m);
            libc::pthread_mutex_unlock(m);
        }
        ticks().wrapping_sub(t0)
    };
    for _ in 0..WARMUP {
        pair();
    }
    for t in timed.iter_mut() {
        *t = pair();
    }
    let mut ticks: Vec<f64> = timed.iter().map(|&t| t as f64).collect();
    println!("{:.3}", super::contended::median(&mut ticks) / per_ns);
    Ok(())
}

//! Start-up (the constructor), exit, fork and signal handling.

use crate::dump::{self, End};
use crate::state::{self, CFG, STATE};
use crate::sys::{self, env_count, getenv};
use core::ffi::{c_int, c_void};
use core::sync::atomic::Ordering::*;
use lockmeter_core::clock::{self, Calibration};
use lockmeter_core::settings;
use lockmeter_core::{LockKind, Mode};

#[used]
#[unsafe(link_section = ".init_array")]
static INIT: extern "C" fn() = init;

extern "C" fn init() {
    let saved = sys::errno();
    let t0 = clock::monotonic_ns();
    init_inner();
    // What starting cost this process, for the profile (its `start_ns`; the guardian's start at
    // the first metered acquisition adds to it).
    dump::START_COST_NS.fetch_add(clock::monotonic_ns().saturating_sub(t0).max(1), Relaxed);
    sys::set_errno(saved);
}

fn init_inner() {
    if getenv(settings::DISABLE.env_c).is_some_and(|v| v == b"1") {
        STATE.store(state::DISABLED, Release);
        return;
    }
    crate::real::resolve_all();
    state::init_tls_offset();
    // The collector's memory is shared with the watcher (started with the guardian), before any
    // table is mapped.
    if getenv(settings::GUARDIAN.env_c).is_none_or(|v| v != b"0") {
        crate::shared::init(env_count(&settings::MAX_MEMORY));
    }
    // SAFETY: glibc's own variables of these names, or null.
    unsafe {
        sys::init_cpu_id(
            crate::real::data_symbol(b"__rseq_offset\0").cast(),
            crate::real::data_symbol(b"__rseq_size\0").cast(),
        )
    };

    // Configuration: every setting is defined once, in `lockmeter_core::settings`.
    let hold = getenv(settings::HOLD.env_c).and_then(settings::parse_hold).unwrap_or(0);
    CFG.hold_every.store(hold, Relaxed);
    CFG.records_per_thread.store(env_count(&settings::RECORDS), Relaxed);
    crate::state::MAX_MEMORY.store(env_count(&settings::MAX_MEMORY), Relaxed);
    CFG.max_threads.store(env_count(&settings::THREADS) as u32, Relaxed);
    let locks = env_count(&settings::LOCKS) as usize;
    let frames = env_count(&settings::FRAMES) as u32;
    CFG.frames.store(frames, Relaxed);
    CFG.stack_sample.store(env_count(&settings::STACK_SAMPLE) as u32, Relaxed);
    CFG.stacks_per_thread.store(env_count(&settings::STACKS), Relaxed);
    CFG.events_per_thread.store(env_count(&settings::EVENTS), Relaxed);
    let longest = env_count(&settings::LONGEST_WAITS) as usize;
    if !crate::longest::init(longest, CFG.max_threads.load(Relaxed) as usize) {
        sys::write_stderr(b"lockmeter: cannot map the reservoirs of the longest waits; they are counted as lost\n");
    }
    if frames > 1 {
        // Unwind caches for the threads to come: a few now, more as the program creates threads
        // (`pthread_create`; lock hooks never allocate).
        let caches = CFG.max_threads.load(Relaxed).min(512) as usize;
        crate::unwind::init(caches);
    }

    // Clock.
    let want_tsc = match getenv(settings::CLOCK.env_c).and_then(settings::parse_clock) {
        Some(false) => false,
        Some(true) => cfg!(target_arch = "x86_64"),
        None => cpu_has_invariant_tsc(),
    };
    if want_tsc {
        let hz = getenv(settings::TSC_HZ.env_c).and_then(sys::parse_u64).filter(|&h| h > 1_000_000);
        let hz = hz.unwrap_or_else(|| clock::measure_tsc_hz(3_000_000));
        state::use_tsc();
        let c = Calibration::from_hz(hz);
        CFG.calib_hz.store(c.hz, Relaxed);
        CFG.calib_mult.store(c.mult, Relaxed);
    }

    crate::names::init();
    if !state::init_registry(locks) {
        sys::write_stderr(b"lockmeter: cannot map the lock registry; metering disabled\n");
        STATE.store(state::DISABLED, Release);
        return;
    }

    // Identity and output.
    // SAFETY: getpid/getppid have no preconditions.
    let (pid, ppid) = unsafe { (libc::getpid() as u64, libc::getppid() as u64) };
    dump::PID.store(pid as u32, Relaxed);
    let root = getenv(settings::ROOT_PPID.env_c).and_then(sys::parse_u64);
    // Under `lockmeter run` the root process is the one whose parent is `run`; with a plain
    // LD_PRELOAD every process tries the plain name first (without overwriting).
    dump::IS_ROOT.store(root.is_none_or(|r| r == ppid), Relaxed);
    // The image number the exec that started us passed on; then forget it, so that processes we
    // start without exec-ing ourselves (posix_spawn, system) start at 0.
    if let Some(seq) = getenv(settings::IMAGE_SEQ.env_c).and_then(sys::parse_u64) {
        dump::IMAGE_SEQ.store(seq as u32, Relaxed);
        // SAFETY: the constructor runs before any other thread of the program; the name is
        // NUL-terminated.
        unsafe { libc::unsetenv(settings::IMAGE_SEQ.env_c.as_ptr()) };
    }
    if let Some(out) = getenv(settings::OUTPUT.env_c).filter(|o| !o.is_empty()) {
        dump::set_output(out);
    }
    if let Some(m) = getenv(settings::MANIFEST.env_c).filter(|m| !m.is_empty()) {
        dump::set_manifest(m);
    }
    let idle_lines = getenv(settings::IDLE_LINES.env_c).is_some_and(|v| v == b"1");
    dump::IDLE_LINES.store(idle_lines, Relaxed);
    dump::remember_cmdline();

    // An exec'd image takes the calibration its predecessor measured (the same machine, the same
    // settings): half a millisecond saved in each process of a launcher or a build.
    if !dump::inherit_calibration(getenv(settings::CALIBRATION.env_c)) {
        calibrate_overhead();
    }
    if CFG.frames.load(Relaxed) <= 1 {
        dump::NS_PER_STACK.store(0, Relaxed);
    } else if dump::NS_PER_STACK.load(Relaxed) == 0 {
        calibrate_stacks();
    }
    dump::CALIBRATED.store(true, Relaxed);
    state::init_recycling();
    state::init_own();

    dump::START_UNIX_NS.store(clock::realtime_ns(), Relaxed);
    dump::START_MONO_NS.store(clock::monotonic_ns(), Relaxed);
    dump::START_TICKS.store(clock::now(), Relaxed);
    // SAFETY: getpid has no preconditions.
    crate::cost::START_CPU_NS
        .store(crate::cost::process_cpu_ns(unsafe { libc::getpid() } as u32), Relaxed);

    // SAFETY: registering plain extern "C" callbacks; they never unwind. glibc's `on_exit`
    // handlers run where `atexit` ones do (one list, in reverse order of registration), and get
    // the status passed to `exit` (also when `main` returns).
    unsafe {
        on_exit(at_exit, core::ptr::null_mut());
        libc::pthread_atfork(Some(on_fork_prepare), Some(on_fork_parent), Some(on_fork_child));
    }
    crate::swap::init(getenv(settings::LOCK.env_c), getenv(settings::LOCK_FILTER.env_c));
    crate::swap_rw::init_rw(getenv(settings::RWLOCK.env_c));
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT, libc::SIGABRT] {
        install_signal(sig);
    }
    let guardian = getenv(settings::GUARDIAN.env_c).is_none_or(|v| v != b"0");
    if guardian && let Some(v) = getenv(settings::GUARD_FD.env_c) {
        crate::guard::set_done_fd(v);
    }
    // The guardian starts at the first metered acquisition (`guard::metering`): an image that
    // takes no lock has nothing to lose.
    crate::guard::ready(guardian);
    STATE.store(state::READY, Release);

    // Run-time control: the socket of `lockmeter ctl`, `--delay`, `--duration`, `--interval`.
    let want_socket = getenv(settings::CONTROL.env_c).is_none_or(|v| v != b"0");
    let ms = |s: &settings::Setting| getenv(s.env_c).and_then(settings::parse_duration_ms);
    let interval_ms = ms(&settings::INTERVAL).unwrap_or(0);
    if interval_ms > 0 && !crate::timeline::init(interval_ms * 1_000_000, locks) {
        sys::write_stderr(b"lockmeter: cannot map the time series' tables; --interval is off\n");
    }
    if crate::control::configure(
        want_socket,
        ms(&settings::DELAY).unwrap_or(0),
        ms(&settings::DURATION),
    ) {
        crate::live::pause();
    }
    crate::control::start_if_needed();
}

/// Whether `/proc/cpuinfo` lists `constant_tsc` and `nonstop_tsc` (read without allocating).
fn cpu_has_invariant_tsc() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let mut buf = [0u8; 8192];
    let s = sys::read_file(c"/proc/cpuinfo", &mut buf);
    let has = |w: &[u8]| s.windows(w.len()).any(|x| x == w);
    has(b" constant_tsc") && has(b" nonstop_tsc")
}

/// Measures what the hooks add to a lock+unlock pair: metered minus raw, best of 5 rounds, on a
/// private mutex. The calibration lock is then given a new identity and left out of the profile.
fn calibrate_overhead() {
    const N: u64 = 2000;
    let mut m: libc::pthread_mutex_t = libc::PTHREAD_MUTEX_INITIALIZER;
    let mp = &mut m as *mut libc::pthread_mutex_t;
    let addr = mp as usize;
    let site = calibrate_overhead as *const () as usize;
    // No stacks for the calibration lock.
    state::CALIBRATING.store(true, Relaxed);
    STATE.store(state::READY, Release);
    let mut best_raw = u64::MAX;
    let mut best_metered = u64::MAX;
    let mut parts = [[0u64; 3]; 5];
    for round in parts.iter_mut() {
        let t0 = clock::monotonic_ns();
        for _ in 0..N {
            // SAFETY: a valid, initialized, unshared mutex locked and unlocked by this thread.
            unsafe {
                crate::real::mutex_lock(mp);
                crate::real::mutex_unlock(mp);
            }
        }
        let t1 = clock::monotonic_ns();
        for _ in 0..N {
            crate::meter::lock_with(
                addr,
                LockKind::Mutex,
                Mode::Exclusive,
                site,
                // SAFETY: as above. (The hooks' own trylock, as the program's lock calls get.)
                || unsafe { crate::hooks::mutex::mutex_trylock(mp) },
                // SAFETY: as above.
                || unsafe { crate::real::mutex_lock(mp) },
            );
            // SAFETY: as above.
            crate::meter::unlock_with(addr, || unsafe { crate::real::mutex_unlock(mp) });
        }
        let t2 = clock::monotonic_ns();
        best_raw = best_raw.min(t1 - t0);
        best_metered = best_metered.min(t2 - t1);
        // Only this thread has a shard yet.
        for sh in state::shards() {
            *round = crate::cost::calibration_round(&sh.cost, state::ticks_to_ns);
        }
    }
    STATE.store(state::UNINIT, Release);
    state::CALIBRATING.store(false, Relaxed);
    dump::NS_PER_PAIR.store(best_metered.saturating_sub(best_raw) / N, Relaxed);
    crate::cost::RAW_PAIR_PS.store(best_raw * 1000 / N, Relaxed);
    // Leave the calibration out: skip its identity, start a new one at this address, and clear
    // the per-CPU counts it made (no other thread of ours has metered yet).
    if let Some(reg) = state::registry()
        && let Some((idx, slot)) = reg.lookup(addr as u64, LockKind::Mutex)
    {
        crate::classes::CALIB_KEY.store(((idx as u64) << 32) | slot.generation() as u64, Relaxed);
        reg.renew(addr as u64, LockKind::Mutex);
        slot.last_owner.store(0, Relaxed);
    }
    for sh in state::shards() {
        sh.clear_cpus();
    }
    crate::cost::end_calibration(&parts);
}

/// Measures what recording one call stack costs (unwinding from here, a realistic depth at
/// start-up, plus interning): the median of 5 rounds of 200.
fn calibrate_stacks() {
    if CFG.frames.load(Relaxed) <= 1 {
        return;
    }
    let cache = crate::unwind::take_cache();
    if cache.is_null() {
        return;
    }
    let mut frames = [0u64; lockmeter_core::stacks::MAX_FRAMES];
    let want = (CFG.frames.load(Relaxed) as usize).min(frames.len());
    let top = crate::unwind::MAIN_STACK_TOP.load(Relaxed);
    let mut rounds = [0u64; 5];
    for r in rounds.iter_mut() {
        let t0 = clock::monotonic_ns();
        for _ in 0..200 {
            // SAFETY: the cache was just taken from the pool, by this thread alone.
            let n = crate::unwind::capture(unsafe { &mut *cache }, &mut frames[..want], top);
            core::hint::black_box(lockmeter_core::stacks::stack_hash(&frames[..n]));
        }
        *r = (clock::monotonic_ns() - t0) / 200;
    }
    rounds.sort_unstable();
    dump::NS_PER_STACK.store(rounds[2], Relaxed);
    // Give the cache back to the pool's next taker: this thread's shard takes its own.
    crate::unwind::return_cache(cache);
}

unsafe extern "C" {
    /// glibc's `on_exit(3)`: like `atexit`, and the handler receives the exit status.
    fn on_exit(f: extern "C" fn(c_int, *mut c_void), arg: *mut c_void) -> c_int;
}

extern "C" fn at_exit(status: c_int, _arg: *mut c_void) {
    dump::write_profile(End::Exit(status));
}

/// Through a fork, the forking thread's hooks pass through: in the child, fork handlers that run
/// before ours must not write into the tables it still shares with its parent.
extern "C" fn on_fork_prepare() {
    state::set_busy(true);
    crate::fork::before_fork();
}

extern "C" fn on_fork_parent() {
    crate::fork::after_fork_in_parent();
    state::set_busy(false);
}

extern "C" fn on_fork_child() {
    // The program's `fork` returns in the child with the errno it had: what the handler's calls
    // set (sockets, the control thread, the tables' copy) is undone here, once for all of them.
    let saved = sys::errno();
    fork_child();
    sys::set_errno(saved);
}

/// [`on_fork_child`]'s work.
fn fork_child() {
    let t0 = clock::monotonic_ns();
    // Only the forking thread exists now, and its TLS block is the child's own: its shard is
    // the parent's.
    state::reset_thread();
    // Most children take no lock: their tables' copy waits for the first (`fork.rs`).
    if crate::fork::defer(t0) {
        return;
    }
    let armed = crate::guard::close_inherited();
    crate::control::close_inherited();
    if crate::fork::child_start(armed, None) {
        crate::fork::restore_state();
        // Its tables are its own: metering goes on (the page of `own_process` read zero since
        // the fork).
        state::own_again();
        // What starting cost this child, for its profile (`start_ns`; its guardian's start adds
        // to it).
        dump::START_COST_NS.fetch_add(clock::monotonic_ns().saturating_sub(t0).max(1), Relaxed);
    }
}

/// Installs our handler for `sig` if the program left it at the default (termination).
fn install_signal(sig: c_int) {
    // SAFETY: zeroed sigaction is a valid "query" argument; sigaction only writes `old`.
    unsafe {
        let mut old: libc::sigaction = core::mem::zeroed();
        if libc::sigaction(sig, core::ptr::null(), &mut old) != 0
            || old.sa_sigaction != libc::SIG_DFL
        {
            return;
        }
        let mut sa: libc::sigaction = core::mem::zeroed();
        sa.sa_sigaction = on_signal as *const () as usize;
        sa.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, core::ptr::null_mut());
    }
}

/// A fatal signal: write the profile, then die of the same signal.
extern "C" fn on_signal(sig: c_int) {
    dump::write_profile(End::Signal(sig));
    // SAFETY: restoring the default action and re-raising; the signal stays blocked until this
    // handler returns, then the default action ends the process with the same status.
    unsafe {
        let mut sa: libc::sigaction = core::mem::zeroed();
        sa.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, core::ptr::null_mut());
        libc::raise(sig);
    }
}

//! The `LD_PRELOAD` library of lockmeter: meters every pthread lock of an unmodified program.
//!
//! Load it with `lockmeter run -- PROGRAM` (or `LD_PRELOAD=liblockmeter_preload.so PROGRAM`). It
//! interposes `pthread_mutex_*`, `pthread_rwlock_*`, `pthread_spin_*` and `pthread_cond_*wait`,
//! records per (thread, lock, call site, mode) statistics in per-thread tables, and writes one
//! profile per process image at exit, `_exit`, `exec` or a fatal signal (SIGTERM, SIGINT, SIGHUP,
//! SIGQUIT, SIGABRT: `abort` and failed assertions) that the program does not handle itself.
//!
//! # Global invariants of the hooks
//! - They return exactly what the real function returned and leave `errno` as it left it.
//! - No allocation, no panic, no internal lock, no system call on the metered path (the first
//!   lock of a thread maps its table with one `mmap`).
//! - A per-thread `busy` flag is set before any bookkeeping; nested calls (from a signal handler,
//!   or from libc inside a hook) pass straight through.
//! - Hooks pass through until the constructor has run, and after the profile was written.
//! - Nothing with a destructor is alive across a real call that may be cancelled (condvar waits).
//!
//! # Configuration (environment)
//! | variable | meaning | default |
//! |---|---|---|
//! | `LOCKMETER_OUTPUT` | profile path: under `lockmeter run` the program writes `PATH` and other processes `PATH.PID`; with a plain `LD_PRELOAD` the first process to finish takes `PATH`, the others `PATH.PID[.N]` | `lockmeter-PID.lmp` |
//! | `LOCKMETER_HOLD` | hold timing: `on`, `off`, `sample:N` | `on` |
//! | `LOCKMETER_RECORDS` | records per thread (thread, lock, site, mode) | 4096 |
//! | `LOCKMETER_LOCKS` | distinct lock addresses | 65536 |
//! | `LOCKMETER_THREADS` | threads metered | 1024 |
//! | `LOCKMETER_FRAMES` | frames per call stack (contended acquisitions, first uses); 0 or 1: the call site only | 16 |
//! | `LOCKMETER_STACK_SAMPLE` | also record the stack of one acquisition in N (0: never) | 0 |
//! | `LOCKMETER_STACKS` | distinct stacks per thread | 1024 |
//! | `LOCKMETER_EVENTS` | (lock, stack, holder) combinations per thread | 4096 |
//! | `LOCKMETER_CLOCK` | `tsc` or `monotonic` | `tsc` when invariant |
//! | `LOCKMETER_TSC_HZ` | TSC rate (skips the 3 ms calibration) | measured |
//! | `LOCKMETER_ROOT_PPID` | set by `lockmeter run`: the root process writes `LOCKMETER_OUTPUT` itself | unset |
//! | `LOCKMETER_DISABLE` | `1`: pass everything through | unset |

mod dump;
mod hooks;
mod init;
mod meter;
mod names;
mod real;
mod state;
mod sys;
mod unwind;

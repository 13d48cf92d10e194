//! The `LD_PRELOAD` library of lockmeter: meters every pthread lock of an unmodified program.
//!
//! Load it with `lockmeter run -- PROGRAM` (or `LD_PRELOAD=liblockmeter_preload.so PROGRAM`). It
//! interposes `pthread_mutex_*`, `pthread_rwlock_*`, `pthread_spin_*`, `pthread_cond_*wait` and
//! the POSIX semaphores (`sem_wait`, `sem_trywait`, `sem_timedwait`, `sem_clockwait`, `sem_post`,
//! `sem_init`, `sem_destroy`; CPython's `threading.Lock` is one), and C11's `mtx_*` and
//! `cnd_wait`/`cnd_timedwait` (glibc's call the internal pthread functions, out of reach of the
//! pthread hooks), records per (thread, lock, call
//! site, mode) statistics in per-thread tables, and writes one profile per process image at exit,
//! `_exit`, `exec` or a fatal signal (SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGABRT: `abort` and failed
//! assertions) that the program does not handle itself.
//!
//! With `LOCKMETER_LOCK=ALGO` (`lockmeter run --lock ALGO`) it also *swaps* the program's
//! default-type mutexes and their condvars onto a lab algorithm of `lockmeter-locks` (see
//! `swap.rs`), metered as usual; with `LOCKMETER_RWLOCK=qrwlock` (`run --rwlock qrwlock`) its
//! process-private rwlocks.
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
//! Every variable the collector reads is defined once, with its default, range and help, in
//! [`lockmeter_core::settings`]; `lockmeter run` derives its flags from the same table, and the
//! README's settings section is generated from it.

// The guardian and the watcher (their raw `clone` onto a stack of their own is x86_64 code) start
// only on x86_64: elsewhere the code that serves them is built but unused.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code, unused_imports))]

mod alloc;
mod classes;
mod control;
mod cost;
mod dump;
mod fork;
mod funcs;
mod guard;
mod hooks;
mod init;
mod live;
mod longest;
mod lost;
mod meter;
mod names;
mod real;
mod resident;
mod shared;
mod state;
mod swap;
mod swap_cond;
mod swap_rw;
mod sys;
mod timeline;
mod unwind;
mod watch;

#[global_allocator]
static ALLOC: alloc::Alloc = alloc::Alloc;

//! End-to-end tests: one file per run, one profile per process image in it. Children made by
//! fork, posix_spawn and vfork, and images started by every exec function, each get their own
//! exact profile in the run file (the tests split it with `split_run` into `img/OUT.PID`,
//! `img/OUT.PID.N` after the N-th exec); process-shared locks are counted in each process that
//! takes them. Images that took no lock are left out of the file, except the first.
//!
//! A run under a launcher (a pyenv-style shim that execs through `env`, `sh -c 'exec ...'`, a
//! shell script that starts the program as a child) is summarized as the program that took the
//! locks, named with its launchers; its default report shows the program's locks with exact
//! counts, and `report --by process` lists every process.
//!
//! `strace -f` ends both under `lockmeter run` and around it (it waits for any child until none
//! is left, which used to include its own guardian and watcher). Children made without fork's
//! handlers (glibc's `_Fork`, a raw `clone`) are not metered: their parent's profile holds the
//! parent's acquisitions only. Tests that need strace are skipped, with a printed reason, without
//! it.
//!
//! Ground-truth programs (`tests/programs/`): execer.c, forker.c, forkerrno.c, forkthreads.c,
//! latefork.c, pshared.c, spawner.c, underfork.c, hammer.c (under the launcher scripts the tests
//! write).
//!
//! Needs gcc. Run with `cargo test -p lockmeter --test processes`; the harness builds the
//! preload library itself (`cargo build -p lockmeter-preload`) once per test process.
//!
//! One test binary; its modules: `fork_exec` (fork, posix_spawn, vfork, exec, children made
//! without fork's handlers, the calibration an exec passes on), `launchers` (shims, `sh -c`,
//! wrapper scripts, processes that outlive the program), `strace` (`strace -f` around and under
//! `lockmeter run`).

#[path = "../common/mod.rs"]
mod common;

mod fork_exec;
mod launchers;
mod strace;

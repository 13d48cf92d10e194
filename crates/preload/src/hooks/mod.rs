//! The exported functions: exactly the libc names, nothing else.
//!
//! Each lock function that needs its call site is a naked trampoline that passes its own return
//! address (the caller's call site) as one extra argument and tail-jumps to the implementation:
//! exact, free, and independent of frame pointers. The implementations only forward to
//! [`crate::meter`], which returns exactly what the real function returned and leaves `errno` as
//! the real function left it.
//!
//! One file per lock family: `mutex.rs`, `rwlock.rs`, `spin.rs`, `cond.rs`, `sem.rs`, `c11.rs`
//! (`<threads.h>`), and `process.rs` (`_exit`, `exec*`); this file holds the trampoline macro
//! and the start and end of a lock identity (init and destroy).

use crate::state::{enter, leave};
use lockmeter_core::LockKind;

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("lockmeter-preload supports x86_64 and aarch64");

/// A naked trampoline: `$name(args)` -> `$imp(args, return_address)`.
macro_rules! trampoline {
    ($abi:literal fn $name:ident($($a:ident: $t:ty),*) -> $r:ty; x86 $x86:literal, arm $arm:literal => $imp:ident) => {
        #[doc = concat!("Interposed `", stringify!($name), "`.")]
        ///
        /// # Safety
        /// The contract of the libc function of the same name.
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        pub unsafe extern $abi fn $name($($a: $t),*) -> $r {
            #[cfg(target_arch = "x86_64")]
            core::arch::naked_asm!(concat!("mov ", $x86, ", [rsp]"), "jmp {}", sym $imp);
            #[cfg(target_arch = "aarch64")]
            core::arch::naked_asm!(concat!("mov ", $arm, ", x30"), "b {}", sym $imp);
        }
    };
}

mod c11;
mod cond;
mod mutex;
mod process;
mod rwlock;
mod sem;
mod spin;

/// A lock is initialized at `addr` by a call at `site`: a new identity, of that site's class.
/// Bounded and lock-free: a class table probe (one CAS for a new class) and a registry lookup.
fn begin(addr: usize, kind: LockKind, site: usize) {
    if let Some(cx) = enter() {
        if let Some(r) = crate::state::registry() {
            let class = crate::classes::CLASSES.intern(
                site as u64,
                kind,
                lockmeter_core::registry::ClassOrigin::Init,
                addr as u64,
            );
            crate::classes::CLASSES.ended(r.begin(addr as u64, kind, class));
        }
        leave(cx);
    }
}

/// The lock at `addr` was destroyed: its identity ends (its class counts one more lifetime) and
/// its registry slot is freed for another lock. The records of the identity, in any thread's
/// table, are folded into its class by their threads or when the profile is written.
fn end(addr: usize) {
    if let Some(cx) = enter() {
        if let Some(r) = crate::state::registry() {
            crate::classes::CLASSES.ended(r.retire(addr as u64));
        }
        leave(cx);
    }
}

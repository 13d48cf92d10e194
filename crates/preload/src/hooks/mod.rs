//! The exported functions: exactly the libc names, nothing else.
//!
//! Each lock function that needs its call site is a naked trampoline that passes its own return
//! address (the caller's call site) as one extra argument and tail-jumps to the implementation:
//! exact, free, and independent of frame pointers. The implementations only forward to
//! [`crate::meter`], which returns exactly what the real function returned and leaves `errno` as
//! the real function left it.
//!
//! One file per lock family: `mutex.rs`, `rwlock.rs`, `spin.rs`, `cond.rs`, `sem.rs`, `c11.rs`
//! (`<threads.h>`), `process.rs` (`_exit`, `exec*`), `thread.rs` (`pthread_create`), `wait.rs`
//! (waits for any child, which would see the guardian and the watcher) and `dl.rs` (`dlopen`:
//! the maps the watcher writes); this file holds the trampoline macro, the macro that writes each
//! lock type's unlock, init and destroy hooks (`lock_trio!`), and the start and end of a lock
//! identity (init and destroy).

use crate::state::{enter, leave};
use lockmeter_core::LockKind;

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("lockmeter-preload supports x86_64 and aarch64");

/// A naked trampoline: `$name(args)` -> `$imp(args, return_address)`.
macro_rules! trampoline {
    ($abi:literal fn $name:ident($($a:ident: $t:ty),*) -> $r:ty; x86 $x86:literal, arm $arm:literal => $imp:ident) => {
        trampoline!(@ ".text" $abi fn $name($($a: $t),*) -> $r; x86 $x86, arm $arm => $imp);
    };
    // `hot`: in `.text.hot`, beside the other functions of the uncontended mutex pair (see
    // build.rs).
    (hot $abi:literal fn $name:ident($($a:ident: $t:ty),*) -> $r:ty; x86 $x86:literal, arm $arm:literal => $imp:ident) => {
        trampoline!(@ ".text.hot.lockmeter" $abi fn $name($($a: $t),*) -> $r; x86 $x86, arm $arm => $imp);
    };
    (@ $section:literal $abi:literal fn $name:ident($($a:ident: $t:ty),*) -> $r:ty; x86 $x86:literal, arm $arm:literal => $imp:ident) => {
        #[doc = concat!("Interposed `", stringify!($name), "`.")]
        ///
        /// # Safety
        /// The contract of the libc function of the same name.
        #[unsafe(naked)]
        #[unsafe(no_mangle)]
        #[unsafe(link_section = $section)]
        pub unsafe extern $abi fn $name($($a: $t),*) -> $r {
            #[cfg(target_arch = "x86_64")]
            core::arch::naked_asm!(concat!("mov ", $x86, ", [rsp]"), "jmp {}", sym $imp);
            #[cfg(target_arch = "aarch64")]
            core::arch::naked_asm!(concat!("mov ", $arm, ", x30"), "b {}", sym $imp);
        }
    };
}
/// The unlock, init and destroy hooks of one lock type (`$t`, kind `$kind`), the same for every
/// type but for the calls they forward:
/// - `unlock #[ATTR]* NAME(x) { BODY }`: the exported `NAME`, whose body is `BODY` (the metered
///   release), with the attributes `ATTR` (the mutex's: its section, see build.rs);
/// - `init NAME(x, ARGS; site) x86 REG, arm REG => IMP { BODY }`: a trampoline `NAME` (the init
///   needs its call site) to `IMP`, which begins a new lock identity at `x`, of the class of the
///   call site (see [`begin`]), then returns `BODY` (the real init);
/// - `destroy NAME(x) -> c_int { BODY }`: the exported `NAME`, which returns `BODY` (the real
///   destroy) and ends the identity at `x` (see [`end`]) when it returned 0; `-> ()`: a destroy
///   that returns nothing, after which the identity always ends.
///
/// `errno kept` saves `errno` before `begin` and `end` and restores it after them (the semaphore
/// and C11 hooks); `errno as_is` calls them alone.
macro_rules! lock_trio {
    (
        $t:ty, $kind:expr, errno $errno:ident;
        unlock $(#[$umeta:meta])* $unlock:ident($ul:ident) $ubody:block
        init $init:ident($il:ident $(, $a:ident: $at:ty)*; $site:ident)
            x86 $x86:literal, arm $arm:literal => $imp:ident $ibody:block
        destroy $destroy:ident($dl:ident) -> $dr:tt $dbody:block
    ) => {
        #[doc = concat!("Interposed `", stringify!($unlock), "`.")]
        ///
        /// # Safety
        /// The libc contract.
        #[unsafe(no_mangle)]
        $(#[$umeta])*
        pub unsafe extern "C" fn $unlock($ul: *mut $t) -> c_int $ubody

        trampoline!("C" fn $init(_l: *mut $t $(, $a: $at)*) -> c_int; x86 $x86, arm $arm => $imp);
        unsafe extern "C" fn $imp($il: *mut $t, $($a: $at,)* $site: usize) -> c_int {
            lock_trio!(@errno $errno, $crate::hooks::begin($il as usize, $kind, $site));
            $ibody
        }

        lock_trio!(@destroy $errno, $destroy($dl: $t) -> $dr $dbody);
    };
    (@destroy $errno:ident, $destroy:ident($dl:ident: $t:ty) -> c_int $dbody:block) => {
        #[doc = concat!("Interposed `", stringify!($destroy), "`: ends this lock identity.")]
        ///
        /// # Safety
        /// The libc contract.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $destroy($dl: *mut $t) -> c_int {
            let r = $dbody;
            if r == 0 {
                lock_trio!(@errno $errno, $crate::hooks::end($dl as usize));
            }
            r
        }
    };
    (@destroy $errno:ident, $destroy:ident($dl:ident: $t:ty) -> () $dbody:block) => {
        #[doc = concat!("Interposed `", stringify!($destroy), "`: ends this lock identity.")]
        ///
        /// # Safety
        /// The libc contract.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $destroy($dl: *mut $t) {
            $dbody
            lock_trio!(@errno $errno, $crate::hooks::end($dl as usize));
        }
    };
    (@errno kept, $call:expr) => {{
        let e = $crate::sys::errno();
        $call;
        $crate::sys::set_errno(e);
    }};
    (@errno as_is, $call:expr) => {
        $call
    };
}

mod c11;
mod cond;
mod dl;
pub(crate) mod mutex;
mod process;
mod rwlock;
mod sem;
mod spin;
mod thread;
mod wait;

/// A lock is initialized at `addr` by a call at `site`: a new identity, of that site's class.
/// Bounded and lock-free: a class table probe (one CAS for a new class) and a registry lookup.
fn begin(addr: usize, kind: LockKind, site: usize) {
    if let Some(cx) = enter() {
        let timing = crate::cost::Lifetime::start(&cx);
        if let Some(r) = crate::state::registry() {
            let class = crate::classes::CLASSES.intern(
                site as u64,
                kind,
                lockmeter_core::registry::ClassOrigin::Init,
                addr as u64,
            );
            crate::classes::CLASSES.ended(r.begin(addr as u64, kind, class));
        }
        drop(timing);
        leave(cx);
    }
}

/// The lock at `addr` was destroyed: its identity ends (its class counts one more lifetime) and
/// its registry slot is freed for another lock. The records of the identity, in any thread's
/// table, are folded into its class by their threads or when the profile is written.
fn end(addr: usize) {
    if let Some(cx) = enter() {
        let timing = crate::cost::Lifetime::start(&cx);
        if let Some(r) = crate::state::registry() {
            crate::classes::CLASSES.ended(r.retire(addr as u64));
        }
        drop(timing);
        leave(cx);
    }
}

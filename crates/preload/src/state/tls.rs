//! The per-thread TLS block (a `const`-initialized cell block without a destructor, usable at
//! any point of a thread's life) and a hook's way in and out of metering: `enter`, `leave`,
//! `unmetered`.

use super::shards::{ACQ_NO_SHARD, Private, Shard, new_shard};
use super::{READY, STATE};
use core::cell::Cell;
use core::ffi::c_int;
use core::sync::atomic::{AtomicPtr, AtomicU8, Ordering::*};

/// One while this process owns the collector's tables. It lives on a page the kernel zeroes
/// in every child with a memory of its own (`MADV_WIPEONFORK`): a `fork` child sets it again
/// once it has tables of its own (`init::on_fork_child`, or its first lock: `fork.rs`, whose
/// values the byte also takes before), while the children of glibc's
/// `_Fork` or a raw `clone`, which run no fork handler and share the tables with their parent,
/// find zero and are not metered (their hooks pass through; their profile is never written,
/// `dump::write_profile` being for `PID` only). Until the constructor maps the page (or where
/// the kernel lacks `MADV_WIPEONFORK`, Linux < 4.14) it points at [`ALWAYS_OWN`].
static OWN: &AtomicPtr<AtomicU8> = &super::HOT.own;
pub(super) static ALWAYS_OWN: AtomicU8 = AtomicU8::new(1);

/// Whether this process owns the collector's tables (not a `_Fork` or raw `clone` child, nor a
/// fork child before its first lock).
#[inline(always)]
pub(crate) fn own_process() -> bool {
    own_byte() == 1
}

/// [`OWN`]'s byte of a fork child that has not copied its tables yet (`fork.rs`).
pub(crate) const OWN_PENDING: u8 = 2;

/// Whether this process is a fork child that has not copied its tables yet (`fork.rs`).
#[inline(always)]
pub(crate) fn fork_pending() -> bool {
    own_byte() == OWN_PENDING
}

/// [`OWN`]'s byte: 1 (own), 0 (a `_Fork` or raw `clone` child) or a fork child's state before
/// its first lock ([`OWN_PENDING`], then `fork.rs`'s `STARTING`).
#[inline(always)]
pub(crate) fn own_byte() -> u8 {
    // SAFETY: `OWN` points at `ALWAYS_OWN` or at the page `init_own` mapped, never unmapped.
    unsafe { (*OWN.load(Relaxed)).load(Relaxed) }
}

/// The private pages of [`OWN`] (`fork::PRIVATE_LEN` bytes, `OWN`'s byte first, the first
/// `fork::WIPED_LEN` of them wiped at a fork), or null where the kernel refused them.
pub(crate) fn own_page() -> *mut u8 {
    let p = OWN.load(Relaxed);
    if core::ptr::eq(p, &ALWAYS_OWN) { core::ptr::null_mut() } else { p.cast() }
}

/// Maps the pages of [`OWN`] (constructor). Leaves the fallback where the kernel refuses.
pub(crate) fn init_own() {
    let saved = crate::sys::errno();
    let len = crate::fork::PRIVATE_LEN;
    let p = crate::shared::map_anon(len, libc::MAP_PRIVATE);
    // SAFETY: `p` is null or a fresh anonymous private mapping of ours; madvise on it alone.
    unsafe {
        if !p.is_null() {
            if libc::madvise(p.cast(), crate::fork::WIPED_LEN, libc::MADV_WIPEONFORK) == 0 {
                let own = p as *mut AtomicU8;
                (*own).store(1, Relaxed);
                OWN.store(own, Release);
            } else {
                libc::munmap(p.cast(), len);
            }
        }
    }
    crate::sys::set_errno(saved);
}

/// In a fork child whose tables are its own now: metering may go on.
pub(crate) fn own_again() {
    // SAFETY: as in `own_process`.
    unsafe { (*OWN.load(Relaxed)).store(1, Relaxed) };
}

/// The per-thread TLS block. All-zero is its initial state (no lazy init, no destructor).
#[repr(C)]
pub(crate) struct Tls {
    pub(crate) shard: Cell<*const Shard>,
    /// Set while a hook does its own bookkeeping: nested calls pass straight through.
    pub(crate) busy: Cell<bool>,
    /// Set once this thread was refused a shard.
    pub(crate) refused: Cell<bool>,
    /// The thread's kernel id once it has a shard (0 before): what glibc records as a mutex's
    /// owner, for the hooks' own trylock of a default mutex (`hooks::mutex`).
    pub(crate) tid: Cell<u32>,
}

// On x86_64 the block is a `.tbss` symbol reached through the initial-exec TLS model: one
// `%fs`-relative load, where Rust's `thread_local!` in a cdylib calls `__tls_get_addr` on every
// access (general-dynamic model). A library loaded by LD_PRELOAD always gets static TLS.
// 16-byte aligned: its two words never straddle two cache lines.
#[cfg(target_arch = "x86_64")]
core::arch::global_asm!(
    ".pushsection .tbss,\"awT\",@nobits",
    ".p2align 4",
    ".globl __lockmeter_preload_tls",
    ".hidden __lockmeter_preload_tls",
    ".type __lockmeter_preload_tls, @object",
    ".size __lockmeter_preload_tls, 16",
    "__lockmeter_preload_tls:",
    ".zero 16",
    ".popsection",
);
const _: () = assert!(size_of::<Tls>() <= 16 && align_of::<Tls>() <= 8);

/// Keeps the TLS block's offset from the thread pointer in `state::HOT`, for [`Here`]
/// (constructor, before `STATE` is first `READY`).
pub(crate) fn init_tls_offset() {
    #[cfg(target_arch = "x86_64")]
    {
        let off: isize;
        // SAFETY: loads the block's offset from the thread pointer (a GOT entry filled by the
        // dynamic linker); reads nothing else.
        unsafe {
            core::arch::asm!(
                "mov {o}, qword ptr [rip + __lockmeter_preload_tls@GOTTPOFF]",
                o = out(reg) off,
                options(nostack, pure, readonly, preserves_flags)
            );
        }
        TLS_OFF.store(off, Relaxed);
    }
}

/// The TLS block's offset from the thread pointer, once the constructor set it.
#[cfg(target_arch = "x86_64")]
static TLS_OFF: &core::sync::atomic::AtomicIsize = &super::HOT.tls_off;

/// The calling thread's TLS block as a hook in metering reaches it. On x86_64: its offset from
/// the thread pointer (read from `state::HOT`'s line, which the hook reads anyway, rather than
/// from the GOT), each word read and written `%fs`-relative, so that the thread pointer itself
/// (`%fs:0`, a line of glibc's thread descriptor no lock call of the program reads) is not
/// loaded. Elsewhere: its address.
#[derive(Clone, Copy)]
pub(crate) struct Here(
    #[cfg(target_arch = "x86_64")] isize,
    #[cfg(not(target_arch = "x86_64"))] *const Tls,
);

/// The calling thread's [`Here`], for a hook that found `STATE` `READY` (so the constructor has
/// set [`TLS_OFF`]).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn here() -> Option<Here> {
    Some(Here(TLS_OFF.load(Relaxed)))
}

#[cfg(target_arch = "x86_64")]
impl Here {
    /// [`Tls::shard`].
    #[inline(always)]
    fn shard(self) -> *const Shard {
        let v: usize;
        // SAFETY: `self.0` is the TLS block's offset from the thread pointer (static TLS, the
        // same for every thread); the block is alive as long as the thread and its `shard` is a
        // pointer (`Cell` is `repr(transparent)`).
        unsafe {
            core::arch::asm!(
                "mov {v}, qword ptr fs:[{o} + {d}]",
                v = out(reg) v,
                o = in(reg) self.0,
                d = const core::mem::offset_of!(Tls, shard),
                options(nostack, pure, readonly, preserves_flags)
            );
        }
        v as *const Shard
    }

    /// The 4 bytes at `OFF` in the block, read `%fs`-relative.
    #[inline(always)]
    fn read32<const OFF: usize>(self) -> u32 {
        const { assert!(OFF + 4 <= size_of::<Tls>()) };
        let v: u32;
        // SAFETY: as in `shard`; the 4 bytes lie in the block (the assert above), any bits.
        unsafe {
            core::arch::asm!(
                "mov {v:e}, dword ptr fs:[{o} + {d}]",
                v = out(reg) v,
                o = in(reg) self.0,
                d = const OFF,
                options(nostack, pure, readonly, preserves_flags)
            );
        }
        v
    }

    /// [`Tls::busy`] (its byte of the 4 read: a `bool`, 0 or 1).
    #[inline(always)]
    fn busy(self) -> bool {
        self.read32::<{ core::mem::offset_of!(Tls, busy) }>() & 0xff != 0
    }

    /// [`Tls::tid`].
    #[inline(always)]
    fn tid(self) -> u32 {
        self.read32::<{ core::mem::offset_of!(Tls, tid) }>()
    }

    /// Sets [`Tls::busy`].
    #[inline(always)]
    fn set_busy(self, b: bool) {
        // SAFETY: as in `shard`; writes the `bool` `busy` (0 or 1), which only this thread
        // touches.
        unsafe {
            if b {
                core::arch::asm!(
                    "mov byte ptr fs:[{o} + {d}], 1",
                    o = in(reg) self.0,
                    d = const core::mem::offset_of!(Tls, busy),
                    options(nostack, preserves_flags)
                );
            } else {
                core::arch::asm!(
                    "mov byte ptr fs:[{o} + {d}], 0",
                    o = in(reg) self.0,
                    d = const core::mem::offset_of!(Tls, busy),
                    options(nostack, preserves_flags)
                );
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn here() -> Option<Here> {
    tls().map(|t| Here(t))
}

#[cfg(not(target_arch = "x86_64"))]
impl Here {
    #[inline(always)]
    fn block(self) -> &'static Tls {
        // SAFETY: the calling thread's block (`here`), alive as long as the thread.
        unsafe { &*self.0 }
    }
    #[inline(always)]
    fn shard(self) -> *const Shard {
        self.block().shard.get()
    }
    #[inline(always)]
    fn busy(self) -> bool {
        self.block().busy.get()
    }
    #[inline(always)]
    fn tid(self) -> u32 {
        self.block().tid.get()
    }
    #[inline(always)]
    fn set_busy(self, b: bool) {
        self.block().busy.set(b)
    }
}

/// This thread's TLS block.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) fn tls() -> Option<&'static Tls> {
    let p: usize;
    // SAFETY: loads the block's offset from the thread pointer (a GOT entry filled by the dynamic
    // linker) and adds the thread pointer (%fs:0 holds its own address on x86_64 Linux). The
    // block is 16 zero-initialized bytes, valid as a `Tls`, alive as long as the thread.
    unsafe {
        core::arch::asm!(
            "mov {p}, qword ptr [rip + __lockmeter_preload_tls@GOTTPOFF]",
            "add {p}, qword ptr fs:0",
            p = out(reg) p,
            options(nostack, pure, readonly, preserves_flags)
        );
        Some(&*(p as *const Tls))
    }
}

#[cfg(not(target_arch = "x86_64"))]
thread_local! {
    static TLS: Tls = const {
        Tls {
            shard: Cell::new(core::ptr::null()),
            busy: Cell::new(false),
            refused: Cell::new(false),
            tid: Cell::new(0),
        }
    };
}
/// This thread's TLS block.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub(crate) fn tls() -> Option<&'static Tls> {
    // SAFETY: the block has no destructor and lives as long as the thread.
    TLS.try_with(|t| unsafe { &*(t as *const Tls) }).ok()
}

/// A hook's view of its thread while it meters.
pub(crate) struct Cx {
    pub(crate) tls: Here,
    pub(crate) shard: &'static Shard,
}

impl Cx {
    /// The thread's private shard part.
    ///
    /// # Safety
    /// Only one `&mut Private` may be live at a time: callers hold the `busy` flag (see `enter`)
    /// and do not call this twice in overlapping scopes.
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn private(&self) -> &mut Private {
        // SAFETY: by the caller's contract and Shard's Sync invariant.
        unsafe { &mut *self.shard.private.get() }
    }
}

/// Enters metering: `None` means pass through (not ready, re-entered, or no shard).
#[inline(always)]
pub(crate) fn enter() -> Option<Cx> {
    match enter_quick() {
        Entered::Yes(cx) => Some(cx),
        Entered::No => {
            core::hint::cold_path();
            None
        }
        Entered::Slow => {
            core::hint::cold_path();
            enter_slow(here()?)
        }
    }
}

/// What [`enter_quick`] found.
pub(crate) enum Entered {
    /// In metering.
    Yes(Cx),
    /// Pass through: not ready (or not this process's tables).
    No,
    /// Re-entered, or the thread has no shard yet: [`enter`] decides (out of line).
    Slow,
}

/// [`enter`] without its out-of-line part, for a hook whose usual path then calls nothing but
/// its last call (no value kept across a call: no register to save).
#[inline(always)]
pub(crate) fn enter_quick() -> Entered {
    if STATE.load(Relaxed) != READY || !own_process() {
        core::hint::cold_path();
        // A fork child's first lock copies its tables first, or waits for the thread that
        // copies them (`enter_slow`).
        return if own_byte() >= OWN_PENDING { Entered::Slow } else { Entered::No };
    }
    let Some(here) = here() else { return Entered::No };
    // SAFETY: shards are never unmapped.
    let (Some(shard), false) = (unsafe { here.shard().as_ref() }, here.busy()) else {
        core::hint::cold_path();
        return Entered::Slow;
    };
    here.set_busy(true);
    Entered::Yes(Cx { tls: here, shard })
}

/// [`enter`] of a thread that is re-entered or has no shard yet (out of line: the hooks' usual
/// path stays short).
#[cold]
#[inline(never)]
fn enter_slow(here: Here) -> Option<Cx> {
    // A fork child's first metered call copies its tables first (`fork.rs`).
    let started = || crate::fork::start_pending() && STATE.load(Relaxed) == READY;
    if !own_process() && !started() {
        return None;
    }
    // The same block as `here`, reached through its address.
    let t = tls()?;
    if t.busy.get() {
        return None;
    }
    let mut sp = t.shard.get();
    if sp.is_null() {
        if t.refused.get() {
            return None;
        }
        t.busy.set(true);
        sp = new_shard();
        t.busy.set(false);
        if sp.is_null() {
            t.refused.set(true);
            return None;
        }
        t.shard.set(sp);
        // SAFETY: shards are never unmapped; `set_thread` stored the tid on this thread.
        t.tid.set(unsafe { &*sp }.tid.load(Relaxed));
    }
    t.busy.set(true);
    // SAFETY: shards are never unmapped.
    Some(Cx { tls: here, shard: unsafe { &*sp } })
}

/// Passes through the result `r` of an acquisition made without metering, counting it as not
/// recorded when the thread was refused a table (and only then: before start-up, after the
/// profile was written, or re-entered, an acquisition is outside metering, not lost).
#[inline(always)]
pub(crate) fn unmetered(r: c_int) -> c_int {
    if (r == 0 || r == libc::EOWNERDEAD)
        && STATE.load(Relaxed) == READY
        && tls().is_some_and(|t| t.refused.get() && !t.busy.get())
        && own_process()
    {
        ACQ_NO_SHARD.fetch_add(1, Relaxed);
    }
    r
}

/// The calling thread's kernel id as its TLS block keeps it ([`Tls::tid`]), for a hook in
/// metering (its block's line read already); 0 when the thread has no shard.
#[inline(always)]
pub(crate) fn thread_tid() -> u32 {
    here().map_or(0, Here::tid)
}

/// Leaves metering.
#[inline(always)]
pub(crate) fn leave(cx: Cx) {
    cx.tls.set_busy(false);
}

/// Sets the calling thread's `busy` flag (its hooks pass through while it is set).
pub(crate) fn set_busy(b: bool) {
    if let Some(t) = tls() {
        t.busy.set(b);
    }
}

/// Forgets the calling thread's shard (in a fork child).
pub(crate) fn reset_thread() {
    if let Some(t) = tls() {
        t.shard.set(core::ptr::null());
        t.busy.set(false);
        t.refused.set(false);
        t.tid.set(0);
    }
}

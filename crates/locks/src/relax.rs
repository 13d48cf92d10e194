//! Spin-wait policies: what a waiter does between two looks at the lock.
//!
//! | Policy | One step | Notes |
//! |---|---|---|
//! | [`Tight`] | nothing | the classic `while (locked);` loop: hammers the core's front end |
//! | [`Pause`] | one `PAUSE` (x86) / `ISB` (aarch64) | `core::hint::spin_loop`; about 24 ns on Zen 4, ~140 cycles on Skylake+ |
//! | [`Backoff`] | 2^k `PAUSE`s, k = 0, 1, … capped at [`Backoff::MAX_SHIFT`] | exponential backoff (Anderson 1990); capped at ~6 µs on Zen 4 |
//! | [`Delay`] | a chain of dependent integer divisions, no `PAUSE` | seed 003's *delayed spin loop* (its IDIV variant): a long-latency instruction that stalls the spinner's pipeline and frees fetch/issue slots for an SMT sibling |
//! | [`Park`] | `PAUSE` for a bounded time, then sleep in `FUTEX_WAIT` | spin-then-park; only for locks whose waiters each wait on their own word ([`crate::Mcs`], [`crate::Clh`]) and for [`wait_while_eq`] |
//!
//! A policy is a type parameter of the spin locks, so the choice costs nothing at run time.
//! [`wait_while_eq`] / [`notify_all`] wait on a word with any policy; the bench's
//! `interference` scenario uses them.

use crate::primitive::{AtomicU32, Ordering::*, spin_loop};

/// A spin-wait policy. `relax` is called once per failed look at the lock.
pub trait Relax: Default + Send + Sync + 'static {
    /// The policy's short name (`tight`, `pause`, `backoff`, `delay`, `park`).
    const NAME: &'static str;
    /// Whether waiters eventually sleep (only [`Park`]).
    const PARKS: bool = false;
    /// One wait step.
    fn relax(&mut self);
}

/// No wait between looks: a tight loop.
#[derive(Debug, Default, Clone, Copy)]
pub struct Tight;
impl Relax for Tight {
    const NAME: &'static str = "tight";
    #[inline(always)]
    fn relax(&mut self) {
        #[cfg(loom)]
        spin_loop();
    }
}

/// One `PAUSE` (or the architecture's spin-loop hint) between looks.
#[derive(Debug, Default, Clone, Copy)]
pub struct Pause;
impl Relax for Pause {
    const NAME: &'static str = "pause";
    #[inline(always)]
    fn relax(&mut self) {
        spin_loop();
    }
}

/// Exponential backoff: 1, 2, 4, … `PAUSE`s per step, up to `2^MAX_SHIFT`.
#[derive(Debug, Default, Clone, Copy)]
pub struct Backoff {
    shift: u32,
}
impl Backoff {
    /// The largest step is `2^MAX_SHIFT` PAUSEs (256: about 6 µs on Zen 4, 15 µs on Skylake).
    pub const MAX_SHIFT: u32 = 8;
}
impl Relax for Backoff {
    const NAME: &'static str = "backoff";
    #[inline]
    fn relax(&mut self) {
        #[cfg(not(loom))]
        for _ in 0..(1u32 << self.shift) {
            spin_loop();
        }
        #[cfg(loom)]
        spin_loop();
        if self.shift < Self::MAX_SHIFT {
            self.shift += 1;
        }
    }
}

/// Seed 003's delayed spin loop: a long-latency instruction instead of `PAUSE`.
///
/// x86 has no user-mode "stall me for N cycles" instruction short of WAITPKG (absent in most
/// guests), so the delay is seed 003's IDIV variant: a chain of [`Delay::DIVS`] dependent 64-bit
/// divisions (about 100-150 cycles on Zen 4, more on older cores). It issues one µop every ~15
/// cycles, so an SMT sibling gets nearly all fetch and issue slots, and, unlike `PAUSE`, it never
/// triggers a hypervisor's pause-loop exit.
#[derive(Debug, Default, Clone, Copy)]
pub struct Delay;
impl Delay {
    /// Dependent divisions per step.
    pub const DIVS: u32 = 8;
}
impl Relax for Delay {
    const NAME: &'static str = "delay";
    #[inline]
    fn relax(&mut self) {
        #[cfg(not(loom))]
        {
            let mut x = core::hint::black_box(0xffff_ffff_ffff_fff1u64);
            let d = core::hint::black_box(3u64);
            for _ in 0..Self::DIVS {
                x = x / d + 0x7fff_ffff_ffff_fff1;
            }
            core::hint::black_box(x);
        }
        #[cfg(loom)]
        spin_loop();
    }
}

/// Spin-then-park: `PAUSE` for about [`Park::SPIN_NS`], then sleep on a futex.
#[derive(Debug, Default, Clone, Copy)]
pub struct Park;
impl Park {
    /// How long a waiter spins before it sleeps (ns). Park/unpark costs tens of µs in a VM.
    pub const SPIN_NS: u64 = 5_000;
}
impl Relax for Park {
    const NAME: &'static str = "park";
    const PARKS: bool = true;
    #[inline(always)]
    fn relax(&mut self) {
        spin_loop();
    }
}

/// A time-bounded spin phase: `spin()` returns `false` once about `budget_ns` have passed.
/// Reads the clock only every 16 steps.
#[derive(Debug)]
pub(crate) struct SpinBudget {
    start: u64,
    budget_ns: u64,
    n: u32,
}
impl SpinBudget {
    #[inline]
    pub(crate) fn new(budget_ns: u64) -> Self {
        SpinBudget { start: 0, budget_ns, n: 0 }
    }
    /// One spin step; `false` when the budget is spent.
    #[inline]
    pub(crate) fn spin(&mut self) -> bool {
        #[cfg(loom)]
        {
            spin_loop();
            self.n += 1;
            let _ = (self.start, self.budget_ns);
            self.n < 3
        }
        #[cfg(not(loom))]
        {
            spin_loop();
            self.n = self.n.wrapping_add(1);
            if self.n & 15 == 1 {
                let t = crate::primitive::now_ns();
                if self.n == 1 {
                    self.start = t;
                } else if t.wrapping_sub(self.start) >= self.budget_ns {
                    return false;
                }
            }
            true
        }
    }
}

/// Waits while `*a == v` under policy `P` (with [`Park`]: spins, then sleeps on the futex).
/// Whoever changes `*a` calls [`notify_all::<P>`](notify_all) afterwards.
pub fn wait_while_eq<P: Relax>(a: &AtomicU32, v: u32) {
    let mut p = P::default();
    if P::PARKS {
        let mut b = SpinBudget::new(Park::SPIN_NS);
        while a.load(Acquire) == v {
            if !b.spin() {
                while a.load(Acquire) == v {
                    crate::futex::sys::wait(a, v, None);
                }
                return;
            }
        }
    } else {
        while a.load(Acquire) == v {
            p.relax();
        }
    }
}

/// Wakes the waiters of [`wait_while_eq`] after a change of `*a` (a syscall for [`Park`], nothing
/// for the spinning policies).
pub fn notify_all<P: Relax>(a: &AtomicU32) {
    if P::PARKS {
        crate::futex::sys::wake(a, i32::MAX);
    }
}

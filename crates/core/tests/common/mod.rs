//! Entries for the fixed table's tests (`tables.rs`) and loom models (`loom.rs`).

/// Defines two entry types over the atomic type `$atomic` (std's or loom's), keys placed by
/// `$hash` (a `fn(u64) -> u64` of the tag):
/// - `Pair`: a two-word key `(a, b)`; the tag is `a`, `b` is told apart by `matches` (one writer);
/// - `Word`: a one-word key, the tag (many writers).
///
/// Both have a value `v`, reset by `write`.
#[macro_export]
macro_rules! test_entries {
    ($atomic:ty, $hash:expr) => {
        #[derive(Debug, Default)]
        pub struct Pair {
            pub a: $atomic,
            pub b: $atomic,
            pub v: $atomic,
        }

        impl lockmeter_core::fixed::Entry for Pair {
            type Key = (u64, u64);
            type Word = $atomic;
            const TAG_IS_KEY: bool = false;
            fn word(&self) -> &$atomic {
                &self.a
            }
            fn tag(k: &(u64, u64)) -> u64 {
                k.0
            }
            fn hash(k: &(u64, u64)) -> u64 {
                $hash(k.0)
            }
            fn matches(&self, k: &(u64, u64)) -> bool {
                self.b.load(core::sync::atomic::Ordering::Relaxed) == k.1
            }
            fn write(&self, k: &(u64, u64)) {
                self.b.store(k.1, core::sync::atomic::Ordering::Relaxed);
                self.v.store(0, core::sync::atomic::Ordering::Relaxed);
            }
        }

        #[derive(Debug, Default)]
        pub struct Word {
            pub k: $atomic,
            pub v: $atomic,
        }

        impl lockmeter_core::fixed::Entry for Word {
            type Key = u64;
            type Word = $atomic;
            const TAG_IS_KEY: bool = true;
            fn word(&self) -> &$atomic {
                &self.k
            }
            fn tag(k: &u64) -> u64 {
                *k
            }
            fn hash(k: &u64) -> u64 {
                $hash(*k)
            }
        }
    };
}

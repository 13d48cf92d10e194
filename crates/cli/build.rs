//! Builds the preload library (`lockmeter-preload`, a cdylib) so that the `lockmeter` binary can
//! carry a copy of it (`include_bytes!` in `src/embedded.rs`) and work when copied or installed
//! alone.
//!
//! Cargo cannot order a binary after a cdylib of the same workspace (artifact dependencies are
//! unstable), so this script runs `cargo build -p lockmeter-preload` itself, with its own target
//! directory under `OUT_DIR` (no lock shared with the outer build) and the outer build's profile.
//! It reruns when a source of the preload or of the crates it depends on changes.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let ws = manifest.join("../..");
    for dir in ["crates/preload", "crates/core", "crates/format"] {
        println!("cargo:rerun-if-changed={}", ws.join(dir).join("src").display());
        println!("cargo:rerun-if-changed={}", ws.join(dir).join("Cargo.toml").display());
    }
    for f in ["Cargo.lock", "Cargo.toml", ".cargo/config.toml"] {
        println!("cargo:rerun-if-changed={}", ws.join(f).display());
    }
    let release = std::env::var("PROFILE").as_deref() == Ok("release");
    let target = out.join("preload-target");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&ws)
        .args(["build", "--quiet", "--offline", "-p", "lockmeter-preload", "--target-dir"])
        .arg(&target);
    if release {
        cmd.arg("--release");
    }
    // A cross build embeds the library of the target, not of the build machine.
    let target_triple = std::env::var("TARGET").ok();
    let cross = target_triple.is_some() && target_triple != std::env::var("HOST").ok();
    if let (true, Some(t)) = (cross, &target_triple) {
        cmd.args(["--target", t]);
    }
    // A clippy run of the workspace runs this script with clippy as the compiler wrapper: the
    // inner build only compiles (the outer clippy run lints the preload crate itself).
    for var in ["RUSTC_WORKSPACE_WRAPPER", "CLIPPY_ARGS", "CLIPPY_CONF_DIR", "CARGO_TARGET_DIR"] {
        cmd.env_remove(var);
    }
    let status = cmd.status().expect("cannot run cargo to build lockmeter-preload");
    assert!(status.success(), "cargo build -p lockmeter-preload failed (see above)");
    let mut lib = target.clone();
    if let (true, Some(t)) = (cross, &target_triple) {
        lib.push(t);
    }
    let lib = lib.join(if release { "release" } else { "debug" }).join("liblockmeter_preload.so");
    let bytes = std::fs::read(&lib)
        .unwrap_or_else(|e| panic!("cannot read {} after its build: {e}", lib.display()));
    let copy = out.join("liblockmeter_preload.so");
    write_if_changed(&copy, &bytes);
    // The name of the copy `lockmeter` writes out: its content's hash, so two builds never share
    // one file and an unchanged build reuses it.
    println!("cargo:rustc-env=LOCKMETER_EMBEDDED_PRELOAD={}", copy.display());
    println!("cargo:rustc-env=LOCKMETER_EMBEDDED_PRELOAD_HASH={:016x}", fnv1a(&bytes));
}

/// Writes `bytes` to `path` unless it already holds them (so that an unchanged library does not
/// make the binary rebuild).
fn write_if_changed(path: &Path, bytes: &[u8]) {
    if std::fs::read(path).is_ok_and(|old| old == bytes) {
        return;
    }
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}

/// 64-bit FNV-1a.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

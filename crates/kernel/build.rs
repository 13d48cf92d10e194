//! Builds the BPF programs into a CO-RE skeleton when clang and bpftool are there.
//!
//! `vmlinux.h` is generated from the running kernel's BTF (`/sys/kernel/btf/vmlinux`) into
//! OUT_DIR; the object is compiled by clang through libbpf-cargo. When anything is missing the
//! crate builds without eBPF (cfg `lockmeter_bpf` unset) and says why at run time.

use std::path::PathBuf;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(lockmeter_bpf)");
    // lockmeter.bpf.c and the parts it includes (`*.bpf.h`, one per job).
    println!("cargo::rerun-if-changed=src/bpf");
    println!("cargo::rerun-if-env-changed=LOCKMETER_NO_BPF");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let why = match build(&out) {
        Ok(()) => {
            println!("cargo::rustc-cfg=lockmeter_bpf");
            String::new()
        }
        Err(why) => why,
    };
    std::fs::write(out.join("no_bpf_reason.txt"), why).expect("cannot write OUT_DIR");
}

#[cfg(feature = "bpf")]
fn build(out: &std::path::Path) -> Result<(), String> {
    use std::process::Command;
    if std::env::var_os("LOCKMETER_NO_BPF").is_some() {
        return Err("it was built with LOCKMETER_NO_BPF set".into());
    }
    let have =
        |tool: &str| Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
    if !have("clang") {
        return Err("clang was not found when it was built".into());
    }
    let btf = "/sys/kernel/btf/vmlinux";
    if !std::path::Path::new(btf).exists() {
        return Err(format!("{btf} (kernel BTF) was missing when it was built"));
    }
    let dump = Command::new("bpftool")
        .args(["btf", "dump", "file", btf, "format", "c"])
        .output()
        .map_err(|e| format!("bpftool could not be run when it was built ({e})"))?;
    if !dump.status.success() {
        return Err(format!(
            "bpftool failed when it was built: {}",
            String::from_utf8_lossy(&dump.stderr).trim()
        ));
    }
    std::fs::write(out.join("vmlinux.h"), &dump.stdout).map_err(|e| e.to_string())?;
    let arch = match std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("x86_64") => "x86",
        Ok("aarch64") => "arm64",
        Ok(a) => return Err(format!("no BPF target arch for {a}")),
        Err(_) => "x86",
    };
    libbpf_cargo::SkeletonBuilder::new()
        .source("src/bpf/lockmeter.bpf.c")
        .clang_args([
            std::ffi::OsString::from("-I"),
            out.as_os_str().to_owned(),
            format!("-D__TARGET_ARCH_{arch}").into(),
        ])
        .build_and_generate(out.join("lockmeter.skel.rs"))
        .map_err(|e| format!("the BPF program did not compile: {e:#}"))
}

#[cfg(not(feature = "bpf"))]
fn build(_out: &std::path::Path) -> Result<(), String> {
    Err("it was built without the `bpf` feature".into())
}

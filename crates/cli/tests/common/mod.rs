//! Harness of the end-to-end tests: builds the preload library once, compiles the C programs of
//! `tests/programs/` with gcc, runs them under `lockmeter run` (with a time limit), and reads
//! the profiles back through `lockmeter report --format json`.
//!
//! Every failed check panics with the program's output and the report's JSON (see
//! [`Profile::fail`]); the scratch directory of a failed test is kept and its path printed.

#![allow(dead_code)]

mod profile;
mod programs;
mod run;

// Each test binary uses a part of the harness (hence also `dead_code` above).
#[allow(unused_imports)]
pub use profile::*;
#[allow(unused_imports)]
pub use programs::*;
#[allow(unused_imports)]
pub use run::*;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Time limit of one program run (generous: a 2-core machine running tests in parallel).
pub const RUN_LIMIT: Duration = Duration::from_secs(90);

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `lockmeter` binary under test.
pub fn lockmeter_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_lockmeter"))
}

/// The preload library, built once per test process with the profile of this test binary.
pub fn preload() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "--quiet", "-p", "lockmeter-preload"]).current_dir(workspace());
        if !cfg!(debug_assertions) {
            cmd.arg("--release");
        }
        let out = cmd.output().expect("cannot run cargo to build lockmeter-preload");
        assert!(
            out.status.success(),
            "cargo build -p lockmeter-preload failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lib = lockmeter_bin().with_file_name("liblockmeter_preload.so");
        assert!(lib.is_file(), "{} missing after the build", lib.display());
        lib
    })
}

/// A scratch directory, removed when the test passes and kept (path printed) when it fails.
pub struct Scratch {
    pub dir: PathBuf,
}

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "lockmeter-e2e-{}-{}-{name}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("cannot create the scratch directory");
        Scratch { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Compiles `tests/programs/NAME.c` into this directory: `gcc -O2 -pthread -g`.
    pub fn compile(&self, name: &str) -> PathBuf {
        self.compile_with(name, name, &[])
    }

    /// Compiles `tests/programs/NAME.c` into `OUT` in this directory with extra gcc flags
    /// (placed after the source, so libraries can be named).
    pub fn compile_with(&self, name: &str, out: &str, flags: &[&str]) -> PathBuf {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
        let src = dir.join(format!("{name}.c"));
        let exe = self.dir.join(out);
        let out = Command::new("gcc")
            .args(["-O2", "-pthread", "-g", "-Wall", "-I"])
            .arg(&dir)
            .arg("-o")
            .arg(&exe)
            .arg(&src)
            .args(flags)
            .output()
            .expect("cannot run gcc (the end-to-end tests need it)");
        assert!(
            out.status.success(),
            "gcc failed on {}:\n{}",
            src.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        exe
    }

    /// Compiles `tests/programs/NAME.cpp` into this directory: `g++ -O2 -pthread -g -std=c++17`.
    pub fn compile_cxx(&self, name: &str) -> PathBuf {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
        let src = dir.join(format!("{name}.cpp"));
        let exe = self.dir.join(name);
        let out = Command::new("g++")
            .args(["-O2", "-pthread", "-g", "-Wall", "-std=c++17", "-o"])
            .arg(&exe)
            .arg(&src)
            .output()
            .expect(
                "cannot run g++ (the C++ end-to-end test needs it; .ci/install.sh installs it)",
            );
        assert!(
            out.status.success(),
            "g++ failed on {}:\n{}",
            src.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        exe
    }

    /// Every file of the directory whose name starts with `prefix`, sorted.
    pub fn files_with_prefix(&self, prefix: &str) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with(prefix))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("e2e: kept the scratch directory {}", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

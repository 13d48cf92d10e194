//! What to say when a `run` profile holds no lock acquisitions: which runtime the program is
//! built on, and what sees its locks instead.

use object::{Object, ObjectSection, ObjectSymbol};
use std::path::Path;

/// The runtime whose locks `LD_PRELOAD` cannot see, from the executable: Go (as `record`
/// recognizes it), Rust (its standard library's symbols), the JVM (linked to libjli or libjvm).
pub(crate) fn runtime_of(exe: &Path) -> Option<&'static str> {
    if lockmeter_kernel::is_go_program(exe) {
        return Some("Go");
    }
    let data = std::fs::read(exe).ok()?;
    let file = object::File::parse(&*data).ok()?;
    if elf_needed(&file).iter().any(|l| l.contains("libjli") || l.contains("libjvm")) {
        return Some("JVM");
    }
    let rust = file.symbols().chain(file.dynamic_symbols()).any(|s| {
        s.name().is_ok_and(|n| n == "rust_begin_unwind" || n.starts_with("_ZN3std2rt10lang_start"))
    }) || file.section_by_name(".rustc").is_some();
    rust.then_some("Rust")
}

/// The shared objects an ELF file names in its dynamic string table (the libraries it links to).
fn elf_needed(file: &object::File<'_>) -> Vec<String> {
    let Some(dynstr) = file.section_by_name(".dynstr").and_then(|s| s.data().ok()) else {
        return Vec::new();
    };
    dynstr
        .split(|&b| b == 0)
        .filter_map(|s| std::str::from_utf8(s).ok())
        .filter(|s| s.contains(".so"))
        .map(str::to_owned)
        .collect()
}

/// The line to print after a `run` whose preload profile `p` recorded no acquisition,
/// when the program's runtime is one whose locks the preload cannot see; `None` otherwise (the
/// report's own line then says what sees non-pthread locks).
pub(crate) fn no_acquisitions(p: &lockmeter_format::Profile) -> Option<String> {
    if p.header.collector != "preload" || p.records.iter().any(|r| r.stats.acquisitions > 0) {
        return None;
    }
    let exe = Path::new(&p.header.exe);
    let what = match runtime_of(exe) {
        Some("Go") => {
            "a Go program: its sync.Mutex parks goroutines in the Go scheduler, without pthread"
        }
        Some("JVM") => "a JVM: its monitors park threads on futexes, without pthread mutexes",
        Some("Rust") => "a Rust program: std::sync locks wait on futexes, without pthread",
        _ => return None,
    };
    Some(format!(
        "lockmeter: {} is {what}; `sudo lockmeter record -- {}` sees its locks' waits (and `run --kernel` both)",
        exe.display(),
        exe.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::runtime_of;

    #[test]
    fn this_test_binary_is_rust() {
        let me = std::env::current_exe().unwrap();
        assert_eq!(runtime_of(&me), Some("Rust"));
        assert_eq!(runtime_of(std::path::Path::new("/bin/sh")), None);
    }
}

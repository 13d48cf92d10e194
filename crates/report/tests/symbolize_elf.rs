//! Symbolization against real ELF files: a tiny C program, built as PIE, non-PIE and stripped,
//! prints the addresses of its static locks and of a call site, and its own memory map.

use std::path::{Path, PathBuf};
use std::process::Command;

use lockmeter_format::model::*;
use lockmeter_report::*;

const PROGRAM: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

pthread_mutex_t my_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t locks[4];
int initialized_data = 7;
/* A lock past 1 MiB of .bss: in the anonymous mapping after the file's pages. */
struct { char pad[1 << 20]; pthread_mutex_t lock; } big;
static long counter;

__attribute__((noinline)) void *return_address(void) {
    return __builtin_return_address(0);
}

__attribute__((noinline)) void *hot_path(void) {
    pthread_mutex_lock(&my_lock);
    counter++;
    void *site = return_address();
    pthread_mutex_unlock(&my_lock);
    return site;
}

int main(void) {
    void *site = hot_path();
    void *heap = malloc(64);
    printf("my_lock %p\n", (void *)&my_lock);
    printf("mutex_size %p\n", (void *)sizeof(pthread_mutex_t));
    printf("locks1 %p\n", (void *)&locks[1]);
    printf("data %p\n", (void *)&initialized_data);
    printf("big %p\n", (void *)&big.lock);
    printf("hot_path %p\n", (void *)&hot_path);
    printf("site %p\n", site);
    printf("heap %p\n", heap);
    printf("libc %p\n", (void *)&pthread_mutex_unlock);
    fflush(stdout);
    FILE *f = fopen("/proc/self/maps", "r");
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) fwrite(buf, 1, n, stdout);
    return 0;
}
"#;

struct Run {
    addrs: std::collections::HashMap<String, u64>,
    maps: Vec<MapEntry>,
}

fn tmpdir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("lockmeter-report-symbolize");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Compiles the program with `flags` into `name`, strips it when asked, runs it.
/// `None` when no C compiler is installed.
fn build_and_run(name: &str, flags: &[&str], strip: bool) -> Option<(PathBuf, Run)> {
    let dir = tmpdir();
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, PROGRAM).unwrap();
    let exe = dir.join(name);
    let status = Command::new("cc")
        .args(flags)
        .arg("-O1")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .arg("-pthread")
        .status();
    match status {
        Err(e) => {
            eprintln!("skipping: no C compiler ({e})");
            return None;
        }
        Ok(s) => assert!(s.success(), "cc {flags:?} failed"),
    }
    if strip {
        let s = Command::new("strip").arg(&exe).status().expect("strip");
        assert!(s.success());
    }
    let out = Command::new(&exe).output().expect("run the program");
    assert!(out.status.success());
    Some((exe, parse(&String::from_utf8(out.stdout).unwrap())))
}

fn parse(s: &str) -> Run {
    let mut addrs = std::collections::HashMap::new();
    let mut maps = Vec::new();
    for line in s.lines() {
        let mut f = line.split_whitespace();
        let first = f.next().unwrap();
        if let Some((a, b)) = first.split_once('-') {
            // start-end perms offset dev inode [path]
            let perms = f.next().unwrap().to_owned();
            let offset = u64::from_str_radix(f.next().unwrap(), 16).unwrap();
            let _dev = f.next();
            let _inode = f.next();
            let path = f.collect::<Vec<_>>().join(" ");
            maps.push(MapEntry {
                start: u64::from_str_radix(a, 16).unwrap(),
                end: u64::from_str_radix(b, 16).unwrap(),
                offset,
                perms,
                path,
            });
        } else {
            let v = f.next().unwrap().trim_start_matches("0x");
            addrs.insert(first.to_owned(), u64::from_str_radix(v, 16).unwrap());
        }
    }
    Run { addrs, maps }
}

fn base(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

fn check_full_symbols(name: &str, flags: &[&str]) {
    let Some((_, run)) = build_and_run(name, flags, false) else { return };
    let a = &run.addrs;
    let mut s = ElfSymbolizer::new(&run.maps);
    assert_eq!(s.data(a["my_lock"]).as_deref(), Some("my_lock"), "{name}");
    // sizeof(pthread_mutex_t): 40 (0x28) on x86_64 glibc, 48 on aarch64.
    let locks1 = format!("locks+{:#x}", a["mutex_size"]);
    #[cfg(target_arch = "x86_64")]
    assert_eq!(locks1, "locks+0x28");
    assert_eq!(s.data(a["locks1"]).as_deref(), Some(locks1.as_str()), "{name}");
    assert_eq!(s.data(a["data"]).as_deref(), Some("initialized_data"), "{name}");
    assert_eq!(s.data(a["big"]).as_deref(), Some("big+0x100000"), "{name}");
    assert!(
        !run.maps.iter().any(|m| m.path.ends_with(name) && m.start <= a["big"] && a["big"] < m.end),
        "{name}: the big .bss should lie outside the file mappings"
    );
    assert_eq!(s.data(a["heap"]), None, "{name}: heap locks have no name");
    let site = s.code(a["site"]);
    let off = a["site"] - a["hot_path"];
    assert_eq!(site.to_string(), format!("hot_path+{off:#x}"), "{name}");
    assert_eq!(site.module.as_deref(), Some(name));
    // The same through an Analysis.
    let p = Profile {
        maps: run.maps.clone(),
        threads: vec![ThreadInfo { index: 1, tid: 1, name: "t".into() }],
        locks: vec![
            LockInfo {
                id: 1,
                address: a["my_lock"],
                generation: 0,
                kind: LockKind::Mutex,
                name: None,
            },
            LockInfo {
                id: 2,
                address: a["locks1"],
                generation: 0,
                kind: LockKind::Mutex,
                name: None,
            },
            LockInfo {
                id: 3,
                address: a["heap"],
                generation: 0,
                kind: LockKind::Mutex,
                name: None,
            },
        ],
        records: (1..=3)
            .map(|lock| Record {
                thread: 1,
                lock,
                site: a["site"],
                mode: Mode::Exclusive,
                stats: Stats { acquisitions: 1, ..Stats::default() },
            })
            .collect(),
        ..Profile::default()
    };
    let an = Analysis::new(&p, &SymbolizeOptions { enabled: true, symbols_dir: None });
    assert_eq!(an.locks[0].name.as_deref(), Some("my_lock"));
    assert_eq!(an.locks[1].name.as_deref(), Some(locks1.as_str()));
    assert_eq!(an.locks[2].name, None);
    assert_eq!(an.locks[0].sites[0].function, format!("hot_path+{off:#x}"));
    let off_an = Analysis::new(&p, &SymbolizeOptions { enabled: false, symbols_dir: None });
    assert_eq!(off_an.locks[0].name, None);
    assert_eq!(off_an.locks[0].sites[0].function, format!("{:#x}", a["site"]));
}

#[test]
fn pie_executable() {
    check_full_symbols("prog-pie", &["-fPIE", "-pie"]);
}

#[test]
fn non_pie_executable() {
    check_full_symbols("prog-nopie", &["-fno-pie", "-no-pie"]);
}

#[test]
fn shared_library_symbols_from_dynsym() {
    let Some((_, run)) = build_and_run("prog-libc", &["-fPIE", "-pie"], false) else { return };
    let mut s = ElfSymbolizer::new(&run.maps);
    // libc is usually stripped of .symtab: this comes from .dynsym.
    let f = s.code(run.addrs["libc"] + 4);
    assert!(f.module.as_deref().unwrap_or("").starts_with("libc"), "{f:?}");
    let func = f.function.clone().unwrap_or_default();
    assert!(func.contains("mutex_unlock"), "{f:?}");
    assert_eq!(f.function_offset, 4);
}

#[test]
fn stripped_executable_falls_back() {
    // With -rdynamic the symbols survive stripping in .dynsym.
    let Some((_, run)) = build_and_run("prog-rdynamic", &["-fPIE", "-pie", "-rdynamic"], true)
    else {
        return;
    };
    let mut s = ElfSymbolizer::new(&run.maps);
    let off = run.addrs["site"] - run.addrs["hot_path"];
    assert_eq!(s.code(run.addrs["site"]).to_string(), format!("hot_path+{off:#x}"));
    assert_eq!(s.data(run.addrs["my_lock"]).as_deref(), Some("my_lock"));

    // Fully stripped: module+offset for code, nothing for data.
    let Some((exe, run)) = build_and_run("prog-stripped", &["-fPIE", "-pie"], true) else { return };
    let mut s = ElfSymbolizer::new(&run.maps);
    let f = s.code(run.addrs["site"]);
    assert_eq!(f.function, None);
    assert_eq!(f.module.as_deref(), Some(base(&exe).as_str()));
    assert!(f.to_string().starts_with("prog-stripped+0x"), "{f}");
    assert_eq!(s.data(run.addrs["my_lock"]), None);
}

#[test]
fn missing_file_leaves_addresses_raw() {
    let Some((exe, run)) = build_and_run("prog-gone", &["-fPIE", "-pie"], false) else { return };
    std::fs::remove_file(&exe).unwrap();
    let mut s = ElfSymbolizer::new(&run.maps);
    let f = s.code(run.addrs["site"]);
    assert_eq!(f.function, None);
    assert!(f.to_string().starts_with("prog-gone+0x"), "{f}");
    assert_eq!(s.data(run.addrs["my_lock"]), None);
}

#[test]
fn files_changed_since_the_run_are_reported() {
    let Some((exe, run)) = build_and_run("prog-changed", &["-fPIE", "-pie"], false) else {
        return;
    };
    let now_ns = |t: std::time::SystemTime| {
        t.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    };
    let mut s = ElfSymbolizer::new(&run.maps);
    s.code(run.addrs["site"]);
    let future = now_ns(std::time::SystemTime::now()) + 3_600_000_000_000;
    assert!(s.changed_since(future).is_empty());
    let modified = std::fs::metadata(&exe).unwrap().modified().unwrap();
    let before = now_ns(modified) - 1_000_000_000;
    assert_eq!(s.changed_since(before), [base(&exe)]);
    assert!(s.changed_since(0).is_empty(), "unknown start: nothing to compare");
}

#[test]
fn open_reads_the_profile_and_chooses_the_symbolizer_of_every_view() {
    let Some((exe, run)) = build_and_run("prog-open", &["-fPIE", "-pie"], false) else { return };
    let modified = std::fs::metadata(&exe).unwrap().modified().unwrap();
    let mtime_ns = modified.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    let profile = |start_unix_ns: u64| Profile {
        header: Header { start_unix_ns, ..Header::default() },
        maps: run.maps.clone(),
        threads: vec![ThreadInfo { index: 1, tid: 1, name: "t".into() }],
        locks: vec![LockInfo {
            id: 1,
            address: run.addrs["my_lock"],
            generation: 0,
            kind: LockKind::Mutex,
            name: None,
        }],
        records: vec![Record {
            thread: 1,
            lock: 1,
            site: run.addrs["site"],
            mode: Mode::Exclusive,
            stats: Stats { acquisitions: 3, ..Stats::default() },
        }],
        ..Profile::default()
    };
    let dir = tmpdir();
    let write = |name: &str, p: &Profile| {
        let path = dir.join(name);
        std::fs::write(&path, lockmeter_format::to_bytes(p).unwrap()).unwrap();
        path
    };
    let on = SymbolizeOptions { enabled: true, symbols_dir: None };

    // The run started after the program was built: names, no notes.
    let fresh = write("open-fresh.lmp", &profile(mtime_ns + 1_000_000_000));
    let (p, mut sym) = open(&fresh, &on).unwrap();
    assert!(matches!(sym, Symbolizer::Elf(_)));
    let a = Analysis::with_symbolizer(&p, &mut sym);
    assert_eq!(a.locks[0].name.as_deref(), Some("my_lock"));
    assert_eq!(a.locks[0].agg.stats.acquisitions, 3);
    assert!(a.notes.is_empty(), "{:?}", a.notes);
    assert!(sym.notes().is_empty());

    // The program changed after the run started: no names from it, and one note naming it.
    let stale = write("open-stale.lmp", &profile(mtime_ns - 1_000_000_000));
    let (p, mut sym) = open(&stale, &on).unwrap();
    let a = Analysis::with_symbolizer(&p, &mut sym);
    assert_eq!(a.locks[0].name, None);
    assert!(a.locks[0].sites[0].function.starts_with("prog-open+0x"), "{:?}", a.locks[0].sites);
    assert_eq!(a.notes.len(), 1, "{:?}", a.notes);
    assert!(a.notes[0].starts_with("prog-open changed after the run started"), "{:?}", a.notes);
    assert_eq!(sym.notes(), a.notes, "the symbolizer and the analysis say the same");
    // Analysis::new chooses the same way.
    assert_eq!(Analysis::new(&p, &on).notes, a.notes);

    // --no-symbols: nothing is read, nothing to note.
    let (p, mut sym) =
        open(&stale, &SymbolizeOptions { enabled: false, symbols_dir: None }).unwrap();
    assert!(matches!(sym, Symbolizer::Off));
    let a = Analysis::with_symbolizer(&p, &mut sym);
    assert_eq!(a.locks[0].name, None);
    assert_eq!(a.locks[0].sites[0].function, format!("{:#x}", run.addrs["site"]));
    assert!(a.notes.is_empty());

    // A file that is not there: the reader's one-line error, unchanged.
    let missing = dir.join("open-missing.lmp");
    let e = open(&missing, &on).unwrap_err().to_string();
    assert_eq!(e, lockmeter_format::read_profile_file(&missing).unwrap_err().to_string());
    assert!(e.contains("open-missing.lmp") && !e.contains('\n'), "{e}");
}

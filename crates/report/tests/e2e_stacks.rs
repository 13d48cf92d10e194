//! End to end: a C program with a hot path holding a lock ~1 ms (`rebuild_table`) and a cold
//! path waiting on it (`lookup_entry`, called by `cold_reader`), compiled with and without frame
//! pointers, with and without debug information, with a separate debug file (stripped, found by
//! `.gnu_debuglink` or by build-id) and with split DWARF (`.dwo`), run under the preload; the report must name the waiter's stack, attribute
//! the wait to the holder in `rebuild_table`, and show the holder's stack.
//!
//! Needs a C compiler (`cc`); skipped, with the reason printed, without one. Builds the preload
//! (`cargo build --release -p lockmeter-preload`) once per test process.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use lockmeter_report::*;

const SOURCE: &str = include_str!("programs/table.c");

/// Writer iterations (each holds the lock ~1 ms).
const ITERATIONS: u32 = 150;

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success())
}

/// The target directory this test binary lives in (`target/debug/deps/e2e_stacks-...`).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.ancestors().nth(3).expect("target directory").to_path_buf()
}

/// The release preload library, built once.
fn preload() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let out = Command::new(cargo)
            .args(["build", "--quiet", "--release", "-p", "lockmeter-preload"])
            .current_dir(&workspace)
            .output()
            .expect("cannot run cargo to build lockmeter-preload");
        assert!(
            out.status.success(),
            "cargo build --release -p lockmeter-preload failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lib = target_dir().join("release/liblockmeter_preload.so");
        assert!(lib.is_file(), "{} missing after the build", lib.display());
        lib
    })
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Debug {
    /// `-g`.
    Inline,
    /// No `-g`.
    None,
    /// `-g`, then `objcopy --only-keep-debug`, `strip`, `objcopy --add-gnu-debuglink`.
    Separate,
    /// `-g`, then `objcopy --only-keep-debug` into `DIR/.build-id/xx/yyyy.debug`, `strip`.
    BuildId,
    /// `-g -gsplit-dwarf`: the DWARF in a `.dwo` file beside the program.
    Split,
}

/// Compiles the program into a fresh folder, runs it under the preload, analyses the profile.
/// `None` (after printing why) when a tool is missing.
fn run(name: &str, frame_pointers: bool, debug: Debug) -> Option<Analysis> {
    if !have("cc") {
        eprintln!("skipped: no C compiler (cc) installed");
        return None;
    }
    let separate = matches!(debug, Debug::Separate | Debug::BuildId);
    if separate && !(have("objcopy") && have("strip")) {
        eprintln!("skipped: objcopy or strip (binutils) missing");
        return None;
    }
    let dir =
        std::env::temp_dir().join(format!("lockmeter-e2e-stacks-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("table.c");
    std::fs::write(&src, SOURCE).unwrap();
    let exe = dir.join("table");
    let mut cc = Command::new("cc");
    cc.args(["-O2", "-pthread", &format!("-DITERATIONS={ITERATIONS}")]);
    cc.arg(if frame_pointers { "-fno-omit-frame-pointer" } else { "-fomit-frame-pointer" });
    if debug != Debug::None {
        cc.arg("-g");
    }
    if debug == Debug::Split {
        cc.arg("-gsplit-dwarf");
    }
    let st = cc.arg("-o").arg(&exe).arg(&src).current_dir(&dir).status().unwrap();
    assert!(st.success(), "cc failed");
    let ok = |c: &mut Command| assert!(c.status().unwrap().success(), "{c:?} failed");
    let debug_root = dir.join("debug-root");
    match debug {
        Debug::Separate => {
            let dbg = dir.join("table.debug");
            ok(Command::new("objcopy").arg("--only-keep-debug").arg(&exe).arg(&dbg));
            ok(Command::new("strip").arg("-g").arg("-s").arg(&exe));
            ok(Command::new("objcopy")
                .arg(format!("--add-gnu-debuglink={}", dbg.display()))
                .arg(&exe)
                .current_dir(&dir));
        }
        Debug::BuildId => {
            let bytes = std::fs::read(&exe).unwrap();
            let file = object::File::parse(&*bytes).unwrap();
            let Some(id) = object::Object::build_id(&file).ok().flatten() else {
                eprintln!("skipped: the compiler wrote no build-id");
                return None;
            };
            let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
            let sub = debug_root.join(".build-id").join(&hex[..2]);
            std::fs::create_dir_all(&sub).unwrap();
            let dbg = sub.join(format!("{}.debug", &hex[2..]));
            ok(Command::new("objcopy").arg("--only-keep-debug").arg(&exe).arg(&dbg));
            ok(Command::new("strip").arg("-g").arg("-s").arg(&exe));
        }
        Debug::Split => {
            let dwo = std::fs::read_dir(&dir)
                .unwrap()
                .any(|e| e.unwrap().path().extension().is_some_and(|x| x == "dwo"));
            assert!(dwo, "-gsplit-dwarf wrote no .dwo file");
        }
        Debug::Inline | Debug::None => {}
    }
    let profile_path = dir.join("table.lmp");
    let out = Command::new(&exe)
        .env("LD_PRELOAD", preload())
        .env("LOCKMETER_OUTPUT", &profile_path)
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "the program failed: {out:?}");
    let profile = lockmeter_format::read_profile_file(&profile_path).expect("profile");
    let a = if debug == Debug::BuildId {
        let mut sym = ElfSymbolizer::with_debug_dirs(&profile.maps, vec![debug_root]);
        Analysis::with_symbolizer(&profile, &mut sym)
    } else {
        Analysis::new(&profile, &SymbolizeOptions { enabled: true, symbols_dir: None })
    };
    let _ = std::fs::remove_dir_all(&dir);
    Some(a)
}

fn fun(f: &Frame) -> &str {
    f.function.as_deref().unwrap_or("")
}

/// The facts every variant must show.
fn check(a: &Analysis, debug: Debug) {
    let dump = || {
        let mut out = Vec::new();
        let opts = ReportOptions { stacks: true, top: Some(2), ..Default::default() };
        text(a, &opts, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    };
    let lines = debug != Debug::None;
    let lock = a
        .locks
        .iter()
        .find(|l| l.name.as_deref() == Some("table_lock"))
        .unwrap_or_else(|| panic!("no lock named table_lock (static symbol)\n{}", dump()));
    assert_eq!(lock.name_source, NameSource::Symbol);
    let s = &lock.agg.stats;
    assert!(s.contended > 0 && s.wait_ns_total > 0, "no contention on table_lock\n{}", dump());

    // Waiter stacks: lookup_entry, called by cold_reader, with file:line under -g.
    let waited: u64 = lock.waiters.iter().map(|w| w.ns_total).sum();
    assert!(waited > 0, "no waiter stack\n{}", dump());
    let reader_wait: u64 = lock
        .waiters
        .iter()
        .filter(|w| {
            let pos = |name: &str| w.frames.iter().position(|f| fun(f) == name);
            matches!((pos("lookup_entry"), pos("cold_reader")), (Some(i), Some(j)) if i < j)
        })
        .map(|w| w.ns_total)
        .sum();
    assert!(
        reader_wait * 2 > waited,
        "most of the wait should come from lookup_entry <- cold_reader\n{}",
        dump()
    );
    let w = lock.waiters.iter().find(|w| w.frames.iter().any(|f| fun(f) == "lookup_entry"));
    let w = w.unwrap();
    let le = w.frames.iter().find(|f| fun(f) == "lookup_entry").unwrap();
    let cr = w.frames.iter().find(|f| fun(f) == "cold_reader").unwrap();
    if lines {
        for f in [le, cr] {
            assert!(
                f.file.as_deref().is_some_and(|p| p.ends_with("table.c")) && f.line.is_some(),
                "{f:?} should have file:line of table.c\n{}",
                dump()
            );
        }
        let lookup_line = SOURCE.lines().position(|l| l.contains("long lookup_entry(")).unwrap();
        let line = le.line.unwrap() as usize;
        assert!(line > lookup_line && line < lookup_line + 4, "lookup_entry at line {line}");
        // take_table() is inlined into lookup_entry at the lock call.
        let inl = le.inlined.iter().find(|i| i.function.as_deref() == Some("take_table"));
        let inl = inl.unwrap_or_else(|| panic!("take_table not inlined in {le:?}"));
        let take_line = SOURCE.lines().position(|l| l.contains("void take_table(")).unwrap();
        assert_eq!(inl.line.map(|l| l as usize), Some(take_line + 2), "{inl:?}");
    } else {
        assert!(le.file.is_none() && le.line.is_none(), "no debug info, yet {le:?}");
        assert!(le.inlined.is_empty(), "no debug info, yet {le:?}");
        assert!(cr.file.is_none(), "no debug info, yet {cr:?}");
    }

    // Pairs: the wait is attributed to the holder in rebuild_table.
    let pair_wait: u64 = lock.pairs.iter().map(|p| p.wait_ns).sum();
    let from_rebuild: u64 = lock
        .pairs
        .iter()
        .filter(|p| fun(&p.waiter) == "lookup_entry" && fun(&p.holder) == "rebuild_table")
        .map(|p| p.wait_ns)
        .sum();
    assert!(
        from_rebuild * 2 > pair_wait,
        "most of the wait should be lookup_entry waiting on rebuild_table\n{}",
        dump()
    );
    let p = a.pairs.iter().find(|p| fun(&p.holder) == "rebuild_table").unwrap();
    assert_eq!(p.lock_name, "table_lock");
    assert_eq!(p.holder.file.is_some(), lines, "{:?}", p.holder);

    // Holder stacks: rebuild_table's caller, hot_writer (the unlock is a tail call, so the
    // stack may start in hot_writer itself).
    let held: u64 = lock.holders.iter().map(|h| h.ns_total).sum();
    let writer_held: u64 = lock
        .holders
        .iter()
        .filter(|h| h.frames.iter().take(3).any(|f| fun(f) == "hot_writer"))
        .map(|h| h.ns_total)
        .sum();
    assert!(held > 0 && writer_held * 2 > held, "holders should be hot_writer's\n{}", dump());

    // The heap lock is named by its first use, in lookup_entry.
    let heap = a
        .locks
        .iter()
        .find(|l| l.name_source == NameSource::FirstUse)
        .unwrap_or_else(|| panic!("no lock named by its first use\n{}", dump()));
    let name = heap.name.as_deref().unwrap();
    assert!(name.starts_with("heap lock first used at lookup_entry"), "{name}");
    assert_eq!(name.contains("(table.c:"), lines, "{name}");

    // The text views render.
    let mut out = Vec::new();
    text(a, &ReportOptions { by: By::Pair, ..Default::default() }, &mut out).unwrap();
    let s = String::from_utf8(out).unwrap();
    assert!(s.contains("lookup_entry+0x") && s.contains("rebuild_table+0x"), "{s}");
}

#[test]
fn without_frame_pointers_with_debug_info() {
    if let Some(a) = run("nofp-g", false, Debug::Inline) {
        check(&a, Debug::Inline);
    }
}

#[test]
fn with_frame_pointers_with_debug_info() {
    if let Some(a) = run("fp-g", true, Debug::Inline) {
        check(&a, Debug::Inline);
    }
}

#[test]
fn without_frame_pointers_without_debug_info() {
    if let Some(a) = run("nofp", false, Debug::None) {
        check(&a, Debug::None);
    }
}

#[test]
fn with_frame_pointers_without_debug_info() {
    if let Some(a) = run("fp", true, Debug::None) {
        check(&a, Debug::None);
    }
}

#[test]
fn separate_debug_file_by_build_id() {
    if let Some(a) = run("buildid", true, Debug::BuildId) {
        check(&a, Debug::BuildId);
    }
}

#[test]
fn split_dwarf() {
    if let Some(a) = run("split", false, Debug::Split) {
        check(&a, Debug::Split);
    }
}

#[test]
fn separate_debug_file_by_debuglink() {
    if let Some(a) = run("debuglink", false, Debug::Separate) {
        check(&a, Debug::Separate);
    }
}

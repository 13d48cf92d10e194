//! End-to-end tests: names. Static locks of programs and shared libraries (PIE and not) are named
//! from their symbols, call sites by function; names given through `include/lockmeter.h` win and
//! outlive their lock; a program deleted or replaced after the run lends no wrong names; awkward
//! names and a huge command line survive every format; the demo names its locks; a lock with no
//! symbol is named by its storage (stack, heap, mapped) and first use; heap locks made and first
//! taken through one wrapper are named by their callers, as `module+0xOFFSET` in a stripped
//! program (with a note giving its build-id), and by function once its debug file is found by
//! that build-id.
//!
//! Ground-truth programs (`tests/programs/`): hammer.c, named.c, shlib.c, shlib_main.c, storage.c,
//! striped.c, weird.c, wrapped.c, convoy.c (a holder that unlocks with a tail call) and the
//! bundled demo (`lockmeter demo`).
//!
//! Needs gcc. Run with `cargo test -p lockmeter --test stacks_names`; the harness builds the
//! preload library itself (`cargo build -p lockmeter-preload`) once per test process.

mod common;

use common::*;

fn check_shlib(s: &Scratch, extra: &[&str], tag: &str) {
    let lib = s.path("libe2eshlib.so");
    if !lib.exists() {
        s.compile_with("shlib", "libe2eshlib.so", &["-fPIC", "-shared"]);
    }
    let mut flags = vec!["-L", s.dir.to_str().unwrap(), "-le2eshlib", "-Wl,-rpath,$ORIGIN"];
    flags.extend_from_slice(extra);
    let exe = s.compile_with("shlib_main", &format!("shlib_main_{tag}"), &flags);
    let n = 300u64;
    let out = format!("{tag}.lmp");
    let ran = run_metered(s, &out, &[], &exe, &[&n.to_string()]);
    ran.expect_code(0);
    let p = Profile::load(&s.path(&out), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    for (name, func, module) in [
        ("shlib_lock", "shlib_take+0x", "libe2eshlib.so"),
        ("shlib_private_lock", "shlib_take+0x", "libe2eshlib.so"),
        ("main_lock", "main+0x", ""),
    ] {
        let l = p.expect_lock(name, "mutex", n);
        let site = &l["sites"][0];
        let f = sf(site, "function").unwrap_or("");
        p.check(f.starts_with(func), format!("{tag}: {name} site {f} starts with {func}"));
        if !module.is_empty() {
            p.eq(format!("{tag}: {name} site module"), sf(site, "module"), Some(module));
        }
    }
}

#[test]
fn static_locks_of_shared_libraries_and_non_pie_programs_are_named() {
    let s = Scratch::new("shlib");
    check_shlib(&s, &[], "pie");
    check_shlib(&s, &["-no-pie"], "nopie");
}

fn run_named(tag: &str) -> (Scratch, Profile) {
    let s = Scratch::new(tag);
    let include = workspace().join("include");
    let exe = s.compile_with("named", "named", &["-I", include.to_str().unwrap()]);
    let plain = run_plain(&s.dir, &exe, &[]);
    plain.expect_code(0);
    assert_eq!(plain.stdout, "ok plain\n", "{plain}");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[]);
    ran.expect_code(0);
    assert_eq!(ran.stdout, "ok named\n", "{ran}");
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    (s, p)
}

#[test]
fn locks_named_through_lockmeter_h_are_reported_by_name() {
    let (_s, p) = run_named("named");
    p.expect_lock("queue.lock", "mutex", 10);
    let rw = p.expect_lock("table.rwlock", "rwlock", 5);
    p.eq("table.rwlock reads", u(rw, "read_acquisitions"), 5);
    p.expect_lock("spin.heap", "spinlock", 3);
    let second = p.expect_lock("second", "mutex", 6);
    p.eq("second: generation", u(second, "generation"), 3);
    p.expect_lock("new", "mutex", 2);
    p.eq("the overwritten name", p.locks_named("old").len(), 0);
    p.eq("a name given before the init", p.locks_named("named-before-init").len(), 0);
    p.eq("totals.acquisitions", p.totals("acquisitions"), 10 + 5 + 3 + 4 + 6 + 2 + 1 + 6);
}

#[test]
fn lock_names_survive_the_destroy_of_their_lock() {
    // "A name belongs to the lock identity it was given to" (include/lockmeter.h, names.rs):
    // identities destroyed before the end (short-lived heap locks) keep theirs.
    let (_s, p) = run_named("named-destroyed");
    let first = p.expect_lock("first", "mutex", 4);
    p.eq("first: generation", u(first, "generation"), 1);
    let conns = p.locks_named("conn.lock");
    p.eq("conn.lock identities", conns.len(), 3);
    for c in conns {
        p.eq("conn.lock acquisitions", u(c, "acquisitions"), 2);
    }
}

#[test]
fn report_after_the_program_was_deleted_or_replaced() {
    let s = Scratch::new("replaced");
    let striped = s.compile("striped");
    let hammer = s.compile("hammer");
    let prog = s.path("prog");
    std::fs::copy(&striped, &prog).unwrap();
    let (t, m) = (4u64, 800u64);
    let ran = run_metered(&s, "p.lmp", &[], &prog, &[&t.to_string(), &m.to_string()]);
    ran.expect_code(0);
    let before = Profile::load(&s.path("p.lmp"), &ran);
    before.expect_lock("stripes", "mutex", t * m / 8);

    // Replaced by another program at the same path: its symbols must not name this profile's
    // locks and sites (wrong names are worse than none).
    std::fs::remove_file(&prog).unwrap();
    std::fs::copy(&hammer, &prog).unwrap();
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.eq("totals.acquisitions", p.totals("acquisitions"), before.totals("acquisitions"));
    for l in p.locks() {
        let name = sf(l, "name").unwrap_or("");
        p.check(!name.contains("big_lock"), format!("lock named {name} from the replacing binary"));
        for site in l["sites"].as_array().into_iter().flatten() {
            let f = sf(site, "function").unwrap_or("");
            p.check(
                !f.starts_with("_fini") && !f.starts_with("_start"),
                format!("site {f} symbolized with the replacing binary"),
            );
        }
    }

    // Deleted: the report still works, with the same counts.
    std::fs::remove_file(&prog).unwrap();
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.eq("totals.acquisitions", p.totals("acquisitions"), before.totals("acquisitions"));
    p.eq("locks", p.locks().len(), before.locks().len());
}

/// A minimal RFC 4180 CSV parser (quoted fields with commas, quotes and newlines).
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let (mut rows, mut row, mut field) = (Vec::new(), Vec::new(), String::new());
    let mut chars = text.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut field)),
            (false, '\n') => {
                row.push(std::mem::take(&mut field));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => field.push(c),
        }
    }
    if !field.is_empty() || !row.is_empty() {
        row.push(field);
        rows.push(row);
    }
    rows
}

#[test]
fn awkward_names_and_a_huge_command_line_survive_every_format() {
    let s = Scratch::new("weird");
    let include = workspace().join("include");
    let exe = s.compile_with("weird", "weird", &["-I", include.to_str().unwrap()]);
    let big: Vec<String> = (0..2000).map(|i| format!("{i:04}{}", "x".repeat(46))).collect();
    let mut args: Vec<&str> = vec!["run", "-q", "-o", "p.lmp", "--", exe.to_str().unwrap()];
    args.extend(big.iter().map(String::as_str));
    let ran = lockmeter(&s.dir, &args);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    let odd_name = "a,b\"c\nd;<x>&";
    p.expect_lock(odd_name, "mutex", 8);
    let long: Vec<&serde_json::Value> =
        p.locks().iter().filter(|l| sf(l, "name").is_some_and(|n| n.starts_with("ééé"))).collect();
    p.eq("locks named é...", long.len(), 1);
    p.eq("long_lock acquisitions", u(long[0], "acquisitions"), 4);
    let long_name = sf(long[0], "name").unwrap_or("");
    p.check(long_name.len() <= 130, format!("long name kept short: {} bytes", long_name.len()));
    p.check(
        p.threads().iter().any(|t| sf(t, "name").is_some_and(|n| n.ends_with("-bad"))),
        "the non-UTF-8 thread name is reported (lossily)",
    );
    let cmdline = p.header()["cmdline"].as_array().cloned().unwrap_or_default();
    p.check(cmdline.len() > 1, "header.cmdline kept");
    for (i, a) in cmdline.iter().skip(1).enumerate() {
        // Possibly cut short, never wrong.
        let a = a.as_str().unwrap_or("");
        p.check(big[i].starts_with(a), format!("cmdline[{}] = {a}", i + 1));
    }

    let csv = lockmeter(&s.dir, &["report", "p.lmp", "--format", "csv"]);
    csv.expect_code(0);
    let rows = parse_csv(&csv.stdout);
    assert_eq!(rows.len(), 3, "header + 2 locks\n{csv}");
    let name_col = rows[0].iter().position(|c| c == "name").expect("name column");
    assert!(rows.iter().any(|r| r[name_col] == odd_name), "{csv}");
    assert!(rows.iter().all(|r| r.len() == rows[0].len()), "ragged CSV\n{csv}");

    // Text: a lock name must not break the table (no raw newline from a name), and the
    // header line does not carry a 100 KB command line.
    let text = lockmeter(&s.dir, &["report", "p.lmp"]);
    text.expect_code(0);
    assert!(!text.stdout.contains(odd_name), "raw control characters in the text report\n{text}");
    let longest = text.stdout.lines().map(str::len).max().unwrap_or(0);
    assert!(longest < 2000, "a {longest}-byte line in the text report");
}

#[test]
fn demo_runs_and_names_its_locks() {
    let s = Scratch::new("demo");
    let out = s.path("demo.lmp");
    let ran = lockmeter(
        &s.dir,
        &["demo", "--threads", "4", "--iterations", "2000", "-q", "-o", out.to_str().unwrap()],
    );
    ran.expect_code(0);
    let p = Profile::load(&out, &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    let named = |needle: &str| -> &serde_json::Value {
        let v: Vec<_> = p
            .locks()
            .iter()
            .filter(|l| sf(l, "name").is_some_and(|n| n.contains(needle)))
            .collect();
        match v.as_slice() {
            [one] => one,
            _ => p.fail(format!("{} locks named like {needle}", v.len())),
        }
    };
    let wq = named("WORK_QUEUE_LOCK");
    p.eq("WORK_QUEUE_LOCK acquisitions (4 x 2000)", u(wq, "acquisitions"), 8000);
    p.eq("WORK_QUEUE_LOCK kind", sf(wq, "kind"), Some("mutex"));
    let st = named("STATS_LOCK");
    p.eq("STATS_LOCK acquisitions (4 x ceil(2000/64))", u(st, "acquisitions"), 4 * 32);
    let cfg = named("CONFIG_LOCK");
    p.eq("CONFIG_LOCK kind", sf(cfg, "kind"), Some("rwlock"));
    p.eq("CONFIG_LOCK reads (4 x 2000/16)", u(cfg, "read_acquisitions"), 4 * 125);
    p.eq("CONFIG_LOCK writes", u(cfg, "write_acquisitions"), 1);
}

#[test]
fn a_program_that_rewrites_its_argv_is_named_as_started() {
    let s = Scratch::new("argv");
    let exe = s.compile("argv");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &["--port", "6379", "--verbose"]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    let cmdline: Vec<&str> = p.header()["cmdline"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    p.eq("cmdline", cmdline, vec![exe.to_str().unwrap(), "--port", "6379", "--verbose"]);
    p.expect_lock("named_lock", "mutex", 1);
}

#[test]
fn locks_without_symbols_are_named_by_their_storage() {
    // storage.c prints where each of its locks lives: the main thread's stack, a live worker's
    // stack, the heap, a shared mapping.
    let s = Scratch::new("storage");
    let exe = s.compile("storage");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    let mut seen = 0;
    for line in ran.stdout.lines().filter(|l| !l.starts_with("ok ")) {
        let (storage, addr) = line.split_once(' ').unwrap_or_else(|| panic!("line {line}\n{ran}"));
        let Some(l) = p.locks().iter().find(|l| sf(l, "address") == Some(addr)) else {
            p.fail(format!("no lock at {addr} ({storage})"))
        };
        let name = sf(l, "name").unwrap_or("");
        // Every lock is first taken through use_lock: it is named by its caller, via use_lock.
        let want = format!("{storage} lock first used at ");
        p.check(
            name.starts_with(&want) && name.contains("use_lock"),
            format!("{addr}: {name} starts with {want} and names use_lock"),
        );
        p.eq(format!("{name}: acquisitions"), u(l, "acquisitions"), 1);
        seen += 1;
    }
    p.eq("locks printed", seen, 4);
    p.eq("ok line", ran.stdout.lines().last(), Some("ok 4"));
}

/// The `CALLER N` lines wrapped.c prints: each caller's lock and its acquisitions.
fn wrapped_counts(ran: &Ran) -> Vec<(String, u64)> {
    let v: Vec<(String, u64)> = ran
        .stdout
        .lines()
        .filter_map(|l| {
            let (c, n) = l.split_once(' ')?;
            Some((c.to_owned(), n.parse().ok()?))
        })
        .collect();
    assert_eq!(v.len(), 3, "{ran}");
    v
}

/// The heap locks of `p` whose names start with `prefix`, as (name, acquisitions), by count.
fn heap_locks(p: &Profile, prefix: &str) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = p
        .locks()
        .iter()
        .filter_map(|l| Some((sf(l, "name")?.to_owned(), u(l, "acquisitions"))))
        .filter(|(n, _)| n.starts_with(prefix))
        .collect();
    v.sort_by_key(|(_, n)| *n);
    v
}

#[test]
fn locks_first_used_through_a_wrapper_are_named_by_their_callers_stripped_or_not() {
    let s = Scratch::new("wrapped");
    let exe = s.compile("wrapped");
    let ran = run_metered(&s, "w.lmp", &[], &exe, &[]);
    ran.expect_code(0);
    let want = wrapped_counts(&ran);
    let p = Profile::load(&s.path("w.lmp"), &ran);
    let named = heap_locks(&p, "heap lock first used at ");
    p.eq("heap locks", named.len(), 3);
    for ((name, n), (caller, count)) in named.iter().zip(&want) {
        let ok = name.starts_with(&format!("heap lock first used at {caller} (wrapped.c:"))
            && name.ends_with(") via lock_it");
        p.check(ok, format!("'{name}' names {caller} through the wrapper lock_it"));
        p.eq(format!("{name}: acquisitions"), *n, *count);
    }

    // The same program stripped: module+offset, one distinct name per caller, and a note that
    // says so with the build-id.
    let stripped = s.path("wrapped-s");
    let st = std::process::Command::new("strip")
        .arg("-o")
        .arg(&stripped)
        .arg(&exe)
        .status()
        .expect("cannot run strip (binutils; .ci/install.sh installs it)");
    assert!(st.success());
    let ran = run_metered(&s, "s.lmp", &[], &stripped, &[]);
    ran.expect_code(0);
    let ps = Profile::load(&s.path("s.lmp"), &ran);
    let named = heap_locks(&ps, "heap lock first used at wrapped-s+0x");
    ps.eq("stripped heap locks", named.len(), 3);
    let distinct: std::collections::HashSet<&str> = named.iter().map(|(n, _)| n.as_str()).collect();
    ps.eq("distinct names", distinct.len(), 3);
    for ((name, n), (_, count)) in named.iter().zip(&want) {
        ps.check(name.contains(" via wrapped-s+0x"), format!("'{name}' names the wrapper"));
        ps.eq(format!("{name}: acquisitions"), *n, *count);
    }
    let text = lockmeter(&s.dir, &["report", s.path("s.lmp").to_str().unwrap()]);
    let note = text
        .stdout
        .lines()
        .find(|l| l.starts_with("note: wrapped-s is stripped"))
        .unwrap_or_else(|| panic!("no stripped note\n{text}"));
    let hex = note
        .split("build-id ")
        .nth(1)
        .and_then(|r| r.split(';').next())
        .unwrap_or_else(|| panic!("no build-id in {note}"));
    assert!(hex.len() >= 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()), "{note}");

    // Symbols applied later: the debug file, found by build-id, names each caller again.
    let dbg = s.path("dbg/.build-id").join(&hex[..2]);
    std::fs::create_dir_all(&dbg).unwrap();
    let st = std::process::Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&exe)
        .arg(dbg.join(format!("{}.debug", &hex[2..])))
        .status()
        .expect("cannot run objcopy");
    assert!(st.success());
    let mut cmd = lockmeter_cmd(&s.dir);
    cmd.env("LOCKMETER_DEBUG_DIRS", s.path("dbg")).args([
        "report",
        s.path("s.lmp").to_str().unwrap(),
        "--format",
        "json",
    ]);
    let later = finish("report with LOCKMETER_DEBUG_DIRS".into(), spawn(&mut cmd), b"", RUN_LIMIT);
    assert!(later.status.success(), "{later}");
    let json: serde_json::Value = serde_json::from_str(&later.stdout).unwrap();
    let pl = Profile { path: s.path("s.lmp"), json, context: later.to_string() };
    let named = heap_locks(&pl, "heap lock first used at ");
    pl.eq("heap locks with symbols applied", named.len(), 3);
    for ((name, n), (caller, count)) in named.iter().zip(&want) {
        let ok = name.starts_with(&format!("heap lock first used at {caller} (wrapped.c:"))
            && name.ends_with(") via lock_it");
        pl.check(ok, format!("'{name}' names {caller} through lock_it"));
        pl.eq(format!("{name}: acquisitions"), *n, *count);
    }
}

/// The holder's stack names the function that held the lock even when that function released it
/// with a tail call (`return pthread_mutex_unlock(m)` compiled to a jump: at the unlock, only its
/// caller is on the stack). convoy.c's hold_lock() does that at -O2; the test checks the jump in
/// the disassembly first, so that it tests what it says.
#[test]
fn holder_stack_keeps_a_tail_calling_holder() {
    let s = Scratch::new("tailcall_holder");
    let exe = s.compile("convoy");
    let dis = std::process::Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(&exe)
        .output()
        .expect("objdump (binutils, installed with gcc)");
    let dis = String::from_utf8_lossy(&dis.stdout);
    let body: String = dis
        .split("\n\n")
        .find(|f| f.contains("<hold_lock>:"))
        .unwrap_or_else(|| panic!("no hold_lock in the disassembly"))
        .to_owned();
    assert!(
        body.lines().any(|l| l.contains("jmp") && l.contains("<pthread_mutex_unlock")),
        "hold_lock's unlock is not a tail call:\n{body}"
    );
    let ran = run_metered(&s, "t.lmp", &[], &exe, &["2", "2", "10"]);
    ran.expect_code(0);
    let p = Profile::load(&s.path("t.lmp"), &ran);
    let lock = p.lock("convoy_lock");
    let functions = |st: &serde_json::Value| -> Vec<String> {
        st["stack"]
            .as_array()
            .map(|fs| fs.iter().filter_map(|f| sf(f, "function")).map(str::to_owned).collect())
            .unwrap_or_default()
    };
    let holders: Vec<Vec<String>> =
        lock["holders"].as_array().map(|h| h.iter().map(functions).collect()).unwrap_or_default();
    // The holder thread's holds: hold_lock, called by holder().
    p.check(
        holders.iter().any(|f| {
            f.first().map(String::as_str) == Some("hold_lock")
                && f.get(1).map(String::as_str) == Some("holder")
        }),
        format!("a holder stack hold_lock <- holder: {holders:?}"),
    );
    // A release that is no tail call keeps its own frames: wait_in_convoy once, then waiter().
    p.check(
        holders.iter().any(|f| {
            f.first().map(String::as_str) == Some("wait_in_convoy")
                && f.get(1).map(String::as_str) == Some("waiter")
        }),
        format!("a holder stack wait_in_convoy <- waiter: {holders:?}"),
    );
}

/// `--symbols DIR`: a stripped program's locks named through a folder of debug files, found by
/// build-id (the `objcopy --only-keep-debug` file at DIR/.build-id/ab/cdef….debug) or by name
/// (an unstripped copy at DIR/NAME), in `report` and `diff`; a copy of another build (same name,
/// other build-id) is refused with a note and names nothing; a missing folder is a one-line error.
#[test]
fn symbols_dir_names_a_stripped_program_and_refuses_another_build() {
    let s = Scratch::new("symdir");
    let exe = s.compile("wrapped");
    let stripped = s.path("wrapped-s");
    let st = std::process::Command::new("strip")
        .arg("-o")
        .arg(&stripped)
        .arg(&exe)
        .status()
        .expect("cannot run strip (binutils; .ci/install.sh installs it)");
    assert!(st.success());
    let ran = run_metered(&s, "s.lmp", &[], &stripped, &[]);
    ran.expect_code(0);
    let want = wrapped_counts(&ran);
    let lmp = s.path("s.lmp");
    let report = |extra: &[&str]| {
        let mut args = vec!["report", lmp.to_str().unwrap(), "--format", "json"];
        args.extend_from_slice(extra);
        let out = lockmeter(&s.dir, &args);
        assert_eq!(out.code(), 0, "{out}");
        let json: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        Profile { path: lmp.clone(), json, context: out.to_string() }
    };
    let notes = |p: &Profile| -> Vec<String> {
        p.json["notes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| n.as_str())
            .map(String::from)
            .collect()
    };
    let expect_named = |p: &Profile, how: &str| {
        let named = heap_locks(p, "heap lock first used at ");
        p.eq(format!("heap locks, {how}"), named.len(), 3);
        for ((name, n), (caller, count)) in named.iter().zip(&want) {
            let ok = name.starts_with(&format!("heap lock first used at {caller} (wrapped.c:"))
                && name.ends_with(") via lock_it");
            p.check(ok, format!("{how}: '{name}' names {caller} through lock_it"));
            p.eq(format!("{how}: {name}: acquisitions"), *n, *count);
        }
    };
    let expect_unnamed = |p: &Profile, how: &str| {
        let named = heap_locks(p, "heap lock first used at wrapped-s+0x");
        p.eq(format!("heap locks named by offset, {how}"), named.len(), 3);
    };

    let plain = report(&[]);
    expect_unnamed(&plain, "without --symbols");
    let note = notes(&plain)
        .into_iter()
        .find(|n| n.starts_with("wrapped-s is stripped"))
        .unwrap_or_else(|| panic!("no stripped note: {:?}", notes(&plain)));
    plain.check(note.contains("--symbols DIR"), format!("the note points at --symbols: {note}"));
    let hex = note.split("build-id ").nth(1).and_then(|r| r.split(';').next()).unwrap().to_owned();
    assert!(hex.len() >= 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()), "{note}");

    // By build-id: the debug file alone.
    let by_id = s.path("by-id/.build-id").join(&hex[..2]);
    std::fs::create_dir_all(&by_id).unwrap();
    let st = std::process::Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&exe)
        .arg(by_id.join(format!("{}.debug", &hex[2..])))
        .status()
        .expect("cannot run objcopy");
    assert!(st.success());
    expect_named(&report(&["--symbols", s.path("by-id").to_str().unwrap()]), "by build-id");

    // By name: an unstripped copy of the same build.
    std::fs::create_dir_all(s.path("by-name")).unwrap();
    std::fs::copy(&exe, s.path("by-name/wrapped-s")).unwrap();
    let by_name = s.path("by-name");
    expect_named(&report(&["--symbols", by_name.to_str().unwrap()]), "by name");

    // Another build under the same name: refused, with a note; the names stay offsets.
    std::fs::create_dir_all(s.path("other")).unwrap();
    s.compile_with("wrapped", "other/wrapped-s", &["-O1"]);
    let other = report(&["--symbols", s.path("other").to_str().unwrap()]);
    expect_unnamed(&other, "with another build");
    other.check(
        notes(&other).iter().any(|n| n.contains("not used for wrapped-s: its build-id")),
        format!("a note refuses the other build: {:?}", notes(&other)),
    );

    // diff reads through the same option.
    let diff = |extra: &[&str]| {
        let mut args = vec!["diff", lmp.to_str().unwrap(), lmp.to_str().unwrap()];
        args.extend_from_slice(extra);
        let out = lockmeter(&s.dir, &args);
        assert_eq!(out.code(), 0, "{out}");
        out.stdout
    };
    let plain = diff(&[]);
    assert!(!plain.contains("lock_it"), "diff without --symbols names no function:\n{plain}");
    let named = diff(&["--symbols", by_name.to_str().unwrap()]);
    assert!(named.contains("lock_it"), "diff with --symbols names the function:\n{named}");

    let bad = lockmeter(&s.dir, &["report", lmp.to_str().unwrap(), "--symbols", "no-such-dir"]);
    assert_ne!(bad.code(), 0, "{bad}");
    assert!(bad.stderr.contains("--symbols no-such-dir: not a folder"), "{bad}");
    assert_eq!(bad.stderr.trim().lines().count(), 1, "one line: {bad}");
}

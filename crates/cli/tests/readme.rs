//! End-to-end tests: the README's examples run as written, and a copied `lockmeter` works alone
//! (the preload library it carries is written to a private cache directory).
//!
//! Every ```` ```console ```` block of README.md that the line `<!-- readme-test: runs -->`
//! precedes is run: each `$ ` line, in order, by bash (`-e -o pipefail`), in one scratch directory
//! where `crates/` is the workspace's (so `crates/report/tests/programs/table.c` works as
//! written) and `lockmeter` on PATH is the binary under test. Each must exit 0. A line whose
//! program is not installed (`go`) is skipped with a printed reason; every `lockmeter` line must
//! run.
//!
//! Ground-truth programs: the demo (its hot lock is taken threads x iterations times) and the
//! README's own (crates/report/tests/programs/table.c).

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

/// The marker line before a console block whose commands the test runs.
const MARKER: &str = "<!-- readme-test: runs -->";

/// The commands of the marked blocks of `readme`, with their line numbers.
fn marked_commands(readme: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut lines = readme.lines().enumerate().peekable();
    while let Some((_, line)) = lines.next() {
        if line.trim() != MARKER {
            continue;
        }
        match lines.next() {
            Some((_, fence)) if fence.trim() == "```console" => {}
            other => panic!("README: {MARKER} must precede a ```console block, found {other:?}"),
        }
        for (i, l) in lines.by_ref() {
            if l.trim_start().starts_with("```") {
                break;
            }
            if let Some(cmd) = l.strip_prefix("$ ") {
                out.push((i + 1, cmd.to_owned()));
            }
        }
    }
    out
}

/// Whether bash finds `word` (a builtin, a function or a program on `path`).
fn installed(word: &str, path: &std::ffi::OsStr) -> bool {
    Command::new("bash")
        .args(["-c", &format!("type -P {word} >/dev/null || type -t {word} >/dev/null")])
        .env("PATH", path)
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn marked_blocks_are_found() {
    let readme = "x\n<!-- readme-test: runs -->\n```console\n$ a 1   # c\nout\n$ b\n```\n$ c\n";
    assert_eq!(marked_commands(readme), vec![(4, "a 1   # c".to_owned()), (6, "b".to_owned())]);
}

#[test]
fn readme_examples_run_as_written() {
    let readme = std::fs::read_to_string(workspace().join("README.md")).expect("README.md");
    let cmds = marked_commands(&readme);
    let lockmeter_lines = cmds.iter().filter(|(_, c)| c.starts_with("lockmeter ")).count();
    assert!(lockmeter_lines >= 8, "the README marks only {lockmeter_lines} lockmeter commands");

    let s = Scratch::new("readme");
    std::os::unix::fs::symlink(
        workspace().join("crates").canonicalize().unwrap(),
        s.path("crates"),
    )
    .unwrap();
    let bin = s.path("bin");
    std::fs::create_dir(&bin).unwrap();
    std::os::unix::fs::symlink(lockmeter_bin(), bin.join("lockmeter")).unwrap();
    let mut path = bin.clone().into_os_string();
    path.push(":");
    path.push(std::env::var_os("PATH").unwrap_or_default());

    let mut ran = 0;
    for (line, cmd) in &cmds {
        let first = cmd.split_whitespace().next().unwrap_or_default();
        if !installed(first, &path) {
            eprintln!("SKIPPED README.md:{line}: `{cmd}`: {first} is not installed");
            continue;
        }
        let mut c = Command::new("bash");
        // The same clean environment as every end-to-end run (lockmeter_cmd's), then bash.
        for (k, v) in lockmeter_cmd(&s.dir).get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        c.current_dir(&s.dir).env("PATH", &path).args(["-e", "-o", "pipefail", "-c", cmd]);
        let child = spawn(&mut c);
        let r = finish(format!("README.md:{line}: {cmd}"), child, b"", RUN_LIMIT);
        assert!(r.status.success(), "README.md:{line}: `{cmd}` failed\n{r}");
        ran += 1;
    }
    assert!(ran >= lockmeter_lines, "only {ran} of the README's commands ran");
    // What the examples promise to write.
    for f in ["demo.lmp", "plot.svg", "flame.svg", "demo.pb.gz", "demo.csv", "table.lmp"] {
        assert!(s.path(f).is_file(), "the README's examples did not write {f}");
    }
}

/// Runs the copied binary `x ARGS` in `dir` with the tests' clean environment, without
/// LOCKMETER_PRELOAD, and with `envs`.
fn run_copied(dir: &Path, x: &Path, args: &[&str], envs: &[(&str, &Path)]) -> Ran {
    let mut c = Command::new(x);
    for (k, v) in lockmeter_cmd(dir).get_envs() {
        match v {
            Some(v) => c.env(k, v),
            None => c.env_remove(k),
        };
    }
    c.env_remove("LOCKMETER_PRELOAD").current_dir(dir).args(args);
    for (k, v) in envs {
        c.env(k, v);
    }
    let child = spawn(&mut c);
    finish(format!("{} {}", x.display(), args.join(" ")), child, b"", RUN_LIMIT)
}

/// `cp target/.../lockmeter /tmp/x && /tmp/x demo`: the binary alone, with no preload library
/// beside it and no LOCKMETER_PRELOAD, writes its embedded copy to a private cache directory
/// (mode 0700) and meters the demo exactly.
#[test]
fn a_copied_binary_works_alone() {
    use std::os::unix::fs::PermissionsExt;
    let s = Scratch::new("copied");
    let x = s.path("x");
    std::fs::copy(lockmeter_bin(), &x).unwrap();
    let cache = s.path("cache");
    let demo =
        |out: &'static str| ["demo", "-q", "-o", out, "--threads", "4", "--iterations", "5000"];
    let hot = "lockmeter::demo::WORK_QUEUE_LOCK";
    let ran = run_copied(&s.dir, &x, &demo("d.lmp"), &[("XDG_CACHE_HOME", &cache)]);
    ran.expect_code(0);
    Profile::load(&s.path("d.lmp"), &ran).expect_lock(hot, "mutex", 4 * 5000);
    let dir = cache.join("lockmeter");
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "{}", dir.display());
    let libs: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(libs.len(), 1, "{libs:?}");
    let name = libs[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("liblockmeter_preload-") && name.ends_with(".so"), "{name}");

    // A file of that name with other bytes (a torn earlier write) is replaced, not trusted.
    std::fs::write(&libs[0], b"not a library").unwrap();
    let again = run_copied(&s.dir, &x, &demo("e.lmp"), &[("XDG_CACHE_HOME", &cache)]);
    again.expect_code(0);
    Profile::load(&s.path("e.lmp"), &again).expect_lock(hot, "mutex", 4 * 5000);
    assert!(std::fs::read(&libs[0]).unwrap().starts_with(b"\x7fELF"), "{again}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "temporary files left\n{again}");

    // A cache directory others can write is refused (another user could swap the library); the
    // private directory under $TMPDIR is used instead.
    let open = s.path("open");
    std::fs::create_dir_all(open.join("lockmeter")).unwrap();
    std::fs::set_permissions(open.join("lockmeter"), std::fs::Permissions::from_mode(0o777))
        .unwrap();
    let tmp = s.path("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let third =
        run_copied(&s.dir, &x, &demo("f.lmp"), &[("XDG_CACHE_HOME", &open), ("TMPDIR", &tmp)]);
    third.expect_code(0);
    Profile::load(&s.path("f.lmp"), &third).expect_lock(hot, "mutex", 4 * 5000);
    assert_eq!(std::fs::read_dir(open.join("lockmeter")).unwrap().count(), 0, "{third}");
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    let private = tmp.join(format!("lockmeter-{uid}"));
    let mode = std::fs::metadata(&private).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700, "{third}");
    assert_eq!(std::fs::read_dir(&private).unwrap().count(), 1, "{third}");
}

//! End-to-end tests: a copied `lockmeter` works alone (the preload library it carries is written
//! to a private cache directory).
//!
//! Ground-truth program: the demo (its hot lock is taken threads x iterations times).

mod common;

use common::*;
use std::path::Path;
use std::process::Command;

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

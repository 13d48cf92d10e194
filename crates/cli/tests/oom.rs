//! End-to-end test: a program killed by the OOM killer, which kills its guardian with it (they
//! share one address space), still leaves a complete profile: the collector's watcher, a process
//! with memory of its own, writes it. The program runs in a memory cgroup with a 64 MiB limit and
//! no swap (cgroup v2, or v1's memory controller where v2 has none); its counts equal what it
//! printed before it was killed, and its end is `oom_killed` (signal 9) when the kernel's log is
//! readable, `killed` (signal 9) otherwise. A fork child killed so leaves its own profile (the
//! watcher its fork started) and its parent's profile has none of the child's locks (the child
//! copied the shared tables before it locked). A library the program loaded with `dlopen` before
//! it was killed is in the watcher's profile: its lock is named and its site symbolized.
//!
//! Ground-truth programs (`tests/programs/`): oom.c, shlib.c.
//!
//! Needs gcc, root and a memory cgroup controller; skipped with a printed reason otherwise. Run
//! with `cargo test -p lockmeter --test oom`.

mod common;

use common::*;
use std::path::{Path, PathBuf};

/// A memory cgroup made for the test, removed when dropped.
struct Cgroup {
    dir: PathBuf,
    /// The file that counts OOM kills in it, and the key before the count.
    events: (PathBuf, &'static str),
}

impl Cgroup {
    /// A cgroup limited to `limit` bytes of memory and no swap, or why there can be none.
    fn create(test: &str, limit: u64) -> Result<Cgroup, String> {
        let name = format!("lockmeter-test-{}-{}", std::process::id(), &test[..test.len().min(24)]);
        let v2 = Path::new("/sys/fs/cgroup");
        let v2_controllers = std::fs::read_to_string(v2.join("cgroup.controllers"));
        if v2_controllers.is_ok_and(|c| c.split_whitespace().any(|w| w == "memory")) {
            let sub =
                std::fs::read_to_string(v2.join("cgroup.subtree_control")).unwrap_or_default();
            if !sub.split_whitespace().any(|w| w == "memory") {
                std::fs::write(v2.join("cgroup.subtree_control"), "+memory").map_err(|e| {
                    format!("cannot enable the memory controller in {}: {e}", v2.display())
                })?;
            }
            let cg = Cgroup {
                dir: v2.join(&name),
                events: (v2.join(&name).join("memory.events"), "oom_kill"),
            };
            std::fs::create_dir(&cg.dir)
                .map_err(|e| format!("cannot create {}: {e}", cg.dir.display()))?;
            cg.set("memory.max", limit)?;
            if cg.dir.join("memory.swap.max").exists() {
                cg.set("memory.swap.max", 0)?;
            }
            return Ok(cg);
        }
        let v1 = Path::new("/sys/fs/cgroup/memory");
        if !v1.join("memory.limit_in_bytes").exists() {
            return Err("no memory controller, in cgroup v2 nor v1".into());
        }
        let cg = Cgroup {
            dir: v1.join(&name),
            events: (v1.join(&name).join("memory.oom_control"), "oom_kill"),
        };
        std::fs::create_dir(&cg.dir)
            .map_err(|e| format!("cannot create {}: {e}", cg.dir.display()))?;
        cg.set("memory.limit_in_bytes", limit)?;
        if cg.dir.join("memory.memsw.limit_in_bytes").exists() {
            cg.set("memory.memsw.limit_in_bytes", limit)?;
        }
        Ok(cg)
    }

    fn set(&self, file: &str, v: u64) -> Result<(), String> {
        std::fs::write(self.dir.join(file), v.to_string())
            .map_err(|e| format!("cannot write {}/{file}: {e}", self.dir.display()))
    }

    /// The OOM kills counted in the cgroup.
    fn oom_kills(&self) -> u64 {
        let text = std::fs::read_to_string(&self.events.0).unwrap_or_default();
        text.lines()
            .filter_map(|l| l.strip_prefix(self.events.1)?.trim().parse().ok())
            .next()
            .unwrap_or(0)
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // Its last processes (the watcher) may take a moment to be reaped.
        for _ in 0..100 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        eprintln!("cannot remove {}", self.dir.display());
    }
}

/// The number after `name` in a program's output.
fn field(stdout: &str, name: &str) -> u64 {
    let w: Vec<&str> = stdout.split_whitespace().collect();
    let i = w.iter().position(|x| *x == name).unwrap_or_else(|| panic!("no {name} in {stdout}"));
    w[i + 1].parse().unwrap()
}

/// Runs `oom ARGS` under `lockmeter run` in a fresh 64 MiB memory cgroup (only the program in
/// it); `None`, with a printed reason, where that cannot be done.
fn run_in_cgroup(test: &str, args: &str) -> Option<(Scratch, Ran, Cgroup)> {
    run_in_cgroup_with(test, |_| args.to_string())
}

/// [`run_in_cgroup`] with the arguments made once the scratch directory exists.
fn run_in_cgroup_with(
    test: &str,
    args: impl FnOnce(&Scratch) -> String,
) -> Option<(Scratch, Ran, Cgroup)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED {test}: needs root to make a memory cgroup");
        return None;
    }
    let cg = match Cgroup::create(test, 64 << 20) {
        Ok(cg) => cg,
        Err(why) => {
            eprintln!("SKIPPED {test}: {why}");
            return None;
        }
    };
    let s = Scratch::new(test);
    let exe = s.compile("oom");
    let args = args(&s);
    // Only the program goes into the cgroup: the shell moves itself there, then execs it.
    let script =
        format!("echo $$ > {}/cgroup.procs && exec {} {args}", cg.dir.display(), exe.display());
    let ran = run_metered(&s, "p.lmp", &[], Path::new("/bin/sh"), &["-c", &script]);
    assert!(cg.oom_kills() >= 1, "the cgroup counts no OOM kill\n{ran}");
    assert!(!ran.stdout.contains("not killed"), "{ran}");
    Some((s, ran, cg))
}

/// Checks the end of a profile the watcher wrote after an OOM kill: `oom_killed`, or where the
/// kernel's log is not readable, `killed` or (`reaped`: the parent reaps it at once) `vanished`.
#[track_caller]
fn expect_oom_end(p: &Profile, reaped: bool) {
    let reason = p.header()["end_reason"].as_str().unwrap_or("").to_string();
    if reason == "oom_killed" {
        p.expect_end("oom_killed", Some(9));
        return;
    }
    // Without the kernel's log the watcher cannot know it was the OOM killer.
    let kmsg = std::fs::File::open("/dev/kmsg");
    p.check(kmsg.is_err(), format!("end `{reason}` although the kernel's log is readable"));
    if reason == "vanished" && reaped {
        return;
    }
    p.expect_end("killed", Some(9));
}

#[test]
fn an_oom_kill_leaves_a_complete_profile() {
    let test = "an_oom_kill_leaves_a_complete_profile";
    let Some((s, ran, _cg)) = run_in_cgroup(test, "3000 3") else { return };
    ran.expect_code(137);
    // The run file: the program's image (the shell's, which took no lock, may be left out).
    let images = split_run(&s, "p.lmp", &ran);
    let p = Profile::load(images.last().expect("a profile"), &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    p.expect_lock("oom_lock", "mutex", field(&ran.stdout, "oom_lock"));
    p.eq("threads", p.threads().len(), 3);
    expect_oom_end(&p, false);
    assert!(ran.stderr.contains("signal 9"), "run does not say the signal\n{ran}");
}

#[test]
fn an_oom_killed_fork_child_leaves_its_own_profile_and_its_parent_its_own() {
    let test = "an_oom_killed_fork_child_leaves_its_own_profile_and_its_parent_its_own";
    let Some((s, ran, _cg)) = run_in_cgroup(test, "2000 2 fork") else { return };
    ran.expect_code(0);
    assert_eq!(field(&ran.stdout, "child_status"), 9, "{ran}");
    let images = split_run(&s, "p.lmp", &ran);
    let profiles: Vec<Profile> = images.iter().map(|i| Profile::load(i, &ran)).collect();
    let has = |p: &Profile, name: &str| !p.locks_named(name).is_empty();
    let parent = profiles.iter().find(|p| has(p, "oom_lock") && !has(p, "child_lock"));
    let child = profiles.iter().find(|p| has(p, "child_lock"));
    let (Some(parent), Some(child)) = (parent, child) else {
        panic!("no parent profile without child_lock, or no child profile: {images:?}\n{ran}");
    };
    parent.check_consistency();
    parent.expect_end("exit", None);
    parent.expect_lock("oom_lock", "mutex", field(&ran.stdout, "oom_lock"));
    child.check_consistency();
    child.expect_nothing_dropped();
    child.expect_lock("child_lock", "mutex", field(&ran.stdout, "child_lock"));
    expect_oom_end(child, true);
}

#[test]
fn an_oom_kill_after_dlopen_leaves_the_library_named_and_symbolized() {
    let test = "an_oom_kill_after_dlopen_leaves_the_library_named_and_symbolized";
    let Some((s, ran, _cg)) = run_in_cgroup_with(test, |s| {
        let lib = s.compile_with("shlib", "libe2eshlib.so", &["-fPIC", "-shared"]);
        format!("500 1 dlopen {}", lib.display())
    }) else {
        return;
    };
    ran.expect_code(137);
    let images = split_run(&s, "p.lmp", &ran);
    let p = Profile::load(images.last().expect("a profile"), &ran);
    p.check_consistency();
    expect_oom_end(&p, false);
    let n = field(&ran.stdout, "shlib_lock");
    p.expect_lock("oom_lock", "mutex", field(&ran.stdout, "oom_lock"));
    let l = p.expect_lock("shlib_lock", "mutex", n);
    let site = &l["sites"][0];
    let f = sf(site, "function").unwrap_or("");
    p.check(f.starts_with("shlib_take+0x"), format!("shlib_lock's site {f} is shlib_take"));
    p.eq("shlib_lock's site module", sf(site, "module"), Some("libe2eshlib.so"));
}

//! End-to-end tests: one file per run, one profile per process image in it. Children made by
//! fork, posix_spawn and vfork, and images started by every exec function, each get their own
//! exact profile in the run file (the tests split it with `split_run` into `img/OUT.PID`,
//! `img/OUT.PID.N` after the N-th exec); process-shared locks are counted in each process that
//! takes them. Images that took no lock are left out of the file, except the first.
//!
//! A run under a launcher (a pyenv-style shim that execs through `env`, `sh -c 'exec ...'`, a
//! shell script that starts the program as a child) is summarized as the program that took the
//! locks, named with its launchers; its default report shows the program's locks with exact
//! counts, and `report --by process` lists every process.
//!
//! `strace -f` ends both under `lockmeter run` and around it (it waits for any child until none
//! is left, which used to include its own guardian and watcher). Children made without fork's
//! handlers (glibc's `_Fork`, a raw `clone`) are not metered: their parent's profile holds the
//! parent's acquisitions only. Tests that need strace are skipped, with a printed reason, without
//! it.
//!
//! Ground-truth programs (`tests/programs/`): execer.c, forker.c, latefork.c, pshared.c,
//! spawner.c, underfork.c, hammer.c (under the launcher scripts the tests write).
//!
//! Needs gcc. Run with `cargo test -p lockmeter --test processes`; the harness builds the
//! preload library itself (`cargo build -p lockmeter-preload`) once per test process.

mod common;

use common::*;

#[test]
fn fork_children_get_their_own_exact_profiles() {
    let s = Scratch::new("fork");
    let exe = s.compile("forker");
    let (before, after, child) = (100u64, 200u64, 300u64);
    let ran = run_metered(
        &s,
        "p.lmp",
        &[],
        &exe,
        &[&before.to_string(), &after.to_string(), &child.to_string()],
    );
    ran.expect_code(0);
    let pid_of = |k: &str| -> u64 {
        ran.stdout
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no '{k}' line\n{ran}"))
    };
    let (c1, c2) = (pid_of("child1 "), pid_of("child2 "));

    // One file, holding the parent and both children.
    assert_eq!(s.files_with_prefix("p.lmp").len(), 1, "{ran}");
    assert_eq!(split_run(&s, "p.lmp", &ran).len(), 3, "{ran}");
    let parent = Profile::load(&s.path("img/p.lmp"), &ran);
    parent.check_consistency();
    parent.expect_nothing_dropped();
    parent.expect_end("exit", None);
    parent.expect_lock("fork_lock", "mutex", before + after);
    parent.expect_lock("helper_lock", "mutex", 77);
    parent.eq("parent: child_lock", parent.acq("child_lock"), 0);
    parent.eq("parent threads", parent.threads().len(), 2);
    parent.expect_lock("held_lock", "mutex", 1);
    let ppid = u(parent.header(), "pid");

    let f1 = s.path(&format!("img/p.lmp.{c1}"));
    let p1 = Profile::load(&f1, &ran);
    p1.check_consistency();
    p1.expect_nothing_dropped();
    p1.expect_end("exit", None);
    p1.eq("child 1 pid", u(p1.header(), "pid"), c1);
    p1.eq("child 1 ppid", u(p1.header(), "ppid"), ppid);
    p1.expect_lock("fork_lock", "mutex", child);
    p1.expect_lock("child_lock", "mutex", child / 2);
    p1.eq("child 1: helper_lock (parent's, before the fork)", p1.acq("helper_lock"), 0);
    p1.eq("child 1 threads", p1.threads().len(), 1);
    p1.expect_lock("held_lock", "mutex", 5);
    p1.eq("child 1 totals", p1.totals("acquisitions"), child + child / 2 + 5);
    p1.expect_all_holds_timed(&[]);
    parent.expect_all_holds_timed(&[]);

    let f2 = s.path(&format!("img/p.lmp.{c2}"));
    let p2 = Profile::load(&f2, &ran);
    p2.check_consistency();
    p2.expect_end("_exit", None);
    p2.expect_lock("fork_lock", "mutex", child);
    p2.eq("child 2 totals", p2.totals("acquisitions"), child);

    // The whole file: totals sum over the processes, each lock named with its process.
    let all = Profile::load(&s.path("p.lmp"), &ran);
    all.check_consistency();
    let sum = before + after + 77 + 1 + (child + child / 2 + 5) + child;
    all.eq("run totals", all.totals("acquisitions"), sum);
    all.expect_lock(&format!("forker[{c1}]: child_lock"), "mutex", child / 2);
    all.expect_lock(&format!("forker[{c2}]: fork_lock"), "mutex", child);
    let procs = all.json["processes"].as_array().unwrap();
    all.eq("processes", procs.len(), 3);
    let p1 = procs.iter().find(|p| u(p, "pid") == c1).unwrap();
    all.eq("child 1 ppid", u(p1, "ppid"), ppid);
    all.eq("child 1 acquisitions", u(p1, "acquisitions"), child + child / 2 + 5);
}

#[test]
fn process_shared_locks_are_counted_per_process() {
    let s = Scratch::new("pshared");
    let exe = s.compile("pshared");
    let n = 20_000u64;
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[&n.to_string()]);
    ran.expect_code(0);
    let child: u64 = ran
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("child ")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no child pid\n{ran}"));
    split_run(&s, "p.lmp", &ran);
    for f in [s.path("img/p.lmp"), s.path(&format!("img/p.lmp.{child}"))] {
        let p = Profile::load(&f, &ran);
        p.check_consistency();
        p.expect_nothing_dropped();
        let mutexes: Vec<_> = p.locks().iter().filter(|l| sf(l, "kind") == Some("mutex")).collect();
        p.eq("mutexes", mutexes.len(), 1);
        p.eq("shared mutex acquisitions", u(mutexes[0], "acquisitions"), n);
        let rw: Vec<_> = p.locks().iter().filter(|l| sf(l, "kind") == Some("rwlock")).collect();
        p.eq("rwlocks", rw.len(), 1);
        p.eq("shared rwlock reads", u(rw[0], "read_acquisitions"), n);
        p.eq("shared rwlock writes", u(rw[0], "write_acquisitions"), n / 2);
        p.expect_all_holds_timed(&[]);
    }
}

#[test]
fn exec_writes_one_profile_per_image_and_a_failed_exec_changes_nothing() {
    let s = Scratch::new("exec");
    let exe = s.compile("execer");
    let (n, m) = (100u64, 50u64);
    for how in ["execv", "execve", "execvp", "execl", "execlp", "execle"] {
        let base = format!("{how}.lmp");
        let ran = run_metered(&s, &base, &[], &exe, &[&n.to_string(), &m.to_string(), how]);
        ran.expect_code(0);
        assert_eq!(split_run(&s, &base, &ran).len(), 2, "{how}\n{ran}");
        let first = Profile::load(&s.path(&format!("img/{base}")), &ran);
        first.check_consistency();
        first.expect_nothing_dropped();
        first.expect_end("exec", None);
        first.expect_lock("exec_lock", "mutex", 2 * n);
        first.eq(format!("{how}: stage 1: stage2_lock"), first.acq("stage2_lock"), 0);
        let pid = u(first.header(), "pid");

        let f2 = s.path(&format!("img/{base}.{pid}.1"));
        let second = Profile::load(&f2, &ran);
        second.check_consistency();
        second.expect_end("exit", None);
        second.eq(format!("{how}: stage 2 pid"), u(second.header(), "pid"), pid);
        second.expect_lock("stage2_lock", "mutex", m);
        second.eq(format!("{how}: stage 2: exec_lock"), second.acq("exec_lock"), 0);
        assert_eq!(s.files_with_prefix(&base).len(), 1, "{how}\n{ran}");
    }
}

#[test]
fn exec_image_seq_counts_the_execs() {
    let s = Scratch::new("exec-seq");
    let exe = s.compile("execer");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &["10", "10"]);
    ran.expect_code(0);
    split_run(&s, "p.lmp", &ran);
    let first = Profile::load(&s.path("img/p.lmp"), &ran);
    first.eq("stage 1 image_seq", u(first.header(), "image_seq"), 0);
    let pid = u(first.header(), "pid");
    let second = Profile::load(&s.path(&format!("img/p.lmp.{pid}.1")), &ran);
    second.eq(
        "stage 2 image_seq (SCHEMA.md: +1 after each exec)",
        u(second.header(), "image_seq"),
        1,
    );
}

#[test]
fn posix_spawn_vfork_and_fork_exec_children_get_exact_profiles() {
    let s = Scratch::new("spawn");
    let exe = s.compile("spawner");
    let (n, m) = (100u64, 50u64);
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[&n.to_string(), &m.to_string()]);
    ran.expect_code(0);
    let pids: Vec<u64> = ran
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("spawned ")?.trim().parse().ok())
        .collect();
    assert_eq!(pids.len(), 3, "{ran}");
    // The fork child's forked image took no lock: left out of the file.
    assert_eq!(split_run(&s, "p.lmp", &ran).len(), 4, "{ran}");
    let parent = Profile::load(&s.path("img/p.lmp"), &ran);
    parent.check_consistency();
    parent.expect_nothing_dropped();
    parent.expect_end("exit", None);
    parent.expect_lock("parent_lock", "mutex", 2 * n);
    parent.eq("parent: child_lock", parent.acq("child_lock"), 0);
    // posix_spawn and vfork children exec at once: one profile each, of the new image.
    for (how, pid) in [("posix_spawn", pids[0]), ("vfork", pids[1])] {
        let p = Profile::load(&s.path(&format!("img/p.lmp.{pid}")), &ran);
        p.check_consistency();
        p.expect_end("exit", None);
        p.eq(format!("{how} child pid"), u(p.header(), "pid"), pid);
        p.expect_lock("child_lock", "mutex", m);
        p.eq(format!("{how} child: parent_lock"), p.acq("parent_lock"), 0);
    }
    // The fork child: its forked image (no lock of its own) ends by exec, then the new image.
    let pid = pids[2];
    assert!(!s.path(&format!("img/p.lmp.{pid}")).exists(), "{ran}");
    let post = Profile::load(&s.path(&format!("img/p.lmp.{pid}.1")), &ran);
    post.expect_end("exit", None);
    post.expect_lock("child_lock", "mutex", m);
    post.eq("fork child after exec: parent_lock", post.acq("parent_lock"), 0);
    assert_eq!(s.files_with_prefix("p.lmp").len(), 1, "{ran}");
}

#[test]
fn image_seq_after_spawning_children_the_parent_execs() {
    // The parent starts children by posix_spawn, vfork + execv and fork + execv, then execs
    // itself: its second image is image_seq 1, whatever its children did.
    let s = Scratch::new("spawn-seq");
    let exe = s.compile("spawner");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &["10", "5", "thenexec"]);
    ran.expect_code(0);
    split_run(&s, "p.lmp", &ran);
    let first = Profile::load(&s.path("img/p.lmp"), &ran);
    first.expect_end("exec", None);
    first.eq("stage 1 image_seq", u(first.header(), "image_seq"), 0);
    let pid = u(first.header(), "pid");
    let second = Profile::load(&s.path(&format!("img/p.lmp.{pid}.1")), &ran);
    second.expect_lock("child_lock", "mutex", 5);
    second.eq("the parent's exec'd image: image_seq", u(second.header(), "image_seq"), 1);
}

/// Writes an executable script `rel` (below the scratch directory) with `body`.
fn script(s: &Scratch, rel: &str, body: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = s.path(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

/// The profile `run`'s `next:` line names (the one its summary is of).
fn summarized_file(ran: &Ran) -> std::path::PathBuf {
    let line = ran
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("next: lockmeter report "))
        .unwrap_or_else(|| panic!("no next: line\n{ran}"));
    std::path::PathBuf::from(line.split(" --by").next().unwrap())
}

/// A pid the program printed as `KEY PID`.
fn printed_pid(ran: &Ran, key: &str) -> u64 {
    ran.stdout
        .lines()
        .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no '{key}' line\n{ran}"))
}

#[test]
fn a_program_behind_a_pyenv_style_shim_is_summarized_as_itself() {
    // shims/hammer (bash) execs libexec/pyenv (bash), which runs a command substitution (a
    // forked bash) and execs `env`, which execs hammer: one pid, four images, plus the fork.
    let s = Scratch::new("shim");
    let exe = s.compile("hammer");
    let pyenv = script(
        &s,
        ".pyenv/libexec/pyenv",
        &format!(
            "#!/bin/bash\nset -e\nv=\"$(echo 3.12)\"\nshift 2\nexec env PYENV_VERSION=\"$v\" {} \"$@\"\n",
            exe.display()
        ),
    );
    let shim = script(
        &s,
        ".pyenv/shims/hammer",
        &format!("#!/bin/bash\necho \"shim $$\"\nexec {} exec hammer \"$@\"\n", pyenv.display()),
    );
    let (threads, iters) = (4u64, 5000u64);
    let out = s.path("p.lmp");
    let ran = lockmeter(
        &s.dir,
        &[
            "run",
            "-o",
            out.to_str().unwrap(),
            "--",
            shim.to_str().unwrap(),
            &threads.to_string(),
            &iters.to_string(),
        ],
    );
    ran.expect_code(0);
    assert!(ran.stdout.contains(&format!("ok {}", threads * iters)), "{ran}");
    let pid = printed_pid(&ran, "shim ");
    let want = format!(
        "the one that took the most locks, pid {pid}: hammer {threads} {iters} (via pyenv shim → env)"
    );
    assert!(ran.stderr.contains(&want), "no '{want}'\n{ran}");
    let lead = summarized_file(&ran);
    assert_eq!(lead, out, "{ran}");
    let p = Profile::load(&lead, &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    p.eq("summarized pid", u(p.header(), "pid"), pid);
    p.expect_lock("big_lock", "mutex", threads * iters);
    // The summary's table is this image's: big_lock with its exact count.
    let row =
        ran.stderr.lines().find(|l| l.contains("big_lock")).unwrap_or_else(|| panic!("{ran}"));
    assert!(row.split_whitespace().any(|w| w == (threads * iters).to_string()), "{row}\n{ran}");
    // One file: the first image (the shim) and hammer's; the table marks hammer's row and
    // counts the launcher images (4 of pid, 1 fork).
    assert_eq!(s.files_with_prefix("p.lmp").len(), 1, "{ran}");
    assert_eq!(split_run(&s, "p.lmp", &ran).len(), 2, "{ran}");
    assert!(ran.stderr.contains("processes: 5 images, 1 of them took locks"), "{ran}");
    let marked = ran.stderr.lines().any(|l| l.trim_start().starts_with(&format!("{pid} *")));
    assert!(marked, "no marked row for {pid}\n{ran}");
    assert!(ran.stderr.contains("4 image(s) took no lock"), "{ran}");
}

#[test]
fn a_shell_wrapper_is_summarized_as_its_busiest_child_and_lists_the_others() {
    let s = Scratch::new("wrapper");
    let exe = s.compile("hammer");
    let wrap = script(
        &s,
        "wrap.sh",
        &format!(
            "#!/bin/sh\n{e} 3 2000 &\necho \"big $!\"\nwait\n{e} 1 700 &\necho \"small $!\"\nwait\n",
            e = exe.display()
        ),
    );
    let out = s.path("w.lmp");
    let ran =
        lockmeter(&s.dir, &["run", "-o", out.to_str().unwrap(), "--", wrap.to_str().unwrap()]);
    ran.expect_code(0);
    let (big, small) = (printed_pid(&ran, "big "), printed_pid(&ran, "small "));
    let want = format!("pid {big}: hammer 3 2000 (via shell script wrap.sh)");
    assert!(ran.stderr.contains(&want), "no '{want}'\n{ran}");
    assert_eq!(summarized_file(&ran), out, "{ran}");
    // The default report covers both hammers, each lock named with its process; totals sum.
    let all = Profile::load(&out, &ran);
    all.expect_lock(&format!("hammer[{big}]: big_lock"), "mutex", 6000);
    all.expect_lock(&format!("hammer[{small}]: big_lock"), "mutex", 700);
    all.eq("totals", all.totals("acquisitions"), 6700);
    let p = Profile::load_with(&out, &ran, &["--process", &big.to_string()]);
    p.eq("selected pid", u(p.header(), "pid"), big);
    p.expect_lock("big_lock", "mutex", 6000);
    // `cmd &` in sh: a forked shell (its own image, no lock) that execs the program.
    split_run(&s, "w.lmp", &ran);
    let other = Profile::load(&s.path(&format!("img/w.lmp.{small}.1")), &ran);
    other.expect_lock("big_lock", "mutex", 700);
    // Both hammers have rows, the busier first and marked; the shells took no lock.
    let row = |start: String| {
        ran.stderr
            .lines()
            .position(|l| l.trim_start().starts_with(&start))
            .unwrap_or_else(|| panic!("no row '{start}'\n{ran}"))
    };
    assert!(row(format!("{big} *")) < row(format!("{small}  ")), "{ran}");
    assert!(ran.stderr.contains("2 of them took locks"), "{ran}");
}

#[test]
fn profiles_are_known_from_the_manifest_not_guessed_from_names() {
    // The program (a shell script) makes a file named like a child's profile while it runs:
    // `run` lists the profiles the collector wrote (its manifest), not files that look like them,
    // and leaves no manifest behind in TMPDIR.
    let s = Scratch::new("manifest");
    let exe = s.compile("hammer");
    let out = s.path("m.lmp");
    let fake = format!("{}.4242", out.display());
    let wrap = script(
        &s,
        "wrap.sh",
        &format!(
            "#!/bin/sh\necho junk > {fake}\n{} 2 300 &\necho \"child $!\"\nwait\n",
            exe.display()
        ),
    );
    let tmp = s.path("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let mut cmd = lockmeter_cmd(&s.dir);
    cmd.env("TMPDIR", &tmp).args([
        "run",
        "-o",
        out.to_str().unwrap(),
        "--",
        wrap.to_str().unwrap(),
    ]);
    let ran = finish("lockmeter run (manifest)".into(), spawn(&mut cmd), b"", RUN_LIMIT);
    ran.expect_code(0);
    let child = printed_pid(&ran, "child ");
    // The forked shell (exec'd away) and the program it became: three images ran, two took
    // no lock; the file holds the first and the program's.
    assert!(ran.stderr.contains("processes: 3 images, 1 of them took locks"), "{ran}");
    // The image left out, the forked shell, is counted in the file's first profile with what
    // starting and ending it cost (the run's estimate has it), and in the report's JSON.
    let run = lockmeter_format::read_run_file(&out).unwrap_or_else(|e| panic!("{e}\n{ran}"));
    let o = &run.processes[0].overhead;
    assert_eq!(o.other_images, 1, "{ran}");
    assert!(o.other_fixed_ns > 0, "{ran}");
    let p = Profile::load(&out, &ran);
    p.eq("other images", u(&p.json["overhead"], "other_images"), 1);
    assert_eq!(split_run(&s, "m.lmp", &ran).len(), 2, "{ran}");
    assert_eq!(std::fs::read(&fake).unwrap(), b"junk\n", "{ran}");
    let image = s.path(&format!("img/m.lmp.{child}.1"));
    Profile::load(&image, &ran).expect_lock("big_lock", "mutex", 600);
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().flatten().map(|e| e.path()).collect();
    assert!(left.is_empty(), "left in TMPDIR: {left:?}");
}

#[test]
fn a_program_started_by_sh_c_exec_is_one_file_summarized_as_itself() {
    let s = Scratch::new("sh-c");
    let exe = s.compile("hammer");
    let out = s.path("c.lmp");
    let cmd = format!("exec {} 3 1500", exe.display());
    let ran = lockmeter(&s.dir, &["run", "-o", out.to_str().unwrap(), "--", "sh", "-c", &cmd]);
    ran.expect_code(0);
    assert!(ran.stdout.contains("ok 4500"), "{ran}");
    assert!(ran.stderr.contains(": hammer 3 1500 (via "), "{ran}");
    assert_eq!(s.files_with_prefix("c.lmp").len(), 1, "{ran}");
    let p = Profile::load(&out, &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    p.expect_lock("big_lock", "mutex", 4500);
    // One process (sh that exec'd hammer): two images, named by the last.
    let procs = p.json["processes"].as_array().unwrap();
    p.eq("processes", procs.len(), 1);
    p.eq("its name", procs[0]["name"].as_str(), Some("hammer"));
    p.eq("its images", u(&procs[0], "images"), 2);
    p.eq("its acquisitions", u(&procs[0], "acquisitions"), 4500);
}

#[test]
fn a_wrapper_script_and_its_child_are_one_file_and_two_processes() {
    let s = Scratch::new("wrap-child");
    let exe = s.compile("hammer");
    let wrap = script(
        &s,
        "wrap.sh",
        &format!("#!/bin/sh\n{} 2 2500\necho \"wrapper $$\"\n", exe.display()),
    );
    let out = s.path("w.lmp");
    let ran =
        lockmeter(&s.dir, &["run", "-o", out.to_str().unwrap(), "--", wrap.to_str().unwrap()]);
    ran.expect_code(0);
    let sh = printed_pid(&ran, "wrapper ");
    assert_eq!(s.files_with_prefix("w.lmp").len(), 1, "{ran}");
    // The summary and the default report show the program's lock, exact.
    let row =
        ran.stderr.lines().find(|l| l.contains("big_lock")).unwrap_or_else(|| panic!("{ran}"));
    assert!(row.split_whitespace().any(|w| w == "5000"), "{row}\n{ran}");
    let p = Profile::load(&out, &ran);
    p.expect_lock("big_lock", "mutex", 5000);
    // --by process: the shell (no lock) and hammer, its child.
    let rep = lockmeter(&s.dir, &["report", out.to_str().unwrap(), "--by", "process"]);
    assert!(rep.status.success(), "{rep}");
    let rows: Vec<&str> = rep
        .stdout
        .lines()
        .filter(|l| l.ends_with(" sh") || l.ends_with(" dash") || l.ends_with(" hammer"))
        .collect();
    assert_eq!(rows.len(), 2, "{rep}");
    let hammer = rows.iter().find(|l| l.ends_with(" hammer")).unwrap();
    let cells: Vec<&str> = hammer.split_whitespace().collect();
    assert!(cells.contains(&"5000"), "{hammer}\n{rep}");
    assert_eq!(cells[cells.len() - 2], sh.to_string(), "hammer's parent is the shell\n{rep}");
}

#[test]
fn a_lone_process_writes_a_plain_profile_that_old_readers_read() {
    let s = Scratch::new("lone");
    let exe = s.compile("hammer");
    let ran = run_metered(&s, "l.lmp", &[], &exe, &["2", "100"]);
    ran.expect_code(0);
    // A run of one is a single-process profile file, as before run files existed.
    let p = lockmeter_format::read_profile_file(&s.path("l.lmp"))
        .unwrap_or_else(|e| panic!("{e}\n{ran}"));
    assert_eq!(p.records.iter().map(|r| r.stats.acquisitions).sum::<u64>(), 200, "{ran}");
    Profile::load(&s.path("l.lmp"), &ran).expect_lock("big_lock", "mutex", 200);
}

#[test]
fn a_process_that_outlives_the_program_is_named_as_not_collected() {
    // The script leaves a background subshell running (a daemon) and exits: `run` writes the
    // file without it and says which process was not collected and where it will write.
    let s = Scratch::new("daemon");
    let exe = s.compile("hammer");
    let wrap = script(
        &s,
        "wrap.sh",
        &format!(
            "#!/bin/sh\n{e} 1 300\n(sleep 2; {e} 1 10) &\necho \"bg $!\"\n",
            e = exe.display()
        ),
    );
    let tmp = s.path("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let out = s.path("d.lmp");
    let mut cmd = lockmeter_cmd(&s.dir);
    cmd.env("TMPDIR", &tmp).args([
        "run",
        "-o",
        out.to_str().unwrap(),
        "--",
        wrap.to_str().unwrap(),
    ]);
    let ran = finish("lockmeter run (daemon)".into(), spawn(&mut cmd), b"", RUN_LIMIT);
    ran.expect_code(0);
    let bg = printed_pid(&ran, "bg ");
    let line = ran
        .stderr
        .lines()
        .find(|l| l.starts_with("lockmeter: not collected: "))
        .unwrap_or_else(|| panic!("no not-collected line\n{ran}"));
    assert!(line.contains(&format!("[{bg}]")), "{line}\n{ran}");
    assert!(line.contains(tmp.to_str().unwrap()), "{line}\n{ran}");
    Profile::load(&out, &ran).expect_lock("big_lock", "mutex", 300);
}

/// strace, or `None` with the reason printed (`.ci/install.sh` installs it).
fn strace() -> Option<std::path::PathBuf> {
    match which("strace") {
        Ok(p) => Some(p),
        Err(()) => {
            eprintln!("skipped: strace is not installed (.ci/install.sh installs it)");
            None
        }
    }
}

/// Time limit of the strace runs: they hung forever before (strace waited for its own guardian).
const STRACE_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

#[test]
fn a_metered_strace_f_ends_and_its_tracee_profile_is_exact() {
    // strace -f waits for any child (`__WALL`) until none is left: it used to wait forever for
    // its own guardian and watcher, which wait for it to end.
    let Some(strace) = strace() else { return };
    let s = Scratch::new("strace-in");
    let exe = s.compile("hammer");
    let out = s.path("p.lmp");
    let args = ["run", "-o", out.to_str().unwrap(), "--", strace.to_str().unwrap(), "-f"];
    let rest = ["-o", "/dev/null", exe.to_str().unwrap(), "3", "2000"];
    let all: Vec<&str> = args.iter().chain(rest.iter()).copied().collect();
    let ran = lockmeter_with(&s.dir, &all, b"", STRACE_LIMIT);
    ran.expect_code(0);
    assert!(ran.stdout.contains("ok 6000"), "{ran}");
    let p = Profile::load(&out, &ran);
    p.expect_lock("big_lock", "mutex", 6000);
}

#[test]
fn lockmeter_under_strace_f_ends_and_its_profile_is_exact() {
    let Some(strace) = strace() else { return };
    let s = Scratch::new("strace-out");
    let exe = s.compile("hammer");
    let out = s.path("p.lmp");
    let mut cmd = std::process::Command::new(&strace);
    cmd.args(["-f", "-o", "/dev/null"])
        .arg(lockmeter_bin())
        .args(["run", "-q", "-o", out.to_str().unwrap(), "--", exe.to_str().unwrap(), "3", "2000"])
        .current_dir(&s.dir)
        .env("LOCKMETER_PRELOAD", preload())
        .env_remove("LD_PRELOAD");
    let ran = finish("strace -f lockmeter run hammer".into(), spawn(&mut cmd), b"", STRACE_LIMIT);
    ran.expect_code(0);
    assert!(ran.stdout.contains("ok 6000"), "{ran}");
    let p = Profile::load(&out, &ran);
    p.expect_lock("big_lock", "mutex", 6000);
}

/// A child made without fork's handlers (`_Fork`, a raw `clone`) shares the collector's tables
/// with its parent until it could have its own; it is not metered (its hooks pass through, and it
/// writes no profile): the parent's profile holds the parent's acquisitions only.
fn underfork(mode: &str) {
    let s = Scratch::new(&format!("underfork{mode}"));
    let exe = s.compile("underfork");
    let ran = run_metered(&s, "p.lmp", &[], &exe, &[mode, "1000", "100"]);
    ran.expect_code(0);
    let w: Vec<&str> = ran.stdout.split_whitespace().collect();
    assert_eq!(w.len(), 4, "{ran}");
    let (parent, child): (u64, u64) = (w[1].parse().unwrap(), w[3].parse().unwrap());
    assert_eq!((parent, child), (1000, 100), "{ran}");
    assert_eq!(s.files_with_prefix("p.lmp").len(), 1, "{ran}");
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();
    p.expect_lock("fork_lock", "mutex", parent);
}

#[test]
fn a_fork_child_without_fork_handlers_is_not_counted_in_its_parent() {
    underfork("_fork");
}

#[test]
fn a_raw_clone_child_is_not_counted_in_its_parent() {
    underfork("clone");
}

/// Each image's cost of starting and ending is measured into its profile (OVERHEAD's `start_ns`
/// and `end_ns`), and an exec'd image takes the calibration of the image before it
/// (`LOCKMETER_CALIBRATION`, here set by the test to figures no measurement gives) instead of
/// measuring again.
#[test]
fn an_exec_passes_the_calibration_on_and_each_image_counts_its_start_and_end() {
    let s = Scratch::new("exec-calib");
    let exe = s.compile("execer");
    let out = s.path("c.lmp");
    let mut cmd = lockmeter_cmd(&s.dir);
    cmd.args(["run", "-q", "-o", out.to_str().unwrap(), "--"]);
    cmd.arg(&exe)
        .args(["10", "5", "execv"])
        .env("LOCKMETER_CALIBRATION", "7:0:3000:4000:5000:6000");
    let ran = finish(format!("{cmd:?}"), spawn(&mut cmd), b"", RUN_LIMIT);
    ran.expect_code(0);
    let run = lockmeter_format::read_run_file(&out)
        .unwrap_or_else(|e| panic!("the run file does not read: {e}\n{ran}"));
    assert_eq!(run.processes.len(), 2, "{ran}");
    for p in &run.processes {
        let (o, seq) = (&p.overhead, p.header.image_seq);
        assert_eq!(o.ns_per_pair, 7, "image {seq}: the calibration passed on\n{ran}");
        assert!(o.start_ns > 0, "image {seq}: start not measured\n{ran}");
        assert!(o.end_ns > 0, "image {seq}: end not measured\n{ran}");
    }

    // Measured by the first image, taken by the second.
    let ran = run_metered(&s, "m.lmp", &[], &exe, &["10", "5", "execv"]);
    ran.expect_code(0);
    let run = lockmeter_format::read_run_file(&s.path("m.lmp"))
        .unwrap_or_else(|e| panic!("the run file does not read: {e}\n{ran}"));
    assert_eq!(run.processes.len(), 2, "{ran}");
    let (a, b) = (&run.processes[0].overhead, &run.processes[1].overhead);
    assert_eq!((a.ns_per_pair, a.ns_per_stack), (b.ns_per_pair, b.ns_per_stack), "{ran}");
}

/// A fork child takes its copy of the collector's tables at its first lock: one whose parent's
/// image ended meanwhile (an exec), and the grandchild it forked before any lock, each count
/// exactly their own acquisitions, and the parent's images theirs.
#[test]
fn fork_children_whose_first_lock_comes_late_get_their_own_exact_profiles() {
    let s = Scratch::new("latefork");
    let exe = s.compile("latefork");
    let ran = run_metered(&s, "l.lmp", &[], &exe, &[]);
    ran.expect_code(0);
    let (c, g) = (printed_pid(&ran, "child "), printed_pid(&ran, "grandchild "));
    let files = split_run(&s, "l.lmp", &ran);
    assert_eq!(files.len(), 4, "{ran}");
    let first = Profile::load(&s.path("img/l.lmp"), &ran);
    let ppid = u(first.header(), "pid");
    first.expect_lock("p1_lock", "mutex", 100);
    first.eq("first image totals", first.totals("acquisitions"), 100);
    let second = Profile::load(&s.path(&format!("img/l.lmp.{ppid}.1")), &ran);
    second.expect_lock("p2_lock", "mutex", 50);
    second.eq("second image totals", second.totals("acquisitions"), 50);
    let child = Profile::load(&s.path(&format!("img/l.lmp.{c}")), &ran);
    child.check_consistency();
    child.expect_end("exit", None);
    child.eq("child ppid", u(child.header(), "ppid"), ppid);
    child.expect_lock("c_lock", "mutex", 20);
    child.eq("child totals", child.totals("acquisitions"), 20);
    let grand = Profile::load(&s.path(&format!("img/l.lmp.{g}")), &ran);
    grand.check_consistency();
    grand.eq("grandchild ppid", u(grand.header(), "ppid"), c);
    grand.expect_lock("g_lock", "mutex", 30);
    grand.eq("grandchild totals", grand.totals("acquisitions"), 30);
}

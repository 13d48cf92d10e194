//! Runs under a launcher (a shim, `sh -c 'exec ...'`, a wrapper script) summarized as the program
//! that took the locks; profiles known from the manifest; a process that outlives the program.

use crate::common::*;

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
    let pid = ran.printed("shim ");
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
    let (big, small) = (ran.printed("big "), ran.printed("small "));
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
    let child = ran.printed("child ");
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
    let sh = ran.printed("wrapper ");
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
    let bg = ran.printed("bg ");
    let line = ran
        .stderr
        .lines()
        .find(|l| l.starts_with("lockmeter: not collected: "))
        .unwrap_or_else(|| panic!("no not-collected line\n{ran}"));
    assert!(line.contains(&format!("[{bg}]")), "{line}\n{ran}");
    assert!(line.contains(tmp.to_str().unwrap()), "{line}\n{ran}");
    Profile::load(&out, &ran).expect_lock("big_lock", "mutex", 300);
}

//! Children made by fork, posix_spawn and vfork, images started by exec: one exact profile
//! each; children made without fork's handlers are not metered; an exec passes the calibration on.

use crate::common::*;

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
    let (c1, c2) = (ran.printed("child1 "), ran.printed("child2 "));

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

/// A fork child whose first locks come from several threads at once (it takes none before it
/// starts them): every one of their acquisitions is in its profile, none in its parent's.
#[test]
fn a_fork_childs_threads_racing_to_their_first_lock_are_all_counted() {
    let s = Scratch::new("forkthreads");
    let exe = s.compile("forkthreads");
    for round in 0..3 {
        let out = format!("t{round}.lmp");
        let ran = run_metered(&s, &out, &[], &exe, &["8", "1000"]);
        ran.expect_code(0);
        let (child, expected) = (ran.printed("child "), ran.printed("race_lock "));
        assert_eq!(split_run(&s, &out, &ran).len(), 2, "{ran}");
        let parent = Profile::load(&s.path(&format!("img/{out}")), &ran);
        parent.expect_lock("parent_lock", "mutex", 10);
        parent.eq("parent: race_lock", parent.acq("race_lock"), 0);
        let c = Profile::load(&s.path(&format!("img/{out}.{child}")), &ran);
        c.check_consistency();
        c.expect_nothing_dropped();
        c.expect_lock("race_lock", "mutex", expected);
        c.eq("child totals", c.totals("acquisitions"), expected);
        c.eq("child threads", c.threads().len(), 8);
    }
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
    let (c, g) = (ran.printed("child "), ran.printed("grandchild "));
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

/// `fork` leaves errno as it was in the child too: the collector's fork handler (the control
/// socket and thread, the tables' copy) makes system calls that must not show through, whether
/// the child starts in the handler (a parent with a timer: `--duration`) or at its first lock.
#[test]
fn fork_leaves_errno_as_it_was_in_the_child() {
    let s = Scratch::new("forkerrno");
    let exe = s.compile("forkerrno");
    for (i, opts) in [&[][..], &["--duration", "1h"][..]].into_iter().enumerate() {
        let ran = run_metered(&s, &format!("e{i}.lmp"), opts, &exe, &[]);
        ran.expect_code(0);
        assert_eq!(ran.printed("parent_errno "), 4321, "{ran}");
        assert_eq!(ran.printed("child_errno "), 4321, "{ran}");
    }
}

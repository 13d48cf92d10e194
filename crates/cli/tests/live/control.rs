//! Run-time control: `lockmeter ctl PID snapshot | pause | resume | reset | status` against the
//! program's own counts, `run --delay`, `--duration`, `--control 0`, a process that is not metered,
//! a program that closes the control socket, memcached under load answering a snapshot, the
//! socket of a process killed with its guardian removed by the next `run` (live ones kept), and a
//! socket named only once it listens (strace holding back its `listen`).

use super::{Phased, count, ctl, snapshot};
use crate::common::*;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

#[test]
fn snapshot_pause_resume_reset_are_exact() {
    let s = Scratch::new("ctl");
    let mut p = Phased::start(&s, &[]);

    // Phase 1, then a snapshot: exactly the program's count, and the program keeps running.
    let l1 = p.phase();
    let s1 = snapshot(&s, p.pid, "s1.lmp");
    s1.expect_lock("live.a", "mutex", count(&l1, "live.a"));
    s1.eq("s1: totals.acquisitions", s1.totals("acquisitions"), count(&l1, "live.a"));

    // Phase 2 paused: adds nothing.
    let st = ctl(&s.dir, p.pid, &["pause"]);
    st.expect_code(0);
    let status = ctl(&s.dir, p.pid, &["status"]);
    assert_eq!(status.expect_code(0).stdout.trim(), "paused", "{status}");
    let l2 = p.phase();
    assert!(count(&l2, "live.b") > 0);
    let s2 = snapshot(&s, p.pid, "s2.lmp");
    s2.expect_lock("live.a", "mutex", count(&l1, "live.a"));
    s2.eq("s2: live.b while paused", s2.acq("live.b"), 0);
    s2.eq("s2: totals.acquisitions", s2.totals("acquisitions"), count(&l1, "live.a"));

    // Resume and reset: phase 3 starts from zero; repeated snapshots agree.
    ctl(&s.dir, p.pid, &["resume"]).expect_code(0);
    let status = ctl(&s.dir, p.pid, &["status"]);
    assert_eq!(status.expect_code(0).stdout.trim(), "metering", "{status}");
    ctl(&s.dir, p.pid, &["reset"]).expect_code(0);
    let s3a = snapshot(&s, p.pid, "s3a.lmp");
    s3a.eq("right after the reset: totals.acquisitions", s3a.totals("acquisitions"), 0);
    let l3 = p.phase();
    let s3 = snapshot(&s, p.pid, "s3.lmp");
    s3.expect_lock("live.a", "mutex", count(&l3, "live.a"));
    s3.eq("s3: totals.acquisitions", s3.totals("acquisitions"), count(&l3, "live.a"));

    // Phase 4, contended, and the final profile: everything since the reset, exactly.
    let l4 = p.phase();
    let f = p.finish();
    f.expect_end("exit", None);
    f.check_consistency();
    f.expect_lock("live.a", "mutex", count(&l3, "live.a"));
    f.expect_lock("live.c", "mutex", count(&l4, "live.c"));
    let d = f.expect_lock("live.d", "mutex", count(&l4, "live.d"));
    f.eq("live.d contended", u(d, "contended"), count(&l4, "contended"));
    f.eq("live.b (only taken while paused)", f.acq("live.b"), 0);
    f.eq(
        "final totals.acquisitions",
        f.totals("acquisitions"),
        count(&l3, "live.a") + count(&l4, "live.c") + count(&l4, "live.d"),
    );
    // The socket is gone with the process.
    let gone = ctl(&s.dir, p_pid_of(&f), &["status"]);
    assert_ne!(gone.status.code(), Some(0), "{gone}");
}

#[test]
fn locks_destroyed_after_a_reset_join_their_class_without_what_came_before() {
    // reset_classes.c: heap mutexes initialized at one site and taken before the reset; after it,
    // taken again and destroyed, initialized again at the same addresses (the thread's record is
    // reused: its counts fold into the class while the program runs) and destroyed once more
    // (folded when the profile is written). The class holds exactly what came after the reset.
    let s = Scratch::new("reset-classes");
    let mut p = Phased::start_program(&s, "reset_classes", &["50"], &[]);
    let l1 = p.phase();
    assert_eq!(count(&l1, "class"), 150, "{l1}");
    ctl(&s.dir, p.pid, &["reset"]).expect_code(0);
    let l2 = p.phase();
    let class_acq = count(&l2, "class");
    let keep_acq = count(&l2, "reset.keep");
    let check = |f: &Profile, what: &str| {
        f.check_consistency();
        f.expect_lock("reset.keep", "mutex", keep_acq);
        let classes: Vec<&serde_json::Value> =
            f.locks().iter().filter(|l| sf(l, "name_source") == Some("class")).collect();
        f.eq(format!("{what}: class rows"), classes.len(), 1);
        f.check(
            sf(classes[0], "name").is_some_and(|n| n.contains("heap locks initialized at make")),
            format!("{what}: the class of make: {:?}", sf(classes[0], "name")),
        );
        f.eq(format!("{what}: class acquisitions"), u(classes[0], "acquisitions"), class_acq);
        f.eq(format!("{what}: class holds timed"), u(classes[0], "holds_timed"), class_acq);
        f.eq(
            format!("{what}: totals.acquisitions"),
            f.totals("acquisitions"),
            class_acq + keep_acq,
        );
    };
    check(&snapshot(&s, p.pid, "after.lmp"), "snapshot");
    let f = p.finish();
    f.expect_end("exit", None);
    check(&f, "final");
}

fn p_pid_of(p: &Profile) -> u32 {
    u(p.header(), "pid") as u32
}

#[test]
fn delay_starts_paused_until_resumed() {
    let s = Scratch::new("delay");
    let mut p = Phased::start(&s, &["--delay", "1h"]);
    let status = ctl(&s.dir, p.pid, &["status"]);
    assert_eq!(status.expect_code(0).stdout.trim(), "paused", "{status}");
    let _l1 = p.phase();
    ctl(&s.dir, p.pid, &["resume"]).expect_code(0);
    let l2 = p.phase();
    let f = p.finish();
    f.check_consistency();
    f.expect_lock("live.a", "mutex", count(&l2, "live.a"));
    f.expect_lock("live.b", "mutex", count(&l2, "live.b"));
    f.eq("totals", f.totals("acquisitions"), count(&l2, "live.a") + count(&l2, "live.b"));
}

#[test]
fn duration_stops_metering_and_the_program_runs_on() {
    let s = Scratch::new("duration");
    let mut p = Phased::start(&s, &["--duration", "1ms"]);
    // Wait (without a time condition on the result) until the collector has paused itself.
    let mut paused = false;
    for _ in 0..200 {
        let st = ctl(&s.dir, p.pid, &["status"]);
        if st.expect_code(0).stdout.trim() == "paused" {
            paused = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(paused, "--duration 1ms never paused metering");
    let l1 = p.phase();
    let l2 = p.phase();
    assert!(count(&l1, "live.a") > 0 && count(&l2, "live.b") > 0);
    let f = p.finish();
    f.eq("acquisitions after --duration", f.totals("acquisitions"), 0);
}

#[test]
fn control_off_serves_no_socket_and_metering_goes_on() {
    let s = Scratch::new("control-off");
    let mut p = Phased::start(&s, &["--control", "0"]);
    // No control thread and no socket (with control on, `ctl status` answers at this point:
    // see delay_starts_paused_until_resumed).
    assert!(!has_thread(p.pid, "lockmeter-ctl"), "a control thread runs with --control 0");
    let st = ctl(&s.dir, p.pid, &["status"]);
    assert_eq!(st.status.code(), Some(2), "{st}");
    let l1 = p.phase();
    let f = p.finish();
    f.check_consistency();
    f.expect_lock("live.a", "mutex", count(&l1, "live.a"));
    f.eq("totals", f.totals("acquisitions"), count(&l1, "live.a"));
}

#[test]
fn ctl_on_a_process_that_is_not_metered_says_so() {
    let s = Scratch::new("notmetered");
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    let ran = ctl(&s.dir, sleeper.id(), &["snapshot"]);
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert_eq!(ran.status.code(), Some(2), "{ran}");
    assert_eq!(ran.stderr.lines().count(), 1, "{ran}");
    assert!(ran.stderr.contains("is not metered by lockmeter"), "{ran}");
    assert!(s.files_with_prefix("lockmeter-").is_empty(), "a file was written: {ran}");

    let ran = ctl(&s.dir, 999_999_999, &["pause"]);
    assert_eq!(ran.status.code(), Some(2), "{ran}");
    assert!(ran.stderr.contains("there is no process 999999999"), "{ran}");
}

/// Whether process `pid` has a thread named `name`.
fn has_thread(pid: u32, name: &str) -> bool {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == name))
}

#[test]
fn a_program_that_closes_every_descriptor_loses_control_not_its_files() {
    let s = Scratch::new("closer");
    let include = workspace().join("include");
    let exe = s.compile_with("closer", "closer", &["-I", include.to_str().unwrap()]);
    let out = s.path("closer.lmp");
    let mut cmd = lockmeter_cmd(&s.dir);
    cmd.args(["run", "-q", "-o", out.to_str().unwrap(), "--"]).arg(&exe);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
    let mut child = cmd.spawn().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let pid: u32 = line
        .trim()
        .strip_prefix("ready ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("closer printed {line:?}"));
    // Control is gone (the first request may still reach the old socket and get no answer);
    // the control thread ends instead of serving the program's descriptors.
    for _ in 0..2 {
        let ran = ctl(&s.dir, pid, &["status"]);
        assert_eq!(ran.status.code(), Some(2), "{ran}");
    }
    let mut gone = false;
    for _ in 0..200 {
        if !has_thread(pid, "lockmeter-ctl") {
            gone = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(gone, "the control thread still runs");
    let ran = ctl(&s.dir, pid, &["status"]);
    assert!(ran.stderr.contains("has no control socket"), "{ran}");
    // Metering goes on, and the profile is written at exit.
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"end\n").unwrap();
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let ran = Ran {
        what: "lockmeter run closer".into(),
        status: std::process::ExitStatus::default(),
        stdout: String::new(),
        stderr: String::new(),
        elapsed: Default::default(),
    };
    let p = Profile::load(&out, &ran);
    p.expect_lock("closer.lock", "mutex", 10);
}

/// The first child of process `pid` named `comm` (`/proc/PID/task/*/children`).
fn child_named(pid: u32, comm: &str) -> Option<u32> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace().filter_map(|x| x.parse::<u32>().ok()).collect::<Vec<_>>()
        })
        .find(|c| {
            std::fs::read_to_string(format!("/proc/{c}/comm")).is_ok_and(|n| n.trim() == comm)
        })
}

/// A server under load: `ctl snapshot` of memcached while memcaslap drives it answers (the time
/// it took is printed: a timing is never a pass/fail condition), the snapshot has memcached's
/// locks, and memcached keeps serving: memcaslap misses no get, and a set/get round trip after
/// the snapshot works.
#[test]
fn memcached_under_load_answers_a_snapshot_and_keeps_serving() {
    use std::time::{Duration, Instant};
    let s = Scratch::new("live-memcached");
    let port = (24000 + std::process::id() % 20000) as u16;
    let out = s.path("mc.lmp");
    let Some(mut server) = Memcached::start(&s, &out, &[], port) else { return };
    let addr = server.addr.clone();
    let mc =
        child_named(server.child.id(), "memcached").expect("memcached's pid under lockmeter run");
    let load = Command::new("memcaslap")
        .args(["-s", &addr, "-t", "4s", "-T", "2", "-c", "16"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run memcaslap");
    std::thread::sleep(Duration::from_millis(1500));
    let path = s.path("snap.lmp");
    let t0 = Instant::now();
    let ran = ctl(&s.dir, mc, &["snapshot", "-o", path.to_str().unwrap()]);
    eprintln!("ctl snapshot of memcached under load answered in {:?}", t0.elapsed());
    ran.expect_code(0);
    let snap = Profile::load(&path, &ran);
    snap.expect_end("snapshot", None);
    snap.check_consistency();
    snap.check(
        snap.totals("acquisitions") > 0 && snap.locks().len() >= 2,
        "the snapshot has memcached's locks",
    );
    let load = load.wait_with_output().expect("memcaslap");
    let load_out = String::from_utf8_lossy(&load.stdout).into_owned();
    assert!(load.status.success(), "memcaslap failed:\n{load_out}");
    let misses = load_out
        .lines()
        .find_map(|l| l.trim().strip_prefix("get_misses: "))
        .and_then(|v| v.trim().parse::<u64>().ok());
    assert_eq!(misses, Some(0), "memcaslap's get misses:\n{load_out}");
    let lines = server.set_get("livekey");
    assert_eq!(lines, ["STORED\r\n", "VALUE livekey 0 5\r\n", "hello\r\n", "END\r\n"]);
    let ran = server.shutdown("memcached under lockmeter run".into());
    let p = Profile::load(&out, &ran);
    p.check_consistency();
    // Everything the snapshot counted is in the final profile, and more.
    p.check(
        p.totals("acquisitions") > snap.totals("acquisitions"),
        "the final profile counts past the snapshot",
    );
}

/// A fork child whose tables' copy waits for its first lock binds its socket then: before it,
/// `ctl` says so (its control thread waits); after, status and snapshots are its own, exact.
#[test]
fn a_fork_child_binds_its_socket_at_its_first_lock_and_answers_with_its_own_counts() {
    let s = Scratch::new("ctl-forkchild");
    let mut p = Phased::start_program(&s, "forkphases", &[], &[]);
    let st = ctl(&s.dir, p.pid, &["status"]);
    assert_eq!(st.status.code(), Some(2), "{st}");
    assert_eq!(st.stderr.lines().count(), 1, "{st}");
    assert!(st.stderr.contains("a fork child binds its socket at its first lock"), "{st}");
    let l1 = p.phase();
    // The child's control thread binds the socket once its first lock copied the tables.
    let mut status = ctl(&s.dir, p.pid, &["status"]);
    for _ in 0..100 {
        if status.status.code() == Some(0) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        status = ctl(&s.dir, p.pid, &["status"]);
    }
    assert_eq!(status.expect_code(0).stdout.trim(), "metering", "{status}");
    let s1 = snapshot(&s, p.pid, "s1.lmp");
    s1.expect_lock("fp.child", "mutex", count(&l1, "fp.child"));
    s1.eq("s1: fp.parent", s1.acq("fp.parent"), 0);
    s1.eq("s1: totals", s1.totals("acquisitions"), count(&l1, "fp.child"));
    let l2 = p.phase();
    let s2 = snapshot(&s, p.pid, "s2.lmp");
    s2.expect_lock("fp.child", "mutex", count(&l2, "fp.child"));
    s2.eq("s2: totals", s2.totals("acquisitions"), count(&l2, "fp.child"));
    drop(p.stdin.take());
    assert!(p.child.wait().unwrap().success());
}

/// A shell loop of fork+exec children that take no lock, a subshell that exits and a last
/// command: no process of the run leaves a control socket behind (each image binds its own,
/// unlinked at its end; a fork child binds none before its first lock), nor its temporary name.
#[test]
fn a_runs_processes_leave_no_control_socket_behind() {
    let s = Scratch::new("ctl-nosock");
    let out = s.path("n.lmp");
    let script = "for i in $(seq 50); do /bin/true & echo $!; wait; done; \
                  (echo $BASHPID; exit 0); ls >/dev/null & echo $!; wait; echo $$";
    let mut cmd = lockmeter_cmd(&s.dir);
    cmd.args(["run", "-q", "-o", out.to_str().unwrap(), "--", "bash", "-c", script]);
    let ran = finish(format!("{cmd:?}"), spawn(&mut cmd), b"", RUN_LIMIT);
    ran.expect_code(0);
    let pids: Vec<u32> = ran.stdout.lines().filter_map(|l| l.trim().parse().ok()).collect();
    assert_eq!(pids.len(), 53, "{ran}");
    // SAFETY: geteuid has no preconditions.
    let dir = format!("/tmp/lockmeter-{}", unsafe { libc::geteuid() });
    let left: Vec<u32> = pids
        .into_iter()
        .filter(|p| {
            // Nor the temporary name a socket is bound under before it listens.
            let exists =
                |suffix: &str| std::path::Path::new(&format!("{dir}/{p}{suffix}")).exists();
            exists(".sock") || exists(".sock.new")
        })
        // A process of another test that took the pid since serves its own socket there.
        .filter(|p| !std::path::Path::new(&format!("/proc/{p}")).exists())
        .collect();
    assert!(left.is_empty(), "sockets left behind by {left:?}\n{ran}");
}

/// The descendants of process `pid` (`/proc/PID/task/*/children`, recursively).
fn descendants(pid: u32) -> Vec<u32> {
    let children = |p: u32| -> Vec<u32> {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{p}/task")) else { return Vec::new() };
        tasks
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
            .flat_map(|c| c.split_whitespace().filter_map(|x| x.parse().ok()).collect::<Vec<_>>())
            .collect()
    };
    let (mut todo, mut found) = (children(pid), Vec::new());
    while let Some(c) = todo.pop() {
        todo.extend(children(c));
        found.push(c);
    }
    found
}

/// A metered process killed by SIGKILL with its guardian and watcher (so no handler of ours and
/// no guardian runs: as when a whole process group is killed) cannot remove its control socket;
/// the next `lockmeter run` removes it, while the socket of a metered process running beside it
/// stays and answers, and that process's counts are whole.
#[test]
fn run_removes_the_socket_of_a_killed_process_and_keeps_live_ones() {
    use std::os::unix::fs::FileTypeExt;
    let s = Scratch::new("ctl-stale");
    // SAFETY: geteuid has no preconditions.
    let sock = |pid: u32| format!("/tmp/lockmeter-{}/{pid}.sock", unsafe { libc::geteuid() });
    let is_socket =
        |pid: u32| std::fs::symlink_metadata(sock(pid)).is_ok_and(|m| m.file_type().is_socket());
    let s_dead = Scratch::new("ctl-stale-killed");
    let mut live = Phased::start(&s, &[]);
    let mut dead = Phased::start(&s_dead, &[]);
    let l_dead = dead.phase();
    assert!(count(&l_dead, "live.a") > 0, "{l_dead}");
    assert!(is_socket(live.pid) && is_socket(dead.pid), "no control sockets to begin with");

    // The guardian (started at the first lock) and the watcher would remove the socket as they
    // write the profile: they go first, then the program.
    // Both are children of the program (phases.c starts no other), cloned at its first lock;
    // each names itself just after.
    let helpers = descendants(dead.pid);
    assert!(!helpers.is_empty(), "process {} has no guardian", dead.pid);
    let named = |p: &u32| {
        std::fs::read_to_string(format!("/proc/{p}/comm"))
            .is_ok_and(|n| n.trim() == "lockmeter-guard")
    };
    let start = std::time::Instant::now();
    while !helpers.iter().all(named) {
        assert!(
            start.elapsed() < RUN_LIMIT,
            "children of {} not all guardians: {helpers:?}",
            dead.pid
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    for pid in helpers.iter().chain([&dead.pid]) {
        // SAFETY: kill(2) on the program or its guardian and watcher, descendants of our child.
        assert_eq!(unsafe { libc::kill(*pid as i32, libc::SIGKILL) }, 0);
    }
    // The socket is looked at as soon as the program is dead (a concurrent test's `run` may
    // clean it up later): a zombie, or gone.
    let stat = format!("/proc/{}/stat", dead.pid);
    let dead_now = || {
        std::fs::read_to_string(&stat).map_or(true, |st| {
            st.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
    };
    while !dead_now() {
        assert!(start.elapsed() < RUN_LIMIT, "process {} did not die of SIGKILL", dead.pid);
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(is_socket(dead.pid), "SIGKILL left no socket: {} is missing", sock(dead.pid));
    drop(dead.stdin.take());
    while dead.child.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < RUN_LIMIT, "lockmeter run of the killed program does not end");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }

    let out = s.path("other.lmp");
    lockmeter(&s.dir, &["run", "-q", "-o", out.to_str().unwrap(), "--", "true"]).expect_code(0);
    assert!(!is_socket(dead.pid), "the killed process's socket is still there: {}", sock(dead.pid));
    assert!(is_socket(live.pid), "the live process's socket was removed");
    let status = ctl(&s.dir, live.pid, &["status"]);
    assert_eq!(status.expect_code(0).stdout.trim(), "metering", "{status}");
    let l1 = live.phase();
    let f = live.finish();
    f.expect_lock("live.a", "mutex", count(&l1, "live.a"));
    f.eq("final totals.acquisitions", f.totals("acquisitions"), count(&l1, "live.a"));
}

/// A control socket gets its name only once it listens, so a `PID.sock` that refuses a
/// connection is never a live process's (what `run`'s cleanup relies on): with the collector's
/// `listen` held back 1.5 s by strace's fault injection, the bound socket waits as
/// `PID.sock.new` and `PID.sock`, once there, accepts a connection.
#[test]
fn a_control_socket_gets_its_name_only_once_it_listens() {
    let Ok(strace) = which("strace") else {
        eprintln!("skipped: strace is not installed (.ci/install.sh installs it)");
        return;
    };
    let s = Scratch::new("ctl-listen");
    let mut cmd = Command::new(&strace);
    cmd.args(["-f", "-qq", "-o", "/dev/null", "-e", "trace=listen"])
        .args(["-e", "inject=listen:delay_enter=1500000", "env"])
        .arg(format!("LD_PRELOAD={}", preload().display()))
        .args(["sleep", "2"])
        .current_dir(&s.dir);
    let child = spawn(&mut cmd);
    // SAFETY: geteuid has no preconditions.
    let dir = format!("/tmp/lockmeter-{}", unsafe { libc::geteuid() });
    let start = std::time::Instant::now();
    let in_time = || start.elapsed() < RUN_LIMIT;
    let pid = loop {
        // strace's child: `env`, then `sleep` (one pid; both images are metered). strace forks
        // children of its own first, to probe ptrace.
        let comm = |p: &&u32| {
            std::fs::read_to_string(format!("/proc/{p}/comm"))
                .is_ok_and(|c| c.trim() == "env" || c.trim() == "sleep")
        };
        if let Some(&p) = descendants(child.id()).iter().find(comm) {
            break p;
        }
        assert!(in_time(), "strace started no program");
        std::thread::sleep(std::time::Duration::from_millis(1));
    };
    let (sock, new) = (format!("{dir}/{pid}.sock"), format!("{dir}/{pid}.sock.new"));
    let mut waited_as_new = false;
    loop {
        if std::path::Path::new(&sock).exists() {
            let c = std::os::unix::net::UnixStream::connect(&sock);
            assert!(c.is_ok(), "{sock} of a live process refuses a connection: {c:?}");
            break;
        }
        waited_as_new |= std::path::Path::new(&new).exists();
        assert!(in_time(), "{sock} never appeared");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert!(waited_as_new, "{new} was never seen while listen was held back");
    finish(format!("{cmd:?}"), child, b"", RUN_LIMIT).expect_code(0);
    assert!(!std::path::Path::new(&new).exists(), "{new} left behind");
}

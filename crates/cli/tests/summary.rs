//! End-to-end tests of the summary `lockmeter run` prints at exit: the lock table (WAIT-TOTAL
//! first, counts equal to the program's), the line per top lock naming the site that waited and
//! the site that held the lock meanwhile with file:line, the `next:` line, and a run without
//! contention sorted by acquisitions.
//!
//! Ground-truth program (`tests/programs/`): holders.c, which prints the file:line of each of
//! its lock calls and each lock's acquisitions.
//!
//! Needs gcc. Run with `cargo test -p lockmeter --test summary`.

mod common;

use common::*;
use std::collections::HashMap;

/// The program's own account: `site FUNCTION FILE:LINE` and `lock NAME N` lines.
struct Truth {
    sites: HashMap<String, String>,
    acquisitions: HashMap<String, u64>,
}

fn truth(stdout: &str) -> Truth {
    let mut t = Truth { sites: HashMap::new(), acquisitions: HashMap::new() };
    for l in stdout.lines() {
        let w: Vec<&str> = l.split_whitespace().collect();
        match w.as_slice() {
            ["site", f, loc] => {
                t.sites.insert((*f).to_owned(), (*loc).to_owned());
            }
            ["lock", name, n] => {
                t.acquisitions.insert((*name).to_owned(), n.parse().expect("a count"));
            }
            _ => {}
        }
    }
    t
}

/// Runs `holders MODE ROUNDS` under `lockmeter run` (summary on) into `p.lmp`.
fn run_holders(s: &Scratch, mode: &str) -> (Ran, Truth) {
    let exe = s.compile("holders");
    let out = s.path("p.lmp");
    let ran = lockmeter(
        &s.dir,
        &["run", "-o", out.to_str().unwrap(), "--", exe.to_str().unwrap(), mode, "40"],
    );
    ran.expect_code(0);
    let t = truth(&ran.stdout);
    (ran, t)
}

/// The rows of the summary's lock table: the heading line, then `NAME -> ACQUIRED` in the
/// table's order. Columns are read at the header's positions (right-aligned cells end where
/// their header ends; cells like `1.05 ms` contain a space).
fn lock_table(ran: &Ran) -> (String, Vec<String>, Vec<(String, u64)>) {
    let lines: Vec<&str> = ran.stderr.lines().collect();
    let h = lines
        .iter()
        .position(|l| l.trim_start().starts_with("WAIT-TOTAL"))
        .unwrap_or_else(|| panic!("no lock table starting with WAIT-TOTAL\n{ran}"));
    let head = lines[h];
    let columns: Vec<String> = head.split_whitespace().map(str::to_owned).collect();
    // Positions in characters: cells such as `278 µs` hold multi-byte characters.
    let at = |name: &str| head[..head.find(name).expect(name)].chars().count();
    let acq_end = at("ACQUIRED") + "ACQUIRED".len();
    let name_at = at("NAME/ADDRESS");
    let rows = lines[h + 1..]
        .iter()
        .take_while(|l| !l.is_empty())
        .map(|l| {
            let chars: Vec<char> = l.chars().collect();
            let acq: String = chars[..acq_end].iter().collect();
            let acq = acq.split_whitespace().last().expect("an ACQUIRED cell").to_owned();
            let name: String = chars[name_at..].iter().collect();
            (name.trim().to_owned(), acq.parse().unwrap_or_else(|_| panic!("a count: {l:?}")))
        })
        .collect();
    (lines[h - 1].to_owned(), columns, rows)
}

/// `function (file:line)` of a JSON pair's frame.
fn site(frame: &serde_json::Value) -> String {
    let file = sf(frame, "file").expect("a file").rsplit('/').next().unwrap().to_owned();
    format!("{} ({file}:{})", sf(frame, "function").expect("a function"), u(frame, "line"))
}

#[test]
fn the_summary_names_who_waited_and_who_held_with_file_and_line() {
    let s = Scratch::new("summary");
    let (ran, t) = run_holders(&s, "contended");
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.check_consistency();

    // The lock table: wait first, and the counts are the program's.
    let (_, columns, rows) = lock_table(&ran);
    p.eq(
        "summary columns",
        columns.join(" "),
        "WAIT-TOTAL CONTENDED CON% ACQUIRED WAIT-MAX WAIT-AVG HOLD-TOTAL HOLD-MAX KIND NAME/ADDRESS"
            .to_owned(),
    );
    for (name, want) in &t.acquisitions {
        let got = rows.iter().find(|(n, _)| n == name).map(|(_, a)| *a);
        p.eq(format!("summary ACQUIRED of {name}"), got, Some(*want));
    }

    // One line per lock with wait, in the report's order (by total wait), naming the waiter
    // and the holder by the program's own file:line, with the pair's share of the lock's wait.
    let want_site = |f: &str| format!("{f} ({})", t.sites[f]);
    let expect_pair = [
        ("big_lock", want_site("reader_path"), want_site("slow_update")),
        ("log_lock", want_site("append_log"), want_site("flush_log")),
    ];
    let mut want = Vec::new();
    for l in p.locks() {
        let name = sf(l, "name").unwrap_or("");
        let Some((_, waiter, holder)) = expect_pair.iter().find(|(n, ..)| *n == name) else {
            continue;
        };
        let wait = u(l, "wait_ns_total");
        p.check(wait > 0, format!("{name} was never waited for"));
        let top = &l["pairs"][0];
        p.eq(format!("{name}: top waiter"), site(&top["waiter"]), waiter.clone());
        p.eq(format!("{name}: top holder"), site(&top["holder"]), holder.clone());
        let share = (u(top, "wait_ns") as f64 * 100.0 / wait as f64).min(100.0);
        let share = format!("{share:.1}%");
        want.push(format!(
            "  {waiter} waited on {name} held from {holder}: {share} of the lock's wait"
        ));
    }
    p.eq("locks with waits", want.len(), 2);
    let lines: Vec<&str> = ran.stderr.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("who waited on whom"))
        .unwrap_or_else(|| p.fail(format!("no 'who waited on whom' line\n{ran}")));
    p.eq(
        "who-waited heading",
        lines[at],
        "who waited on whom, for the top 2 locks by wait (the top waiting site, the site that held the lock meanwhile):",
    );
    p.eq(
        "who-waited lines",
        lines[at + 1..at + 3].to_vec(),
        want.iter().map(String::as_str).collect(),
    );

    // Then the commands to run next, on this profile.
    let file = s.path("p.lmp");
    let file = file.to_str().unwrap();
    let html = s.path("p.html");
    assert!(file.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./".contains(&b)), "{file}");
    let next = format!(
        "next: lockmeter report {file} --by pair | --stacks | --format html -o {}",
        html.display()
    );
    // After a blank line, the advice for the contended locks (a hypothesis and the compare
    // command that tests it, see report::advice), then the next commands.
    p.eq("after who-waited, a blank line", lines.get(at + 3).copied(), Some(""));
    let next_at = lines
        .iter()
        .position(|l| l.starts_with("next: "))
        .unwrap_or_else(|| p.fail(format!("no 'next:' line\n{ran}")));
    p.eq(
        "after a blank line, the next line",
        lines.get(next_at - 1..next_at + 1),
        Some(&["", next.as_str()][..]),
    );
    if next_at > at + 4 {
        p.eq(
            "the advice heading",
            lines[at + 4],
            "advice (hypotheses from these measurements; each command tests one):",
        );
        p.check(
            lines[at + 5..next_at - 1]
                .iter()
                .any(|l| l.starts_with("    lockmeter compare --locks pthread,")),
            format!("a compare command in the advice\n{ran}"),
        );
    }
    p.check(
        ran.stderr.lines().any(|l| {
            l.starts_with("wait: on average ")
                && l.contains(" of the 4 threads that took locks were waiting for one (")
        }),
        format!("headline in threads\n{ran}"),
    );
}

#[test]
fn without_contention_the_summary_says_so_and_sorts_by_acquisitions() {
    let s = Scratch::new("summary-alone");
    let (ran, t) = run_holders(&s, "alone");
    let p = Profile::load(&s.path("p.lmp"), &ran);
    p.eq("totals.contended", p.totals("contended"), 0);
    let (heading, _, rows) = lock_table(&ran);
    p.eq("heading", heading.as_str(), "no contention: sorted by acquisitions (2 locks):");
    p.eq(
        "rows by acquisitions",
        rows,
        vec![
            ("log_lock".to_owned(), t.acquisitions["log_lock"]),
            ("big_lock".to_owned(), t.acquisitions["big_lock"]),
        ],
    );
    p.eq("program's counts", (t.acquisitions["log_lock"], t.acquisitions["big_lock"]), (80, 40));
    p.check(
        ran.stderr.lines().any(|l| l == "wait: no thread waited for a lock (1 thread took locks)"),
        format!("headline without contention\n{ran}"),
    );
    p.check(!ran.stderr.contains("who waited on whom"), format!("pairs without waits\n{ran}"));
}

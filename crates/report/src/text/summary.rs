//! The short report `lockmeter run` prints at exit.

use super::*;

/// Locks of the summary that get a line naming their top waiting site and its holder.
pub const SUMMARY_PAIRS: usize = 3;

/// The short report `lockmeter run` prints at exit: the header, the `top` locks by total wait
/// without their sites, then for each of the top [`SUMMARY_PAIRS`] locks by wait its top
/// waiter–holder pair: the waiting site and the site that held the lock meanwhile that together
/// account for most of its wait.
pub fn summary(a: &Analysis, top: usize, w: &mut dyn Write) -> io::Result<()> {
    header(a, w)?;
    writeln!(w)?;
    locks_table(a, SortKey::Wait, top, 0, w)?;
    who_waited(a, SUMMARY_PAIRS, w)?;
    kernel_sleeps_table(a, SortKey::Wait, top, w)?;
    advice_lines(a, w)
}

/// The advice of [`crate::advice`] for the top locks by wait: each a hypothesis and the
/// `lockmeter compare` command that tests it.
fn advice_lines(a: &Analysis, w: &mut dyn Write) -> io::Result<()> {
    let v = crate::advice::advice(a, SUMMARY_PAIRS);
    if v.is_empty() {
        return Ok(());
    }
    writeln!(w)?;
    writeln!(w, "advice (hypotheses from these measurements; each command tests one):")?;
    for x in v {
        writeln!(w, "  {}: {}", printable(&x.lock, usize::MAX), x.hypothesis)?;
        writeln!(w, "    {}", x.command)?;
    }
    Ok(())
}

/// `function (file:line)`, else the frame as the tables show it (`function+0xOFF`,
/// `module+0xOFF`).
fn site_in_words(f: &Frame) -> String {
    match (f.short_location(), &f.function) {
        (Some(loc), Some(func)) => format!("{func} ({loc})"),
        (Some(loc), None) => format!("{f} ({loc})"),
        (None, _) => f.to_string(),
    }
}

/// One line for each of the top `n` locks by wait: its top waiter–holder pair as a sentence,
/// "W (file:line) waited on L held from H (file:line): P of the lock's wait".
fn who_waited(a: &Analysis, n: usize, w: &mut dyn Write) -> io::Result<()> {
    let locks: Vec<&LockAgg> = a
        .sorted_locks(SortKey::Wait)
        .into_iter()
        .filter(|l| l.agg.stats.wait_ns_total > 0)
        .take(n)
        .collect();
    if locks.is_empty() {
        return Ok(());
    }
    writeln!(w)?;
    if locks.iter().all(|l| l.pairs.is_empty()) {
        return writeln!(
            w,
            "who waited on whom: not recorded in this profile (no waiting site of a contended acquisition)"
        );
    }
    writeln!(
        w,
        "who waited on whom, for the top {} by wait (the top waiting site, the site that held the lock meanwhile):",
        plural(locks.len() as u64, "lock", "locks")
    )?;
    for l in locks {
        let name = printable(&l.display_name(), usize::MAX);
        let Some(p) = l.pairs.first() else {
            writeln!(w, "  {name}: its waiting sites were not recorded")?;
            continue;
        };
        let held = if p.holder.address == 0 && l.kind == LockKind::RwLock {
            "while its holder's site was unknown (an rwlock's readers are not tracked)".to_owned()
        } else if p.holder.address == 0 {
            "while its holder's site was unknown".to_owned()
        } else {
            format!("held from {}", site_in_words(&p.holder))
        };
        writeln!(
            w,
            "  {} waited on {name} {held}: {} of the lock's wait",
            site_in_words(&p.waiter),
            fmt_pct(ratio_pct(p.wait_ns, l.agg.stats.wait_ns_total).min(100.0))
        )?;
    }
    Ok(())
}

/// `run --kernel`: for the user-space locks the kernel saw too, their futex waits (sleeps in the
/// kernel) and how long they took, beside the contended acquisitions and wait the preload
/// measured. Nothing when no lock has it.
pub(super) fn kernel_sleeps_table(
    a: &Analysis,
    key: SortKey,
    top: usize,
    w: &mut dyn Write,
) -> io::Result<()> {
    let locks: Vec<&LockAgg> =
        a.sorted_locks(key).into_iter().filter(|l| l.sleep.is_some()).take(top).collect();
    if locks.is_empty() {
        return Ok(());
    }
    writeln!(w)?;
    writeln!(
        w,
        "the kernel's view (run --kernel): waits that slept in the kernel (futex waits on the lock's words; an acquisition may wait more than once), and holders switched out while holding it (lock-holder preemption) with the waiters' sleep meanwhile:"
    )?;
    let mut t = Table::new(&[
        ("WAIT-TOTAL", Align::Right),
        ("CONTENDED", Align::Right),
        ("FUTEX-WAITS", Align::Right),
        ("SLEEP-TOTAL", Align::Right),
        ("SLEEP-MAX", Align::Right),
        ("PREEMPTED", Align::Right),
        ("PREEMPTED-TIME", Align::Right),
        ("WAIT-IN-THEM", Align::Right),
        ("NAME", Align::Left),
    ]);
    for l in locks {
        let Some(s) = &l.sleep else { continue };
        t.row(vec![
            fmt_ns(l.agg.stats.wait_ns_total),
            l.agg.stats.contended.to_string(),
            s.sleeps.to_string(),
            fmt_ns(s.sleep_ns),
            fmt_ns(s.sleep_ns_max),
            s.preempted_holds.to_string(),
            fmt_ns(s.preempted_ns),
            fmt_ns(s.preempted_wait_ns),
            printable(&l.display_name(), usize::MAX),
        ]);
    }
    t.write(" ", w)
}

//! A run's process tree: every profile the run's processes wrote (one per process image, before
//! `run` joins those that took locks into one file, [`crate::collect`]), which of them names the
//! program, and how it was reached from the command the user typed (a pyenv shim, a shell
//! wrapper, `env`, `make`).
//!
//! The summary covers every process of the run file; its first line names the image that took
//! the most locks, not the first image: under a launcher the first image is a shell that took
//! none, and the program the user meant is a grandchild. A table lists each process that took
//! locks.

use lockmeter_report::units::{Align, Table, fmt_ns};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// One process image's profile, as much as the tree needs of it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Image {
    pub(crate) path: PathBuf,
    pub(crate) pid: u32,
    pub(crate) ppid: u32,
    pub(crate) image_seq: u32,
    pub(crate) start_unix_ns: u64,
    pub(crate) exe: String,
    pub(crate) cmdline: Vec<String>,
    pub(crate) acquisitions: u64,
    pub(crate) wait_ns: u64,
    /// When the image's profile was written (its end), Unix ns.
    pub(crate) end_unix_ns: u64,
    /// What starting and ending the collector cost the image, measured (OVERHEAD's `start_ns`
    /// + `end_ns`).
    pub(crate) fixed_ns: u64,
}

impl Image {
    /// Reads the profile at `path`; `None` when it cannot be read (the caller lists the file
    /// anyway).
    fn read(path: &Path) -> Option<Image> {
        let p = lockmeter_format::read_profile_file(path).ok()?;
        Some(Image::of(path, &p))
    }

    /// The image of profile `p`, known as `path`.
    pub(crate) fn of(path: &Path, p: &lockmeter_format::Profile) -> Image {
        let h = &p.header;
        Image {
            path: path.to_path_buf(),
            pid: h.pid,
            ppid: h.ppid,
            image_seq: h.image_seq,
            start_unix_ns: h.start_unix_ns,
            exe: h.exe.clone(),
            cmdline: h.cmdline.clone(),
            acquisitions: p.records.iter().map(|r| r.stats.acquisitions).sum(),
            wait_ns: p.records.iter().map(|r| r.stats.wait_ns_total).sum(),
            end_unix_ns: h.end_unix_ns,
            fixed_ns: p.overhead.start_ns.saturating_add(p.overhead.end_ns),
        }
    }

    /// The program as a user would name it: its first argument's file name and the rest of its
    /// command line (`python3 script.py`), else its executable's file name.
    pub(crate) fn program(&self) -> String {
        let base = |s: &str| s.rsplit('/').next().unwrap_or(s).to_owned();
        let s = match self.cmdline.split_first() {
            Some((first, rest)) if !first.is_empty() => std::iter::once(base(first))
                .chain(rest.iter().cloned())
                .collect::<Vec<_>>()
                .join(" "),
            _ if !self.exe.is_empty() => base(&self.exe),
            _ => "?".to_owned(),
        };
        lockmeter_report::printable(&s, 80)
    }

    /// What this image is as a launcher, in a word or two: `pyenv shim`, `shell script NAME`,
    /// `env`, `make`, else its program's file name.
    fn launcher(&self) -> String {
        let words = || self.cmdline.iter().map(String::as_str).chain([self.exe.as_str()]);
        if words().any(|w| {
            w.contains("/.pyenv/shims/")
                || w.ends_with("/pyenv")
                || w.contains("/pyenv/libexec/")
                || w.contains("/.pyenv/libexec/")
        }) {
            return "pyenv shim".to_owned();
        }
        let base = |s: &str| s.rsplit('/').next().unwrap_or(s).to_owned();
        let exe = base(&self.exe);
        let shell = ["sh", "bash", "dash", "zsh", "ksh", "mksh", "busybox"].contains(&exe.as_str());
        if shell {
            // `bash SCRIPT ARGS` (a script run through its #! line) or `bash -c '...'`.
            match self.cmdline.get(1).map(String::as_str) {
                Some(s) if !s.starts_with('-') => {
                    return lockmeter_report::printable(&format!("shell script {}", base(s)), 60);
                }
                _ => return format!("{exe} -c"),
            }
        }
        if exe.is_empty() { self.program() } else { exe }
    }
}

/// The profiles of one run.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tree {
    /// Every readable profile, the root's first, then in the order given.
    pub(crate) images: Vec<Image>,
}

impl Tree {
    /// Reads the profiles at `paths` (the root's first); unreadable ones are left out.
    pub(crate) fn read<'a>(paths: impl IntoIterator<Item = &'a PathBuf>) -> Tree {
        Tree { images: paths.into_iter().filter_map(|p| Image::read(p)).collect() }
    }

    /// Adds the images that left a line in the manifest instead of a profile (they took no
    /// lock; their `path` is empty), in the manifest's order after the profiles: each image
    /// once, by its last entry (an exec that failed after its image's line was written leaves
    /// the image a later line or profile).
    pub(crate) fn add_idle(&mut self, idle: Vec<Image>) {
        let key = |i: &Image| (i.pid, i.image_seq);
        let files: std::collections::HashSet<_> = self.images.iter().map(key).collect();
        let mut last = std::collections::HashMap::new();
        for (n, i) in idle.iter().enumerate() {
            last.insert(key(i), n);
        }
        self.images.extend(
            idle.into_iter()
                .enumerate()
                .filter(|(n, i)| !files.contains(&key(i)) && last.get(&key(i)) == Some(n))
                .map(|(_, i)| i),
        );
    }

    /// The image the summary leads with: the one that took the most locks (ties: the one that
    /// waited longest, then the earliest listed, so a lone process or a tree without any lock
    /// leads with the root).
    pub(crate) fn lead(&self) -> Option<&Image> {
        let mut best: Option<&Image> = None;
        for im in &self.images {
            let better =
                best.is_none_or(|b| (im.acquisitions, im.wait_ns) > (b.acquisitions, b.wait_ns));
            if better {
                best = Some(im);
            }
        }
        best
    }

    /// The image `im` came from: the image its process exec'd from (same pid, the previous
    /// image), else the image of its parent that was running when it started (the latest one of
    /// the parent's pid that started before it); `None` for the root.
    fn predecessor(&self, im: &Image) -> Option<&Image> {
        if im.image_seq > 0
            && let Some(p) =
                self.images.iter().find(|o| o.pid == im.pid && o.image_seq + 1 == im.image_seq)
        {
            return Some(p);
        }
        self.images
            .iter()
            .filter(|o| o.pid == im.ppid && o.start_unix_ns <= im.start_unix_ns)
            .max_by_key(|o| (o.image_seq, o.start_unix_ns))
    }

    /// The images from the root to `lead`, `lead` last.
    pub(crate) fn chain<'a>(&'a self, lead: &'a Image) -> Vec<&'a Image> {
        let mut chain = vec![lead];
        let mut cur = lead;
        while let Some(p) = self.predecessor(cur) {
            if chain.len() > self.images.len() || chain.iter().any(|c| std::ptr::eq(*c, p)) {
                break;
            }
            chain.push(p);
            cur = p;
        }
        chain.reverse();
        chain
    }

    /// `python3 script.py (via pyenv shim)`: the lead's program and the launchers it was
    /// started through (each named once, in order).
    pub(crate) fn describe(&self, lead: &Image) -> String {
        let chain = self.chain(lead);
        let mut via: Vec<String> = Vec::new();
        for im in &chain[..chain.len() - 1] {
            let l = im.launcher();
            if via.last() != Some(&l) {
                via.push(l);
            }
        }
        if via.is_empty() {
            lead.program()
        } else {
            format!("{} (via {})", lead.program(), via.join(" → "))
        }
    }

    /// How many images took locks.
    pub(crate) fn busy(&self) -> usize {
        self.images.iter().filter(|i| i.acquisitions > 0).count()
    }

    /// The line that names the run's program when the run had several images (the one that
    /// took the most locks, with its launchers); `None` for a lone process.
    pub(crate) fn lead_line(&self) -> Option<String> {
        if self.images.len() < 2 {
            return None;
        }
        let lead = self.lead()?;
        let n = self.images.len();
        let cover = match self.busy() {
            0 | 1 => "the summary covers them all".to_owned(),
            b => format!(
                "the summary covers them all ({b} took locks: each lock named with its process)"
            ),
        };
        Some(format!(
            "lockmeter: {n} process images ran; {cover}; the one that took the most locks, pid {}: {}",
            lead.pid,
            self.describe(lead)
        ))
    }

    /// What starting and ending the collector cost the run's images in all, when there were
    /// several and it is 1% of the run's wall time or more (a launcher's or a script's short
    /// processes): the run file keeps only the images that took locks, so this is the one place
    /// that counts the others.
    pub(crate) fn fixed_line(&self) -> Option<String> {
        if self.images.len() < 2 {
            return None;
        }
        let fixed: u64 = self.images.iter().map(|i| i.fixed_ns).sum();
        let start = self.images.iter().map(|i| i.start_unix_ns).min()?;
        let end = self.images.iter().map(|i| i.end_unix_ns).max()?;
        let span = end.saturating_sub(start);
        if span == 0 || fixed.saturating_mul(100) < span {
            return None;
        }
        Some(format!(
            "lockmeter: starting and ending the collector in the {} process images took ~{} in all, {:.0}% of the run's {} (each image pays it, locks or not)",
            self.images.len(),
            fmt_ns(fixed),
            fixed as f64 * 100.0 / span as f64,
            fmt_ns(span)
        ))
    }

    /// The table of every image that took a lock, most first (at most `top` rows), with a line
    /// for the rest; `None` for a lone process.
    pub(crate) fn table(&self, top: usize) -> Option<String> {
        if self.images.len() < 2 {
            return None;
        }
        let lead = self.lead().map(|l| l.path.clone());
        let mut busy: Vec<&Image> = self.images.iter().filter(|i| i.acquisitions > 0).collect();
        busy.sort_by_key(|i| std::cmp::Reverse((i.acquisitions, i.wait_ns)));
        let idle = self.images.len() - busy.len();
        let mut out = format!(
            "processes: {} images, {} of them took locks (all in the one file):\n",
            self.images.len(),
            busy.len()
        );
        if !busy.is_empty() {
            let mut t = Table::new(&[
                ("PID", Align::Right),
                ("ACQUISITIONS", Align::Right),
                ("WAIT-TOTAL", Align::Right),
                ("PROGRAM", Align::Left),
            ]);
            for im in busy.iter().take(top.max(1)) {
                let mark = if Some(&im.path) == lead.as_ref() { " *" } else { "" };
                t.row(vec![
                    format!("{}{mark}", im.pid),
                    im.acquisitions.to_string(),
                    fmt_ns(im.wait_ns),
                    im.program(),
                ]);
            }
            let mut v = Vec::new();
            let _ = t.write("  ", &mut v);
            out.push_str(&String::from_utf8_lossy(&v));
            if busy.len() > top.max(1) {
                out.push_str(&format!(
                    "  ... and {} more that took locks\n",
                    busy.len() - top.max(1)
                ));
            }
        }
        if idle > 0 {
            out.push_str(&format!(
                "  {idle} image(s) took no lock (launchers, shells, exec'd-from images)\n"
            ));
        }
        Some(out)
    }
}

/// The file in which every process of a run lists the profile it wrote (`LOCKMETER_MANIFEST`),
/// or, for an image that took no lock, leaves a line instead ([`idle_images`]): `run` knows its
/// profiles from it instead of looking for them. A private file (mode 0600,
/// created new) in the temporary directory, removed when dropped (or, when `run` was killed, by
/// the next run: [`crate::stale::remove_stale_manifests`]).
#[derive(Debug)]
pub(crate) struct Manifest {
    path: PathBuf,
}

impl Manifest {
    /// A new, empty manifest; `None` when none can be created (`run` then looks for the
    /// profiles next to the output).
    pub(crate) fn create() -> Option<Manifest> {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = std::env::temp_dir();
        crate::stale::remove_stale_manifests(&dir);
        (0..100).find_map(|n| {
            let path = dir.join(format!(".lockmeter-run-{}-{n}.profiles", std::process::id()));
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&path)
                .ok()
                .map(|_| Manifest { path })
        })
    }

    /// Its path, for the collector's environment.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The profiles listed: `output` itself (the first process's) and the others, sorted. A
    /// line is taken only when it names a file that is `output` or `output.SUFFIX`.
    pub(crate) fn profiles(&self, output: &Path) -> (Option<PathBuf>, Vec<PathBuf>) {
        let text = std::fs::read(&self.path).unwrap_or_default();
        let mut prefix = output.as_os_str().to_owned();
        prefix.push(".");
        let prefix = prefix.to_string_lossy().into_owned();
        let (mut main, mut others) = (None, Vec::new());
        for line in text.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let p = PathBuf::from(std::ffi::OsStr::from_bytes(line));
            if !p.is_file() {
                continue;
            }
            if p == output {
                main = Some(p);
            } else if p.to_string_lossy().starts_with(&prefix) {
                others.push(p);
            }
        }
        others.sort();
        others.dedup();
        (main, others)
    }
}

/// The images that took no lock and left a line in the run's manifest instead of a profile file
/// (`LOCKMETER_IDLE_LINES`; the preload's `dump/idle.rs` writes them: `idle`, pid, parent, image
/// number, start and end (Unix ns), what starting and ending cost it (ns), the executable and the
/// NUL-terminated arguments in hex, tab-separated); malformed lines are left out.
pub(crate) fn idle_images(manifest: &Path) -> Vec<Image> {
    let text = std::fs::read(manifest).unwrap_or_default();
    text.split(|&b| b == b'\n').filter_map(idle_image).collect()
}

/// One line of [`idle_images`].
fn idle_image(line: &[u8]) -> Option<Image> {
    let f: Vec<&[u8]> = line.split(|&b| b == b'\t').collect();
    let [tag, pid, ppid, seq, start, end, fixed, exe, cmdline] = f.as_slice() else {
        return None;
    };
    if *tag != b"idle" {
        return None;
    }
    let num = |b: &[u8]| std::str::from_utf8(b).ok()?.parse::<u64>().ok();
    let unhex = |b: &[u8]| -> Option<Vec<u8>> {
        let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
        b.chunks(2)
            .map(|p| match p {
                [h, l] => Some(digit(*h)? << 4 | digit(*l)?),
                _ => None,
            })
            .collect()
    };
    let cmdline = unhex(cmdline)?;
    let mut args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    if cmdline.last() == Some(&0) {
        args.pop();
    }
    Some(Image {
        path: PathBuf::new(),
        pid: u32::try_from(num(pid)?).ok()?,
        ppid: u32::try_from(num(ppid)?).ok()?,
        image_seq: u32::try_from(num(seq)?).ok()?,
        start_unix_ns: num(start)?,
        exe: String::from_utf8_lossy(&unhex(exe)?).into_owned(),
        cmdline: args.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect(),
        acquisitions: 0,
        wait_ns: 0,
        end_unix_ns: num(end)?,
        fixed_ns: num(fixed)?,
    })
}

impl Drop for Manifest {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An image: `(pid, ppid, image_seq, start)`, its command line, executable and acquisitions.
    fn im(path: &str, ids: (u32, u32, u32, u64), cmd: &[&str], exe: &str, acq: u64) -> Image {
        let (pid, ppid, seq, start) = ids;
        Image {
            path: PathBuf::from(path),
            pid,
            ppid,
            image_seq: seq,
            start_unix_ns: start,
            exe: exe.to_owned(),
            cmdline: cmd.iter().map(|s| (*s).to_owned()).collect(),
            acquisitions: acq,
            wait_ns: 0,
            end_unix_ns: start + 1_000,
            fixed_ns: 0,
        }
    }

    /// A pyenv shim: bash runs the shim, which execs `pyenv exec` (bash), which execs
    /// python3 in the same process.
    #[test]
    fn a_pyenv_shim_leads_with_python_and_says_so() {
        let t = Tree {
            images: vec![
                im(
                    "p.lmp",
                    (10, 1, 0, 1),
                    &["bash", "/root/.pyenv/shims/python3", "s.py"],
                    "/usr/bin/bash",
                    0,
                ),
                im(
                    "p.lmp.10.1",
                    (10, 1, 1, 2),
                    &["bash", "/root/.pyenv/libexec/pyenv", "exec", "python3", "s.py"],
                    "/usr/bin/bash",
                    0,
                ),
                im("p.lmp.11", (11, 10, 0, 3), &["head", "-n1"], "/usr/bin/head", 0),
                im(
                    "p.lmp.10.2",
                    (10, 1, 2, 4),
                    &["/root/.pyenv/versions/3.12.1/bin/python3", "s.py"],
                    "/root/.pyenv/versions/3.12.1/bin/python3.12",
                    80_001,
                ),
            ],
        };
        let lead = t.lead().unwrap();
        assert_eq!(lead.path, PathBuf::from("p.lmp.10.2"));
        assert_eq!(t.chain(lead).len(), 3);
        assert_eq!(t.describe(lead), "python3 s.py (via pyenv shim)");
        let line = t.lead_line().unwrap();
        assert!(line.contains("4 process images"), "{line}");
        assert!(line.ends_with("pid 10: python3 s.py (via pyenv shim)"), "{line}");
        let table = t.table(10).unwrap();
        assert!(table.contains("1 of them took locks"), "{table}");
        assert!(table.contains("10 *"), "{table}");
        assert!(table.contains("3 image(s) took no lock"), "{table}");
    }

    /// A shell wrapper that runs the program as a child through env.
    #[test]
    fn a_wrapper_names_each_launcher_once() {
        let t = Tree {
            images: vec![
                im("p.lmp", (20, 1, 0, 1), &["/bin/sh", "./wrap.sh", "4"], "/usr/bin/dash", 0),
                im("p.lmp.21", (21, 20, 0, 2), &["env", "A=1", "./hammer", "4"], "/usr/bin/env", 0),
                im("p.lmp.21.1", (21, 20, 1, 3), &["./hammer", "4"], "/tmp/x/hammer", 400),
                im("p.lmp.22", (22, 20, 0, 5), &["./hammer", "1"], "/tmp/x/hammer", 100),
            ],
        };
        let lead = t.lead().unwrap();
        assert_eq!(lead.pid, 21);
        assert_eq!(t.describe(lead), "hammer 4 (via shell script wrap.sh → env)");
        let table = t.table(1).unwrap();
        assert!(table.contains("... and 1 more that took locks"), "{table}");
    }

    #[test]
    fn idle_lines_are_images_each_once_after_the_profiles() {
        let hex = |s: &[u8]| s.iter().map(|b| format!("{b:02x}")).collect::<String>();
        let line = |pid: u32, seq: u32, end: u64| {
            format!(
                "idle\t{pid}\t7\t{seq}\t100\t{end}\t2500\t{}\t{}\n",
                hex(b"/usr/bin/true"),
                hex(b"/bin/true\0-x\0\0")
            )
        };
        let dir = std::env::temp_dir().join(format!("lm-idle-test-{}", std::process::id()));
        let text = format!(
            "/tmp/a/p.lmp\n{}{}{}idle\tbad\n{}",
            line(8, 0, 200),
            line(9, 1, 300),
            line(8, 0, 400),
            line(5, 0, 500)
        );
        std::fs::write(&dir, text).unwrap();
        let idle = idle_images(&dir);
        std::fs::remove_file(&dir).unwrap();
        assert_eq!(idle.len(), 4);
        assert_eq!(idle[0].cmdline, ["/bin/true", "-x", ""]);
        assert_eq!(
            (idle[0].exe.as_str(), idle[0].ppid, idle[0].fixed_ns),
            ("/usr/bin/true", 7, 2500)
        );
        assert!(idle[0].path.as_os_str().is_empty() && idle[0].acquisitions == 0);
        // Pid 5's image 0 has a profile; pid 8's image 0 two lines: the last is kept.
        let mut t = Tree { images: vec![im("p.lmp", (5, 1, 0, 1), &["./a"], "/x/a", 3)] };
        t.add_idle(idle);
        let kept: Vec<(u32, u32, u64)> =
            t.images.iter().map(|i| (i.pid, i.image_seq, i.end_unix_ns)).collect();
        assert_eq!(kept, [(5, 0, 1_001), (9, 1, 300), (8, 0, 400)]);
    }

    #[test]
    fn a_lone_process_is_its_own_answer() {
        let t = Tree { images: vec![im("p.lmp", (5, 1, 0, 1), &["./a"], "/x/a", 0)] };
        assert_eq!(t.lead().unwrap().pid, 5);
        assert_eq!(t.describe(t.lead().unwrap()), "a");
        assert!(t.lead_line().is_none() && t.table(10).is_none());
    }

    #[test]
    fn the_collectors_start_and_end_over_many_short_images_is_said() {
        // A shell loop of 3 short images after the shell itself: 4 x 1 ms of the collector's
        // start and end in a 10 ms run.
        let mut images: Vec<Image> = (0..4)
            .map(|n| im("p.lmp", (100 + n, 99, 0, 1_000 + n as u64), &["true"], "/bin/true", 0))
            .collect();
        images.iter_mut().for_each(|i| i.fixed_ns = 1_000_000);
        images[0].end_unix_ns = 1_000 + 10_000_000;
        let t = Tree { images };
        let line = t.fixed_line().expect("a line");
        assert!(
            line.contains("in the 4 process images took ~4.00 ms in all, 40% of the run's 10.0 ms"),
            "{line}"
        );
        // Under 1% of the run: nothing to say; one image: its estimate says it.
        let mut quiet = t.clone();
        quiet.images.iter_mut().for_each(|i| i.fixed_ns = 10_000);
        assert_eq!(quiet.fixed_line(), None);
        let one = Tree { images: t.images[..1].to_vec() };
        assert_eq!(one.fixed_line(), None);
    }
}

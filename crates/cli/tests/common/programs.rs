//! Installed programs the tests drive when they are there (`.ci/install.sh` installs them):
//! sysbench's mutex test checked against its own count, memcached under `lockmeter run`.

use super::{Profile, RUN_LIMIT, Ran, Scratch, finish, lockmeter, lockmeter_cmd, spawn};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

/// The path of program `prog` on `PATH`, if it is installed.
pub fn which(prog: &str) -> Result<PathBuf, ()> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(prog))
        .find(|p| p.is_file())
        .ok_or(())
}

/// The DOM of the page `html` once headless Chromium ran its scripts, or `None` when no Chromium
/// is installed (`.ci/install.sh` installs Debian's `chromium`).
pub fn rendered_dom(html: &Path) -> Option<String> {
    let browser = ["chromium", "chromium-browser", "google-chrome"].into_iter().find(|c| {
        std::process::Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success())
    })?;
    let dom = std::process::Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000"])
        .arg("--dump-dom")
        .arg(format!("file://{}", html.display()))
        .output()
        .expect("cannot run chromium");
    Some(String::from_utf8_lossy(&dom.stdout).into_owned())
}

/// `lockmeter run -q OPTS -o OUT -- sysbench mutex ARGS --mutex-locks=PER run`, checked against
/// sysbench's own count: each of its events takes PER locks of its mutex array, and sysbench's
/// own few start-up locks (fewer than 1000) come on top; nothing dropped. `None`, with the reason
/// printed, when sysbench is not installed.
pub fn sysbench_mutex_exact(
    s: &Scratch,
    out: &str,
    opts: &[&str],
    args: &[&str],
    per: u64,
) -> Option<Profile> {
    if std::process::Command::new("sysbench").arg("--version").output().is_err() {
        eprintln!("skipped: sysbench is not installed (.ci/install.sh installs it)");
        return None;
    }
    let path = s.path(out);
    let locks = format!("--mutex-locks={per}");
    let mut all = vec!["run", "-q"];
    all.extend_from_slice(opts);
    all.extend_from_slice(&["-o", path.to_str().unwrap(), "--", "sysbench", "mutex"]);
    all.extend_from_slice(args);
    all.extend_from_slice(&[locks.as_str(), "run"]);
    let ran = lockmeter(&s.dir, &all);
    ran.expect_code(0);
    let events: u64 = ran
        .stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("total number of events:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("sysbench printed no event count\n{ran}"));
    let p = Profile::load(&path, &ran);
    p.check_consistency();
    p.expect_nothing_dropped();
    let total = p.totals("acquisitions");
    p.check(
        total >= events * per && total - events * per < 1000,
        format!(
            "{opts:?}: {total} acquisitions for {events} x {per} sysbench locks (+ its own few)"
        ),
    );
    Some(p)
}

/// memcached (loopback only, 4 threads, `shutdown` allowed) started under `lockmeter run -q -o
/// OUT RUN_OPTS`, with a connection open to it.
pub struct Memcached {
    pub child: Child,
    pub addr: String,
    pub conn: std::net::TcpStream,
    pub reader: std::io::BufReader<std::net::TcpStream>,
}

impl Memcached {
    /// Starts it on `port` and connects (waiting up to 30 s for it to listen). `None`, with the
    /// reason printed, when memcached or memcaslap is not installed.
    pub fn start(s: &Scratch, out: &Path, run_opts: &[&str], port: u16) -> Option<Memcached> {
        let (Ok(_), Ok(_)) = (which("memcached"), which("memcaslap")) else {
            eprintln!(
                "skipped: memcached or memcaslap is not installed (.ci/install.sh installs them)"
            );
            return None;
        };
        let mut cmd = lockmeter_cmd(&s.dir);
        cmd.args(["run", "-q", "-o", out.to_str().unwrap()]).args(run_opts);
        cmd.args(["--", "memcached", "-u", "root", "-A", "-U", "0", "-l", "127.0.0.1", "-t", "4"]);
        cmd.args(["-p", &port.to_string()]);
        let child = spawn(&mut cmd);
        let addr = format!("127.0.0.1:{port}");
        let start = Instant::now();
        let conn = loop {
            match std::net::TcpStream::connect(&addr) {
                Ok(c) => break c,
                Err(e) if start.elapsed() > Duration::from_secs(30) => {
                    let ran = finish("memcached".into(), child, b"", Duration::from_secs(1));
                    panic!("memcached did not listen on {addr}: {e}\n{ran}");
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        conn.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let reader = std::io::BufReader::new(conn.try_clone().unwrap());
        Some(Memcached { child, addr, conn, reader })
    }

    /// Sets `key` to "hello" and gets it back: the four lines memcached answered.
    pub fn set_get(&mut self, key: &str) -> Vec<String> {
        use std::io::BufRead;
        let req = format!("set {key} 0 0 5\r\nhello\r\nget {key}\r\n");
        self.conn.write_all(req.as_bytes()).unwrap();
        (0..4)
            .map(|_| {
                let mut l = String::new();
                self.reader.read_line(&mut l).unwrap();
                l
            })
            .collect()
    }

    /// Asks memcached to shut down and waits for `lockmeter run` to end.
    pub fn shutdown(mut self, what: String) -> Ran {
        self.conn.write_all(b"shutdown\r\n").unwrap();
        let mut rest = String::new();
        let _ = self.reader.read_to_string(&mut rest);
        finish(what, self.child, b"", RUN_LIMIT)
    }
}

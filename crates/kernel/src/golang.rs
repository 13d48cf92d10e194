//! Go executables: whether a file is one, its Go version, and where the uprobes go that see a
//! `sync.Mutex` / `sync.RWMutex` wait in the Go runtime. Pure ELF reading, tested without BPF.
//!
//! A contended `Lock` spins, then sleeps in the runtime's semaphore through one of three small
//! wrappers, each called with the semaphore's address (Go's register ABI: RAX on amd64):
//!
//! | wrapper (Go >= 1.24; `sync.` before) | caller | the semaphore is |
//! | --- | --- | --- |
//! | `internal/sync.runtime_SemacquireMutex` | `(*Mutex).lockSlow` | `Mutex.sema`, 4 bytes in |
//! | `sync.runtime_SemacquireRWMutexR` | `(*RWMutex).RLock` | `RWMutex.readerSem`, 12 in |
//! | `sync.runtime_SemacquireRWMutex` | `(*RWMutex).Lock` | `RWMutex.writerSem`, 8 in |
//!
//! A wait begins at a wrapper's entry and ends where the wrapper's call of
//! `runtime.semacquire1` returns: the instruction after that call, found by decoding the
//! wrapper (no uretprobes: they replace return addresses, which breaks Go's stack unwinding and
//! stack copying). `sync.runtime_Semrelease` (and `internal/sync.`'s) is where a holder wakes a
//! waiter. A writer waiting for another writer waits in the RWMutex's inner `Mutex` (its first
//! field, so the same address): lockSlow's caller is then `sync.(*RWMutex).Lock`.

use object::{Object, ObjectSection, ObjectSymbol, SymbolKind};
use std::collections::HashMap;

/// Go versions whose `sync.Mutex` and `sync.RWMutex` layouts and runtime wrappers lockmeter
/// knows (1.20 introduced the RWMutex wrappers; the layouts are unchanged since).
pub(crate) const GO_MINORS: std::ops::RangeInclusive<u32> = 20..=26;

/// What a wait-begin uprobe is at (the attach cookie's low byte; the BPF side's `GO_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Role {
    /// The `sync.Mutex` wrapper (also a writer waiting for another writer of an RWMutex).
    Mutex = 1,
    /// `RLock` behind a writer.
    RwRead = 2,
    /// `Lock` waiting for the readers to leave.
    RwWrite = 3,
}

/// One uprobe site.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Site {
    /// Virtual address in the executable.
    pub vaddr: u64,
    /// Offset in the file (what a uprobe is attached at).
    pub offset: u64,
}

/// Where the uprobes of a Go executable go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GoExe {
    /// `go1.26.8`.
    pub version: String,
    /// Wait begins: each wrapper's entry.
    pub begins: Vec<(Role, Site)>,
    /// Wait ends: the instruction after each wrapper's call of `runtime.semacquire1`.
    pub ends: Vec<Site>,
    /// Wakes: the entry of each `runtime_Semrelease`.
    pub releases: Vec<Site>,
    /// `sync.(*RWMutex).Lock`, virtual addresses `[start, end)`; `(0, 0)` when absent.
    pub rwlock: (u64, u64),
    /// File offset ranges `[start, end)` of the runtime's and the sync packages' code: the frames
    /// a goroutine stack starts with before it reaches the program's own code.
    pub runtime_code: Vec<(u64, u64)>,
}

/// What an executable is, for Go tracing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Inspection {
    /// Not a Go program.
    NotGo,
    /// A Go program with every site found.
    Go(GoExe),
    /// A Go program lockmeter cannot trace: its version (`None`: unknown) and why, as the end of
    /// a sentence.
    Unsupported { version: Option<String>, why: String },
}

/// Inspects the file at `path` (`NotGo` when it cannot be read or is not ELF), reading only the
/// parts it needs: little of a program that is not Go.
pub(crate) fn inspect_file(path: &std::path::Path) -> Inspection {
    match std::fs::File::open(path) {
        Ok(f) => inspect(&object::ReadCache::new(f)),
        Err(_) => Inspection::NotGo,
    }
}

/// Inspects an executable.
pub(crate) fn inspect<'d, R: object::ReadRef<'d>>(data: R) -> Inspection {
    let Ok(file) = object::File::parse(data) else { return Inspection::NotGo };
    let buildinfo = file.section_by_name(".go.buildinfo").and_then(|s| s.data().ok());
    let has_runtime_main = || file.symbols().any(|s| s.name() == Ok("runtime.main"));
    if buildinfo.is_none() && !has_runtime_main() {
        return Inspection::NotGo;
    }
    let version = buildinfo.and_then(buildinfo_version);
    let unsupported = |why: String| Inspection::Unsupported { version: version.clone(), why };
    if file.architecture() != object::Architecture::X86_64 || !cfg!(target_arch = "x86_64") {
        return unsupported(format!(
            "lockmeter traces Go mutexes on x86_64 only (this program is {:?})",
            file.architecture()
        ));
    }
    let Some(v) = &version else {
        return unsupported("its Go version could not be read (no .go.buildinfo)".into());
    };
    match go_minor(v) {
        Some(m) if GO_MINORS.contains(&m) => {}
        Some(m) if m < *GO_MINORS.start() => {
            return unsupported(format!("Go older than 1.{} is not supported", GO_MINORS.start()));
        }
        _ => {
            return unsupported(format!(
                "this lockmeter knows the sync.Mutex layout of Go 1.{} to 1.{} only",
                GO_MINORS.start(),
                GO_MINORS.end()
            ));
        }
    }
    // Function symbols by name, and in address order for the runtime's code ranges.
    let mut funcs: Vec<(u64, u64, &str)> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Text)
        .filter_map(|s| Some((s.address(), s.size(), s.name().ok()?)))
        .collect();
    if funcs.is_empty() {
        return unsupported(
            "it has no symbol table (stripped, e.g. built with -ldflags=-s): build it without -s"
                .into(),
        );
    }
    funcs.sort_unstable();
    let by_name: HashMap<&str, (u64, u64)> = funcs.iter().map(|&(a, s, n)| (n, (a, s))).collect();
    let Some(&(semacquire1, _)) = by_name.get("runtime.semacquire1") else {
        return unsupported("runtime.semacquire1 is not in its symbol table".into());
    };
    // A runtime whose RWMutex waits in the Mutex wrapper would have them taken for Mutex waits
    // at another address: RWMutex.Lock without its own wrapper is a runtime not known here.
    if by_name.contains_key("sync.(*RWMutex).Lock")
        && !by_name.contains_key("sync.runtime_SemacquireRWMutex")
    {
        return unsupported(
            "its sync.RWMutex has no wait function of its own (an unknown runtime)".into(),
        );
    }
    let mut exe = GoExe {
        version: v.clone(),
        begins: Vec::new(),
        ends: Vec::new(),
        releases: Vec::new(),
        rwlock: (0, 0),
        runtime_code: Vec::new(),
    };
    let wrappers = [
        (Role::Mutex, "internal/sync.runtime_SemacquireMutex"),
        (Role::Mutex, "sync.runtime_SemacquireMutex"),
        (Role::RwRead, "sync.runtime_SemacquireRWMutexR"),
        (Role::RwWrite, "sync.runtime_SemacquireRWMutex"),
    ];
    for (role, name) in wrappers {
        // A wrapper the program does not use is not linked in: nothing to trace there.
        let Some(&(addr, size)) = by_name.get(name) else { continue };
        let Some((code, offset)) = code_at(&file, addr, size) else {
            return unsupported(format!("the code of {name} could not be read"));
        };
        let returns = call_returns(code, addr, semacquire1);
        let [ret] = returns[..] else {
            return unsupported(format!(
                "{name} calls runtime.semacquire1 {} times, not once: an unknown runtime",
                returns.len()
            ));
        };
        exe.begins.push((role, Site { vaddr: addr, offset }));
        exe.ends.push(Site { vaddr: ret, offset: offset + (ret - addr) });
    }
    if exe.begins.is_empty() {
        return unsupported(
            "none of the Go runtime's sync.Mutex wait functions is in its symbol table".into(),
        );
    }
    for name in ["internal/sync.runtime_Semrelease", "sync.runtime_Semrelease"] {
        if let Some(&(addr, size)) = by_name.get(name)
            && let Some((_, offset)) = code_at(&file, addr, size)
        {
            exe.releases.push(Site { vaddr: addr, offset });
        }
    }
    if let Some(&(addr, size)) = by_name.get("sync.(*RWMutex).Lock") {
        exe.rwlock = (addr, addr + size);
    }
    exe.runtime_code = runtime_code(&file, &funcs);
    Inspection::Go(exe)
}

/// The bytes of `[addr, addr + size)` and the file offset of `addr`.
fn code_at<'d, R: object::ReadRef<'d>>(
    file: &object::File<'d, R>,
    addr: u64,
    size: u64,
) -> Option<(&'d [u8], u64)> {
    let sec = file.sections().find(|s| addr >= s.address() && addr < s.address() + s.size())?;
    let (off, _) = sec.file_range()?;
    let data = sec.data().ok()?;
    let start = usize::try_from(addr - sec.address()).ok()?;
    let end = start.checked_add(usize::try_from(size).ok()?)?;
    Some((data.get(start..end)?, off + (addr - sec.address())))
}

/// File offset ranges of the code of the packages `runtime`, `sync` and `internal/sync`, adjacent
/// functions merged.
fn runtime_code<'d, R: object::ReadRef<'d>>(
    file: &object::File<'d, R>,
    funcs: &[(u64, u64, &str)],
) -> Vec<(u64, u64)> {
    let is_runtime =
        |n: &str| ["runtime.", "sync.", "internal/sync."].iter().any(|p| n.starts_with(p));
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    let mut prev_runtime = false;
    for &(addr, size, name) in funcs {
        let r = is_runtime(name);
        if r {
            let end = addr + size.max(1);
            match ranges.last_mut() {
                Some(last) if prev_runtime => last.1 = last.1.max(end),
                _ => ranges.push((addr, end)),
            }
        }
        prev_runtime = r;
    }
    ranges
        .into_iter()
        .filter_map(|(a, e)| {
            let (_, off) = code_at(file, a, 0)?;
            Some((off, off + (e - a)))
        })
        .collect()
}

/// The return address of each `call` in `code` (starting at `ip`) whose target is `target`.
fn call_returns(code: &[u8], ip: u64, target: u64) -> Vec<u64> {
    use iced_x86::{Decoder, DecoderOptions, Mnemonic, OpKind};
    let mut out = Vec::new();
    for ins in Decoder::with_ip(64, code, ip, DecoderOptions::NONE) {
        if ins.is_invalid() {
            return Vec::new(); // not code as we know it: no site rather than a wrong one
        }
        if ins.mnemonic() == Mnemonic::Call
            && ins.op0_kind() == OpKind::NearBranch64
            && ins.near_branch_target() == target
        {
            out.push(ins.next_ip());
        }
    }
    out
}

/// The Go version from a `.go.buildinfo` section (Go 1.18 and later: the version is inline).
fn buildinfo_version(data: &[u8]) -> Option<String> {
    const MAGIC: &[u8] = b"\xff Go buildinf:";
    if data.len() < 32 || !data.starts_with(MAGIC) || data[15] & 2 == 0 {
        return None;
    }
    let (len, n) = uvarint(&data[32..])?;
    let s = data.get(32 + n..(32 + n).checked_add(usize::try_from(len).ok()?)?)?;
    String::from_utf8(s.to_vec()).ok()
}

/// A little-endian base-128 varint and its length.
fn uvarint(b: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &byte) in b.iter().enumerate().take(10) {
        v |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// The minor version of a Go 1 release (`go1.26.8` and `go1.26rc1` give 26); `None` for a
/// development build or anything else.
fn go_minor(v: &str) -> Option<u32> {
    let rest = v.strip_prefix("go1.")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(go_minor("go1.26.8"), Some(26));
        assert_eq!(go_minor("go1.21rc2"), Some(21));
        assert_eq!(go_minor("devel go1.27-abc"), None);
        let mut bi = b"\xff Go buildinf:\x08\x02".to_vec();
        bi.resize(32, 0);
        bi.push(8);
        bi.extend_from_slice(b"go1.26.8");
        bi.push(0);
        assert_eq!(buildinfo_version(&bi).as_deref(), Some("go1.26.8"));
        bi[15] = 0; // Go before 1.18: the version is behind a pointer
        assert_eq!(buildinfo_version(&bi), None);
        assert_eq!(uvarint(&[0x96, 0x01]), Some((150, 2)));
        assert_eq!(uvarint(&[0x80]), None);
    }

    /// `sync.runtime_SemacquireRWMutexR` of Go 1.26.8 (go tool objdump), at 0x47ba80:
    /// the stack check, frame set-up, `call runtime.semacquire1` (0x45c8c0), return, and the
    /// morestack path with its own call (of morestack_noctxt, not the target).
    const WRAPPER: &[u8] = &[
        0x49, 0x3b, 0x66, 0x10, 0x76, 0x25, 0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x28, 0x48,
        0x89, 0xcf, 0xbe, 0x17, 0x00, 0x00, 0x00, 0xb9, 0x03, 0x00, 0x00, 0x00, 0x0f, 0x1f, 0x44,
        0x00, 0x00, 0xe8, 0x1b, 0x0e, 0xfe, 0xff, 0x48, 0x83, 0xc4, 0x28, 0x5d, 0xc3, 0x48, 0x89,
        0x44, 0x24, 0x08, 0x88, 0x5c, 0x24, 0x10, 0x48, 0x89, 0x4c, 0x24, 0x18, 0xe8, 0x02, 0x37,
        0x00, 0x00, 0x48, 0x8b, 0x44, 0x24, 0x08, 0x0f, 0xb6, 0x5c, 0x24, 0x10, 0x48, 0x8b, 0x4c,
        0x24, 0x18, 0xeb, 0xb1,
    ];

    #[test]
    fn the_call_of_semacquire1_is_found_by_decoding() {
        assert_eq!(call_returns(WRAPPER, 0x47ba80, 0x45c8c0), vec![0x47baa5]);
        // Another target: none (the morestack call is not it).
        assert_eq!(call_returns(WRAPPER, 0x47ba80, 0x45c8c1), Vec::<u64>::new());
        // The same bytes read from one byte in are other instructions: the E8 there is not a
        // call at the same place, so no site is placed inside an instruction.
        let shifted = call_returns(&WRAPPER[1..], 0x47ba81, 0x45c8c0);
        assert!(shifted.iter().all(|&r| r == 0x47baa5), "{shifted:x?}");
    }

    /// Builds the Go test program (crates/cli/tests/programs/gomutex) with `flags`; `None`
    /// (and a printed reason) without `go`.
    fn build_go(name: &str, flags: &[&str]) -> Option<Vec<u8>> {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../cli/tests/programs/gomutex/main.go");
        let dir = std::env::temp_dir().join(format!("lockmeter-golang-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join(name);
        let ran = std::process::Command::new("go")
            .arg("build")
            .args(flags)
            .arg("-o")
            .arg(&out)
            .arg(&src)
            .env("GOFLAGS", "")
            .output();
        let Ok(ran) = ran else {
            eprintln!("SKIPPED: no `go` to build {}", src.display());
            return None;
        };
        assert!(ran.status.success(), "go build: {}", String::from_utf8_lossy(&ran.stderr));
        let data = std::fs::read(&out).unwrap();
        let _ = std::fs::remove_file(&out);
        let _ = std::fs::remove_dir(&dir);
        Some(data)
    }

    #[test]
    fn go_programs_are_inspected() {
        let Some(exe) = build_go("gomutex", &[]) else { return };
        let Inspection::Go(g) = inspect(exe.as_slice()) else {
            panic!("{:?}", inspect(exe.as_slice()))
        };
        assert!(g.version.starts_with("go1."), "{}", g.version);
        let roles: Vec<Role> = g.begins.iter().map(|b| b.0).collect();
        assert_eq!(roles, [Role::Mutex, Role::RwRead, Role::RwWrite]);
        assert_eq!(g.ends.len(), 3);
        for ((_, b), e) in g.begins.iter().zip(&g.ends) {
            // The end is inside the wrapper, after a 5-byte call; offsets follow addresses.
            assert!(e.vaddr > b.vaddr + 5 && e.vaddr < b.vaddr + 200, "{b:x?} {e:x?}");
            assert_eq!(e.offset - b.offset, e.vaddr - b.vaddr);
            assert_eq!(exe[e.offset as usize - 5], 0xe8);
        }
        assert!(!g.releases.is_empty());
        assert!(g.rwlock.0 != 0 && g.rwlock.1 > g.rwlock.0);
        // The runtime's code ranges hold the wrappers' file offsets.
        for (_, b) in &g.begins {
            assert!(g.runtime_code.iter().any(|r| b.offset >= r.0 && b.offset < r.1));
        }
        // Position-independent: the same sites, at other addresses.
        let Some(pie) = build_go("gomutex-pie", &["-buildmode=pie"]) else { return };
        let Inspection::Go(p) = inspect(pie.as_slice()) else {
            panic!("{:?}", inspect(pie.as_slice()))
        };
        assert_eq!(p.begins.len(), 3);
        // Stripped of its symbol table: said so.
        let Some(stripped) = build_go("gomutex-s", &["-ldflags=-s"]) else { return };
        match inspect(stripped.as_slice()) {
            Inspection::Unsupported { version: Some(v), why } => {
                assert_eq!(v, g.version);
                assert!(why.contains("no symbol table"), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn not_go() {
        assert_eq!(inspect(&b"#!/bin/sh\n"[..]), Inspection::NotGo);
        let me = std::fs::read("/proc/self/exe").unwrap();
        assert_eq!(inspect(me.as_slice()), Inspection::NotGo);
        let me = std::path::Path::new("/proc/self/exe");
        assert_eq!(inspect_file(me), Inspection::NotGo);
        assert_eq!(inspect_file(std::path::Path::new("/nonexistent")), Inspection::NotGo);
    }
}

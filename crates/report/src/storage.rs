//! Where a lock object lives, from the process's memory map at the end of the run: a lock with no
//! symbol of its own is named by its storage and its first use ("stack lock first used at f").

use lockmeter_format::model::MapEntry;

/// The memory a lock object lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    /// The data of a loaded program or library (a global or `static`).
    Static,
    /// A thread's stack: the main thread's `[stack]`, or another thread's (the collector marks
    /// the mappings that hold a live thread's stack `[thread stack]`).
    Stack,
    /// The heap: `[heap]` (brk), or private anonymous memory (malloc's other arenas and large
    /// blocks).
    Heap,
    /// A shared mapping, or a mapped file that is not a loaded image (e.g. a process-shared lock
    /// in shared memory).
    Mapped,
    /// No mapping holds the address any more (unmapped before the end of the run), or there is
    /// no map.
    Unknown,
}

/// The path the collector gives the anonymous mappings that hold a live thread's stack.
pub const THREAD_STACK: &str = "[thread stack]";

impl Storage {
    /// The word before "lock" in a name: `static`, `stack`, `heap`, `mapped`; empty when unknown.
    pub fn as_str(self) -> &'static str {
        match self {
            Storage::Static => "static",
            Storage::Stack => "stack",
            Storage::Heap => "heap",
            Storage::Mapped => "mapped",
            Storage::Unknown => "",
        }
    }

    /// The storage of `address` in `maps` (the process's mappings, as in `/proc/PID/maps`).
    pub fn of(maps: &[MapEntry], address: u64) -> Storage {
        let Some(m) = maps.iter().find(|m| m.start <= address && address < m.end) else {
            return Storage::Unknown;
        };
        let shared = m.perms.as_bytes().get(3) == Some(&b's');
        match m.path.as_str() {
            "[stack]" | THREAD_STACK => Storage::Stack,
            _ if m.path.starts_with("[stack:") => Storage::Stack,
            "[heap]" => Storage::Heap,
            _ if shared => Storage::Mapped,
            "" => Storage::Heap,
            p if p.starts_with('[') => Storage::Mapped,
            // A file some mapping of which is executable is a loaded image: its data is static.
            p if maps.iter().any(|o| o.path == p && o.perms.as_bytes().get(2) == Some(&b'x')) => {
                Storage::Static
            }
            _ => Storage::Mapped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(start: u64, end: u64, perms: &str, path: &str) -> MapEntry {
        MapEntry { start, end, offset: 0, perms: perms.into(), path: path.into() }
    }

    #[test]
    fn each_kind_of_mapping_names_its_storage() {
        let maps = [
            m(0x1000, 0x2000, "r-xp", "/usr/bin/app"),
            m(0x2000, 0x3000, "rw-p", "/usr/bin/app"),
            m(0x3000, 0x4000, "rw-p", "[heap]"),
            m(0x4000, 0x5000, "rw-p", ""),
            m(0x5000, 0x6000, "rw-p", THREAD_STACK),
            m(0x6000, 0x7000, "rw-s", "/dev/zero (deleted)"),
            m(0x7000, 0x8000, "rw-p", "/var/db/table.bin"),
            m(0x8000, 0x9000, "rw-p", "[stack]"),
            m(0x9000, 0xa000, "rw-s", "/dev/shm/q"),
        ];
        let want = [
            (0x2010, Storage::Static),
            (0x3010, Storage::Heap),
            (0x4010, Storage::Heap),
            (0x5010, Storage::Stack),
            (0x6010, Storage::Mapped),
            (0x7010, Storage::Mapped),
            (0x8ff0, Storage::Stack),
            (0x9000, Storage::Mapped),
            (0xa000, Storage::Unknown),
            (0x10, Storage::Unknown),
        ];
        for (a, s) in want {
            assert_eq!(Storage::of(&maps, a), s, "{a:#x}");
        }
        assert_eq!(Storage::of(&[], 0x2010), Storage::Unknown);
        assert_eq!(Storage::Stack.as_str(), "stack");
    }
}

//! The names of locks known by their first use: which frame of the first-use stack names a lock
//! (past the C library, and past a wrapper every lock shares, to where the callers differ), and
//! the name it makes (`heap lock first used at <function> (<file>:<line>) via <wrapper>`).

use std::collections::HashMap;

use lockmeter_format::model::{LockInfo, LockKind};

use crate::storage::Storage;
use crate::symbolize::Frame;

/// `heap lock first used at <function> (<file>:<line>)` from a first-use stack: its first frame
/// outside the C library (frames[0] is already the caller of the lock function), or the frame
/// `depth` frames further out, naming the wrapper it went through (`... via lock_wrapper`), after
/// the lock's storage (`static`, `stack`, `heap`, `mapped`; plain `lock` when its memory was
/// unmapped before the end). A
/// futex word (seen by the kernel collector) reads `futex 0x… first waited at <function>`, a Go
/// mutex `go-mutex 0x… first waited at <function>`. A frame without a function (a stripped
/// module) is named `module+0xOFFSET`. `None` when the frame has neither.
pub(super) fn first_use_name(
    l: &LockInfo,
    storage: Storage,
    frames: &[Frame],
    depth: usize,
) -> Option<String> {
    let user = user_frames(frames);
    let f = user.get(depth).or(user.first())?;
    if f.function.is_none() && f.module.is_none() {
        return None;
    }
    let address = l.address;
    let what = match l.kind {
        LockKind::Futex => format!("futex {address:#x} first waited at"),
        LockKind::GoMutex | LockKind::GoRwMutex => {
            format!("{} {address:#x} first waited at", l.kind.as_str())
        }
        _ if storage == Storage::Unknown => "lock first used at".to_owned(),
        _ => format!("{} lock first used at", storage.as_str()),
    };
    let at = match (&f.function, f.short_location()) {
        (Some(func), Some(loc)) => format!("{func} ({loc})"),
        _ => f.to_string(),
    };
    let via = match user.first() {
        Some(w) if depth > 0 && !std::ptr::eq(w, f) => {
            format!(" via {}", w.function.clone().unwrap_or_else(|| w.to_string()))
        }
        _ => String::new(),
    };
    Some(format!("{what} {at}{via}"))
}

/// A first-use stack from its first frame outside the C library (all of it if none is).
fn user_frames(frames: &[Frame]) -> &[Frame] {
    let i = frames
        .iter()
        .position(|f| !f.module.as_deref().is_some_and(lockmeter_core::stacks::is_system_library))
        .unwrap_or(0);
    &frames[i..]
}

/// For each first-use stack (`None`: the lock is named otherwise), the depth of the frame that
/// names it. Locks whose first use went through one wrapper (an allocator or lock wrapper every
/// lock shares, such as `sqlite3MutexAlloc` or `g_mutex_lock`) share their first frame; for
/// them, the first depth at which their stacks differ names them instead, so that each lock is
/// named by where the program used it. Locks whose stacks never differ keep their first frame.
pub(super) fn naming_depths(stacks: &[Option<&[Frame]>]) -> Vec<usize> {
    let users: Vec<Option<&[Frame]>> = stacks.iter().map(|s| s.map(user_frames)).collect();
    let mut depth = vec![0usize; stacks.len()];
    let at = |i: usize, d: usize| users[i].and_then(|u| u.get(d)).map(|f| f.address);
    // Groups still to split: locks with the same frame at depth `d`.
    let mut work: Vec<(Vec<usize>, usize)> = Vec::new();
    let mut by_first: HashMap<u64, Vec<usize>> = HashMap::new();
    for i in 0..stacks.len() {
        if let Some(a) = at(i, 0) {
            by_first.entry(a).or_default().push(i);
        }
    }
    work.extend(by_first.into_values().filter(|g| g.len() > 1).map(|g| (g, 0)));
    while let Some((group, d)) = work.pop() {
        let longest = group.iter().filter_map(|&i| users[i].map(<[Frame]>::len)).max().unwrap_or(0);
        let Some(k) =
            (d + 1..longest).find(|&k| group.iter().any(|&i| at(i, k) != at(group[0], k)))
        else {
            continue;
        };
        let mut sub: HashMap<Option<u64>, Vec<usize>> = HashMap::new();
        for &i in &group {
            if at(i, k).is_some() {
                depth[i] = k;
            }
            sub.entry(at(i, k)).or_default().push(i);
        }
        work.extend(
            sub.into_iter().filter(|(a, g)| a.is_some() && g.len() > 1).map(|(_, g)| (g, k)),
        );
    }
    depth
}

#[cfg(test)]
mod tests {
    use super::naming_depths;
    use crate::symbolize::Frame;

    fn frames(addrs: &[u64]) -> Vec<Frame> {
        addrs
            .iter()
            .map(|&a| Frame { address: a, module: Some("app".into()), ..Frame::default() })
            .collect()
    }

    #[test]
    fn a_shared_wrapper_is_skipped_to_where_the_callers_differ() {
        // Three locks through lock_it (0x10) and take (0x20), from three callers; one lock
        // first used elsewhere; two locks of one loop (same stack all the way) keep their frame.
        let a = frames(&[0x10, 0x20, 0x31, 0x90]);
        let b = frames(&[0x10, 0x20, 0x32, 0x90]);
        let c = frames(&[0x10, 0x20, 0x33, 0x90]);
        let d = frames(&[0x50, 0x90]);
        let e = frames(&[0x60, 0x70]);
        let f = frames(&[0x60, 0x70]);
        let stacks = [
            Some(&a[..]),
            Some(&b[..]),
            Some(&c[..]),
            Some(&d[..]),
            None,
            Some(&e[..]),
            Some(&f[..]),
        ];
        assert_eq!(naming_depths(&stacks), vec![2, 2, 2, 0, 0, 0, 0]);
        // A lock whose stack ends at the wrapper keeps it; the others move on.
        let g = frames(&[0x10]);
        let stacks = [Some(&a[..]), Some(&g[..]), Some(&b[..])];
        assert_eq!(naming_depths(&stacks), vec![2, 0, 2]);
    }
}

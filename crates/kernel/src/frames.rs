//! Which frames of a recorded stack to keep: return addresses a frame-pointer walk skipped (the
//! leaf's caller, checked against the instruction before it), the tracing machinery above a
//! kernel stack, the locking code itself and the C library below the caller that matters.

use crate::procfs::Kallsyms;
use lockmeter_format::MapEntry;
use std::collections::HashMap;

/// Whether a kernel function is part of the locking code itself (skipped to find the caller).
pub(crate) fn is_lock_function(name: &str) -> bool {
    const PARTS: [&str; 14] = [
        "lock",
        "mutex",
        "rwsem",
        "down_",
        "_down",
        "up_",
        "sem_",
        "contention",
        "queued_",
        "osq_",
        "schedule",
        "rt_",
        "__cond_resched",
        "preempt",
    ];
    PARTS.iter().any(|p| name.contains(p)) || name == "down" || name == "up"
}

/// Whether `addr` follows a call instruction in the file mapped at `addr` (x86_64: `call rel32`,
/// `call *reg`, `call *disp8(reg)`, `call *disp32(reg)` / `call *rip+disp32`; aarch64: `bl` or
/// `blr`). A word read at a leaf function's stack pointer (or the link register) is a return
/// address only then; anything else there (a saved register, data) is not a frame.
pub fn is_return_address(maps: &[MapEntry], addr: u64) -> bool {
    let Some(m) = maps.iter().find(|m| addr >= m.start && addr < m.end) else { return false };
    if !m.perms.contains('x') || !m.path.starts_with('/') || addr < m.start + 8 {
        return false;
    }
    let mut b = [0u8; 8];
    let at = addr - m.start + m.offset - 8;
    let ok = std::fs::File::open(&m.path)
        .is_ok_and(|f| std::os::unix::fs::FileExt::read_exact_at(&f, &mut b, at).is_ok());
    ok && follows_call(&b)
}

/// `before` is the 8 bytes before a candidate return address.
fn follows_call(before: &[u8; 8]) -> bool {
    if cfg!(target_arch = "aarch64") {
        let insn = u32::from_le_bytes([before[4], before[5], before[6], before[7]]);
        return insn & 0xfc00_0000 == 0x9400_0000 || insn & 0xffff_fc1f == 0xd63f_0000;
    }
    let modrm_call = |modrm: u8| (modrm >> 3) & 7 == 2;
    before[3] == 0xe8 // call rel32
        || (before[6] == 0xff && modrm_call(before[7]) && before[7] >> 6 == 3) // call *%reg
        || (before[5] == 0xff && modrm_call(before[6]) && before[6] >> 6 == 1) // call *d8(%reg)
        || (before[2] == 0xff && modrm_call(before[3]) && (before[3] >> 6 == 2 || before[3] & 0xc7 == 0x05)) // call *d32(%reg), *d32(%rip)
}

/// `stack` with `leaf` inserted as the caller of its first frame, when it is a return address
/// the frame-pointer walk skipped.
pub(crate) fn with_leaf(
    mut stack: Vec<u64>,
    leaf: u64,
    maps: &[MapEntry],
    memo: &mut HashMap<u64, bool>,
) -> Vec<u64> {
    if leaf == 0 || stack.is_empty() || stack.get(1) == Some(&leaf) || stack[0] == leaf {
        return stack;
    }
    if *memo.entry(leaf).or_insert_with(|| is_return_address(maps, leaf)) {
        stack.insert(1, leaf);
    }
    stack
}

/// Whether a user address lies in the C library or the dynamic loader (skipped to find the
/// program's own call site of a futex wait).
pub(crate) fn in_libc(maps: &[MapEntry], addr: u64) -> bool {
    maps.iter().any(|m| {
        addr >= m.start
            && addr < m.end
            && m.path.starts_with('/')
            && m.path.rsplit('/').next().is_some_and(lockmeter_core::stacks::is_system_library)
    })
}

/// Kernel functions of the tracing machinery itself: the BPF program and the raw tracepoint
/// that called it.
fn is_tracing_function(name: &str) -> bool {
    ["bpf_prog_", "bpf_trace_run", "__bpf_trace_", "__traceiter_", "__bpf_prog_"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// A kernel stack from a raw tracepoint starts in the BPF program and the tracepoint's
/// trampoline: the frames above the lock code are dropped (unnamed ones too, as BPF programs
/// are unnamed without bpf_jit_kallsyms).
pub(crate) fn without_tracing_frames(stack: &[u64], ks: &Kallsyms) -> Vec<u64> {
    let from = stack
        .iter()
        .position(|&f| {
            ks.lookup(f.wrapping_sub(1)).is_some_and(|s| s.3 && !is_tracing_function(s.2))
        })
        .unwrap_or(0);
    stack[from..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn return_addresses_follow_calls() {
        // call rel32 (e8 xx xx xx xx), call *%rax (ff d0), call *0x8(%rbx) (ff 53 08),
        // call *0x1234(%rip) (ff 15 34 12 00 00).
        assert!(follows_call(&[0x90, 0x90, 0x90, 0xe8, 1, 2, 3, 4]));
        assert!(follows_call(&[0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xff, 0xd0]));
        assert!(follows_call(&[0x90, 0x90, 0x90, 0x90, 0x90, 0xff, 0x53, 0x08]));
        assert!(follows_call(&[0x90, 0x90, 0xff, 0x15, 0x34, 0x12, 0, 0]));
        // A push, a mov, data: not a return address.
        assert!(!follows_call(&[0x90; 8]));
        assert!(!follows_call(&[0x48, 0x89, 0xe5, 0x55, 0x41, 0x54, 0x53, 0xc3]));
        // jmp *%rax (ff e0) is not a call.
        assert!(!follows_call(&[0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0xff, 0xe0]));
    }
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// lockmeter's kernel collector: kernel lock contention (lock:contention_begin/end) and the
// futex waits of traced processes (sys_enter/exit_futex, futex_wait, futex_waitv), aggregated
// in BPF hash maps: count, total, max and a log2 histogram per (process, thread, lock, stack,
// other stack). Nothing is sent per event. What does not fit is counted in `drops`.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "maps.bpf.h"
#include "processes.bpf.h"
#include "holders.bpf.h"
#include "klocks.bpf.h"
#include "futex.bpf.h"
#include "go.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

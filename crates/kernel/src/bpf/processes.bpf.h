// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// Part of lockmeter.bpf.c (included there, in order; not compiled alone). Processes: fork adds a traced process's children, exit records the join words threads clear.
#pragma once

/* ---- processes ---- */

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	if (trace_all)
		return 0;
	/* A new thread of a traced process is traced through its tgid already. */
	if (child->pid != child->tgid)
		return 0;
	__u32 ptgid = parent->tgid;
	if (!bpf_map_lookup_elem(&tgids, &ptgid))
		return 0;
	__u32 c = child->tgid;
	__u8 one = 1;
	bpf_map_update_elem(&tgids, &c, &one, BPF_ANY);
	return 0;
}

/* The word each exiting thread of a traced process clears and wakes (CLONE_CHILD_CLEARTID:
 * glibc's pthread_join waits on it), so that user space can name those futex waits. */
struct join_key {
	__u64 addr;
	__u32 tgid;
	__u32 pad;
};

MAP(joinwords, BPF_MAP_TYPE_LRU_HASH, MAX_TASKS, struct join_key, __u32);

SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_exit, struct task_struct *p)
{
	__u32 tgid = p->tgid;
	if (!want_futex || !traced(tgid))
		return 0;
	struct join_key k = {};
	k.addr = (__u64)p->clear_child_tid;
	k.tgid = tgid;
	__u32 tid = p->pid;
	if (k.addr)
		bpf_map_update_elem(&joinwords, &k, &tid, BPF_ANY);
	return 0;
}

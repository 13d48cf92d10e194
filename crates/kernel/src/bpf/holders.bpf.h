// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// Part of lockmeter.bpf.c (included there, in order; not compiled alone). Lock-holder preemption (run --kernel): the preload's held-lock stacks read from BPF.
#pragma once

/* ---- lock-holder preemption (run --kernel) ---- */

/* Where each thread's stack of held locks lives in the preload (told by a uprobe on
 * lockmeter_thread_held): the array of entries (the lock address first in each), its length. */
struct heldinfo {
	__u64 base;
	__u32 len_off;
	__u32 esize;
};

MAP(held, BPF_MAP_TYPE_HASH, MAX_TASKS, __u32, struct heldinfo);

struct lock_key {
	__u64 addr;
	__u32 tgid;
	__u32 pad;
};

/* Per lock: since when its holder is switched out (0: it is not), and the total of such time. */
struct lstate_val {
	__u64 since;
	__u64 total;
};

MAP(lstate, BPF_MAP_TYPE_HASH, MAX_AGG, struct lock_key, struct lstate_val);

/* A switched-out holder: the lock on top of its held stack. */
struct preempted_hold {
	__u64 ts;
	__u64 addr;
	__u32 tgid;
	__u32 pad;
};

MAP(pstart, BPF_MAP_TYPE_HASH, MAX_TASKS, __u32, struct preempted_hold);

/* Per lock: holds preempted (switch-outs), their time, and the waiters' sleep inside them. */
struct preempt_val {
	__u64 holds;
	__u64 ns;
	__u64 wait_ns;
};

MAP(preempt, BPF_MAP_TYPE_HASH, MAX_AGG, struct lock_key, struct preempt_val);

SEC("uprobe")
int BPF_UPROBE(on_thread_held, void *base, __u64 len_off, __u64 esize)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	if (!traced(tgid))
		return 0;
	struct heldinfo h = {};
	h.base = (__u64)base;
	h.len_off = len_off;
	h.esize = esize;
	if (bpf_map_update_elem(&held, &tid, &h, BPF_ANY))
		drop(D_TASK);
	return 0;
}

/* The lock's holder-preempted time up to now. */
static __always_inline __u64 preempted_so_far(__u32 tgid, __u64 addr, __u64 now)
{
	struct lock_key k = {};
	k.addr = addr;
	k.tgid = tgid;
	struct lstate_val *v = bpf_map_lookup_elem(&lstate, &k);
	if (!v)
		return 0;
	return v->total + (v->since ? now - v->since : 0);
}

static __always_inline struct preempt_val *preempt_of(struct lock_key *k)
{
	struct preempt_val *v = bpf_map_lookup_elem(&preempt, k);
	if (v)
		return v;
	struct preempt_val zero = {};
	bpf_map_update_elem(&preempt, k, &zero, BPF_NOEXIST);
	v = bpf_map_lookup_elem(&preempt, k);
	if (!v)
		drop(D_AGG);
	return v;
}

/* As nivcsw counts: switched out while runnable (preempted, or yielded the CPU). */
SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt_flag, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	if (stopped)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	__u32 ntid = next->pid;
	struct preempted_hold *ph = bpf_map_lookup_elem(&pstart, &ntid);
	if (ph) {
		struct lock_key k = {};
		k.addr = ph->addr;
		k.tgid = ph->tgid;
		__u64 dur = now - ph->ts;
		struct preempt_val *v = preempt_of(&k);
		if (v) {
			__sync_fetch_and_add(&v->holds, 1);
			__sync_fetch_and_add(&v->ns, dur);
		}
		struct lstate_val *ls = bpf_map_lookup_elem(&lstate, &k);
		if (ls && ls->since) {
			ls->total += now - ls->since;
			ls->since = 0;
		}
		bpf_map_delete_elem(&pstart, &ntid);
	}
	if (!(preempt_flag || prev_state == 0))
		return 0;
	__u32 ptid = prev->pid;
	struct heldinfo *h = bpf_map_lookup_elem(&held, &ptid);
	if (!h)
		return 0;
	/* prev is still the current task here: its memory is readable. */
	__u64 len = 0, addr = 0;
	if (bpf_probe_read_user(&len, sizeof(len), (void *)(h->base + h->len_off)) || len == 0 || len > 64)
		return 0;
	if (bpf_probe_read_user(&addr, sizeof(addr), (void *)(h->base + (len - 1) * h->esize)) || !addr)
		return 0;
	struct preempted_hold p = {};
	p.ts = now;
	p.addr = addr;
	p.tgid = prev->tgid;
	if (bpf_map_update_elem(&pstart, &ptid, &p, BPF_ANY)) {
		drop(D_TASK);
		return 0;
	}
	struct lock_key k = {};
	k.addr = addr;
	k.tgid = p.tgid;
	struct lstate_val *ls = bpf_map_lookup_elem(&lstate, &k);
	if (!ls) {
		struct lstate_val zero = {};
		bpf_map_update_elem(&lstate, &k, &zero, BPF_NOEXIST);
		ls = bpf_map_lookup_elem(&lstate, &k);
	}
	if (ls && !ls->since)
		ls->since = now;
	return 0;
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// Part of lockmeter.bpf.c (included there, in order; not compiled alone). Kernel locks: lock:contention_begin/end.
#pragma once

/* ---- kernel locks ---- */

SEC("tp_btf/contention_begin")
int BPF_PROG(on_contention_begin, void *lock_addr, unsigned int flags)
{
	if (!want_kernel)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	if (!traced(tgid))
		return 0;
	struct knest *n = bpf_map_lookup_elem(&kstart, &tid);
	if (!n) {
		__u32 z = 0;
		struct knest *zero = bpf_map_lookup_elem(&zero_nest, &z);
		if (!zero)
			return 0;
		zero->depth = 0;
		if (bpf_map_update_elem(&kstart, &tid, zero, BPF_NOEXIST)) {
			drop(D_TASK);
			return 0;
		}
		n = bpf_map_lookup_elem(&kstart, &tid);
		if (!n)
			return 0;
	}
	__u64 lock = (__u64)lock_addr;
	__u32 d = n->depth;
	/* A mutex that spins first begins twice (SPIN|MUTEX, then MUTEX): one contention. */
	if (d > 0 && d <= NEST && n->w[(d - 1) & (NEST - 1)].lock == lock) {
		n->w[(d - 1) & (NEST - 1)].flags = flags;
		return 0;
	}
	if (d >= NEST) {
		drop(D_NEST);
		return 0;
	}
	struct kwait *w = &n->w[d & (NEST - 1)];
	w->ts = bpf_ktime_get_ns();
	w->lock = lock;
	w->flags = flags;
	w->stack = stack_id(ctx, 0);
	w->ustack = stack_id(ctx, BPF_F_USER_STACK);
	w->uleaf = w->ustack >= 0 ? user_leaf() : 0;
	/* mmap_lock and siglock of the current task, recognized by address. */
	w->pad = 0;
	struct task_struct *t = (struct task_struct *)bpf_get_current_task();
	struct mm_struct *mm = BPF_CORE_READ(t, mm);
	if (mm && lock == (__u64)mm + bpf_core_field_offset(struct mm_struct, mmap_lock))
		w->pad = HINT_MMAP_LOCK;
	/* This CPU's run-queue (through the task's CFS queue, where group scheduling has one). */
	if (bpf_core_field_exists(struct cfs_rq, rq)) {
		struct rq *rq = BPF_CORE_READ(t, se.cfs_rq, rq);
		__u32 cpu = bpf_get_smp_processor_id();
		__u64 *slot = bpf_map_lookup_elem(&rqlocks, &cpu);
		if (rq && slot && BPF_CORE_READ(rq, cpu) == (int)cpu) {
			__u64 rqlock = (__u64)rq + bpf_core_field_offset(struct rq, __lock);
			if (*slot != rqlock)
				*slot = rqlock;
		}
	}
	struct sighand_struct *sh = BPF_CORE_READ(t, sighand);
	if (sh && lock == (__u64)sh + bpf_core_field_offset(struct sighand_struct, siglock))
		w->pad = HINT_SIGLOCK;
	n->depth = d + 1;
	return 0;
}

static __always_inline void kind_mode(__u32 f, __u32 *kind, __u32 *mode)
{
	*mode = (f & LCB_F_READ) ? M_READ : (f & LCB_F_WRITE) ? M_WRITE : M_EXCL;
	if (f & LCB_F_MUTEX)
		*kind = K_MUTEX;
	else if (f & LCB_F_RT)
		*kind = K_RTMUTEX;
	else if (f & LCB_F_SPIN)
		*kind = (f & (LCB_F_READ | LCB_F_WRITE)) ? K_RWLOCK : K_SPIN;
	else if (f & LCB_F_PERCPU)
		*kind = K_PERCPU_RWSEM;
	else if (f & (LCB_F_READ | LCB_F_WRITE))
		*kind = K_RWSEM;
	else
		*kind = K_SEM;
}

SEC("tp_btf/contention_end")
int BPF_PROG(on_contention_end, void *lock_addr, int ret)
{
	if (!want_kernel || stopped)
		return 0;
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct knest *n = bpf_map_lookup_elem(&kstart, &tid);
	if (!n || n->depth == 0 || n->depth > NEST)
		return 0;
	__u64 lock = (__u64)lock_addr;
	__u32 d = n->depth;
	/* The innermost contention on this lock (normally the top). */
	int found = -1;
#pragma unroll
	for (int i = NEST - 1; i >= 0; i--) {
		if (found < 0 && (__u32)i < d && n->w[i].lock == lock)
			found = i;
	}
	if (found < 0)
		return 0;
	struct kwait w = n->w[found & (NEST - 1)];
	n->depth = found;
	__u64 now = bpf_ktime_get_ns();
	struct agg_key k = {};
	k.addr = lock;
	k.tgid = tgid;
	k.tid = tid;
	k.stack = w.stack;
	k.other = w.ustack;
	k.oleaf = w.uleaf;
	kind_mode(w.flags, &k.kind, &k.mode);
	k.mode |= w.pad << 8;
	account(&k, now - w.ts);
	return 0;
}

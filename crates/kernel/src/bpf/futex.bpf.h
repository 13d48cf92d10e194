// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// Part of lockmeter.bpf.c (included there, in order; not compiled alone). Futexes: the waits of traced processes (sys_enter/exit_futex, futex_wait, futex_waitv) and their wakers.
#pragma once

/* ---- futexes ---- */

#define FUTEX_WAIT 0
#define FUTEX_WAKE 1
#define FUTEX_REQUEUE 3
#define FUTEX_CMP_REQUEUE 4
#define FUTEX_WAKE_OP 5
#define FUTEX_LOCK_PI 6
#define FUTEX_UNLOCK_PI 7
#define FUTEX_WAIT_BITSET 9
#define FUTEX_WAKE_BITSET 10
#define FUTEX_WAIT_REQUEUE_PI 11
#define FUTEX_LOCK_PI2 13
#define FUTEX_CMD_MASK 127

static __always_inline void futex_wait_begin(void *ctx, __u64 uaddr)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	if (!want_futex || !traced(tgid))
		return;
	struct fwait w = {};
	w.ts = bpf_ktime_get_ns();
	w.uaddr = uaddr;
	w.stack = stack_id(ctx, BPF_F_USER_STACK);
	w.leaf = user_leaf();
	w.c0 = preempted_so_far(tgid, uaddr, w.ts);
	if (bpf_map_update_elem(&fstart, &tid, &w, BPF_ANY))
		drop(D_TASK);
}

static __always_inline void futex_wake(void *ctx, __u64 uaddr)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!want_futex || !traced(tgid))
		return;
	struct wake_key k = {};
	k.uaddr = uaddr;
	k.tgid = tgid;
	struct waker wk = {};
	wk.stack = stack_id(ctx, BPF_F_USER_STACK);
	wk.leaf = user_leaf();
	bpf_map_update_elem(&lastwake, &k, &wk, BPF_ANY);
}

static __always_inline void futex_wait_end(void)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	if (stopped)
		return;
	struct fwait *w = bpf_map_lookup_elem(&fstart, &tid);
	if (!w)
		return;
	__u64 now = bpf_ktime_get_ns();
	struct agg_key k = {};
	k.addr = w->uaddr;
	k.tgid = tgid;
	k.tid = tid;
	k.stack = w->stack;
	k.kind = K_FUTEX;
	k.mode = M_EXCL;
	struct wake_key wk = {};
	wk.uaddr = w->uaddr;
	wk.tgid = tgid;
	struct waker *waker = bpf_map_lookup_elem(&lastwake, &wk);
	k.other = waker ? waker->stack : -1;
	k.oleaf = waker ? waker->leaf : 0;
	k.leaf = w->leaf;
	__u64 ns = now - w->ts;
	/* The part of this wait during which the word's lock had a switched-out holder. */
	__u64 c1 = preempted_so_far(tgid, w->uaddr, now);
	if (c1 > w->c0) {
		struct lock_key lk = {};
		lk.addr = w->uaddr;
		lk.tgid = tgid;
		struct preempt_val *pv = preempt_of(&lk);
		if (pv)
			__sync_fetch_and_add(&pv->wait_ns, c1 - w->c0 < ns ? c1 - w->c0 : ns);
	}
	bpf_map_delete_elem(&fstart, &tid);
	account(&k, ns);
}


/* Raw (BTF) syscall tracepoints: one cheap number check for every syscall, and, unlike the
 * per-syscall perf-event tracepoints, detached without waiting for an RCU grace period each. */
/* The per-syscall perf tracepoints cost other syscalls far less than the raw sys_enter/sys_exit
 * tracepoints would (the raw ones run a BPF program for every syscall of every process). A
 * tracepoint program returns KEEP so that perf's own users of these tracepoints still see them. */
#define KEEP 1

/* The call's arguments, from the user registers (unchanged by the syscall). */
static __always_inline struct pt_regs *user_regs(void)
{
	return (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
}

static __always_inline bool is_wait_cmd(int cmd)
{
	return cmd == FUTEX_WAIT || cmd == FUTEX_WAIT_BITSET || cmd == FUTEX_LOCK_PI ||
	       cmd == FUTEX_LOCK_PI2 || cmd == FUTEX_WAIT_REQUEUE_PI;
}

SEC("tracepoint/syscalls/sys_enter_futex")
int on_futex_enter(struct trace_event_raw_sys_enter *ctx)
{
	if (is_wait_cmd((int)ctx->args[1] & FUTEX_CMD_MASK))
		futex_wait_begin(ctx, ctx->args[0]);
	return KEEP;
}

/* Waits end at syscall exit; a wake is kept only when it woke someone (its return value), so
 * the wakes of an uncontended program cost nothing but this check. */
SEC("tracepoint/syscalls/sys_exit_futex")
int on_futex_exit(struct trace_event_raw_sys_exit *ctx)
{
	struct pt_regs *regs = user_regs();
	long ret = ctx->ret;
	int cmd = (int)PT_REGS_PARM2_CORE_SYSCALL(regs) & FUTEX_CMD_MASK;
	switch (cmd) {
	case FUTEX_WAKE:
	case FUTEX_WAKE_BITSET:
	case FUTEX_WAKE_OP:
	case FUTEX_REQUEUE:
	case FUTEX_CMP_REQUEUE:
		if (ret > 0)
			futex_wake(ctx, PT_REGS_PARM1_CORE_SYSCALL(regs));
		break;
	case FUTEX_UNLOCK_PI:
		if (ret == 0)
			futex_wake(ctx, PT_REGS_PARM1_CORE_SYSCALL(regs));
		break;
	default:
		futex_wait_end();
	}
	return KEEP;
}

/* futex2: futex_wait(uaddr, val, mask, flags, timeout, clockid), futex_wake(uaddr, ...). */
SEC("tracepoint/syscalls/sys_enter_futex_wait")
int on_futex2_wait_enter(struct trace_event_raw_sys_enter *ctx)
{
	futex_wait_begin(ctx, ctx->args[0]);
	return KEEP;
}

SEC("tracepoint/syscalls/sys_exit_futex_wait")
int on_futex2_wait_exit(struct trace_event_raw_sys_exit *ctx)
{
	futex_wait_end();
	return KEEP;
}

SEC("tracepoint/syscalls/sys_exit_futex_wake")
int on_futex2_wake_exit(struct trace_event_raw_sys_exit *ctx)
{
	if (ctx->ret > 0)
		futex_wake(ctx, PT_REGS_PARM1_CORE_SYSCALL(user_regs()));
	return KEEP;
}

/* futex_waitv(waiters, nr, flags, timeout, clockid): the first word names the wait. */
struct futex_waitv_user {
	__u64 val;
	__u64 uaddr;
	__u32 flags;
	__u32 reserved;
};

SEC("tracepoint/syscalls/sys_enter_futex_waitv")
int on_futex_waitv_enter(struct trace_event_raw_sys_enter *ctx)
{
	struct futex_waitv_user first = {};
	if (bpf_probe_read_user(&first, sizeof(first), (void *)ctx->args[0]))
		return KEEP;
	futex_wait_begin(ctx, first.uaddr);
	return KEEP;
}

SEC("tracepoint/syscalls/sys_exit_futex_waitv")
int on_futex_waitv_exit(struct trace_event_raw_sys_exit *ctx)
{
	futex_wait_end();
	return KEEP;
}

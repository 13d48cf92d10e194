// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// lockmeter's kernel collector: kernel lock contention (lock:contention_begin/end) and the
// futex waits of traced processes (sys_enter/exit_futex, futex_wait, futex_waitv), aggregated
// in BPF hash maps: count, total, max and a log2 histogram per (process, thread, lock, stack,
// other stack). Nothing is sent per event. What does not fit is counted in `drops`.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define HIST 65        /* as lockmeter_core::hist::BUCKETS: bucket = 64 - clz(v), 0 for 0 */
#define NEST 4         /* kernel lock contentions nested in one task */
#define MAX_AGG 65536
#define MAX_TASKS 16384

/* Kinds, as lockmeter_core::LockKind. */
#define K_FUTEX 6
#define K_SPIN 7
#define K_RWLOCK 8
#define K_MUTEX 9
#define K_RWSEM 10
#define K_RTMUTEX 11
#define K_PERCPU_RWSEM 12
#define K_SEM 13

/* lock:contention_begin flags (include/trace/events/lock.h). */
#define LCB_F_SPIN (1U << 0)
#define LCB_F_READ (1U << 1)
#define LCB_F_WRITE (1U << 2)
#define LCB_F_RT (1U << 3)
#define LCB_F_PERCPU (1U << 4)
#define LCB_F_MUTEX (1U << 5)

/* Modes, as lockmeter_core::Mode. */
#define M_EXCL 0
#define M_READ 1
#define M_WRITE 2

/* Names the BPF side recognizes (as profile.rs HINT_*). */
#define HINT_MMAP_LOCK 1
#define HINT_SIGLOCK 2

/* Drop counters. */
#define D_AGG 0     /* an aggregate did not fit */
#define D_TASK 1    /* a per-task start did not fit */
#define D_STACK 2   /* a stack could not be taken (map full or unwinding failed) */
#define D_NEST 3    /* kernel contention nested deeper than NEST */
#define D_MAX 4

const volatile bool trace_all = false;
const volatile bool want_kernel = true;
const volatile bool want_futex = true;
const volatile __u32 self_tgid = 0;

/* Processes traced (when not trace_all): tgid -> 1. Children are added on fork. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, __u32);
	__type(value, __u8);
} tgids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, 16384);
	__uint(key_size, sizeof(__u32));
	__uint(value_size, 127 * sizeof(__u64));
} stacks SEC(".maps");

struct agg_key {
	__u64 addr;       /* lock address (kernel) or futex word (user) */
	__u32 tgid;
	__u32 tid;
	__s32 stack;      /* waiter stack id (kernel stack for kernel locks, user stack for futexes) */
	__s32 other;      /* futex: the waker's user stack id (-1: unknown); kernel: user stack id */
	__u32 kind;
	__u32 mode;
	/* The return address a leaf function left (x86: the word at the user stack pointer; arm64:
	 * the link register) for the waiter's and the other user stack: frame-pointer walks miss the
	 * caller of a leaf such as glibc's syscall() or mmap(). User space keeps it only when the
	 * instruction before it is a call. */
	__u64 leaf;
	__u64 oleaf;
};

struct agg_val {
	__u64 count;
	__u64 total_ns;
	__u64 max_ns;
	__u64 hist[HIST];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_AGG);
	__type(key, struct agg_key);
	__type(value, struct agg_val);
} agg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, D_MAX);
	__type(key, __u32);
	__type(value, __u64);
} drops SEC(".maps");

/* The scheduler's run-queue lock of each CPU that saw a contention (its address), so that user
 * space can name rq locks. */
#define MAX_CPUS 1024
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_CPUS);
	__type(key, __u32);
	__type(value, __u64);
} rqlocks SEC(".maps");

struct kwait {
	__u64 ts;
	__u64 lock;
	__u32 flags;
	__s32 stack;
	__s32 ustack;
	__u32 pad;
	__u32 pad2;
	__u64 uleaf;
};

struct knest {
	__u32 depth;
	__u32 pad;
	struct kwait w[NEST];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_TASKS);
	__type(key, __u32);
	__type(value, struct knest);
} kstart SEC(".maps");

struct fwait {
	__u64 ts;
	__u64 uaddr;
	__s32 stack;
	__u32 pad;
	__u64 leaf;
	__u64 c0; /* the word's lock: holder-preempted time so far (see lstate) */
};

struct waker {
	__s32 stack;
	__u32 pad;
	__u64 leaf;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_TASKS);
	__type(key, __u32);
	__type(value, struct fwait);
} fstart SEC(".maps");

struct wake_key {
	__u64 uaddr;
	__u32 tgid;
	__u32 pad;
};

/* The last waker of each futex word: its user stack id. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_AGG);
	__type(key, struct wake_key);
	__type(value, struct waker);
} lastwake SEC(".maps");

/* Scratch space for a zeroed knest (too large for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct knest);
} zero_nest SEC(".maps");

/* A zeroed aggregate (too large for the BPF stack); never written. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct agg_val);
} zero_val SEC(".maps");

static __always_inline void drop(__u32 what)
{
	__u64 *d = bpf_map_lookup_elem(&drops, &what);
	if (d)
		__sync_fetch_and_add(d, 1);
}

/* Set by user space when the recording ends: the maps stop changing before they are read, and
 * the programs may stay attached a little longer (detaching is done in the background). */
__u32 stopped = 0;

static __always_inline bool traced(__u32 tgid)
{
	if (stopped)
		return false;
	if (tgid == self_tgid)
		return false;
	if (trace_all)
		return true;
	return bpf_map_lookup_elem(&tgids, &tgid) != NULL;
}

static __always_inline __u32 log2_bucket(__u64 v)
{
	__u32 r = 0, s;
	if (!v)
		return 0;
	s = (v > 0xFFFFFFFFULL) << 5; v >>= s; r = s;
	s = (v > 0xFFFF) << 4; v >>= s; r |= s;
	s = (v > 0xFF) << 3; v >>= s; r |= s;
	s = (v > 0xF) << 2; v >>= s; r |= s;
	s = (v > 0x3) << 1; v >>= s; r |= s;
	r |= (v >> 1);
	return r + 1; /* most significant bit index + 1, as Log2Hist */
}

static __always_inline void account(struct agg_key *k, __u64 ns)
{
	struct agg_val *v = bpf_map_lookup_elem(&agg, k);
	if (!v) {
		__u32 z = 0;
		struct agg_val *zero = bpf_map_lookup_elem(&zero_val, &z);
		if (!zero)
			return;
		/* Fails harmlessly when another CPU inserted it first, or when the map is full. */
		bpf_map_update_elem(&agg, k, zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&agg, k);
		if (!v) {
			drop(D_AGG);
			return;
		}
	}
	__sync_fetch_and_add(&v->count, 1);
	__sync_fetch_and_add(&v->total_ns, ns);
	if (ns > v->max_ns)
		v->max_ns = ns; /* a racing update may lose a max; counts and totals are exact */
	__u32 b = log2_bucket(ns);
	if (b < HIST)
		__sync_fetch_and_add(&v->hist[b], 1);
}

static __always_inline __u64 user_leaf(void)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(t);
	__u64 v = 0;
	if (!regs)
		return 0;
#if defined(__TARGET_ARCH_arm64)
	v = PT_REGS_RET_CORE(regs);
#else
	__u64 sp = PT_REGS_SP_CORE(regs);
	if (sp && bpf_probe_read_user(&v, sizeof(v), (void *)sp))
		v = 0;
#endif
	return v;
}

static __always_inline __s32 stack_id(void *ctx, __u64 flags)
{
	long id = bpf_get_stackid(ctx, &stacks, flags);
	if (id < 0) {
		drop(D_STACK);
		return -1;
	}
	return id;
}

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

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_TASKS);
	__type(key, struct join_key);
	__type(value, __u32);
} joinwords SEC(".maps");

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

/* ---- lock-holder preemption (run --kernel) ---- */

/* Where each thread's stack of held locks lives in the preload (told by a uprobe on
 * lockmeter_thread_held): the array of entries (the lock address first in each), its length. */
struct heldinfo {
	__u64 base;
	__u32 len_off;
	__u32 esize;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_TASKS);
	__type(key, __u32);
	__type(value, struct heldinfo);
} held SEC(".maps");

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

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_AGG);
	__type(key, struct lock_key);
	__type(value, struct lstate_val);
} lstate SEC(".maps");

/* A switched-out holder: the lock on top of its held stack. */
struct preempted_hold {
	__u64 ts;
	__u64 addr;
	__u32 tgid;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_TASKS);
	__type(key, __u32);
	__type(value, struct preempted_hold);
} pstart SEC(".maps");

/* Per lock: holds preempted (switch-outs), their time, and the waiters' sleep inside them. */
struct preempt_val {
	__u64 holds;
	__u64 ns;
	__u64 wait_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_AGG);
	__type(key, struct lock_key);
	__type(value, struct preempt_val);
} preempt SEC(".maps");

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

/* ---- Go: sync.Mutex / sync.RWMutex waits in the Go runtime's semaphore (uprobes) ----
 *
 * User space (golang.rs) finds, in each traced Go executable, the entry of the runtime's
 * semacquire wrappers (a wait begins), the instruction after each wrapper's call of
 * runtime.semacquire1 (the wait ends) and the entry of runtime_Semrelease (a holder wakes a
 * waiter). One program serves them all: the attach cookie says which site it is (low byte)
 * and which executable (the rest). It is attached as one uprobe.multi link per executable where
 * the kernel has them (one detach), else as plain uprobes.
 * Go's register ABI (amd64): arguments in RAX, RBX, ...; the current goroutine (g) in R14.
 * Goroutines move between threads, so a wait is keyed by goroutine, not by thread. */

#define K_GO_MUTEX 14
#define K_GO_RWMUTEX 15

/* Wrappers (golang.rs Role). */
#define GO_MUTEX 1      /* (*Mutex).lockSlow: the semaphore is Mutex.sema (+4) */
#define GO_RWMUTEX_R 2  /* (*RWMutex).RLock: RWMutex.readerSem (+12) */
#define GO_RWMUTEX_W 3  /* (*RWMutex).Lock waiting for readers: RWMutex.writerSem (+8) */
#define GO_END 4        /* after a wrapper's call of runtime.semacquire1 */
#define GO_RELEASE 5    /* runtime_Semrelease */
#define MAX_GO_BINS 256

/* Per traced Go executable (index: the cookie >> 8): virtual addresses in the file. */
struct go_bin {
	__u64 fn[4];      /* entry of each wrapper, by role */
	__u64 rwlock_lo;  /* sync.(*RWMutex).Lock, [lo, hi) */
	__u64 rwlock_hi;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_GO_BINS);
	__type(key, __u32);
	__type(value, struct go_bin);
} gobins SEC(".maps");

struct go_key {
	__u32 tgid;
	__u32 pad;
	__u64 g;
};

/* One Lock call's wait: a sync.Mutex Lock may sleep in the semaphore several times (woken, it
 * can lose the mutex to a running goroutine and sleep again, lifo = true); it is one contended
 * acquisition whose wait runs from its first sleep to its last wake. */
struct go_wait {
	struct agg_key k;
	__u64 ts;         /* entry of the first semacquire of this Lock call */
	__u64 sema;
	__u64 accounted;  /* wait already added to `agg` for this Lock call, ns */
	__u32 counted;    /* whether this Lock call is counted in `agg` */
	__u32 pad;
};

/* Goroutines inside the semaphore. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_TASKS);
	__type(key, struct go_key);
	__type(value, struct go_wait);
} gowait SEC(".maps");

/* Each goroutine's last finished wait, for a Lock call that sleeps again. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, MAX_TASKS);
	__type(key, struct go_key);
	__type(value, struct go_wait);
} golast SEC(".maps");

/* An aggregate's wait grows from `old` to `ns` without a new acquisition: the total grows by
 * the difference and the acquisition moves to the histogram bucket of its whole wait. */
static __always_inline void account_more(struct agg_key *k, __u64 old, __u64 ns)
{
	struct agg_val *v = bpf_map_lookup_elem(&agg, k);
	if (!v)
		return; /* its first part was dropped, and counted as such */
	__sync_fetch_and_add(&v->total_ns, ns - old);
	if (ns > v->max_ns)
		v->max_ns = ns;
	__u32 a = log2_bucket(old), b = log2_bucket(ns);
	if (a != b && a < HIST && b < HIST) {
		__sync_fetch_and_add(&v->hist[a], -1);
		__sync_fetch_and_add(&v->hist[b], 1);
	}
}

#if defined(__TARGET_ARCH_x86)
static __always_inline void go_wait_begin(struct pt_regs *ctx, __u64 cookie)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	if (!traced(tgid))
		return;
	__u32 role = cookie & 0xff, bin = cookie >> 8;
	struct go_bin *b = bpf_map_lookup_elem(&gobins, &bin);
	if (!b || role < GO_MUTEX || role > GO_RWMUTEX_W)
		return;
	__u64 sema = ctx->ax;
	bool lifo = (ctx->bx & 0xff) != 0;
	struct go_key gk = { .tgid = tgid, .g = ctx->r14 };
	struct go_wait w = {};
	if (lifo) {
		/* The same Lock call sleeping again. */
		struct go_wait *last = bpf_map_lookup_elem(&golast, &gk);
		if (last && last->sema == sema)
			w = *last;
	}
	if (!w.ts) {
		w.ts = bpf_ktime_get_ns();
		w.sema = sema;
		w.k.tgid = tgid;
		w.k.tid = tid;
		w.k.stack = stack_id(ctx, BPF_F_USER_STACK);
		w.k.other = -1;
		/* The wrapper's caller (frame pointers start at its caller's caller). */
		if (bpf_probe_read_user(&w.k.leaf, sizeof(w.k.leaf), (void *)ctx->sp))
			w.k.leaf = 0;
		if (role == GO_MUTEX) {
			w.k.kind = K_GO_MUTEX;
			w.k.mode = M_EXCL;
			w.k.addr = sema - 4;
			/* lockSlow's caller: sync.(*RWMutex).Lock means the writers' mutex of an
			 * RWMutex, its first field. */
			__u64 ret = 0, bias = ctx->ip - b->fn[GO_MUTEX];
			if (!bpf_probe_read_user(&ret, sizeof(ret), (void *)(ctx->bp + 8)) &&
			    ret - bias >= b->rwlock_lo && ret - bias < b->rwlock_hi) {
				w.k.kind = K_GO_RWMUTEX;
				w.k.mode = M_WRITE;
			}
		} else if (role == GO_RWMUTEX_R) {
			w.k.kind = K_GO_RWMUTEX;
			w.k.mode = M_READ;
			w.k.addr = sema - 12;
		} else {
			w.k.kind = K_GO_RWMUTEX;
			w.k.mode = M_WRITE;
			w.k.addr = sema - 8;
		}
	}
	if (bpf_map_update_elem(&gowait, &gk, &w, BPF_ANY))
		drop(D_TASK);
}

static __always_inline void go_wait_end(struct pt_regs *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct go_key gk = { .tgid = tgid, .g = ctx->r14 };
	struct go_wait *w = bpf_map_lookup_elem(&gowait, &gk);
	if (!w)
		return;
	struct go_wait done = *w;
	bpf_map_delete_elem(&gowait, &gk);
	__u64 ns = bpf_ktime_get_ns() - done.ts;
	if (!done.counted) {
		/* The goroutine that last released this semaphore: the holder's side. */
		struct wake_key wk = { .uaddr = done.sema, .tgid = tgid };
		struct waker *waker = bpf_map_lookup_elem(&lastwake, &wk);
		done.k.other = waker ? waker->stack : -1;
		done.k.oleaf = waker ? waker->leaf : 0;
		account(&done.k, ns);
		done.counted = 1;
	} else {
		account_more(&done.k, done.accounted, ns);
	}
	done.accounted = ns;
	bpf_map_update_elem(&golast, &gk, &done, BPF_ANY);
}

static __always_inline void go_release(struct pt_regs *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	if (!traced(tgid))
		return;
	struct wake_key k = { .uaddr = ctx->ax, .tgid = tgid };
	struct waker wk = {};
	wk.stack = stack_id(ctx, BPF_F_USER_STACK);
	if (bpf_probe_read_user(&wk.leaf, sizeof(wk.leaf), (void *)ctx->sp))
		wk.leaf = 0;
	bpf_map_update_elem(&lastwake, &k, &wk, BPF_ANY);
}
#endif

static __always_inline int go_site(struct pt_regs *ctx)
{
#if defined(__TARGET_ARCH_x86)
	if (stopped)
		return 0;
	__u64 cookie = bpf_get_attach_cookie(ctx);
	__u32 role = cookie & 0xff;
	if (role == GO_END)
		go_wait_end(ctx);
	else if (role == GO_RELEASE)
		go_release(ctx);
	else
		go_wait_begin(ctx, cookie);
#endif
	return 0;
}

SEC("uprobe")
int go_uprobe(struct pt_regs *ctx)
{
	return go_site(ctx);
}

SEC("uprobe.multi")
int go_uprobe_multi(struct pt_regs *ctx)
{
	return go_site(ctx);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";

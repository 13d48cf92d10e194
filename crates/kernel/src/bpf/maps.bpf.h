// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// Part of lockmeter.bpf.c (included there, in order; not compiled alone). Constants (kinds, modes, drop counters as the Rust side numbers them), the configuration, the maps, and the helpers every program uses: drop counting, tracing filter, histogram buckets, aggregation, stacks.
#pragma once

/* A BPF map `name` of `maptype`, at most `n` entries of `key_t` -> `value_t`. */
#define MAP(name, maptype, n, key_t, value_t) \
	struct { \
		__uint(type, maptype); \
		__uint(max_entries, n); \
		__type(key, key_t); \
		__type(value, value_t); \
	} name SEC(".maps")

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
MAP(tgids, BPF_MAP_TYPE_HASH, 8192, __u32, __u8);

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

MAP(agg, BPF_MAP_TYPE_HASH, MAX_AGG, struct agg_key, struct agg_val);

MAP(drops, BPF_MAP_TYPE_ARRAY, D_MAX, __u32, __u64);

/* The scheduler's run-queue lock of each CPU that saw a contention (its address), so that user
 * space can name rq locks. */
#define MAX_CPUS 1024
MAP(rqlocks, BPF_MAP_TYPE_ARRAY, MAX_CPUS, __u32, __u64);

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

MAP(kstart, BPF_MAP_TYPE_HASH, MAX_TASKS, __u32, struct knest);

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

MAP(fstart, BPF_MAP_TYPE_HASH, MAX_TASKS, __u32, struct fwait);

struct wake_key {
	__u64 uaddr;
	__u32 tgid;
	__u32 pad;
};

/* The last waker of each futex word: its user stack id. */
MAP(lastwake, BPF_MAP_TYPE_LRU_HASH, MAX_AGG, struct wake_key, struct waker);

/* Scratch space for a zeroed knest (too large for the BPF stack). */
MAP(zero_nest, BPF_MAP_TYPE_PERCPU_ARRAY, 1, __u32, struct knest);

/* A zeroed aggregate (too large for the BPF stack); never written. */
MAP(zero_val, BPF_MAP_TYPE_PERCPU_ARRAY, 1, __u32, struct agg_val);

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

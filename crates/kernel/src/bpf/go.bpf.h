// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// Part of lockmeter.bpf.c (included there, in order; not compiled alone). Go: sync.Mutex / sync.RWMutex waits in the Go runtime's semaphore (uprobes).
#pragma once

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

MAP(gobins, BPF_MAP_TYPE_ARRAY, MAX_GO_BINS, __u32, struct go_bin);

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
MAP(gowait, BPF_MAP_TYPE_HASH, MAX_TASKS, struct go_key, struct go_wait);

/* Each goroutine's last finished wait, for a Lock call that sleeps again. */
MAP(golast, BPF_MAP_TYPE_LRU_HASH, MAX_TASKS, struct go_key, struct go_wait);

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

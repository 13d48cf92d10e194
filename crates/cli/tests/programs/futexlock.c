// A hand-made futex lock (Drepper's three-state mutex) that counts its own FUTEX_WAIT calls and
// the time they took, so `lockmeter record` can be checked against it exactly.
// Usage: futexlock THREADS ITERATIONS [WORK [SLEEP_US]]  (inside the critical section: WORK
// busy-loop steps, then a sleep of SLEEP_US microseconds)
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static _Atomic int hot_futex; // 0 unlocked, 1 locked, 2 locked with waiters
static atomic_long waits, wait_ns;
static long counter;

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void futex_wait(_Atomic int *w, int v) {
    long t0 = now_ns();
    syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
    atomic_fetch_add(&wait_ns, now_ns() - t0);
    atomic_fetch_add(&waits, 1);
}

static void lock(void) {
    int c = 0;
    if (atomic_compare_exchange_strong(&hot_futex, &c, 1)) return;
    if (c != 2) c = atomic_exchange(&hot_futex, 2);
    while (c != 0) {
        futex_wait(&hot_futex, 2);
        c = atomic_exchange(&hot_futex, 2);
    }
}

static void unlock(void) {
    if (atomic_fetch_sub(&hot_futex, 1) != 1) {
        atomic_store(&hot_futex, 0);
        syscall(SYS_futex, &hot_futex, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    }
}

static int iters, work = 200, sleep_us;
static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < iters; i++) {
        lock();
        counter++;
        for (volatile int k = 0; k < work; k++) {}
        if (sleep_us) usleep(sleep_us);
        unlock();
    }
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 4;
    iters = argc > 2 ? atoi(argv[2]) : 100000;
    if (argc > 3) work = atoi(argv[3]);
    if (argc > 4) sleep_us = atoi(argv[4]);
    pthread_t t[64];
    for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    printf("counter %ld futex_waits %ld wait_ns %ld\n", counter, atomic_load(&waits), atomic_load(&wait_ns));
    return counter == (long)n * iters ? 0 : 1;
}

/* A hot path that holds a lock long (rebuild_table, ~1 ms per hold) and a cold path that waits on
 * it (lookup_entry, called by cold_reader every ~100 us), plus a heap lock named by its first
 * use (in lookup_entry). Used by tests/e2e_stacks.rs. */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#ifndef ITERATIONS
#define ITERATIONS 150 /* rebuilds of the table (the tests pass -DITERATIONS) */
#endif

pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t *entry_lock;
static volatile long table[1024];
static volatile int stop;

static void spin_ns(long ns) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < ns);
}

__attribute__((noinline)) void rebuild_table(void) {
    pthread_mutex_lock(&table_lock);
    for (int i = 0; i < 1024; i++) table[i]++;
    spin_ns(1000000);
    pthread_mutex_unlock(&table_lock);
}

static inline __attribute__((always_inline)) void take_table(void) {
    pthread_mutex_lock(&table_lock);
}

__attribute__((noinline)) long lookup_entry(int k) {
    take_table();
    long v = table[k & 1023];
    pthread_mutex_unlock(&table_lock);
    pthread_mutex_lock(entry_lock);
    v += 1;
    pthread_mutex_unlock(entry_lock);
    return v;
}

__attribute__((noinline)) void *hot_writer(void *arg) {
    (void)arg;
    for (int i = 0; i < ITERATIONS; i++) {
        rebuild_table();
        usleep(50);
    }
    stop = 1;
    return NULL;
}

__attribute__((noinline)) void *cold_reader(void *arg) {
    long sum = 0;
    (void)arg;
    for (int i = 0; !stop; i++) {
        sum += lookup_entry(i);
        usleep(100);
    }
    return (void *)sum;
}

int main(void) {
    entry_lock = malloc(sizeof *entry_lock);
    pthread_mutex_init(entry_lock, NULL);
    pthread_t w, r;
    pthread_create(&r, NULL, cold_reader, NULL);
    pthread_create(&w, NULL, hot_writer, NULL);
    pthread_join(w, NULL);
    pthread_join(r, NULL);
    return 0;
}

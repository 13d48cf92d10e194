/* Heap locks made and first taken through one wrapper, as sqlite3MutexAlloc/sqlite3_mutex_enter
 * or g_mutex_lock do: make_lock() allocates and initializes, lock_it() takes a lock. Three
 * callers (queue_push, cache_get, log_write) each make one lock and take it 100, 200 and 300
 * times. Every lock's first use is in lock_it; the report must name each by its caller.
 * Prints "queue_push 100", "cache_get 200", "log_write 300" (its own counts). */
#include "e2e_common.h"

__attribute__((noinline)) static pthread_mutex_t *make_lock(void) {
    pthread_mutex_t *m = malloc(sizeof *m);
    OK(pthread_mutex_init(m, NULL));
    return m;
}

__attribute__((noinline)) static void lock_it(pthread_mutex_t *m) { OK(pthread_mutex_lock(m)); }

__attribute__((noinline)) static void unlock_it(pthread_mutex_t *m) {
    OK(pthread_mutex_unlock(m));
}

static volatile long work;

__attribute__((noinline)) static void take(pthread_mutex_t *m, long n) {
    for (long i = 0; i < n; i++) {
        lock_it(m);
        work++;
        unlock_it(m);
    }
}

__attribute__((noinline)) void queue_push(long n) {
    pthread_mutex_t *m = make_lock();
    take(m, n);
    printf("queue_push %ld\n", n);
}

__attribute__((noinline)) void cache_get(long n) {
    pthread_mutex_t *m = make_lock();
    take(m, n);
    printf("cache_get %ld\n", n);
}

__attribute__((noinline)) void log_write(long n) {
    pthread_mutex_t *m = make_lock();
    take(m, n);
    printf("log_write %ld\n", n);
}

int main(void) {
    queue_push(100);
    cache_get(200);
    log_write(300);
    return 0;
}

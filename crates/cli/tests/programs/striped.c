/* Several static locks and striped locks. argv: THREADS ITERS (ITERS a multiple of 8).
 * Per thread and iteration i: stripes[(i + t) % 8], lock_a; every 4th iteration also lock_b
 * nested inside lock_a. init_lock is initialized at run time (generation 1), taken once per
 * iteration pair. Worker t is named "striper-t". Expected, with T threads and M iterations:
 *   lock_a: T*M   lock_b: T*M/4   stripes[k]: T*M/8 each   init_lock: T*M/2. */
#include "e2e_common.h"

pthread_mutex_t lock_a = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t lock_b = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t init_lock;
pthread_mutex_t stripes[8] = {
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
};
static long iters;
static volatile long counters[8];
static volatile long a_count, b_count, init_count;

static void *worker(void *arg) {
    long t = (long)arg;
    char name[16];
    snprintf(name, sizeof name, "striper-%ld", t);
    OK(pthread_setname_np(pthread_self(), name));
    for (long i = 0; i < iters; i++) {
        int k = (int)((i + t) % 8);
        OK(pthread_mutex_lock(&stripes[k]));
        counters[k]++;
        OK(pthread_mutex_unlock(&stripes[k]));
        OK(pthread_mutex_lock(&lock_a));
        a_count++;
        if (i % 4 == 0) {
            OK(pthread_mutex_lock(&lock_b));
            b_count++;
            OK(pthread_mutex_unlock(&lock_b));
        }
        OK(pthread_mutex_unlock(&lock_a));
        if (i % 2 == 1) {
            OK(pthread_mutex_lock(&init_lock));
            init_count++;
            OK(pthread_mutex_unlock(&init_lock));
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    long threads = arg_long(argc, argv, 1, 4);
    iters = arg_long(argc, argv, 2, 8000);
    OK(pthread_mutex_init(&init_lock, NULL));
    pthread_t th[64];
    for (long t = 0; t < threads; t++) OK(pthread_create(&th[t], NULL, worker, (void *)t));
    for (long t = 0; t < threads; t++) OK(pthread_join(th[t], NULL));
    long total = 0;
    for (int k = 0; k < 8; k++) {
        if (counters[k] != threads * iters / 8) {
            fprintf(stderr, "stripe %d: %ld\n", k, counters[k]);
            return 91;
        }
        total += counters[k];
    }
    if (a_count != threads * iters || b_count != threads * iters / 4 ||
        init_count != threads * iters / 2) {
        fprintf(stderr, "counts %ld %ld %ld\n", a_count, b_count, init_count);
        return 92;
    }
    printf("ok %ld\n", total + a_count + b_count + init_count);
    return 0;
}

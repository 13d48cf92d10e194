/* THREADS threads x ITERS lock/unlock of one mutex, big_lock; the protected counter proves
 * mutual exclusion. argv: THREADS ITERS. */
#include "e2e_common.h"

pthread_mutex_t big_lock = PTHREAD_MUTEX_INITIALIZER;
static long iters;
static long counter;
static pthread_barrier_t start;

static void *worker(void *arg) {
    (void)arg;
    pthread_barrier_wait(&start);
    for (long i = 0; i < iters; i++) {
        OK(pthread_mutex_lock(&big_lock));
        counter++;
        OK(pthread_mutex_unlock(&big_lock));
    }
    return NULL;
}

int main(int argc, char **argv) {
    long threads = arg_long(argc, argv, 1, 64);
    iters = arg_long(argc, argv, 2, 20000);
    pthread_t th[256];
    OK(pthread_barrier_init(&start, NULL, (unsigned)threads));
    for (long t = 0; t < threads; t++) OK(pthread_create(&th[t], NULL, worker, NULL));
    for (long t = 0; t < threads; t++) OK(pthread_join(th[t], NULL));
    if (counter != threads * iters) {
        fprintf(stderr, "counter %ld != %ld\n", counter, threads * iters);
        return 91;
    }
    printf("ok %ld\n", counter);
    return 0;
}

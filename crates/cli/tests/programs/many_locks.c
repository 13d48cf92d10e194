/* Many distinct locks. argv: NLOCKS THREADS.
 * many[i] (static array) is taken i + 1 times by each of THREADS threads: lock i has
 * THREADS * (i + 1) acquisitions; the total is THREADS * NLOCKS * (NLOCKS + 1) / 2. */
#include "e2e_common.h"

#define MAX 1024
pthread_mutex_t many[MAX];
static long nlocks;

static void *worker(void *arg) {
    (void)arg;
    for (long i = 0; i < nlocks; i++)
        for (long k = 0; k <= i; k++) {
            OK(pthread_mutex_lock(&many[i]));
            OK(pthread_mutex_unlock(&many[i]));
        }
    return NULL;
}

int main(int argc, char **argv) {
    nlocks = arg_long(argc, argv, 1, 200);
    long threads = arg_long(argc, argv, 2, 1);
    if (nlocks > MAX) return 95;
    /* many[] is zero-initialized: a valid PTHREAD_MUTEX_INITIALIZER on glibc (generation 0). */
    pthread_t th[64];
    for (long t = 0; t < threads; t++) OK(pthread_create(&th[t], NULL, worker, NULL));
    for (long t = 0; t < threads; t++) OK(pthread_join(th[t], NULL));
    printf("ok %ld\n", threads * nlocks * (nlocks + 1) / 2);
    return 0;
}

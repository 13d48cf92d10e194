/* Many distinct live mutexes. argv: NLOCKS THREADS.
 * An array of NLOCKS mutexes (calloc: zero bytes are PTHREAD_MUTEX_INITIALIZER on glibc); each of
 * THREADS threads takes lock i (i % 3) + 1 times. Prints "ok TOTAL", the acquisitions made. */
#include "e2e_common.h"

static pthread_mutex_t *locks;
static long nlocks;

static void *worker(void *arg) {
    long *done = arg;
    for (long i = 0; i < nlocks; i++)
        for (long k = 0; k <= i % 3; k++) {
            OK(pthread_mutex_lock(&locks[i]));
            (*done)++;
            OK(pthread_mutex_unlock(&locks[i]));
        }
    return NULL;
}

int main(int argc, char **argv) {
    nlocks = arg_long(argc, argv, 1, 100000);
    long threads = arg_long(argc, argv, 2, 1);
    if (nlocks < 1 || threads < 1 || threads > 64) return 95;
    locks = calloc(nlocks, sizeof *locks);
    if (!locks) return 95;
    pthread_t th[64];
    long done[64] = {0};
    for (long t = 0; t < threads; t++) OK(pthread_create(&th[t], NULL, worker, &done[t]));
    long total = 0;
    for (long t = 0; t < threads; t++) {
        OK(pthread_join(th[t], NULL));
        total += done[t];
    }
    printf("ok %ld\n", total);
    return 0;
}

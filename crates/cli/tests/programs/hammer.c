/* THREADS threads x ITERS lock/unlock of one mutex, big_lock; the protected counter proves
 * mutual exclusion. argv: THREADS ITERS [rss]; with "rss", also prints the process's resident
 * memory at the end ("rss_kib N", VmRSS of /proc/self/status). */
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
    if (argc > 3 && strcmp(argv[3], "rss") == 0) {
        char line[256];
        FILE *f = fopen("/proc/self/status", "r");
        while (f && fgets(line, sizeof line, f))
            if (strncmp(line, "VmRSS:", 6) == 0) printf("rss_kib %ld\n", strtol(line + 6, NULL, 10));
        if (f) fclose(f);
    }
    return 0;
}

// Threads that hop between CPUs: each pins itself to every CPU it may run on in turn and takes a
// mutex a different number of times on each (per-CPU counts exact across CPU changes). Prints
// "cpu C N" for each CPU C it took N locks on, then "total N". Usage: cpuhop THREADS ROUNDS
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#define MAXC 1024
static pthread_mutex_t hop_lock = PTHREAD_MUTEX_INITIALIZER;
static long counts[MAXC];
static int rounds;
static cpu_set_t allowed;

static void *worker(void *arg) {
    long me = (long)arg;
    for (int r = 0; r < rounds; r++) {
        for (int c = 0; c < MAXC; c++) {
            if (!CPU_ISSET(c, &allowed)) continue;
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(c, &one);
            if (sched_setaffinity(0, sizeof one, &one) != 0 || sched_getcpu() != c) {
                fprintf(stderr, "cannot run on cpu %d\n", c);
                exit(2);
            }
            long n = 50 + 7 * c + 3 * r + me;
            for (long i = 0; i < n; i++) {
                pthread_mutex_lock(&hop_lock);
                counts[c]++;
                pthread_mutex_unlock(&hop_lock);
            }
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    int t = argc > 1 ? atoi(argv[1]) : 2;
    rounds = argc > 2 ? atoi(argv[2]) : 10;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return 2;
    pthread_t th[64];
    for (long i = 0; i < t && i < 64; i++) pthread_create(&th[i], NULL, worker, (void *)i);
    for (int i = 0; i < t && i < 64; i++) pthread_join(th[i], NULL);
    long total = 0;
    for (int c = 0; c < MAXC; c++) {
        if (counts[c]) printf("cpu %d %ld\n", c, counts[c]);
        total += counts[c];
    }
    printf("total %ld\n", total);
    return 0;
}

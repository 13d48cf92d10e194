/* Uncontended lock+unlock pairs on one mutex: prints ns per pair (median of 7 rounds).
   Used to measure what the preload adds to the uncontended path. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 2000000;
    double r[7];
    for (int k = 0; k < 7; k++) {
        double t0 = now();
        for (long i = 0; i < n; i++) {
            pthread_mutex_lock(&lock);
            pthread_mutex_unlock(&lock);
        }
        r[k] = (now() - t0) / n;
    }
    qsort(r, 7, sizeof r[0], cmp);
    printf("%.2f\n", r[3]);
    return 0;
}

/* Mutex types under contention. argv: THREADS ITERS.
 * Each of THREADS threads takes each lock ITERS times (recursive ones twice, nested: 2 per
 * iteration); a plain counter per lock checks mutual exclusion.
 *   robust_m (robust), robust_rec (robust recursive), pi_m (priority inheritance),
 *   pi_robust (PI + robust), adaptive_m (PTHREAD_MUTEX_ADAPTIVE_NP), ec_m (error-checking)
 * Expected: ITERS * THREADS for each, robust_rec 2 * ITERS * THREADS.
 * Then owner_dead (robust): a thread locks it and exits while 3 threads wait in
 * pthread_mutex_lock; exactly one gets EOWNERDEAD and makes it consistent: 4 acquisitions. */
#include "e2e_common.h"
#include <unistd.h>

pthread_mutex_t robust_m, robust_rec, pi_m, pi_robust, adaptive_m, ec_m, owner_dead;
static long iters;
static long counts[6];
static pthread_barrier_t bar;
static int owner_dead_seen;
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;

static void init_m(pthread_mutex_t *m, int type, int robust, int pi) {
    pthread_mutexattr_t a;
    OK(pthread_mutexattr_init(&a));
    OK(pthread_mutexattr_settype(&a, type));
    if (robust) OK(pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST));
    if (pi) OK(pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT));
    OK(pthread_mutex_init(m, &a));
    OK(pthread_mutexattr_destroy(&a));
}

static void *worker(void *arg) {
    (void)arg;
    pthread_mutex_t *ms[6] = {&robust_m, &robust_rec, &pi_m, &pi_robust, &adaptive_m, &ec_m};
    for (long i = 0; i < iters; i++) {
        for (int k = 0; k < 6; k++) {
            OK(pthread_mutex_lock(ms[k]));
            if (k == 1) OK(pthread_mutex_lock(ms[k]));
            counts[k]++;
            if (k == 1) OK(pthread_mutex_unlock(ms[k]));
            OK(pthread_mutex_unlock(ms[k]));
        }
    }
    return NULL;
}

static void *die_holding(void *arg) {
    (void)arg;
    OK(pthread_mutex_lock(&owner_dead));
    pthread_barrier_wait(&bar);
    usleep(100000); /* the waiters block meanwhile */
    return NULL;    /* exits holding it */
}

static void *waiter(void *arg) {
    (void)arg;
    pthread_barrier_wait(&bar);
    int r = pthread_mutex_lock(&owner_dead);
    if (r == EOWNERDEAD) {
        OK(pthread_mutex_consistent(&owner_dead));
        OK(pthread_mutex_lock(&seen_lock));
        owner_dead_seen++;
        OK(pthread_mutex_unlock(&seen_lock));
    } else if (r != 0) {
        fprintf(stderr, "owner_dead: %s\n", strerror(r));
        exit(90);
    }
    OK(pthread_mutex_unlock(&owner_dead));
    return NULL;
}

int main(int argc, char **argv) {
    long threads = arg_long(argc, argv, 1, 4);
    iters = arg_long(argc, argv, 2, 5000);
    init_m(&robust_m, PTHREAD_MUTEX_NORMAL, 1, 0);
    init_m(&robust_rec, PTHREAD_MUTEX_RECURSIVE, 1, 0);
    init_m(&pi_m, PTHREAD_MUTEX_NORMAL, 0, 1);
    init_m(&pi_robust, PTHREAD_MUTEX_NORMAL, 1, 1);
    init_m(&adaptive_m, PTHREAD_MUTEX_ADAPTIVE_NP, 0, 0);
    init_m(&ec_m, PTHREAD_MUTEX_ERRORCHECK, 0, 0);
    init_m(&owner_dead, PTHREAD_MUTEX_NORMAL, 1, 0);
    pthread_t th[64];
    for (long t = 0; t < threads; t++) OK(pthread_create(&th[t], NULL, worker, NULL));
    for (long t = 0; t < threads; t++) OK(pthread_join(th[t], NULL));
    for (int k = 0; k < 6; k++)
        if (counts[k] != threads * iters) {
            fprintf(stderr, "lock %d: %ld\n", k, counts[k]);
            return 91;
        }
    OK(pthread_barrier_init(&bar, NULL, 4));
    OK(pthread_create(&th[0], NULL, die_holding, NULL));
    for (int t = 1; t < 4; t++) OK(pthread_create(&th[t], NULL, waiter, NULL));
    for (int t = 0; t < 4; t++) OK(pthread_join(th[t], NULL));
    if (owner_dead_seen != 1) {
        fprintf(stderr, "EOWNERDEAD seen %d times\n", owner_dead_seen);
        return 92;
    }
    printf("ok\n");
    return 0;
}

/* Lock lifetimes folded into classes. argv: TOTAL WINDOW KEEP.
 * TOTAL heap mutexes, WINDOW alive at a time, all initialized at one call site (make_window):
 * in each round the main thread initializes WINDOW of them, a first worker thread locks each
 * once, then a second one does, then the main thread destroys and frees them (locks destroyed
 * by another thread than the ones that used them). The two workers live for the whole run and
 * take turns at a barrier. Then 10,000 rwlocks (one read and one write
 * acquisition each) and 10,000 semaphores (one wait each) are initialized, used and destroyed,
 * and KEEP mutexes initialized at another site (keep_alive) are locked twice each and never
 * destroyed. Prints "ok MUTEX_ACQUISITIONS MUTEX_LIFETIMES RW_ACQUISITIONS SEM_ACQUISITIONS". */
#include "e2e_common.h"
#include <semaphore.h>

static pthread_mutex_t **window;
static long nwindow, rounds;
static pthread_barrier_t turn;

/* Worker `me` (0 or 1): in each round, waits for its turn, locks every mutex of the window once. */
static void *use_all(void *arg) {
    long *done = arg;
    int me = done[1] != 0;
    for (long r = 0; r < rounds; r++) {
        for (int t = 0; t < 3; t++) {
            pthread_barrier_wait(&turn);
            if (t != me) continue;
            for (long i = 0; i < nwindow; i++) {
                OK(pthread_mutex_lock(window[i]));
                done[0]++;
                OK(pthread_mutex_unlock(window[i]));
            }
        }
    }
    return NULL;
}

static __attribute__((noinline)) void make_window(void) {
    for (long i = 0; i < nwindow; i++) {
        window[i] = malloc(sizeof *window[i]);
        if (!window[i]) exit(95);
        OK(pthread_mutex_init(window[i], NULL));
    }
}

static __attribute__((noinline)) pthread_mutex_t *keep_alive(void) {
    pthread_mutex_t *m = malloc(sizeof *m);
    if (!m) exit(95);
    OK(pthread_mutex_init(m, NULL));
    return m;
}

int main(int argc, char **argv) {
    long total = arg_long(argc, argv, 1, 1000000);
    nwindow = arg_long(argc, argv, 2, 100000);
    long keep = arg_long(argc, argv, 3, 3);
    if (total < 1 || nwindow < 1 || total % nwindow || keep < 0) return 95;
    window = calloc(nwindow, sizeof *window);
    if (!window) return 95;
    rounds = total / nwindow;
    OK(pthread_barrier_init(&turn, NULL, 3));
    pthread_t th[2];
    long done[2][2] = {{0, 0}, {0, 1}};
    for (int t = 0; t < 2; t++) OK(pthread_create(&th[t], NULL, use_all, done[t]));
    long mutex_acq = 0, lifetimes = 0;
    for (long round = 0; round < rounds; round++) {
        make_window();
        /* Turn 0: the first worker; turn 1: the second; turn 2: this thread destroys. */
        for (int t = 0; t < 3; t++) pthread_barrier_wait(&turn);
        for (long i = 0; i < nwindow; i++) {
            OK(pthread_mutex_destroy(window[i]));
            free(window[i]);
            lifetimes++;
        }
    }
    for (int t = 0; t < 2; t++) {
        OK(pthread_join(th[t], NULL));
        mutex_acq += done[t][0];
    }
    long rw_acq = 0;
    for (int i = 0; i < 10000; i++) {
        pthread_rwlock_t *l = malloc(sizeof *l);
        if (!l) return 95;
        OK(pthread_rwlock_init(l, NULL));
        OK(pthread_rwlock_rdlock(l));
        OK(pthread_rwlock_unlock(l));
        OK(pthread_rwlock_wrlock(l));
        OK(pthread_rwlock_unlock(l));
        rw_acq += 2;
        OK(pthread_rwlock_destroy(l));
        free(l);
    }
    long sem_acq = 0;
    for (int i = 0; i < 10000; i++) {
        sem_t *s = malloc(sizeof *s);
        if (!s) return 95;
        if (sem_init(s, 0, 1) || sem_wait(s) || sem_post(s) || sem_destroy(s)) return 91;
        sem_acq++;
        free(s);
    }
    for (long k = 0; k < keep; k++) {
        pthread_mutex_t *m = keep_alive();
        for (int j = 0; j < 2; j++) {
            OK(pthread_mutex_lock(m));
            OK(pthread_mutex_unlock(m));
        }
    }
    printf("ok %ld %ld %ld %ld\n", mutex_acq, lifetimes, rw_acq, sem_acq);
    return 0;
}

/* One thread takes locks, without contention, through each path of the preload's acquisitions:
 * for the sampling decisions (--hold sample:N, --stack-sample N), which every path must make
 * exactly as often. A thread of its own, whose countdowns start afresh (the main thread's
 * first decisions are taken by the collector's calibration pairs). Usage: sampled_mix ITERS. Each iteration: mix_m locked and unlocked,
 * trylocked and unlocked, mix_rw read-locked and write-locked (each unlocked), mix_m with
 * mix_n nested inside it, and the semaphores mix_s and mix_t used as locks (mix_s by sem_wait,
 * then by sem_trywait with mix_t taken by sem_wait inside it, each posted): 9 acquisitions, 1 of
 * them a read.
 * Prints "acquisitions A reads R". */
#include "e2e_common.h"
#include <semaphore.h>

static pthread_mutex_t mix_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t mix_n = PTHREAD_MUTEX_INITIALIZER;
static pthread_rwlock_t mix_rw = PTHREAD_RWLOCK_INITIALIZER;
static sem_t mix_s, mix_t;

static long iters, acquisitions, reads;

static void *mix(void *arg) {
    (void)arg;
    for (long i = 0; i < iters; i++) {
        OK(pthread_mutex_lock(&mix_m));
        OK(pthread_mutex_unlock(&mix_m));
        OK(pthread_mutex_trylock(&mix_m));
        OK(pthread_mutex_unlock(&mix_m));
        OK(pthread_rwlock_rdlock(&mix_rw));
        OK(pthread_rwlock_unlock(&mix_rw));
        OK(pthread_rwlock_wrlock(&mix_rw));
        OK(pthread_rwlock_unlock(&mix_rw));
        OK(pthread_mutex_lock(&mix_m));
        OK(pthread_mutex_lock(&mix_n));
        OK(pthread_mutex_unlock(&mix_n));
        OK(pthread_mutex_unlock(&mix_m));
        OK(sem_wait(&mix_s));
        OK(sem_post(&mix_s));
        OK(sem_trywait(&mix_s));
        OK(sem_wait(&mix_t));
        OK(sem_post(&mix_t));
        OK(sem_post(&mix_s));
        acquisitions += 9;
        reads += 1;
    }
    return NULL;
}

int main(int argc, char **argv) {
    iters = arg_long(argc, argv, 1, 1000);
    OK(sem_init(&mix_s, 0, 1));
    OK(sem_init(&mix_t, 0, 1));
    pthread_t t;
    OK(pthread_create(&t, NULL, mix, NULL));
    OK(pthread_join(t, NULL));
    printf("acquisitions %ld reads %ld\n", acquisitions, reads);
    return 0;
}

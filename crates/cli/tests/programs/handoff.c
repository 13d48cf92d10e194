/* A mutex released by another thread than the one that took it (glibc allows it for normal
 * mutexes; semaphore-like hand-offs do it). argv: N K.
 * Thread A locks handoff_lock (and handoff_spin, a spinlock) N times; after each lock, thread B
 * unlocks them. Then A takes
 * other_lock K times, normally. Expected: handoff_lock N, other_lock K, and other_lock's
 * holds are all timed (A's bookkeeping of the locks it holds is not poisoned). */
#include "e2e_common.h"
#include <semaphore.h>

pthread_mutex_t handoff_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t other_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_spinlock_t handoff_spin;
static sem_t locked, unlocked;
static long n;

static void *releaser(void *arg) {
    (void)arg;
    for (long i = 0; i < n; i++) {
        while (sem_wait(&locked) != 0) {}
        OK(pthread_mutex_unlock(&handoff_lock));
        OK(pthread_spin_unlock(&handoff_spin));
        sem_post(&unlocked);
    }
    return NULL;
}

int main(int argc, char **argv) {
    n = arg_long(argc, argv, 1, 200);
    long k = arg_long(argc, argv, 2, 100);
    OK(pthread_spin_init(&handoff_spin, PTHREAD_PROCESS_PRIVATE));
    sem_init(&locked, 0, 0);
    sem_init(&unlocked, 0, 0);
    pthread_t t;
    OK(pthread_create(&t, NULL, releaser, NULL));
    for (long i = 0; i < n; i++) {
        OK(pthread_mutex_lock(&handoff_lock));
        OK(pthread_spin_lock(&handoff_spin));
        sem_post(&locked);
        while (sem_wait(&unlocked) != 0) {}
    }
    OK(pthread_join(t, NULL));
    for (long i = 0; i < k; i++) {
        OK(pthread_mutex_lock(&other_lock));
        OK(pthread_mutex_unlock(&other_lock));
    }
    printf("ok\n");
    return 0;
}

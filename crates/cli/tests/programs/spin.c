/* Spinlocks. argv: THREADS ITERS TRIES.
 * spin (initialized at run time: generation 1): THREADS x ITERS lock/unlock;
 * spins[4] (initialized at run time): thread t takes spins[t % 4] ITERS times;
 * then a helper holds spin while main does TRIES trylocks (EBUSY) and one that succeeds after.
 * Expected: spin = T*M + 1 (helper) + 1, trylock failures TRIES. */
#include "e2e_common.h"

pthread_spinlock_t spin;
pthread_spinlock_t spins[4];
static long iters;
static long counter;
static long per[4];
static pthread_barrier_t bar;

static void *worker(void *arg) {
    long t = (long)arg;
    for (long i = 0; i < iters; i++) {
        OK(pthread_spin_lock(&spin));
        counter++;
        OK(pthread_spin_unlock(&spin));
        OK(pthread_spin_lock(&spins[t % 4]));
        per[t % 4]++;
        OK(pthread_spin_unlock(&spins[t % 4]));
    }
    return NULL;
}

static void *holder(void *arg) {
    (void)arg;
    OK(pthread_spin_lock(&spin));
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    OK(pthread_spin_unlock(&spin));
    return NULL;
}

int main(int argc, char **argv) {
    long threads = arg_long(argc, argv, 1, 4);
    iters = arg_long(argc, argv, 2, 10000);
    long tries = arg_long(argc, argv, 3, 100);
    OK(pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE));
    for (int k = 0; k < 4; k++) OK(pthread_spin_init(&spins[k], PTHREAD_PROCESS_PRIVATE));
    pthread_t th[64];
    for (long t = 0; t < threads; t++) OK(pthread_create(&th[t], NULL, worker, (void *)t));
    for (long t = 0; t < threads; t++) OK(pthread_join(th[t], NULL));
    if (counter != threads * iters) return 91;
    OK(pthread_barrier_init(&bar, NULL, 2));
    OK(pthread_create(&th[0], NULL, holder, NULL));
    pthread_barrier_wait(&bar);
    for (long i = 0; i < tries; i++) EXPECT(pthread_spin_trylock(&spin), EBUSY);
    pthread_barrier_wait(&bar);
    OK(pthread_join(th[0], NULL));
    OK(pthread_spin_trylock(&spin));
    OK(pthread_spin_unlock(&spin));
    printf("ok\n");
    return 0;
}

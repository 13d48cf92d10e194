/* Failed trylocks and timed-out timed locks. argv: TRIES.
 * guard: a helper locks it (1 acquisition) and holds it across a barrier while main does
 * TRIES trylocks (EBUSY), 2 timedlocks (ETIMEDOUT) and 1 clocklock (ETIMEDOUT); after the helper
 * released it, main does TRIES successful trylocks, 1 timedlock and 1 clocklock that succeed.
 * Expected: acquisitions = 1 + TRIES + 2, trylock failures = TRIES + 3, contended = 0. */
#include "e2e_common.h"

pthread_mutex_t guard = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t bar;

static void *helper(void *arg) {
    (void)arg;
    OK(pthread_mutex_lock(&guard));
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    OK(pthread_mutex_unlock(&guard));
    pthread_barrier_wait(&bar);
    return NULL;
}

int main(int argc, char **argv) {
    long tries = arg_long(argc, argv, 1, 500);
    OK(pthread_barrier_init(&bar, NULL, 2));
    pthread_t th;
    OK(pthread_create(&th, NULL, helper, NULL));
    pthread_barrier_wait(&bar);
    for (long i = 0; i < tries; i++) EXPECT(pthread_mutex_trylock(&guard), EBUSY);
    for (int i = 0; i < 2; i++) {
        struct timespec ts = deadline_ms(2);
        EXPECT(pthread_mutex_timedlock(&guard, &ts), ETIMEDOUT);
    }
    struct timespec ts = mono_deadline_ms(2);
    EXPECT(pthread_mutex_clocklock(&guard, CLOCK_MONOTONIC, &ts), ETIMEDOUT);
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar); /* released */
    OK(pthread_join(th, NULL));
    for (long i = 0; i < tries; i++) {
        OK(pthread_mutex_trylock(&guard));
        OK(pthread_mutex_unlock(&guard));
    }
    ts = deadline_ms(10000);
    OK(pthread_mutex_timedlock(&guard, &ts));
    OK(pthread_mutex_unlock(&guard));
    ts = mono_deadline_ms(10000);
    OK(pthread_mutex_clocklock(&guard, CLOCK_MONOTONIC, &ts));
    OK(pthread_mutex_unlock(&guard));
    printf("ok\n");
    return 0;
}

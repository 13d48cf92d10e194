/* rwlocks with a known read/write split and deterministic try/timed failures.
 * table_lock (static initializer, generation 0); main thread, N = argv[1]:
 *   N rdlock, N wrlock, N tryrdlock, N trywrlock, N timedrdlock, N timedwrlock (all succeed);
 * a helper takes a read lock (1 read) and holds it across a barrier, while main does
 *   N tryrdlock (succeed: readers share), N trywrlock (EBUSY), 2 timedwrlock (ETIMEDOUT);
 * then the helper takes a write lock (1 write) and holds it while main does
 *   N tryrdlock (EBUSY), N trywrlock (EBUSY), 2 timedrdlock (ETIMEDOUT), 1 clockwrlock (ETIMEDOUT).
 * Expected: read = 3N + 1 + N, write = 3N + 1, trylock failures = N + 2 + 2N + 3. */
#include "e2e_common.h"

pthread_rwlock_t table_lock = PTHREAD_RWLOCK_INITIALIZER;
static pthread_barrier_t bar;

static void *helper(void *arg) {
    (void)arg;
    OK(pthread_rwlock_rdlock(&table_lock));
    pthread_barrier_wait(&bar); /* held */
    pthread_barrier_wait(&bar); /* main is done */
    OK(pthread_rwlock_unlock(&table_lock));
    OK(pthread_rwlock_wrlock(&table_lock));
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    OK(pthread_rwlock_unlock(&table_lock));
    return NULL;
}

int main(int argc, char **argv) {
    long n = arg_long(argc, argv, 1, 1000);
    struct timespec ts;
    for (long i = 0; i < n; i++) {
        OK(pthread_rwlock_rdlock(&table_lock));
        OK(pthread_rwlock_unlock(&table_lock));
        OK(pthread_rwlock_wrlock(&table_lock));
        OK(pthread_rwlock_unlock(&table_lock));
        OK(pthread_rwlock_tryrdlock(&table_lock));
        OK(pthread_rwlock_unlock(&table_lock));
        OK(pthread_rwlock_trywrlock(&table_lock));
        OK(pthread_rwlock_unlock(&table_lock));
        ts = deadline_ms(10000);
        OK(pthread_rwlock_timedrdlock(&table_lock, &ts));
        OK(pthread_rwlock_unlock(&table_lock));
        ts = deadline_ms(10000);
        OK(pthread_rwlock_timedwrlock(&table_lock, &ts));
        OK(pthread_rwlock_unlock(&table_lock));
    }
    OK(pthread_barrier_init(&bar, NULL, 2));
    pthread_t th;
    OK(pthread_create(&th, NULL, helper, NULL));
    pthread_barrier_wait(&bar); /* helper holds a read lock */
    for (long i = 0; i < n; i++) {
        OK(pthread_rwlock_tryrdlock(&table_lock));
        OK(pthread_rwlock_unlock(&table_lock));
        EXPECT(pthread_rwlock_trywrlock(&table_lock), EBUSY);
    }
    for (int i = 0; i < 2; i++) {
        ts = deadline_ms(2);
        EXPECT(pthread_rwlock_timedwrlock(&table_lock, &ts), ETIMEDOUT);
    }
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar); /* helper holds the write lock */
    for (long i = 0; i < n; i++) {
        EXPECT(pthread_rwlock_tryrdlock(&table_lock), EBUSY);
        EXPECT(pthread_rwlock_trywrlock(&table_lock), EBUSY);
    }
    for (int i = 0; i < 2; i++) {
        ts = deadline_ms(2);
        EXPECT(pthread_rwlock_timedrdlock(&table_lock, &ts), ETIMEDOUT);
    }
    ts = mono_deadline_ms(2);
    EXPECT(pthread_rwlock_clockwrlock(&table_lock, CLOCK_MONOTONIC, &ts), ETIMEDOUT);
    pthread_barrier_wait(&bar);
    OK(pthread_join(th, NULL));
    printf("ok\n");
    return 0;
}

/* Rwlock swapping ground truth (`--rwlock qrwlock`): T threads x N operations on the static
 * rwlock `rw`, one in 4 a write (one in 7 through try*lock until it succeeds): a writer finds no
 * reader inside and increments `writes`; a reader finds no writer inside. Then known results: a
 * timed and a clock write lock against a held read lock time out, trywrlock is EBUSY, tryrdlock
 * succeeds; a process-shared rwlock `rw_shared` (glibc's under --rwlock) is taken once.
 * Prints "reads R writes W" (its own counts) and "ok". Args: T N. */
#include "e2e_common.h"
#include <stdatomic.h>

pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
pthread_rwlock_t rw_shared;
static atomic_long readers_inside, writer_inside, reads, writes_seen;
static long writes, T, N;

static void *worker(void *arg) {
    long t = (long)arg;
    for (long i = 0; i < N; i++) {
        int w = (i + t) % 4 == 0, r;
        if (i % 7 == 0) {
            while ((r = w ? pthread_rwlock_trywrlock(&rw) : pthread_rwlock_tryrdlock(&rw)) == EBUSY)
                ;
            OK(r);
        } else {
            OK(w ? pthread_rwlock_wrlock(&rw) : pthread_rwlock_rdlock(&rw));
        }
        if (w) {
            if (atomic_fetch_add(&writer_inside, 1) != 0 || atomic_load(&readers_inside) != 0) {
                fprintf(stderr, "writer not alone\n");
                exit(91);
            }
            writes++;
            atomic_fetch_sub(&writer_inside, 1);
            atomic_fetch_add(&writes_seen, 1);
        } else {
            atomic_fetch_add(&readers_inside, 1);
            if (atomic_load(&writer_inside) != 0) {
                fprintf(stderr, "reader beside a writer\n");
                exit(92);
            }
            atomic_fetch_sub(&readers_inside, 1);
            atomic_fetch_add(&reads, 1);
        }
        OK(pthread_rwlock_unlock(&rw));
    }
    return NULL;
}

static void *timeouts(void *arg) {
    (void)arg;
    struct timespec ts = deadline_ms(50);
    EXPECT(pthread_rwlock_timedwrlock(&rw, &ts), ETIMEDOUT);
    ts = mono_deadline_ms(50);
    EXPECT(pthread_rwlock_clockwrlock(&rw, CLOCK_MONOTONIC, &ts), ETIMEDOUT);
    EXPECT(pthread_rwlock_trywrlock(&rw), EBUSY);
    OK(pthread_rwlock_tryrdlock(&rw));
    OK(pthread_rwlock_unlock(&rw));
    return NULL;
}

int main(int argc, char **argv) {
    T = arg_long(argc, argv, 1, 3);
    N = arg_long(argc, argv, 2, 10000);
    pthread_t th[64];
    for (long t = 0; t < T; t++) OK(pthread_create(&th[t], NULL, worker, (void *)t));
    for (long t = 0; t < T; t++) OK(pthread_join(th[t], NULL));
    OK(pthread_rwlock_rdlock(&rw));
    pthread_t to;
    OK(pthread_create(&to, NULL, timeouts, NULL));
    OK(pthread_join(to, NULL));
    OK(pthread_rwlock_unlock(&rw));
    pthread_rwlockattr_t a;
    OK(pthread_rwlockattr_init(&a));
    OK(pthread_rwlockattr_setpshared(&a, PTHREAD_PROCESS_SHARED));
    OK(pthread_rwlock_init(&rw_shared, &a));
    OK(pthread_rwlock_wrlock(&rw_shared));
    OK(pthread_rwlock_unlock(&rw_shared));
    printf("reads %ld writes %ld\n", (long)atomic_load(&reads), writes);
    if (writes != atomic_load(&writes_seen)) return 1;
    printf("ok\n");
    return 0;
}

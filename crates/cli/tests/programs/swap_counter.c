/* Lock swapping ground truth (sysbench-like): T threads each take N times one of M static
 * mutexes (`swap_locks[(t + i) % M]`, trylock every 5th time until it succeeds) and increment
 * that mutex's counter with a non-atomic read, pause, write: any lapse of mutual exclusion loses
 * increments. One recursive and one error-checking mutex (`swap_rec`, `swap_ec`, glibc's
 * implementation under every --lock) are taken once per thread. Prints the totals it expects
 * and what the counters hold.
 * Args: T N M (M <= 16). Built with -DOLD_SYMVER it binds to the GLIBC_2.2.5 versions. */
#include "e2e_common.h"
#include <sched.h>

#ifdef OLD_SYMVER
/* Bind to the pre-2.34 versions of the functions that have two (glibc moved them from
 * libpthread into libc): the swapped mutexes must be reached through both. */
#if defined(__x86_64__)
#define OLDV "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define OLDV "GLIBC_2.17"
#else
#error "OLD_SYMVER: x86_64 or aarch64 only"
#endif
__asm__(".symver pthread_mutex_trylock,pthread_mutex_trylock@" OLDV);
__asm__(".symver pthread_mutex_init,pthread_mutex_init@" OLDV);
#endif

#define MAXM 16
pthread_mutex_t swap_locks[MAXM] = {
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER};
pthread_mutex_t swap_rec, swap_ec;
static volatile long counters[MAXM];
static long T, N, M;

static void *worker(void *arg) {
    long t = (long)arg;
    OK(pthread_mutex_lock(&swap_rec));
    OK(pthread_mutex_unlock(&swap_rec));
    OK(pthread_mutex_lock(&swap_ec));
    OK(pthread_mutex_unlock(&swap_ec));
    for (long i = 0; i < N; i++) {
        long k = (t + i) % M;
        if (i % 5 == 0) {
            int r;
            while ((r = pthread_mutex_trylock(&swap_locks[k])) == EBUSY) sched_yield();
            OK(r);
        } else {
            OK(pthread_mutex_lock(&swap_locks[k]));
        }
        long v = counters[k];
        if ((i & 63) == 0) sched_yield(); /* widen the window a lost update needs */
        counters[k] = v + 1;
        OK(pthread_mutex_unlock(&swap_locks[k]));
    }
    return NULL;
}

int main(int argc, char **argv) {
    T = arg_long(argc, argv, 1, 4);
    N = arg_long(argc, argv, 2, 10000);
    M = arg_long(argc, argv, 3, 4);
    if (M < 1 || M > MAXM) return 2;
    pthread_mutexattr_t a;
    OK(pthread_mutexattr_init(&a));
    OK(pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE));
    OK(pthread_mutex_init(&swap_rec, &a));
    OK(pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK));
    OK(pthread_mutex_init(&swap_ec, &a));
    pthread_t th[256];
    for (long t = 0; t < T; t++) OK(pthread_create(&th[t], NULL, worker, (void *)t));
    for (long t = 0; t < T; t++) OK(pthread_join(th[t], NULL));
    long sum = 0;
    for (long k = 0; k < M; k++) sum += counters[k];
    /* An error-checking mutex still checks under --lock: unlocking it unheld is EPERM. */
    EXPECT(pthread_mutex_unlock(&swap_ec), EPERM);
    printf("acquisitions %ld\n", T * N + 2 * T);
    printf("counted %ld expected %ld\n", sum, T * N);
    return sum == T * N ? 0 : 1;
}

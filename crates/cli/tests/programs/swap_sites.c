/* Two mutexes at two known lines, for `run --lock-filter FILE:LINE`: `a` is initialized by
 * pthread_mutex_init at the line marked SITE_A, `b` (a static initializer) is first locked at the
 * line marked SITE_B. Two threads take each N times. While holding a mutex, a thread reads
 * glibc's owner field: glibc's implementation sets it to the holder's thread id, a swapped lock
 * never writes it. Prints "a glibc" or "a swapped", the same for b, and each mutex's count. */
#include "e2e_common.h"
#include <sys/syscall.h>
#include <unistd.h>

#define N 20000

static pthread_mutex_t a;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static long count_a, count_b;
static volatile int a_glibc, b_glibc;

__attribute__((noinline)) static void lock_b(void) {
    OK(pthread_mutex_lock(&b)); /* SITE_B */
}

static void *worker(void *arg) {
    (void)arg;
    int tid = (int)syscall(SYS_gettid);
    for (int i = 0; i < N; i++) {
        OK(pthread_mutex_lock(&a));
        if (a.__data.__owner == tid) a_glibc = 1;
        count_a++;
        OK(pthread_mutex_unlock(&a));
        lock_b();
        if (b.__data.__owner == tid) b_glibc = 1;
        count_b++;
        OK(pthread_mutex_unlock(&b));
    }
    return NULL;
}

int main(void) {
    OK(pthread_mutex_init(&a, NULL)); /* SITE_A */
    pthread_t t[2];
    for (int i = 0; i < 2; i++) OK(pthread_create(&t[i], NULL, worker, NULL));
    for (int i = 0; i < 2; i++) OK(pthread_join(t[i], NULL));
    printf("a %s\nb %s\n", a_glibc ? "glibc" : "swapped", b_glibc ? "glibc" : "swapped");
    printf("count_a %ld\ncount_b %ld\n", count_a, count_b);
    return 0;
}

/* Lock swapping ground truth: a mutex locked through glibc before swapping began must stay
 * glibc's. `early_lock` (swap_early_lib.c) is held since a library constructor; a thread's
 * trylock must find it busy (a swapped lock would be free: its state is elsewhere), main
 * unlocks it, and then T threads x N lock/unlock on it and a later-used static mutex
 * `late_lock` must both exclude exactly. Prints the totals. Args: T N. */
#include "e2e_common.h"

extern pthread_mutex_t early_lock;
pthread_mutex_t late_lock = PTHREAD_MUTEX_INITIALIZER;
static long T, N, early_count, late_count;

static void *busy(void *arg) {
    (void)arg;
    EXPECT(pthread_mutex_trylock(&early_lock), EBUSY);
    return NULL;
}

static void *worker(void *arg) {
    (void)arg;
    for (long i = 0; i < N; i++) {
        OK(pthread_mutex_lock(&early_lock));
        early_count++;
        OK(pthread_mutex_unlock(&early_lock));
        OK(pthread_mutex_lock(&late_lock));
        late_count++;
        OK(pthread_mutex_unlock(&late_lock));
    }
    return NULL;
}

int main(int argc, char **argv) {
    T = arg_long(argc, argv, 1, 3);
    N = arg_long(argc, argv, 2, 10000);
    pthread_t t, th[64];
    OK(pthread_create(&t, NULL, busy, NULL));
    OK(pthread_join(t, NULL));
    OK(pthread_mutex_unlock(&early_lock));
    for (long i = 0; i < T; i++) OK(pthread_create(&th[i], NULL, worker, NULL));
    for (long i = 0; i < T; i++) OK(pthread_join(th[i], NULL));
    printf("early %ld late %ld expected %ld\n", early_count, late_count, T * N);
    return early_count == T * N && late_count == T * N ? 0 : 1;
}

/* Thread churn. argv: THREADS BATCH. THREADS short-lived threads (BATCH at a time) each take
 * churn_lock once. Expected: THREADS acquisitions in all (recorded + dropped). */
#include "e2e_common.h"

pthread_mutex_t churn_lock = PTHREAD_MUTEX_INITIALIZER;

static void *once(void *arg) {
    (void)arg;
    OK(pthread_mutex_lock(&churn_lock));
    OK(pthread_mutex_unlock(&churn_lock));
    return NULL;
}

int main(int argc, char **argv) {
    long threads = arg_long(argc, argv, 1, 1100);
    long batch = arg_long(argc, argv, 2, 16);
    pthread_t th[256];
    for (long done = 0; done < threads; done += batch) {
        long k = threads - done < batch ? threads - done : batch;
        for (long t = 0; t < k; t++) OK(pthread_create(&th[t], NULL, once, NULL));
        for (long t = 0; t < k; t++) OK(pthread_join(th[t], NULL));
    }
    printf("ok\n");
    return 0;
}

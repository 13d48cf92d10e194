/* Thread per request. argv: THREADS ALIVE N. THREADS short-lived threads, at most ALIVE alive at
 * once (each started as soon as an earlier one is joined), each takes request_lock N times and
 * adds to the total, then once more inside a pthread key destructor, after its thread function
 * returned (a lock call during the thread's exit, after the collector's own key destructor).
 * Prints "total T": every acquisition of request_lock (the main thread's last one included),
 * counted by the program itself. */
#include "e2e_common.h"

pthread_mutex_t request_lock = PTHREAD_MUTEX_INITIALIZER;
static long total;
static long per_thread;
static pthread_key_t key;

static void at_exit_of_thread(void *arg) {
    (void)arg;
    OK(pthread_mutex_lock(&request_lock));
    total++;
    OK(pthread_mutex_unlock(&request_lock));
}

static void *request(void *arg) {
    (void)arg;
    for (long i = 0; i < per_thread; i++) {
        OK(pthread_mutex_lock(&request_lock));
        total++;
        OK(pthread_mutex_unlock(&request_lock));
    }
    OK(pthread_setspecific(key, &key));
    return NULL;
}

int main(int argc, char **argv) {
    long threads = arg_long(argc, argv, 1, 2000);
    long alive = arg_long(argc, argv, 2, 16);
    per_thread = arg_long(argc, argv, 3, 10);
    if (alive < 1 || alive > 256) return 2;
    OK(pthread_key_create(&key, at_exit_of_thread));
    pthread_t th[256];
    long started = 0;
    for (; started < alive && started < threads; started++)
        OK(pthread_create(&th[started % alive], NULL, request, NULL));
    for (long joined = 0; joined < threads; joined++) {
        OK(pthread_join(th[joined % alive], NULL));
        if (started < threads) {
            OK(pthread_create(&th[started % alive], NULL, request, NULL));
            started++;
        }
    }
    OK(pthread_mutex_lock(&request_lock));
    long t = total;
    OK(pthread_mutex_unlock(&request_lock));
    printf("total %ld\n", t + 1);
    return 0;
}

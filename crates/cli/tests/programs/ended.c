/* A heap lock used over several intervals of `run --interval`, then destroyed while the program
 * goes on (live/timeline.rs: the time series hands an ended lock's intervals to its class).
 * argv: ROUNDS PER_ROUND SLEEP_MS. Each round: PER_ROUND lock+unlock pairs on the heap mutex,
 * then a SLEEP_MS sleep; then the mutex is destroyed and freed, and the program sleeps 3 more
 * rounds. Prints "ok ACQUISITIONS". */
#include "e2e_common.h"
#include <unistd.h>

int main(int argc, char **argv) {
    long rounds = arg_long(argc, argv, 1, 6), per = arg_long(argc, argv, 2, 1000);
    long sleep_ms = arg_long(argc, argv, 3, 30);
    pthread_mutex_t *m = malloc(sizeof *m);
    OK(pthread_mutex_init(m, NULL));
    long n = 0;
    for (long r = 0; r < rounds; r++) {
        for (long i = 0; i < per; i++) {
            OK(pthread_mutex_lock(m));
            n++;
            OK(pthread_mutex_unlock(m));
        }
        usleep(sleep_ms * 1000);
    }
    OK(pthread_mutex_destroy(m));
    free(m);
    usleep(3 * sleep_ms * 1000);
    printf("ok %ld\n", n);
    return 0;
}

/* A long-running program for `lockmeter top` (live/top.rs): two threads take the mutex named
 * "live.hot" in a loop (holding it a moment, so that they wait on each other) until SIGTERM, or
 * for at most argv[1] seconds (default 60). */
#include "e2e_common.h"
#include "lockmeter.h"
#include <unistd.h>

static pthread_mutex_t hot = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long sink;
static time_t end;

static void *worker(void *arg) {
    (void)arg;
    while (time(NULL) < end) {
        OK(pthread_mutex_lock(&hot));
        for (int k = 0; k < 2000; k++) sink++;
        OK(pthread_mutex_unlock(&hot));
    }
    return NULL;
}

int main(int argc, char **argv) {
    end = time(NULL) + arg_long(argc, argv, 1, 60);
    lockmeter_name(&hot, "live.hot");
    pthread_t t[2];
    for (int i = 0; i < 2; i++) OK(pthread_create(&t[i], NULL, worker, NULL));
    for (int i = 0; i < 2; i++) OK(pthread_join(t[i], NULL));
    return 0;
}

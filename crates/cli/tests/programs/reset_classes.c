/* Lock lifetimes across a reset (live/), driven through stdin and stdout like phases.c: prints
 * "pid P", then before each phase waits for one line on stdin, runs the phase and prints what it
 * did. N heap mutexes (argv[1], default 50), all initialized at one call site (make), and the
 * mutex named reset.keep, which lives throughout. Everything runs on the main thread, so a lock
 * destroyed and initialized again at the same address reuses the thread's record of it.
 *   phase 1: each heap mutex taken 3 times, reset.keep 3 times
 *            ("phase 1 class 3N reset.keep 3")
 *   phase 2: each heap mutex taken 5 times more and destroyed, initialized again at the same
 *            address (same site), taken 7 times and destroyed; reset.keep 4 times
 *            ("phase 2 class 12N reset.keep 4")
 * Ends at EOF on stdin. */
#include "e2e_common.h"
#include "lockmeter.h"
#include <unistd.h>

static pthread_mutex_t keep = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t *heap;
static long n;

static __attribute__((noinline)) void make(pthread_mutex_t *m) { OK(pthread_mutex_init(m, NULL)); }

static __attribute__((noinline)) long take(pthread_mutex_t *m, long times) {
    for (long i = 0; i < times; i++) {
        OK(pthread_mutex_lock(m));
        OK(pthread_mutex_unlock(m));
    }
    return times;
}

static int wait_go(void) {
    char line[64];
    return fgets(line, sizeof line, stdin) != NULL;
}

int main(int argc, char **argv) {
    n = arg_long(argc, argv, 1, 50);
    if (n < 1) return 95;
    heap = calloc(n, sizeof *heap);
    if (!heap) return 95;
    lockmeter_name(&keep, "reset.keep");
    for (long i = 0; i < n; i++) make(&heap[i]);
    printf("pid %d\n", (int)getpid());
    fflush(stdout);
    for (int phase = 1; wait_go(); phase++) {
        long class = 0, kept = 0;
        if (phase == 1) {
            for (long i = 0; i < n; i++) class += take(&heap[i], 3);
            kept = take(&keep, 3);
        } else if (phase == 2) {
            for (long i = 0; i < n; i++) {
                class += take(&heap[i], 5);
                OK(pthread_mutex_destroy(&heap[i]));
                make(&heap[i]);
                class += take(&heap[i], 7);
                OK(pthread_mutex_destroy(&heap[i]));
            }
            kept = take(&keep, 4);
        }
        printf("phase %d class %ld reset.keep %ld\n", phase, class, kept);
        fflush(stdout);
    }
    free(heap);
    return 0;
}

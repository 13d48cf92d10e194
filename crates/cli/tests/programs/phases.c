/* A long-running program in phases, driven by the test through its stdin and stdout (live/):
 * it prints "pid P", then before each phase waits for one line on stdin ("go"), runs the phase
 * and prints what it did: "phase K LOCK N ..." (N acquisitions of the mutex named LOCK). Ends at
 * EOF on stdin.
 *   phase 1: live.a, 1000        phase 2: live.a, 300 and live.b, 200
 *   phase 3: live.a, 700
 *   phase 4: live.c, 2 threads x 5000 at once; live.d, 2 acquisitions, 1 contended by
 *            construction (as in contended.c: a helper holds it across a barrier and 100 ms, main
 *            asks for it right after the barrier).
 * Every later phase repeats phase 4. */
#include "e2e_common.h"
#include "lockmeter.h"
#include <unistd.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t c = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t d = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t bar;
static volatile unsigned long sink;

static void take(pthread_mutex_t *m, long n) {
    for (long i = 0; i < n; i++) {
        OK(pthread_mutex_lock(m));
        sink++;
        OK(pthread_mutex_unlock(m));
    }
}

#define PER_THREAD 5000

static void *worker(void *arg) {
    (void)arg;
    for (long i = 0; i < PER_THREAD; i++) {
        OK(pthread_mutex_lock(&c));
        for (int k = 0; k < 50; k++) sink++;
        OK(pthread_mutex_unlock(&c));
    }
    return NULL;
}

static void *holder(void *arg) {
    (void)arg;
    OK(pthread_mutex_lock(&d));
    pthread_barrier_wait(&bar);
    usleep(100000);
    OK(pthread_mutex_unlock(&d));
    return NULL;
}

static int wait_go(void) {
    char line[64];
    return fgets(line, sizeof line, stdin) != NULL;
}

int main(void) {
    lockmeter_name(&a, "live.a");
    lockmeter_name(&b, "live.b");
    lockmeter_name(&c, "live.c");
    lockmeter_name(&d, "live.d");
    OK(pthread_barrier_init(&bar, NULL, 2));
    printf("pid %d\n", (int)getpid());
    fflush(stdout);
    for (int phase = 1; wait_go(); phase++) {
        switch (phase) {
        case 1:
            take(&a, 1000);
            printf("phase 1 live.a 1000\n");
            break;
        case 2:
            take(&a, 300);
            take(&b, 200);
            printf("phase 2 live.a 300 live.b 200\n");
            break;
        case 3:
            take(&a, 700);
            printf("phase 3 live.a 700\n");
            break;
        default: {
            pthread_t t[3];
            for (long i = 0; i < 2; i++) OK(pthread_create(&t[i], NULL, worker, (void *)i));
            for (int i = 0; i < 2; i++) OK(pthread_join(t[i], NULL));
            OK(pthread_create(&t[2], NULL, holder, NULL));
            pthread_barrier_wait(&bar);
            OK(pthread_mutex_lock(&d));
            OK(pthread_mutex_unlock(&d));
            OK(pthread_join(t[2], NULL));
            printf("phase %d live.c %d live.d 2 contended 1\n", phase, 2 * PER_THREAD);
        }
        }
        fflush(stdout);
    }
    return 0;
}

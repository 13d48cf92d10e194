/* A long-running program in phases, driven by the test through its stdin and stdout (live.rs):
 * it prints "pid P", then before each phase waits for one line on stdin ("go"), runs the phase
 * and prints what it did: "phase K LOCK N" (N acquisitions of the mutex named LOCK, one thread),
 * or for a contended phase "phase K LOCK N contended C" (two threads, N acquisitions in all, C of
 * them found the lock held by the other thread: counted with trylock first, the way the
 * collector counts). Ends at EOF on stdin.
 *   phase 1: live.a, 1000        phase 2: live.a, 300 and live.b, 200
 *   phase 3: live.a, 700         phase 4: live.c, 2 x 5000, contended
 * Every later phase repeats phase 4's shape on live.c. */
#include "e2e_common.h"
#include "lockmeter.h"
#include <unistd.h>

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t c = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long sink;

static void take(pthread_mutex_t *m, long n) {
    for (long i = 0; i < n; i++) {
        OK(pthread_mutex_lock(m));
        sink++;
        OK(pthread_mutex_unlock(m));
    }
}

#define PER_THREAD 5000
static long contended_by[2];

static void *worker(void *arg) {
    long me = (long)arg;
    for (long i = 0; i < PER_THREAD; i++) {
        int r = pthread_mutex_trylock(&c);
        if (r == EBUSY) {
            contended_by[me]++;
            OK(pthread_mutex_lock(&c));
        } else {
            EXPECT(r, 0);
        }
        for (int k = 0; k < 50; k++) sink++;
        OK(pthread_mutex_unlock(&c));
    }
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
            pthread_t t[2];
            contended_by[0] = contended_by[1] = 0;
            for (long i = 0; i < 2; i++) OK(pthread_create(&t[i], NULL, worker, (void *)i));
            for (int i = 0; i < 2; i++) OK(pthread_join(t[i], NULL));
            printf("phase %d live.c %d contended %ld\n", phase, 2 * PER_THREAD,
                   contended_by[0] + contended_by[1]);
        }
        }
        fflush(stdout);
    }
    return 0;
}

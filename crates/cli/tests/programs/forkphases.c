/* A fork child driven like phases.c (live/control.rs): the parent takes the mutex named
 * "fp.parent" 10 times (it is metered), forks and waits for the child, and exits with its
 * status. The child prints "pid P" (its own pid) without taking a lock, then before each phase
 * waits for one line on stdin, takes the mutex named "fp.child" 100 * K times in phase K and
 * prints "phase K fp.child N" (N: its acquisitions so far). Ends at EOF on stdin. */
#include "e2e_common.h"
#include "lockmeter.h"
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_mutex_t parent = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t child = PTHREAD_MUTEX_INITIALIZER;

int main(void) {
    lockmeter_name(&parent, "fp.parent");
    lockmeter_name(&child, "fp.child");
    for (int i = 0; i < 10; i++) {
        OK(pthread_mutex_lock(&parent));
        OK(pthread_mutex_unlock(&parent));
    }
    fflush(stdout);
    pid_t c = fork();
    if (c < 0) return 90;
    if (c > 0) {
        int st;
        if (waitpid(c, &st, 0) != c || !WIFEXITED(st)) return 91;
        return WEXITSTATUS(st);
    }
    printf("pid %d\n", (int)getpid());
    fflush(stdout);
    char line[64];
    long total = 0;
    for (int k = 1; fgets(line, sizeof line, stdin); k++) {
        for (long i = 0; i < 100L * k; i++) {
            OK(pthread_mutex_lock(&child));
            OK(pthread_mutex_unlock(&child));
        }
        total += 100L * k;
        printf("phase %d fp.child %ld\n", k, total);
        fflush(stdout);
    }
    return 0;
}

/* exec. argv: N M. Stage 1 takes exec_lock N times, tries to exec a program that does not
 * exist (must fail with ENOENT: the profile written for the exec is withdrawn and metering goes
 * on), takes exec_lock N more times, then execs itself as stage 2 ("stage2 M"), which takes
 * stage2_lock M times and exits 0. Expected: stage 1 profile 2N (end "exec"), stage 2 M. */
#include "e2e_common.h"
#include <unistd.h>

pthread_mutex_t exec_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t stage2_lock = PTHREAD_MUTEX_INITIALIZER;

static void take(pthread_mutex_t *m, long n) {
    for (long i = 0; i < n; i++) {
        OK(pthread_mutex_lock(m));
        OK(pthread_mutex_unlock(m));
    }
}

int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[1], "stage2")) {
        take(&stage2_lock, arg_long(argc, argv, 2, 0));
        printf("stage2 ok\n");
        return 0;
    }
    long n = arg_long(argc, argv, 1, 100);
    char *m = argc > 2 ? argv[2] : "50";
    take(&exec_lock, n);
    char *bad[] = {"/nonexistent/lockmeter-e2e", NULL};
    if (execv(bad[0], bad) != -1 || errno != ENOENT) {
        fprintf(stderr, "failed exec: errno %d\n", errno);
        return 91;
    }
    take(&exec_lock, n);
    fflush(stdout);
    char *args[] = {argv[0], "stage2", m, NULL};
    execv("/proc/self/exe", args);
    perror("execv");
    return 92;
}

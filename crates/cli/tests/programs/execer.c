/* exec. argv: N M [HOW]. Stage 1 takes exec_lock N times, tries to exec a program that does not
 * exist (must fail with ENOENT: the profile written for the exec is withdrawn and metering goes
 * on), takes exec_lock N more times, then execs itself as stage 2 ("stage2 M"), which takes
 * stage2_lock M times and exits 0. Expected: stage 1 profile 2N (end "exec"), stage 2 M.
 * HOW picks the exec function of the second exec: execv (default), execve, execvp, execl,
 * execlp, execle. */
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
    const char *how = argc > 3 ? argv[3] : "execv";
    char *args[] = {argv[0], "stage2", m, NULL};
    extern char **environ;
    if (!strcmp(how, "execv")) execv("/proc/self/exe", args);
    else if (!strcmp(how, "execve")) execve("/proc/self/exe", args, environ);
    else if (!strcmp(how, "execvp")) execvp("/proc/self/exe", args);
    else if (!strcmp(how, "execl")) execl("/proc/self/exe", argv[0], "stage2", m, (char *)NULL);
    else if (!strcmp(how, "execlp")) execlp("/proc/self/exe", argv[0], "stage2", m, (char *)NULL);
    else if (!strcmp(how, "execle")) execle("/proc/self/exe", argv[0], "stage2", m, (char *)NULL, environ);
    perror("execv");
    return 92;
}

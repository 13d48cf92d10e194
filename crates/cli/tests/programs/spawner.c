/* Process trees. argv: N M. The parent takes parent_lock N times, then starts its own image as
 * "stage2 M" three ways -- posix_spawn, vfork + execv, fork + execv -- waits for each, and takes
 * parent_lock N more times. Stage 2 takes child_lock M times. Prints "spawned PID" per child.
 * Expected: parent 2N; each stage-2 image M; the fork child's pre-exec image 0 (end "exec").
 * With a third argument "thenexec" the parent finally execs itself as stage 2 too. */
#include "e2e_common.h"
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
pthread_mutex_t parent_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t child_lock = PTHREAD_MUTEX_INITIALIZER;

static void take(pthread_mutex_t *m, long n) {
    for (long i = 0; i < n; i++) {
        OK(pthread_mutex_lock(m));
        OK(pthread_mutex_unlock(m));
    }
}

static void reap(pid_t pid) {
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) exit(96);
    printf("spawned %d\n", (int)pid);
}

int main(int argc, char **argv) {
    if (argc > 2 && !strcmp(argv[1], "stage2")) {
        take(&child_lock, arg_long(argc, argv, 2, 0));
        return 0;
    }
    long n = arg_long(argc, argv, 1, 100);
    char *m = argc > 2 ? argv[2] : "50";
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return 95;
    self[len] = 0;
    char *args[] = {self, "stage2", m, NULL};
    take(&parent_lock, n);
    fflush(stdout);

    pid_t pid;
    OK(posix_spawn(&pid, self, NULL, NULL, args, environ));
    reap(pid);

    pid = vfork();
    if (pid < 0) return 95;
    if (pid == 0) {
        execv(self, args);
        _exit(97);
    }
    reap(pid);

    pid = fork();
    if (pid < 0) return 95;
    if (pid == 0) {
        execv(self, args);
        _exit(97);
    }
    reap(pid);

    take(&parent_lock, n);
    if (argc > 3 && !strcmp(argv[3], "thenexec")) {
        fflush(stdout);
        execv(self, args);
        return 98;
    }
    return 0;
}

/* A child made without fork's handlers: glibc's _Fork ("_fork") or a raw clone system call
 * ("clone"). The parent takes fork_lock PARENT times (half before the child is made, half while
 * it runs), the child CHILD times; the parent waits for the child and prints
 * "parent_locks P child_locks C" (C as the child's exit code says it counted).
 * argv: MODE PARENT CHILD (CHILD <= 255). */
#define _GNU_SOURCE
#include "e2e_common.h"
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

pid_t _Fork(void);

pthread_mutex_t fork_lock = PTHREAD_MUTEX_INITIALIZER;

static long take(long n) {
    long c = 0;
    for (long i = 0; i < n; i++) {
        OK(pthread_mutex_lock(&fork_lock));
        c++;
        OK(pthread_mutex_unlock(&fork_lock));
    }
    return c;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    long parent = arg_long(argc, argv, 2, 1000), child = arg_long(argc, argv, 3, 100);
    long p = take(parent / 2);
    pid_t pid;
    if (strcmp(argv[1], "_fork") == 0)
        pid = _Fork();
    else
        pid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (pid < 0) return 3;
    if (pid == 0) _exit((int)take(child));
    p += take(parent - parent / 2);
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return 4;
    printf("parent_locks %ld child_locks %d\n", p, WEXITSTATUS(st));
    return 0;
}

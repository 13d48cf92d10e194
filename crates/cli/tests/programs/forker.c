/* fork. argv: PARENT_BEFORE PARENT_AFTER CHILD.
 * fork_lock: parent takes it PARENT_BEFORE times (and a helper thread, joined before the fork,
 * takes helper_lock HELPER times), forks two children, then takes it PARENT_AFTER times and waits.
 * Child 1 takes fork_lock CHILD times and child_lock CHILD/2 times, then exit(0) (atexit).
 * Child 2 takes fork_lock CHILD times, then _exit(0).
 * held_lock is held by the parent across the first fork: child 1 unlocks its copy (a lock it
 * did not take in its own image) and takes it 5 times; the parent took it once.
 * Prints "child1 PID" and "child2 PID". */
#include "e2e_common.h"
#include <sys/wait.h>
#include <unistd.h>

pthread_mutex_t fork_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t child_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t helper_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
#define HELPER 77

static void take(pthread_mutex_t *m, long n) {
    for (long i = 0; i < n; i++) {
        OK(pthread_mutex_lock(m));
        OK(pthread_mutex_unlock(m));
    }
}

static void *helper(void *arg) {
    (void)arg;
    take(&helper_lock, HELPER);
    return NULL;
}

int main(int argc, char **argv) {
    long before = arg_long(argc, argv, 1, 100);
    long after = arg_long(argc, argv, 2, 200);
    long child = arg_long(argc, argv, 3, 300);
    pthread_t t;
    OK(pthread_create(&t, NULL, helper, NULL));
    OK(pthread_join(t, NULL));
    take(&fork_lock, before);
    fflush(stdout);
    OK(pthread_mutex_lock(&held_lock));
    pid_t c1 = fork();
    if (c1 < 0) return 95;
    if (c1 == 0) {
        OK(pthread_mutex_unlock(&held_lock));
        take(&held_lock, 5);
        take(&fork_lock, child);
        take(&child_lock, child / 2);
        exit(0);
    }
    OK(pthread_mutex_unlock(&held_lock));
    pid_t c2 = fork();
    if (c2 < 0) return 95;
    if (c2 == 0) {
        take(&fork_lock, child);
        _exit(0);
    }
    take(&fork_lock, after);
    int st;
    if (waitpid(c1, &st, 0) != c1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return 96;
    if (waitpid(c2, &st, 0) != c2 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return 97;
    printf("child1 %d\nchild2 %d\n", (int)c1, (int)c2);
    return 0;
}

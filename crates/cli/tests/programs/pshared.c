/* Process-shared locks. argv: N. A mutex and a rwlock in a MAP_SHARED mapping, with
 * PTHREAD_PROCESS_SHARED; parent and a forked child each take the mutex N times and the rwlock
 * N times for reading and N/2 for writing, concurrently; a shared counter checks exclusion.
 * Expected in each process's profile: shm mutex N, shm rwlock N reads + N/2 writes. */
#include "e2e_common.h"
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

struct shm {
    pthread_mutex_t m;
    pthread_rwlock_t rw;
    long counter;
};

static void work(struct shm *s, long n) {
    for (long i = 0; i < n; i++) {
        OK(pthread_mutex_lock(&s->m));
        s->counter++;
        OK(pthread_mutex_unlock(&s->m));
        OK(pthread_rwlock_rdlock(&s->rw));
        OK(pthread_rwlock_unlock(&s->rw));
        if (i % 2 == 0) {
            OK(pthread_rwlock_wrlock(&s->rw));
            OK(pthread_rwlock_unlock(&s->rw));
        }
    }
}

int main(int argc, char **argv) {
    long n = arg_long(argc, argv, 1, 20000);
    struct shm *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED) return 95;
    pthread_mutexattr_t ma;
    OK(pthread_mutexattr_init(&ma));
    OK(pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED));
    OK(pthread_mutex_init(&s->m, &ma));
    pthread_rwlockattr_t ra;
    OK(pthread_rwlockattr_init(&ra));
    OK(pthread_rwlockattr_setpshared(&ra, PTHREAD_PROCESS_SHARED));
    OK(pthread_rwlock_init(&s->rw, &ra));
    fflush(stdout);
    pid_t c = fork();
    if (c < 0) return 95;
    work(s, n);
    if (c == 0) exit(0);
    int st;
    if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return 96;
    if (s->counter != 2 * n) {
        fprintf(stderr, "counter %ld\n", s->counter);
        return 91;
    }
    printf("child %d\n", (int)c);
    return 0;
}

/* A program the OOM killer ends. argv: N THREADS [fork].
 * THREADS threads each take oom_lock N times (joined), then it prints "oom_lock TOTAL" (the
 * acquisitions of oom_lock), flushes, and allocates and touches memory, 1 MiB at a time, until
 * the OOM killer kills it (run it in a cgroup with a small memory limit). If 64 GiB were touched
 * and it still lives, it prints "not killed" and exits 99.
 * With "fork", a fork child does that instead: it takes child_lock N times, prints
 * "child_lock N" and allocates until killed; the parent waits for it, prints "child_status S"
 * (the wait status) and exits 0.
 * With "dlopen LIB", it then loads the library LIB (shlib.c) with dlopen, calls its shlib_take(N)
 * (shlib_lock and shlib_private_lock N times each), prints "shlib_lock N", and allocates until
 * killed. */
#include "e2e_common.h"
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

pthread_mutex_t oom_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t child_lock = PTHREAD_MUTEX_INITIALIZER;
static long n;

static int eat_memory(void) {
    for (long mib = 0; mib < 64 * 1024; mib++) {
        char *p = malloc(1 << 20);
        if (!p) continue;
        memset(p, (int)mib | 1, 1 << 20);
    }
    printf("not killed\n");
    return 99;
}

static void *worker(void *arg) {
    (void)arg;
    for (long i = 0; i < n; i++) {
        OK(pthread_mutex_lock(&oom_lock));
        OK(pthread_mutex_unlock(&oom_lock));
    }
    return NULL;
}

int main(int argc, char **argv) {
    n = arg_long(argc, argv, 1, 1000);
    long threads = arg_long(argc, argv, 2, 2);
    pthread_t th[64];
    if (threads < 1 || threads > 64) return 2;
    for (long t = 0; t < threads; t++) OK(pthread_create(&th[t], NULL, worker, NULL));
    for (long t = 0; t < threads; t++) OK(pthread_join(th[t], NULL));
    printf("oom_lock %ld\n", n * threads);
    fflush(stdout);
    if (argc > 4 && !strcmp(argv[3], "dlopen")) {
        void *lib = dlopen(argv[4], RTLD_NOW);
        if (!lib) {
            fprintf(stderr, "dlopen: %s\n", dlerror());
            return 95;
        }
        void (*take)(long) = (void (*)(long))dlsym(lib, "shlib_take");
        if (!take) return 94;
        take(n);
        printf("shlib_lock %ld\n", n);
        fflush(stdout);
        return eat_memory();
    }
    if (argc > 3 && !strcmp(argv[3], "fork")) {
        pid_t pid = fork();
        if (pid < 0) return 96;
        if (pid == 0) {
            for (long i = 0; i < n; i++) {
                OK(pthread_mutex_lock(&child_lock));
                OK(pthread_mutex_unlock(&child_lock));
            }
            printf("child_lock %ld\n", n);
            fflush(stdout);
            return eat_memory();
        }
        int st = 0;
        if (waitpid(pid, &st, 0) != pid) return 98;
        printf("child_status %d\n", st);
        return 0;
    }
    return eat_memory();
}

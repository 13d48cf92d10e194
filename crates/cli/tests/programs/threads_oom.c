/* Creates threads until pthread_create fails under an address-space limit (RLIMIT_AS set to the
 * process's size now plus HEADROOM KiB), each with a small stack: every thread takes the mutex
 * spawn_lock once and then waits on a pipe until main is done. Prints "threads N", "locks N" (the
 * threads' acquisitions of spawn_lock), "main_locks M" (main's, while it waits for them) and
 * "error NAME" (the error that stopped it: EAGAIN expected), then
 * lifts the limit, releases and joins the threads. argv: [HEADROOM_KIB] (default 4096). */
#include "e2e_common.h"
#include <errno.h>
#include <limits.h>
#include <sys/resource.h>
#include <unistd.h>

#define MAX_THREADS 100000

pthread_mutex_t spawn_lock = PTHREAD_MUTEX_INITIALIZER;
static long locks;
static int gate[2];
static pthread_t th[MAX_THREADS];

static void *worker(void *arg) {
    (void)arg;
    OK(pthread_mutex_lock(&spawn_lock));
    locks++;
    OK(pthread_mutex_unlock(&spawn_lock));
    char c;
    while (read(gate[0], &c, 1) < 0 && errno == EINTR) {
    }
    return NULL;
}

/* VmSize of /proc/self/status, in KiB. */
static long vm_size_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %ld kB", &v) == 1) break;
    if (f) fclose(f);
    return v;
}

int main(int argc, char **argv) {
    long headroom = arg_long(argc, argv, 1, 4096);
    if (pipe(gate) != 0) return 2;
    pthread_attr_t attr;
    OK(pthread_attr_init(&attr));
    OK(pthread_attr_setstacksize(&attr, PTHREAD_STACK_MIN));
    struct rlimit old, lim;
    if (getrlimit(RLIMIT_AS, &old) != 0) return 2;
    long size = vm_size_kib();
    if (size < 0) return 2;
    lim = old;
    lim.rlim_cur = (rlim_t)(size + headroom) * 1024;
    if (setrlimit(RLIMIT_AS, &lim) != 0) return 2;
    long n = 0;
    int err = 0;
    while (n < MAX_THREADS) {
        err = pthread_create(&th[n], &attr, worker, NULL);
        if (err != 0) break;
        n++;
    }
    if (setrlimit(RLIMIT_AS, &old) != 0) return 2;
    /* Every thread has taken the lock once before main reads the count. */
    long main_locks = 0;
    for (;;) {
        OK(pthread_mutex_lock(&spawn_lock));
        main_locks++;
        long l = locks;
        OK(pthread_mutex_unlock(&spawn_lock));
        if (l == n) break;
        usleep(1000);
    }
    close(gate[1]);
    for (long t = 0; t < n; t++) OK(pthread_join(th[t], NULL));
    printf("threads %ld\nlocks %ld\nmain_locks %ld\nerror %s\n", n, locks, main_locks,
           err == EAGAIN ? "EAGAIN" : "other");
    return 0;
}

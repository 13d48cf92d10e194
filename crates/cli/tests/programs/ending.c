/* How a process ends. argv: MODE N [THREADS].
 * Takes end_lock N times in the main thread (and N times in each of THREADS-1 helper threads,
 * joined first), then ends by MODE:
 *   exit7: exit(7)   _exit3: _exit(3)   chdir: chdir("/") then exit(0)
 *   hup: raise(SIGHUP)   abort: abort()
 *   termhandler: installs its own SIGTERM handler (which calls _exit(5)), then raise(SIGTERM)   term: raise(SIGTERM)   int: kill(getpid(), SIGINT)
 *   wait: prints "ready", then waits for a signal (pause)
 *   termbusy: starts THREADS threads that lock end_lock in a loop forever, lets them run
 *     100 ms, then raise(SIGTERM) while they are locking */
#include "e2e_common.h"
#include <signal.h>
#include <unistd.h>

pthread_mutex_t end_lock = PTHREAD_MUTEX_INITIALIZER;
static long n;

static void on_term(int sig) {
    (void)sig;
    _exit(5);
}

static void *spinner(void *arg) {
    (void)arg;
    for (;;) {
        OK(pthread_mutex_lock(&end_lock));
        OK(pthread_mutex_unlock(&end_lock));
    }
    return NULL;
}

static void *worker(void *arg) {
    (void)arg;
    for (long i = 0; i < n; i++) {
        OK(pthread_mutex_lock(&end_lock));
        OK(pthread_mutex_unlock(&end_lock));
    }
    return NULL;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "exit7";
    n = arg_long(argc, argv, 2, 1000);
    long threads = arg_long(argc, argv, 3, 1);
    pthread_t th[64];
    if (!strcmp(mode, "termbusy")) {
        for (long t = 0; t < threads; t++) OK(pthread_create(&th[t], NULL, spinner, NULL));
        struct timespec d = {0, 100000000L};
        nanosleep(&d, NULL);
        raise(SIGTERM);
        fprintf(stderr, "still alive after SIGTERM\n");
        return 99;
    }
    for (long t = 1; t < threads; t++) OK(pthread_create(&th[t], NULL, worker, NULL));
    for (long t = 1; t < threads; t++) OK(pthread_join(th[t], NULL));
    worker(NULL);
    if (!strcmp(mode, "exit7")) exit(7);
    if (!strcmp(mode, "_exit3")) _exit(3);
    if (!strcmp(mode, "chdir")) {
        if (chdir("/") != 0) return 95;
        exit(0);
    }
    if (!strcmp(mode, "term")) raise(SIGTERM);
    if (!strcmp(mode, "int")) kill(getpid(), SIGINT);
    if (!strcmp(mode, "hup")) raise(SIGHUP);
    if (!strcmp(mode, "abort")) abort();
    if (!strcmp(mode, "termhandler")) {
        signal(SIGTERM, on_term);
        raise(SIGTERM);
    }
    if (!strcmp(mode, "wait")) {
        printf("ready\n");
        fflush(stdout);
        for (;;) pause();
    }
    fprintf(stderr, "still alive after %s\n", mode);
    return 99;
}

/* How a process ends. argv: MODE N [THREADS].
 * Takes end_lock N times in the main thread (and N times in each of THREADS-1 helper threads,
 * joined first), then ends by MODE:
 *   exit7: exit(7)   exit3: exit(3)   return0: returns 0 from main   _exit3: _exit(3)
 *   chdir: chdir("/") then exit(0)
 *   hup: raise(SIGHUP)   abort: abort()
 *   termhandler: installs its own SIGTERM handler (which calls _exit(5)), then raise(SIGTERM)   term: raise(SIGTERM)   int: kill(getpid(), SIGINT)
 *   wait: prints "ready", then waits for a signal (pause)
 *   termbusy: starts THREADS threads that lock end_lock in a loop forever, lets them run
 *     100 ms, then raise(SIGTERM) while they are locking
 * Endings no handler sees; each first prints "end_lock TOTAL" (the acquisitions of end_lock):
 *   kill9: raise(SIGKILL)   segv: writes through a null pointer
 *   waitkill: prints "pid PID" and "ready", then waits to be killed
 *   exitgroup: starts 2 threads that lock spin_lock forever, then another thread calls the raw
 *     exit_group system call with status 5 while they lock
 *   forkkill: a fork child takes end_lock N times, prints "child_end_lock N" and raises SIGKILL;
 *     the parent waits for it, prints "child_status S" (the wait status) and exits 0 */
#include "e2e_common.h"
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

pthread_mutex_t end_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t spin_lock = PTHREAD_MUTEX_INITIALIZER;
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

static void *spin_spinner(void *arg) {
    (void)arg;
    for (;;) {
        OK(pthread_mutex_lock(&spin_lock));
        OK(pthread_mutex_unlock(&spin_lock));
    }
    return NULL;
}

static void *group_exiter(void *arg) {
    (void)arg;
    syscall(SYS_exit_group, 5);
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
    if (!strcmp(mode, "forkkill")) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) return 96;
        if (pid == 0) {
            worker(NULL);
            printf("child_end_lock %ld\n", n);
            fflush(stdout);
            raise(SIGKILL);
            return 97;
        }
        int st = 0;
        if (waitpid(pid, &st, 0) != pid) return 98;
        printf("end_lock %ld\nchild_status %d\n", n * threads, st);
        exit(0);
    }
    if (!strcmp(mode, "kill9") || !strcmp(mode, "segv") || !strcmp(mode, "waitkill") ||
        !strcmp(mode, "exitgroup")) {
        printf("end_lock %ld\n", n * threads);
        fflush(stdout);
    }
    if (!strcmp(mode, "kill9")) raise(SIGKILL);
    if (!strcmp(mode, "segv")) *(volatile int *)(uintptr_t)arg_long(argc, argv, 4, 0) = 1;
    if (!strcmp(mode, "waitkill")) {
        printf("pid %d\nready\n", (int)getpid());
        fflush(stdout);
        for (;;) pause();
    }
    if (!strcmp(mode, "exitgroup")) {
        for (int t = 0; t < 2; t++) OK(pthread_create(&th[t], NULL, spin_spinner, NULL));
        struct timespec d = {0, 50000000L};
        nanosleep(&d, NULL);
        OK(pthread_create(&th[2], NULL, group_exiter, NULL));
        for (;;) pause();
    }
    if (!strcmp(mode, "exit7")) exit(7);
    if (!strcmp(mode, "exit3")) exit(3);
    if (!strcmp(mode, "return0")) return 0;
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

/* A fork child whose first lock comes after its parent's image ended (a fork child copies the
 * collector's tables at its first lock; processes.rs). argv: none (stage 1), or "stage2 FD CPID".
 * Stage 1: takes p1_lock 100 times, makes a pipe, forks the child, then execs itself as stage 2
 * (its first image's profile is written: the memory the child still shares with it says so).
 * Stage 2: takes p2_lock 50 times, writes one byte to the pipe, waits for the child and prints
 * "child PID".
 * The child: waits for the byte, then, still without a lock, forks a grandchild that takes g_lock
 * 30 times and exits; waits for it, prints "grandchild PID", takes c_lock 20 times and exits. */
#include "e2e_common.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

pthread_mutex_t p1_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t p2_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t c_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static void take(pthread_mutex_t *m, long n) {
    for (long i = 0; i < n; i++) {
        OK(pthread_mutex_lock(m));
        OK(pthread_mutex_unlock(m));
    }
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "stage2") == 0) {
        int fd = atoi(argv[2]);
        pid_t c = (pid_t)atoi(argv[3]);
        take(&p2_lock, 50);
        if (write(fd, "g", 1) != 1) return 90;
        close(fd);
        int st;
        if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return 91;
        printf("child %d\n", (int)c);
        return 0;
    }
    take(&p1_lock, 100);
    int p[2];
    if (pipe(p) != 0) return 92;
    fflush(stdout);
    pid_t c = fork();
    if (c < 0) return 93;
    if (c == 0) {
        close(p[1]);
        char b;
        if (read(p[0], &b, 1) != 1) _exit(94);
        pid_t g = fork();
        if (g < 0) _exit(95);
        if (g == 0) {
            take(&g_lock, 30);
            exit(0);
        }
        int st;
        if (waitpid(g, &st, 0) != g || !WIFEXITED(st) || WEXITSTATUS(st) != 0) _exit(96);
        printf("grandchild %d\n", (int)g);
        take(&c_lock, 20);
        exit(0);
    }
    close(p[0]);
    char fd[16], cpid[16];
    snprintf(fd, sizeof fd, "%d", p[1]);
    snprintf(cpid, sizeof cpid, "%d", (int)c);
    execl("/proc/self/exe", argv[0], "stage2", fd, cpid, (char *)NULL);
    return 97;
}

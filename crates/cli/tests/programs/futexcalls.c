// Cost of traced futex calls: N FUTEX_WAKE calls that wake nobody and N FUTEX_WAIT calls that
// return at once (the word does not hold the expected value), timed by the program itself.
// Prints "wake_ns X wait_ns Y" (per call). Usage: futexcalls N
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int word;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 200000;
    double t0 = now();
    for (long i = 0; i < n; i++) syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    double t1 = now();
    for (long i = 0; i < n; i++) syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0);
    double t2 = now();
    printf("wake_ns %.0f wait_ns %.0f\n", (t1 - t0) / n, (t2 - t1) / n);
    return 0;
}

/* Shared helpers of the end-to-end test programs (the test files of crates/cli/tests). */
#ifndef E2E_COMMON_H
#define E2E_COMMON_H
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Checks that a call returned `want`; on a mismatch prints where and exits 90. */
#define EXPECT(call, want)                                                                  \
    do {                                                                                    \
        int r_ = (call);                                                                    \
        if (r_ != (want)) {                                                                 \
            fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d (%s)\n", __FILE__,     \
                    __LINE__, #call, r_, strerror(r_), (want), strerror(want));             \
            exit(90);                                                                       \
        }                                                                                   \
    } while (0)

#define OK(call) EXPECT(call, 0)

static inline long arg_long(int argc, char **argv, int i, long dflt) {
    return argc > i ? strtol(argv[i], NULL, 10) : dflt;
}

/* An absolute CLOCK_REALTIME deadline `ms` milliseconds from now. */
static inline struct timespec deadline_ms(long ms) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += (ms % 1000) * 1000000L;
    t.tv_sec += ms / 1000 + t.tv_nsec / 1000000000L;
    t.tv_nsec %= 1000000000L;
    return t;
}

/* The same on CLOCK_MONOTONIC (for the clock* variants). */
static inline struct timespec mono_deadline_ms(long ms) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_nsec += (ms % 1000) * 1000000L;
    t.tv_sec += ms / 1000 + t.tv_nsec / 1000000000L;
    t.tv_nsec %= 1000000000L;
    return t;
}
#endif

/* Two locks, each with one long holder and one waiter, for the summary `lockmeter run` prints:
   slow_update() holds big_lock ~1 ms at a time while reader_path() wants it; flush_log() holds
   log_lock ~0.2 ms at a time while append_log() wants it. Only the holders hold for long, so
   the waiters' waits are spent on them.
   With "alone" as argument, one thread takes big_lock R times and log_lock 2R times: no
   contention at all.
   Prints where each function takes its lock ("site FUNCTION holders.c:LINE") and each lock's
   acquisitions ("lock NAME N"). Usage: holders [contended|alone] [R] */
#include "e2e_common.h"
#include <stdatomic.h>

pthread_mutex_t big_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static atomic_int big_done, log_done;
static atomic_long big_acq, log_acq;
static int line_update, line_reader, line_flush, line_append;

/* Takes `m`, noting the line of the call in `line`. */
#define LOCK_AT(m, line)                                                                   \
    do {                                                                                   \
        line = __LINE__;                                                                   \
        OK(pthread_mutex_lock(m));                                                         \
    } while (0)

static void sleep_us(long us) {
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

__attribute__((noinline)) void slow_update(long hold_us) {
    LOCK_AT(&big_lock, line_update);
    sleep_us(hold_us);
    OK(pthread_mutex_unlock(&big_lock));
    atomic_fetch_add(&big_acq, 1);
}

__attribute__((noinline)) void reader_path(void) {
    LOCK_AT(&big_lock, line_reader);
    OK(pthread_mutex_unlock(&big_lock));
    atomic_fetch_add(&big_acq, 1);
}

__attribute__((noinline)) void flush_log(long hold_us) {
    LOCK_AT(&log_lock, line_flush);
    sleep_us(hold_us);
    OK(pthread_mutex_unlock(&log_lock));
    atomic_fetch_add(&log_acq, 1);
}

__attribute__((noinline)) void append_log(void) {
    LOCK_AT(&log_lock, line_append);
    OK(pthread_mutex_unlock(&log_lock));
    atomic_fetch_add(&log_acq, 1);
}

static long rounds;

static void *updater(void *arg) {
    (void)arg;
    for (long i = 0; i < rounds; i++) {
        slow_update(1000);
        sleep_us(200);
    }
    atomic_store(&big_done, 1);
    return NULL;
}

static void *reader(void *arg) {
    (void)arg;
    while (!atomic_load(&big_done)) {
        reader_path();
        sleep_us(50);
    }
    return NULL;
}

static void *flusher(void *arg) {
    (void)arg;
    for (long i = 0; i < rounds; i++) {
        flush_log(200);
        sleep_us(100);
    }
    atomic_store(&log_done, 1);
    return NULL;
}

static void *appender(void *arg) {
    (void)arg;
    while (!atomic_load(&log_done)) {
        append_log();
        sleep_us(20);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int alone = argc > 1 && strcmp(argv[1], "alone") == 0;
    rounds = arg_long(argc, argv, 2, 40);
    if (alone) {
        for (long i = 0; i < rounds; i++) {
            slow_update(0);
            flush_log(0);
            flush_log(0);
        }
    } else {
        pthread_t t[4];
        void *(*fn[4])(void *) = {updater, reader, flusher, appender};
        for (int i = 0; i < 4; i++) OK(pthread_create(&t[i], NULL, fn[i], NULL));
        for (int i = 0; i < 4; i++) OK(pthread_join(t[i], NULL));
    }
    printf("site slow_update holders.c:%d\n", line_update);
    printf("site reader_path holders.c:%d\n", line_reader);
    printf("site flush_log holders.c:%d\n", line_flush);
    printf("site append_log holders.c:%d\n", line_append);
    printf("lock big_lock %ld\n", atomic_load(&big_acq));
    printf("lock log_lock %ld\n", atomic_load(&log_acq));
    return 0;
}

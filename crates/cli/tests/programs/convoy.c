/* A convoy: in each of R rounds one thread (named "holder") takes convoy_lock in hold_lock(),
   and only once it holds it do N threads (named "waiter-I") ask for it; the holder keeps it HOLD_MS
   ms, then each waiter takes it in turn (a convoy) and lets it go at once.
   hold_lock() ends with `return pthread_mutex_unlock(m)`, a tail call at -O2 (gcc emits `jmp
   pthread_mutex_unlock`, see `objdump -d convoy | grep -A30 '<hold_lock>:'`): at the unlock,
   hold_lock is no longer on the stack, only its caller is.
   Prints its ground truth: "holder TID", "waiter TID" per waiter, "waits N" (contended
   acquisitions of the waiters: N x R), "acquisitions A".
   Usage: convoy [N] [R] [HOLD_MS] */
#include "e2e_common.h"
#include <stdatomic.h>
#include <unistd.h>

pthread_mutex_t convoy_lock = PTHREAD_MUTEX_INITIALIZER;

static long n_waiters, rounds, hold_ms;
static atomic_long round_held;  /* the round whose lock the holder holds now (0: none yet) */
static atomic_long arrived;     /* waiters that asked for the lock in this round */
static atomic_long acquisitions;

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Holds `m` until every waiter asked for it, then HOLD_MS ms more; unlocks with a tail call. */
__attribute__((noinline)) int hold_lock(pthread_mutex_t *m, long round) {
    OK(pthread_mutex_lock(m));
    atomic_fetch_add(&acquisitions, 1);
    atomic_store(&round_held, round);
    while (atomic_load(&arrived) < n_waiters * round)
        sleep_ms(1);
    sleep_ms(hold_ms);
    return pthread_mutex_unlock(m);
}

static void *holder(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "holder");
    printf("holder %d\n", gettid());
    for (long r = 1; r <= rounds; r++) {
        OK(hold_lock(&convoy_lock, r));
        /* The next round starts once every waiter of this one is through. */
        while (atomic_load(&acquisitions) < r * (n_waiters + 1))
            sleep_ms(1);
    }
    return NULL;
}

__attribute__((noinline)) void wait_in_convoy(void) {
    OK(pthread_mutex_lock(&convoy_lock));
    atomic_fetch_add(&acquisitions, 1);
    OK(pthread_mutex_unlock(&convoy_lock));
}

static void *waiter(void *arg) {
    char name[16];
    snprintf(name, sizeof name, "waiter-%ld", (long)arg);
    pthread_setname_np(pthread_self(), name);
    printf("waiter %d\n", gettid());
    for (long r = 1; r <= rounds; r++) {
        while (atomic_load(&round_held) < r)
            sleep_ms(1);
        /* Counted before the call: the holder still holds the lock until all have arrived and
           HOLD_MS more, so the call finds it held. */
        atomic_fetch_add(&arrived, 1);
        wait_in_convoy();
    }
    return NULL;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    n_waiters = arg_long(argc, argv, 1, 4);
    rounds = arg_long(argc, argv, 2, 3);
    hold_ms = arg_long(argc, argv, 3, 50);
    pthread_t h, w[64];
    if (n_waiters > 64)
        n_waiters = 64;
    OK(pthread_create(&h, NULL, holder, NULL));
    for (long i = 0; i < n_waiters; i++)
        OK(pthread_create(&w[i], NULL, waiter, (void *)(i + 1)));
    OK(pthread_join(h, NULL));
    for (long i = 0; i < n_waiters; i++)
        OK(pthread_join(w[i], NULL));
    printf("waits %ld\n", n_waiters * rounds);
    printf("acquisitions %ld\n", atomic_load(&acquisitions));
    return 0;
}

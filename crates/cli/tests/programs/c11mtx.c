/* C11 <threads.h> locks: THREADS threads x ITERS mtx_lock/mtx_unlock of c11_lock (plain), each
 * thread also ITERS/4 mtx_timedlock of c11_timed (timed, 10 s deadline) and ITERS/8 locks of
 * c11_rec taken twice (recursive: two acquisitions each); then main: TRIES mtx_trylock of c11_try
 * while a helper holds it (thrd_busy each) and one 10 ms mtx_timedlock (thrd_timedout), then one
 * mtx_trylock that succeeds; and a producer and a consumer that hand ROUNDS items over with
 * cnd_wait/cnd_signal on c11_cv_lock, printing their own count of mtx_lock calls and cnd_wait
 * returns ("cv locks=N waits=M").
 * argv: THREADS ITERS TRIES ROUNDS. Exit 90 when a call returns other than expected. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <threads.h>
#include <time.h>

mtx_t c11_lock, c11_timed, c11_rec, c11_try, c11_cv_lock;
cnd_t c11_cv;
static long iters, counter, timed_counter, rec_counter;
static long rounds, items, produced, consumed, cv_locks, cv_waits;

#define CHECK(call, want)                                                                   \
    do {                                                                                    \
        int r_ = (call);                                                                    \
        if (r_ != (want)) {                                                                 \
            fprintf(stderr, "%s:%d: %s returned %d, expected %d\n", __FILE__, __LINE__,     \
                    #call, r_, (want));                                                     \
            exit(90);                                                                       \
        }                                                                                   \
    } while (0)

static int worker(void *arg) {
    (void)arg;
    for (long i = 0; i < iters; i++) {
        CHECK(mtx_lock(&c11_lock), thrd_success);
        counter++;
        CHECK(mtx_unlock(&c11_lock), thrd_success);
        if (i % 4 == 0) {
            struct timespec t;
            timespec_get(&t, TIME_UTC);
            t.tv_sec += 10;
            CHECK(mtx_timedlock(&c11_timed, &t), thrd_success);
            timed_counter++;
            CHECK(mtx_unlock(&c11_timed), thrd_success);
        }
        if (i % 8 == 0) {
            CHECK(mtx_lock(&c11_rec), thrd_success);
            CHECK(mtx_lock(&c11_rec), thrd_success);
            rec_counter++;
            CHECK(mtx_unlock(&c11_rec), thrd_success);
            CHECK(mtx_unlock(&c11_rec), thrd_success);
        }
    }
    return 0;
}

static mtx_t hold_gate;
static atomic_int held;
static int holder(void *arg) {
    (void)arg;
    CHECK(mtx_lock(&c11_try), thrd_success);
    atomic_store(&held, 1);
    CHECK(mtx_lock(&hold_gate), thrd_success); /* main holds the gate until its tries are done */
    CHECK(mtx_unlock(&hold_gate), thrd_success);
    CHECK(mtx_unlock(&c11_try), thrd_success);
    return 0;
}

static int consumer(void *arg) {
    (void)arg;
    for (long n = 0; n < rounds; n++) {
        CHECK(mtx_lock(&c11_cv_lock), thrd_success);
        cv_locks++;
        while (items == 0) {
            CHECK(cnd_wait(&c11_cv, &c11_cv_lock), thrd_success);
            cv_waits++;
        }
        items--;
        consumed++;
        CHECK(cnd_signal(&c11_cv), thrd_success);
        CHECK(mtx_unlock(&c11_cv_lock), thrd_success);
    }
    return 0;
}

int main(int argc, char **argv) {
    long threads = argc > 1 ? atol(argv[1]) : 4;
    iters = argc > 2 ? atol(argv[2]) : 10000;
    long tries = argc > 3 ? atol(argv[3]) : 100;
    rounds = argc > 4 ? atol(argv[4]) : 1000;
    CHECK(mtx_init(&c11_lock, mtx_plain), thrd_success);
    CHECK(mtx_init(&c11_timed, mtx_timed), thrd_success);
    CHECK(mtx_init(&c11_rec, mtx_plain | mtx_recursive), thrd_success);
    CHECK(mtx_init(&c11_try, mtx_plain), thrd_success);
    CHECK(mtx_init(&c11_cv_lock, mtx_plain), thrd_success);
    CHECK(mtx_init(&hold_gate, mtx_plain), thrd_success);
    CHECK(cnd_init(&c11_cv), thrd_success);

    thrd_t th[64];
    for (long t = 0; t < threads; t++) CHECK(thrd_create(&th[t], worker, NULL), thrd_success);
    for (long t = 0; t < threads; t++) CHECK(thrd_join(th[t], NULL), thrd_success);
    if (counter != threads * iters) return 91;

    /* The helper takes c11_try and waits at the gate; main sees it held TRIES times. */
    CHECK(mtx_lock(&hold_gate), thrd_success);
    thrd_t h;
    CHECK(thrd_create(&h, holder, NULL), thrd_success);
    while (!atomic_load(&held)) thrd_yield();
    for (long i = 0; i < tries; i++) CHECK(mtx_trylock(&c11_try), thrd_busy);
    struct timespec soon;
    timespec_get(&soon, TIME_UTC);
    soon.tv_nsec += 10 * 1000 * 1000;
    if (soon.tv_nsec >= 1000000000L) {
        soon.tv_sec++;
        soon.tv_nsec -= 1000000000L;
    }
    CHECK(mtx_timedlock(&c11_try, &soon), thrd_timedout);
    CHECK(mtx_unlock(&hold_gate), thrd_success);
    CHECK(thrd_join(h, NULL), thrd_success);
    CHECK(mtx_trylock(&c11_try), thrd_success);
    CHECK(mtx_unlock(&c11_try), thrd_success);

    thrd_t c;
    CHECK(thrd_create(&c, consumer, NULL), thrd_success);
    for (long n = 0; n < rounds; n++) {
        CHECK(mtx_lock(&c11_cv_lock), thrd_success);
        cv_locks++;
        while (items > 0) {
            CHECK(cnd_wait(&c11_cv, &c11_cv_lock), thrd_success);
            cv_waits++;
        }
        items++;
        produced++;
        CHECK(cnd_signal(&c11_cv), thrd_success);
        CHECK(mtx_unlock(&c11_cv_lock), thrd_success);
    }
    CHECK(thrd_join(c, NULL), thrd_success);
    if (consumed != rounds) return 93;
    printf("ok %ld timed %ld rec %ld\n", counter, timed_counter, rec_counter);
    printf("cv locks=%ld waits=%ld\n", cv_locks, cv_waits);
    return 0;
}

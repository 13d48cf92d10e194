/* POSIX semaphores under the preload. argv: THREADS ITERS ITEMS ROUNDS.
 *
 * sem_lock: a binary semaphore used as a lock by THREADS threads, ITERS acquisitions each, taken
 *   in turn with sem_wait, sem_trywait (retried until it succeeds; every EAGAIN is counted),
 *   sem_timedwait and sem_clockwait, always released by sem_post from the same thread. Then a
 *   helper holds it while main's sem_timedwait and sem_clockwait time out (TIMEOUTS each), and
 *   main's sem_timedwait / sem_clockwait with a bad deadline or clock get EINVAL before glibc tries
 *   the semaphore (no acquisition, no failure, the token stays).
 * items / slots: a producer and a consumer over a 4-slot ring: the consumer waits on `items`
 *   ITEMS times, the producer on `slots` ITEMS times; every post comes from the other thread.
 * waiters: CPython's Condition.wait pattern, ROUNDS times: a fresh heap semaphore of value 1 that
 *   the waiter takes, then waits on again until the notifier posts it, then destroys. The waiter
 *   then takes `after` (a mutex) AFTER times; those holds must all be timed.
 * intr: a sem_wait interrupted by a signal handler (EINTR: not an acquisition).
 * cancelled: a thread cancelled while blocked in sem_wait; another that has a cancellation pending
 *   when it calls sem_wait on a free semaphore (glibc cancels it before it takes the token).
 *
 * Every return value and errno is checked against what glibc documents (exit 90 otherwise);
 * errno is set to a sentinel before successful calls and must be left alone. Prints its counts as
 * `key=value` lines. Built with -DOLD_SYMVER it binds to the pre-2.34 symbol versions. */
#include "e2e_common.h"
#include <semaphore.h>
#include <signal.h>
#include <unistd.h>

#ifdef OLD_SYMVER
#if defined(__x86_64__)
#define OLDV "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define OLDV "GLIBC_2.17"
#else
#error "OLD_SYMVER: x86_64 or aarch64 only"
#endif
__asm__(".symver sem_wait,sem_wait@" OLDV);
__asm__(".symver sem_trywait,sem_trywait@" OLDV);
__asm__(".symver sem_timedwait,sem_timedwait@" OLDV);
__asm__(".symver sem_post,sem_post@" OLDV);
__asm__(".symver sem_init,sem_init@" OLDV);
__asm__(".symver sem_destroy,sem_destroy@" OLDV);
__asm__(".symver sem_getvalue,sem_getvalue@" OLDV);
__asm__(".symver sem_clockwait,sem_clockwait@GLIBC_2.30");
#endif

#define SENTINEL 4242

/* A sem_* call that must return 0 and leave errno alone. */
#define SEM_OK(call)                                                                        \
    do {                                                                                    \
        errno = SENTINEL;                                                                   \
        int r_ = (call);                                                                    \
        if (r_ != 0 || errno != SENTINEL) {                                                 \
            fprintf(stderr, "%s:%d: %s returned %d, errno %d (%s); expected 0, errno %d\n", \
                    __FILE__, __LINE__, #call, r_, errno, strerror(errno), SENTINEL);       \
            exit(90);                                                                       \
        }                                                                                   \
    } while (0)

/* A sem_* call that must return -1 with errno `want`. */
#define SEM_FAILS(call, want)                                                               \
    do {                                                                                    \
        errno = 0;                                                                          \
        int r_ = (call);                                                                    \
        if (r_ != -1 || errno != (want)) {                                                  \
            fprintf(stderr, "%s:%d: %s returned %d, errno %d (%s); expected -1, %s\n",      \
                    __FILE__, __LINE__, #call, r_, errno, strerror(errno), strerror(want)); \
            exit(90);                                                                       \
        }                                                                                   \
    } while (0)

static int value_of(sem_t *s) {
    int v = -1;
    SEM_OK(sem_getvalue(s, &v));
    return v;
}

#define EXPECT_VALUE(s, want)                                                                 \
    do {                                                                                      \
        int v_ = value_of(s);                                                                 \
        if (v_ != (want)) {                                                                   \
            fprintf(stderr, "%s:%d: value of %s is %d, expected %d\n", __FILE__, __LINE__, #s, \
                    v_, (want));                                                              \
            exit(90);                                                                         \
        }                                                                                     \
    } while (0)

sem_t sem_lock, items, slots, intr, cancelled, pending;
pthread_mutex_t after = PTHREAD_MUTEX_INITIALIZER;
static long iters, nitems, rounds;
static long shared_counter;
static long tryfails[64];

static void *locker(void *arg) {
    long me = (long)arg, fails = 0;
    for (long i = 0; i < iters; i++) {
        switch (i % 4) {
        case 0:
            SEM_OK(sem_wait(&sem_lock));
            break;
        case 1:
            for (;;) {
                errno = SENTINEL;
                int r = sem_trywait(&sem_lock);
                if (r == 0 && errno == SENTINEL) break;
                if (r != -1 || errno != EAGAIN) {
                    fprintf(stderr, "sem_trywait returned %d, errno %d\n", r, errno);
                    exit(90);
                }
                fails++;
            }
            break;
        case 2: {
            struct timespec ts = deadline_ms(60000);
            SEM_OK(sem_timedwait(&sem_lock, &ts));
            break;
        }
        default: {
            struct timespec ts = mono_deadline_ms(60000);
            SEM_OK(sem_clockwait(&sem_lock, CLOCK_MONOTONIC, &ts));
            break;
        }
        }
        shared_counter++;
        for (volatile int k = 0; k < 200; k++) {
        } /* a little work while holding, so that others find it taken */
        SEM_OK(sem_post(&sem_lock));
    }
    tryfails[me] = fails;
    return NULL;
}

static pthread_barrier_t bar;

static void *holder(void *arg) {
    (void)arg;
    SEM_OK(sem_wait(&sem_lock));
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    SEM_OK(sem_post(&sem_lock));
    return NULL;
}

static long ring[4];

static void *producer(void *arg) {
    (void)arg;
    for (long i = 0; i < nitems; i++) {
        SEM_OK(sem_wait(&slots));
        ring[i % 4] = i;
        SEM_OK(sem_post(&items));
    }
    return NULL;
}

static void *consumer(void *arg) {
    long *sum = arg;
    for (long i = 0; i < nitems; i++) {
        SEM_OK(sem_wait(&items));
        *sum += ring[i % 4];
        SEM_OK(sem_post(&slots));
    }
    return NULL;
}

static sem_t **waiter_sems;
static sem_t round_ready, round_done;

/* CPython's Condition.wait: take a fresh lock, wait on it again until the notifier releases it. */
static void *waiter(void *arg) {
    (void)arg;
    for (long r = 0; r < rounds; r++) {
        sem_t *w = waiter_sems[r];
        SEM_OK(sem_init(w, 0, 1));
        SEM_OK(sem_wait(w));
        SEM_OK(sem_post(&round_ready));
        SEM_OK(sem_wait(w));
        SEM_OK(sem_destroy(w));
        SEM_OK(sem_post(&round_done));
    }
    for (long i = 0; i < rounds; i++) {
        OK(pthread_mutex_lock(&after));
        OK(pthread_mutex_unlock(&after));
    }
    return NULL;
}

static void *notifier(void *arg) {
    (void)arg;
    for (long r = 0; r < rounds; r++) {
        SEM_OK(sem_wait(&round_ready));
        SEM_OK(sem_post(waiter_sems[r]));
        SEM_OK(sem_wait(&round_done));
    }
    return NULL;
}

static volatile sig_atomic_t intr_returned;
static void on_usr1(int sig) { (void)sig; }

static void *intr_waiter(void *arg) {
    (void)arg;
    SEM_FAILS(sem_wait(&intr), EINTR);
    intr_returned = 1;
    return NULL;
}

static void *cancel_blocked(void *arg) {
    (void)arg;
    pthread_barrier_wait(&bar);
    sem_wait(&cancelled); /* blocks until cancelled */
    fprintf(stderr, "sem_wait on `cancelled` returned\n");
    exit(90);
}

static void *cancel_pending(void *arg) {
    (void)arg;
    OK(pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL));
    pthread_barrier_wait(&bar); /* main cancels us after this */
    pthread_barrier_wait(&bar);
    OK(pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL));
    sem_wait(&pending); /* acts on the pending cancellation before taking the free token */
    fprintf(stderr, "sem_wait on `pending` returned\n");
    exit(90);
}

int main(int argc, char **argv) {
    long threads = arg_long(argc, argv, 1, 4);
    iters = arg_long(argc, argv, 2, 4000);
    nitems = arg_long(argc, argv, 3, 5000);
    rounds = arg_long(argc, argv, 4, 200);
    const long timeouts = 3;
    if (threads < 1 || threads > 64) return 2;

    /* sem_lock under contention. */
    SEM_OK(sem_init(&sem_lock, 0, 1));
    pthread_t th[64];
    for (long i = 0; i < threads; i++) OK(pthread_create(&th[i], NULL, locker, (void *)i));
    long fails = 0;
    for (long i = 0; i < threads; i++) {
        OK(pthread_join(th[i], NULL));
        fails += tryfails[i];
    }
    if (shared_counter != threads * iters) {
        fprintf(stderr, "counter %ld, expected %ld\n", shared_counter, threads * iters);
        return 90;
    }
    EXPECT_VALUE(&sem_lock, 1);

    /* Timeouts and refused arguments while a helper holds sem_lock. */
    OK(pthread_barrier_init(&bar, NULL, 2));
    pthread_t h;
    OK(pthread_create(&h, NULL, holder, NULL));
    pthread_barrier_wait(&bar);
    for (long i = 0; i < timeouts; i++) {
        struct timespec ts = deadline_ms(2);
        SEM_FAILS(sem_timedwait(&sem_lock, &ts), ETIMEDOUT);
        ts = mono_deadline_ms(2);
        SEM_FAILS(sem_clockwait(&sem_lock, CLOCK_MONOTONIC, &ts), ETIMEDOUT);
    }
    pthread_barrier_wait(&bar);
    OK(pthread_join(h, NULL));
    EXPECT_VALUE(&sem_lock, 1);
    struct timespec bad = deadline_ms(1000);
    bad.tv_nsec = 1000000000L;
    SEM_FAILS(sem_timedwait(&sem_lock, &bad), EINVAL);
    bad.tv_nsec = -1;
    SEM_FAILS(sem_clockwait(&sem_lock, CLOCK_MONOTONIC, &bad), EINVAL);
    struct timespec good = mono_deadline_ms(1000);
    SEM_FAILS(sem_clockwait(&sem_lock, CLOCK_PROCESS_CPUTIME_ID, &good), EINVAL);
    EXPECT_VALUE(&sem_lock, 1); /* glibc refused before taking the token */
    SEM_OK(sem_post(&sem_lock)); /* a post by a thread that holds no token: ends no hold */
    EXPECT_VALUE(&sem_lock, 2);
    SEM_OK(sem_trywait(&sem_lock)); /* back to 1: an acquisition never posted (open at exit) */
    EXPECT_VALUE(&sem_lock, 1);

    /* Producer / consumer. */
    SEM_OK(sem_init(&items, 0, 0));
    SEM_OK(sem_init(&slots, 0, 4));
    long sum = 0;
    pthread_t p, c;
    OK(pthread_create(&c, NULL, consumer, &sum));
    OK(pthread_create(&p, NULL, producer, NULL));
    OK(pthread_join(p, NULL));
    OK(pthread_join(c, NULL));
    if (sum != nitems * (nitems - 1) / 2) {
        fprintf(stderr, "consumer sum %ld, expected %ld\n", sum, nitems * (nitems - 1) / 2);
        return 90;
    }
    EXPECT_VALUE(&items, 0);
    EXPECT_VALUE(&slots, 4);

    /* Condition-style waiter semaphores, each a new heap identity at a new address. */
    waiter_sems = calloc((size_t)rounds, sizeof *waiter_sems);
    for (long r = 0; r < rounds; r++) waiter_sems[r] = calloc(1, sizeof(sem_t));
    SEM_OK(sem_init(&round_ready, 0, 0));
    SEM_OK(sem_init(&round_done, 0, 0));
    pthread_t w, n;
    OK(pthread_create(&w, NULL, waiter, NULL));
    OK(pthread_create(&n, NULL, notifier, NULL));
    OK(pthread_join(w, NULL));
    OK(pthread_join(n, NULL));

    /* EINTR. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: the kernel would restart the futex wait */
    if (sigaction(SIGUSR1, &sa, NULL) != 0) return 90;
    SEM_OK(sem_init(&intr, 0, 0));
    pthread_t iw;
    OK(pthread_create(&iw, NULL, intr_waiter, NULL));
    while (!intr_returned) {
        OK(pthread_kill(iw, SIGUSR1));
        usleep(2000);
    }
    OK(pthread_join(iw, NULL));
    EXPECT_VALUE(&intr, 0);

    /* Cancellation: blocked in sem_wait, and pending before sem_wait on a free token. */
    SEM_OK(sem_init(&cancelled, 0, 0));
    SEM_OK(sem_init(&pending, 0, 1));
    pthread_t cb, cp;
    void *ret;
    OK(pthread_create(&cb, NULL, cancel_blocked, NULL));
    pthread_barrier_wait(&bar);
    usleep(20000); /* most likely blocked by now; cancelled either way */
    OK(pthread_cancel(cb));
    OK(pthread_join(cb, &ret));
    if (ret != PTHREAD_CANCELED) return 90;
    OK(pthread_create(&cp, NULL, cancel_pending, NULL));
    pthread_barrier_wait(&bar);
    OK(pthread_cancel(cp));
    pthread_barrier_wait(&bar);
    OK(pthread_join(cp, &ret));
    if (ret != PTHREAD_CANCELED) return 90;
    EXPECT_VALUE(&pending, 1); /* the cancelled sem_wait took no token */
    EXPECT_VALUE(&cancelled, 0);

    /* sem_lock still works after all that, from main. */
    SEM_OK(sem_wait(&sem_lock));
    SEM_OK(sem_post(&sem_lock));

    printf("lock_acquisitions=%ld\n", threads * iters + 1 + 1 + 1);
    printf("lock_trywait_eagain=%ld\n", fails);
    printf("lock_timeouts=%ld\n", 2 * timeouts);
    printf("lock_own_posts=%ld\n", threads * iters + 1 + 1);
    printf("items_acquisitions=%ld\n", nitems);
    printf("slots_acquisitions=%ld\n", nitems);
    printf("waiter_rounds=%ld\n", rounds);
    printf("after_acquisitions=%ld\n", rounds);
    return 0;
}

/* Lock swapping ground truth: a bounded buffer with P producers and C consumers on one mutex and
 * two condvars (`pthread_cond_wait`; consumers alternate with `pthread_cond_timedwait` on a
 * monotonic-clock condvar), then timeouts and trylocks whose results are known:
 *   - timedlock and clocklock on a mutex another thread holds: ETIMEDOUT after ~50 ms;
 *   - trylock on it: EBUSY; trylock when free: 0;
 *   - cond_timedwait (realtime) and cond_clockwait (monotonic) with no signal: ETIMEDOUT, and
 *     the mutex is held again afterwards (trylock from another thread: EBUSY);
 *   - a statically initialized mutex and condvar, a fork whose child locks and signals them.
 * Prints "items N sum S" (S = sum of 1..N) and "ok". Args: P C K (items per producer). */
#include "e2e_common.h"
#include <sys/wait.h>
#include <unistd.h>

#define CAP 8
pthread_mutex_t pc_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t not_full = PTHREAD_COND_INITIALIZER;
pthread_cond_t not_empty; /* monotonic clock */
static long buf[CAP], head, count, produced_next = 1, done_producers, consumed, sum;
static long P, C, K;

static void *producer(void *arg) {
    (void)arg;
    for (long i = 0; i < K; i++) {
        OK(pthread_mutex_lock(&pc_lock));
        while (count == CAP) OK(pthread_cond_wait(&not_full, &pc_lock));
        buf[(head + count) % CAP] = produced_next++;
        count++;
        OK(pthread_cond_signal(&not_empty));
        OK(pthread_mutex_unlock(&pc_lock));
    }
    OK(pthread_mutex_lock(&pc_lock));
    done_producers++;
    OK(pthread_cond_broadcast(&not_empty));
    OK(pthread_mutex_unlock(&pc_lock));
    return NULL;
}

static void *consumer(void *arg) {
    long id = (long)arg;
    for (;;) {
        OK(pthread_mutex_lock(&pc_lock));
        while (count == 0 && done_producers < P) {
            if (id % 2) {
                struct timespec ts = mono_deadline_ms(5);
                int r = pthread_cond_timedwait(&not_empty, &pc_lock, &ts);
                if (r != 0 && r != ETIMEDOUT) EXPECT(r, 0);
            } else {
                OK(pthread_cond_wait(&not_empty, &pc_lock));
            }
        }
        if (count == 0) {
            OK(pthread_mutex_unlock(&pc_lock));
            return NULL;
        }
        long v = buf[head];
        head = (head + 1) % CAP;
        count--;
        consumed++;
        sum += v;
        OK(pthread_cond_signal(&not_full));
        OK(pthread_mutex_unlock(&pc_lock));
    }
}

static pthread_mutex_t held;
static pthread_barrier_t bar;

static void *holder(void *arg) {
    (void)arg;
    OK(pthread_mutex_lock(&held));
    pthread_barrier_wait(&bar); /* 1: main may try now */
    pthread_barrier_wait(&bar); /* 2: main is done trying */
    OK(pthread_mutex_unlock(&held));
    return NULL;
}

static void *tryer(void *arg) {
    EXPECT(pthread_mutex_trylock((pthread_mutex_t *)arg), EBUSY);
    return NULL;
}

int main(int argc, char **argv) {
    P = arg_long(argc, argv, 1, 2);
    C = arg_long(argc, argv, 2, 2);
    K = arg_long(argc, argv, 3, 5000);
    pthread_condattr_t ca;
    OK(pthread_condattr_init(&ca));
    OK(pthread_condattr_setclock(&ca, CLOCK_MONOTONIC));
    OK(pthread_cond_init(&not_empty, &ca));
    pthread_t th[64];
    for (long i = 0; i < P; i++) OK(pthread_create(&th[i], NULL, producer, NULL));
    for (long i = 0; i < C; i++) OK(pthread_create(&th[P + i], NULL, consumer, (void *)i));
    for (long i = 0; i < P + C; i++) OK(pthread_join(th[i], NULL));
    long n = P * K;
    printf("items %ld sum %ld\n", consumed, sum);
    if (consumed != n || sum != n * (n + 1) / 2) return 1;

    /* Timeouts and trylocks. */
    OK(pthread_mutex_init(&held, NULL));
    OK(pthread_barrier_init(&bar, NULL, 2));
    pthread_t h;
    OK(pthread_create(&h, NULL, holder, NULL));
    pthread_barrier_wait(&bar);
    struct timespec ts = deadline_ms(50);
    EXPECT(pthread_mutex_timedlock(&held, &ts), ETIMEDOUT);
    ts = mono_deadline_ms(50);
    EXPECT(pthread_mutex_clocklock(&held, CLOCK_MONOTONIC, &ts), ETIMEDOUT);
    EXPECT(pthread_mutex_trylock(&held), EBUSY);
    pthread_barrier_wait(&bar);
    OK(pthread_join(h, NULL));
    OK(pthread_mutex_trylock(&held));
    pthread_cond_t rc = PTHREAD_COND_INITIALIZER;
    ts = deadline_ms(30);
    EXPECT(pthread_cond_timedwait(&rc, &held, &ts), ETIMEDOUT);
    pthread_t tr;
    OK(pthread_create(&tr, NULL, tryer, &held)); /* held again after the timeout */
    OK(pthread_join(tr, NULL));
    ts = mono_deadline_ms(30);
    EXPECT(pthread_cond_clockwait(&rc, &held, CLOCK_MONOTONIC, &ts), ETIMEDOUT);
    OK(pthread_create(&tr, NULL, tryer, &held));
    OK(pthread_join(tr, NULL));
    OK(pthread_mutex_unlock(&held));
    EXPECT(pthread_mutex_destroy(&held), 0);

    /* fork: the child uses the static mutex and condvar. */
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        OK(pthread_mutex_lock(&pc_lock));
        OK(pthread_cond_signal(&not_full));
        OK(pthread_mutex_unlock(&pc_lock));
        _exit(0);
    }
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return 3;
    printf("ok\n");
    return 0;
}

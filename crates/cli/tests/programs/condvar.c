/* Condition variables. argv: ROUNDS TIMEOUTS.
 * pp_lock/pp_cond: a ping-pong of ROUNDS turns per side; the program counts its own explicit
 * locks and its pthread_cond_wait calls (each re-acquires pp_lock once) and prints
 *   "pp_lock locks=L waits=W".
 * to_lock: TIMEOUTS pthread_cond_timedwait calls and 2 pthread_cond_clockwait calls that time
 * out (each a cond wait: the mutex is re-acquired) inside one explicit lock:
 * acquisitions = 1 + TIMEOUTS + 2, cond_waits = TIMEOUTS + 2.
 * ec_lock (error-checking): one pthread_cond_timedwait without holding it -> EPERM (no
 * re-acquisition: must not count), then one plain lock/unlock: acquisitions = 1. */
#include "e2e_common.h"

pthread_mutex_t pp_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t pp_cond = PTHREAD_COND_INITIALIZER;
pthread_mutex_t to_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t to_cond = PTHREAD_COND_INITIALIZER;
pthread_mutex_t ec_lock;
pthread_cond_t ec_cond = PTHREAD_COND_INITIALIZER;

static long rounds;
static int turn;
static long locks_taken[2], waits[2];

static void *side(void *arg) {
    int me = (int)(long)arg;
    for (long i = 0; i < rounds; i++) {
        OK(pthread_mutex_lock(&pp_lock));
        locks_taken[me]++;
        while (turn != me) {
            OK(pthread_cond_wait(&pp_cond, &pp_lock));
            waits[me]++;
        }
        turn = 1 - me;
        OK(pthread_cond_signal(&pp_cond));
        OK(pthread_mutex_unlock(&pp_lock));
    }
    return NULL;
}

int main(int argc, char **argv) {
    rounds = arg_long(argc, argv, 1, 2000);
    long timeouts = arg_long(argc, argv, 2, 5);
    pthread_t a, b;
    OK(pthread_create(&a, NULL, side, (void *)0));
    OK(pthread_create(&b, NULL, side, (void *)1));
    OK(pthread_join(a, NULL));
    OK(pthread_join(b, NULL));

    OK(pthread_mutex_lock(&to_lock));
    for (long i = 0; i < timeouts; i++) {
        struct timespec ts = deadline_ms(1);
        EXPECT(pthread_cond_timedwait(&to_cond, &to_lock, &ts), ETIMEDOUT);
    }
    for (int i = 0; i < 2; i++) {
        struct timespec ts = mono_deadline_ms(1);
        EXPECT(pthread_cond_clockwait(&to_cond, &to_lock, CLOCK_MONOTONIC, &ts), ETIMEDOUT);
    }
    OK(pthread_mutex_unlock(&to_lock));

    pthread_mutexattr_t at;
    OK(pthread_mutexattr_init(&at));
    OK(pthread_mutexattr_settype(&at, PTHREAD_MUTEX_ERRORCHECK));
    OK(pthread_mutex_init(&ec_lock, &at));
    struct timespec ts = deadline_ms(1);
    EXPECT(pthread_cond_timedwait(&ec_cond, &ec_lock, &ts), EPERM);
    OK(pthread_mutex_lock(&ec_lock));
    OK(pthread_mutex_unlock(&ec_lock));

    printf("pp_lock locks=%ld waits=%ld\n", locks_taken[0] + locks_taken[1], waits[0] + waits[1]);
    return 0;
}

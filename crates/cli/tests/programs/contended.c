/* One contended acquisition per lock, by construction: a helper takes the lock, meets main at a
 * barrier, sleeps 200 ms and releases it; main calls the blocking function right after the
 * barrier, so its first attempt finds the lock held.
 *   c_mutex (pthread_mutex_lock), c_timed (pthread_mutex_timedlock, 10 s deadline),
 *   c_rw_read (rdlock against a writer), c_rw_write (wrlock against a reader),
 *   c_spin (pthread_spin_lock), c_robust (robust mutex), c_robust_rec (robust recursive),
 *   c_pi (priority-inheritance mutex).
 * Expected for each: 2 acquisitions (helper + main), contended 1. */
#include "e2e_common.h"
#include <unistd.h>

pthread_mutex_t c_mutex = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t c_timed = PTHREAD_MUTEX_INITIALIZER;
pthread_rwlock_t c_rw_read = PTHREAD_RWLOCK_INITIALIZER;
pthread_rwlock_t c_rw_write = PTHREAD_RWLOCK_INITIALIZER;
pthread_spinlock_t c_spin;
pthread_mutex_t c_robust, c_robust_rec, c_pi;
#define CASES 8
static pthread_barrier_t bar;
static int which;

static void *helper(void *arg) {
    (void)arg;
    switch (which) {
    case 0: OK(pthread_mutex_lock(&c_mutex)); break;
    case 1: OK(pthread_mutex_lock(&c_timed)); break;
    case 2: OK(pthread_rwlock_wrlock(&c_rw_read)); break;
    case 3: OK(pthread_rwlock_rdlock(&c_rw_write)); break;
    case 4: OK(pthread_spin_lock(&c_spin)); break;
    case 5: OK(pthread_mutex_lock(&c_robust)); break;
    case 6: OK(pthread_mutex_lock(&c_robust_rec)); break;
    case 7: OK(pthread_mutex_lock(&c_pi)); break;
    }
    pthread_barrier_wait(&bar);
    usleep(200000);
    switch (which) {
    case 0: OK(pthread_mutex_unlock(&c_mutex)); break;
    case 1: OK(pthread_mutex_unlock(&c_timed)); break;
    case 2: OK(pthread_rwlock_unlock(&c_rw_read)); break;
    case 3: OK(pthread_rwlock_unlock(&c_rw_write)); break;
    case 4: OK(pthread_spin_unlock(&c_spin)); break;
    case 5: OK(pthread_mutex_unlock(&c_robust)); break;
    case 6: OK(pthread_mutex_unlock(&c_robust_rec)); break;
    case 7: OK(pthread_mutex_unlock(&c_pi)); break;
    }
    return NULL;
}

static void init_m(pthread_mutex_t *m, int type, int robust, int pi) {
    pthread_mutexattr_t a;
    OK(pthread_mutexattr_init(&a));
    OK(pthread_mutexattr_settype(&a, type));
    if (robust) OK(pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST));
    if (pi) OK(pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT));
    OK(pthread_mutex_init(m, &a));
    OK(pthread_mutexattr_destroy(&a));
}

int main(void) {
    OK(pthread_spin_init(&c_spin, PTHREAD_PROCESS_PRIVATE));
    init_m(&c_robust, PTHREAD_MUTEX_NORMAL, 1, 0);
    init_m(&c_robust_rec, PTHREAD_MUTEX_RECURSIVE, 1, 0);
    init_m(&c_pi, PTHREAD_MUTEX_NORMAL, 0, 1);
    OK(pthread_barrier_init(&bar, NULL, 2));
    for (which = 0; which < CASES; which++) {
        pthread_t t;
        OK(pthread_create(&t, NULL, helper, NULL));
        pthread_barrier_wait(&bar);
        struct timespec ts = deadline_ms(10000);
        switch (which) {
        case 0: OK(pthread_mutex_lock(&c_mutex)); OK(pthread_mutex_unlock(&c_mutex)); break;
        case 1: OK(pthread_mutex_timedlock(&c_timed, &ts)); OK(pthread_mutex_unlock(&c_timed)); break;
        case 2: OK(pthread_rwlock_rdlock(&c_rw_read)); OK(pthread_rwlock_unlock(&c_rw_read)); break;
        case 3: OK(pthread_rwlock_wrlock(&c_rw_write)); OK(pthread_rwlock_unlock(&c_rw_write)); break;
        case 4: OK(pthread_spin_lock(&c_spin)); OK(pthread_spin_unlock(&c_spin)); break;
        case 5: OK(pthread_mutex_lock(&c_robust)); OK(pthread_mutex_unlock(&c_robust)); break;
        case 6:
            OK(pthread_mutex_lock(&c_robust_rec));
            OK(pthread_mutex_unlock(&c_robust_rec));
            break;
        case 7: OK(pthread_mutex_lock(&c_pi)); OK(pthread_mutex_unlock(&c_pi)); break;
        }
        OK(pthread_join(t, NULL));
    }
    printf("ok\n");
    return 0;
}

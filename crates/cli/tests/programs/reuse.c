/* One address, several lock identities. `slot` is a union of a mutex and an rwlock:
 *   generation 1: mutex, 10 acquisitions, destroyed (generation 2)
 *   generation 3: rwlock, 20 read acquisitions + 5 write, destroyed (4)
 *   generation 5: mutex (recursive), 30 acquisitions, not destroyed.
 * `plain` is re-initialized without being destroyed in between: generations 1 and 2, 7 and 8
 * acquisitions.
 * `busy_lock` (static initializer): destroyed while locked -> EBUSY (no new identity), then
 * used on: one identity, generation 0, 2 acquisitions. */
#include "e2e_common.h"

union lock_slot {
    pthread_mutex_t m;
    pthread_rwlock_t rw;
} slot;
pthread_mutex_t plain;
pthread_mutex_t busy_lock = PTHREAD_MUTEX_INITIALIZER;

int main(void) {
    OK(pthread_mutex_init(&slot.m, NULL));
    for (int i = 0; i < 10; i++) {
        OK(pthread_mutex_lock(&slot.m));
        OK(pthread_mutex_unlock(&slot.m));
    }
    OK(pthread_mutex_destroy(&slot.m));
    OK(pthread_rwlock_init(&slot.rw, NULL));
    for (int i = 0; i < 20; i++) {
        OK(pthread_rwlock_rdlock(&slot.rw));
        OK(pthread_rwlock_unlock(&slot.rw));
    }
    for (int i = 0; i < 5; i++) {
        OK(pthread_rwlock_wrlock(&slot.rw));
        OK(pthread_rwlock_unlock(&slot.rw));
    }
    OK(pthread_rwlock_destroy(&slot.rw));
    pthread_mutexattr_t a;
    OK(pthread_mutexattr_init(&a));
    OK(pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE));
    OK(pthread_mutex_init(&slot.m, &a));
    for (int i = 0; i < 15; i++) {
        OK(pthread_mutex_lock(&slot.m));
        OK(pthread_mutex_lock(&slot.m));
        OK(pthread_mutex_unlock(&slot.m));
        OK(pthread_mutex_unlock(&slot.m));
    }

    OK(pthread_mutex_init(&plain, NULL));
    for (int i = 0; i < 7; i++) {
        OK(pthread_mutex_lock(&plain));
        OK(pthread_mutex_unlock(&plain));
    }
    OK(pthread_mutex_init(&plain, NULL));
    for (int i = 0; i < 8; i++) {
        OK(pthread_mutex_lock(&plain));
        OK(pthread_mutex_unlock(&plain));
    }
    OK(pthread_mutex_lock(&busy_lock));
    EXPECT(pthread_mutex_destroy(&busy_lock), EBUSY);
    OK(pthread_mutex_unlock(&busy_lock));
    OK(pthread_mutex_lock(&busy_lock));
    OK(pthread_mutex_unlock(&busy_lock));
    printf("ok\n");
    return 0;
}

/* Semantic transparency: every return value and errno is checked by the program itself, which
 * prints a transcript and exits 90 at the first difference. argv: ITERS.
 * Expected counts (ITERS = N):
 *   rec_lock (recursive): per iteration 2 locks + 1 trylock (nested, all succeed) -> 3N
 *   ec_lock (error-checking): per iteration 1 lock; relock EDEADLK, trylock EBUSY (a failed
 *     trylock), unlock by another thread EPERM, second unlock EPERM -> N acquisitions, N failures
 *   normal_lock: per iteration lock (glibc's owner and user count as without the preload),
 *     trylock by owner EBUSY, unlock -> N, N failures
 *   robust_lock: a thread locks and exits holding it (1); main gets EOWNERDEAD (counted: the
 *     lock is acquired), makes it consistent, unlocks, locks again (1) -> 3
 *   dead_lock (robust, MODE notrecoverable): a thread locks and exits (1); main gets EOWNERDEAD
 *     (1), unlocks without pthread_mutex_consistent; the next two locks return ENOTRECOVERABLE
 *     (not acquired) -> 2
 *   errno_lock: errno is preserved across lock/unlock/trylock -> N + N
 *   rw (rwlock): per iteration rdlock twice (a thread may hold several read locks) and
 *     unlock twice; wrlock, then rdlock and wrlock by the writer -> EDEADLK, unlock
 *     -> 2N reads, N writes
 *   bad_lock (a mutex whose type field is garbage): lock and trylock -> EINVAL, 0 acquisitions */
#include "e2e_common.h"
#include <sys/syscall.h>
#include <unistd.h>

pthread_mutex_t rec_lock, ec_lock, robust_lock, dead_lock;
pthread_mutex_t normal_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t errno_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
pthread_mutex_t bad_lock = PTHREAD_MUTEX_INITIALIZER;

static void *unlock_foreign(void *arg) {
    (void)arg;
    EXPECT(pthread_mutex_unlock(&ec_lock), EPERM);
    return NULL;
}

static void *die_holding(void *arg) {
    OK(pthread_mutex_lock((pthread_mutex_t *)arg));
    return NULL; /* exits with the robust mutex held */
}

static void init_typed(pthread_mutex_t *m, int type, int robust) {
    pthread_mutexattr_t a;
    OK(pthread_mutexattr_init(&a));
    OK(pthread_mutexattr_settype(&a, type));
    if (robust) OK(pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST));
    OK(pthread_mutex_init(m, &a));
    OK(pthread_mutexattr_destroy(&a));
}

static int not_recoverable(void) {
    pthread_t t;
    OK(pthread_create(&t, NULL, die_holding, &dead_lock));
    OK(pthread_join(t, NULL));
    EXPECT(pthread_mutex_lock(&dead_lock), EOWNERDEAD);
    OK(pthread_mutex_unlock(&dead_lock));
    EXPECT(pthread_mutex_lock(&dead_lock), ENOTRECOVERABLE);
    EXPECT(pthread_mutex_lock(&dead_lock), ENOTRECOVERABLE);
    printf("not recoverable ok\n");
    return 0;
}

int main(int argc, char **argv) {
    long n = arg_long(argc, argv, 1, 100);
    const char *mode = argc > 2 ? argv[2] : "all";
    init_typed(&rec_lock, PTHREAD_MUTEX_RECURSIVE, 0);
    init_typed(&ec_lock, PTHREAD_MUTEX_ERRORCHECK, 0);
    init_typed(&robust_lock, PTHREAD_MUTEX_NORMAL, 1);
    init_typed(&dead_lock, PTHREAD_MUTEX_NORMAL, 1);
    if (!strcmp(mode, "notrecoverable")) return not_recoverable();

    for (long i = 0; i < n; i++) {
        OK(pthread_mutex_lock(&rec_lock));
        OK(pthread_mutex_lock(&rec_lock));
        OK(pthread_mutex_trylock(&rec_lock));
        OK(pthread_mutex_unlock(&rec_lock));
        OK(pthread_mutex_unlock(&rec_lock));
        OK(pthread_mutex_unlock(&rec_lock));
    }
    printf("recursive ok\n");

    for (long i = 0; i < n; i++) {
        OK(pthread_mutex_lock(&ec_lock));
        EXPECT(pthread_mutex_lock(&ec_lock), EDEADLK);
        EXPECT(pthread_mutex_trylock(&ec_lock), EBUSY);
        if (i == 0) {
            pthread_t t;
            OK(pthread_create(&t, NULL, unlock_foreign, NULL));
            OK(pthread_join(t, NULL));
        }
        OK(pthread_mutex_unlock(&ec_lock));
        EXPECT(pthread_mutex_unlock(&ec_lock), EPERM);
    }
    printf("errorcheck ok\n");

    /* What glibc records in a default mutex (the hooks take it with a trylock of their own):
     * the holder's tid and one user while held, neither once released. */
    int me = (int)syscall(SYS_gettid);
    for (long i = 0; i < n; i++) {
        OK(pthread_mutex_lock(&normal_lock));
        EXPECT(normal_lock.__data.__owner, me);
        EXPECT((int)normal_lock.__data.__nusers, 1);
        EXPECT(pthread_mutex_trylock(&normal_lock), EBUSY);
        OK(pthread_mutex_unlock(&normal_lock));
        EXPECT(normal_lock.__data.__owner, 0);
        EXPECT((int)normal_lock.__data.__nusers, 0);
    }
    printf("normal ok\n");

    pthread_t t;
    OK(pthread_create(&t, NULL, die_holding, &robust_lock));
    OK(pthread_join(t, NULL));
    EXPECT(pthread_mutex_lock(&robust_lock), EOWNERDEAD);
    OK(pthread_mutex_consistent(&robust_lock));
    OK(pthread_mutex_unlock(&robust_lock));
    OK(pthread_mutex_lock(&robust_lock));
    OK(pthread_mutex_unlock(&robust_lock));
    printf("robust ok\n");

    for (long i = 0; i < n; i++) {
        errno = 4242;
        OK(pthread_mutex_lock(&errno_lock));
        if (errno != 4242) { fprintf(stderr, "errno changed by lock: %d\n", errno); return 91; }
        OK(pthread_mutex_unlock(&errno_lock));
        if (errno != 4242) { fprintf(stderr, "errno changed by unlock: %d\n", errno); return 92; }
        OK(pthread_mutex_trylock(&errno_lock));
        OK(pthread_mutex_unlock(&errno_lock));
        if (errno != 4242) { fprintf(stderr, "errno changed by trylock: %d\n", errno); return 93; }
    }
    printf("errno ok\n");

    for (long i = 0; i < n; i++) {
        OK(pthread_rwlock_rdlock(&rw));
        OK(pthread_rwlock_rdlock(&rw));
        OK(pthread_rwlock_unlock(&rw));
        OK(pthread_rwlock_unlock(&rw));
        OK(pthread_rwlock_wrlock(&rw));
        EXPECT(pthread_rwlock_rdlock(&rw), EDEADLK);
        EXPECT(pthread_rwlock_wrlock(&rw), EDEADLK);
        OK(pthread_rwlock_unlock(&rw));
    }
    printf("rwlock ok\n");

    bad_lock.__data.__kind = 0x7f; /* no such mutex type */
    EXPECT(pthread_mutex_lock(&bad_lock), EINVAL);
    EXPECT(pthread_mutex_trylock(&bad_lock), EINVAL);
    printf("invalid ok\n");
    return 0;
}

/* Locks named through lockmeter.h (include/ of the workspace, passed with -I).
 *   queue.lock: a heap mutex, 10 acquisitions
 *   table.rwlock: a heap rwlock, 5 reads
 *   spin.heap: a heap spinlock, 3 acquisitions
 *   renamed (static): generation 1 named "first" (4 acquisitions), destroyed, generation 3
 *     named "second" (6 acquisitions): each identity keeps its own name
 *   relabeled: a heap mutex named "old" then "new" before use: 2 acquisitions, named "new"
 *   early: a heap mutex named before its init (the init forgets it): 1 acquisition, unnamed
 *   conn.lock: 3 short-lived heap mutexes (init, name, 2 acquisitions, destroy, free): each
 *     identity keeps its name after its destroy
 * Runs without lockmeter too (the weak symbol is then null). */
#include "e2e_common.h"
#include "lockmeter.h"
#include <unistd.h>

pthread_mutex_t renamed;

static void take(pthread_mutex_t *m, int n) {
    for (int i = 0; i < n; i++) {
        OK(pthread_mutex_lock(m));
        OK(pthread_mutex_unlock(m));
    }
}

int main(void) {
    pthread_mutex_t *q = malloc(sizeof *q);
    pthread_rwlock_t *rw = malloc(sizeof *rw);
    pthread_spinlock_t *sp = malloc(sizeof *sp);
    pthread_mutex_t *rl = malloc(sizeof *rl);
    pthread_mutex_t *early = malloc(sizeof *early);
    if (!q || !rw || !sp || !rl || !early) return 95;

    OK(pthread_mutex_init(q, NULL));
    lockmeter_name(q, "queue.lock");
    take(q, 10);

    OK(pthread_rwlock_init(rw, NULL));
    lockmeter_name(rw, "table.rwlock");
    for (int i = 0; i < 5; i++) {
        OK(pthread_rwlock_rdlock(rw));
        OK(pthread_rwlock_unlock(rw));
    }

    OK(pthread_spin_init(sp, PTHREAD_PROCESS_PRIVATE));
    lockmeter_name((const void *)sp, "spin.heap"); /* the header takes no volatile */
    for (int i = 0; i < 3; i++) {
        OK(pthread_spin_lock(sp));
        OK(pthread_spin_unlock(sp));
    }

    OK(pthread_mutex_init(&renamed, NULL));
    lockmeter_name(&renamed, "first");
    take(&renamed, 4);
    OK(pthread_mutex_destroy(&renamed));
    OK(pthread_mutex_init(&renamed, NULL));
    lockmeter_name(&renamed, "second");
    take(&renamed, 6);

    OK(pthread_mutex_init(rl, NULL));
    lockmeter_name(rl, "old");
    lockmeter_name(rl, "new");
    take(rl, 2);

    lockmeter_name(early, "named-before-init");
    OK(pthread_mutex_init(early, NULL));
    take(early, 1);

    for (int i = 0; i < 3; i++) {
        pthread_mutex_t *c = malloc(sizeof *c);
        if (!c) return 95;
        OK(pthread_mutex_init(c, NULL));
        lockmeter_name(c, "conn.lock");
        take(c, 2);
        OK(pthread_mutex_destroy(c));
        free(c);
    }

    printf("ok %s\n", lockmeter_name_lock ? "named" : "plain");
    return 0;
}

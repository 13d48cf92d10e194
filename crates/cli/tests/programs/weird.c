/* Awkward strings everywhere. Any extra arguments are ignored (a huge command line).
 *   odd_lock: named "a,b\"c\nd;<x>&" (CSV/JSON/HTML-hostile), 3 acquisitions
 *   long_lock: named 200 x "é" (400 bytes: the collector keeps 127, cutting a character),
 *     4 acquisitions
 *   a worker thread named "\xff\xfe-bad" (not UTF-8) takes odd_lock 5 more times */
#include "e2e_common.h"
#include "lockmeter.h"

pthread_mutex_t odd_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t long_lock = PTHREAD_MUTEX_INITIALIZER;

static void take(pthread_mutex_t *m, int n) {
    for (int i = 0; i < n; i++) {
        OK(pthread_mutex_lock(m));
        OK(pthread_mutex_unlock(m));
    }
}

static void *worker(void *arg) {
    (void)arg;
    OK(pthread_setname_np(pthread_self(), "\xff\xfe-bad"));
    take(&odd_lock, 5);
    return NULL;
}

int main(void) {
    lockmeter_name(&odd_lock, "a,b\"c\nd;<x>&");
    char name[401];
    for (int i = 0; i < 200; i++) memcpy(name + 2 * i, "\xc3\xa9", 2);
    name[400] = 0;
    lockmeter_name(&long_lock, name);
    take(&odd_lock, 3);
    take(&long_lock, 4);
    pthread_t t;
    OK(pthread_create(&t, NULL, worker, NULL));
    OK(pthread_join(t, NULL));
    printf("ok\n");
    return 0;
}

/* Many named short-lived locks. argv: COUNT. COUNT times: a heap mutex is initialized, named
 * "conn-<i>" (lockmeter.h), locked once, destroyed and freed. Prints "ok COUNT". */
#include "e2e_common.h"
#include "lockmeter.h"

int main(int argc, char **argv) {
    long count = arg_long(argc, argv, 1, 50000);
    char name[32];
    for (long i = 0; i < count; i++) {
        pthread_mutex_t *m = malloc(sizeof *m);
        if (!m) return 95;
        OK(pthread_mutex_init(m, NULL));
        snprintf(name, sizeof name, "conn-%ld", i);
        lockmeter_name(m, name);
        OK(pthread_mutex_lock(m));
        OK(pthread_mutex_unlock(m));
        OK(pthread_mutex_destroy(m));
        free(m);
    }
    printf("ok %ld\n", count);
    return 0;
}

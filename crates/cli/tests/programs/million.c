/* Short-lived locks. argv: COUNT MODE.
 * MODE static: short_lock (one address) is initialized, locked, unlocked and destroyed COUNT
 *   times: COUNT lock identities of one acquisition each.
 * MODE heap: the same with a malloc'ed mutex, freed after each round (the allocator reuses
 *   addresses), and every 1000th round keeps its block alive a while (new addresses). */
#include "e2e_common.h"

pthread_mutex_t short_lock;

int main(int argc, char **argv) {
    long count = arg_long(argc, argv, 1, 1000000);
    const char *mode = argc > 2 ? argv[2] : "static";
    long done = 0;
    if (!strcmp(mode, "static")) {
        for (long i = 0; i < count; i++) {
            OK(pthread_mutex_init(&short_lock, NULL));
            OK(pthread_mutex_lock(&short_lock));
            done++;
            OK(pthread_mutex_unlock(&short_lock));
            OK(pthread_mutex_destroy(&short_lock));
        }
    } else {
        void *keep[64] = {0};
        for (long i = 0; i < count; i++) {
            pthread_mutex_t *m = malloc(sizeof *m);
            if (!m) return 95;
            OK(pthread_mutex_init(m, NULL));
            OK(pthread_mutex_lock(m));
            done++;
            OK(pthread_mutex_unlock(m));
            OK(pthread_mutex_destroy(m));
            if (i % 1000 == 0) {
                int k = (int)((i / 1000) % 64);
                free(keep[k]);
                keep[k] = m;
            } else {
                free(m);
            }
        }
        for (int k = 0; k < 64; k++) free(keep[k]);
    }
    printf("ok %ld\n", done);
    return 0;
}

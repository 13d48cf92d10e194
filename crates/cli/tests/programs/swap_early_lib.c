/* A shared library whose constructor locks `early_lock` and leaves it locked: under
 * `lockmeter run --lock`, a DT_NEEDED library's constructor runs before the collector's, so this
 * lock is taken through glibc before swapping begins (linked by swap_early.c). */
#include <pthread.h>

pthread_mutex_t early_lock = PTHREAD_MUTEX_INITIALIZER;

__attribute__((constructor)) static void take_early(void) { pthread_mutex_lock(&early_lock); }

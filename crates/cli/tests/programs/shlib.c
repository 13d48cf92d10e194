/* A shared library with its own static lock (linked by shlib_main.c). */
#include <pthread.h>

pthread_mutex_t shlib_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t shlib_private_lock = PTHREAD_MUTEX_INITIALIZER;

void shlib_take(long n) {
    for (long i = 0; i < n; i++) {
        pthread_mutex_lock(&shlib_lock);
        pthread_mutex_unlock(&shlib_lock);
        pthread_mutex_lock(&shlib_private_lock);
        pthread_mutex_unlock(&shlib_private_lock);
    }
}

/* Uses libe2eshlib.so (shlib.c): argv N. shlib_lock and shlib_private_lock N times each (from
 * shlib_take), main_lock N times (from main). */
#include "e2e_common.h"

void shlib_take(long n);
pthread_mutex_t main_lock = PTHREAD_MUTEX_INITIALIZER;

int main(int argc, char **argv) {
    long n = arg_long(argc, argv, 1, 100);
    shlib_take(n);
    for (long i = 0; i < n; i++) {
        OK(pthread_mutex_lock(&main_lock));
        OK(pthread_mutex_unlock(&main_lock));
    }
    printf("ok\n");
    return 0;
}

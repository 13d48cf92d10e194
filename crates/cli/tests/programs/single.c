// One thread takes one mutex N times (no contention): for --stack-sample, which samples one
// acquisition in N per thread. Usage: single N
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t single_lock = PTHREAD_MUTEX_INITIALIZER;

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000;
    for (long i = 0; i < n; i++) {
        pthread_mutex_lock(&single_lock);
        pthread_mutex_unlock(&single_lock);
    }
    printf("acquisitions %ld\n", n);
    return 0;
}

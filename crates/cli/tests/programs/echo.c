/* Copies stdin to stdout byte for byte (taking echo_lock once per chunk), then exit(7). */
#include "e2e_common.h"
#include <unistd.h>

pthread_mutex_t echo_lock = PTHREAD_MUTEX_INITIALIZER;

int main(void) {
    char buf[4096];
    ssize_t r;
    while ((r = read(0, buf, sizeof buf)) > 0) {
        OK(pthread_mutex_lock(&echo_lock));
        if (write(1, buf, (size_t)r) != r) return 95;
        OK(pthread_mutex_unlock(&echo_lock));
    }
    fprintf(stderr, "echo: done\n");
    exit(7);
}

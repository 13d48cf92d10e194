/* Locks taken in a signal handler. argv: K. A SIGUSR1 handler takes sig_lock once (trylock,
 * which is what a careful handler does); main raises SIGUSR1 K times, outside any lock call,
 * and takes main_lock K times. Expected: sig_lock K, main_lock K. */
#include "e2e_common.h"
#include <signal.h>

pthread_mutex_t sig_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t main_lock = PTHREAD_MUTEX_INITIALIZER;
static volatile sig_atomic_t handled;

static void on_usr1(int sig) {
    (void)sig;
    if (pthread_mutex_trylock(&sig_lock) == 0) {
        handled++;
        pthread_mutex_unlock(&sig_lock);
    }
}

int main(int argc, char **argv) {
    long k = arg_long(argc, argv, 1, 100);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL) != 0) return 95;
    for (long i = 0; i < k; i++) {
        OK(pthread_mutex_lock(&main_lock));
        OK(pthread_mutex_unlock(&main_lock));
        raise(SIGUSR1);
    }
    if (handled != k) {
        fprintf(stderr, "handled %d of %ld\n", (int)handled, k);
        return 91;
    }
    printf("ok\n");
    return 0;
}

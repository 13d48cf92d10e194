/* A fork child whose threads race to their first lock. argv: THREADS PAIRS.
 * The parent takes parent_lock 10 times, forks, and waits. The child takes no lock itself: it
 * starts THREADS threads that wait at a barrier, then each takes race_lock PAIRS times, so that
 * the child's first metered acquisitions come from several threads at once.
 * Prints "child PID" and "race_lock N" (THREADS x PAIRS). */
#include "e2e_common.h"
#include <sys/wait.h>
#include <unistd.h>

pthread_mutex_t parent_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t race_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t start;
static long pairs;

static void *worker(void *arg) {
    pthread_barrier_wait(&start);
    for (long i = 0; i < pairs; i++) {
        OK(pthread_mutex_lock(&race_lock));
        OK(pthread_mutex_unlock(&race_lock));
    }
    return arg;
}

int main(int argc, char **argv) {
    long threads = arg_long(argc, argv, 1, 8);
    pairs = arg_long(argc, argv, 2, 1000);
    if (threads < 1 || threads > 64) return 2;
    for (int i = 0; i < 10; i++) {
        OK(pthread_mutex_lock(&parent_lock));
        OK(pthread_mutex_unlock(&parent_lock));
    }
    fflush(stdout);
    pid_t c = fork();
    if (c < 0) return 3;
    if (c == 0) {
        printf("child %d\nrace_lock %ld\n", (int)getpid(), threads * pairs);
        fflush(stdout);
        pthread_t t[64];
        OK(pthread_barrier_init(&start, NULL, (unsigned)threads));
        for (long i = 0; i < threads; i++) OK(pthread_create(&t[i], NULL, worker, NULL));
        for (long i = 0; i < threads; i++) OK(pthread_join(t[i], NULL));
        exit(0);
    }
    int st;
    if (waitpid(c, &st, 0) != c || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return 4;
    return 0;
}

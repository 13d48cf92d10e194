// Lock-holder preemption: more threads than CPUs fight over one mutex and hold it for a while, so
// holders get switched out. Each counts, while it holds the lock, its own involuntary context
// switches (getrusage(RUSAGE_THREAD).ru_nivcsw read just after locking and just before
// unlocking), and prints the total. Usage: preempt THREADS ITERATIONS WORK
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

static pthread_mutex_t hot_mutex = PTHREAD_MUTEX_INITIALIZER;
static long preempted_holds, counter;
static int iters, work;

static long nivcsw(void) {
    struct rusage r;
    getrusage(RUSAGE_THREAD, &r);
    return r.ru_nivcsw;
}

static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < iters; i++) {
        pthread_mutex_lock(&hot_mutex);
        long before = nivcsw();
        for (volatile int k = 0; k < work; k++) {}
        counter++;
        preempted_holds += nivcsw() - before;
        pthread_mutex_unlock(&hot_mutex);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 4;
    iters = argc > 2 ? atoi(argv[2]) : 2000;
    work = argc > 3 ? atoi(argv[3]) : 200000;
    pthread_t t[64];
    for (int i = 0; i < n && i < 64; i++) pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < n && i < 64; i++) pthread_join(t[i], NULL);
    printf("counter %ld preempted_holds %ld\n", counter, preempted_holds);
    return 0;
}

// A pthread mutex that threads fight over, with mmap/munmap between (kernel mmap_lock
// contention): for `run --kernel`, one profile with the user lock, how often its waiters slept
// in the kernel, and the kernel's locks. Usage: kernelmix THREADS ITERATIONS [kill9]
// (kill9: after printing the counter, the program raises SIGKILL, so no handler of its runs)
// main holds hot_mutex until every worker has started and then 50 ms more, so at least one
// waiter sleeps in the kernel whatever the scheduler does (on a loaded machine a worker can
// start long after main); it prints its acquisitions as "acquisitions N".
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static pthread_mutex_t hot_mutex = PTHREAD_MUTEX_INITIALIZER;
static long counter;
static int iters;
static int started;

static void *worker(void *arg) {
    (void)arg;
    __atomic_add_fetch(&started, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < iters; i++) {
        pthread_mutex_lock(&hot_mutex);
        counter++;
        for (volatile int k = 0; k < 2000; k++) {}
        pthread_mutex_unlock(&hot_mutex);
        if (i % 8 == 0) {
            char *p = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) abort();
            p[0] = 1;
            munmap(p, 1 << 16);
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 4;
    iters = argc > 2 ? atoi(argv[2]) : 20000;
    pthread_t t[64];
    pthread_mutex_lock(&hot_mutex);
    for (int i = 0; i < n && i < 64; i++) pthread_create(&t[i], NULL, worker, NULL);
    while (__atomic_load_n(&started, __ATOMIC_SEQ_CST) < (n < 64 ? n : 64)) usleep(1000);
    usleep(50000);
    pthread_mutex_unlock(&hot_mutex);
    for (int i = 0; i < n && i < 64; i++) pthread_join(t[i], NULL);
    printf("counter %ld\n", counter);
    printf("acquisitions %ld\n", counter + 1);
    if (argc > 3 && !strcmp(argv[3], "kill9")) {
        fflush(stdout);
        raise(SIGKILL);
    }
    return 0;
}

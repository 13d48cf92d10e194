// Threads that fight over the kernel's per-process locks (mmap_lock, page-table locks): each
// maps, touches, mprotects and unmaps memory in a loop. Usage: mmapper THREADS ITERATIONS
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

static int iters;
static void *worker(void *arg) {
    (void)arg;
    for (int i = 0; i < iters; i++) {
        size_t len = 16 * 4096;
        char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) abort();
        for (size_t o = 0; o < len; o += 4096) p[o] = (char)o;
        mprotect(p, len / 2, PROT_READ);
        munmap(p, len);
    }
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 4;
    iters = argc > 2 ? atoi(argv[2]) : 20000;
    pthread_t t[64];
    for (int i = 0; i < n && i < 64; i++) pthread_create(&t[i], NULL, worker, NULL);
    for (int i = 0; i < n && i < 64; i++) pthread_join(t[i], NULL);
    printf("iterations %ld\n", (long)n * iters);
    return 0;
}

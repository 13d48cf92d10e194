// A pthread mutex that threads fight over, with mmap/munmap between (kernel mmap_lock
// contention): for `run --kernel`, one profile with the user lock, how often its waiters slept
// in the kernel, and the kernel's locks. Usage: kernelmix THREADS ITERATIONS [kill9]
// (kill9: after printing the counter, the program raises SIGKILL, so no handler of its runs)
// main holds hot_mutex until every worker has started and then 50 ms more, so at least one
// waiter sleeps in the kernel whatever the scheduler does (on a loaded machine a worker can
// start long after main); it prints its acquisitions as "acquisitions N".
// Then two threads write 16 MiB buffers to one file at once, each write holding the file's
// inode lock (a kernel rwsem) while it copies, so the other's write waits on it in the kernel:
// kernel lock contention that does not depend on how mmap and page faults happen to interleave.
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
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

static int file_fd;
static char *file_buf;
enum { FILE_CHUNK = 16 << 20, FILE_WRITES = 6 };

static void *file_writer(void *arg) {
    (void)arg;
    for (int i = 0; i < FILE_WRITES; i++) {
        if (pwrite(file_fd, file_buf, FILE_CHUNK, 0) != FILE_CHUNK) abort();
    }
    return NULL;
}

/* Two threads writing to one file: each write holds the inode lock while it copies 16 MiB. */
static void file_contention(void) {
    char path[] = "kernelmix-XXXXXX";
    file_fd = mkstemp(path);
    if (file_fd < 0) abort();
    unlink(path);
    file_buf = malloc(FILE_CHUNK);
    if (!file_buf) abort();
    memset(file_buf, 7, FILE_CHUNK);
    pthread_t w[2];
    for (int i = 0; i < 2; i++) pthread_create(&w[i], NULL, file_writer, NULL);
    for (int i = 0; i < 2; i++) pthread_join(w[i], NULL);
    close(file_fd);
    free(file_buf);
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
    file_contention();
    printf("counter %ld\n", counter);
    printf("acquisitions %ld\n", counter + 1);
    if (argc > 3 && !strcmp(argv[3], "kill9")) {
        fflush(stdout);
        raise(SIGKILL);
    }
    return 0;
}

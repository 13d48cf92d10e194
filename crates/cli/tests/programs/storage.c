/* One mutex of each storage: the main thread's stack, a worker thread's stack, the heap (malloc)
 * and a shared mapping (mmap MAP_SHARED). argv: none. Each is locked once by the thread that
 * owns it; the worker then stays blocked (alive, its stack mapped) while main exits.
 * Prints each lock's storage and address ("stack 0x..."), one a line, then "ok 4". */
#include "e2e_common.h"
#include <sys/mman.h>
#include <unistd.h>

static pthread_mutex_t ready_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready_cond = PTHREAD_COND_INITIALIZER;
static int ready;
static pthread_mutex_t *worker_lock;

__attribute__((noinline)) static void use_lock(pthread_mutex_t *m) {
    OK(pthread_mutex_lock(m));
    OK(pthread_mutex_unlock(m));
}

__attribute__((noinline)) static void *worker_with_stack_lock(void *arg) {
    (void)arg;
    pthread_mutex_t on_worker_stack;
    OK(pthread_mutex_init(&on_worker_stack, NULL));
    use_lock(&on_worker_stack);
    /* The condvar's mutex is taken too: it is static (named by its symbol). */
    OK(pthread_mutex_lock(&ready_lock));
    worker_lock = &on_worker_stack;
    ready = 1;
    OK(pthread_cond_signal(&ready_cond));
    OK(pthread_mutex_unlock(&ready_lock));
    for (;;) pause();
    return NULL;
}

int main(void) {
    pthread_mutex_t on_main_stack;
    OK(pthread_mutex_init(&on_main_stack, NULL));
    use_lock(&on_main_stack);
    pthread_mutex_t *on_heap = malloc(sizeof *on_heap);
    if (!on_heap) return 95;
    OK(pthread_mutex_init(on_heap, NULL));
    use_lock(on_heap);
    pthread_mutex_t *mapped = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) return 95;
    OK(pthread_mutex_init(mapped, NULL));
    use_lock(mapped);
    pthread_t th;
    OK(pthread_create(&th, NULL, worker_with_stack_lock, NULL));
    OK(pthread_mutex_lock(&ready_lock));
    while (!ready) OK(pthread_cond_wait(&ready_cond, &ready_lock));
    OK(pthread_mutex_unlock(&ready_lock));
    printf("stack %p\nstack %p\nheap %p\nmapped %p\nok 4\n", (void *)&on_main_stack,
           (void *)worker_lock, (void *)on_heap, (void *)mapped);
    fflush(stdout);
    exit(0);
}

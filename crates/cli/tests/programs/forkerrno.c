/* errno through a fork: takes a lock (so the child's fork handler has tables to deal with),
 * sets errno to 4321, forks; the child and the parent each print the errno fork left them
 * ("child_errno N", "parent_errno N"). Unmetered, both are 4321. */
#include "e2e_common.h"
#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

int main(void) {
    OK(pthread_mutex_lock(&m));
    OK(pthread_mutex_unlock(&m));
    fflush(stdout);
    errno = 4321;
    pid_t c = fork();
    int e = errno;
    if (c == 0) {
        printf("child_errno %d\n", e);
        fflush(stdout);
        _exit(0);
    }
    if (c < 0 || waitpid(c, NULL, 0) != c) return 3;
    printf("parent_errno %d\n", e);
    return 0;
}

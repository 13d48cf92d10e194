/* A daemon-like start: closes every descriptor above 2 (the collector's control socket too) and
 * opens files of its own, which may take the same numbers; takes the mutex named "closer.lock"
 * 10 times, prints "ready PID" and waits for a line on stdin before it exits. */
#include "e2e_common.h"
#include "lockmeter.h"
#include <fcntl.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

int main(void) {
    for (int fd = 3; fd < 1024; fd++) close(fd);
    for (int i = 0; i < 4; i++)
        if (open("/dev/null", O_RDONLY) < 0) return 91;
    lockmeter_name(&m, "closer.lock");
    for (int i = 0; i < 10; i++) {
        OK(pthread_mutex_lock(&m));
        OK(pthread_mutex_unlock(&m));
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin)) return 0;
    return 0;
}

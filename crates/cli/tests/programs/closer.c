/* A daemon-like start: takes the mutex named "closer.lock" once (the collector's control socket
 * starts at the first lock), closes every descriptor above 2 (that socket too) and opens files of
 * its own, which may take the same numbers; takes the mutex 9 more times (10 in all), prints
 * "ready PID" and waits for a line on stdin before it exits. */
#include "e2e_common.h"
#include "lockmeter.h"
#include <fcntl.h>
#include <unistd.h>

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;

int main(void) {
    lockmeter_name(&m, "closer.lock");
    OK(pthread_mutex_lock(&m));
    OK(pthread_mutex_unlock(&m));
    for (int fd = 3; fd < 1024; fd++) close(fd);
    for (int i = 0; i < 4; i++)
        if (open("/dev/null", O_RDONLY) < 0) return 91;
    for (int i = 0; i < 9; i++) {
        OK(pthread_mutex_lock(&m));
        OK(pthread_mutex_unlock(&m));
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin)) return 0;
    return 0;
}

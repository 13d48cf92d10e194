// A server that rewrites its argv (as redis and postgres do) after start, then takes a lock and
// exits: the profile must name it by the command line it was started with.
// Usage: argv ANYTHING...
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_mutex_t named_lock = PTHREAD_MUTEX_INITIALIZER;

int main(int argc, char **argv) {
    // Overwrite the argument area in place, as setproctitle does.
    char *start = argv[0], *end = argv[argc - 1] + strlen(argv[argc - 1]);
    memset(start, 0, (size_t)(end - start));
    strcpy(start, "rewritten: server ready");
    pthread_mutex_lock(&named_lock);
    pthread_mutex_unlock(&named_lock);
    printf("rewrote argv\n");
    return 0;
}

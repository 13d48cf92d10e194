/* Deeply nested locks. argv: DEPTH ROUNDS. Each round locks nest[0..DEPTH) in order and
 * unlocks them in reverse order. The collector's per-thread stack of held locks is 64 deep:
 * each round, DEPTH - 64 holds cannot be timed (dropped.holds), but every acquisition counts. */
#include "e2e_common.h"

#define MAX 256
pthread_mutex_t nest[MAX];

int main(int argc, char **argv) {
    long depth = arg_long(argc, argv, 1, 100);
    long rounds = arg_long(argc, argv, 2, 10);
    if (depth > MAX) return 95;
    for (long r = 0; r < rounds; r++) {
        for (long i = 0; i < depth; i++) OK(pthread_mutex_lock(&nest[i]));
        for (long i = depth - 1; i >= 0; i--) OK(pthread_mutex_unlock(&nest[i]));
    }
    printf("ok\n");
    return 0;
}

// gocgo: a cgo program (so dynamically linked: the loader loads the preload) whose goroutines
// take a C pthread mutex through cgo, then leave with os.Exit, which is Go's raw exit_group
// system call: no exit handler of the C library runs.
//
// Usage: gocgo GOROUTINES N CODE
//
// Each of GOROUTINES goroutines calls take_n(N) (N lock/unlock pairs of cgo_lock); the program
// prints "cgo_lock TOTAL" and exits with CODE.
package main

/*
#include <pthread.h>
pthread_mutex_t cgo_lock = PTHREAD_MUTEX_INITIALIZER;
static long cgo_count;
static void take_n(long n) {
	for (long i = 0; i < n; i++) {
		pthread_mutex_lock(&cgo_lock);
		cgo_count++;
		pthread_mutex_unlock(&cgo_lock);
	}
}
static long taken(void) { return cgo_count; }
*/
import "C"

import (
	"fmt"
	"os"
	"strconv"
	"sync"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: gocgo GOROUTINES N CODE")
		os.Exit(2)
	}
	arg := func(i int) int {
		v, err := strconv.Atoi(os.Args[i])
		if err != nil || v < 0 {
			fmt.Fprintf(os.Stderr, "gocgo: bad argument %q\n", os.Args[i])
			os.Exit(2)
		}
		return v
	}
	g, n, code := arg(1), arg(2), arg(3)
	var wg sync.WaitGroup
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); C.take_n(C.long(n)) }()
	}
	wg.Wait()
	fmt.Printf("cgo_lock %d\n", int64(C.taken()))
	os.Exit(code)
}

// gomutex: goroutines that contend on package-level sync.Mutex and sync.RWMutex variables, with
// ground truth for `lockmeter record`.
//
// Usage: gomutex ROUNDS WAITERS BUSY_GOROUTINES BUSY_ITERATIONS
//
// Exact phases (each round): a holder takes the lock, starts goroutines that want it, and lets go
// only once the goroutine dump shows every one of them parked in the runtime's semaphore for
// that lock (state "[sync.Mutex.Lock]", "[sync.RWMutex.RLock]", "[sync.RWMutex.Lock]"). Nothing
// else takes the lock meanwhile, so each of those Lock/RLock calls waits in the semaphore exactly
// once and no other call on that lock waits at all:
//   - hot (sync.Mutex): WAITERS waits per round;
//   - table (sync.RWMutex), readers behind a writer: WAITERS read waits per round;
//   - table, a writer behind readers (the writer waits for the readers to leave): 1 write wait;
//   - table, a writer behind a writer (the inner mutex of the RWMutex): 1 write wait;
//   - twice (sync.Mutex), one Lock call that sleeps twice: with one P, the holder unlocks (which
//     wakes the waiter) and takes the mutex again with TryLock before the waiter runs, so the
//     waiter finds it held and sleeps again. One contended acquisition all the same. (Should
//     the waiter run first and win, TryLock fails and the waiter slept once: still one.)
//
// Free phase: BUSY_GOROUTINES goroutines lock busy (sync.Mutex) BUSY_ITERATIONS times each and
// sleep while holding it, so that others find it held and sleep too. How many of those Lock
// calls waited is not knowable from inside; the program prints how many Lock calls there were.
//
// Output: "hot_waits N table_read_waits N table_write_waits N twice_waits N twice_sleeps N
// busy_locks N ...".
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

var (
	hot   sync.Mutex
	table sync.RWMutex
	busy  sync.Mutex
	twice sync.Mutex

	hotCount   int
	tableValue int
	busyCount  int
)

//go:noinline
func lockHot() {
	hot.Lock()
	hotCount++
	hot.Unlock()
}

//go:noinline
func readTable(sum *int64, mu *sync.Mutex) {
	table.RLock()
	v := tableValue
	table.RUnlock()
	mu.Lock()
	*sum += int64(v)
	mu.Unlock()
}

//go:noinline
func writeTable() {
	table.Lock()
	tableValue++
	table.Unlock()
}

//go:noinline
func holdRead(held, done *sync.WaitGroup, release chan struct{}) {
	table.RLock()
	held.Done()
	<-release
	table.RUnlock()
	done.Done()
}

//go:noinline
func lockBusy(n int) {
	for i := 0; i < n; i++ {
		busy.Lock()
		busyCount++
		time.Sleep(20 * time.Microsecond)
		busy.Unlock()
	}
}

//go:noinline
func lockTwice() {
	twice.Lock()
	twice.Unlock()
}

// waitParked returns once `n` goroutines are parked in state `state` with `fn` on their stack.
func waitParked(state, fn string, n int) {
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := 0
		dump := string(buf[:runtime.Stack(buf, true)])
		for _, g := range strings.Split(dump, "\n\n") {
			header, _, _ := strings.Cut(g, "\n")
			if strings.Contains(header, "["+state+"]") || strings.Contains(header, "["+state+",") {
				if strings.Contains(g, "\n"+fn+"(") {
					got++
				}
			}
		}
		if got == n {
			return
		}
		if got > n || time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "gomutex: %d goroutines in [%s] in %s, expected %d\n%s", got, state, fn, n, dump)
			os.Exit(1)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func main() {
	if len(os.Args) != 5 {
		fmt.Fprintln(os.Stderr, "usage: gomutex ROUNDS WAITERS BUSY_GOROUTINES BUSY_ITERATIONS")
		os.Exit(2)
	}
	arg := func(i int) int {
		v, err := strconv.Atoi(os.Args[i])
		if err != nil || v < 0 {
			fmt.Fprintf(os.Stderr, "gomutex: bad argument %q\n", os.Args[i])
			os.Exit(2)
		}
		return v
	}
	rounds, waiters, busyG, busyN := arg(1), arg(2), arg(3), arg(4)
	hotWaits, readWaits, writeWaits := 0, 0, 0
	var sum int64
	var sumMu sync.Mutex
	for r := 0; r < rounds; r++ {
		// hot: WAITERS goroutines behind the holder.
		var wg sync.WaitGroup
		hot.Lock()
		for i := 0; i < waiters; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); lockHot() }()
		}
		waitParked("sync.Mutex.Lock", "main.lockHot", waiters)
		hotWaits += waiters
		hot.Unlock()
		wg.Wait()

		// table: readers behind a writer.
		table.Lock()
		for i := 0; i < waiters; i++ {
			wg.Add(1)
			go func() { defer wg.Done(); readTable(&sum, &sumMu) }()
		}
		waitParked("sync.RWMutex.RLock", "main.readTable", waiters)
		readWaits += waiters
		table.Unlock()
		wg.Wait()

		// table: a writer behind readers.
		var held, done sync.WaitGroup
		release := make(chan struct{})
		for i := 0; i < waiters; i++ {
			held.Add(1)
			done.Add(1)
			go holdRead(&held, &done, release)
		}
		held.Wait()
		wg.Add(1)
		go func() { defer wg.Done(); writeTable() }()
		waitParked("sync.RWMutex.Lock", "main.writeTable", 1)
		writeWaits++
		close(release)
		done.Wait()
		wg.Wait()

		// table: a writer behind a writer (waits in the RWMutex's inner mutex).
		table.Lock()
		wg.Add(1)
		go func() { defer wg.Done(); writeTable() }()
		waitParked("sync.Mutex.Lock", "main.writeTable", 1)
		writeWaits++
		table.Unlock()
		wg.Wait()
	}
	// twice: a waiter that sleeps twice in one Lock call.
	twiceWaits, twiceSleeps := 0, 0
	procs := runtime.GOMAXPROCS(1)
	for r := 0; r < rounds; r++ {
		var wg sync.WaitGroup
		twice.Lock()
		wg.Add(1)
		go func() { defer wg.Done(); lockTwice() }()
		waitParked("sync.Mutex.Lock", "main.lockTwice", 1)
		twiceWaits++
		twiceSleeps++
		twice.Unlock()
		if twice.TryLock() {
			waitParked("sync.Mutex.Lock", "main.lockTwice", 1)
			twiceSleeps++
			twice.Unlock()
		}
		wg.Wait()
	}
	runtime.GOMAXPROCS(procs)

	// busy: a free-for-all.
	var wg sync.WaitGroup
	for g := 0; g < busyG; g++ {
		wg.Add(1)
		go func() { defer wg.Done(); lockBusy(busyN) }()
	}
	wg.Wait()
	if hotCount != hotWaits || busyCount != busyG*busyN {
		fmt.Fprintf(os.Stderr, "gomutex: lost updates: hot %d/%d busy %d/%d\n", hotCount, hotWaits, busyCount, busyG*busyN)
		os.Exit(1)
	}
	fmt.Printf("hot_waits %d table_read_waits %d table_write_waits %d twice_waits %d twice_sleeps %d busy_locks %d hot_count %d sum %d\n",
		hotWaits, readWaits, writeWaits, twiceWaits, twiceSleeps, busyG*busyN, hotCount, sum)
}

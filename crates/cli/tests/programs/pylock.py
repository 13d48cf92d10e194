"""THREADS threads each add 1 to a counter ITERS times under one threading.Lock.

argv: THREADS ITERS. CPython up to 3.12 makes a threading.Lock of a POSIX semaphore (sem_init'ed
with value 1; acquire is sem_trywait, then sem_wait if that failed; release is sem_post).

Prints `key=value` lines:
  counter             the final counter (THREADS * ITERS, or the program exits 90)
  lock_acquisitions   acquisitions of the counter lock: THREADS * ITERS, plus 1 for the check below
  sem_addr            the address of the counter lock's sem_t, read through ctypes from the lock
                      object (the pointer right after the object header) and checked with
                      sem_getvalue (1 when free, 0 when held); `unknown` (with `why=`) when it
                      cannot be read or checked.
Ends with os._exit, so that the lock is never freed: its sem_t address holds no later lock.
"""

import os
import sys
import threading

threads = int(sys.argv[1]) if len(sys.argv) > 1 else 4
iters = int(sys.argv[2]) if len(sys.argv) > 2 else 20000

lock = threading.Lock()
extra = 0


def sem_address():
    """The counter lock's sem_t address, or (None, why)."""
    try:
        import ctypes
    except ImportError as e:
        return None, f"no ctypes ({e})"
    global extra
    libc = ctypes.CDLL(None)
    libc.sem_getvalue.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
    addr = ctypes.c_void_p.from_address(id(lock) + object.__basicsize__).value
    if not addr:
        return None, "null lock pointer"

    def value():
        v = ctypes.c_int(-1)
        return libc.sem_getvalue(addr, ctypes.byref(v)), v.value

    free = value()
    with lock:
        held = value()
    extra += 1
    if free != (0, 1) or held != (0, 0) or value() != (0, 1):
        return None, f"sem_getvalue gave {free} free, {held} held: not a semaphore"
    return addr, None


addr, why = sem_address()
counter = 0


def work():
    global counter
    for _ in range(iters):
        with lock:
            counter += 1


workers = [threading.Thread(target=work, name=f"adder-{i}") for i in range(threads)]
for t in workers:
    t.start()
for t in workers:
    t.join()

print(f"counter={counter}")
print(f"lock_acquisitions={threads * iters + extra}")
if addr is None:
    print("sem_addr=unknown")
    print(f"why={why}")
else:
    print(f"sem_addr={addr:#x}")
sys.stdout.flush()
os._exit(0 if counter == threads * iters else 90)

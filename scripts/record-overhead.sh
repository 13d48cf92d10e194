#!/usr/bin/env bash
# The cost of `lockmeter record` (eBPF) beside `perf lock record` and no tracing, on a workload
# that contends on kernel locks (mmapper: mmap/mprotect/munmap/page faults in 4 threads) and on a
# futex-heavy one (futexlock: a hand-made futex lock, 4 threads). Paired, interleaved runs; medians.
# Needs root, perf, gcc, and a release build: cargo build --release.
# Usage: scripts/record-overhead.sh [ROUNDS]   (never pass/fail: it prints figures)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
lm=$PWD/target/release/lockmeter
[ -x "$lm" ] || { echo "build first: cargo build --release" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "run as root (eBPF and perf tracepoints need it)" >&2; exit 2; }
command -v perf >/dev/null || { echo "needs perf (apt-get install linux-perf)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gcc -O2 -g -pthread -fno-omit-frame-pointer -o "$tmp/mmapper" crates/cli/tests/programs/mmapper.c
gcc -O2 -g -pthread -fno-omit-frame-pointer -o "$tmp/futexlock" crates/cli/tests/programs/futexlock.c
gcc -O2 -g -fno-omit-frame-pointer -o "$tmp/futexcalls" crates/cli/tests/programs/futexcalls.c
cat >"$tmp/getppid.c" <<'C'
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(void) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < 500000; i++) syscall(SYS_getppid);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("getppid_ns %.0f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 500000.0);
    return 0;
}
C
gcc -O2 -o "$tmp/getppid" "$tmp/getppid.c"

now() { date +%s%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

measure() { # name, workload args...
    local name=$1; shift
    : >"$tmp/bare" ; : >"$tmp/rec" ; : >"$tmp/perf"; : >"$tmp/events"
    for r in $(seq "$rounds"); do
        printf '\r%s: round %d/%d' "$name" "$r" "$rounds" >&2
        local t0 t1
        t0=$(now); "$@" >/dev/null; t1=$(now); echo $(( t1 - t0 )) >>"$tmp/bare"
        rm -f "$tmp/r.lmp"*
        t0=$(now); "$lm" record -q -o "$tmp/r.lmp" -- "$@" >/dev/null 2>&1; t1=$(now)
        echo $(( t1 - t0 )) >>"$tmp/rec"
        "$lm" report --format json "$tmp/r.lmp" | python3 -c 'import json,sys; print(json.load(sys.stdin)["totals"]["contended"])' >>"$tmp/events"
        t0=$(now); (cd "$tmp" && perf lock record -o "$tmp/perf.data" -- "$@" >/dev/null 2>&1); t1=$(now)
        echo $(( t1 - t0 )) >>"$tmp/perf"
        rm -f "$tmp/perf.data"*
    done
    printf '\r' >&2
    local b r p e
    b=$(median <"$tmp/bare"); r=$(median <"$tmp/rec"); p=$(median <"$tmp/perf"); e=$(median <"$tmp/events")
    awk -v n="$name" -v b="$b" -v r="$r" -v p="$p" -v e="$e" 'BEGIN {
        printf "| %-30s | %8.0f ms | %8.0f ms (%.2fx) | %8.0f ms (%.2fx) | %9d |\n",
            n, b/1e6, r/1e6, r/b, p/1e6, p/b, e }'
}

# The fixed cost (load and attach the BPF programs, detach, write the profile), from `true`.
: >"$tmp/fixed"
for r in $(seq "$rounds"); do
    t0=$(now); true; t1=$(now); b=$(( t1 - t0 ))
    rm -f "$tmp/t.lmp"*
    t0=$(now); "$lm" record -q -o "$tmp/t.lmp" -- true >/dev/null 2>&1; t1=$(now)
    echo $(( t1 - t0 - b )) >>"$tmp/fixed"
done
fixed=$(median <"$tmp/fixed")
echo "| workload | no tracing | lockmeter record | perf lock record | waits seen by record |"
echo "|---|---|---|---|---|"
measure "mmapper 4 threads x 5000" "$tmp/mmapper" 4 5000
measure "futexlock 4 threads x 100000" "$tmp/futexlock" 4 100000
awk -v f="$fixed" -v n="$rounds" -v c="$(nproc)" -v k="$(uname -r)" 'BEGIN {
    printf "(medians of %d interleaved rounds; %d CPUs; kernel %s. record'"'"'s fixed cost (load and attach the BPF programs, write the profile; measured on `true`): %.0f ms)\n", n, c, k, f/1e6 }'


# Cost per traced call, as the programs time themselves (medians of the rounds).
: >"$tmp/cb"; : >"$tmp/cr"
for r in $(seq "$rounds"); do
    { "$tmp/futexcalls" 200000; "$tmp/getppid"; } | tr '\n' ' ' >>"$tmp/cb"; echo >>"$tmp/cb"
    { "$lm" record -q -o "$tmp/c.lmp" -- "$tmp/futexcalls" 200000 2>/dev/null; rm -f "$tmp/c.lmp"*
      "$lm" record -q -o "$tmp/c.lmp" -- "$tmp/getppid" 2>/dev/null; rm -f "$tmp/c.lmp"*; } | tr '\n' ' ' >>"$tmp/cr"; echo >>"$tmp/cr"
done
col() { awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i+1) }' "$2" | median; }
echo
echo "| call (ns per call, the program's own clock) | no tracing | under lockmeter record |"
echo "|---|---|---|"
for k in wake_ns wait_ns getppid_ns; do
    case $k in
        wake_ns) what="futex FUTEX_WAKE that wakes nobody" ;;
        wait_ns) what="futex FUTEX_WAIT that returns at once (traced: stack + aggregate)" ;;
        getppid_ns) what="getppid (any other syscall)" ;;
    esac
    printf '| %s | %s | %s |\n' "$what" "$(col $k "$tmp/cb")" "$(col $k "$tmp/cr")"
done

# memcached under memcaslap (when both are installed): throughput bare, under `lockmeter record`
# and under `perf lock record`, interleaved.
if command -v memcached >/dev/null && command -v memcaslap >/dev/null; then
    port=11399
    serve() { # how..., prints memcaslap's TPS
        "$@" memcached -u root -t 4 -p $port -U 0 -l 127.0.0.1 >/dev/null 2>&1 &
        local pid=$!
        for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
        memcaslap -s 127.0.0.1:$port -t 8s -c 32 -T 2 2>/dev/null | awk '/^Run time/ { for (i = 1; i < NF; i++) if ($i == "TPS:") print $(i+1) }' | tail -1
        pkill -TERM -x memcached || true
        wait $pid 2>/dev/null || true
        rm -f "$tmp/mc.lmp"* "$tmp/perf.data"*
    }
    : >"$tmp/mb"; : >"$tmp/mr"; : >"$tmp/mp"
    for r in $(seq "$rounds"); do
        printf '\rmemcached: round %d/%d' "$r" "$rounds" >&2
        serve env >>"$tmp/mb"
        serve "$lm" record -q -o "$tmp/mc.lmp" -- >>"$tmp/mr"
        serve perf lock record -o "$tmp/perf.data" -- >>"$tmp/mp"
    done
    printf '\r' >&2
    b=$(median <"$tmp/mb"); r=$(median <"$tmp/mr"); p=$(median <"$tmp/mp")
    echo
    echo "| memcached -t 4 under memcaslap (-c 32 -T 2, 8 s) | no tracing | lockmeter record | perf lock record |"
    echo "|---|---|---|---|"
    awk -v b="$b" -v r="$r" -v p="$p" 'BEGIN { printf "| throughput (ops/s) | %d | %d (%+.1f%%) | %d (%+.1f%%) |\n", b, r, (r-b)/b*100, p, (p-b)/b*100 }'
fi

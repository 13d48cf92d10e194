#!/usr/bin/env bash
# memcached's throughput under memcaslap: bare, under `lockmeter run` with default options, and
# under `lockmeter run --hold off`. Interleaved rounds (bare, run, run --hold off, bare, ...);
# medians. Also prints, from the metered runs' profiles, the dropped counts (all must be 0), the
# profile's own `overhead.estimated_slowdown`, and the lock acquisitions per memcaslap operation.
# Needs memcached, memcaslap, python3 and a release build: cargo build --release -p lockmeter.
# Usage: scripts/memcached-overhead.sh [ROUNDS]   (never pass/fail: it prints figures)
# Environment: LOCKMETER (the binary; default $CARGO_TARGET_DIR or target, release),
# SECONDS_PER_RUN (memcaslap's -t, default 15), PIN=1 (memcached on CPU 0, memcaslap on CPU 1,
# with taskset; default off: both float over all CPUs, as a user would run them).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
secs=${SECONDS_PER_RUN:-15}
lm=${LOCKMETER:-${CARGO_TARGET_DIR:-$PWD/target}/release/lockmeter}
[ -x "$lm" ] || { echo "build first: cargo build --release -p lockmeter (or set LOCKMETER)" >&2; exit 2; }
for c in memcached memcaslap python3; do
    command -v $c >/dev/null || { echo "needs $c (apt-get install memcached libmemcached-tools python3)" >&2; exit 2; }
done
pin_server=(); pin_client=()
if [ "${PIN:-0}" = 1 ]; then
    [ "$(nproc)" -ge 2 ] || { echo "PIN=1 needs 2 CPUs" >&2; exit 2; }
    pin_server=(taskset -c 0); pin_client=(taskset -c 1)
fi
tmp=$(mktemp -d)
server=
cleanup() { [ -n "$server" ] && kill -TERM "$server" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
port=$(( 20000 + $$ % 20000 ))

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# serve MODE [how...]: starts memcached (under `how`), loads it with memcaslap, appends the TPS to
# $tmp/MODE.tps; a metered run's profile is summarized into $tmp/MODE.prof.
serve() {
    local mode=$1; shift
    rm -f "$tmp/mc.lmp"*
    "${pin_server[@]}" "$@" memcached -u root -t 4 -l 127.0.0.1 -p $port -U 0 >/dev/null 2>"$tmp/server.err" &
    server=$!
    local up=0
    for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && { up=1; break; }; sleep 0.05; done
    [ $up = 1 ] || { echo "memcached did not start on port $port:" >&2; cat "$tmp/server.err" >&2; exit 1; }
    "${pin_client[@]}" memcaslap -s 127.0.0.1:$port -t "${secs}s" -T 4 -c 64 2>/dev/null >"$tmp/caslap"
    local tps ops
    tps=$(awk '/^Run time/ { for (i = 1; i < NF; i++) if ($i == "TPS:") print $(i+1) }' "$tmp/caslap" | tail -1)
    ops=$(awk '/^Run time/ { for (i = 1; i < NF; i++) if ($i == "Ops:") print $(i+1) }' "$tmp/caslap" | tail -1)
    [ -n "$tps" ] || { echo "memcaslap printed no throughput:" >&2; cat "$tmp/caslap" >&2; exit 1; }
    kill -TERM "$server"
    wait "$server" || true
    server=
    echo "$tps" >>"$tmp/$mode.tps"
    if [ -e "$tmp/mc.lmp" ]; then
        # dropped (the largest of the profile's dropped counts: acquisitions, locks, threads,
        # holds, stacks), estimated_slowdown, acquisitions per memcaslap op
        "$lm" report --format json "$tmp/mc.lmp" | python3 -c '
import json, sys
d = json.load(sys.stdin)
dropped = max(list(d["dropped"].values()) + [d["totals"]["dropped"]])
print(dropped, d["overhead"]["estimated_slowdown"], d["totals"]["acquisitions"] / int(sys.argv[1]))
' "$ops" >>"$tmp/$mode.prof"
    fi
}

for r in $(seq "$rounds"); do
    printf '\rmemcached: round %d/%d' "$r" "$rounds" >&2
    serve bare env
    serve run "$lm" run -q -o "$tmp/mc.lmp" --
    serve holdoff "$lm" run -q --hold off -o "$tmp/mc.lmp" --
done
printf '\r%30s\r' '' >&2

b=$(median <"$tmp/bare.tps")
echo "| memcached -t 4 under memcaslap (-T 4 -c 64, ${secs} s) | ops/s | vs bare | dropped | estimated slowdown | acquisitions per op |"
echo "|---|---|---|---|---|---|"
printf '| bare | %.0f | - | - | - | - |\n' "$b"
for mode in run holdoff; do
    case $mode in
        run) what='`lockmeter run`' ;;
        holdoff) what='`lockmeter run --hold off`' ;;
    esac
    t=$(median <"$tmp/$mode.tps")
    d=$(awk '{ if ($1 > m) m = $1 } END { print m + 0 }' "$tmp/$mode.prof")
    e=$(awk '{ print $2 }' "$tmp/$mode.prof" | median)
    a=$(awk '{ print $3 }' "$tmp/$mode.prof" | median)
    awk -v w="$what" -v t="$t" -v b="$b" -v d="$d" -v e="$e" -v a="$a" 'BEGIN {
        printf "| %s | %.0f | %+.1f%% | %d | %.3fx | %.1f |\n", w, t, (t-b)/b*100, d, e, a }'
done
for mode in bare run holdoff; do
    printf '%s rounds (ops/s): %s\n' "$mode" "$(tr '\n' ' ' <"$tmp/$mode.tps")"
done
pinned=$([ "${PIN:-0}" = 1 ] && echo "memcached pinned to CPU 0, memcaslap to CPU 1" || echo "not pinned")
echo "(medians of $rounds interleaved rounds; dropped: the largest of the rounds; $(nproc) CPUs; $pinned; $(uptime | sed 's/.*load/load/'))"

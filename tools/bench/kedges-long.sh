#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Whether a kernel-edges capture costs more the longer it runs: `weft run 'from kernel:sockets
# ... graph'` stores every request of redis-benchmark (-c 1 -t set -P 1, as kedges.sh: redis-server
# in network namespace S, the benchmark in C, a veth pair between) for N requests, and every
# 10 s this prints the requests done (redis-server's total_commands_processed), their rate,
# weft's CPU (user + system, /proc/PID/stat) per request of those 10 s, weft's resident memory
# and the store's size on disk (with its WAL).  A tracer that runs for hours must not pay more a
# request as its store grows; kedges.sh's runs are seconds long and do not show it.  At the
# end weft's own summary is checked: at least N traces seen and nothing lost.
#
# Usage: tools/bench/kedges-long.sh [N]   (default 3000000 requests, ~2.5 min at 20,000 a
#                                           second; root; ip, redis-server, redis-benchmark,
#                                           redis-cli)
#   BENCH_KEDGES_LONG_WEFT: another weft binary to run instead (a build before a change)
#   BENCH_KEDGES_LONG_OPTS: more `weft run` options, one word each (e.g. "--graph-max-size
#     200MiB": what keeping the store bounded as it is written costs, and whether it stays so)
#   Build: cmake --build build -j2 --target weft
set -euo pipefail
. "$(dirname "$0")/lib.sh"
N=${1:-3000000}
WEFT=${BENCH_KEDGES_LONG_WEFT:-$WEFT}
log=$BENCH_OUT/kedges-long
mkdir -p "$log"

if [ "$(id -u)" != 0 ]; then
	echo "bench: needs root (BPF, network namespaces)" >&2
	exit 1
fi
bench_built weft
for f in ip redis-server redis-benchmark redis-cli; do
	command -v "$f" >/dev/null || { echo "bench: $f not found" >&2; exit 1; }
done

ns_s=weft-bkl-$$-s
ns_c=weft-bkl-$$-c
veth=bkl$(($$ % 10000000))
addr=10.233.$(($$ % 250)).1
redis_pid=
weft_pid=
bench_pid=
cleanup() {
	[ -n "$bench_pid" ] && kill "$bench_pid" 2>/dev/null
	[ -n "$weft_pid" ] && stop_pid "$weft_pid"
	[ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
	ip netns del "$ns_s" 2>/dev/null || true
	ip netns del "$ns_c" 2>/dev/null || true
}
trap cleanup EXIT
bench_two_hosts "$ns_s" "$ns_c" "$veth" "$addr" "10.233.$(($$ % 250)).2"

ip netns exec "$ns_s" redis-server --port 6379 --bind "$addr" --save '' --appendonly no \
	--protected-mode no >"$log/redis.log" 2>&1 &
redis_pid=$!
bench_wait_redis "$ns_c" "$addr"

store=$log/store.db
rm -f "$store" "$store-wal" "$store-shm"
query="from kernel:sockets where pid = $redis_pid or comm = 'redis-benchmark' graph"
# shellcheck disable=SC2086 # options, one word each
"$WEFT" run ${BENCH_KEDGES_LONG_OPTS:-} -S "$store" "$query" >"$log/weft.out" 2>"$log/weft.err" &
weft_pid=$!
wait_attached "$weft_pid" "$log/weft.err"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
ip netns exec "$ns_c" redis-benchmark -h "$addr" -p 6379 -c 1 -n "$N" -t set -P 1 --csv \
	>"$log/bench.csv" 2>"$log/bench.err" &
bench_pid=$!
hz=$(getconf CLK_TCK)
done_prev=0
cpu_prev=$(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$weft_pid/stat")
echo "kernel edges, a long capture: redis-benchmark -c 1 -n $N -t set -P 1; weft $WEFT ${BENCH_KEDGES_LONG_OPTS:-}"
echo "query: $query"
while kill -0 "$bench_pid" 2>/dev/null; do
	sleep 10
	done_now=$(ip netns exec "$ns_c" redis-cli -h "$addr" info stats |
		sed -n 's/^total_commands_processed:\([0-9]*\).*/\1/p')
	cpu_now=$(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$weft_pid/stat")
	rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$weft_pid/status")
	mb=$(du -cm "$store"* | awk 'END { print $1 }')
	awk -v t="$(date +%T)" -v n="$done_now" -v dn=$((done_now - done_prev)) \
		-v dc=$((cpu_now - cpu_prev)) -v hz="$hz" -v rss="$rss" -v mb="$mb" 'BEGIN {
		printf "%s requests %d, %d a second, weft %.1f us of CPU a request, %d MB resident, store %d MB\n",
			t, n, dn / 10, dn ? dc * 1e6 / hz / dn : 0, rss / 1024, mb }' | tee -a "$log/series.txt"
	done_prev=$done_now
	cpu_prev=$cpu_now
done
wait "$bench_pid" || { cat "$log/bench.err" >&2; exit 1; }
bench_pid=
stop_pid "$weft_pid"
weft_pid=
seen=$(sed -n 's/.*; \([0-9]*\) traces seen.*/\1/p' "$log/weft.out")
if [ "${seen:-0}" -lt "$N" ] || ! grep -q '^dropped: 0 records lost' "$log/weft.out"; then
	echo "bench: ${seen:-no} traces seen, fewer than $N, or records lost" >&2
	cat "$log/weft.out" >&2
	exit 1
fi
grep -E '^(stored|dropped|retention):' "$log/weft.out"
echo "load average before $load0, after $(cut -d' ' -f1-3 /proc/loadavg) ($(nproc) CPUs)"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What kernel edges cost an unmodified program: the throughput of redis-benchmark against
# redis-server with `weft run 'from kernel:sockets ... graph'` attached (on) and without
# (off), in interleaved rounds (off then on, then on then off, ...) so that a shared
# machine's drift spreads over both.  redis-server runs in network namespace S and
# redis-benchmark (-c 1 -n N -t set -P 1: one connection, one request at a time, the case
# where every request pays for its four socket calls) in namespace C, joined by a veth pair,
# as in tests/runtime/test_run_kedges.c.  Each "on" run's store is checked: exactly N + 1
# traces whose client task is redis-benchmark (N SETs and the settings it fetches first).
# Prints one line per run, then the medians and the drop, with the machine's load average.
#
# Usage: tools/bench/kedges.sh [ROUNDS]   (default 5; root; ip, redis-server, redis-benchmark,
#                                          jq)
#   BENCH_KEDGES_N: requests per run (default 20000)
#   BENCH_KEDGES_SPAN=1: also nest processCommand spans (a uprobe per request besides)
#   Build: cmake --build build -j2 --target weft
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-5}
N=${BENCH_KEDGES_N:-20000}
log=$BENCH_OUT/kedges
mkdir -p "$log"

if [ "$(id -u)" != 0 ]; then
	echo "bench: needs root (BPF, network namespaces)" >&2
	exit 1
fi
bench_built weft
for f in ip redis-server redis-benchmark redis-cli jq; do
	command -v "$f" >/dev/null || { echo "bench: $f not found" >&2; exit 1; }
done

ns_s=weft-bke-$$-s
ns_c=weft-bke-$$-c
veth=bke$(($$ % 10000000))
addr=10.232.$(($$ % 250)).1
redis_pid=
cleanup() {
	[ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
	ip netns del "$ns_s" 2>/dev/null || true
	ip netns del "$ns_c" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$ns_s"
ip netns add "$ns_c"
ip link add "${veth}a" type veth peer name "${veth}b"
ip link set "${veth}a" netns "$ns_s"
ip link set "${veth}b" netns "$ns_c"
ip -n "$ns_s" addr add "$addr/24" dev "${veth}a"
ip -n "$ns_c" addr add "10.232.$(($$ % 250)).2/24" dev "${veth}b"
for ns in "$ns_s" "$ns_c"; do
	ip -n "$ns" link set lo up
done
ip -n "$ns_s" link set "${veth}a" up
ip -n "$ns_c" link set "${veth}b" up

ip netns exec "$ns_s" redis-server --port 6379 --bind "$addr" --save '' --appendonly no \
	--protected-mode no >"$log/redis.log" 2>&1 &
redis_pid=$!
for _ in $(seq 600); do
	ip netns exec "$ns_c" redis-cli -h "$addr" ping >/dev/null 2>&1 && break
	sleep 0.1
done

query="from kernel:sockets"
[ "${BENCH_KEDGES_SPAN:-0}" = 1 ] && query="$query, span(uprobe:$(command -v redis-server):processCommand)"
query="$query where pid = $redis_pid or comm = 'redis-benchmark' graph"

# bench_run NAME: one redis-benchmark run; prints its requests per second
bench_run() {
	ip netns exec "$ns_c" redis-benchmark -h "$addr" -p 6379 -c 1 -n "$N" -t set -P 1 --csv \
		>"$log/$1.csv" 2>"$log/$1.err"
	awk -F'"' '$2 == "SET" { print $4 }' "$log/$1.csv"
}

# run_on NAME: bench_run with weft attached; checks the store
run_on() {
	local store=$log/$1.db wpid rps n
	rm -f "$store"
	"$WEFT" run -S "$store" "$query" >"$log/$1.weft.out" 2>"$log/$1.weft.err" &
	wpid=$!
	for _ in $(seq 1200); do
		grep -q attached "$log/$1.weft.err" && break
		kill -0 "$wpid" 2>/dev/null || { cat "$log/$1.weft.err" >&2; exit 1; }
		sleep 0.05
	done
	rps=$(bench_run "$1")
	kill -INT "$wpid"
	wait "$wpid"
	n=$("$WEFT" graph -S "$store" list --service redis-benchmark --limit 100000 --format json |
		jq length)
	if [ "$n" != $((N + 1)) ]; then
		echo "bench: $1: $n traces of redis-benchmark, not $((N + 1))" >&2
		exit 1
	fi
	echo "$rps"
}

: >"$log/off.txt"
: >"$log/on.txt"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then
		off=$(bench_run "off-$r"); on=$(run_on "on-$r")
	else
		on=$(run_on "on-$r"); off=$(bench_run "off-$r")
	fi
	echo "$off" >>"$log/off.txt"
	echo "$on" >>"$log/on.txt"
	printf 'round %d: off %s rps, on %s rps\n' "$r" "$off" "$on"
done
load1=$(cut -d' ' -f1-3 /proc/loadavg)
read -r moff _ _ < <(stats 1 <"$log/off.txt")
read -r mon _ _ < <(stats 1 <"$log/on.txt")
drop=$(awk -v a="$moff" -v b="$mon" 'BEGIN { printf "%.1f", (a - b) * 100 / a }')
{
	echo "kernel edges: redis-benchmark -c 1 -n $N -t set -P 1 over a veth pair, $ROUNDS rounds"
	echo "query: $query"
	echo "median off $moff rps, on $mon rps: drop $drop%"
	echo "load average before $load0, after $load1 ($(nproc) CPUs)"
} | tee "$log/result.txt"

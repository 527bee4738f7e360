#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# weft's main job, from a fresh Debian 12 machine: installs what is missing, builds, starts
# a real workload (a Redis server on a private loopback port, two clients each sending a
# command every 2 ms), and traces it live: the latency of Redis's own processCommand()
# per second, then the busiest system-call makers on the host.
#
# The workload is paced, not redis-benchmark flat out: a uprobe hit traps into the kernel (about
# 7 us a hit in a paravirtualised guest), and at redis-benchmark's ~40,000 commands a second the
# two probes of a span cost Redis more than half a CPU; weft's CPU budget (5 % of a CPU by
# default, docs/runtime.md) then stops the query, as it should, and this demo would end there.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/deps.sh
weft_deps_install
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)" --target weft >/dev/null
WEFT=build/tools/weft

port=${WEFT_DEMO_PORT:-16399}
dir=$(mktemp -d)
redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
	--daemonize no >"$dir/redis.log" 2>&1 &
redis=$!
cleanup() {
	# shellcheck disable=SC2086 # two pids
	kill "$redis" ${bench:-} 2>/dev/null || true
	wait 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$port" -r 1000000 -i 0.002 incr weft:demo >/dev/null 2>&1 &
bench="$!"
redis-cli -p "$port" -r 1000000 -i 0.002 lpush weft:list x >/dev/null 2>&1 &
bench="$bench $!"

q1="from span(uprobe:/usr/bin/redis-server:processCommand)
select count() as commands, avg(duration) as avg_ns, p50(duration), p99(duration)
every 1s for 4s"
echo "\$ weft run -p $redis '$q1'"
$WEFT run -p "$redis" "$q1"

q2="from tracepoint:raw_syscalls:sys_enter
group by comm select count() as calls
order by calls desc limit 10 every 1s for 3s"
echo
echo "\$ weft run '$q2'"
$WEFT run "$q2"

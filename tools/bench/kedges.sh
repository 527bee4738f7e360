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
# Prints one line per run, then the medians and the drop, with the machine's load average, and
# for the weft configurations the median cost of weft's program per call as its own cost meter
# timed it (one run in 32: the map weft_cost, read with bpftool before detaching) and weft's
# own CPU (user + system) a request from its "attached" line to the interrupt
# (/proc/PID/stat; before 2026-11-28 its start-up was counted too).
#
# Usage: tools/bench/kedges.sh [ROUNDS]   (default 5; root; ip, redis-server, redis-benchmark,
#                                          jq)
#   BENCH_KEDGES_N: requests per run (default 20000)
#   BENCH_KEDGES_WARM: requests run before each measured run, unmeasured, in every
#     configuration alike (default 0): a tracer that has just started pays for its memory
#     coming in (weft's agent side grows to its working set, ~170 MB at 20,000 requests a
#     second, in its first seconds: page faults), which one that runs for hours has paid long
#     before; with it the run measures the steady state.  Stored and checked like the rest.
#   BENCH_KEDGES_SPAN=1: also nest processCommand spans (a uprobe per request besides)
#   BENCH_KEDGES_PEERS=1: three more configurations in every round, in rotating order, to
#     tell what the drop is made of: "empty" (bpftrace with empty programs on the same two
#     tracepoints: what any BPF tracer pays for them to fire), "bt" (bpftrace doing the
#     kernel side of the same job: the same filter, the 4-tuple read through BTF, counted
#     in a map instead of recorded), "nobudget" (weft with --cpu-budget 0: no per-program
#     run-time statistics) and "floor" (weft's same programs, on raw tracepoints, with a
#     filter no call passes, `where pid = 1`: what attaching them costs before they do any
#     work; bpftrace 0.17 has no raw tracepoints to compare with)
#   BENCH_KEDGES_PIN=1: the workload on CPU 0 (redis-server and redis-benchmark, and so the
#     probes, which run in their threads) and the tracer's own process on CPU 1 (weft, whose
#     agent side pairs and stores the records, or bpftrace), for every configuration alike:
#     what kernel edges cost the traced program where the tracer has a core of its own, as
#     on a server with more than the development VM's two; without it all share both CPUs
#   BENCH_KEDGES_RINGS="S ...": one more configuration per ring-buffer size S (a
#     `weft run --ringbuf-size` value), "ring-S": the default query with that ring
#   BENCH_KEDGES_CLASSIC=1: one more configuration, "classic": weft with the classic
#     tracepoints (WEFT_RAW_TP=0), as it attached them before raw tracepoints (and as it
#     does on a kernel whose tracepoints' arguments it does not know)
#   BENCH_KEDGES_SCHED=1: two more configurations, "idle" and "batch": weft run under
#     `chrt --idle 0` (SCHED_IDLE) and `chrt --batch 0` (SCHED_BATCH), what the tracer's
#     scheduling class does to the traced program
#   BENCH_KEDGES_ALT=PATH: one more configuration, "alt": the same query run by the weft
#     binary PATH (another build: an A/B of two builds in one interleaved run)
#   BENCH_KEDGES_SAMPLE=P: one more configuration, "sampled": the same query with
#     `graph sample P%` (the aggregates of every request, whole graphs of P% and the
#     outliers); its check: every request seen (N + 1 traces), nothing lost in the kernel
#   BENCH_KEDGES_AWAKE=1: a busy loop at SCHED_IDLE on every CPU for the whole run, in every
#     configuration alike, so that no CPU is ever idle: on a VM whose idle CPUs wake slowly,
#     a one-request-at-a-time workload is paced by those wakeups, and a tracer that keeps a
#     CPU busy makes it faster (seen 2026-11-28: weft on, 27,700 SET/s; off, 19,800); with
#     the CPUs awake, on and off differ by the tracer's cost only
#   BENCH_KEDGES_PERF=1 (with BENCH_KEDGES_PIN=1): `perf record` of CPU 0, the workload's (or
#     of the CPUs BENCH_KEDGES_PERF_CPUS lists: 1 is the tracer's), during each measured run
#     (cpu-clock at 4,999 Hz, BENCH_KEDGES_PERF_OPTS added, e.g. "--call-graph dwarf";
#     $BENCH_OUT/kedges/NAME.perf): where the traced CPU's time goes with the tracer on and
#     off, by symbol (`perf report -i FILE --sort sym`), which the throughput's run-to-run
#     noise cannot tell; the sampling costs both alike.  Each weft run's programs are also
#     written as they were compiled for this CPU (tools/bench/jitdump, into NAME.jit/, their
#     addresses in NAME.jit/list), so that tools/bench/jit-annotate.py can place the samples
#     on their instructions: `jit-annotate.py NAME.perf IMAGE ADDRESS` with a line of the list
#   Build: cmake --build build -j2 --target weft
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-5}
N=${BENCH_KEDGES_N:-20000}
WARM=${BENCH_KEDGES_WARM:-0}
# the traces a weft run stores: each redis-benchmark run's requests and the settings it
# fetches first
TRACES=$((N + 1))
[ "$WARM" -gt 0 ] && TRACES=$((TRACES + WARM + 1))
log=$BENCH_OUT/kedges
mkdir -p "$log"

if [ "$(id -u)" != 0 ]; then
	echo "bench: needs root (BPF, network namespaces)" >&2
	exit 1
fi
bench_built weft
[ "${BENCH_KEDGES_PERF:-0}" = 1 ] && bench_built jitdump
for f in ip redis-server redis-benchmark redis-cli jq $([ "${BENCH_KEDGES_PERF:-0}" = 1 ] && echo perf); do
	command -v "$f" >/dev/null || { echo "bench: $f not found" >&2; exit 1; }
done

ns_s=weft-bke-$$-s
ns_c=weft-bke-$$-c
veth=bke$(($$ % 10000000))
addr=10.232.$(($$ % 250)).1
redis_pid=
spin_pids=
cleanup() {
	[ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
	# shellcheck disable=SC2086 # a list of pids
	[ -n "$spin_pids" ] && kill $spin_pids 2>/dev/null && { wait $spin_pids 2>/dev/null || true; }
	ip netns del "$ns_s" 2>/dev/null || true
	ip netns del "$ns_c" 2>/dev/null || true
}
trap cleanup EXIT
bench_two_hosts "$ns_s" "$ns_c" "$veth" "$addr" "10.232.$(($$ % 250)).2"

if [ "${BENCH_KEDGES_AWAKE:-0}" = 1 ]; then
	for ((c = 0; c < $(nproc); c++)); do
		taskset -c "$c" chrt --idle 0 sh -c 'while :; do :; done' &
		spin_pids="$spin_pids $!"
	done
fi
wl_cpu=
tracer_cpu=
if [ "${BENCH_KEDGES_PIN:-0}" = 1 ]; then
	wl_cpu="taskset -c 0"
	tracer_cpu="taskset -c 1"
fi
# shellcheck disable=SC2086 # wl_cpu: a command prefix or nothing
$wl_cpu ip netns exec "$ns_s" redis-server --port 6379 --bind "$addr" --save '' --appendonly no \
	--protected-mode no >"$log/redis.log" 2>&1 &
redis_pid=$!
bench_wait_redis "$ns_c" "$addr"

query="from kernel:sockets"
[ "${BENCH_KEDGES_SPAN:-0}" = 1 ] && query="$query, span(uprobe:$(command -v redis-server):processCommand)"
query="$query where pid = $redis_pid or comm = 'redis-benchmark' graph"
bt_empty='tracepoint:sock:sock_send_length,tracepoint:sock:sock_recv_length { }'
bt_same="tracepoint:sock:sock_send_length,tracepoint:sock:sock_recv_length
/ (pid == $redis_pid || comm == \"redis-benchmark\") && args->family == 2 &&
  args->protocol == 6 && args->ret > 0 /
{
	\$sk = (struct sock *)args->sk;
	@calls[tid, \$sk->__sk_common.skc_rcv_saddr, \$sk->__sk_common.skc_daddr,
	       \$sk->__sk_common.skc_num, \$sk->__sk_common.skc_dport] = count();
	@bytes = sum(args->ret);
}"

# bench_run NAME: one redis-benchmark run (after WARM requests unmeasured); prints its
# requests per second
bench_run() {
	if [ "$WARM" -gt 0 ]; then
		# shellcheck disable=SC2086 # wl_cpu: a command prefix or nothing
		$wl_cpu ip netns exec "$ns_c" redis-benchmark -h "$addr" -p 6379 -c 1 -n "$WARM" \
			-t set -P 1 --csv >/dev/null 2>&1
	fi
	local perf_pid=
	if [ "${BENCH_KEDGES_PERF:-0}" = 1 ]; then
		# shellcheck disable=SC2086 # options, one word each
		perf record -q -C "${BENCH_KEDGES_PERF_CPUS:-0}" -F 4999 ${BENCH_KEDGES_PERF_OPTS:-} \
			-o "$log/$1.perf" -- sleep 3600 >/dev/null 2>&1 &
		perf_pid=$!
		sleep 0.5
	fi
	# shellcheck disable=SC2086 # wl_cpu: a command prefix or nothing
	$wl_cpu ip netns exec "$ns_c" redis-benchmark -h "$addr" -p 6379 -c 1 -n "$N" -t set -P 1 --csv \
		>"$log/$1.csv" 2>"$log/$1.err"
	if [ -n "$perf_pid" ]; then
		kill -INT "$perf_pid" 2>/dev/null
		wait "$perf_pid" 2>/dev/null || true
	fi
	awk -F'"' '$2 == "SET" { print $4 }' "$log/$1.csv"
}

# meter_ns: the time per timed run of kernel:sockets' programs (one, or one a tracepoint when
# they are raw tracepoints) in the newest weft_cost map
meter_ns() {
	local id
	id=$(bpftool map show -j | jq '[.[] | select(.name == "weft_cost")] | max_by(.id) | .id')
	bpftool map dump id "$id" -j | python3 -c '
import json, struct, sys
s = n = 0
for v in [v for e in json.load(sys.stdin) for v in e["values"]]:
    val = v["value"]
    if isinstance(val, dict):
        s += val["sampled"]; n += val["ns"]
    else:
        _, sa, ns = struct.unpack_from("<QQQ", bytes(int(x, 16) for x in val))
        s += sa; n += ns
print(n // s if s else 0)'
}

# run_on NAME [QUERY]: bench_run with weft attached; checks the store (or, for a sampled
# query, that every request was seen and nothing lost)
run_on() {
	local store=$log/$1.db wpid rps n cpu0 q=${2:-$query}
	rm -f "$store"
	# shellcheck disable=SC2086 # options, one word each
	# shellcheck disable=SC2086 # tracer_cpu: a command prefix or nothing
	$tracer_cpu "$WEFT" run ${WEFT_RUN_OPTS:-} -S "$store" "$q" >"$log/$1.weft.out" \
		2>"$log/$1.weft.err" &
	wpid=$!
	wait_attached "$wpid" "$log/$1.weft.err"
	if [ "${BENCH_KEDGES_PERF:-0}" = 1 ]; then
		# the query's programs (wp0, wp1, ...) as JIT-compiled, for jit-annotate.py
		mkdir -p "$log/$1.jit"
		for ((i = 0; i < 64; i++)); do
			"$WEFT_BUILD/tools/bench/jitdump" "wp$i" "$log/$1.jit" >>"$log/$1.jit/list" || break
		done
	fi
	# weft's CPU to start (compile cache, load, attach; user + system, /proc/PID/stat fields
	# 14 and 15, in ticks): not the capture's, left out of its CPU a request below
	cpu0=$(awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$wpid/stat")
	rps=$(bench_run "$1")
	# the program's cost per call, from weft's own cost meter (the map weft_cost: per CPU
	# runs, runs timed, their time; the newest map of that name is this run's)
	meter_ns >"$log/$1.ns" 2>/dev/null || echo 0 >"$log/$1.ns"
	# weft's own CPU since it attached, in µs a request (the final drain after the
	# interrupt is not in it)
	awk -v hz="$(getconf CLK_TCK)" -v n="$((N + WARM))" -v c0="$cpu0" '{ sub(/^.*\) /, ""); print int(($12 + $13 - c0) * 1e6 / hz / n) }' \
		"/proc/$wpid/stat" >"$log/$1.cpu" 2>/dev/null || echo 0 >"$log/$1.cpu"
	kill -INT "$wpid"
	wait "$wpid"
	if [ -n "${2:-}" ]; then
		local want=$TRACES
		case $1 in floor-*) want=0 ;; esac
		n=$(sed -n 's/.*; \([0-9]*\) traces seen.*/\1/p' "$log/$1.weft.out")
		if [ "$n" != "$want" ] || ! grep -q '^dropped: 0 records lost' "$log/$1.weft.out"; then
			echo "bench: $1: $n traces seen, not $want, or records lost" >&2
			exit 1
		fi
		echo "$rps"
		return
	fi
	if [ "$TRACES" -gt 99000 ]; then
		# more traces than one `weft graph list` shows (--limit is at most 100,000): the
		# run's own count, at least this run's requests and nothing lost
		n=$(sed -n 's/.*; \([0-9]*\) traces seen.*/\1/p' "$log/$1.weft.out")
		if [ "${n:-0}" -lt "$TRACES" ] || ! grep -q '^dropped: 0 records lost' "$log/$1.weft.out"; then
			echo "bench: $1: $n traces seen, fewer than $TRACES, or records lost" >&2
			exit 1
		fi
		echo "$rps"
		return
	fi
	# this run's requests only: another redis-benchmark on the machine (a test) matches the
	# query's comm too, but its requests go to another address (a trace is named after its
	# earliest task: the client's request, or the server's "serve :6379")
	n=$("$WEFT" graph -S "$store" list --service redis-benchmark --limit $((TRACES + 100)) --format json |
		jq --arg n "request $addr:6379" \
			'[.[] | select(.name == $n or (.name | startswith("request ") | not))] | length')
	if [ "$n" != "$TRACES" ]; then
		echo "bench: $1: $n traces of redis-benchmark, not $TRACES" >&2
		exit 1
	fi
	echo "$rps"
}

# run_bt NAME PROGRAM: bench_run with bpftrace running PROGRAM on the two tracepoints
run_bt() {
	local bpid rps
	# shellcheck disable=SC2086 # tracer_cpu: a command prefix or nothing
	$tracer_cpu "$BPFTRACE" -e "$2" >"$log/$1.bt.out" 2>"$log/$1.bt.err" &
	bpid=$!
	wait_probes "$bpid" 2 60 || { cat "$log/$1.bt.err" >&2; exit 1; }
	rps=$(bench_run "$1")
	stop_pid "$bpid"
	echo "$rps"
}

# one NAME ROUND: one run of a configuration; prints its requests per second
one() {
	case $1 in
	off) bench_run "off-$2" ;;
	on) run_on "on-$2" ;;
	nobudget) WEFT_RUN_OPTS="--cpu-budget 0" run_on "nobudget-$2" ;;
	floor) run_on "floor-$2" "from kernel:sockets where pid = 1 graph" ;;
	classic) WEFT_RAW_TP=0 run_on "classic-$2" ;;
	sampled) run_on "sampled-$2" "${query% graph} graph sample ${BENCH_KEDGES_SAMPLE}%" ;;
	empty) run_bt "empty-$2" "$bt_empty" ;;
	bt) run_bt "bt-$2" "$bt_same" ;;
	idle) tracer_cpu="chrt --idle 0 $tracer_cpu" run_on "idle-$2" ;;
	batch) tracer_cpu="chrt --batch 0 $tracer_cpu" run_on "batch-$2" ;;
	alt) WEFT=$BENCH_KEDGES_ALT run_on "alt-$2" ;;
	ring-*) WEFT_RUN_OPTS="--ringbuf-size ${1#ring-}" run_on "$1-$2" ;;
	esac
}

configs="off on"
[ "${BENCH_KEDGES_PEERS:-0}" = 1 ] && configs="off on empty bt nobudget floor"
[ "${BENCH_KEDGES_CLASSIC:-0}" = 1 ] && configs="$configs classic"
[ "${BENCH_KEDGES_SCHED:-0}" = 1 ] && configs="$configs idle batch"
[ -n "${BENCH_KEDGES_ALT:-}" ] && configs="$configs alt"
[ -n "${BENCH_KEDGES_SAMPLE:-}" ] && configs="$configs sampled"
for r in ${BENCH_KEDGES_RINGS:-}; do
	configs="$configs ring-$r"
done
for c in $configs; do : >"$log/$c.txt"; done
: >"$log/off.txt"
: >"$log/on.txt"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
# shellcheck disable=SC2086 # configs is a list of words
bench_rounds "$ROUNDS" rps $configs
load1=$(cut -d' ' -f1-3 /proc/loadavg)
read -r moff _ _ < <(stats 1 <"$log/off.txt")
read -r mon _ _ < <(stats 1 <"$log/on.txt")
drop=$(awk -v a="$moff" -v b="$mon" 'BEGIN { printf "%.1f", (a - b) * 100 / a }')
{
	echo "kernel edges: redis-benchmark -c 1 -n $N -t set -P 1 over a veth pair, $ROUNDS rounds$([ "$WARM" -gt 0 ] && echo ", each after $WARM requests unmeasured")"
	echo "query: $query"
	echo "median off $moff rps, on $mon rps: drop $drop%"
	for c in $configs; do
		case $c in off | on) continue ;; esac
		read -r m _ _ < <(stats 1 <"$log/$c.txt")
		echo "median $c $m rps: drop $(awk -v a="$moff" -v b="$m" \
			'BEGIN { printf "%.1f", (a - b) * 100 / a }')%"
	done
	# the same, paired: each round's drop against that round's off, then their median (a
	# machine that changes speed between rounds moves both runs of a round alike)
	for c in $configs; do
		[ "$c" = off ] && continue
		read -r m _ _ < <(paste "$log/off.txt" "$log/$c.txt" |
			awk '{ printf "%.2f\n", ($1 - $2) * 100 / $1 }' | stats 1)
		echo "median of the rounds' drops, $c: $m%"
	done
	for c in $configs; do
		ns=$(cat "$log/$c"-*.ns 2>/dev/null | grep -v '^0$' | stats 1 | cut -d' ' -f1) || ns=
		if [ -n "$ns" ] && [ "$ns" != - ]; then
			echo "median $c program cost: $ns ns a call"
		fi
		cpu=$(cat "$log/$c"-*.cpu 2>/dev/null | grep -v '^0$' | stats 1 | cut -d' ' -f1) || cpu=
		if [ -n "$cpu" ] && [ "$cpu" != - ]; then
			echo "median $c weft CPU: $cpu us a request"
		fi
	done
	if [ -n "$wl_cpu" ]; then
		echo "placement: workload on CPU 0, tracer on CPU 1"
	fi
	if [ -n "$spin_pids" ]; then
		echo "CPUs kept awake: a busy loop at SCHED_IDLE on each"
	fi
	echo "load average before $load0, after $load1 ($(nproc) CPUs)"
} | tee "$log/result.txt"

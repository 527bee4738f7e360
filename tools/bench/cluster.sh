#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The cluster benchmarks of docs/performance.md ("Cluster"): the aggregator's merge throughput
# (in one process, and end to end through a real `weft aggregator`), window-close latency with
# many simulated agents, and a real `weft agent`'s CPU and memory, idle and shipping.
#
# The aggregator runs pinned to CPU 0 (all its threads: "one core"), the simulated agents
# (tools/bench/cluster_sim) and the client on CPU 1.  Keys, allow-list, store and logs go to
# $BENCH_OUT.  Each run first waits until the machine is quiet (other people's benchmarks
# would take our cores), and every report ends with the CPU the rest of the machine used
# during the measurement, so a disturbed run shows.
#
# Usage: tools/bench/cluster.sh COMMAND [ARGS]
#   merge [cluster_merge options]       the merge path in one process (cluster_merge.c)
#   flood [AGENTS [INFLIGHT [SECS]]]    end-to-end throughput: each agent keeps INFLIGHT
#                                       partials unacknowledged (default 64 4 20)
#   window [AGENTS [SECS [GROUPS [SPREAD_MS]]]]
#                                       window-close latency: AGENTS agents each send GROUPS
#                                       groups per 1 s window for SECS s (default 1000 30 1000),
#                                       all at the window's end, or spread over SPREAD_MS
#   agent [SECS [GROUPS]]               a real `weft agent` (root): CPU and RSS connected and
#                                       idle for SECS s, then shipping a query over a workload
#                                       of GROUPS (comm, pid) groups (default 60 1000)
#   graphs [BATCHES [TASKS [INFLIGHT [-E]]]]
#                                       graph elements per second through one aggregator core:
#                                       one sender streams BATCHES GraphBatches of TASKS tasks
#                                       (10 per trace) into the aggregator's SQLite graph store,
#                                       INFLIGHT unacknowledged at most (default 200 10000 8);
#                                       -E adds an event per task and an edge per child (root:
#                                       the query the batches belong to is compiled)
# Environment:
#   WEFT_BUILD      build tree, -DCMAKE_BUILD_TYPE=Release -DWEFT_BENCH=ON (default <repo>/build)
#   BENCH_OUT       logs (default: a fresh /tmp/weft-cbench-*)
#   CBENCH_STORE    the aggregator's store (default $BENCH_OUT/aggregator.sqlite; :memory:
#                   to leave SQLite's disk writes out)
#   CBENCH_PERF=1   also `perf record` the aggregator during the measurement
#   CBENCH_PORT     the aggregator's port on 127.0.0.1 (default 7471)
#   CBENCH_AGG_CPUS the CPUs the aggregator may run on (taskset list, default 0: one core)
#   CBENCH_AGG_ARGS more options for the aggregator (e.g. --graph-forward URL)
#   CBENCH_QUIET    seconds to wait at most for a quiet machine (default 1800)
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/../.." && pwd)
WEFT_BUILD=${WEFT_BUILD:-$REPO/build}
WEFT=$WEFT_BUILD/tools/weft
SIM=$WEFT_BUILD/tools/bench/cluster_sim
MERGE=$WEFT_BUILD/tools/bench/cluster_merge
BENCH_OUT=${BENCH_OUT:-$(mktemp -d /tmp/weft-cbench-XXXXXX)}
PORT=${CBENCH_PORT:-7471}
EP=tcp://127.0.0.1:$PORT
STORE=${CBENCH_STORE:-$BENCH_OUT/aggregator.sqlite}
mkdir -p "$BENCH_OUT"
AGG_PID=

for f in "$WEFT" "$SIM" "$MERGE"; do
	if [ ! -x "$f" ]; then
		echo "cluster.sh: $f missing; build with:" >&2
		echo "  cmake -S $REPO -B $WEFT_BUILD -DCMAKE_BUILD_TYPE=Release -DWEFT_BENCH=ON" >&2
		echo "  cmake --build $WEFT_BUILD -j2 --target weft cluster_sim cluster_merge" >&2
		exit 1
	fi
done

# busy clock ticks of the machine (all CPUs)
machine_ticks() {
	awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat
}

# quiet_wait: until the machine's load is under 10% of one core for 3 samples of 2 s in a row
quiet_wait() {
	local left=${CBENCH_QUIET:-1800} a b hz n=0
	hz=$(getconf CLK_TCK)
	while :; do
		a=$(machine_ticks)
		sleep 2
		b=$(machine_ticks)
		if [ $(((b - a) * 100 / hz / 2)) -lt 10 ]; then
			n=$((n + 1))
			[ "$n" -ge 3 ] && return 0
		else
			n=0
		fi
		left=$((left - 2))
		if [ "$left" -le 0 ]; then
			echo "cluster.sh: warning: the machine is busy; measuring anyway" >&2
			return 0
		fi
	done
}

machine_info() {
	echo "date:    $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "kernel:  $(uname -r)"
	echo "cpu:     $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) cores"
	echo "weft:    $("$WEFT" --version 2>/dev/null | head -1)"
}

# keys N: the aggregator's, a client's and N agents' key pairs, and the allow-list
keys() {
	local n=$1 d=$BENCH_OUT/keys
	if [ -f "$d/n" ] && [ "$(cat "$d/n")" -ge "$n" ]; then
		return 0
	fi
	rm -rf "$d"
	mkdir -p "$d"
	"$WEFT" keygen -o "$d" --role aggregator aggregator >/dev/null 2>&1
	"$WEFT" keygen -o "$d" --role client me >>"$d/allow" 2>/dev/null
	"$WEFT" keygen -o "$d" --role agent agent >>"$d/allow" 2>/dev/null
	"$SIM" keys "$n" "$d/sim" >>"$d/allow"
	echo "$n" >"$d/n"
}

start_aggregator() {
	local log=$BENCH_OUT/aggregator.log i
	rm -f "$STORE" "$STORE-wal" "$STORE-shm"
	: >"$log"
	taskset -c "${CBENCH_AGG_CPUS:-0}" "$WEFT" aggregator --listen "$EP" \
		--key "$BENCH_OUT/keys/aggregator.key" \
		--allow "$BENCH_OUT/keys/allow" --store "$STORE" -v ${CBENCH_AGG_ARGS:-} 2>"$log" &
	AGG_PID=$!
	for i in $(seq 100); do
		grep -q listening "$log" && return 0
		sleep 0.05
	done
	echo "cluster.sh: the aggregator did not start:" >&2
	cat "$log" >&2
	exit 1
}

stop_aggregator() {
	if [ -n "$AGG_PID" ]; then
		kill -TERM "$AGG_PID" 2>/dev/null || true
		wait "$AGG_PID" 2>/dev/null || true
		AGG_PID=
	fi
}
# everything this script started, stopped on any exit
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${PIDS[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	stop_aggregator
}
trap cleanup EXIT

# perf_aggregator SECS NAME: a CPU profile of the aggregator, in the background
perf_aggregator() {
	[ "${CBENCH_PERF:-0}" = 1 ] || return 0
	# DWARF unwinding: the daemon is built without frame pointers
	(sleep 8 && perf record --call-graph dwarf,16384 -F 299 -p "$AGG_PID" \
		-o "$BENCH_OUT/$2.perf.data" -- sleep "$1" >/dev/null 2>&1) &
	PERF_PID=$!
}

# perf_report NAME: where the aggregator's time went, by phase (the library functions the
# daemon calls for each step, with everything they call) and by thread, then the top symbols
perf_report() {
	local data=$BENCH_OUT/$1.perf.data f
	[ "${CBENCH_PERF:-0}" = 1 ] || return 0
	wait "$PERF_PID" # not a bare wait: that would wait for the report's tee too
	echo "perf: $data"
	echo "  by thread:"
	perf report -i "$data" --no-children -g none --sort comm --stdio 2>/dev/null |
		grep '%' | sed 's/^/   /'
	echo "  by phase (% of all samples, callees included):"
	perf report -i "$data" --children -g none --sort symbol --stdio 2>/dev/null \
		>"$data.children"
	for f in router_batch zmq_msg_recv wire_decode wire_free aggd_qwin_add \
		aggd_on_graph_batch wire_graph_unpack graph_store_put \
		agent_table_add_groups aggd_store_sender_set aggd_qwin_checkpoint ckpt_window txn_commit \
		aggd_qwin_tick emit_window agent_table_to_groups wire_encode result_send \
		aggd_store_window_emitted aggd_store_windows_forget; do
		awk -v f="$f" '{ for (i = 3; i <= NF; i++) if ($i == f) {
			printf "   %-28s %s\n", f, $1; exit } }' "$data.children"
	done
	echo "  top symbols (self):"
	perf report -i "$data" --no-children -g none --sort dso,symbol --stdio 2>/dev/null |
		grep '%' | head -20 | sed 's/^/   /'
}

cmd_merge() {
	quiet_wait
	machine_info
	echo "command: $MERGE -c 0 $*"
	"$MERGE" -c 0 "$@"
}

cmd_flood() {
	local n=${1:-64} infl=${2:-4} secs=${3:-20}
	keys "$n"
	quiet_wait
	machine_info
	start_aggregator
	echo "store: $STORE"
	echo "command: taskset -c 1 $SIM run -m flood -n $n -i $infl -W 5 -d $secs ..."
	perf_aggregator "$secs" flood
	taskset -c 1 "$SIM" run -e "$EP" -S "$BENCH_OUT/keys/aggregator.pub" \
		-K "$BENCH_OUT/keys/sim.keys" -C "$BENCH_OUT/keys/me.key" -P "$AGG_PID" \
		-m flood -n "$n" -i "$infl" -W 5 -d "$secs" 2>&1
	stop_aggregator
	perf_report flood
}

cmd_window() {
	local n=${1:-1000} secs=${2:-30} groups=${3:-1000} spread=${4:-0}
	local q="from syscall:read group by comm, pid select count(), sum(args.count) every 1s for ${secs}s"
	keys "$n"
	quiet_wait
	machine_info
	start_aggregator
	echo "store: $STORE"
	echo "aggregator CPUs: ${CBENCH_AGG_CPUS:-0}"
	echo "query: $q"
	echo "command: taskset -c 1 $SIM run -m window -n $n -g $groups -s $spread ..."
	perf_aggregator "$secs" window
	taskset -c 1 "$SIM" run -e "$EP" -S "$BENCH_OUT/keys/aggregator.pub" \
		-K "$BENCH_OUT/keys/sim.keys" -C "$BENCH_OUT/keys/me.key" -P "$AGG_PID" \
		-m window -n "$n" -g "$groups" -s "$spread" -q "$q" -o "$BENCH_OUT/window-$n.txt" 2>&1 |
		grep -v '^ *[0-9]' || true
	echo "per window: $BENCH_OUT/window-$n.txt"
	echo "aggregator: $(grep -c 'expired' "$BENCH_OUT/aggregator.log" || true) expiries," \
		"$(grep -c 'revised' "$BENCH_OUT/aggregator.log" || true) revisions"
	stop_aggregator
	perf_report window
}

# sched_ns PID: time on CPU of all its threads (ns, /proc/PID/task/*/schedstat)
sched_ns() {
	cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%d\n", s }'
}

# agent_sample PID SECS: "cpu% (utime+stime) cpu% (schedstat) VmRSS_kB VmHWM_kB" over SECS s
agent_sample() {
	local pid=$1 secs=$2 t0 t1 n0 n1 hz
	hz=$(getconf CLK_TCK)
	t0=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
	n0=$(sched_ns "$pid")
	sleep "$secs"
	t1=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
	n1=$(sched_ns "$pid")
	awk -v t0="$t0" -v t1="$t1" -v n0="$n0" -v n1="$n1" -v s="$secs" -v hz="$hz" \
		'/^VmRSS/ { r = $2 } /^VmHWM/ { h = $2 }
		END { printf "%.3f %.4f %d %d\n", (t1 - t0) / hz / s * 100, (n1 - n0) / (s * 1e9) * 100,
			r, h }' "/proc/$pid/status"
}

# map_kib PID: kernel memory of the BPF maps PID holds (memlock of /proc/PID/fdinfo), KiB;
# not in its RSS
map_kib() {
	cat /proc/"$1"/fdinfo/* 2>/dev/null |
		awk '/^map_type/ { m = 1 } /^memlock/ && m { s += $2; m = 0 } END { printf "%d\n", s / 1024 }'
}

cmd_agent() {
	local secs=${1:-60} groups=${2:-1000} apid lpid spid idle ship hz
	local q='from syscall:read group by comm, pid select count(), sum(args.count) every 1s'
	if [ "$(id -u)" != 0 ]; then
		echo "cluster.sh agent: needs root (the agent loads BPF)" >&2
		exit 1
	fi
	[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing
	keys 1
	quiet_wait
	machine_info
	start_aggregator
	taskset -c 1 "$WEFT" agent --connect "$EP" --server-key "$BENCH_OUT/keys/aggregator.pub" \
		--key "$BENCH_OUT/keys/agent.key" --host benchagent 2>"$BENCH_OUT/agent.log" &
	apid=$!
	PIDS+=("$apid")
	sleep 3 # joined, settled
	echo "command: weft agent --connect $EP ... (pid $apid, CPU 1)"
	idle=$(agent_sample "$apid" "$secs")
	echo "columns: cpu% of a core (utime+stime), cpu% (schedstat), VmRSS kB, VmHWM kB"
	echo "idle, connected, no query, ${secs}s: $idle"
	taskset -c 1 "$SIM" load "$groups" &
	lpid=$!
	PIDS+=("$lpid")
	WEFT_AGGREGATOR=$EP WEFT_SERVER_KEY=$BENCH_OUT/keys/aggregator.pub \
		WEFT_KEY=$BENCH_OUT/keys/me.key taskset -c 0 "$WEFT" submit --format json "$q" \
		>"$BENCH_OUT/agent-results.json" 2>"$BENCH_OUT/agent-submit.log" &
	spid=$!
	PIDS+=("$spid")
	sleep 5 # the query started, windows flowing
	ship=$(agent_sample "$apid" "$secs")
	echo "shipping '$q' over $groups cbench-load processes, ${secs}s: $ship"
	echo "BPF maps of the agent (kernel memory, not in RSS): $(map_kib "$apid") KiB"
	echo "groups per window (last 5 windows, all hosts):" \
		"$(tail -5 "$BENCH_OUT/agent-results.json" | grep -o '"groups":[0-9]*' | tr '\n' ' ')"
	echo "logs: $BENCH_OUT"
}

cmd_graphs() {
	local n=${1:-200} tasks=${2:-10000} infl=${3:-8} extra=${4:-} gs=$BENCH_OUT/graph.sqlite qid
	local cg=$WEFT_BUILD/tools/bench/cluster_graph
	if [ ! -x "$cg" ]; then
		echo "cluster.sh: $cg missing: cmake --build $WEFT_BUILD --target cluster_graph" >&2
		exit 1
	fi
	keys 1
	quiet_wait
	machine_info
	rm -f "$gs" "$gs-wal" "$gs-shm"
	export WEFT_GRAPH_STORE=$gs
	start_aggregator
	unset WEFT_GRAPH_STORE
	"$WEFT" submit --to "$EP" --server-key "$BENCH_OUT/keys/aggregator.pub" \
		--key "$BENCH_OUT/keys/me.key" --no-follow \
		'from interval:1s select count() as n for 1h' >"$BENCH_OUT/submit.log" 2>&1 || true
	qid=$(sed -n 's/^weft: query \([0-9]*\) runs on.*/\1/p' "$BENCH_OUT/submit.log")
	if [ -z "$qid" ]; then
		echo "cluster.sh: the query was not submitted:" >&2
		cat "$BENCH_OUT/submit.log" >&2
		exit 1
	fi
	echo "graph store: $gs"
	echo "command: taskset -c 1 $cg -n $n -b $tasks -i $infl $extra ..."
	perf_aggregator 10 graphs
	taskset -c 1 "$cg" -e "$EP" -S "$BENCH_OUT/keys/aggregator.pub" \
		-K "$BENCH_OUT/keys/agent.key" -H agent -q "$qid" -n "$n" -b "$tasks" -i "$infl" \
		$extra -P "$AGG_PID"
	stop_aggregator
	perf_report graphs
}

case "${1:-}" in
merge | flood | window | agent | graphs)
	c=$1
	shift
	echo "cluster.sh: logs and report in $BENCH_OUT" >&2
	exec > >(tee -a "$BENCH_OUT/report.txt") 2>&1
	"cmd_$c" "$@"
	;;
*)
	sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'
	exit 2
	;;
esac

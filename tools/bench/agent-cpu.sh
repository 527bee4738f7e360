#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The tracer's own CPU at ~1M events/s with in-kernel aggregation.  tools/bench/evloop (one
# thread, pinned to CPU 1) makes 500,000 getppid() calls a second; the query probes both
# raw_syscalls:sys_enter and sys_exit, so that is ~1,000,000 events a second (plus the rest
# of the machine's syscalls): one traced syscall costs ~1.4 us here, so a single thread cannot
# make 1M calls/s, and a second generator thread would take the CPU the tracer runs on.
# The tracer (pinned to CPU 0) counts by comm and prints every second; its CPU time is read
# from /proc/PID/task/*/schedstat (ns; utime+stime from /proc/PID/stat as a cross-check)
# over 10 s, after 2 s of warm-up.  The event rate is taken from the tracer's own windows
# (bpftrace's query prints a "window" line first, to delimit them).
#
# Usage: tools/bench/agent-cpu.sh [RUNS]   (default 3; root; see lib.sh)
#   BENCH_RATE: getppid calls per second (default 500000)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_need
RUNS=${1:-3}
RATE=${BENCH_RATE:-500000}
SECS=10
Q_WEFT='from tracepoint:raw_syscalls:sys_enter, tracepoint:raw_syscalls:sys_exit
group by comm select count() every 1s'
Q_BT='tracepoint:raw_syscalls:sys_enter, tracepoint:raw_syscalls:sys_exit { @[comm] = count(); }
interval:s:1 { time("window %H:%M:%S\n"); print(@); clear(@); }'
log=$BENCH_OUT/agent-cpu
mkdir -p "$log"
hz=$(getconf CLK_TCK)

# cpu_ns PID: run time of all its threads (ns)
cpu_ns() {
	cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%d\n", s }'
}
# ticks PID: utime + stime (clock ticks)
ticks() {
	sed 's/.*) //' /proc/"$1"/stat | awk '{ print $12 + $13 }'
}

# one NAME CMD...: one run; appends "cpu_pct tick_pct events_per_s" to $log/NAME
one() {
	local name=$1 out pid gen c0 c1 t0 t1 rate
	shift
	out=$log/$name.$i.out
	wait_quiet 60
	taskset -c 0 "$@" >"$out" 2>&1 &
	pid=$!
	wait_probes "$pid" 2 60 || { echo "bench: $name did not attach" >&2; stop_pid "$pid"; return 0; }
	taskset -c 1 "$EVLOOP" rate "$RATE" $((SECS + 3)) 1 >"$log/$name.$i.gen" &
	gen=$!
	sleep 2
	c0=$(cpu_ns "$pid") t0=$(ticks "$pid")
	sleep "$SECS"
	c1=$(cpu_ns "$pid") t1=$(ticks "$pid")
	wait "$gen"
	stop_pid "$pid"
	# events per window: the sum of the counts of each full window (not the first two, not
	# the last, partial one), median
	if [ "${name%%_*}" = weft ]; then
		rate=$(awk '/^window/ { if (w) print s; s = 0; w++ } /^comm/ { next }
			w && $NF ~ /^[0-9]+$/ { s += $NF }' "$out" | tail -n +3 | stats 0 | cut -d' ' -f1)
	else
		rate=$(awk '/^window/ { if (w) print s; s = 0; w++ } w && /^@/ { s += $NF }' "$out" |
			tail -n +3 | stats 0 | cut -d' ' -f1)
	fi
	awk -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v s="$SECS" -v hz="$hz" -v r="$rate" \
		'BEGIN { printf "%.3f %.3f %s\n", (c1 - c0) / (s * 1e9) * 100, (t1 - t0) / hz / s * 100, r }' \
		>>"$log/$name"
}

echo "agent-cpu: $RUNS runs of ${SECS}s at $RATE getppid/s (x2 probes); logs in $log"
for i in $(seq 1 "$RUNS"); do
	# --cpu-budget 0: the budget would stop a query this busy, and its statistics add
	# two clock reads to every program run, which bpftrace does not pay
	one weft "$WEFT" run --cpu-budget 0 "$Q_WEFT"
	one bpftrace "$BPFTRACE" -e "$Q_BT"
	printf '.'
done
echo
printf '%-10s %16s %16s %14s\n' tool "cpu % of a core" "(from ticks)" "events/s"
for t in weft bpftrace; do
	read -r c _ _ <<<"$(cut -d' ' -f1 "$log/$t" | stats 3)"
	read -r k _ _ <<<"$(cut -d' ' -f2 "$log/$t" | stats 3)"
	read -r e _ _ <<<"$(cut -d' ' -f3 "$log/$t" | stats 0)"
	printf '%-10s %16s %16s %14s\n' "$t" "$c" "$k" "$e"
	result "cpu.$t.pct" "$c"
	result "cpu.$t.events_per_s" "$e"
done

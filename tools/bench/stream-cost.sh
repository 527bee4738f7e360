#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What a stream row costs the traced call, where the tracer's reader is idle before every
# event: `evloop paced N REPS GAP` (getppid() after a sleep of GAP us each, interleaved in
# batches of 1000 with getpid() after the same sleep, the control nobody traces) on CPU 0, the
# tracer on CPU 1, writing one row per getppid() to a file:
#   off   nothing attached
#   weft  weft run --format json "from syscall:getppid where comm = 'evloop' select time, tid"
#   alt   the same query run by the weft binary BENCH_STREAM_ALT (another build: an A/B), if set
#   bt    bpftrace printf("%llu %d\n", nsecs, tid) on tracepoint:syscalls:sys_enter_getppid
#         with the same filter (a perf buffer)
# in rotating order each round.  The figure is evloop's median of (getppid - getpid) thread CPU
# ns a call, and the added cost of a configuration is the median of the rounds' differences
# from that round's off run; the same for the wall time of an iteration (sleep included).  Each
# traced run's output is checked: exactly as many rows as evloop made getppid() calls.
#
# Usage: tools/bench/stream-cost.sh [ROUNDS]   (default 5; root; bpftrace, jq)
#   BENCH_STREAM_N: calls a round of evloop (default 5000; 3 rounds a run)
#   BENCH_STREAM_GAP: the sleep before each call, us (default 20)
#   BENCH_STREAM_ALT: a second weft binary, measured as "alt"
#   Build: cmake -S . -B build -DWEFT_BENCH=ON && cmake --build build -j2 --target weft evloop
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-5}
N=${BENCH_STREAM_N:-5000}
GAP=${BENCH_STREAM_GAP:-20}
ALT=${BENCH_STREAM_ALT:-}
log=$BENCH_OUT/stream-cost
mkdir -p "$log"
[ "$(id -u)" = 0 ] || { echo "bench: needs root (BPF)" >&2; exit 1; }
bench_built weft evloop
command -v "$BPFTRACE" >/dev/null || { echo "bench: $BPFTRACE not found" >&2; exit 1; }
[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing
[ -z "$ALT" ] || [ -x "$ALT" ] || { echo "bench: BENCH_STREAM_ALT=$ALT is not a program" >&2; exit 1; }

query="from syscall:getppid where comm = 'evloop' select time, tid"
bt_prog='tracepoint:syscalls:sys_enter_getppid /comm == "evloop"/ { printf("%llu %d\n", nsecs, tid); }'

# run_evloop OUT: the workload; leaves evloop's last line in OUT
run_evloop() {
	taskset -c 0 "$EVLOOP" paced "$N" 3 "$GAP" | tail -1 >"$1"
}

# check NAME ROWS EVLOOP_LINE: the rows a tracer wrote against the calls evloop made
check() {
	local calls
	calls=$(awk '{ for (i = 1; i < NF; i++) if ($i == "calls") print $(i + 1) }' "$3")
	[ "$2" = "$calls" ] || { echo "bench: $1: $2 rows for $calls calls" >&2; exit 1; }
}

run_weft() { # NAME BINARY
	local wpid rows
	taskset -c 1 "$2" run --format json -- "$query" >"$log/$1.out" 2>"$log/$1.err" &
	wpid=$!
	wait_attached "$wpid" "$log/$1.err"
	run_evloop "$log/$1.ev"
	stop_pid "$wpid"
	rows=$(grep -c '"type":"row"' "$log/$1.out" || true)
	check "$1" "$rows" "$log/$1.ev"
}

run_bt() { # NAME
	local bpid rows
	taskset -c 1 "$BPFTRACE" -e "$bt_prog" >"$log/$1.out" 2>"$log/$1.err" &
	bpid=$!
	wait_probes "$bpid" 1 60 || { cat "$log/$1.err" >&2; exit 1; }
	run_evloop "$log/$1.ev"
	stop_pid "$bpid"
	rows=$(grep -cE '^[0-9]+ [0-9]+$' "$log/$1.out" || true)
	check "$1" "$rows" "$log/$1.ev"
}

one() { # CONFIG ROUND: prints "DIFF WALL" of the run
	local name=$1-$2
	case $1 in
	off) run_evloop "$log/$name.ev" ;;
	weft) run_weft "$name" "$WEFT" ;;
	alt) run_weft "$name" "$ALT" ;;
	bt) run_bt "$name" ;;
	esac
	awk '{ for (i = 1; i < NF; i++) { if ($i == "diff") d = $(i + 1); if ($i == "wall") w = $(i + 1) }
	       print d, w }' "$log/$name.ev"
}

configs="off weft bt"
[ -n "$ALT" ] && configs="off weft alt bt"
for c in $configs; do : >"$log/$c.txt"; done
wait_quiet 30
load0=$(cut -d' ' -f1-3 /proc/loadavg)
# shellcheck disable=SC2086 # configs is a list of words
bench_rounds "$ROUNDS" "(diff ns a call, wall ns an iteration)" $configs
load1=$(cut -d' ' -f1-3 /proc/loadavg)
{
	echo "stream rows: evloop paced $N 3 $GAP (getppid after a ${GAP} us sleep), $ROUNDS rounds"
	echo "query: $query"
	read -r moff _ _ < <(awk '{ print $1 }' "$log/off.txt" | stats 0)
	read -r woff _ _ < <(awk '{ print $2 }' "$log/off.txt" | stats 0)
	echo "median off: $moff ns a call over the control, $woff ns an iteration"
	for c in $configs; do
		[ "$c" = off ] && continue
		read -r m _ _ < <(paste "$log/off.txt" "$log/$c.txt" | awk '{ print $3 - $1 }' | stats 0)
		read -r w _ _ < <(paste "$log/off.txt" "$log/$c.txt" | awk '{ print $4 - $2 }' | stats 0)
		echo "$c: added $m ns a call (CPU of the traced thread), $w ns an iteration (wall)"
		result "stream_row_added_ns_$c" "$m"
	done
	echo "load average before $load0, after $load1 ($(nproc) CPUs)"
} | tee "$log/result.txt"

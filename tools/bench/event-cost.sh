#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Added cost per event: tools/bench/evloop (pinned to CPU 1) makes N getppid() calls
# (tracepoint syscalls:sys_enter_getppid) or N calls of evloop_target() (a uprobe), 3 times,
# and reports the median CPU ns per call of its thread; the tracer (pinned to CPU 0) counts:
#   handwritten tools/bench/handwritten.bpf.c: a plain PERCPU_ARRAY / PERCPU_HASH count
#   bpftrace    @ = count()            / @[tid] = count()
#   weft        select count()         / group by tid select count()
# Each traced run is paired with an untraced run made just before it, and the added cost is
# the median over rounds of (traced - untraced): a shared machine's load drifts over minutes,
# and pairing cancels some of it.  Within each run evloop also interleaves a control call that
# is not probed (getpid(), evloop_control()), 1000 calls at a time, so
#   added-ab = (probed - control)_traced - (probed - control)_untraced
# is immune to drift; for getppid it leaves out the dispatch every system call pays once any
# syscall tracepoint is on (that part is the same for every tracer, and in "added").
# Rounds interleave the configurations.  Each tracer's final
# count is checked against the number of calls (exactly for the uprobe; at least, for
# getppid, which other processes may call too).
# BENCH_BPF_STATS=K (K > 0) adds K rounds with kernel.bpf_stats_enabled=1 that report the
# kernel's own run time per run of each tracer's program (run_time_ns / run_cnt, median over
# the K rounds): the program's cost alone, without the trap or the tracepoint dispatch
# around it (and with the stats' own clock reads in it, the same for every tracer).  One
# tracer at a time: attached together, one program of the set pays ~70 ns more than it does
# alone and the others less (docs/performance.md), so a together run misleads.
#
# Usage: tools/bench/event-cost.sh [ROUNDS]   (default 5; 0 with BENCH_BPF_STATS=K runs only
#        the K stats rounds; root; see lib.sh)
#   BENCH_TP_N / BENCH_UP_N: calls per evloop round (default 1000000 / 50000).
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_need
ROUNDS=${1:-5}
TP_N=${BENCH_TP_N:-1000000}
UP_N=${BENCH_UP_N:-50000}
log=$BENCH_OUT/event-cost
mkdir -p "$log"

# tracer_cmd TRACER PROBE AGG: the command line, as an array in CMD
tracer_cmd() {
	local sel key
	case $1 in
	weft)
		sel='select count()'
		[ "$3" = tid ] && sel='group by tid select count()'
		# --cpu-budget 0: evloop runs flat out, over any budget, and the budget's
		# statistics would add their clock reads to every event (BENCH_BPF_STATS measures
		# with them on, for every tracer alike)
		if [ "$2" = tp ]; then
			CMD=("$WEFT" run --cpu-budget 0 "from syscall:getppid $sel")
		else
			CMD=("$WEFT" run --cpu-budget 0 "from uprobe:$EVLOOP:evloop_target $sel")
		fi
		;;
	bpftrace)
		key=''
		[ "$3" = tid ] && key='[tid]'
		if [ "$2" = tp ]; then
			CMD=("$BPFTRACE" -e "tracepoint:syscalls:sys_enter_getppid { @$key = count(); }")
		else
			CMD=("$BPFTRACE" -e "uprobe:$EVLOOP:evloop_target { @$key = count(); }")
		fi
		;;
	handwritten)
		if [ "$2" = tp ]; then
			CMD=("$HANDWRITTEN" tp "$3")
		else
			CMD=("$HANDWRITTEN" uprobe "$3" "$EVLOOP" evloop_target)
		fi
		;;
	esac
}

# count_of TRACER FILE: the total count the tracer printed at exit
count_of() {
	case $1 in
	weft) awk '/^window/ { s = 0; w = 1 } w && $NF ~ /^[0-9]+$/ { s += $NF } END { print s + 0 }' "$2" ;;
	bpftrace) awk '/^@/ { s += $NF } END { print s + 0 }' "$2" ;;
	handwritten) awk '/^handwritten: [0-9]+ events/ { print $2 }' "$2" ;;
	esac
}

# prog_ns PID: kernel run time per run of PID's attached programs (bpf_stats on)
prog_ns() {
	local id rt=0 rc=0 j
	for id in $(bpftool perf | awk -v p="$1" '$1 == "pid" && $2 == p { print $6 }'); do
		j=$(bpftool prog show id "$id" -j)
		rt=$((rt + $(jq '.run_time_ns // 0' <<<"$j")))
		rc=$((rc + $(jq '.run_cnt // 0' <<<"$j")))
	done
	awk -v t="$rt" -v c="$rc" 'BEGIN { if (c) printf "%.1f\n", t / c; else print "-" }'
}

# evloop_run MODE N: "cpu wall calls control diff" of one evloop run (3 rounds, medians)
evloop_run() {
	taskset -c 1 "$EVLOOP" "$1" "$2" 3 | tail -1 | awk '{ print $6, $11, $13, $15, $17 }'
}

# measure NAME PROBE AGG TRACER: an untraced and a traced evloop run; appends to $log/NAME.tsv
# "cpu base_cpu wall count calls prog_ns diff base_diff"
measure() {
	local name=$1 probe=$2 agg=$3 tracer=$4 n mode out tpid pns=-
	local cpu wall calls diff base bdiff cnt
	if [ "$probe" = tp ]; then
		n=$TP_N mode=getppid
	else
		n=$UP_N mode=uprobe
	fi
	out=$log/$name.r$r.out
	wait_quiet 60
	base=- bdiff=-
	[ "${STATS:-0}" = 1 ] || read -r base _ _ _ bdiff <<<"$(evloop_run "$mode" "$n")"
	tracer_cmd "$tracer" "$probe" "$agg"
	taskset -c 0 "${CMD[@]}" >"$out" 2>&1 &
	tpid=$!
	if ! wait_probes "$tpid" 1 60; then
		echo "bench: $tracer did not attach (see $out)" >&2
		stop_pid "$tpid"
		return 0
	fi
	sleep 0.2
	read -r cpu wall calls _ diff <<<"$(evloop_run "$mode" "$n")"
	[ "${STATS:-0}" = 1 ] && pns=$(prog_ns "$tpid")
	stop_pid "$tpid"
	cnt=$(count_of "$tracer" "$out")
	if { [ "$probe" = uprobe ] && [ "$cnt" != "$calls" ]; } ||
		{ [ "$probe" = tp ] && [ "$cnt" -lt "$calls" ]; }; then
		echo "bench: $name: $tracer counted $cnt of $calls calls (see $out)" >&2
	fi
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$cpu" "$base" "$wall" "$cnt" "$calls" "$pns" \
		"$diff" "$bdiff" >>"$log/$name.tsv"
}

echo "event-cost: $ROUNDS rounds; tp N=$TP_N, uprobe N=$UP_N; logs in $log"
configs=
for probe in tp uprobe; do
	for agg in count tid; do
		for tracer in handwritten bpftrace weft; do
			configs="$configs $probe.$agg.$tracer"
		done
	done
done
for r in $(seq 1 "$ROUNDS"); do
	for c in $configs; do
		IFS=. read -r probe agg tracer <<<"$c"
		measure "$c" "$probe" "$agg" "$tracer"
	done
	printf '.'
done
echo
if [ "${BENCH_BPF_STATS:-0}" -gt 0 ]; then
	prev=$(cat /proc/sys/kernel/bpf_stats_enabled)
	echo 1 >/proc/sys/kernel/bpf_stats_enabled
	STATS=1
	for r in $(seq 1 "$BENCH_BPF_STATS"); do
		for c in $configs; do
			IFS=. read -r probe agg tracer <<<"$c"
			measure "stats.$c" "$probe" "$agg" "$tracer"
		done
		printf '.'
	done
	echo
	STATS=0
	echo "$prev" >/proc/sys/kernel/bpf_stats_enabled
fi

printf '%-7s %-6s %-12s %9s %9s %9s %9s %9s %9s\n' probe agg tracer "ns/call" "untraced" \
	"added" "added-ab" "wall" "prog ns"
for c in $configs; do
	IFS=. read -r probe agg tracer <<<"$c"
	f=$log/$c.tsv
	[ -f "$f" ] || f=/dev/null # ROUNDS=0: only the BPF stats rounds ran
	cpu=$(cut -f1 "$f" | stats | cut -d' ' -f1)
	base=$(cut -f2 "$f" | stats | cut -d' ' -f1)
	added=$(awk -F'\t' '{ print $1 - $2 }' "$f" | stats | cut -d' ' -f1)
	ab=$(awk -F'\t' '{ print $7 - $8 }' "$f" | stats | cut -d' ' -f1)
	wall=$(cut -f3 "$f" | stats | cut -d' ' -f1)
	pns=-
	[ -f "$log/stats.$c.tsv" ] && pns=$(cut -f6 "$log/stats.$c.tsv" | grep -v '^-$' | stats | cut -d' ' -f1)
	printf '%-7s %-6s %-12s %9s %9s %9s %9s %9s %9s\n' "$probe" "$agg" "$tracer" "$cpu" "$base" \
		"$added" "$ab" "$wall" "$pns"
	result "event.$probe.$agg.$tracer.cpu_ns" "$cpu"
	result "event.$probe.$agg.$tracer.base_ns" "$base"
	result "event.$probe.$agg.$tracer.added_ns" "$added"
	result "event.$probe.$agg.$tracer.added_ab_ns" "$ab"
	result "event.$probe.$agg.$tracer.prog_ns" "$pns"
done

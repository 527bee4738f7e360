#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Added cost per event: tools/bench/evloop (pinned to CPU 1) makes N getppid() calls
# (tracepoint syscalls:sys_enter_getppid) or N calls of evloop_target() (a uprobe), and
# reports the CPU ns per call of its thread; the tracer (pinned to CPU 0) counts them:
#   none        no tracing
#   handwritten tools/bench/handwritten.bpf.c: a plain PERCPU_ARRAY / PERCPU_HASH count
#   bpftrace    @ = count()            / @[tid] = count()
#   weft        select count()         / group by tid select count()
# The added cost is (traced - none).  Every configuration runs once per round, rounds
# interleave them, and the figure is the median over rounds of each run's median round.
# Each tracer's final count is checked against the number of calls (exactly for the uprobe;
# at least, for getppid, which other processes may call too).
# With BENCH_BPF_STATS=1 a last round enables kernel.bpf_stats_enabled and reports the
# kernel's own run time per event of each tracer's program (run_time_ns / run_cnt): the
# program's cost alone, without the trap and the tracepoint dispatch around it.
#
# Usage: tools/bench/event-cost.sh [ROUNDS]   (default 5; root; see lib.sh)
#   BENCH_TP_N / BENCH_UP_N: calls per evloop round (default 1000000 / 50000), 3 rounds each.
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
		if [ "$2" = tp ]; then
			CMD=("$WEFT" run "from syscall:getppid $sel")
		else
			CMD=("$WEFT" run "from uprobe:$EVLOOP:evloop_target $sel")
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

# measure NAME PROBE AGG TRACER: one evloop run under TRACER; appends to $log/NAME.tsv
measure() {
	local name=$1 probe=$2 agg=$3 tracer=$4 n reps=3 mode out tpid ev calls cnt pns=-
	[ "$probe" = tp ] && n=$TP_N mode=getppid || n=$UP_N mode=uprobe
	out=$log/$name.r$r.out
	wait_quiet 60
	if [ "$tracer" != none ]; then
		tracer_cmd "$tracer" "$probe" "$agg"
		taskset -c 0 "${CMD[@]}" >"$out" 2>&1 &
		tpid=$!
		if ! wait_probes "$tpid" 1 60; then
			echo "bench: $tracer did not attach (see $out)" >&2
			stop_pid "$tpid"
			return 0
		fi
		sleep 0.2
	fi
	ev=$(taskset -c 1 "$EVLOOP" "$mode" "$n" "$reps" | tail -1)
	if [ "$tracer" != none ]; then
		[ "${STATS:-0}" = 1 ] && pns=$(prog_ns "$tpid")
		stop_pid "$tpid"
		cnt=$(count_of "$tracer" "$out")
	else
		cnt=-
	fi
	calls=$(awk '{ print $NF }' <<<"$ev")
	if [ "$cnt" != - ]; then
		if { [ "$probe" = uprobe ] && [ "$cnt" != "$calls" ]; } ||
			{ [ "$probe" = tp ] && [ "$cnt" -lt "$calls" ]; }; then
			echo "bench: $name: $tracer counted $cnt of $calls calls (see $out)" >&2
		fi
	fi
	# cpu ns/call (median of 3), wall ns/call, count, calls, prog ns/run
	printf '%s\t%s\t%s\t%s\t%s\n' "$(awk '{ print $6 }' <<<"$ev")" "$(awk '{ print $11 }' <<<"$ev")" \
		"$cnt" "$calls" "$pns" >>"$log/$name.tsv"
}

echo "event-cost: $ROUNDS rounds; tp N=$TP_N, uprobe N=$UP_N; logs in $log"
configs="tp.none.none"
for probe in tp uprobe; do
	[ "$probe" = uprobe ] && configs="$configs uprobe.none.none"
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
if [ "${BENCH_BPF_STATS:-0}" = 1 ]; then
	prev=$(cat /proc/sys/kernel/bpf_stats_enabled)
	echo 1 >/proc/sys/kernel/bpf_stats_enabled
	STATS=1
	r=stats
	for c in $configs; do
		IFS=. read -r probe agg tracer <<<"$c"
		[ "$tracer" = none ] || measure "stats.$c" "$probe" "$agg" "$tracer"
	done
	STATS=0
	echo "$prev" >/proc/sys/kernel/bpf_stats_enabled
fi

printf '%-8s %-6s %-12s %14s %14s %12s %10s\n' probe agg tracer "cpu ns/call" "added ns" \
	"wall ns/call" "prog ns"
for c in $configs; do
	IFS=. read -r probe agg tracer <<<"$c"
	cpu=$(cut -f1 "$log/$c.tsv" | stats | cut -d' ' -f1)
	wall=$(cut -f2 "$log/$c.tsv" | stats | cut -d' ' -f1)
	base=$(cut -f1 "$log/$probe.none.none.tsv" | stats | cut -d' ' -f1)
	added=$(awk -v a="$cpu" -v b="$base" 'BEGIN { printf "%.1f", a - b }')
	pns=-
	[ -f "$log/stats.$c.tsv" ] && pns=$(cut -f5 "$log/stats.$c.tsv" | head -1)
	printf '%-8s %-6s %-12s %14s %14s %12s %10s\n' "$probe" "$agg" "$tracer" "$cpu" "$added" \
		"$wall" "$pns"
	result "event.$probe.$agg.$tracer.cpu_ns" "$cpu"
	result "event.$probe.$agg.$tracer.added_ns" "$added"
	result "event.$probe.$agg.$tracer.prog_ns" "$pns"
done

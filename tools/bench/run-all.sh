#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs every weft-vs-bpftrace benchmark of tools/bench on this machine, in one go, and prints
# a summary table against the targets of docs/performance.md:
#   startup.sh     time to attached / first event / first result, cold and warm cache
#   event-cost.sh  added ns per event, tracepoint and uprobe, vs bpftrace and a hand-written
#                  libbpf program
#   rss.sh         peak RSS
#   agent-cpu.sh   the tracer's CPU at ~1M events/s
# Raw logs stay in $BENCH_OUT (printed at the end).
#
# Usage: tools/bench/run-all.sh [quick]   (root; build with -DWEFT_BENCH=ON first, and set
#        WEFT_BUILD to that build tree; `quick` runs fewer repetitions, for a smoke test)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_need
if [ "${1:-}" = quick ]; then
	n_start=3 n_event=1 n_rss=2 n_cpu=1
	export BENCH_TP_N=200000 BENCH_UP_N=5000 BENCH_BPF_STATS=1
else
	n_start=10 n_event=5 n_rss=5 n_cpu=3
fi
export BENCH_BPF_STATS=${BENCH_BPF_STATS:-3}
: >"$BENCH_OUT/results"

echo "== machine ($(date -u +%Y-%m-%dT%H:%MZ))"
machine_info | tee "$BENCH_OUT/machine"
echo
echo "== startup"
"$BENCH_DIR/startup.sh" "$n_start"
echo
echo "== event cost"
"$BENCH_DIR/event-cost.sh" "$n_event"
echo
echo "== peak RSS"
"$BENCH_DIR/rss.sh" "$n_rss"
echo
echo "== agent CPU"
"$BENCH_DIR/agent-cpu.sh" "$n_cpu"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

# r KEY [FIELD]: a figure from the results file
r() {
	awk -v k="$1" -v f="${2:-1}" '$1 == k { print $(f + 1); exit }' "$BENCH_OUT/results"
}
# row WHAT WEFT OTHER TARGET VERDICT
row() {
	printf '%-42s %12s %12s %-22s %s\n' "$@"
}
# ratio A B: A / B, 2 decimals
ratio() {
	awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 == 0) print "-"; else printf "%.2f\n", a / b }'
}
verdict() { # verdict EXPR: "met" if awk finds EXPR true, "n/a" if a figure is missing
	local rc=0
	awk "BEGIN { exit !($1) }" 2>/dev/null || rc=$?
	case $rc in
	0) echo met ;;
	1) echo MISSED ;;
	*) echo n/a ;;
	esac
}

echo "== summary (medians; ms, ns, kB, %)"
row measure weft other target verdict
for c in hit announce first; do
	wc=$(r startup.weft_cold.${c}_ms) ww=$(r startup.weft_warm.${c}_ms) bt=$(r startup.bpftrace.${c}_ms)
	if [ "$c" = first ]; then # the 1 s window is common to both: compare what precedes it
		row "to first result, cold (bpftrace)" "$wc" "$bt" "-" "x$(ratio "$bt" "$wc")"
		row "to first result, warm (bpftrace)" "$ww" "$bt" "-" "x$(ratio "$bt" "$ww")"
		continue
	fi
	row "startup $c, cold cache (bpftrace)" "$wc" "$bt" ">= 3x faster" \
		"x$(ratio "$bt" "$wc") $(verdict "$bt >= 3 * $wc")"
	row "startup $c, warm cache (bpftrace)" "$ww" "$bt" ">= 10x faster" \
		"x$(ratio "$bt" "$ww") $(verdict "$bt >= 10 * $ww")"
done
for p in tp uprobe; do
	for a in count tid; do
		w=$(r event.$p.$a.weft.added_ns) b=$(r event.$p.$a.bpftrace.added_ns)
		h=$(r event.$p.$a.handwritten.added_ns)
		row "added ns/event $p $a (bpftrace)" "$w" "$b" "<= bpftrace" "$(verdict "$w <= $b")"
		row "added ns/event $p $a (handwritten)" "$w" "$h" "<= 1.10x" \
			"x$(ratio "$w" "$h") $(verdict "$w <= 1.10 * $h")"
		w=$(r event.$p.$a.weft.prog_ns) b=$(r event.$p.$a.bpftrace.prog_ns)
		h=$(r event.$p.$a.handwritten.prog_ns)
		if [ "$w" != - ] && [ -n "$w" ]; then
			row "  BPF prog ns/run $p $a (bpftrace)" "$w" "$b" "<= bpftrace" \
				"$(verdict "$w <= $b")"
			row "  BPF prog ns/run $p $a (handwritten)" "$w" "$h" "<= 1.10x" \
				"x$(ratio "$w" "$h") $(verdict "$w <= 1.10 * $h")"
		fi
	done
done
w=$(r rss.weft_warm.kb) wc=$(r rss.weft_cold.kb) b=$(r rss.bpftrace.kb)
row "peak RSS kB, warm (bpftrace)" "$w" "$b" "< 1/3" "x$(ratio "$w" "$b") $(verdict "$w * 3 < $b")"
row "peak RSS kB, cold incl. clang (bpftrace)" "$wc" "$b" "< 1/3" \
	"x$(ratio "$wc" "$b") $(verdict "$wc * 3 < $b")"
w=$(r cpu.weft.pct) b=$(r cpu.bpftrace.pct)
row "tracer CPU % at $(r cpu.weft.events_per_s) ev/s (bpftrace)" "$w" "$b" "< 1%" \
	"$(verdict "$w < 1")"
echo
echo "raw logs and results: $BENCH_OUT"

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The execution-graph benchmarks of docs/performance.md ("Graphs"), end to end through the
# weft command line:
#   import   spans per second of `weft graph import` (parse + store + aggregates), one core,
#            for Zipkin v2 and OTLP JSON files written by graph-gen.py (SPANS spans each, in
#            traces of 5 tasks), into a fresh store; and the store's bytes per span
#   show     wall time of `weft graph show` of one 50-task trace with 10^3, 10^5 and 10^6
#            traces stored (5 tasks each, imported in files of 10^5 traces), median of RUNS
#
# Usage: tools/bench/graph.sh [SPANS] [RUNS] [MAXTRACES]   (defaults 500000, 10, 1000000)
#        WEFT_BUILD as in lib.sh; scratch files go to BENCH_OUT (a few GB for 10^6 traces).
set -euo pipefail
BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$BENCH_DIR/../.." && pwd)
WEFT=${WEFT_BUILD:-$REPO/build}/tools/weft
OUT=${BENCH_OUT:-$(mktemp -d /tmp/weft-graph-bench-XXXXXX)}
SPANS=${1:-500000}
RUNS=${2:-10}
MAXTRACES=${3:-1000000}
GEN="python3 $BENCH_DIR/graph-gen.py"
mkdir -p "$OUT"
[ -x "$WEFT" ] || {
	echo "graph bench: $WEFT missing (build weft first)" >&2
	exit 1
}

# secs CMD...: wall seconds of one run of CMD (its output discarded), pinned to CPU 0
secs() {
	local s e
	s=$(date +%s.%N)
	taskset -c 0 "$@" >/dev/null
	e=$(date +%s.%N)
	awk -v s="$s" -v e="$e" 'BEGIN { printf "%.3f\n", e - s }'
}

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

echo "== import ($SPANS spans a file, traces of 5 tasks; logs in $OUT)"
for fmt in zipkin otlp; do
	f=$OUT/import.$fmt.json
	$GEN "$fmt" $((SPANS / 5)) 5 "$f"
	for i in 1 2 3; do
		rm -f "$OUT/import.db"*
		secs "$WEFT" graph import --graph-store "$OUT/import.db" --format "$fmt" "$f"
	done | median >"$OUT/import.$fmt.secs"
	s=$(cat "$OUT/import.$fmt.secs")
	bytes=$(du -cb "$OUT/import.db"* | tail -1 | cut -f1)
	awk -v n="$SPANS" -v s="$s" -v b="$bytes" -v f="$fmt" -v sz="$(stat -c %s "$f")" \
		'BEGIN { printf "%-7s %8d spans  %6.2f s  %9.0f spans/s  file %5.0f B/span  store %5.0f B/span\n", f, n, s, n / s, sz / n, b / n }'
	rm -f "$f"
done

echo "== show (a 50-task trace; median of $RUNS runs)"
store=$OUT/show.db
rm -f "$store"*
$GEN zipkin 1 50 "$OUT/probe.json" 7
"$WEFT" graph import --graph-store "$store" "$OUT/probe.json" >/dev/null
probe=$("$WEFT" graph list --graph-store "$store" --format json | jq -r '.[0].trace // .traces[0].trace')
have=1
seed=100
for target in 1000 100000 1000000; do
	[ "$target" -le "$MAXTRACES" ] || break
	while [ "$have" -lt "$target" ]; do
		n=$((target - have))
		[ "$n" -le 100000 ] || n=100000
		$GEN zipkin "$n" 5 "$OUT/fill.json" "$seed"
		"$WEFT" graph import --graph-store "$store" "$OUT/fill.json" >/dev/null
		have=$((have + n))
		seed=$((seed + 1))
	done
	rm -f "$OUT/fill.json"
	"$WEFT" graph show --graph-store "$store" "$probe" >/dev/null # page cache
	ms=$(for i in $(seq 1 "$RUNS"); do secs "$WEFT" graph show --graph-store "$store" "$probe"; done |
		median)
	bytes=$(du -cb "$store"* | tail -1 | cut -f1)
	awk -v t="$have" -v ms="$ms" -v b="$bytes" \
		'BEGIN { printf "%8d traces stored  show %7.1f ms  store %6.1f MB\n", t, ms * 1000, b / 1e6 }'
done

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Attaching and detaching many uprobe sites: single perf-event links vs multi-uprobe links.
#  1. bench_uprobe_attach on a generated binary of N functions (default 1,000): attach and
#     detach times of a trivial program through weft's probes layer, per mode, median of 3.
#  2. End to end: `weft run 'from uprobe:BIN:bench_a* select count() for 1s'` (500 sites, the
#     most one query may have) wall time, with WEFT_UPROBE_MULTI=0 (single links) and without.
# Usage: tools/bench/uprobe-attach.sh [N]   (root; WEFT_BUILD: the build tree, default build/)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${WEFT_BUILD:-$REPO/build}
N=${1:-1000}
WEFT=$BUILD/tools/weft
BENCH=$BUILD/tools/bench/bench_uprobe_attach
for f in "$WEFT" "$BENCH"; do
	if [ ! -x "$f" ]; then
		echo "uprobe-attach: $f missing: cmake --build $BUILD" >&2
		exit 1
	fi
done
dir=$(mktemp -d /tmp/weft-uprobe-attach-XXXXXX)
trap 'rm -rf "$dir"' EXIT

# N functions, half named bench_aNNNN and half bench_bNNNN, each with a distinct body
{
	echo '#include <stdio.h>'
	for ((i = 0; i < N; i++)); do
		[ $((i % 2)) = 0 ] && p=a || p=b
		printf '__attribute__((noinline, used)) int bench_%s%04d(int x) { return x * 3 + %d; }\n' \
			"$p" "$i" "$i"
	done
	echo 'int main(void) { return 0; }'
} >"$dir/many.c"
cc -O1 -fno-inline -o "$dir/many" "$dir/many.c"

echo "== attach and detach, in process ($(uname -r))"
"$BENCH" "$dir/many" 'bench_a*,bench_b*' both 3

echo "== weft run, 'for 1s' over $((N / 2 < 500 ? N / 2 : 500)) sites (wall seconds)"
pat='bench_a*'
[ "$N" -gt 1000 ] && pat='bench_a0[0-4]*'
for mode in single multi; do
	for r in 1 2 3; do
		t0=$(date +%s.%N)
		if [ $mode = single ]; then
			WEFT_UPROBE_MULTI=0 "$WEFT" run "from uprobe:$dir/many:$pat select count() for 1s" \
				>/dev/null 2>"$dir/err"
		else
			"$WEFT" run "from uprobe:$dir/many:$pat select count() for 1s" >/dev/null 2>"$dir/err"
		fi
		t1=$(date +%s.%N)
		printf '%-7s round %d: %.2f s (%s)\n' $mode $r "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
			"$(grep -o 'attached [0-9]* probes' "$dir/err" || cat "$dir/err")"
	done
done

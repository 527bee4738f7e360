#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Peak resident memory of `weft run` and of bpftrace running the same query for 5 seconds,
# from /usr/bin/time -v ("Maximum resident set size": the process's peak, or that of a child
# it waited for if larger, so weft's cold figure covers the clang it runs).  Ctrl-C ends each
# run (timeout -s INT signals the process group; time itself ignores SIGINT).
#   weft warm   compile cache filled: the agent alone
#   weft cold   empty cache: includes clang's peak
#   bpftrace    (LLVM in-process, every run)
#
# Usage: tools/bench/rss.sh [RUNS]   (default 5; root; see lib.sh)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_need
RUNS=${1:-5}
[ -x /usr/bin/time ] || apt-get install -y time >/dev/null
Q1_WEFT='from tracepoint:raw_syscalls:sys_enter group by comm select count() every 1s'
Q1_BT='tracepoint:raw_syscalls:sys_enter { @[comm] = count(); } interval:s:1 { print(@); clear(@); }'
log=$BENCH_OUT/rss
mkdir -p "$log"
warm=$(mktemp -d /tmp/weft-bench-warm-XXXXXX)
WEFT_CACHE_DIR=$warm timeout -s INT 2 "$WEFT" run "$Q1_WEFT" >/dev/null 2>&1 || true

# peak NAME CACHE CMD...: one 5 s run; appends the peak (kB) to $log/NAME
peak() {
	local name=$1 cache=$2
	shift 2
	WEFT_CACHE_DIR=$cache timeout -s INT 5 /usr/bin/time -v -o "$log/$name.time.$i" "$@" \
		>/dev/null 2>&1 || true
	awk -F': ' '/Maximum resident set size/ { print $2 }' "$log/$name.time.$i" >>"$log/$name"
}

echo "rss: $RUNS runs of 5 s each; logs in $log"
for i in $(seq 1 "$RUNS"); do
	peak weft_warm "$warm" "$WEFT" run "$Q1_WEFT"
	cold=$(mktemp -d /tmp/weft-bench-cold-XXXXXX)
	peak weft_cold "$cold" "$WEFT" run "$Q1_WEFT"
	rm -rf "$cold"
	peak bpftrace "$warm" "$BPFTRACE" -e "$Q1_BT"
	printf '.'
done
echo
rm -rf "$warm"
printf '%-12s %14s %14s\n' tool "median kB" "max kB"
for t in weft_warm weft_cold bpftrace; do
	read -r m _ _ <<<"$(stats <"$log/$t")"
	mx=$(sort -n "$log/$t" | tail -1)
	printf '%-12s %14s %14s\n' "$t" "$m" "$mx"
	result "rss.$t.kb" "$m"
done

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Start-up latency, weft vs bpftrace, same query semantics: from the command's start (just
# before fork, by tools/bench/tsrun) to
#   announce  the tracer's own line: weft's "weft: attached N probes" (printed after attaching)
#             and bpftrace's "Attaching N probes..." (printed BEFORE attaching: a lower bound)
#   hit       the kernel timestamp of the first event the attached probe counted (the true
#             attach time of both tools, by the same measure; every tool makes syscalls right
#             after attaching, so the first event follows the attach by microseconds)
#   first     the first result line on stdout (window 0; every 1s, so ~1 s after attach)
# weft runs cold (a fresh, empty WEFT_CACHE_DIR: clang runs) and warm (the compile cache
# holds the object); bpftrace has no compile cache, so each of its runs compiles.
# Runs are interleaved (weft cold, weft warm, bpftrace, ...) so a busy machine hurts all alike.
#
# Usage: tools/bench/startup.sh [RUNS]   (default 10; root; see lib.sh for the environment)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_need
RUNS=${1:-10}

Q1_WEFT='from tracepoint:raw_syscalls:sys_enter group by comm select count() every 1s'
Q1_BT='tracepoint:raw_syscalls:sys_enter { @[comm] = count(); } interval:s:1 { print(@); clear(@); }'
# the same, plus the time of the first event
QH_WEFT='from tracepoint:raw_syscalls:sys_enter group by comm select count(), min(time) every 1s'
QH_BT='tracepoint:raw_syscalls:sys_enter { @[comm] = count(); if (@first == 0) { @first = nsecs; } }
interval:s:1 { print(@); print(@first); clear(@); }'

log=$BENCH_OUT/startup
mkdir -p "$log"
warm=$(mktemp -d /tmp/weft-bench-warm-XXXXXX)
# fill the warm cache (and the page cache with weft, clang and bpftrace) once, not measured
WEFT_CACHE_DIR=$warm "$TSRUN" -s '^window 0' -t 20 -- "$WEFT" run "$Q1_WEFT" >/dev/null
WEFT_CACHE_DIR=$warm "$TSRUN" -s 'type":"window' -t 20 -- "$WEFT" run --format json "$QH_WEFT" \
	>/dev/null
"$TSRUN" -s '^@' -t 20 -- "$BPFTRACE" -e "$Q1_BT" >/dev/null 2>&1

# one_run NAME CACHE_DIR STOP_REGEX CMD...: a tsrun log in $log/NAME.$i
one_run() {
	local name=$1 cache=$2 stop=$3
	shift 3
	WEFT_CACHE_DIR=$cache "$TSRUN" -s "$stop" -t 30 -- "$@" >"$log/$name.$i"
}

# ms_of FILE REGEX: the time (ms) of the first line matching REGEX
ms_of() {
	awk -v re="$2" '$1 == "line" && $0 ~ re { print $2; exit }' "$1"
}

# hit_of FILE weft|bpftrace: ms from the start to the first event's kernel timestamp
hit_of() {
	local start ts
	start=$(awk '$1 == "start" { print $2; exit }' "$1")
	if [ "$2" = weft ]; then
		ts=$(awk '$1 == "line" && $3 == "out" && /"index":0/ { sub(/^line [^ ]+ out /, ""); print; exit }' \
			"$1" | jq '[.rows[]."min(time)"] | min')
	else
		ts=$(awk '$1 == "line" && $4 == "@first:" { print $5; exit }' "$1")
	fi
	[ -n "$ts" ] && awk -v s="$start" -v t="$ts" 'BEGIN { printf "%.3f\n", (t - s) / 1e6 }'
}

echo "startup: $RUNS interleaved runs of each; logs in $log"
for i in $(seq 1 "$RUNS"); do
	cold=$(mktemp -d /tmp/weft-bench-cold-XXXXXX)
	one_run weft_cold "$cold" '^window 0' "$WEFT" run "$Q1_WEFT"
	one_run weft_warm "$warm" '^window 0' "$WEFT" run "$Q1_WEFT"
	one_run bpftrace "$warm" '^@' "$BPFTRACE" -e "$Q1_BT"
	rm -rf "$cold"
	cold=$(mktemp -d /tmp/weft-bench-cold-XXXXXX)
	one_run hit_weft_cold "$cold" 'type":"window' "$WEFT" run --format json "$QH_WEFT"
	one_run hit_weft_warm "$warm" 'type":"window' "$WEFT" run --format json "$QH_WEFT"
	one_run hit_bpftrace "$warm" '^@first' "$BPFTRACE" -e "$QH_BT"
	rm -rf "$cold"
	printf '.'
done
echo
rm -rf "$warm"

printf '%-14s %-9s %12s %12s %12s %8s\n' tool cache "announce" "hit" "first" "n"
printf '%-14s %-9s %12s %12s %12s %8s\n' "" "" "med/p90 ms" "med/p90 ms" "med/p90 ms" ""
for t in weft_cold weft_warm bpftrace; do
	ann=$(for f in "$log/$t".*; do ms_of "$f" 'err weft: attached|Attaching [0-9]+ probe'; done | stats)
	fst=$(for f in "$log/$t".*; do ms_of "$f" 'out (window 0|@)'; done | stats)
	tool=${t%%_*}
	hit=$(for f in "$log/hit_$t".*; do hit_of "$f" "$tool"; done | stats)
	cache=${t#*_}
	[ "$t" = bpftrace ] && cache="(none)"
	read -r am ap an <<<"$ann"
	read -r hm hp _ <<<"$hit"
	read -r fm fp _ <<<"$fst"
	printf '%-14s %-9s %12s %12s %12s %8s\n' "$tool" "$cache" "$am/$ap" "$hm/$hp" "$fm/$fp" "$an"
	result "startup.$t.announce_ms" "$am $ap"
	result "startup.$t.hit_ms" "$hm $hp"
	result "startup.$t.first_ms" "$fm $fp"
	hwm=$(for f in "$log/$t".*; do awk '$1 == "hwm_kb" { print $2 }' "$f"; done | stats)
	result "startup.$t.hwm_kb" "$(cut -d' ' -f1-2 <<<"$hwm")"
done

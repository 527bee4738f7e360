#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The cost of one include/weft/trace.h site to the program that has it, in ns per site:
# tools/bench/trace_site (pinned to CPU 1) runs WEFT_EVENT sites interleaved with a control
# loop without them and reports the median of its rounds' (site - control) per call
# (tools/bench/trace_site.c), while on CPU 0
#   none      nothing is attached                                      both builds
#   lttng     an LTTng session records weft:event                      lttng+sdt build
#   weft      weft run 'from usdt:BIN:weft:event select count()'       both builds
#   bpftrace  bpftrace -e 'usdt:BIN:weft:event { @ = count(); }'       both builds
# The builds: trace_site (the default: an LTTng-UST tracepoint with an SDT note) and
# trace_site_sdt (-DWEFT_TRACE_SDT_ONLY).  Rounds interleave the configurations, so a shared
# machine's drift spreads over all of them; the table gives the median and p90 over rounds.
# weft's and bpftrace's final counts are checked against the number of sites run (exactly:
# the binaries are only ours), LTTng's discarded events are reported (its buffers fill up
# when the consumer daemon falls behind; a discarded event still paid for the site).
#
# Usage: tools/bench/trace_site.sh [ROUNDS]   (default 5; root; lttng-tools, bpftrace)
#   BENCH_SITE_N: sites per trace_site round (default 200000; each run makes 3 rounds)
#   Build: cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DWEFT_BENCH=ON
#          cmake --build build -j2 --target weft trace_site trace_site_sdt
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-5}
N=${BENCH_SITE_N:-200000}
SITE=$WEFT_BUILD/tools/bench/trace_site
SITE_SDT=$WEFT_BUILD/tools/bench/trace_site_sdt
log=$BENCH_OUT/trace-site
mkdir -p "$log"

if [ "$(id -u)" != 0 ]; then
	echo "bench: needs root (BPF)" >&2
	exit 1
fi
bench_built weft trace_site trace_site_sdt
for f in "$BPFTRACE" bpftool lttng lttng-sessiond taskset; do
	command -v "$f" >/dev/null || { echo "bench: $f not found" >&2; exit 1; }
done
lttng list >/dev/null 2>&1 || lttng-sessiond --daemonize >/dev/null 2>&1 || true

# site_run BIN: "ns_per_site calls" of one trace_site run (3 rounds, their median)
site_run() {
	taskset -c 1 "$1" "$N" 3 | tail -1 | awk '{ print $6, $11 }'
}

# measure CONFIG BUILD: one run under CONFIG; appends "ns calls count lost" to $log/C.B.tsv
measure() {
	local config=$1 build=$2 bin=$SITE out tpid ns calls cnt=- lost=- sess
	[ "$build" = sdt ] && bin=$SITE_SDT
	out=$log/$config.$build.r$r.out
	wait_quiet 5
	case $config in
	none)
		read -r ns calls <<<"$(site_run "$bin")"
		;;
	lttng)
		sess=weft-bench-site-$$
		lttng create "$sess" --output "$log/lttng-trace" >/dev/null
		# shellcheck disable=SC2016 # the filter is LTTng's expression, not the shell's
		lttng enable-event -u 'weft:event' -s "$sess" \
			--filter '$ctx.procname == "trace_site"' >/dev/null
		lttng start "$sess" >/dev/null
		read -r ns calls <<<"$(LTTNG_UST_REGISTER_TIMEOUT=60000 site_run "$bin")"
		lttng stop "$sess" >"$out" 2>&1
		lttng destroy "$sess" >/dev/null
		rm -rf "$log/lttng-trace"
		lost=$(awk '/events? (were|was) discarded/ { for (i = 1; i <= NF; i++)
			if ($i ~ /^[0-9]+$/) { print $i; exit } }' "$out")
		lost=${lost:-0}
		;;
	weft | bpftrace)
		if [ "$config" = weft ]; then
			taskset -c 0 "$WEFT" run --cpu-budget 0 \
				"from usdt:$bin:weft:event select count()" >"$out" 2>&1 &
		else
			taskset -c 0 "$BPFTRACE" -e "usdt:$bin:weft:event { @ = count(); }" \
				>"$out" 2>&1 &
		fi
		tpid=$!
		if ! wait_probes "$tpid" 1 60; then
			echo "bench: $config did not attach (see $out)" >&2
			stop_pid "$tpid"
			return 0
		fi
		sleep 0.2
		read -r ns calls <<<"$(site_run "$bin")"
		stop_pid "$tpid"
		if [ "$config" = weft ]; then
			cnt=$(awk '/^window/ { s = 0; w = 1 } w && $NF ~ /^[0-9]+$/ { s = $NF }
				END { print s + 0 }' "$out")
		else
			cnt=$(awk '/^@/ { s += $NF } END { print s + 0 }' "$out")
		fi
		[ "$cnt" = "$calls" ] ||
			echo "bench: $config ($build) counted $cnt of $calls sites (see $out)" >&2
		;;
	esac
	printf '%s\t%s\t%s\t%s\n' "$ns" "$calls" "$cnt" "$lost" >>"$log/$config.$build.tsv"
}

configs="none.lttng none.sdt lttng.lttng weft.lttng weft.sdt bpftrace.lttng bpftrace.sdt"
echo "trace-site: $ROUNDS rounds of 3 x $N sites per configuration; logs in $log"
machine_info
for r in $(seq 1 "$ROUNDS"); do
	for c in $configs; do
		measure "${c%.*}" "${c#*.}"
	done
	printf '.'
done
echo
printf '%-9s %-10s %11s %11s %6s %12s %10s\n' tracer build "ns/site" "p90" rounds "counted" \
	"discarded"
for c in $configs; do
	f=$log/$c.tsv
	[ -f "$f" ] || continue
	read -r med p90 n <<<"$(cut -f1 "$f" | stats 1)"
	cnt=$(awk -F'\t' '$3 != "-" { ok += $3 == $2; n++ } END { print n ? ok "/" n " exact" : "-" }' "$f")
	lost=$(awk -F'\t' '$4 != "-" { s += $4; n++ } END { print n ? s : "-" }' "$f")
	build=${c#*.}
	[ "$build" = lttng ] && build=lttng+sdt
	printf '%-9s %-10s %11s %11s %6s %12s %10s\n' "${c%.*}" "$build" "$med" "$p90" "$n" \
		"$cnt" "$lost"
	result "site.${c%.*}.${c#*.}.ns" "$med"
done

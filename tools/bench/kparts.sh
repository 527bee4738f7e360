#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What each part of a kernel-edges program costs a call, under the load kedges.sh measures
# (docs/performance.md, "Kernel edges: the wakeups and the comm"): redis-server in network
# namespace S, `redis-benchmark -c 1 -n N -t set -P 1` in namespace C (a veth pair between),
# both on CPU 0; on CPU 1 the loader (kparts.c), which attaches one variant of the program to
# sock:sock_send_length and sock:sock_recv_length and empties its 2 MiB ring as weft's reader
# thread does.  The variants (kparts.bpf.c, compiled here against the running kernel's
# vmlinux.h) add one part at a time; "weft" is weft's own generated program for the same
# query (`weft explain --dump=codegen`), loaded the same way (its records in rings of each
# CPU's own, which the loader sizes and reads as variant 21's).  The figure is the kernel's
# run-time statistics (kernel.bpf_stats_enabled on for the script's run; its own two clock
# reads are in every figure: compare the "empty" variant), run_time_ns / run_cnt of the two
# programs together, median over the rounds; the records the loader read are printed once.
# With BENCH_KPARTS_WALL=1 the figure is instead redis-benchmark's requests a second with each
# variant attached (and with none: the variant "off"), statistics off, and each variant's drop
# against "off" (medians): what the parts cost the traced program, caches and all.
#
# Usage: tools/bench/kparts.sh [ROUNDS]   (default 5; root; ip, redis-server, redis-benchmark,
#                                          bpftool, clang, jq)
#   BENCH_KPARTS_N: requests per run (default 40000)
#   BENCH_KPARTS_VARIANTS: which (default "1 2 ... 21 weft": every one; kparts.bpf.c names
#     them; "off" runs the benchmark with nothing attached, for BENCH_KPARTS_WALL=1;
#     VARIANT@BYTES loads the variant with a ring of BYTES, a power of 2, instead of 2 MiB;
#     c-NAME is BENCH_KPARTS_CDIR/NAME.c, an edit of weft's program (its pid filter written
#     KP_PID), compiled as weft's is: a header beside it comes before the repository's)
#   BENCH_KPARTS_WALL=1: requests a second and drops instead of ns a call
#   Build: cmake --build build -j2 --target weft kparts (with -DWEFT_BENCH=ON)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-5}
N=${BENCH_KPARTS_N:-40000}
VARIANTS=${BENCH_KPARTS_VARIANTS:-1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 weft}
WALL=${BENCH_KPARTS_WALL:-0}
KPARTS=$WEFT_BUILD/tools/bench/kparts
log=$BENCH_OUT/kparts
mkdir -p "$log"

if [ "$(id -u)" != 0 ]; then
	echo "bench: needs root (BPF, network namespaces)" >&2
	exit 1
fi
bench_built weft kparts
for f in ip redis-server redis-benchmark redis-cli bpftool clang jq; do
	command -v "$f" >/dev/null || { echo "bench: $f not found" >&2; exit 1; }
done

ns_s=weft-bkp-$$-s
ns_c=weft-bkp-$$-c
veth=bkp$(($$ % 10000000))
addr=10.233.$(($$ % 250)).1
redis_pid=
stats0=$(cat /proc/sys/kernel/bpf_stats_enabled)
cleanup() {
	echo "$stats0" >/proc/sys/kernel/bpf_stats_enabled
	[ -n "$redis_pid" ] && kill "$redis_pid" 2>/dev/null && wait "$redis_pid" 2>/dev/null
	ip netns del "$ns_s" 2>/dev/null || true
	ip netns del "$ns_c" 2>/dev/null || true
}
trap cleanup EXIT
bench_two_hosts "$ns_s" "$ns_c" "$veth" "$addr" "10.233.$(($$ % 250)).2"
taskset -c 0 ip netns exec "$ns_s" redis-server --port 6379 --bind "$addr" --save '' \
	--appendonly no --protected-mode no >"$log/redis.log" 2>&1 &
redis_pid=$!
bench_wait_redis "$ns_c" "$addr"

# weft_cc SRC OBJ: a program of weft's (generated, or edited from one) compiled as weft
# compiles it, KP_PID defined as the server's pid
weft_cc() {
	clang -target bpf -O2 -g -D__TARGET_ARCH_x86 -I"/usr/include/$(uname -m)-linux-gnu" \
		-I"$REPO/kernel" -I"$REPO" -Wno-unused-value -Wno-unused-function -Wno-pointer-sign \
		-Wno-compare-distinct-pointer-types -fno-stack-protector -DKP_PID="$redis_pid" \
		-c "$1" -o "$2"
}

# the objects: each variant, and weft's program for the query kedges.sh runs
bpftool btf dump file /sys/kernel/btf/vmlinux format c >"$log/vmlinux.h"
built=
for v in $VARIANTS; do
	v=${v%@*}
	[ "$v" = weft ] || [ "$v" = off ] || [[ " $built " == *" $v "* ]] && continue
	built="$built $v"
	if [ "${v#c-}" != "$v" ]; then # an edited program of weft's, in BENCH_KPARTS_CDIR
		weft_cc "$BENCH_KPARTS_CDIR/${v#c-}.c" "$log/kp$v.o"
		continue
	fi
	clang -target bpf -O2 -g -D__TARGET_ARCH_x86 -I"$log" -DKP="$v" -DKP_PID="$redis_pid" \
		-c "$BENCH_DIR/kparts.bpf.c" -o "$log/kp$v.o"
done
"$WEFT" explain --dump=codegen \
	"from kernel:sockets where pid = $redis_pid or comm = 'redis-benchmark' graph" |
	sed 1d >"$log/weft.c"
weft_cc "$log/weft.c" "$log/kpweft.o"

[ "$WALL" = 1 ] || echo 1 >/proc/sys/kernel/bpf_stats_enabled
# bench: one redis-benchmark run on CPU 0 (after as many requests unmeasured, in every
# variant alike); prints its requests a second
bench() {
	taskset -c 0 ip netns exec "$ns_c" redis-benchmark -h "$addr" -p 6379 -c 1 -n "$N" \
		-t set -P 1 --csv >/dev/null 2>&1
	taskset -c 0 ip netns exec "$ns_c" redis-benchmark -h "$addr" -p 6379 -c 1 -n "$N" \
		-t set -P 1 --csv | awk -F'"' '$2 == "SET" { print $4 }'
}
# one VARIANT ROUND: ns a call of the variant's two programs over one redis-benchmark run
# (or its requests a second, BENCH_KPARTS_WALL=1)
one() {
	local lpid ring=kp_ring names='["kp_send","kp_recv"]' rps v=${1%@*} bytes=$((2 << 20))
	[ "$v" != "$1" ] && bytes=${1#*@}
	if [ "$1" = off ]; then
		echo 0 >"$log/$1-$2.out"
		bench
		return
	fi
	[ "$v" = weft ] || [ "${v#c-}" != "$v" ] && ring=weft_events && names='["wp0","wp1"]'
	KPARTS_RING=$bytes taskset -c 1 "$KPARTS" "$log/kp$v.o" "$ring" >"$log/$1-$2.out" \
		2>"$log/$1-$2.err" &
	lpid=$!
	wait_attached "$lpid" "$log/$1-$2.err"
	if [ "$WALL" = 1 ]; then
		rps=$(bench)
		stop_pid "$lpid"
		echo "$rps"
		return
	fi
	taskset -c 0 ip netns exec "$ns_c" redis-benchmark -h "$addr" -p 6379 -c 1 -n "$N" \
		-t set -P 1 --csv >/dev/null 2>&1
	# the newest two programs of those names: the loader's (Debian's bpftool shows no owner)
	bpftool prog show -j | jq --argjson n "$names" '[.[] | select(.name as $m | $n | index($m))]
		| sort_by(.id) | .[-2:] | (map(.run_time_ns // 0) | add) / (map(.run_cnt // 1) | add)
		| floor'
	stop_pid "$lpid"
}
unit="ns a call"
[ "$WALL" = 1 ] && unit=SET/s
# shellcheck disable=SC2086 # the variants, one word each
bench_rounds "$ROUNDS" "$unit" $VARIANTS
off=
[ -s "$log/off.txt" ] && off=$(stats 1 <"$log/off.txt" | cut -d' ' -f1)
for v in $VARIANTS; do
	m=$(stats 1 <"$log/$v.txt" | cut -d' ' -f1)
	drop=
	[ "$WALL" = 1 ] && [ -n "$off" ] && [ "$v" != off ] &&
		drop=$(awk -v o="$off" -v m="$m" 'BEGIN { printf ", a drop of %.1f%%", 100 * (o - m) / o }')
	echo "variant $v: median $m $unit$drop, $(cat "$log/$v-1.out") records read in round 1"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg) (2 CPUs)"

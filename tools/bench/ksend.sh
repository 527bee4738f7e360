#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What kernel:sockets costs a traced TCP send, from the caller's side: tools/bench/ksend (one
# TCP connection on loopback, N sends of 16 bytes, a reader thread) prints the mean time of a
# send(); rounds alternate, in rotating order, the configurations
#   off      nothing attached
#   weft     `weft run 'from kernel:sockets where comm = "ksend" graph'` (raw tracepoints with
#            BTF-typed arguments where the kernel allows, docs/graphs.md)
#   classic  the same with WEFT_RAW_TP=0: the classic tracepoints and their records
#   empty    bpftrace, empty programs on the two tracepoints (what firing them costs)
#   bt       bpftrace doing the kernel side of the same job (the filter, the 4-tuple through
#            BTF, counted in a map)
# and prints, per configuration, the median of the rounds' added ns a send (each round's run
# against that round's off run), and against the classic tracepoints' run of the same round
# the median difference and the number of rounds it was cheaper.
# ksend runs on CPU 0, the tracer's process on CPU 1.  Each weft run's store is checked to hold
# the connection's traces (at least one).
#
# Usage: tools/bench/ksend.sh [ROUNDS]   (default 10; root; bpftrace, jq)
#   BENCH_KSEND_N: sends a run (default 300000)
#   Build: cmake -S . -B build -DWEFT_BENCH=ON && cmake --build build -j2 --target weft ksend
set -euo pipefail
. "$(dirname "$0")/lib.sh"
ROUNDS=${1:-10}
N=${BENCH_KSEND_N:-300000}
KSEND=$WEFT_BUILD/tools/bench/ksend
log=$BENCH_OUT/ksend
mkdir -p "$log"
[ "$(id -u)" = 0 ] || { echo "bench: needs root (BPF)" >&2; exit 1; }
bench_built weft ksend
command -v "$BPFTRACE" >/dev/null || { echo "bench: $BPFTRACE not found" >&2; exit 1; }
[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing

query="from kernel:sockets where comm = 'ksend' graph"
bt_empty='tracepoint:sock:sock_send_length,tracepoint:sock:sock_recv_length { }'
# shellcheck disable=SC2016 # bpftrace's own $sk and $args, not the shell's
bt_same='tracepoint:sock:sock_send_length,tracepoint:sock:sock_recv_length
/ comm == "ksend" && args->family == 2 && args->protocol == 6 && args->ret > 0 /
{
	$sk = (struct sock *)args->sk;
	@calls[tid, $sk->__sk_common.skc_rcv_saddr, $sk->__sk_common.skc_daddr,
	       $sk->__sk_common.skc_num, $sk->__sk_common.skc_dport] = count();
	@bytes = sum(args->ret);
}'

run_ksend() { taskset -c 0 "$KSEND" "$N"; }

# run_weft NAME: ksend with weft attached (WEFT_RAW_TP from the caller's environment)
run_weft() {
	local store=$log/$1.db wpid ns n
	rm -f "$store"*
	taskset -c 1 "$WEFT" run -S "$store" "$query" >"$log/$1.out" 2>"$log/$1.err" &
	wpid=$!
	wait_attached "$wpid" "$log/$1.err"
	ns=$(run_ksend)
	kill -INT "$wpid"
	wait "$wpid"
	n=$(sed -n 's/^stored: \([0-9]*\) traces.*/\1/p' "$log/$1.out")
	[ "${n:-0}" -ge 1 ] || { echo "bench: $1: no trace stored" >&2; exit 1; }
	echo "$ns"
}

run_bt() {
	local bpid ns
	taskset -c 1 "$BPFTRACE" -e "$2" >"$log/$1.bt.out" 2>"$log/$1.bt.err" &
	bpid=$!
	wait_probes "$bpid" 2 60 || { cat "$log/$1.bt.err" >&2; exit 1; }
	ns=$(run_ksend)
	stop_pid "$bpid"
	echo "$ns"
}

one() {
	case $1 in
	off) run_ksend ;;
	weft) run_weft "weft-$2" ;;
	classic) WEFT_RAW_TP=0 run_weft "classic-$2" ;;
	empty) run_bt "empty-$2" "$bt_empty" ;;
	bt) run_bt "bt-$2" "$bt_same" ;;
	esac
}

configs="off weft classic empty bt"
for c in $configs; do : >"$log/$c.txt"; done
load0=$(cut -d' ' -f1-3 /proc/loadavg)
# shellcheck disable=SC2086 # configs is a list of words
bench_rounds "$ROUNDS" "ns a send" $configs
load1=$(cut -d' ' -f1-3 /proc/loadavg)
{
	echo "ksend: $N sends of 16 bytes on one loopback TCP connection, $ROUNDS rounds"
	read -r moff _ _ < <(stats 0 <"$log/off.txt")
	echo "median off: $moff ns a send"
	for c in $configs; do
		[ "$c" = off ] && continue
		read -r m _ _ < <(paste "$log/off.txt" "$log/$c.txt" | awk '{ print $2 - $1 }' | stats 0)
		echo "median of the rounds' added cost, $c: $m ns a send"
	done
	for c in $configs; do
		case $c in off | classic) continue ;; esac
		read -r d _ _ < <(paste "$log/classic.txt" "$log/$c.txt" | awk '{ print $2 - $1 }' | stats 0)
		w=$(paste "$log/classic.txt" "$log/$c.txt" | awk '$2 < $1 { n++ } END { print n + 0 }')
		echo "against classic, $c: median of the rounds' differences $d ns a send, cheaper in $w of $ROUNDS rounds"
	done
	echo "load average before $load0, after $load1 ($(nproc) CPUs)"
} | tee "$log/result.txt"

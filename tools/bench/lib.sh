# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Shared by the weft-vs-bpftrace benchmark drivers (tools/bench/*.sh): where the binaries are,
# statistics (median, p90), waiting for a tracer's probes to be live, and the results file.
# Sourced, not run.  Needs root, a build with -DWEFT_BENCH=ON, bpftrace, bpftool and jq.
#
# Environment:
#   WEFT_BUILD   the build tree (default: <repo>/build); binaries come from there
#   BPFTRACE     the bpftrace binary (default: bpftrace)
#   BENCH_OUT    directory for raw logs and results (default: a fresh /tmp/weft-bench-*)

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$BENCH_DIR/../.." && pwd)
WEFT_BUILD=${WEFT_BUILD:-$REPO/build}
WEFT=$WEFT_BUILD/tools/weft
EVLOOP=$WEFT_BUILD/tools/bench/evloop
TSRUN=$WEFT_BUILD/tools/bench/tsrun
HANDWRITTEN=$WEFT_BUILD/tools/bench/handwritten
BPFTRACE=${BPFTRACE:-bpftrace}
if [ -z "${BENCH_OUT:-}" ]; then
	BENCH_OUT=$(mktemp -d /tmp/weft-bench-XXXXXX)
fi
export BENCH_OUT
mkdir -p "$BENCH_OUT"

# bench_built TARGET...: exits with the commands that build them unless every target is
# built (weft is tools/weft, the others tools/bench/TARGET).
bench_built() {
	local t f missing=
	for t in "$@"; do
		f=$WEFT_BUILD/tools/bench/$t
		[ "$t" = weft ] && f=$WEFT
		[ -x "$f" ] || missing="$missing $f"
	done
	[ -z "$missing" ] && return 0
	echo "bench:$missing missing; build with:" >&2
	echo "  cmake -S $REPO -B $WEFT_BUILD -DCMAKE_BUILD_TYPE=Release -DWEFT_BENCH=ON" >&2
	echo "  cmake --build $WEFT_BUILD -j2 --target $*" >&2
	exit 1
}

bench_need() {
	local f
	if [ "$(id -u)" != 0 ]; then
		echo "bench: needs root (BPF)" >&2
		exit 1
	fi
	bench_built weft evloop tsrun handwritten
	for f in "$BPFTRACE" bpftool jq taskset; do
		command -v "$f" >/dev/null || { echo "bench: $f not found" >&2; exit 1; }
	done
	[ -d /sys/kernel/tracing/events ] || mount -t tracefs nodev /sys/kernel/tracing
}

# stats [DECIMALS]: numbers on stdin (one a line) -> "median p90 n"; nearest-rank p90;
# "- - 0" if none.  DECIMALS defaults to 1.
# shellcheck disable=SC2120 # DECIMALS is optional
stats() {
	sort -g | awk -v d="${1:-1}" '{ v[++n] = $1 }
	END {
		if (!n) { print "- - 0"; exit }
		med = n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
		r = int(0.9 * n); if (r < 0.9 * n) r++
		printf "%.*f %.*f %d\n", d, med, d, v[r], n
	}'
}

# result KEY VALUE: one measured figure, collected by run-all.sh into the summary.
result() {
	printf '%s %s\n' "$1" "$2" >>"$BENCH_OUT/results"
}

# probes_of PID: how many BPF perf-event attachments (tracepoints, uprobes) PID holds.
probes_of() {
	bpftool perf 2>/dev/null | awk -v p="$1" '$1 == "pid" && $2 == p { n++ } END { print n + 0 }'
}

# foreign_probes: BPF perf-event attachments on this machine, called before a measurement
# starts its tracer (other people's tracers would add their cost to ours).
foreign_probes() {
	bpftool perf 2>/dev/null | awk '$1 == "pid" { n++ } END { print n + 0 }'
}

# wait_probes PID N [TIMEOUT_S]: until PID holds N attachments (the kernel's view of
# "attached", whatever the tracer printed); 0 on success.
wait_probes() {
	local pid=$1 want=$2 left=$((${3:-30} * 20))
	while [ "$left" -gt 0 ]; do
		[ "$(probes_of "$pid")" -ge "$want" ] && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.05
		left=$((left - 1))
	done
	return 1
}

# wait_attached PID ERRFILE: until `weft run` (PID) has said on its stderr (ERRFILE) that its
# probes are attached; exits the script with weft's words if it ends first, or after 60 s.
wait_attached() {
	for _ in $(seq 1200); do
		grep -qs attached "$2" && return 0 # -s: the file may not be there yet
		kill -0 "$1" 2>/dev/null || { cat "$2" >&2; exit 1; }
		sleep 0.05
	done
	echo "bench: weft did not attach within 60 s" >&2
	exit 1
}

# wait_quiet [MAX_S]: waits (up to MAX_S, default 60) until no other process holds BPF
# probes, so a measurement does not pay for someone else's tracing.  Prints a warning if it
# gave up.
wait_quiet() {
	local left=$((${1:-60} * 4))
	while [ "$(foreign_probes)" -gt 0 ] && [ "$left" -gt 0 ]; do
		sleep 0.25
		left=$((left - 1))
	done
	[ "$(foreign_probes)" -eq 0 ] || echo "bench: warning: other BPF probes are attached" >&2
}

# stop_pid PID: SIGINT (Ctrl-C) and wait for it.  A background job of a script starts with
# SIGINT ignored, and a tracer that installs its handler late (bpftrace) loses a SIGINT sent
# before that: so SIGINT again after 3 s, SIGTERM (which both tracers also handle) after 6 s,
# SIGKILL after 15 s.
stop_pid() {
	local t=0
	kill -INT "$1" 2>/dev/null
	while kill -0 "$1" 2>/dev/null && [ "$(awk '{ print $3 }' /proc/"$1"/stat 2>/dev/null)" != Z ]; do
		sleep 0.1
		t=$((t + 1))
		case $t in
		30) kill -INT "$1" 2>/dev/null ;;
		60) kill -TERM "$1" 2>/dev/null ;;
		150) kill -KILL "$1" 2>/dev/null ;;
		esac
	done
	wait "$1" 2>/dev/null || true
}

# bench_rounds ROUNDS UNIT CONFIG...: every configuration once a round, by the script's own
# `one CONFIG ROUND` (which prints the run's value), in an order rotated each round (round r
# starts with the r-th configuration, and so on around), so that a machine whose speed drifts
# spreads the drift over all of them; appends each value to $log/CONFIG.txt and prints a line
# a round: "round R: CONFIG VALUE ... UNIT".
bench_rounds() {
	local rounds=$1 unit=$2 r i k c v line
	shift 2
	for r in $(seq "$rounds"); do
		line="round $r:"
		k=$(((r - 1) % $#))
		for i in $(seq 0 $(($# - 1))); do
			eval "c=\${$(((i + k) % $# + 1))}"
			v=$(one "$c" "$r")
			# shellcheck disable=SC2154 # log: the calling script's directory
			echo "$v" >>"$log/$c.txt"
			line="$line $c $v"
		done
		echo "$line $unit"
	done
}

# bench_two_hosts NS_S NS_C VETH ADDR_S ADDR_C: two network namespaces joined by a veth pair
# (VETH"a" in NS_S with ADDR_S/24, VETH"b" in NS_C with ADDR_C/24), loopback up in both: a
# server "host" and a client "host" on one machine.  The caller deletes the namespaces.
bench_two_hosts() {
	local ns pid
	# first the namespaces of weft's benchmarks and tests that were killed (no trap runs on
	# SIGKILL): weft-TAG-PID-... whose process PID is gone
	for ns in $(ip netns list | awk '{ print $1 }'); do
		pid=$(echo "$ns" | sed -n 's/^weft-[a-z]*-\([0-9][0-9]*\)-.*/\1/p')
		[ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null && ip netns del "$ns"
	done
	ip netns add "$1"
	ip netns add "$2"
	ip link add "${3}a" type veth peer name "${3}b"
	ip link set "${3}a" netns "$1"
	ip link set "${3}b" netns "$2"
	ip -n "$1" addr add "$4/24" dev "${3}a"
	ip -n "$2" addr add "$5/24" dev "${3}b"
	for ns in "$1" "$2"; do
		ip -n "$ns" link set lo up
	done
	ip -n "$1" link set "${3}a" up
	ip -n "$2" link set "${3}b" up
}

# bench_wait_redis NS_C ADDR: until redis-server at ADDR answers a PING from namespace NS_C
# (at most 60 s)
bench_wait_redis() {
	for _ in $(seq 600); do
		ip netns exec "$1" redis-cli -h "$2" ping >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "bench: redis-server at $2 did not answer within 60 s" >&2
	exit 1
}

machine_info() {
	echo "kernel:  $(uname -r)"
	echo "cpu:     $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) cores"
	echo "memory:  $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
	echo "weft:    $("$WEFT" --version 2>/dev/null | head -1) ($WEFT)"
	echo "bpftrace: $("$BPFTRACE" --version 2>/dev/null)"
	echo "clang:   $(clang --version | head -1)"
	echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)"
}

#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The whole test suite, from a fresh Debian 12 machine: installs what is missing, builds
# weft twice (release and ASan+UBSan) after checking that every C file is formatted with the
# repo's .clang-format, runs every ctest in both (unit, compiler, runtime against the real
# kernel) and the README's first command (tools/quickstart.sh), then builds the libFuzzer
# targets and runs each for a bounded time.  Exit status 0 only if everything passed.
set -euo pipefail
cd "$(dirname "$0")/.."
. tools/deps.sh
weft_deps_install

JOBS=${JOBS:-$(nproc)}
# Fuzzing gets a fixed budget shared by the targets (CI must stay under 30 minutes however many
# targets there are): FUZZ_TOTAL_SECONDS split evenly, at least FUZZ_MIN_SECONDS each.
# FUZZ_SECONDS, if set, is the time per target instead.  About a minute since the suite grew to 140
# tests (2026-11-26: the fresh-clone run took ~26.5 minutes before fuzzing's share); the corpora
# replay in ctest every time, and long fuzzing runs are for a maintainer's machine.
FUZZ_TOTAL_SECONDS=${FUZZ_TOTAL_SECONDS:-66}
FUZZ_MIN_SECONDS=${FUZZ_MIN_SECONDS:-6}

# Why the tests that ctest reported as skipped (exit 77, tests/skip.h) in dir skipped: the
# "skipped: REASON" lines they printed, from ctest's log of its last run.
skipped() { # dir
	awk '/^[0-9]+\/[0-9]+ Testing: / { t = $3 }
		/^skipped: / { if (!n++) print "skipped tests, and why:"; print "  " t ": " substr($0, 10) }' \
		"$1/Testing/Temporary/LastTest.log" | uniq
}

build() { # dir, cmake args...
	local dir=$1
	shift
	cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_WERROR=ON "$@" >/dev/null
	cmake --build "$dir" -j"$JOBS"
}

echo "== formatting (.clang-format)"
find base include agent aggregator compiler graph vm kernel probes tests tools -name '*.[ch]' -print0 |
	xargs -0 clang-format --dry-run -Werror

echo "== layers (includes point down the stack)"
python3 tools/check-layers.py

# The tests that touch no shared state of the machine (labels unit, compiler, fuzz: their own
# temporary directories, no workload counted machine-wide, no fixed port) run two at a time;
# the others (runtime, cluster, tools, web: real probes on the whole machine, daemons with
# heartbeats) one at a time, as their counts and liveness assume.
PAIRED='^(unit|compiler|fuzz)$'

echo "== release build and tests"
build build
(cd build && ctest --output-on-failure -j"$JOBS" -L "$PAIRED")
skipped build
(cd build && ctest --output-on-failure -j1 -LE "$PAIRED")
skipped build

echo "== the README's first command (tools/quickstart.sh: weft's main job on a real workload)"
# the release build above is its build: it configures the same directory and builds weft
bash tools/quickstart.sh

echo "== ASan+UBSan build and tests"
build build-asan -DWEFT_SANITIZE=ON
# -LE tools: the bpftrace tools' tests (tests/tools) run weft on whole-system workloads beside
# bpftrace and take minutes; the code paths they reach (compile, attach, stream and window
# output) are the runtime tests' under ASan already, so a second run would add the time and
# no findings. They run in the release build above.
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	ctest --output-on-failure -j"$JOBS" -L "$PAIRED")
skipped build-asan
(cd build-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	ctest --output-on-failure -j1 -LE "$PAIRED|^tools$")
skipped build-asan

echo "== fuzz targets build"
# the targets only (and the libraries they link, every one, built by clang with -Werror): the
# tests were built twice above, and their corpora replayed in both builds
fuzz_targets=$(for f in tests/fuzz/fuzz_*.c; do basename "$f" .c; done)
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_WERROR=ON -DWEFT_FUZZ=ON \
	-DWEFT_TESTS=ON -DCMAKE_C_COMPILER=clang >/dev/null
# shellcheck disable=SC2086 # one word per target
cmake --build build-fuzz -j"$JOBS" --target $fuzz_targets
ntargets=0
for f in build-fuzz/tests/fuzz_*; do [ -x "$f" ] && ntargets=$((ntargets + 1)); done
if [ -z "${FUZZ_SECONDS:-}" ]; then
	FUZZ_SECONDS=$((FUZZ_TOTAL_SECONDS / (ntargets > 0 ? ntargets : 1)))
	[ "$FUZZ_SECONDS" -ge "$FUZZ_MIN_SECONDS" ] || FUZZ_SECONDS=$FUZZ_MIN_SECONDS
fi
echo "== fuzzing ($ntargets targets, ${FUZZ_SECONDS}s each)"
status=0
for f in build-fuzz/tests/fuzz_*; do
	[ -x "$f" ] || continue
	name=$(basename "$f")
	corpus=tests/fuzz/corpus/${name#fuzz_}
	work=$(mktemp -d)
	[ -d "$corpus" ] && cp -r "$corpus"/. "$work"/
	echo "-- $name"
	if ! "$f" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 "$work" >"build-fuzz/$name.log" 2>&1; then
		tail -40 "build-fuzz/$name.log"
		status=1
	else
		grep -E "stat::number_of_executed_units" "build-fuzz/$name.log" || true
	fi
	rm -rf "$work"
done
[ $status = 0 ] && echo "weft: all tests passed"
exit $status

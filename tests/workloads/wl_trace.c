// SPDX-License-Identifier: Apache-2.0
/*
 * wl_trace: makes a known number of calls of every site of include/weft/trace.h, for the test
 * that weft counts them as USDT probes exactly (tests/runtime/test_run_trace_h.c).  Built
 * twice from this file: wl_trace (the default build: LTTng-UST tracepoints with SDT notes; it
 * defines the provider) and wl_trace_sdt (-DWEFT_TRACE_SDT_ONLY: plain <sys/sdt.h> sites).
 *
 * `wl_trace N` (default 3000) makes, for i = 0 .. N-1, in this order:
 *   weft:task_begin (1000 + i, 2000 + i, i + 1, i, "wl_trace", NAMES[i % 3])
 *   weft:event      (1000 + i, 2000 + i, i + 1, "tick")
 *   weft:edge       (1000 + i, 2000 + i, i odd ? "message" : "follows", i + 1, 0, i + 2, 0)
 *   weft:task_end   (1000 + i, 2000 + i, i + 1, i % 3)
 * with NAMES = "alpha", "beta", "gamma".  So each probe fires N times; task_begin's arg2 sums
 * to N(N+1)/2 and arg3 to N(N-1)/2; arg0 sums to 1000N + N(N-1)/2; a name and a status
 * each come i % 3 of the time.  Every argument is an expression with a side effect on a
 * counter: the program checks that each was evaluated exactly once per site and exits 1 if
 * not.  Prints "wl_trace: N iterations, E evaluations" at the end.
 */
#ifndef WEFT_TRACE_SDT_ONLY
#define WEFT_TRACE_DEFINE
#endif
#include <weft/trace.h>

#include <stdio.h>
#include <stdlib.h>

static long evaluations;

static uint64_t ev(uint64_t v)
{
	evaluations++;
	return v;
}

static const char *evs(const char *s)
{
	evaluations++;
	return s;
}

int main(int argc, char **argv)
{
	static const char *const names[] = { "alpha", "beta", "gamma" };
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 3000;

	if (n < 0 || n > 100000000)
		n = 3000;
	for (long l = 0; l < n; l++) {
		uint64_t i = (uint64_t)l;

		WEFT_TASK_BEGIN(ev(1000 + i), ev(2000 + i), ev(i + 1), ev(i), evs("wl_trace"),
				evs(names[i % 3]));
		WEFT_EVENT(ev(1000 + i), ev(2000 + i), ev(i + 1), evs("tick"));
		WEFT_EDGE(ev(1000 + i), ev(2000 + i),
			  evs(i % 2 ? WEFT_EDGE_MESSAGE : WEFT_EDGE_FOLLOWS), ev(i + 1), ev(0),
			  ev(i + 2), ev(0));
		WEFT_TASK_END(ev(1000 + i), ev(2000 + i), ev(i + 1), (int)ev(i % 3));
	}
	printf("wl_trace: %ld iterations, %ld evaluations\n", n, evaluations);
	return evaluations == 21 * n ? 0 : 1;
}

// SPDX-License-Identifier: Apache-2.0
/*
 * wl_graph: a self-probing workload of execution graphs with a known structure, for the
 * graph-query tests.  `wl_graph [N [DELAY_MS]]` sleeps DELAY_MS (default 0), then serves N
 * requests (default 100), one after the other on one thread.  Request i (0-based) fires
 * weft's provider through include/weft/trace.h, built with WEFT_TRACE_SDT_ONLY (plain
 * <sys/sdt.h> sites of provider `weft`, no library; tests/workloads/CMakeLists.txt):
 *
 *   trace id    hi = WL_GRAPH_TRACE_HI, lo = i + 1
 *   task 1      "frontend" "request", parent 0; ends with status 2 (error) when
 *               i % 1000 == 999, else 1 (ok)
 *     wl_handle(i)                     a function: span(uprobe) tests see it
 *       wl_step(i)                     a function, called twice per request
 *       task 2  "backend" "query", parent 1, inside wl_handle between the two steps;
 *               event "cache_miss" always, event "retry" when i % 100 == 7;
 *               edge message 1 -> 2; ends with status 1
 *       wl_step(i)
 *
 * So N requests give N traces, 2N tasks, N + N/100 (rounded as counted) events, N edges;
 * with spans, N wl_handle and 2N wl_step calls.  Deterministic: no randomness, no threads.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <weft/trace.h>
#include <time.h>

#define WL_GRAPH_TRACE_HI 0x7765667400000001ull

int wl_step(int i);
int wl_handle(int i);

__attribute__((noinline, used)) int wl_step(int i)
{
	volatile int x = i;

	return x * 7 + 3;
}

__attribute__((noinline, used)) int wl_handle(int i)
{
	uint64_t hi = WL_GRAPH_TRACE_HI, lo = (uint64_t)i + 1, root = 1, child = 2, zero = 0;
	int r = wl_step(i);

	WEFT_TASK_BEGIN(hi, lo, child, root, "backend", "query");
	WEFT_EVENT(hi, lo, child, "cache_miss");
	if (i % 100 == 7)
		WEFT_EVENT(hi, lo, child, "retry");
	WEFT_EDGE(hi, lo, WEFT_EDGE_MESSAGE, root, zero, child, zero);
	WEFT_TASK_END(hi, lo, child, WEFT_STATUS_OK);
	return r + wl_step(i);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 100;
	long delay_ms = argc > 2 ? strtol(argv[2], NULL, 10) : 0;
	long sum = 0;

	if (n < 0)
		n = 0;
	if (delay_ms > 0) {
		struct timespec ts = { delay_ms / 1000, (delay_ms % 1000) * 1000000L };

		nanosleep(&ts, NULL);
	}
	for (int i = 0; i < n; i++) {
		uint64_t hi = WL_GRAPH_TRACE_HI, lo = (uint64_t)i + 1, root = 1, parent = 0;
		int status = i % 1000 == 999 ? WEFT_STATUS_ERROR : WEFT_STATUS_OK;

		WEFT_TASK_BEGIN(hi, lo, root, parent, "frontend", "request");
		sum += wl_handle(i);
		WEFT_TASK_END(hi, lo, root, status);
	}
	printf("wl_graph: %ld requests, sum %ld\n", n, sum);
	return 0;
}

// SPDX-License-Identifier: Apache-2.0
/*
 * wl_lttng: a program instrumented with LTTng-UST tracepoints of weft's `weft` provider
 * (include/weft/trace.h) and of a provider of its own (wl_other, wl_lttng_other.h), making a known
 * graph, for the LTTng CTF importer's test (tests/runtime/test_graph_ctf.c).
 * `wl_lttng [N]` (default 3) serves N requests; request r (0-based) is trace
 * (hi 0xabc0 + r, lo 0x1234 + r) and does, in this order:
 *
 *   main thread:   wl_other:work(-1, "outside")          no task open: dropped by the importer
 *                  task 1 frontend/handle (root)  begin, event "accepted"
 *                  task 2 frontend/query (parent 1) begin, event "sql",
 *                         wl_other:work(r, "inside", 0.25)   an event of task 2
 *   worker thread: task 3 backend/serve (parent 2) begin, event "read",
 *                         wl_other:work(100 + r, "worker", 0.5)   an event of task 3,
 *                  task 3 end, status 2 (error); the thread is joined
 *   main thread:   edge message from task 2 to task 3, task 2 end (ok), task 1 end (ok)
 *
 * Then trace (hi 0xdead, lo 1) task 7 frontend/cut begins, has event "last" and never ends.
 * So N requests make 3N + 1 tasks, 3N + 1 weft events, 2N other events inside tasks, N
 * outside, 2N parent edges and N message edges.  Deterministic; no timing in it.  Both
 * providers are defined here (statically linked), so the program links -llttng-ust -ldl only:
 * weft's by WEFT_TRACE_DEFINE, wl_other's after it in the same file (LTTng's "create probes"
 * is consumed by each provider header, the tracepoint definitions stay on).
 */
#define WEFT_TRACE_DEFINE
#include <weft/trace.h>
#define LTTNG_UST_TRACEPOINT_CREATE_PROBES
#include "wl_lttng_other.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct req {
	uint64_t hi, lo;
	int r;
};

static void *worker(void *arg)
{
	const struct req *q = arg;

	WEFT_TASK_BEGIN(q->hi, q->lo, 3, 2, "backend", "serve");
	WEFT_EVENT(q->hi, q->lo, 3, "read");
	lttng_ust_tracepoint(wl_other, work, 100 + q->r, "worker", 0.5);
	WEFT_TASK_END(q->hi, q->lo, 3, WEFT_STATUS_ERROR);
	return NULL;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 3;

	if (n < 0 || n > 100000)
		n = 3;
	for (int r = 0; r < n; r++) {
		struct req q = { 0xabc0u + (uint64_t)r, 0x1234u + (uint64_t)r, r };
		pthread_t t;

		lttng_ust_tracepoint(wl_other, work, -1, "outside", 0.0);
		WEFT_TASK_BEGIN(q.hi, q.lo, 1, 0, "frontend", "handle");
		WEFT_EVENT(q.hi, q.lo, 1, "accepted");
		WEFT_TASK_BEGIN(q.hi, q.lo, 2, 1, "frontend", "query");
		WEFT_EVENT(q.hi, q.lo, 2, "sql");
		lttng_ust_tracepoint(wl_other, work, r, "inside", 0.25);
		if (pthread_create(&t, NULL, worker, &q) != 0 || pthread_join(t, NULL) != 0) {
			fprintf(stderr, "wl_lttng: cannot run the worker thread\n");
			return 1;
		}
		WEFT_EDGE(q.hi, q.lo, WEFT_EDGE_MESSAGE, 2, 0, 3, 0);
		WEFT_TASK_END(q.hi, q.lo, 2, WEFT_STATUS_OK);
		WEFT_TASK_END(q.hi, q.lo, 1, WEFT_STATUS_OK);
	}
	WEFT_TASK_BEGIN(0xdead, 1, 7, 0, "frontend", "cut");
	WEFT_EVENT(0xdead, 1, 7, "last");
	printf("wl_lttng: %ld requests\n", n);
	return 0;
}

// SPDX-License-Identifier: Apache-2.0
/*
 * End to end, scheduler edges into kernel and span tasks (docs/graphs.md, "Scheduler and
 * process edges"): a thread pool of an unmodified program.  `weft run` of
 *   from kernel:sockets, kernel:sched, span(uprobe:WL:handle) where comm = 'wl_pool' graph
 * over tests/workloads/wl_pool W N 40 (a reader thread hands each of N requests of its client,
 * over TCP on 127.0.0.1, to one of W worker threads through a mutex and a condition variable;
 * the worker's handle() makes the reply, which the reader writes; the client pauses 40 ms
 * between requests, so that they spread over several drains).  The store must hold
 * exactly N traces, each exactly:
 *   - a client task ("request 127.0.0.1:PORT", the client process, the root), a `message`
 *     edge to the server task ("serve :PORT", the reader: the server's main thread);
 *   - a `wakeup` edge from the server task to a handle task on a worker thread (no parent:
 *     the wakeup the reader made inside its exchange brought the worker's span, which would
 *     root a trace of its own, into the server task's trace);
 *   - nothing else: 3 tasks, 2 edges, no event;
 * every edge of source kernel; the summary: N traces, 3N tasks, 2N edges (as made, before
 * the store keeps each (kind, from, to) once a trace: one wakeup a hand-off), nothing bad, no wakeup lost
 * to a full table, no record lost.  Wakeups that name no task (thread creation, the accept,
 * the client's exit, interrupts) are counted in kernel_unowned and make nothing.
 * They must be stored while weft still runs (each trace whole whenever the store is read),
 * and the store hold exactly the same after the end.
 * Needs root and the sock tracepoints (Linux 6.3); skipped otherwise.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <limits.h>
#include <signal.h>
#include <stdlib.h>

#include "graph/store.h"
#include "run_util.h"
#include "tests/kedges_expect.h"
#include "tests/skip.h"

#define N_REQ 60
#define N_WORKERS 3
#define PAUSE_MS "40" /* between requests: 60 of them over some 2.5 s, several drains */

static char wl_path[PATH_MAX], dir[PATH_MAX];

static int setup(void **state)
{
	(void)state;
	if (getenv("WEFT_BINARY_DIR") && !realpath(wr_workload("wl_pool"), wl_path))
		return -1;
	snprintf(dir, sizeof(dir), "/tmp/weft-test-kpool-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return wr_rm_rf(dir);
}

/* One trace of the pool: checks its shape exactly; the worker's thread into *wtid. */
static void check_trace(const struct graph *g, long server, int64_t *wtid)
{
	const struct graph_task *cl = NULL, *sv = NULL, *wk = NULL;
	unsigned port = 0, cport = 0;

	assert_int_equal(g->ntasks, 3);
	assert_int_equal(g->nevents, 0);
	assert_int_equal(g->nedges, 2);
	for (size_t i = 0; i < g->ntasks; i++) {
		const struct graph_task *k = &g->tasks[i];

		assert_string_equal(k->service, "wl_pool");
		assert_int_equal(k->source, GRAPH_SRC_KERNEL);
		assert_int_equal(k->parent, 0);
		if (sscanf(k->name, "request 127.0.0.1:%u", &cport) == 1) {
			assert_null(cl);
			cl = k;
		} else if (sscanf(k->name, "serve :%u", &port) == 1) {
			assert_null(sv);
			sv = k;
		} else {
			assert_string_equal(k->name, "handle");
			assert_null(wk);
			wk = k;
		}
	}
	assert_non_null(cl);
	assert_non_null(sv);
	assert_non_null(wk);
	assert_int_equal(port, cport);
	assert_true(cl->pid != server);
	assert_int_equal(sv->pid, server);
	assert_int_equal(sv->tid, server); /* the reader is the main thread */
	assert_int_equal(wk->pid, server);
	assert_true(wk->tid != server);
	/* the worker's work lies inside the server's: after the request, before the reply */
	assert_true(sv->start <= wk->start && wk->end <= sv->end);
	for (size_t i = 0; i < g->nedges; i++) {
		const struct graph_edge *e = &g->edges[i];

		assert_int_equal(e->source, GRAPH_SRC_KERNEL);
		if (e->kind == GRAPH_EDGE_MESSAGE) {
			assert_int_equal(e->from_task, cl->id);
			assert_int_equal(e->to_task, sv->id);
		} else {
			assert_int_equal(e->kind, GRAPH_EDGE_WAKEUP);
			assert_int_equal(e->from_task, sv->id);
			assert_int_equal(e->to_task, wk->id);
		}
	}
	assert_true(g->edges[0].kind != g->edges[1].kind);
	*wtid = wk->tid;
}

/* The traces of the store, each checked exactly (check_trace); their number. */
static ssize_t check_store(const char *store, long server)
{
	struct graph_trace_row *rows;
	int64_t wtids[N_WORKERS] = { 0 };
	int nwtids = 0;
	struct graph_store *s;
	char hex[33];
	ssize_t n;

	s = ke_store_list(store, &rows, &n);
	for (ssize_t i = 0; i < n; i++) {
		struct graph g;
		int64_t wt = 0;
		bool known = false;

		ke_store_load(s, &rows[i], &g, hex);
		check_trace(&g, server, &wt);
		for (int k = 0; k < nwtids; k++)
			known |= wtids[k] == wt;
		if (!known) {
			assert_true(nwtids < N_WORKERS); /* W workers at most */
			wtids[nwtids++] = wt;
		}
		graph_free(&g);
	}
	free(rows);
	graph_store_close(s);
	return n;
}

static void test_pool(void **state)
{
	char store[PATH_MAX + 16], query[2 * PATH_MAX], line[4096], nw[16], nr[16];
	char *argv[] = { wl_path, nw, nr, (char *)PAUSE_MS, NULL };
	struct wr_proc p, wl;
	long server;
	struct wj *v;

	(void)state;
	snprintf(store, sizeof(store), "%s/kpool.db", dir);
	snprintf(nw, sizeof(nw), "%d", N_WORKERS);
	snprintf(nr, sizeof(nr), "%d", N_REQ);
	snprintf(query, sizeof(query),
		 "from kernel:sockets, kernel:sched, span(uprobe:%s:handle) "
		 "where comm = 'wl_pool' graph",
		 wl_path);
	assert_int_equal(wr_weft_start(&p, "--format", "json", "--ringbuf-size", "64MiB",
				       "--graph-store", store, query, (char *)NULL),
			 0);
	if (wr_wait_err(&p, "attached", WR_TIMEOUT_MS) != 0) {
		wr_finish(&p, 5000);
		wr_dump(&p, query);
		fail_msg("weft run did not attach");
	}
	if (wr_start(&wl, argv) != 0)
		fail_msg("wl_pool did not start");
	server = wl.pid;
	if (wr_finish(&wl, WR_TIMEOUT_MS) != 0 ||
	    !wr_cut_line(&wl.out, "wl_pool: ", line, sizeof(line))) {
		wr_dump(&wl, "wl_pool");
		fail_msg("wl_pool failed");
	}
	wr_free(&wl);
	/* while weft still runs, the workload gone: every request is stored within a few
	 * seconds (its exchanges complete by the clock, then the next drain), each trace whole
	 * at every look (a worker's span joining a trace stored already would show here) */
	{
		uint64_t t0 = wr_now_ms(), end = t0 + 15000; /* a drain a second: ~2 s */
		ssize_t n = 0;

		while (n < N_REQ && wr_now_ms() < end) {
			wr_pump(&p, 200);
			n = check_store(store, server);
		}
		printf("# while weft ran: %zd traces after %llu ms\n", n,
		       (unsigned long long)(wr_now_ms() - t0));
		assert_int_equal(n, N_REQ);
	}
	kill(p.pid, SIGINT);
	if (wr_finish(&p, WR_TIMEOUT_MS) != 0) {
		wr_dump(&p, query);
		fail_msg("weft run failed");
	}
	if (!wr_cut_line(&p.out, "{\"type\":\"graph\"", line, sizeof(line))) {
		wr_dump(&p, query);
		fail_msg("no graph summary");
	}
	v = wj_parse(line, strlen(line));
	assert_non_null(v);
	print_message("summary: %s\n", line);
	assert_int_equal(wj_int_of(v, "traces"), N_REQ);
	assert_int_equal(wj_int_of(v, "tasks"), 3 * N_REQ);
	/* every edge counted (the store keeps each once a trace): one message and one wakeup a
	 * request, the reader's signal to a sleeping worker being the only wakeup between them */
	assert_int_equal(wj_int_of(v, "edges"), 2 * N_REQ);
	assert_int_equal(wj_int_of(v, "bad"), 0);
	assert_int_equal(wj_int_of(v, "kernel_pending_full"), 0);
	assert_int_equal(wj_int_of(wj_get(v, "lost"), "ringbuf_full"), 0);
	wj_free(v);
	wr_free(&p);

	assert_int_equal(check_store(store, server), N_REQ);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pool),
	};

	if (!wr_ready() || !ke_sock_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, setup, teardown));
}

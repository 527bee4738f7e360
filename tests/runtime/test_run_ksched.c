// SPDX-License-Identifier: Apache-2.0
/*
 * End to end, scheduler and process edges (`kernel:sched`, `kernel:process`; docs/graphs.md,
 * "Scheduler and process edges"): `weft run` of
 *   from usdt:WL:weft:*, kernel:sched, kernel:process where comm = 'wl_sched' graph
 * over tests/workloads/wl_sched (N futex hand-offs between two threads in weft tasks, then K
 * forked children that exec it again), the trace read back from the graph store.  Exact:
 *   - wakeup edges: main -> worker = A + 1 (A futex wakes the workload counted, plus the new
 *     thread's first wakeup), worker -> main = B, main -> child k = 1 (the new process's);
 *   - fork edges: main -> worker = 1 (the clone), main -> child k = 1;
 *   (the trace stores each (kind, from, to) once, the per-type aggregates count every edge:
 *   the counts are checked there, as the context's share per task of the main type, one);
 *   - child k's task: one exec event naming the program, one exit event, ended by its
 *     thread's exit with status unset;
 *   - no other edge of these kinds, no other event, 2 + K tasks.
 * Needs root and the sched tracepoints (every supported kernel has them); skipped otherwise.
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
#include "tests/skip.h"

#define N_ROUNDS 500
#define N_CHILD 5
#define TRACE_HI 0x7765667400000005ull /* as tests/workloads/wl_sched.c */

static char wl_path[PATH_MAX], dir[PATH_MAX];

static int setup(void **state)
{
	(void)state;
	if (getenv("WEFT_BINARY_DIR") && !realpath(wr_workload("wl_sched"), wl_path))
		return -1;
	snprintf(dir, sizeof(dir), "/tmp/weft-test-ksched-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	return wr_rm_rf(dir);
}

static long edges(const struct graph *g, enum graph_edge_kind k, uint64_t from, uint64_t to)
{
	long n = 0;

	for (size_t i = 0; i < g->nedges; i++)
		n += g->edges[i].kind == k && g->edges[i].from_task == from &&
		     g->edges[i].to_task == to;
	return n;
}

static long edges_of(const struct graph *g, enum graph_edge_kind k)
{
	long n = 0;

	for (size_t i = 0; i < g->nedges; i++)
		n += g->edges[i].kind == k;
	return n;
}

/* The aggregate count of edges (kind, from -> to): their share per task of the from task's type,
 * which is one task here; 0 when the trace has no such edge (it is stored once). */
static double count_of(const struct graph *g, const struct graph_context *cx,
		       enum graph_edge_kind k, uint64_t from, uint64_t to)
{
	for (size_t i = 0; i < g->nedges; i++)
		if (g->edges[i].kind == k && g->edges[i].from_task == from &&
		    g->edges[i].to_task == to)
			return cx->edges[i].share;
	return 0;
}

static void test_sched_process(void **state)
{
	char store[PATH_MAX + 16], query[2 * PATH_MAX], line[4096], rounds[16], kids[16];
	char why[512] = "", hex[33], want[PATH_MAX + 32];
	long wakes_main = -1, wakes_worker = -1, forks = -1;
	struct graph_store *s;
	char *argv[] = { wl_path, rounds, kids, NULL };
	struct wr_proc p, wl;
	struct graph_context cx;
	struct graph g;
	struct wj *v;

	(void)state;
	snprintf(store, sizeof(store), "%s/ksched.db", dir);
	snprintf(rounds, sizeof(rounds), "%d", N_ROUNDS);
	snprintf(kids, sizeof(kids), "%d", N_CHILD);
	snprintf(query, sizeof(query),
		 "from usdt:%s:weft:*, kernel:sched, kernel:process where comm = 'wl_sched' graph",
		 wl_path);
	/* not -c: that traces the command's process only, and the children are others */
	assert_int_equal(wr_weft_start(&p, "--format", "json", "--ringbuf-size", "64MiB",
				       "--graph-store", store, query, (char *)NULL),
			 0);
	if (wr_wait_err(&p, "attached", WR_TIMEOUT_MS) != 0) {
		wr_finish(&p, 5000);
		wr_dump(&p, query);
		fail_msg("weft run did not attach");
	}
	if (wr_start(&wl, argv) != 0 || wr_finish(&wl, WR_TIMEOUT_MS) != 0) {
		wr_dump(&wl, "wl_sched");
		fail_msg("wl_sched failed");
	}
	if (!wr_cut_line(&wl.out, "wl_sched: ", line, sizeof(line))) {
		wr_dump(&wl, "wl_sched");
		fail_msg("no workload line");
	}
	wr_free(&wl);
	kill(p.pid, SIGINT);
	if (wr_finish(&p, WR_TIMEOUT_MS) != 0) {
		wr_dump(&p, query);
		fail_msg("weft run failed");
	}
	assert_int_equal(sscanf(line, "wl_sched: wakes %ld %ld forks %ld", &wakes_main,
				&wakes_worker, &forks),
			 3);
	assert_int_equal(forks, N_CHILD);
	/* the token changes hands 2N times; a side asleep when it is given one is woken */
	assert_true(wakes_main >= 0 && wakes_main <= N_ROUNDS);
	assert_true(wakes_worker >= 0 && wakes_worker <= N_ROUNDS);
	if (!wr_cut_line(&p.out, "{\"type\":\"graph\"", line, sizeof(line))) {
		wr_dump(&p, query);
		fail_msg("no graph summary");
	}
	v = wj_parse(line, strlen(line));
	assert_non_null(v);
	assert_int_equal(wj_int_of(v, "traces"), 1);
	assert_int_equal(wj_int_of(v, "tasks"), 2 + N_CHILD);
	assert_int_equal(wj_int_of(v, "bad"), 0);
	assert_int_equal(wj_int_of(v, "kernel_pending_full"), 0);
	assert_int_equal(wj_int_of(wj_get(v, "lost"), "ringbuf_full"), 0);
	wj_free(v);
	wr_free(&p);

	s = graph_store_open(store, why, sizeof(why));
	if (!s)
		fail_msg("%s: %s", store, why);
	graph_id128_hex((struct graph_id128){ TRACE_HI, 1 }, hex);
	graph_init(&g);
	if (graph_store_load(s, hex, &g, why, sizeof(why)) != 0)
		fail_msg("trace %s: %s", hex, why);
	assert_int_equal(g.ntasks, 2 + N_CHILD);
	/* a trace keeps each (kind, from, to) once; the aggregates count every edge */
	assert_int_equal(graph_store_context(s, &g, &cx, why, sizeof(why)), 0);
	assert_int_equal(edges(&g, GRAPH_EDGE_WAKEUP, 1, 2), 1);
	assert_int_equal(edges(&g, GRAPH_EDGE_WAKEUP, 2, 1), wakes_worker > 0);
	assert_int_equal(edges(&g, GRAPH_EDGE_FORK, 1, 2), 1);
	assert_true(count_of(&g, &cx, GRAPH_EDGE_WAKEUP, 1, 2) == (double)(wakes_main + 1));
	assert_true(count_of(&g, &cx, GRAPH_EDGE_WAKEUP, 2, 1) == (double)wakes_worker);
	assert_true(count_of(&g, &cx, GRAPH_EDGE_FORK, 1, 2) == 1.0);
	for (uint64_t k = 0; k < N_CHILD; k++) {
		assert_int_equal(edges(&g, GRAPH_EDGE_WAKEUP, 1, 100 + k), 1);
		assert_int_equal(edges(&g, GRAPH_EDGE_FORK, 1, 100 + k), 1);
		/* one each per child: N_CHILD of the shape main -> child */
		assert_true(count_of(&g, &cx, GRAPH_EDGE_WAKEUP, 1, 100 + k) == (double)N_CHILD);
		assert_true(count_of(&g, &cx, GRAPH_EDGE_FORK, 1, 100 + k) == (double)N_CHILD);
	}
	assert_int_equal(edges_of(&g, GRAPH_EDGE_WAKEUP), 1 + (wakes_worker > 0) + N_CHILD);
	assert_int_equal(edges_of(&g, GRAPH_EDGE_FORK), 1 + N_CHILD);
	for (size_t i = 0; i < g.nedges; i++)
		if (g.edges[i].kind == GRAPH_EDGE_WAKEUP || g.edges[i].kind == GRAPH_EDGE_FORK)
			assert_int_equal(g.edges[i].source, GRAPH_SRC_KERNEL);
	snprintf(want, sizeof(want), "{\"filename\":\"%s\"}", wl_path);
	assert_int_equal(g.nevents, 2 * N_CHILD);
	for (uint64_t k = 0; k < N_CHILD; k++) {
		int nexec = 0, nexit = 0;

		for (size_t i = 0; i < g.nevents; i++) {
			if (g.events[i].task != 100 + k)
				continue;
			if (strcmp(g.events[i].name, "exec") == 0) {
				assert_string_equal(g.events[i].attrs, want);
				nexec++;
			} else {
				assert_string_equal(g.events[i].name, "exit");
				nexit++;
			}
		}
		assert_int_equal(nexec, 1);
		assert_int_equal(nexit, 1);
	}
	for (size_t i = 0; i < g.ntasks; i++)
		assert_int_equal(g.tasks[i].status,
				 g.tasks[i].id >= 100 ? GRAPH_STATUS_UNSET : GRAPH_STATUS_OK);
	graph_context_free(&cx);
	graph_free(&g);
	graph_store_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sched_process),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, setup, teardown));
}

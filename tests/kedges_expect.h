/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The traces of kernel edges that `redis-benchmark -c 1 -n N -t set -P 1` against an
 * unmodified redis-server makes, traced with `from kernel:sockets,
 * span(uprobe:REDIS:processCommand) ... graph` (docs/graphs.md, "Kernel edges"), as
 * tests/runtime/test_run_kedges.c (one host, `weft run`) and
 * tests/cluster/test_cluster_kedges.c (two hosts, the aggregator's matching) check them among
 * the other traces of a store:
 *   - N traces of a SET: a client task (redis-benchmark, "request ADDR:6379", the root), a
 *     message edge from it to a server task (redis-server, "serve :6379", a root too) and one
 *     processCommand task, the server task's child on its thread, with a parent edge;
 *   - 1 trace of the settings (CONFIG GET save and CONFIG GET appendonly in one write): the
 *     same with two processCommand children;
 * and no other trace may hold a task of this redis-server (all of its work is accounted).
 * Traces of other processes called redis-benchmark are told apart by pid and not counted.
 *
 * ke_store_list() and ke_store_load() read a store's traces one by one for these tests and
 * the other kernel-edge tests (test_run_kpool, test_run_ksock).
 *
 * Header-only, with cmocka's checks (include <cmocka.h> first): a trace of this benchmark of
 * any other shape fails the test.
 */
#ifndef WEFT_TEST_KEDGES_EXPECT_H
#define WEFT_TEST_KEDGES_EXPECT_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "graph/graph.h"
#include "graph/store.h"

/* Whether the kernel has the sock tracepoints kernel:sockets reads; if not, says so on
 * stderr. */
static inline bool ke_sock_ready(void)
{
	if (access("/sys/kernel/tracing/events/sock/sock_send_length", F_OK) != 0 &&
	    access("/sys/kernel/debug/tracing/events/sock/sock_send_length", F_OK) != 0) {
		fprintf(stderr, "skipped: the kernel has no sock:sock_send_length tracepoint\n");
		return false;
	}
	return true;
}

struct ke_redis {
	long bench, redis; /* the pids of this redis-benchmark and this redis-server */
	char request[64]; /* the client task's name: "request ADDR:6379", "request [ADDR]:6379" */
	const char *client_host, *server_host; /* the tasks' hosts; NULL: not checked */
	/* further checks of a trace's client and server tasks; NULL: none */
	void (*check_pair)(const struct graph_task *cl, const struct graph_task *sv);
};

/*
 * 0 (not this benchmark's trace: no task of its pid), or the number of processCommand tasks
 * of a trace of exactly the expected shape; fails the test on any other shape.  *has_redis:
 * whether a task of the trace is redis-server's.
 */
static inline int ke_redis_trace(const struct graph *g, const struct ke_redis *x, bool *has_redis)
{
	const struct graph_task *cl = NULL, *sv = NULL;
	int npc = 0, nmsg = 0, npar = 0;

	*has_redis = false;
	for (size_t i = 0; i < g->ntasks; i++) {
		*has_redis |= g->tasks[i].pid == x->redis;
		if (g->tasks[i].pid == x->bench)
			cl = &g->tasks[i];
	}
	if (!cl)
		return 0;
	assert_string_equal(cl->service, "redis-benchmark");
	assert_string_equal(cl->name, x->request);
	if (x->client_host)
		assert_string_equal(cl->host, x->client_host);
	assert_int_equal(cl->parent, 0);
	assert_int_equal(cl->source, GRAPH_SRC_KERNEL);
	for (size_t i = 0; i < g->ntasks; i++)
		if (strcmp(g->tasks[i].name, "serve :6379") == 0) {
			assert_null(sv);
			sv = &g->tasks[i];
		}
	if (!sv)
		fail_msg("a trace of redis-benchmark without a server task");
	assert_int_equal(sv->pid, x->redis);
	assert_string_equal(sv->service, "redis-server");
	if (x->server_host)
		assert_string_equal(sv->host, x->server_host);
	assert_int_equal(sv->parent, 0);
	if (x->check_pair)
		x->check_pair(cl, sv);
	for (size_t i = 0; i < g->ntasks; i++) {
		const struct graph_task *k = &g->tasks[i];

		if (k == cl || k == sv)
			continue;
		assert_string_equal(k->name, "processCommand");
		if (x->server_host)
			assert_string_equal(k->host, x->server_host);
		assert_int_equal(k->parent, sv->id);
		assert_int_equal(k->tid, sv->tid);
		assert_true(k->start >= sv->start && k->end <= sv->end);
		npc++;
	}
	for (size_t i = 0; i < g->nedges; i++) {
		const struct graph_edge *e = &g->edges[i];

		if (e->kind == GRAPH_EDGE_MESSAGE) {
			assert_int_equal(e->from_task, cl->id);
			assert_int_equal(e->to_task, sv->id);
			nmsg++;
		} else {
			assert_int_equal(e->kind, GRAPH_EDGE_PARENT);
			assert_int_equal(e->from_task, sv->id);
			npar++;
		}
	}
	assert_int_equal(nmsg, 1);
	assert_int_equal(npar, npc);
	assert_int_equal(g->ntasks, 2 + (size_t)npc);
	return npc;
}

/*
 * The graph store at `path` opened and its traces (a million at most) listed into *rows, *n
 * of them; fails the test if it cannot be read.  graph_store_close() it, free() *rows.
 */
static inline struct graph_store *ke_store_list(const char *path, struct graph_trace_row **rows,
						ssize_t *n)
{
	struct graph_filter f = { .limit = 1000000 };
	struct graph_store *s;
	char why[512] = "";

	*rows = NULL;
	s = graph_store_open(path, why, sizeof(why));
	if (!s)
		fail_msg("%s: %s", path, why);
	*n = graph_store_list(s, &f, rows, why, sizeof(why));
	if (*n < 0)
		fail_msg("list: %s", why);
	return s;
}

/* The trace of `row` loaded into g (initialised here; graph_free() it), its id into hex;
 * fails the test if it cannot be loaded. */
static inline void ke_store_load(struct graph_store *s, const struct graph_trace_row *row,
				 struct graph *g, char hex[33])
{
	char why[512] = "";

	graph_id128_hex(row->trace, hex);
	graph_init(g);
	if (graph_store_load(s, hex, g, why, sizeof(why)) != 0)
		fail_msg("load %s: %s", hex, why);
}

/*
 * The traces of the graph store at `store` by their number of processCommand tasks
 * (ke_redis_trace(); 0: not this benchmark's) into by_npc[3]; fails the test on a trace with
 * more than two, or one that holds work of redis-server but no request.
 */
static inline void ke_redis_count(const char *store, const struct ke_redis *x, long by_npc[3])
{
	struct graph_trace_row *rows;
	struct graph_store *s;
	ssize_t n;

	memset(by_npc, 0, 3 * sizeof(*by_npc));
	s = ke_store_list(store, &rows, &n);
	for (ssize_t i = 0; i < n; i++) {
		struct graph g;
		char hex[33];
		bool has_redis;
		int k;

		ke_store_load(s, &rows[i], &g, hex);
		k = ke_redis_trace(&g, x, &has_redis);
		if (k == 0 && has_redis)
			fail_msg("trace %s holds work of redis-server but no request", hex);
		if (k > 2)
			fail_msg("trace %s: %d processCommand tasks", hex, k);
		by_npc[k]++;
		graph_free(&g);
	}
	free(rows);
	graph_store_close(s);
}

#endif

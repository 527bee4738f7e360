/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The exact graphs of tests/workloads/wl_graph.c, checked in a graph store however they got
 * there (`weft run`: tests/runtime/test_run_graph.c; agents and an aggregator:
 * tests/cluster/test_cluster_graph.c).  Request i (0-based) is trace {WL_GRAPH_TRACE_HI,
 * i + 1} of two tasks on the workload's thread: 1 frontend/request (root; status error when
 * i % 1000 == 999) and 2 backend/query (parent 1) with one "cache_miss" event, plus a "retry"
 * when i % 100 == 7, and one message edge 1 -> 2.
 *
 * Header-only, for cmocka tests: include <cmocka.h> (and its prerequisites) first.
 */
#ifndef WEFT_TEST_GRAPH_WL_H
#define WEFT_TEST_GRAPH_WL_H
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "graph/aggs.h"
#include "graph/store.h"

#define WL_GRAPH_TRACE_HI 0x7765667400000001ull /* as tests/workloads/wl_graph.c */

static inline const struct graph_type_stats *type_of(const struct graph_type_stats *rows, ssize_t n,
						     const char *svc, const char *name)
{
	for (ssize_t i = 0; i < n; i++)
		if (strcmp(rows[i].service, svc) == 0 && strcmp(rows[i].name, name) == 0)
			return &rows[i];
	fail_msg("no type %s: %s in the store", svc, name);
	return NULL;
}

static inline const struct graph_task *task_of(const struct graph *g, uint64_t id)
{
	for (size_t i = 0; i < g->ntasks; i++)
		if (g->tasks[i].id == id)
			return &g->tasks[i];
	return NULL;
}

/* Checks the stored trace of request i exactly; returns false if it is not stored. */
static inline bool check_request(struct graph_store *s, long i, const char *host)
{
	struct graph_id128 id = { WL_GRAPH_TRACE_HI, (uint64_t)i + 1 };
	char hex[33], why[512] = "";
	struct graph g;
	const struct graph_task *root, *child;
	int rc, ncache = 0, nretry = 0;

	graph_id128_hex(id, hex);
	graph_init(&g);
	rc = graph_store_load(s, hex, &g, why, sizeof(why));
	if (rc == -ENOENT) {
		graph_free(&g);
		return false;
	}
	if (rc)
		fail_msg("request %ld: %s", i, why);
	assert_int_equal(g.ntasks, 2);
	root = task_of(&g, 1);
	child = task_of(&g, 2);
	assert_non_null(root);
	assert_non_null(child);
	assert_int_equal(root->parent, 0);
	assert_string_equal(root->service, "frontend");
	assert_string_equal(root->name, "request");
	assert_int_equal(root->status, i % 1000 == 999 ? GRAPH_STATUS_ERROR : GRAPH_STATUS_OK);
	assert_int_equal(child->parent, 1);
	assert_string_equal(child->service, "backend");
	assert_string_equal(child->name, "query");
	assert_int_equal(child->status, GRAPH_STATUS_OK);
	assert_int_equal(root->source, GRAPH_SRC_WEFT);
	assert_string_equal(root->host, host);
	/* one thread: the child runs inside the root, both on the workload's thread */
	assert_true(root->pid > 0 && root->tid == root->pid);
	assert_int_equal(child->pid, root->pid);
	assert_int_equal(child->tid, root->tid);
	assert_true(root->start <= child->start && child->end <= root->end);
	for (size_t k = 0; k < g.nevents; k++) {
		assert_int_equal(g.events[k].task, 2);
		assert_true(g.events[k].time >= child->start && g.events[k].time <= child->end);
		ncache += strcmp(g.events[k].name, "cache_miss") == 0;
		nretry += strcmp(g.events[k].name, "retry") == 0;
	}
	assert_int_equal(ncache, 1);
	assert_int_equal(nretry, i % 100 == 7);
	assert_int_equal(g.nevents, 1 + (i % 100 == 7));
	assert_int_equal(g.nedges, 1);
	assert_int_equal(g.edges[0].kind, GRAPH_EDGE_MESSAGE);
	assert_int_equal(g.edges[0].from_task, 1);
	assert_int_equal(g.edges[0].to_task, 2);
	graph_free(&g);
	return true;
}

/* The aggregates of all N requests, whatever was kept. */
static inline void check_aggregates(struct graph_store *s, long n)
{
	struct graph_type_stats *rows = NULL;
	char why[512] = "";
	ssize_t nt = graph_store_stats(s, &rows, why, sizeof(why));
	const struct graph_type_stats *be, *fe;
	bool retry = false, cache = false;

	if (nt < 0)
		fail_msg("stats: %s", why);
	assert_int_equal(nt, 2);
	be = type_of(rows, nt, "backend", "query");
	fe = type_of(rows, nt, "frontend", "request");
	assert_int_equal(be->count, n);
	assert_int_equal(fe->count, n);
	for (uint32_t k = 0; k < be->nrare_events; k++) {
		if (strcmp(be->rare_events[k].name, "retry") == 0) {
			retry = true;
			assert_int_equal(be->rare_events[k].tasks, n / 100);
		}
		if (strcmp(be->rare_events[k].name, "cache_miss") == 0) {
			cache = true;
			assert_int_equal(be->rare_events[k].tasks, n);
		}
	}
	assert_true(retry && cache);
	assert_int_equal(fe->nrare_edges, 1);
	assert_string_equal(fe->rare_edges[0].service, "backend");
	assert_int_equal(fe->rare_edges[0].kind, GRAPH_EDGE_MESSAGE);
	assert_int_equal(fe->rare_edges[0].count, n);
	free(rows);
}

#endif

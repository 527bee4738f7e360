// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of graph/critpath.[ch]: the tree of one trace and its critical path, on graphs
 * built by hand whose paths are worked out in the comments (the "last finishing child" walk:
 * from the end of the root, the child that ended last; from its start, back in the parent,
 * the child that ended last before that point; ...).  Also: ties, children that overflow
 * their parent, a message receiver on another host, follows-from children that are not
 * waited on, a cycle in hostile input, and a chain 200,000 tasks deep (no recursion).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "graph/critpath.h"
#include "graph/graph.h"
#include "graph/import.h"
#include "graph/skew.h"

static const struct graph_id128 TR = { 0, 0xabc };

static void task(struct graph *g, uint64_t id, uint64_t parent, int64_t start, int64_t end,
		 const char *host)
{
	struct graph_task t = {
		.trace = TR,
		.id = id,
		.parent = parent,
		.service = "svc",
		.name = "op",
		.host = host,
		.pid = -1,
		.tid = -1,
		.start = start,
		.end = end,
		.attrs = "{}",
	};

	assert_non_null(graph_add_task(g, &t));
}

static void edge(struct graph *g, enum graph_edge_kind k, uint64_t from, uint64_t to)
{
	struct graph_edge e = { .trace = TR, .kind = k, .from_task = from, .to_task = to };

	assert_non_null(graph_add_edge(g, &e));
}

/* Expected segments as (task id, from, to). */
struct seg {
	uint64_t id;
	int64_t from, to;
};

static void expect_path(const struct graph *g, const struct seg *want, size_t n)
{
	struct graph_critpath cp;

	assert_int_equal(graph_critpath(g, TR, &cp), 0);
	if (cp.n != n) {
		for (size_t i = 0; i < cp.n; i++)
			print_message("got %zu: %llu [%lld, %lld)\n", i,
				      (unsigned long long)g->tasks[cp.segs[i].task].id,
				      (long long)cp.segs[i].from, (long long)cp.segs[i].to);
	}
	assert_int_equal(cp.n, n);
	for (size_t i = 0; i < n; i++) {
		assert_int_equal(g->tasks[cp.segs[i].task].id, want[i].id);
		assert_int_equal(cp.segs[i].from, want[i].from);
		assert_int_equal(cp.segs[i].to, want[i].to);
	}
	graph_critpath_free(&cp);
}

/* R [0,100] with A [10,40], B [20,90], C [50,60]: B ends last; back in R from B's start (20)
 * no child ended before 20 (A ends at 40, C at 60), so R runs to its start. */
static void test_parallel(void **state)
{
	struct graph g;
	const struct seg want[] = { { 1, 0, 20 }, { 3, 20, 90 }, { 1, 90, 100 } };

	(void)state;
	graph_init(&g);
	task(&g, 1, 0, 0, 100, "h");
	task(&g, 2, 1, 10, 40, "h");
	task(&g, 3, 1, 20, 90, "h");
	task(&g, 4, 1, 50, 60, "h");
	expect_path(&g, want, 3);
	graph_free(&g);
}

/* R [0,100] with A [10,30], B [40,70], C [75,95] one after the other: every child is on the
 * path, R fills the gaps. */
static void test_sequential(void **state)
{
	struct graph g;
	const struct seg want[] = { { 1, 0, 10 },  { 2, 10, 30 }, { 1, 30, 40 }, { 3, 40, 70 },
				    { 1, 70, 75 }, { 4, 75, 95 }, { 1, 95, 100 } };

	(void)state;
	graph_init(&g);
	/* added out of order: the walk sorts by end, not by the order of the input */
	task(&g, 3, 1, 40, 70, "h");
	task(&g, 1, 0, 0, 100, "h");
	task(&g, 4, 1, 75, 95, "h");
	task(&g, 2, 1, 10, 30, "h");
	expect_path(&g, want, 7);
	graph_free(&g);
}

/* Nested: R [0,100] > A [10,90] > B [20,50] and A > C [60,80]; C ends last in A, back in A
 * from 60: B ended at 50 < 60. */
static void test_nested(void **state)
{
	struct graph g;
	const struct seg want[] = { { 1, 0, 10 },  { 2, 10, 20 }, { 3, 20, 50 }, { 2, 50, 60 },
				    { 4, 60, 80 }, { 2, 80, 90 }, { 1, 90, 100 } };

	(void)state;
	graph_init(&g);
	task(&g, 1, 0, 0, 100, "h");
	task(&g, 2, 1, 10, 90, "h");
	task(&g, 3, 2, 20, 50, "h");
	task(&g, 4, 2, 60, 80, "h");
	expect_path(&g, want, 7);
	graph_free(&g);
}

/* Ties: A [10,80] and B [30,80] end together; the earlier start (the longer wait) wins. */
static void test_tie(void **state)
{
	struct graph g;
	const struct seg want[] = { { 1, 0, 10 }, { 2, 10, 80 }, { 1, 80, 100 } };

	(void)state;
	graph_init(&g);
	task(&g, 1, 0, 0, 100, "h");
	task(&g, 3, 1, 30, 80, "h");
	task(&g, 2, 1, 10, 80, "h");
	expect_path(&g, want, 3);
	graph_free(&g);
}

/* A child running past its parent is cut at the parent's end: R [0,100], A [50,150] gives
 * R [0,50), A [50,100).  A's child D [120,140] lies outside the part of A that counts and is
 * dropped; E [-20,-10] lies before R altogether. */
static void test_overflow(void **state)
{
	struct graph g;
	const struct seg want[] = { { 1, 0, 50 }, { 2, 50, 100 } };

	(void)state;
	graph_init(&g);
	task(&g, 1, 0, 0, 100, "h");
	task(&g, 2, 1, 50, 150, "h");
	task(&g, 4, 2, 120, 140, "h");
	task(&g, 5, 1, -20, -10, "h");
	expect_path(&g, want, 2);
	graph_free(&g);
}

/* A message to another host: S [20,70] on h2 has no parent but a message edge from R; it is
 * R's dependency, and the path crosses hosts. */
static void test_message(void **state)
{
	struct graph g;
	struct graph_tree t;
	const struct seg want[] = { { 1, 0, 20 }, { 9, 20, 70 }, { 1, 70, 100 } };

	(void)state;
	graph_init(&g);
	task(&g, 1, 0, 0, 100, "h1");
	task(&g, 9, 0, 20, 70, "h2");
	edge(&g, GRAPH_EDGE_MESSAGE, 1, 9);
	expect_path(&g, want, 3);
	assert_int_equal(graph_tree_build(&g, TR, &t), 0);
	assert_int_equal(t.nroots, 1);
	assert_int_equal(t.link[graph_tree_find(&g, &t, 9)], GRAPH_LINK_MESSAGE);
	assert_int_equal(t.depth[graph_tree_find(&g, &t, 9)], 1);
	graph_tree_free(&t);
	graph_free(&g);
}

static void event(struct graph *g, uint64_t task, uint64_t id, int64_t time)
{
	struct graph_event e = {
		.trace = TR, .task = task, .id = id, .time = time, .name = "e", .attrs = "{}"
	};

	assert_non_null(graph_add_event(g, &e));
}

static void event_edge(struct graph *g, enum graph_edge_kind k, uint64_t from, uint64_t fe,
		       uint64_t to, uint64_t te)
{
	struct graph_edge e = { .trace = TR,
				.kind = k,
				.from_task = from,
				.from_event = fe,
				.to_task = to,
				.to_event = te };

	assert_non_null(graph_add_edge(g, &e));
}

/* An RPC as X-Trace records it, with named events: the request A.send (10) -> B.recv (20,
 * B's first event), the reply B.reply (70) -> A.recv (90, in the middle of A).  The reply is
 * no tree link (else A and B would be each other's parent): B is A's child and the path is
 * A [0,20), B [20,70), A [70,100). */
static void test_request_reply(void **state)
{
	struct graph g;
	struct graph_tree t;
	const struct seg want[] = { { 1, 0, 20 }, { 2, 20, 70 }, { 1, 70, 100 } };

	(void)state;
	graph_init(&g);
	/* in this order, taking the reply as a link and cutting the cycle from A's side would
	 * make A the child of B */
	task(&g, 1, 0, 0, 100, "h1");
	task(&g, 2, 0, 20, 70, "h2");
	event(&g, 1, 0xa1, 0);
	event(&g, 1, 0xa2, 10);
	event(&g, 1, 0xa6, 90);
	event(&g, 2, 0xb1, 20);
	event(&g, 2, 0xb5, 70);
	event_edge(&g, GRAPH_EDGE_MESSAGE, 2, 0xb5, 1, 0xa6);
	event_edge(&g, GRAPH_EDGE_MESSAGE, 1, 0xa2, 2, 0xb1);
	assert_int_equal(graph_tree_build(&g, TR, &t), 0);
	assert_int_equal(t.nroots, 1);
	assert_int_equal(g.tasks[t.task[t.roots[0]]].id, 1);
	assert_int_equal(t.link[graph_tree_find(&g, &t, 2)], GRAPH_LINK_MESSAGE);
	graph_tree_free(&t);
	expect_path(&g, want, 3);
	graph_free(&g);
}

/* Follows-from: F [50,150] is drawn under R but R does not wait for it; R is the root (F
 * ends later but has a tree parent) and the path is R alone. */
static void test_follows(void **state)
{
	struct graph g;
	const struct seg want[] = { { 1, 0, 100 } };

	(void)state;
	graph_init(&g);
	task(&g, 1, 0, 0, 100, "h");
	task(&g, 2, 0, 50, 150, "h");
	edge(&g, GRAPH_EDGE_FOLLOWS, 1, 2);
	expect_path(&g, want, 1);
	graph_free(&g);
}

/* Two roots: the one that ends last is walked. */
static void test_two_roots(void **state)
{
	struct graph g;
	struct graph_critpath cp;

	(void)state;
	graph_init(&g);
	task(&g, 1, 0, 0, 100, "h");
	task(&g, 2, 0, 10, 120, "h");
	assert_int_equal(graph_critpath(&g, TR, &cp), 0);
	assert_int_equal(cp.n, 1);
	assert_int_equal(g.tasks[cp.root].id, 2);
	assert_int_equal(cp.segs[0].from, 10);
	assert_int_equal(cp.segs[0].to, 120);
	graph_critpath_free(&cp);
	graph_free(&g);
}

/* Hostile: A and B name each other as parent, beside a real root.  The cycle is cut (one of
 * them becomes a root), nothing loops, and the path still tiles R. */
static void test_cycle(void **state)
{
	struct graph g;
	struct graph_tree t;
	struct graph_critpath cp;

	(void)state;
	graph_init(&g);
	task(&g, 1, 0, 0, 100, "h");
	task(&g, 2, 3, 10, 20, "h");
	task(&g, 3, 2, 30, 40, "h");
	edge(&g, GRAPH_EDGE_MESSAGE, 2, 2); /* a self-message, ignored */
	assert_int_equal(graph_tree_build(&g, TR, &t), 0);
	assert_int_equal(t.nroots, 2);
	assert_int_equal(t.n, 3);
	graph_tree_free(&t);
	assert_int_equal(graph_critpath(&g, TR, &cp), 0);
	assert_int_equal(g.tasks[cp.root].id, 1);
	assert_int_equal(cp.n, 1);
	graph_critpath_free(&cp);
	graph_free(&g);
}

/*
 * A chain N deep: task i (id i + 1) runs [i, 2N - i] under task i - 1.  Going down, each
 * task's last-finishing child ends 1 before it, so every task i < N - 1 gives [2N-i-1, 2N-i);
 * the deepest gives [N-1, N+1); going back up each gives [i, i+1).  2N - 1 segments tiling
 * [0, 2N).
 */
static void test_deep(void **state)
{
	enum { N = 200000 };
	struct graph g;
	struct graph_critpath cp;
	struct graph_tree t;

	(void)state;
	graph_init(&g);
	for (int64_t i = 0; i < N; i++)
		task(&g, (uint64_t)i + 1, (uint64_t)i, i, 2 * N - i, "h");
	assert_int_equal(graph_critpath(&g, TR, &cp), 0);
	assert_int_equal(cp.n, 2 * N - 1);
	assert_int_equal(cp.segs[0].from, 0);
	assert_int_equal(cp.segs[cp.n - 1].to, 2 * N);
	for (size_t i = 1; i < cp.n; i++)
		assert_int_equal(cp.segs[i].from, cp.segs[i - 1].to);
	assert_int_equal(g.tasks[cp.segs[N - 1].task].id, N);
	assert_int_equal(cp.segs[N - 1].from, N - 1);
	assert_int_equal(cp.segs[N - 1].to, N + 1);
	graph_critpath_free(&cp);
	assert_int_equal(graph_tree_build(&g, TR, &t), 0);
	assert_int_equal(t.depth[graph_tree_find(&g, &t, N)], N - 1);
	graph_tree_free(&t);
	graph_free(&g);
}

static void test_unknown_trace(void **state)
{
	struct graph g;
	struct graph_critpath cp;
	struct graph_id128 other = { 1, 2 };

	(void)state;
	graph_init(&g);
	task(&g, 1, 0, 0, 100, "h");
	assert_int_equal(graph_critpath(&g, other, &cp), -ENOENT);
	assert_int_equal(cp.n, 0);
	graph_free(&g);
}

/*
 * Zipkin's UI test traces through the importer (skew corrected first), against a reference
 * written in Python over the raw JSON, independent of weft: one task per span, a shared
 * SERVER span under the CLIENT span of its id, a span whose parentId is a shared id under that
 * id's server half of its own service; Zipkin's skew rule; then Jaeger's walk (children
 * clipped to their parent, dropped with their subtree when outside it; sorted by end, latest
 * first, ties to the earlier start; back in the parent, the next child that ended strictly
 * before the point reached; the root a span without parentId, the one that ends last).  It
 * gave, per file: segments, distinct tasks on the path, and their total (= the root's span).
 * The smartthings files need Zipkin's merging of span pieces, which the reference does not do.
 */
static void test_zipkin_files(void **state)
{
	static const struct {
		const char *file;
		size_t segs, tasks;
		int64_t total;
	} want[] = {
		{ "skew.json", 7, 4, 99411000 },	  { "ascend.json", 11, 6, 38793000 },
		{ "envoy.json", 1, 1, 127115000 },	  { "messaging.json", 3, 2, 2839000 },
		{ "messaging2.json", 6, 4, 29051000 },	  { "messaging-kafka.json", 1, 1, 26000 },
		{ "simple-db-p6.json", 9, 5, 252016000 }, { "yelp.json", 17, 9, 131848000 },
	};
	const char *src = getenv("WEFT_SOURCE_DIR");

	(void)state;
	if (!src)
		skip();
	for (size_t w = 0; w < sizeof(want) / sizeof(want[0]); w++) {
		struct graph_import_err err;
		struct graph_critpath cp;
		char path[1024];
		struct graph g;
		size_t *seen, distinct = 0;
		int64_t total = 0;

		snprintf(path, sizeof(path), "%s/tests/data/zipkin/%s", src, want[w].file);
		graph_init(&g);
		assert_int_equal(graph_import_file(path, GRAPH_FMT_AUTO, &g, &err),
				 GRAPH_FMT_ZIPKIN);
		assert_int_equal(graph_skew_correct_all(&g, NULL), 0);
		assert_int_equal(graph_critpath(&g, g.tasks[0].trace, &cp), 0);
		seen = calloc(g.ntasks, sizeof(*seen));
		assert_non_null(seen);
		for (size_t i = 0; i < cp.n; i++) {
			total += cp.segs[i].to - cp.segs[i].from;
			distinct += !seen[cp.segs[i].task]++;
		}
		if (cp.n != want[w].segs)
			print_message("%s: %zu segments\n", want[w].file, cp.n);
		assert_int_equal(cp.n, want[w].segs);
		assert_int_equal(distinct, want[w].tasks);
		assert_int_equal(total, want[w].total);
		assert_int_equal(total, g.tasks[cp.root].end - g.tasks[cp.root].start);
		free(seen);
		graph_critpath_free(&cp);
		graph_free(&g);
	}
}

/*
 * Hostile shapes, generated: parents pointing anywhere (cycles, self, unknown ids), message,
 * fork and follows edges between random tasks, times in any order.  Whatever the shape, the
 * walk ends, and its segments are in order, back to back, and tile the root's span exactly.
 */
static void test_random_shapes(void **state)
{
	uint64_t x = 0x9e3779b97f4a7c15ULL;

	(void)state;
	for (int round = 0; round < 200; round++) {
		struct graph g;
		struct graph_critpath cp;
		size_t n = 1 + round * 7 % 300;
		int64_t total = 0;

		graph_init(&g);
		for (size_t i = 0; i < n; i++) {
			int64_t a, b;

			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			a = (int64_t)(x % 1000);
			b = a + (int64_t)((x >> 20) % 500);
			task(&g, i + 1, (x >> 40) % (n + 3), a, b, (x >> 50) & 1 ? "h1" : "h2");
		}
		for (size_t i = 0; i < n / 2; i++) {
			static const enum graph_edge_kind kinds[] = { GRAPH_EDGE_MESSAGE,
								      GRAPH_EDGE_FORK,
								      GRAPH_EDGE_FOLLOWS,
								      GRAPH_EDGE_PARENT };

			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			edge(&g, kinds[x % 4], 1 + (x >> 8) % n, 1 + (x >> 24) % n);
		}
		assert_int_equal(graph_critpath(&g, TR, &cp), 0);
		for (size_t i = 0; i < cp.n; i++) {
			assert_true(cp.segs[i].from < cp.segs[i].to);
			if (i)
				assert_int_equal(cp.segs[i].from, cp.segs[i - 1].to);
			total += cp.segs[i].to - cp.segs[i].from;
		}
		assert_int_equal(total, g.tasks[cp.root].end - g.tasks[cp.root].start);
		if (cp.n) {
			assert_int_equal(cp.segs[0].from, g.tasks[cp.root].start);
			assert_int_equal(cp.segs[cp.n - 1].to, g.tasks[cp.root].end);
		}
		graph_critpath_free(&cp);
		graph_free(&g);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parallel),      cmocka_unit_test(test_sequential),
		cmocka_unit_test(test_nested),	      cmocka_unit_test(test_tie),
		cmocka_unit_test(test_overflow),      cmocka_unit_test(test_message),
		cmocka_unit_test(test_follows),	      cmocka_unit_test(test_two_roots),
		cmocka_unit_test(test_cycle),	      cmocka_unit_test(test_deep),
		cmocka_unit_test(test_unknown_trace), cmocka_unit_test(test_zipkin_files),
		cmocka_unit_test(test_request_reply), cmocka_unit_test(test_random_shapes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

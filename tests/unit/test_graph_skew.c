// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of graph/skew.[ch]: clock-skew correction as Zipkin does it.
 *
 * The reference case is Zipkin's UI test trace skew.json (tests/data/zipkin/skew.json), whose
 * four spans are built here by hand as the Zipkin importer models them: a client and a
 * server half sharing an RPC's id become two tasks joined by a message edge.  Zipkin's
 * algorithm (zipkin-lens clock-skew.js, getClockSkew()) worked by hand, in microseconds:
 *
 *   get   servicea 127.0.0.0  root                        start 4071068  dur 99411
 *   post  servicea 127.0.0.0  CLIENT, child of get         start 4074202  dur 94539
 *   post  serviceb 192.0.0.0  SERVER, shared               start 4008761  dur 93577
 *   async serviceb 192.0.0.0  child of the server half     start 4008762  dur 65000
 *   (all starts 1470150000000000 + the figure shown)
 *
 * The server starts before its client (4008761 <= 4074202) on another host; the client
 * lasted longer (94539 >= 93577), so latency = (94539 - 93577) / 2 = 481 and the server is
 * moved to start at 4074202 + 481 = 4074683: a shift of 4074683 - 4008761 = +65922 µs.  The
 * async span is on the server's host below it: moved by the same +65922 to 4074684.  The
 * root and the client stay.  Zipkin's own test of this file checks that every child then
 * starts after its parent and siblings are in order: 4071068 < 4074202 < 4074683 < 4074684.
 *
 * Then each rule on its own: no correction on one host, none when the server starts after
 * the client, the one-way and async 1 µs cases, producer -> consumer left alone, traces with
 * several roots left alone, events moved with their task, and correcting twice changing
 * nothing.
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

#define US 1000LL
#define T0 1470150000000000LL /* µs */

static const struct graph_id128 TR = { 0, 0x1e223ff1f80f1c69ULL };

static struct graph_task *task(struct graph *g, uint64_t id, uint64_t parent, const char *svc,
			       const char *host, int64_t start_us, int64_t dur_us,
			       const char *attrs)
{
	struct graph_task t = {
		.trace = TR,
		.id = id,
		.parent = parent,
		.service = svc,
		.name = "op",
		.host = host,
		.pid = -1,
		.tid = -1,
		.start = start_us * US,
		.end = (start_us + dur_us) * US,
		.attrs = attrs,
		.source = GRAPH_SRC_ZIPKIN,
	};

	return graph_add_task(g, &t);
}

static void edge(struct graph *g, enum graph_edge_kind k, uint64_t from, uint64_t to)
{
	struct graph_edge e = { .trace = TR, .kind = k, .from_task = from, .to_task = to };

	assert_non_null(graph_add_edge(g, &e));
}

static const struct graph_task *find(const struct graph *g, uint64_t id)
{
	for (size_t i = 0; i < g->ntasks; i++)
		if (g->tasks[i].id == id)
			return &g->tasks[i];
	fail_msg("no task %llu", (unsigned long long)id);
	return NULL;
}

enum {
	ROOT = 0xbf396325699c84bfULL,
	CLIENT = 0x74280ae0c10d8062ULL,
	SERVER = 0x5e5e,
	ASYNC = 0x43210ae0c10d1234ULL
};

/* skew.json as the Zipkin importer models it (see the top of the file) */
static void build_skew_json(struct graph *g, bool with_kinds)
{
	struct graph_event ev = { .trace = TR,
				  .task = ASYNC,
				  .time = (T0 + 4008800) * US,
				  .name = "mark",
				  .attrs = "{}" };

	graph_init(g);
	assert_non_null(task(g, ASYNC, SERVER, "serviceb", "192.0.0.0", T0 + 4008762, 65000, "{}"));
	assert_non_null(task(g, SERVER, CLIENT, "serviceb", "192.0.0.0", T0 + 4008761, 93577,
			     with_kinds ? "{\"kind\":\"SERVER\"}" : "{}"));
	assert_non_null(task(g, ROOT, 0, "servicea", "127.0.0.0", T0 + 4071068, 99411,
			     with_kinds ? "{\"kind\":\"SERVER\"}" : "{}"));
	assert_non_null(task(g, CLIENT, ROOT, "servicea", "127.0.0.0", T0 + 4074202, 94539,
			     with_kinds ? "{\"kind\":\"CLIENT\"}" : "{}"));
	edge(g, GRAPH_EDGE_MESSAGE, CLIENT, SERVER);
	assert_non_null(graph_add_event(g, &ev));
}

static void check_skew_json(const struct graph *g)
{
	assert_int_equal(find(g, ROOT)->start, (T0 + 4071068) * US);
	assert_int_equal(find(g, ROOT)->skew, 0);
	assert_int_equal(find(g, CLIENT)->start, (T0 + 4074202) * US);
	assert_int_equal(find(g, CLIENT)->skew, 0);
	assert_int_equal(find(g, SERVER)->start, (T0 + 4074683) * US);
	assert_int_equal(find(g, SERVER)->end, (T0 + 4074683 + 93577) * US);
	assert_int_equal(find(g, SERVER)->skew, 65922 * US);
	assert_int_equal(find(g, ASYNC)->start, (T0 + 4074684) * US);
	assert_int_equal(find(g, ASYNC)->skew, 65922 * US);
	/* the event moved with its task */
	assert_int_equal(g->events[0].time, (T0 + 4008800 + 65922) * US);
}

static void test_zipkin_skew_json(void **state)
{
	struct graph g;
	struct graph_skew_stats st = { 0 };

	(void)state;
	build_skew_json(&g, true);
	assert_int_equal(graph_skew_correct(&g, TR, &st), 0);
	check_skew_json(&g);
	assert_int_equal(st.corrections, 1);
	assert_int_equal(st.tasks, 2);
	assert_int_equal(st.events, 1);
	assert_int_equal(st.skipped, 0);

	/* a second pass finds nothing more */
	memset(&st, 0, sizeof(st));
	assert_int_equal(graph_skew_correct_all(&g, &st), 0);
	assert_int_equal(st.corrections, 0);
	check_skew_json(&g);
	graph_free(&g);
}

/* Without span kinds, the message edge alone makes the pair an RPC: the same result. */
static void test_message_without_kinds(void **state)
{
	struct graph g;

	(void)state;
	build_skew_json(&g, false);
	assert_int_equal(graph_skew_correct_all(&g, NULL), 0);
	check_skew_json(&g);
	graph_free(&g);
}

/*
 * After correction, the critical path of skew.json (µs after T0), worked by hand:
 * get [4071068, 4170479], post client [4074202, 4168741], post server [4074683, 4168260],
 * async [4074684, 4139684].  From get's end: client (its only child) ended at 4168741; in the
 * client, the server ended 4168260; in the server, async ended 4139684; async has no child so
 * it runs [4074684, 4139684); back in the server no child ended before 4074684, so the server
 * runs [4074683, 4074684); then the client [4074202, 4074683) and get [4071068, 4074202).
 */
static void test_skew_json_critpath(void **state)
{
	struct graph g;
	struct graph_critpath cp;
	const struct {
		uint64_t id;
		int64_t from, to;
	} want[] = {
		{ ROOT, 4071068, 4074202 },   { CLIENT, 4074202, 4074683 },
		{ SERVER, 4074683, 4074684 }, { ASYNC, 4074684, 4139684 },
		{ SERVER, 4139684, 4168260 }, { CLIENT, 4168260, 4168741 },
		{ ROOT, 4168741, 4170479 },
	};

	(void)state;
	build_skew_json(&g, true);
	assert_int_equal(graph_skew_correct_all(&g, NULL), 0);
	assert_int_equal(graph_critpath(&g, TR, &cp), 0);
	assert_int_equal(cp.n, 7);
	for (size_t i = 0; i < 7; i++) {
		assert_int_equal(g.tasks[cp.segs[i].task].id, want[i].id);
		assert_int_equal(cp.segs[i].from, (T0 + want[i].from) * US);
		assert_int_equal(cp.segs[i].to, (T0 + want[i].to) * US);
	}
	graph_critpath_free(&cp);
	graph_free(&g);
}

/* A client (20, dur 20) and server (10, dur 10) pair in the shapes of Zipkin's own
 * getClockSkew tests; returns the server's shift. */
static int64_t pair(const char *chost, const char *shost, int64_t cstart, int64_t cdur,
		    int64_t sstart, int64_t sdur, const char *ckind, const char *skind)
{
	struct graph g;
	char ca[64], sa[64];
	int64_t skew;

	snprintf(ca, sizeof(ca), "{\"kind\":\"%s\"}", ckind);
	snprintf(sa, sizeof(sa), "{\"span.kind\":\"%s\"}", skind);
	graph_init(&g);
	assert_non_null(task(&g, 1, 0, "frontend", chost, 1000000 + cstart, cdur, ca));
	assert_non_null(task(&g, 2, 1, "backend", shost, 1000000 + sstart, sdur, sa));
	assert_int_equal(graph_skew_correct(&g, TR, NULL), 0);
	skew = find(&g, 2)->skew;
	assert_int_equal(find(&g, 2)->start, (1000000 + sstart) * US + skew);
	assert_int_equal(find(&g, 1)->skew, 0);
	graph_free(&g);
	return skew;
}

static void test_rules(void **state)
{
	const char *fe = "172.17.0.13", *be = "172.17.0.9";

	(void)state;
	/* one host: an instrumentation bug, not skew */
	assert_int_equal(pair(fe, fe, 20, 20, 10, 10, "CLIENT", "SERVER"), 0);
	/* unknown host on either side: nothing to compare */
	assert_int_equal(pair("", be, 20, 20, 10, 10, "CLIENT", "SERVER"), 0);
	/* the server after the client: no skew */
	assert_int_equal(pair(fe, be, 20, 20, 30, 10, "CLIENT", "SERVER"), 0);
	/* half the difference of durations: server to 20 + (20 - 10) / 2 = 25, shift +15 µs */
	assert_int_equal(pair(fe, be, 20, 20, 10, 10, "CLIENT", "SERVER"), 15 * US);
	/* OTLP's spelling of kinds works the same */
	assert_int_equal(pair(fe, be, 20, 20, 10, 10, "SPAN_KIND_CLIENT", "SPAN_KIND_SERVER"),
			 15 * US);
	/* async: the client ended first (dur 5 < 10): server to 20 + 1 = 21, shift +11 µs */
	assert_int_equal(pair(fe, be, 20, 5, 10, 10, "CLIENT", "SERVER"), 11 * US);
	/* one-way (no server duration): server to 21, shift +11 µs */
	assert_int_equal(pair(fe, be, 20, 20, 10, 0, "CLIENT", "SERVER"), 11 * US);
	/* equal starts are skew too (Zipkin tests server > client): 20 + 5 = 25, +5 µs */
	assert_int_equal(pair(fe, be, 20, 20, 20, 10, "CLIENT", "SERVER"), 5 * US);
	/* producer -> consumer: never corrected, as in Zipkin */
	assert_int_equal(pair(fe, be, 20, 20, 10, 10, "PRODUCER", "CONSUMER"), 0);
	/* a plain parent and child with no kinds and no message: no proof */
	assert_int_equal(pair(fe, be, 20, 20, 10, 10, "", ""), 0);
	/* server kind under a server: not an RPC pair */
	assert_int_equal(pair(fe, be, 20, 20, 10, 10, "SERVER", "SERVER"), 0);
}

/* Zipkin skips a trace with two roots (its "duplicate root"): nothing moves. */
static void test_two_roots_skipped(void **state)
{
	struct graph g;
	struct graph_skew_stats st = { 0 };

	(void)state;
	build_skew_json(&g, true);
	assert_non_null(task(&g, 0xcafebabe, 0, "curtain", "10.0.0.1", T0, 1, "{}"));
	assert_int_equal(graph_skew_correct_all(&g, &st), 0);
	assert_int_equal(st.skipped, 1);
	assert_int_equal(st.tasks, 0);
	assert_int_equal(find(&g, SERVER)->start, (T0 + 4008761) * US);
	assert_int_equal(find(&g, SERVER)->skew, 0);
	graph_free(&g);
}

/*
 * The shift follows the server's host down the tree, through other hosts: server S on h2
 * (shifted) -> client C2 on h2 -> server X on h3 (not skewed) -> task Y on h2 below X, which
 * moves with S's shift; Z on h3 below X does not.
 *   root R h1 [100, 200]  client C h1 [110, 190]  server S h2 [50, 120] (70 long; latency
 *   (80 - 70) / 2 = 5: to 115, +65)  C2 h2 child of S [60, 100] -> [125, 165]
 *   X h3 [130, 160] (after C2, no skew)  Y h2 under X [70, 80] -> [135, 145]  Z h3 [140, 150]
 */
static void test_propagation(void **state)
{
	struct graph g;

	(void)state;
	graph_init(&g);
	assert_non_null(task(&g, 1, 0, "r", "h1", 100, 100, "{}"));
	assert_non_null(task(&g, 2, 1, "c", "h1", 110, 80, "{\"kind\":\"client\"}"));
	assert_non_null(task(&g, 3, 2, "s", "h2", 50, 70, "{\"kind\":\"server\"}"));
	assert_non_null(task(&g, 4, 3, "c2", "h2", 60, 40, "{\"kind\":\"client\"}"));
	assert_non_null(task(&g, 5, 4, "x", "h3", 130, 30, "{\"kind\":\"server\"}"));
	assert_non_null(task(&g, 6, 5, "y", "h2", 70, 10, "{}"));
	assert_non_null(task(&g, 7, 5, "z", "h3", 140, 10, "{}"));
	assert_int_equal(graph_skew_correct_all(&g, NULL), 0);
	assert_int_equal(find(&g, 3)->start, 115 * US);
	assert_int_equal(find(&g, 4)->start, 125 * US);
	assert_int_equal(find(&g, 5)->skew, 0);
	assert_int_equal(find(&g, 6)->start, 135 * US);
	assert_int_equal(find(&g, 6)->skew, 65 * US);
	assert_int_equal(find(&g, 7)->skew, 0);
	graph_free(&g);
}

/* Many traces in one batch are each corrected: two copies of skew.json under two ids. */
static void test_many_traces(void **state)
{
	struct graph g;
	struct graph_skew_stats st = { 0 };
	size_t n;

	(void)state;
	build_skew_json(&g, true);
	n = g.ntasks;
	for (size_t i = 0; i < n; i++) {
		struct graph_task t = g.tasks[i];

		t.trace.hi = 7;
		assert_non_null(graph_add_task(&g, &t));
	}
	edge(&g, GRAPH_EDGE_MESSAGE, CLIENT, SERVER);
	g.edges[g.nedges - 1].trace.hi = 7;
	assert_int_equal(graph_skew_correct_all(&g, &st), 0);
	assert_int_equal(st.corrections, 2);
	assert_int_equal(st.tasks, 4);
	for (size_t i = 0; i < g.ntasks; i++)
		if (g.tasks[i].id == SERVER)
			assert_int_equal(g.tasks[i].skew, 65922 * US);
	graph_free(&g);
}

static const struct graph_task *find_type(const struct graph *g, const char *svc, const char *name)
{
	for (size_t i = 0; i < g->ntasks; i++)
		if (!strcmp(g->tasks[i].service, svc) && !strcmp(g->tasks[i].name, name))
			return &g->tasks[i];
	fail_msg("no task %s: %s", svc, name);
	return NULL;
}

/* The file itself, through the Zipkin importer: the same corrections as worked out above. */
static void test_skew_json_file(void **state)
{
	const char *src = getenv("WEFT_SOURCE_DIR");
	struct graph_import_err err;
	struct graph_skew_stats st = { 0 };
	const struct graph_task *server = NULL, *client = NULL;
	char path[1024];
	struct graph g;

	(void)state;
	if (!src)
		skip();
	snprintf(path, sizeof(path), "%s/tests/data/zipkin/skew.json", src);
	graph_init(&g);
	assert_int_equal(graph_import_file(path, GRAPH_FMT_AUTO, &g, &err), GRAPH_FMT_ZIPKIN);
	assert_int_equal(g.ntasks, 4);
	assert_int_equal(graph_skew_correct_all(&g, &st), 0);
	assert_int_equal(st.corrections, 1);
	assert_int_equal(st.tasks, 2);
	for (size_t i = 0; i < g.ntasks; i++) {
		if (!strcmp(g.tasks[i].name, "post") && !strcmp(g.tasks[i].service, "serviceb"))
			server = &g.tasks[i];
		if (!strcmp(g.tasks[i].name, "post") && !strcmp(g.tasks[i].service, "servicea"))
			client = &g.tasks[i];
	}
	assert_non_null(server);
	assert_non_null(client);
	assert_int_equal(find_type(&g, "servicea", "get")->start, (T0 + 4071068) * US);
	assert_int_equal(find_type(&g, "servicea", "get")->skew, 0);
	assert_int_equal(client->start, (T0 + 4074202) * US);
	assert_int_equal(client->skew, 0);
	assert_int_equal(server->start, (T0 + 4074683) * US);
	assert_int_equal(server->end, (T0 + 4074683 + 93577) * US);
	assert_int_equal(server->skew, 65922 * US);
	assert_int_equal(find_type(&g, "serviceb", "async")->start, (T0 + 4074684) * US);
	assert_int_equal(find_type(&g, "serviceb", "async")->skew, 65922 * US);
	graph_free(&g);
}

/* Zipkin's other test traces: it corrects none of them, so nothing moves.  Checked on the raw
 * files with a few lines of Python: in none does a SERVER span start at or before its CLIENT
 * parent (or the CLIENT half of its id) on another ipv4. */
static void test_other_zipkin_files(void **state)
{
	static const char *const files[] = {
		"ascend.json",		"envoy.json",	     "messaging.json", "messaging2.json",
		"messaging-kafka.json", "simple-db-p6.json", "yelp.json"
	};
	const char *src = getenv("WEFT_SOURCE_DIR");

	(void)state;
	if (!src)
		skip();
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		struct graph_import_err err;
		struct graph_skew_stats st = { 0 };
		char path[1024];
		struct graph g;

		snprintf(path, sizeof(path), "%s/tests/data/zipkin/%s", src, files[i]);
		graph_init(&g);
		assert_int_equal(graph_import_file(path, GRAPH_FMT_AUTO, &g, &err),
				 GRAPH_FMT_ZIPKIN);
		assert_int_equal(graph_skew_correct_all(&g, &st), 0);
		assert_int_equal(st.corrections, 0);
		assert_int_equal(st.tasks, 0);
		graph_free(&g);
	}
}

/*
 * Generated shapes: random trees (and cycles) of clients and servers on three hosts with
 * random times and message edges.  Nothing crashes, every moved task moved by its skew, and a
 * second pass finds nothing to correct.
 */
static void test_random_idempotent(void **state)
{
	static const char *const hosts[] = { "h1", "h2", "h3", "" };
	static const char *const kinds[] = { "{\"kind\":\"CLIENT\"}", "{\"kind\":\"SERVER\"}",
					     "{}" };
	uint64_t x = 0x2545f4914f6cdd1dULL;

	(void)state;
	for (int round = 0; round < 200; round++) {
		struct graph g;
		struct graph_skew_stats st = { 0 };
		size_t n = 2 + round % 60;
		int64_t orig[64][2];

		graph_init(&g);
		for (size_t i = 0; i < n; i++) {
			x ^= x << 13, x ^= x >> 7, x ^= x << 17;
			assert_non_null(task(&g, i + 1, i ? 1 + (x >> 40) % i : 0, "s",
					     hosts[(x >> 8) % 4], 1000 + (int64_t)(x % 500),
					     (int64_t)((x >> 16) % 300), kinds[(x >> 32) % 3]));
			if ((x >> 60) & 1 && i)
				edge(&g, GRAPH_EDGE_MESSAGE, 1 + (x >> 24) % i, i + 1);
		}
		for (size_t i = 0; i < n; i++) {
			orig[i][0] = g.tasks[i].start;
			orig[i][1] = g.tasks[i].end;
		}
		assert_int_equal(graph_skew_correct_all(&g, &st), 0);
		/* the shift is recorded: start - skew and end - skew are the times as imported */
		for (size_t i = 0; i < g.ntasks; i++) {
			const struct graph_task *t = &g.tasks[i];

			assert_int_equal(t->start - t->skew, orig[t->id - 1][0]);
			assert_int_equal(t->end - t->skew, orig[t->id - 1][1]);
		}
		memset(&st, 0, sizeof(st));
		assert_int_equal(graph_skew_correct_all(&g, &st), 0);
		assert_int_equal(st.corrections, 0);
		assert_int_equal(st.tasks, 0);
		graph_free(&g);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_zipkin_skew_json),
		cmocka_unit_test(test_message_without_kinds),
		cmocka_unit_test(test_skew_json_critpath),
		cmocka_unit_test(test_rules),
		cmocka_unit_test(test_two_roots_skipped),
		cmocka_unit_test(test_propagation),
		cmocka_unit_test(test_many_traces),
		cmocka_unit_test(test_skew_json_file),
		cmocka_unit_test(test_other_zipkin_files),
		cmocka_unit_test(test_random_idempotent),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

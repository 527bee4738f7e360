// SPDX-License-Identifier: Apache-2.0
/*
 * aggregator/aggd_kx.c: kernel message edges matched across batches (docs/graphs.md, "Across
 * hosts"), on graphs made here as two agents would ship them: a client task with its sends
 * in "kernel.sends", a server task rooting its own trace with its first receive in
 * "kernel.recv" and a child span.  Either order of arrival joins them into one trace with one
 * message edge; later pieces of a moved trace follow it; a move that would split a stored
 * trace is not made; attributes that are not an agent's are counted, never trusted; IPv6
 * addresses (text) match as IPv4 ones do, v4-mapped ones as IPv4.  (The
 * real two-host run is tests/cluster/test_cluster_kedges.c.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "aggregator/aggd_kx.h"

#define CADDR 0x0a000002u /* 10.0.0.2, the client */
#define SADDR 0x0a000001u /* 10.0.0.1, the server */

static const struct graph_id128 TC = { 1, 100 }, TS = { 2, 200 };

/* The client's batch: one task (id 11) with the attributes a. */
static void client_attrs(struct graph *g, const char *a)
{
	struct graph_task t = { .trace = TC,
				.id = 11,
				.service = "bench",
				.name = "request",
				.host = "c",
				.pid = 1,
				.tid = 1,
				.start = 10,
				.end = 20,
				.source = GRAPH_SRC_KERNEL };

	t.attrs = graph_strdup(g, a);
	assert_non_null(graph_add_task(g, &t));
}

/* The client's batch: one task (id 11) that sent [seq - len, seq) from port cport. */
static void client(struct graph *g, unsigned cport, unsigned seq, unsigned len)
{
	char a[160];

	snprintf(a, sizeof(a), "{\"kernel.sends\":[[%u,%u,%u,6379,%u,%u]]}", CADDR, cport, SADDR,
		 seq, len);
	client_attrs(g, a);
}

/* The server's batch: a server task (id 21) with the attributes a and a child span. */
static void server_attrs(struct graph *g, const char *a)
{
	struct graph_task t = { .trace = TS,
				.id = 21,
				.service = "redis",
				.name = "serve",
				.host = "s",
				.pid = 2,
				.tid = 2,
				.start = 12,
				.end = 18,
				.source = GRAPH_SRC_KERNEL };
	struct graph_task c = { .trace = TS,
				.id = 22,
				.parent = 21,
				.service = "redis",
				.name = "processCommand",
				.host = "s",
				.pid = 2,
				.tid = 2,
				.start = 13,
				.end = 17,
				.source = GRAPH_SRC_WEFT,
				.attrs = "{}" };
	struct graph_edge e = {
		.trace = TS, .kind = GRAPH_EDGE_PARENT, .from_task = 21, .to_task = 22
	};

	t.attrs = graph_strdup(g, a);
	assert_non_null(graph_add_task(g, &t));
	assert_non_null(graph_add_task(g, &c));
	assert_non_null(graph_add_edge(g, &e));
}

/* The server's batch: a server task (id 21) that read [seq - len, seq) and a child span. */
static void server(struct graph *g, unsigned cport, unsigned seq, unsigned len)
{
	char a[160];

	snprintf(a, sizeof(a), "{\"kernel.recv\":[%u,6379,%u,%u,%u,%u]}", SADDR, CADDR, cport, seq,
		 len);
	server_attrs(g, a);
}

static bool never(void *arg, struct graph_id128 t)
{
	(void)arg;
	(void)t;
	return false;
}

static bool always(void *arg, struct graph_id128 t)
{
	(void)arg;
	(void)t;
	return true;
}

static size_t msg_edges(const struct graph *g, uint64_t from, uint64_t to, struct graph_id128 tr)
{
	size_t n = 0;

	for (size_t i = 0; i < g->nedges; i++)
		n += g->edges[i].kind == GRAPH_EDGE_MESSAGE && g->edges[i].from_task == from &&
		     g->edges[i].to_task == to && graph_id128_eq(g->edges[i].trace, tr);
	return n;
}

static void all_in(const struct graph *g, struct graph_id128 tr)
{
	for (size_t i = 0; i < g->ntasks; i++)
		assert_true(graph_id128_eq(g->tasks[i].trace, tr));
	for (size_t i = 0; i < g->nedges; i++)
		assert_true(graph_id128_eq(g->edges[i].trace, tr));
}

/* The send first: the server's trace (task and child) moves into the client's. */
static void test_send_first(void **state)
{
	struct aggd_kx *k = aggd_kx_new();
	struct aggd_kx_stats st;
	struct graph c, s, later;

	(void)state;
	graph_init(&c);
	graph_init(&s);
	graph_init(&later);
	client(&c, 40000, 1027, 27);
	server(&s, 40000, 1027, 27);
	assert_int_equal(aggd_kx_batch(k, 7, &c, never, NULL), 0);
	assert_int_equal(c.nedges, 0);
	assert_true(graph_id128_eq(c.tasks[0].trace, TC));
	assert_int_equal(aggd_kx_batch(k, 7, &s, never, NULL), 0);
	all_in(&s, TC);
	assert_int_equal(msg_edges(&s, 11, 21, TC), 1);
	assert_int_equal(s.nedges, 2);
	/* a later piece of the server's trace follows it */
	{
		struct graph_task t = { .trace = TS,
					.id = 23,
					.parent = 21,
					.service = "redis",
					.name = "late",
					.host = "s",
					.attrs = "{}" };

		assert_non_null(graph_add_task(&later, &t));
	}
	assert_int_equal(aggd_kx_batch(k, 7, &later, never, NULL), 0);
	assert_true(graph_id128_eq(later.tasks[0].trace, TC));
	aggd_kx_stats(k, &st);
	assert_int_equal(st.matched, 1);
	assert_int_equal(st.bad + st.split + st.dropped, 0);
	graph_free(&c);
	graph_free(&s);
	graph_free(&later);
	aggd_kx_free(k);
}

/* The receive first: the client's task moves into the server's (stored) trace. */
static void test_recv_first(void **state)
{
	struct aggd_kx *k = aggd_kx_new();
	struct aggd_kx_stats st;
	struct graph c, s, other;

	(void)state;
	graph_init(&c);
	graph_init(&s);
	graph_init(&other);
	server(&s, 40001, 5000, 100);
	assert_int_equal(aggd_kx_batch(k, 7, &s, never, NULL), 0);
	assert_true(graph_id128_eq(s.tasks[0].trace, TS));
	assert_int_equal(s.nedges, 1);
	/* another query's client, and a client whose bytes do not overlap: no match */
	client(&other, 40001, 5000, 100);
	assert_int_equal(aggd_kx_batch(k, 8, &other, never, NULL), 0);
	assert_true(graph_id128_eq(other.tasks[0].trace, TC));
	graph_free(&other);
	graph_init(&other);
	client(&other, 40001, 4900, 100); /* [4800, 4900): before the receive's [4900, 5000) */
	assert_int_equal(aggd_kx_batch(k, 7, &other, never, NULL), 0);
	assert_int_equal(other.nedges, 0);
	/* the sender: half of the receive's bytes */
	client(&c, 40001, 4950, 100);
	assert_int_equal(aggd_kx_batch(k, 7, &c, never, NULL), 0);
	all_in(&c, TS);
	assert_int_equal(msg_edges(&c, 11, 21, TS), 1);
	aggd_kx_stats(k, &st);
	assert_int_equal(st.matched, 1);
	graph_free(&c);
	graph_free(&s);
	graph_free(&other);
	aggd_kx_free(k);
}

/* A trace stored in pieces already is not moved (it would split): counted. */
static void test_split(void **state)
{
	struct aggd_kx *k = aggd_kx_new();
	struct aggd_kx_stats st;
	struct graph c, s;

	(void)state;
	graph_init(&c);
	graph_init(&s);
	client(&c, 40002, 100, 10);
	server(&s, 40002, 100, 10);
	assert_int_equal(aggd_kx_batch(k, 7, &c, never, NULL), 0);
	assert_int_equal(aggd_kx_batch(k, 7, &s, always, NULL), 0);
	all_in(&s, TS);
	assert_int_equal(s.nedges, 1);
	aggd_kx_stats(k, &st);
	assert_int_equal(st.matched, 0);
	assert_int_equal(st.split, 1);
	graph_free(&c);
	graph_free(&s);
	aggd_kx_free(k);
}

/*
 * IPv6: the addresses as text match as numbers do, whatever the text's form (the server's
 * written in full, upper case); a v4-mapped text is its IPv4 address and matches an IPv4
 * client's numbers; an IPv6 client never matches an IPv4 server with the same ports.
 */
static void test_ipv6(void **state)
{
	struct aggd_kx *k = aggd_kx_new();
	struct aggd_kx_stats st;
	struct graph c, s;

	(void)state;
	graph_init(&c);
	graph_init(&s);
	client_attrs(&c,
		     "{\"kernel.sends\":[[\"2001:db8::2\",40000,\"2001:db8::1\",6379,1027,27]]}");
	assert_int_equal(aggd_kx_batch(k, 7, &c, never, NULL), 0);
	server(&s, 40000, 1027, 27); /* IPv4, same ports and bytes: not the sender's peer */
	assert_int_equal(aggd_kx_batch(k, 7, &s, never, NULL), 0);
	assert_int_equal(s.nedges, 1);
	assert_true(graph_id128_eq(s.tasks[0].trace, TS));
	graph_free(&s);
	graph_init(&s);
	server_attrs(&s, "{\"kernel.recv\":[\"2001:DB8:0:0:0:0:0:1\",6379,\"2001:db8::2\",40000,"
			 "1027,27]}");
	assert_int_equal(aggd_kx_batch(k, 7, &s, never, NULL), 0);
	all_in(&s, TC);
	assert_int_equal(msg_edges(&s, 11, 21, TC), 1);
	graph_free(&c);
	graph_free(&s);
	/* v4-mapped: the server's IPv6 socket talking IPv4 (10.0.0.1 <- 10.0.0.2); query 8,
	 * where TS was not moved */
	graph_init(&c);
	graph_init(&s);
	server_attrs(&s, "{\"kernel.recv\":[\"::ffff:10.0.0.1\",6379,\"::ffff:10.0.0.2\",40003,"
			 "300,30]}");
	assert_int_equal(aggd_kx_batch(k, 8, &s, never, NULL), 0);
	client(&c, 40003, 300, 30);
	assert_int_equal(aggd_kx_batch(k, 8, &c, never, NULL), 0);
	all_in(&c, TS);
	assert_int_equal(msg_edges(&c, 11, 21, TS), 1);
	aggd_kx_stats(k, &st);
	assert_int_equal(st.matched, 2);
	assert_int_equal(st.bad + st.split, 0);
	graph_free(&c);
	graph_free(&s);
	aggd_kx_free(k);
}

/* Attributes that are not what an agent writes: counted, the batch left as it came. */
static void test_hostile(void **state)
{
	static const char *const bad[] = {
		"{\"kernel.recv\":[1,2,3]}",
		"{\"kernel.recv\":\"x\"}",
		"{\"kernel.recv\":[1,70000,3,4,5,6]}",
		"{\"kernel.recv\":[-1,1,3,4,5,6]}",
		"{\"kernel.recv\":[1,1,3,4,5,0]}",
		"{\"kernel.recv\":[1,1,3,4,5,4294967296]}",
		"{\"kernel.recv\":[1,1,3,4,5,1.5]}",
		"{\"kernel.sends\":{}}",
		"{\"kernel.sends\":[[1,1,3,4,5,6],7]}",
		"{\"kernel.sends\":[null]}",
		"{\"kernel.recv\":[\"::1\",1,3,4,5,6]}", /* one address text, one number */
		"{\"kernel.recv\":[1,1,\"::1\",4,5,6]}",
		"{\"kernel.recv\":[\"::1::2\",1,\"::1\",4,5,6]}",
		"{\"kernel.recv\":[\"10.0.0.1\",1,\"::1\",4,5,6]}", /* IPv4 is a number */
		"{\"kernel.recv\":[\"::1\",\"1\",\"::1\",4,5,6]}",
		"{\"kernel.recv\":[\"\",1,\"::1\",4,5,6]}",
		"{\"kernel.sends\":[[\"::1\",1,\"::2\",4,5,0]]}",
	};
	struct aggd_kx *k = aggd_kx_new();
	struct aggd_kx_stats st;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct graph g;
		struct graph_task t = { .trace = TS,
					.id = 21,
					.service = "x",
					.name = "y",
					.host = "s",
					.source = GRAPH_SRC_KERNEL,
					.attrs = bad[i] };

		graph_init(&g);
		assert_non_null(graph_add_task(&g, &t));
		assert_int_equal(aggd_kx_batch(k, 7, &g, never, NULL), 0);
		assert_int_equal(g.ntasks, 1);
		assert_int_equal(g.nedges, 0);
		assert_true(graph_id128_eq(g.tasks[0].trace, TS));
		graph_free(&g);
	}
	aggd_kx_stats(k, &st);
	assert_int_equal(st.bad, sizeof(bad) / sizeof(bad[0]));
	assert_int_equal(st.matched, 0);
	aggd_kx_free(k);
	/* no state: nothing done */
	{
		struct graph g;

		graph_init(&g);
		server(&g, 1, 2, 1);
		assert_int_equal(aggd_kx_batch(NULL, 7, &g, never, NULL), 0);
		assert_int_equal(g.nedges, 1);
		graph_free(&g);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_send_first), cmocka_unit_test(test_recv_first),
		cmocka_unit_test(test_split),	   cmocka_unit_test(test_ipv6),
		cmocka_unit_test(test_hostile),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

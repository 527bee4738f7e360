// SPDX-License-Identifier: Apache-2.0
/*
 * Graph batches through a real `weft aggregator` over real CURVE-secured ZeroMQ on loopback:
 * two test senders, each authenticated with its own agent key ("h1", "h2"), ship the pieces
 * of the same traces that two hosts would hold, and the aggregator stitches them in its graph
 * store.
 *
 *   stitching   six traces: three whole (a root on h1, a message edge to its child on h2,
 *               an event of the child on h2), and three that stay incomplete: h2's piece of
 *               T4 never comes (h1's edge names a task that is not there), h1's piece of T5
 *               never comes (h2's child names a parent that is not there), and T6's root
 *               never ended.  After the query's last window the store holds exactly the
 *               stitched traces (tasks, parents, hosts, edges, events, read back from the
 *               file) and `weft graph list` marks exactly T4, T5, T6 with their reasons;
 *               `weft status` counts the batches and elements, and the checked and
 *               incomplete traces.
 *   hostile     a batch naming another host than its sender's, a batch of an agent holding
 *               a task of another host, a batch whose attributes are not a JSON object, and
 *               a malformed batch (a task of id 0, packed without the codec's checks) are
 *               refused and counted in `rejected`, and nothing of them is stored.
 *   resent      after a reconnect (the same sender instance, a new socket), the Welcome
 *               says the batch was merged (last_seq); the batch sent again with its old seq
 *               is acknowledged and not stored; sent again with a new seq (what a sender
 *               that never saw the Ack would do) its tasks are recognised as stored: the
 *               store's counts do not change, `replaced` counts them.
 *
 *   tree        the same senders reporting to a region aggregator: it stores their batches
 *               and passes them up its parent link; the root's graph store holds the same
 *               stitched traces, with their hosts, marked the same.
 *   agent       end to end: `weft submit` of a graph query (`from usdt:wl_graph:weft:*
 *               graph every 1s`), run by a real `weft agent` over wl_graph making N_REQ
 *               requests: the aggregator's graph store then holds exactly N_REQ traces of
 *               exactly wl_graph's tasks, parents, events, edges and statuses (tests/
 *               graph_wl.h), its per-type aggregates count all N_REQ, and the windows that
 *               `weft submit --format json` printed sum to exactly those traces and
 *               elements, the last one saying none is incomplete.
 *   agent_small_batches the same with the agent's `--graph-batch-max 7`: a window's elements
 *               go as many batches, every request still stored exactly once.
 *   agent_sampled the same with `sample 10%`: exactly the traces the hash selects plus the
 *               agent's outliers are stored, and the aggregates count all N_REQ.
 *   retain      `weft aggregator --graph-max-age 1h`: of h1's pieces (2023) and one trace of
 *               now, the old five are dropped on their own within seconds, the new one is
 *               kept, `weft status` counts 5 dropped, and the aggregates still count all six;
 *               after the query ends only the kept trace is checked, the dropped ones not
 *               (and not logged as errors).
 *
 * The query the batches belong to is an ordinary aggregating one (the graph form of a query
 * comes from the language; what the aggregator does with batches does not depend on it):
 * it gives the batches a query id and an end, after which the traces are checked.  It runs
 * until the test cancels it, after its last batch (a `for` could end it before a slow run
 * sent everything, and a batch after the end is checked on its own: other counts).
 *
 * Needs root (weft submit compiles through the probe catalog); skipped otherwise.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/wire_graph.h"
#include "graph/store.h"
#include "tests/cluster/cluster_util.h"
#include "tests/graph_wl.h"

#define T0 1700000000000000000ll
#define US 1000ll

static struct graph_id128 tr(int k)
{
	return (struct graph_id128){ .hi = 0x7e57000000000000ull | (uint64_t)getpid(),
				     .lo = (uint64_t)k };
}

static void add_task(struct graph *g, int k, uint64_t id, uint64_t parent, const char *svc,
		     const char *name, int64_t start, int64_t end)
{
	struct graph_task t = { .trace = tr(k),
				.id = id,
				.parent = parent,
				.service = svc,
				.name = name,
				.host = "",
				.pid = 100 + (int64_t)id,
				.tid = 100 + (int64_t)id,
				.start = start,
				.end = end,
				.status = GRAPH_STATUS_OK,
				.source = GRAPH_SRC_WEFT,
				.attrs = "{}" };

	assert_non_null(graph_add_task(g, &t));
}

static void add_edge(struct graph *g, int k, uint64_t from, uint64_t to)
{
	struct graph_edge e = { .trace = tr(k),
				.kind = GRAPH_EDGE_MESSAGE,
				.from_task = from,
				.to_task = to,
				.source = GRAPH_SRC_WEFT };

	assert_non_null(graph_add_edge(g, &e));
}

static void add_event(struct graph *g, int k, uint64_t task, const char *name, int64_t t)
{
	struct graph_event e = {
		.trace = tr(k), .task = task, .time = t, .name = name, .attrs = "{}"
	};

	assert_non_null(graph_add_event(g, &e));
}

/* Host h1's pieces: the roots of T1..T4 and T6 (T6's never ended), each with its message
 * edge to the child on h2. */
static void h1_piece(struct graph *g, bool *open)
{
	graph_init(g);
	for (int k = 1; k <= 6; k++) {
		if (k == 5)
			continue; /* h1's piece of T5 is lost */
		open[g->ntasks] = k == 6;
		add_task(g, k, 1, 0, "front", "GET /cart", T0 + k * 1000 * US,
			 T0 + k * 1000 * US + 500 * US);
		if (k != 6)
			add_edge(g, k, 1, 2);
	}
}

/* Host h2's pieces: the children of T1..T3 and T5 (T4's is lost), each with an event. */
static void h2_piece(struct graph *g)
{
	graph_init(g);
	for (int k = 1; k <= 5; k++) {
		if (k == 4)
			continue;
		add_task(g, k, 2, 1, "back", "SELECT", T0 + k * 1000 * US + 100 * US,
			 T0 + k * 1000 * US + 400 * US);
		add_event(g, k, 2, "cache-miss", T0 + k * 1000 * US + 200 * US);
	}
}

/* Hello as agent `host` with a fixed instance and seq; returns Welcome.last_seq. */
static uint64_t hello(struct cl_raw *r, const char *host, uint64_t instance)
{
	Weft__Envelope e, *w;
	Weft__Hello h;
	uint64_t last;

	weft__hello__init(&h);
	h.role = (char *)"agent";
	h.host = (char *)host;
	h.version = (char *)"0.1.0";
	h.instance = instance;
	cl_raw_env(r, &e, WEFT__ENVELOPE__BODY_HELLO, &h);
	cl_raw_send(r, &e);
	w = cl_raw_expect(r, WEFT__ENVELOPE__BODY_WELCOME, CL_WAIT_MS);
	if (!w)
		fail_msg("no Welcome for %s", host);
	assert_true(w->welcome->has_last_seq);
	last = w->welcome->last_seq;
	wire_free(w);
	return last;
}

/* Sends g as a GraphBatch with seq (0: the next one); returns the seq. */
static uint64_t send_batch(struct cl_raw *r, uint64_t seq, uint64_t qid, const char *host,
			   const struct graph *g, const bool *open)
{
	struct wire_graph_meta m = { .query_id = qid, .window = 0, .host = host, .open = open };
	void *body, *env;
	size_t len, elen;
	char why[256];

	if (!seq)
		seq = ++r->seq;
	if (wire_graph_pack(&m, g, &body, &len, why, sizeof(why)))
		fail_msg("pack: %s", why);
	assert_int_equal(
		wire_envelope_wrap(seq, WEFT__ENVELOPE__BODY_GRAPH_BATCH, body, len, &env, &elen),
		0);
	assert_int_equal(cl_raw_bytes(r, env, elen, 0), 0);
	free(body);
	free(env);
	return seq;
}

/* Waits for an Ack covering seq. */
static void expect_ack(struct cl_raw *r, uint64_t seq)
{
	uint64_t end = wr_now_ms() + CL_WAIT_MS;

	while (wr_now_ms() < end) {
		Weft__Envelope *a =
			cl_raw_expect(r, WEFT__ENVELOPE__BODY_ACK, (int)(end - wr_now_ms()) + 1);
		bool ok = a && a->ack->upto >= seq;

		wire_free(a);
		if (ok)
			return;
	}
	fail_msg("no Ack up to seq %llu", (unsigned long long)seq);
}

/* The graph part of `weft status --format json` (freed with st). */
static const struct wj *graph_status(struct cl *cl, struct wj **st)
{
	const struct wj *g;

	*st = cl_status(cl, NULL);
	g = wj_get(*st, "graph");
	assert_non_null(g);
	return g;
}

static long long graph_count(struct cl *cl, const char *name)
{
	struct wj *st;
	long long v = wj_int_of(graph_status(cl, &st), name);

	wj_free(st);
	return v;
}

/* The stored trace k, checked against what the two hosts sent. */
static void expect_trace(struct graph_store *s, int k)
{
	struct graph g;
	char hex[33], why[256];
	bool child = k <= 3 || k == 5, root = k != 5;

	graph_id128_hex(tr(k), hex);
	graph_init(&g);
	if (graph_store_load(s, hex, &g, why, sizeof(why)))
		fail_msg("trace %d: %s", k, why);
	graph_sort(&g);
	assert_int_equal(g.ntasks, (size_t)root + child);
	if (root) {
		assert_int_equal(g.tasks[0].id, 1);
		assert_int_equal(g.tasks[0].parent, 0);
		assert_string_equal(g.tasks[0].host, "h1");
		assert_string_equal(g.tasks[0].service, "front");
		assert_int_equal(g.tasks[0].start, T0 + k * 1000 * US);
		/* an open task is stored ending at its start */
		assert_int_equal(g.tasks[0].end, T0 + k * 1000 * US + (k == 6 ? 0 : 500 * US));
	}
	if (child) {
		const struct graph_task *c = &g.tasks[root ? 1 : 0];

		assert_int_equal(c->id, 2);
		assert_int_equal(c->parent, 1);
		assert_string_equal(c->host, "h2");
		assert_string_equal(c->name, "SELECT");
		assert_int_equal(g.nevents, 1);
		assert_string_equal(g.events[0].name, "cache-miss");
		assert_int_equal(g.events[0].task, 2);
	} else {
		assert_int_equal(g.nevents, 0);
	}
	assert_int_equal(g.nedges, k <= 4 ? 1 : 0);
	if (g.nedges) {
		assert_int_equal(g.edges[0].kind, GRAPH_EDGE_MESSAGE);
		assert_int_equal(g.edges[0].from_task, 1);
		assert_int_equal(g.edges[0].to_task, 2);
	}
	if (k <= 3) {
		/* the message edge's shape was counted once its second end came (stitching) */
		struct graph_context c;

		assert_int_equal(graph_store_context(s, &g, &c, why, sizeof(why)), 0);
		assert_true(c.nedges == 1 && c.edges[0].share > 0.0);
		graph_context_free(&c);
	}
	graph_free(&g);
}

/* `weft graph list --format json`: every trace of this test once, with its marks. */
static void expect_list(struct cl *cl, const char *path)
{
	static const char *const want[7] = { NULL, NULL, NULL, NULL, "edge", "parent", "open" };
	struct wr_proc p;
	struct wj *v;
	int seen = 0;
	int rc = cl_weft(&p, (char *)"graph", (char *)"list", (char *)"--graph-store", (char *)path,
			 (char *)"--format", (char *)"json", (char *)"--sort", (char *)"start",
			 (char *)"--reverse");

	if (rc != 0) {
		wr_dump(&p, "weft graph list");
		fail_msg("weft graph list: status %d", rc);
	}
	v = wj_parse(p.out.p, p.out.len);
	assert_non_null(v);
	assert_int_equal(v->kind, WJ_ARR);
	assert_int_equal(v->nkids, 6);
	for (size_t i = 0; i < v->nkids; i++) {
		const struct wj *o = &v->kids[i], *inc = wj_get(o, "incomplete");
		int k = (int)i + 1;
		char hex[33];

		graph_id128_hex(tr(k), hex);
		assert_string_equal(wj_str(wj_get(o, "trace")), hex);
		assert_int_equal(wj_int_of(o, "tasks"), (k == 4 || k == 5 || k == 6) ? 1 : 2);
		assert_int_equal(wj_int_of(o, "hosts"), (k == 4 || k == 5 || k == 6) ? 1 : 2);
		if (!want[k]) {
			assert_null(inc);
			continue;
		}
		assert_non_null(inc);
		assert_int_equal(inc->kind, WJ_ARR);
		assert_int_equal(inc->nkids, 1);
		assert_string_equal(wj_str(&inc->kids[0]), want[k]);
		seen++;
	}
	assert_int_equal(seen, 3);
	wj_free(v);
	wr_free(&p);
}

static void test_stitch(void **state)
{
	struct cl *cl = *state;
	struct cl_raw r1, r2;
	struct graph g1, g2, bad;
	struct graph_store *s;
	struct graph_put_stats none = { 0 };
	bool open1[8] = { false };
	char gpath[PATH_MAX], why[256];
	uint64_t qid, inst1 = ((uint64_t)getpid() << 16) | 0x1001, seq1, last;
	long long rej0;
	struct cl_proc *sub;
	(void)none;

	if (!cl->dir[0])
		skip();
	cl_keygen(cl, "agent", "h1", true);
	cl_keygen(cl, "agent", "h2", true);
	snprintf(gpath, sizeof(gpath), "%s", cl_path(cl, "graphs.sqlite"));
	cl_aggregator(cl, "agg", NULL, NULL,
		      (char *const[]){ (char *)"--graph-store", gpath, NULL });

	cl_raw_open(&r1, cl, cl->endpoint, "h1");
	assert_int_equal(hello(&r1, "h1", inst1), 0);
	cl_raw_open(&r2, cl, cl->endpoint, "h2");
	assert_int_equal(hello(&r2, "h2", inst1 + 1), 0);
	sub = cl_submit(cl, "submit", NULL, "from interval:100ms select count() as n every 1s",
			&qid);
	rej0 = cl_rejected(cl, NULL);

	/* the two hosts' pieces of the same traces */
	h1_piece(&g1, open1);
	h2_piece(&g2);
	seq1 = send_batch(&r1, 0, qid, "h1", &g1, open1);
	expect_ack(&r1, seq1);
	expect_ack(&r2, send_batch(&r2, 0, qid, "h2", &g2, NULL));

	/* hostile: another host's batch, an agent's task of another host, a malformed batch */
	send_batch(&r2, 0, qid, "h1", &g1, open1);
	graph_init(&bad);
	add_task(&bad, 9, 1, 0, "x", "y", T0, T0 + 1);
	bad.tasks[0].host = "h1";
	expect_ack(&r2, send_batch(&r2, 0, qid, "h2", &bad, NULL));
	bad.tasks[0].host = "";
	bad.tasks[0].attrs = "{\"unclosed\": ";
	expect_ack(&r2, send_batch(&r2, 0, qid, "h2", &bad, NULL));
	{
		Weft__GraphBatch b;
		Weft__GraphTask t, *tp = &t;
		Weft__Envelope e;

		weft__graph_batch__init(&b);
		b.query_id = qid;
		b.host = (char *)"h2";
		weft__graph_task__init(&t);
		t.trace_lo = 9;
		t.id = 0; /* refused by wire_decode() */
		t.name = (char *)"z";
		b.tasks = &tp;
		b.n_tasks = 1;
		cl_raw_env(&r2, &e, WEFT__ENVELOPE__BODY_GRAPH_BATCH, &b);
		cl_raw_send(&r2, &e);
	}
	assert_true(CL_WAIT(cl_rejected(cl, NULL) == rej0 + 4, CL_WAIT_MS));
	assert_int_equal(graph_count(cl, "rejected"), 3); /* the decoded ones */
	graph_free(&bad);

	/* resent: a new connection of the same instance; the Welcome says seq1 was merged */
	cl_raw_close(&r1);
	cl_raw_open(&r1, cl, cl->endpoint, "h1");
	r1.seq = 0; /* a Hello below the merged seq: what follows may repeat it */
	last = hello(&r1, "h1", inst1);
	assert_true(last >= seq1);
	send_batch(&r1, seq1, qid, "h1", &g1, open1); /* its old seq: a repeat */
	r1.seq = last;
	expect_ack(&r1, seq1);
	assert_int_equal(graph_count(cl, "batches"), 2);
	assert_int_equal(graph_count(cl, "replaced"), 0);
	/* with a new seq: stored again as nothing new */
	expect_ack(&r1, send_batch(&r1, 0, qid, "h1", &g1, open1));
	assert_int_equal(graph_count(cl, "batches"), 3);
	assert_int_equal(graph_count(cl, "replaced"), 5);
	assert_int_equal(graph_count(cl, "tasks"), 9);
	assert_int_equal(graph_count(cl, "events"), 4);
	assert_int_equal(graph_count(cl, "edges"), 4);

	/* after the query's last window, every trace it touched is checked */
	cl_cancel(cl, NULL, qid); /* it ends now, after every batch: not before */
	cl_expect_end(sub);
	assert_true(CL_WAIT(graph_count(cl, "checked") == 6, CL_WAIT_MS));
	assert_int_equal(graph_count(cl, "incomplete"), 3);

	s = graph_store_open(gpath, why, sizeof(why));
	if (!s)
		fail_msg("%s", why);
	for (int k = 1; k <= 6; k++)
		expect_trace(s, k);
	graph_id128_hex(tr(9), why);
	{
		struct graph g;

		graph_init(&g);
		assert_int_equal(graph_store_load(s, why, &g, why, sizeof(why)), -ENOENT);
		graph_free(&g);
	}
	graph_store_close(s);
	expect_list(cl, gpath);

	graph_free(&g1);
	graph_free(&g2);
	cl_raw_close(&r1);
	cl_raw_close(&r2);
	cl->passed = true;
}

static void test_retain(void **state)
{
	struct cl *cl = *state;
	struct cl_raw r1;
	struct graph g1;
	struct graph_store *s;
	struct graph_trace_row *rows = NULL;
	struct graph_type_stats *types = NULL;
	struct graph_filter f = { .limit = 100 };
	struct timespec now;
	bool open1[8] = { false };
	char gpath[PATH_MAX], why[256];
	int64_t t;
	uint64_t qid;
	ssize_t n;
	struct cl_proc *sub, *agg;

	if (!cl->dir[0])
		skip();
	cl_keygen(cl, "agent", "h1", true);
	snprintf(gpath, sizeof(gpath), "%s", cl_path(cl, "graphs.sqlite"));
	agg = cl_aggregator(cl, "agg", NULL, NULL,
			    (char *const[]){ (char *)"--graph-store", gpath,
					     (char *)"--graph-max-age", (char *)"1h", NULL });
	cl_raw_open(&r1, cl, cl->endpoint, "h1");
	assert_int_equal(hello(&r1, "h1", ((uint64_t)getpid() << 16) | 0x2001), 0);
	sub = cl_submit(cl, "submit", NULL, "from interval:100ms select count() as n every 1s",
			&qid);
	h1_piece(&g1, open1);
	clock_gettime(CLOCK_REALTIME, &now);
	t = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec;
	add_task(&g1, 7, 1, 0, "front", "GET /cart", t - 1000 * US, t);
	expect_ack(&r1, send_batch(&r1, 0, qid, "h1", &g1, open1));
	/* a pass a second: the five traces of 2023 go, the one of now stays */
	assert_true(CL_WAIT(graph_count(cl, "retained") == 5, CL_WAIT_MS));
	s = graph_store_open(gpath, why, sizeof(why));
	if (!s)
		fail_msg("%s", why);
	n = graph_store_list(s, &f, &rows, why, sizeof(why));
	assert_int_equal(n, 1);
	assert_true(rows[0].trace.hi == tr(7).hi && rows[0].trace.lo == tr(7).lo);
	free(rows);
	n = graph_store_stats(s, &types, why, sizeof(why));
	assert_int_equal(n, 1);
	assert_string_equal(types[0].service, "front");
	assert_int_equal(types[0].count, 6);
	free(types);
	graph_store_close(s);
	/* and stays so: nothing more to drop */
	wr_sleep_ms(1500);
	assert_int_equal(graph_count(cl, "retained"), 5);
	assert_int_equal(graph_count(cl, "max_age_ns"), 3600LL * 1000000000LL);
	{
		struct wr_proc p;
		int rc = cl_weft(&p, (char *)"status", (char *)"--to", cl->endpoint,
				 (char *)"--server-key", (char *)cl_pub(cl, cl->client_server),
				 (char *)"--key", (char *)cl_path(cl, "me.key"));

		if (rc != 0 ||
		    !strstr(p.out.p,
			    "graph store retention (--graph-max-age 1h): 5 traces dropped\n")) {
			wr_dump(&p, "weft status");
			fail_msg("weft status: status %d, no retention line", rc);
		}
		wr_free(&p);
	}

	/* after the query's end, its traces are checked: the one still stored, quietly not the
	 * five dropped */
	cl_cancel(cl, NULL, qid);
	cl_expect_end(sub);
	assert_true(CL_WAIT(graph_count(cl, "checked") == 1, CL_WAIT_MS));
	assert_int_equal(graph_count(cl, "incomplete"), 0);
	assert_false(cl_file_has(agg->err, "checking a trace"));
	graph_free(&g1);
	cl_raw_close(&r1);
	cl->passed = true;
}

/* The id of the one query an aggregator runs (0: none yet). */
static uint64_t region_query(struct cl *cl, const char *endpoint)
{
	struct wj *st = cl_status(cl, endpoint);
	const struct wj *qs = wj_get(st, "queries");
	uint64_t id = 0;

	if (qs && qs->kind == WJ_ARR && qs->nkids == 1)
		id = (uint64_t)wj_int_of(&qs->kids[0], "id");
	wj_free(st);
	return id;
}

/* A tree: the two senders report to a region aggregator, which stores their batches and
 * passes them up to the root through its parent link; the root's store then holds the same
 * stitched traces, with their hosts, marked the same. */
static void test_tree(void **state)
{
	struct cl *cl = *state;
	struct cl_raw r1, r2;
	struct graph g1, g2;
	struct graph_store *s;
	struct cl_proc *region, *sub;
	bool open1[8] = { false };
	char rgraph[PATH_MAX], ggraph[PATH_MAX], region_ep[64], why[256];
	uint64_t qid, rqid, inst = ((uint64_t)getpid() << 16) | 0x2001;

	if (!cl->dir[0])
		skip();
	cl_keygen(cl, "aggregator", "root", false);
	cl_keygen(cl, "aggregator", "region1", true);
	cl_keygen(cl, "agent", "h1", true);
	cl_keygen(cl, "agent", "h2", true);
	snprintf(ggraph, sizeof(ggraph), "%s", cl_path(cl, "root-graphs.sqlite"));
	snprintf(rgraph, sizeof(rgraph), "%s", cl_path(cl, "region-graphs.sqlite"));
	cl_aggregator(cl, "root", NULL, NULL,
		      (char *const[]){ (char *)"--lateness", (char *)"1500ms",
				       (char *)"--graph-store", ggraph, NULL });
	snprintf(region_ep, sizeof(region_ep), "tcp://127.0.0.1:%d", cl_free_port());
	region = cl_aggregator(cl, "region1", region_ep, NULL,
			       (char *const[]){ (char *)"--parent", cl->endpoint,
						(char *)"--parent-key", (char *)cl_pub(cl, "root"),
						(char *)"--graph-store", rgraph, NULL });
	cl_expect_log(region, "welcomed by the parent", CL_WAIT_MS);

	snprintf(cl->client_server, sizeof(cl->client_server), "region1");
	cl_raw_open(&r1, cl, region_ep, "h1");
	hello(&r1, "h1", inst);
	cl_raw_open(&r2, cl, region_ep, "h2");
	hello(&r2, "h2", inst + 1);
	snprintf(cl->client_server, sizeof(cl->client_server), "root");
	sub = cl_submit(cl, "submit", NULL, "from interval:100ms select count() as n every 1s",
			&qid);
	/* the region runs it under an id of its own (its status lists it) */
	snprintf(cl->client_server, sizeof(cl->client_server), "region1");
	assert_true(CL_WAIT((rqid = region_query(cl, region_ep)) != 0, CL_WAIT_MS));
	snprintf(cl->client_server, sizeof(cl->client_server), "root");

	h1_piece(&g1, open1);
	h2_piece(&g2);
	expect_ack(&r1, send_batch(&r1, 0, rqid, "h1", &g1, open1));
	expect_ack(&r2, send_batch(&r2, 0, rqid, "h2", &g2, NULL));
	/* at the root, through the region's link */
	assert_true(CL_WAIT(graph_count(cl, "batches") == 2, CL_WAIT_MS));
	assert_int_equal(graph_count(cl, "tasks"), 9);
	assert_int_equal(graph_count(cl, "events"), 4);
	assert_int_equal(graph_count(cl, "edges"), 4);
	cl_cancel(cl, NULL, qid); /* it ends now, after every batch: not before */
	cl_expect_end(sub);
	assert_true(CL_WAIT(graph_count(cl, "checked") == 6, CL_WAIT_MS));
	assert_int_equal(graph_count(cl, "incomplete"), 3);

	for (int pass = 0; pass < 2; pass++) { /* the root's store, then the region's */
		s = graph_store_open(pass ? rgraph : ggraph, why, sizeof(why));
		if (!s)
			fail_msg("%s", why);
		for (int k = 1; k <= 6; k++)
			expect_trace(s, k);
		graph_store_close(s);
	}
	expect_list(cl, ggraph);
	graph_free(&g1);
	graph_free(&g2);
	cl_raw_close(&r1);
	cl_raw_close(&r2);
	cl->passed = true;
}

#define N_REQ 1000

/* The sum of member `name` over the graph windows `weft submit --format json` printed; the
 * last window's `incomplete` in *incomplete (-1: none printed). */
static long long graph_windows_sum(const char *path, const char *name, long long *incomplete)
{
	char *out = cl_slurp(path), *line, *save = NULL;
	long long sum = 0;

	assert_non_null(out);
	*incomplete = -1;
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct wj *v;

		if (strncmp(line, "{\"type\":\"graph_window\"", 22) != 0)
			continue;
		v = wj_parse(line, strlen(line));
		assert_non_null(v);
		sum += wj_int_of(v, name);
		if (cl_json_true(v, "last"))
			*incomplete = wj_int_of(v, "incomplete");
		wj_free(v);
	}
	free(out);
	return sum;
}

/*
 * `weft submit` of the graph query `from usdt:wl_graph:weft:* graph SAMPLE every 1s` over a
 * real agent h1 and wl_graph making N_REQ requests, cancelled once the workload ended (the
 * agent's last batch drains everything it holds); returns the aggregator's graph store,
 * open, and the follower's stdout path in out.
 */
static struct graph_store *agent_run(struct cl *cl, const char *sample, const char *batch_max,
				     char *out, size_t outsz)
{
	char gpath[PATH_MAX], query[PATH_MAX + 64], n[64], why[256];
	struct graph_store *s;
	struct cl_proc *sub, *agent;
	struct wr_proc wl;
	uint64_t qid;

	cl_keygen(cl, "agent", "h1", true);
	snprintf(gpath, sizeof(gpath), "%s", cl_path(cl, "graphs.sqlite"));
	/* a lateness well above what storing a window of traces can take on a loaded machine:
	 * the last window waits for the agent's last Partial, which follows its last batch,
	 * not for a deadline */
	cl_aggregator(cl, "agg", NULL, NULL,
		      (char *const[]){ (char *)"--graph-store", gpath, (char *)"--lateness",
				       (char *)"15s", NULL });
	agent = cl_agent_with(cl, "h1", "h1", NULL, NULL, true,
			      batch_max ?
				      (char *const[]){ (char *)"-v", (char *)"--graph-batch-max",
						       (char *)batch_max, NULL } :
				      (char *const[]){ (char *)"-v", NULL });
	snprintf(query, sizeof(query), "from usdt:%s:weft:* graph %s every 1s",
		 wr_workload("wl_graph"), sample);
	sub = cl_submit(cl, "submit", NULL, query, &qid);
	/* its probes attached (the aggregator's status says "running" once it sent it) */
	snprintf(n, sizeof(n), "query %llu running", (unsigned long long)qid);
	cl_expect_log(agent, n, CL_WAIT_MS);

	snprintf(n, sizeof(n), "%d", N_REQ);
	if (wr_start(&wl, (char *const[]){ (char *)wr_workload("wl_graph"), n, NULL }))
		fail_msg("wl_graph did not start");
	if (wr_finish(&wl, 30000) != 0) {
		wr_dump(&wl, "wl_graph");
		fail_msg("wl_graph failed");
	}
	wr_free(&wl);

	cl_cancel(cl, NULL, qid);
	cl_expect_end(sub);
	assert_int_equal(graph_count(cl, "rejected"), 0);
	assert_int_equal(graph_count(cl, "failed"), 0);
	assert_int_equal(graph_count(cl, "incomplete"), 0);
	snprintf(out, outsz, "%s", sub->out);
	s = graph_store_open(gpath, why, sizeof(why));
	if (!s)
		fail_msg("%s", why);
	return s;
}

/* Every trace kept: exactly N_REQ traces of exactly wl_graph's structure; batch_max: the
 * agent's --graph-batch-max (NULL: its default). */
static void agent_all(struct cl *cl, const char *batch_max)
{
	struct graph_store *s;
	char out[PATH_MAX];
	long long inc;

	s = agent_run(cl, "", batch_max, out, sizeof(out));
	assert_int_equal(graph_count(cl, "tasks"), 2 * N_REQ);
	assert_int_equal(graph_count(cl, "events"), N_REQ + N_REQ / 100);
	assert_int_equal(graph_count(cl, "edges"), N_REQ);
	for (long i = 0; i < N_REQ; i++)
		if (!check_request(s, i, "h1"))
			fail_msg("request %ld not stored", i);
	assert_false(check_request(s, N_REQ, "h1"));
	check_aggregates(s, N_REQ);
	graph_store_close(s);

	assert_int_equal(graph_windows_sum(out, "traces", &inc), N_REQ);
	assert_int_equal(graph_windows_sum(out, "tasks", &inc), 2 * N_REQ);
	assert_int_equal(graph_windows_sum(out, "events", &inc), N_REQ + N_REQ / 100);
	assert_int_equal(graph_windows_sum(out, "edges", &inc), N_REQ);
	assert_int_equal(inc, 0);
	cl->passed = true;
}

static void test_agent(void **state)
{
	struct cl *cl = *state;

	if (!cl->dir[0])
		skip();
	agent_all(cl, NULL);
}

/*
 * The same with `--graph-batch-max 7`: each window's elements (some 4 a request) are sent as
 * many batches of at most 7, a trace's elements together (a trace is 4 or 5): every request
 * still stored exactly once, and at least one batch per 7 elements arrived.
 */
static void test_agent_small_batches(void **state)
{
	struct cl *cl = *state;
	long long elems = 2 * N_REQ + (N_REQ + N_REQ / 100) + N_REQ;

	if (!cl->dir[0])
		skip();
	agent_all(cl, "7");
	assert_true(graph_count(cl, "batches") >= (elems + 6) / 7);
	print_message("%lld batches for %lld elements\n", graph_count(cl, "batches"), elems);
}

/*
 * `sample 10%`: the aggregator's store holds exactly the traces the hash selects plus the
 * agent's outliers (every error trace among them), and the aggregates the agent shipped
 * count all N_REQ requests, as with every trace kept.
 */
static void test_agent_sampled(void **state)
{
	struct cl *cl = *state;
	struct graph_store *s;
	struct graph_sampling sm;
	char out[PATH_MAX], why[256];
	long head = 0, stored = 0, outliers = 0;
	long long inc;

	if (!cl->dir[0])
		skip();
	s = agent_run(cl, "sample 10%", NULL, out, sizeof(out));
	for (long i = 0; i < N_REQ; i++) {
		bool h = graph_sample_head(
			(struct graph_id128){ WL_GRAPH_TRACE_HI, (uint64_t)i + 1 }, 0.10);
		bool in = check_request(s, i, "h1");

		if (h || i % 1000 == 999) /* selected by the hash, or an error: always kept */
			assert_true(in);
		head += h;
		stored += in;
		outliers += in && !h;
	}
	assert_true(head > N_REQ / 20 && head < N_REQ / 5);
	check_aggregates(s, N_REQ);
	assert_int_equal(graph_store_sampling(s, &sm, why, sizeof(why)), 0);
	assert_int_equal(sm.seen, N_REQ);
	assert_int_equal(sm.kept_head, head);
	assert_int_equal(sm.kept_outlier, outliers);
	graph_store_close(s);

	assert_int_equal(graph_count(cl, "tasks"), 2 * stored);
	assert_int_equal(graph_windows_sum(out, "traces", &inc), stored);
	assert_int_equal(graph_windows_sum(out, "tasks", &inc), 2 * stored);
	assert_int_equal(inc, 0);
	cl->passed = true;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_stitch, cl_test_setup, cl_test_teardown),
		cmocka_unit_test_setup_teardown(test_tree, cl_test_setup, cl_test_teardown),
		cmocka_unit_test_setup_teardown(test_agent, cl_test_setup, cl_test_teardown),
		cmocka_unit_test_setup_teardown(test_agent_small_batches, cl_test_setup,
						cl_test_teardown),
		cmocka_unit_test_setup_teardown(test_agent_sampled, cl_test_setup,
						cl_test_teardown),
		cmocka_unit_test_setup_teardown(test_retain, cl_test_setup, cl_test_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

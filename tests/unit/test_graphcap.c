// SPDX-License-Identifier: Apache-2.0
/*
 * agent/graphcap.c and graph/aggs.c on records made here (the kernel's part is
 * test_run_graph's): pairing, bounds, span nesting, and sampling that keeps the aggregate
 * context exact.  The sampling test is the proof the design rests on: 10,000 requests
 * captured at 1% and at 100% leave exactly the same per-type counts, latency sketches, event
 * shares and edge shapes in their stores, the same as a plain put of every trace; and the 1%
 * store holds exactly the traces the trace-id hash selects plus the outliers planted (errors,
 * a rare event, tasks above p99).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/graphcap.h"
#include "graph/aggs.h"
#include "graph/store.h"
#include "kernel/weft_abi.h"
#include "kernel/weft_sketch.h"

#define NREQ 10000
#define HI 0x1234000000000000ull
#define T0 1000000000000ull /* monotonic ns of the first record */

static char dir[] = "/tmp/weft-test-graphcap-XXXXXX";

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void rec(struct graphcap *c, uint32_t kind, uint64_t t, const uint64_t *a, int na,
		const char *s0, const char *s1)
{
	struct weft_graph_rec r;

	memset(&r, 0, sizeof(r));
	r.time = t;
	r.pid = 4242;
	r.tid = 4243;
	r.kind = kind;
	memcpy(r.comm, "app", 4);
	for (int i = 0; i < na; i++)
		r.a[i] = a[i];
	if (s0)
		snprintf(r.s0, sizeof(r.s0), "%s", s0);
	if (s1)
		snprintf(r.s1, sizeof(r.s1), "%s", s1);
	assert_int_equal(graphcap_record(c, &r, sizeof(r)), 0);
}

static bool planted(long i)
{
	return i % 100 == 7 || i % 1000 == 999 || i % 2500 == 1234;
}

/* Request i of the synthetic workload, at t: root 100 us, child 50 us (50 ms if planted slow). */
static void request(struct graphcap *c, long i, uint64_t t)
{
	uint64_t lo = (uint64_t)i + 1, cd = i % 2500 == 1234 ? 50000000 : 50000;
	uint64_t b1[] = { HI, lo, 1, 0 }, b2[] = { HI, lo, 2, 1 };
	uint64_t e1[] = { HI, lo, 1, i % 1000 == 999 ? 2 : 1 }, e2[] = { HI, lo, 2, 1 };
	uint64_t ev[] = { HI, lo, 2 }, ed[] = { HI, lo, 0, 1, 0, 2, 0 };

	rec(c, WEFT_GREC_TASK_BEGIN, t, b1, 4, "frontend", "request");
	rec(c, WEFT_GREC_TASK_BEGIN, t + 10000, b2, 4, "backend", "query");
	rec(c, WEFT_GREC_EVENT, t + 20000, ev, 3, "cache_miss", NULL);
	if (i % 100 == 7)
		rec(c, WEFT_GREC_EVENT, t + 30000, ev, 3, "retry", NULL);
	rec(c, WEFT_GREC_EDGE, t + 10000, ed, 7, "message", NULL);
	rec(c, WEFT_GREC_TASK_END, t + 10000 + cd, e2, 4, NULL, NULL);
	rec(c, WEFT_GREC_TASK_END, t + 100000 + cd, e1, 4, NULL, NULL);
}

static struct graph_store *store_at(const char *name)
{
	char path[128], why[256] = "";
	struct graph_store *s;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	s = graph_store_open(path, why, sizeof(why));
	if (!s)
		fail_msg("%s: %s", path, why);
	return s;
}

/* Captures the workload at `rate` into a store (sampled puts); the capture for more checks. */
static struct graphcap *capture(const struct plan *p, double rate, struct graph_store *s,
				struct graph *kept_out)
{
	struct graphcap_opts o = { .sz = sizeof(o), .host = "h1", .instance = 7, .sample = rate };
	struct graphcap *c = graphcap_new(p, &o);
	struct graph_aggs aggs;
	struct graph_put_stats st;
	char why[256] = "";

	assert_non_null(c);
	for (long i = 0; i < NREQ; i++)
		request(c, i, T0 + (uint64_t)i * 200000);
	graph_aggs_init(&aggs);
	assert_int_equal(graphcap_drain(c, true, kept_out, &aggs), NREQ);
	assert_int_equal(graph_check(kept_out, why, sizeof(why)), 0);
	if (graph_store_put_opts(s, kept_out, GRAPH_PUT_NO_AGGS, &st, why, sizeof(why)) ||
	    graph_store_put_aggs(s, &aggs, why, sizeof(why)))
		fail_msg("put: %s", why);
	assert_int_equal(aggs.sampling.seen, NREQ);
	graph_aggs_free(&aggs);
	return c;
}

static void assert_same_aggregates(struct graph_store *a, struct graph_store *b)
{
	struct graph_type_stats *ra = NULL, *rb = NULL;
	uint64_t *sa = calloc(WEFT_SKETCH_NBUCKETS, sizeof(*sa));
	uint64_t *sb = calloc(WEFT_SKETCH_NBUCKETS, sizeof(*sb));
	char why[256];
	ssize_t na = graph_store_stats(a, &ra, why, sizeof(why));
	ssize_t nb = graph_store_stats(b, &rb, why, sizeof(why));

	assert_true(na == 2 && nb == 2);
	for (ssize_t i = 0; i < na; i++) {
		const struct graph_type_stats *x = &ra[i], *y = &rb[i];

		assert_string_equal(x->service, y->service);
		assert_string_equal(x->name, y->name);
		assert_int_equal(x->count, NREQ);
		assert_int_equal(x->count, y->count);
		assert_int_equal(x->p50, y->p50);
		assert_int_equal(x->p90, y->p90);
		assert_int_equal(x->p99, y->p99);
		assert_int_equal(x->nrare_events, y->nrare_events);
		for (uint32_t k = 0; k < x->nrare_events; k++) {
			assert_string_equal(x->rare_events[k].name, y->rare_events[k].name);
			assert_int_equal(x->rare_events[k].tasks, y->rare_events[k].tasks);
		}
		assert_int_equal(x->nrare_edges, y->nrare_edges);
		for (uint32_t k = 0; k < x->nrare_edges; k++)
			assert_int_equal(x->rare_edges[k].count, y->rare_edges[k].count);
		assert_int_equal(
			graph_store_type_sketch(a, x->service, x->name, sa, why, sizeof(why)), 0);
		assert_int_equal(
			graph_store_type_sketch(b, y->service, y->name, sb, why, sizeof(why)), 0);
		assert_memory_equal(sa, sb, WEFT_SKETCH_NBUCKETS * sizeof(*sa));
	}
	free(ra);
	free(rb);
	free(sa);
	free(sb);
}

static void test_sampling_exact(void **state)
{
	struct plan p = { .graph = true, .sample = 1.0 };
	struct graph_store *s1 = store_at("one.db"), *s100 = store_at("all.db"),
			   *plain = store_at("plain.db");
	struct graph k1, k100;
	struct graphcap *c1, *c100;
	struct graphcap_stats st;
	struct graph_put_stats ps;
	struct graph_sampling sm;
	long head = 0, kept = 0;
	char why[256];
	ssize_t n;
	uint32_t conc_a[400], conc_b[400];

	(void)state;
	graph_init(&k1);
	graph_init(&k100);
	c1 = capture(&p, 0.01, s1, &k1);
	c100 = capture(&p, 1.0, s100, &k100);
	/* at 100% every trace is kept; a plain put of them computes the aggregates itself */
	assert_int_equal(k100.ntasks, 2 * NREQ);
	assert_int_equal(graph_store_put(plain, &k100, &ps, why, sizeof(why)), 0);
	assert_int_equal(ps.traces, NREQ);
	assert_same_aggregates(s1, s100);
	assert_same_aggregates(s100, plain);
	/* concurrency: the capture's (same clock offset) against the store's own */
	n = graph_store_concurrency(s100, "h1", 4242, k100.tasks[0].start,
				    k100.tasks[0].start + 400000000, conc_a, 400, why, sizeof(why));
	assert_int_equal(n, 400);
	assert_int_equal(graph_store_concurrency(plain, "h1", 4242, k100.tasks[0].start,
						 k100.tasks[0].start + 400000000, conc_b, 400, why,
						 sizeof(why)),
			 400);
	assert_memory_equal(conc_a, conc_b, sizeof(conc_a));
	assert_true(conc_a[0] > 0);

	/* the 1% store: exactly the hash's choice plus the planted outliers */
	for (long i = 0; i < NREQ; i++) {
		struct graph_id128 id = { HI, (uint64_t)i + 1 };
		bool h = graph_sample_head(id, 0.01), in = false;

		for (size_t k = 0; k < k1.ntasks && !in; k++)
			in = graph_id128_eq(k1.tasks[k].trace, id);
		if (in != (h || planted(i)))
			fail_msg("request %ld: kept %d, hash %d, planted %d", i, in, h, planted(i));
		head += h;
		kept += in;
	}
	assert_true(head > 50 && head < 200); /* about 1% of 10,000 */
	graphcap_stats(c1, &st);
	assert_int_equal(st.traces_seen, NREQ);
	assert_int_equal(st.kept_head, head);
	assert_int_equal(st.kept_head + st.kept_outlier, kept);
	assert_int_equal(graph_store_sampling(s1, &sm, why, sizeof(why)), 0);
	assert_int_equal(sm.seen, NREQ);
	assert_int_equal(sm.kept_head, head);
	assert_int_equal(sm.kept_outlier, kept - head);
	assert_true(sm.rate == 0.01);
	graph_free(&k1);
	graph_free(&k100);
	graphcap_free(c1);
	graphcap_free(c100);
	graph_store_close(s1);
	graph_store_close(s100);
	graph_store_close(plain);
}

/* Bounds: a full open table evicts the oldest; ends without begins, bad records counted. */
static void test_bounds(void **state)
{
	struct plan p = { .graph = true, .sample = 1.0 };
	struct graphcap_opts o = { .sz = sizeof(o), .host = "h", .instance = 1, .max_open = 4 };
	struct graphcap *c = graphcap_new(&p, &o);
	struct graphcap_stats st;
	struct graph kept;
	struct weft_graph_rec r;

	(void)state;
	assert_non_null(c);
	for (uint64_t i = 1; i <= 10; i++)
		rec(c, WEFT_GREC_TASK_BEGIN, T0 + i, (uint64_t[]){ HI, i, 1, 0 }, 4, "s", "n");
	rec(c, WEFT_GREC_TASK_END, T0 + 100, (uint64_t[]){ HI, 99, 1, 1 }, 4, NULL, NULL);
	/* the newest four are still open: they end normally */
	for (uint64_t i = 7; i <= 10; i++)
		rec(c, WEFT_GREC_TASK_END, T0 + 200 + i, (uint64_t[]){ HI, i, 1, 1 }, 4, NULL,
		    NULL);
	memset(&r, 0, sizeof(r));
	r.kind = 99;
	assert_int_equal(graphcap_record(c, &r, sizeof(r)), -EINVAL);
	assert_int_equal(graphcap_record(c, &r, sizeof(r) - 1), -EINVAL);
	r.kind = WEFT_GREC_KSEND; /* shorter than a kernel record without strings */
	assert_int_equal(graphcap_record(c, &r, WEFT_GREC_SHORT - 1), -EINVAL);
	r.kind = WEFT_GREC_EDGE; /* an edge kind no one knows */
	snprintf(r.s0, sizeof(r.s0), "sideways");
	assert_int_equal(graphcap_record(c, &r, sizeof(r)), -EINVAL);
	graphcap_stats(c, &st);
	assert_int_equal(st.open_evicted, 6);
	assert_int_equal(st.end_without_begin, 1);
	assert_int_equal(st.bad, 4);
	graph_init(&kept);
	assert_int_equal(graphcap_drain(c, true, &kept, NULL), 10);
	assert_int_equal(kept.ntasks, 4);
	graph_free(&kept);
	graphcap_free(c);
}

/* Spans: nested by interval on their thread, the outermost a child of the open weft task. */
static void test_spans(void **state)
{
	struct plan_attach at[2];
	struct plan p = { .graph = true, .sample = 1.0, .attach = at, .nattach = 2 };
	struct graphcap_opts o = { .sz = sizeof(o), .host = "h", .instance = 5 };
	struct graphcap *c;
	struct graph kept;
	struct weft_graph_rec r;
	const struct graph_task *root = NULL, *handle = NULL, *lone = NULL;
	int steps = 0;
	char why[256];

	(void)state;
	memset(at, 0, sizeof(at));
	snprintf(at[0].target.symbol, sizeof(at[0].target.symbol), "handle");
	snprintf(at[1].target.symbol, sizeof(at[1].target.symbol), "step");
	at[1].source = 1;
	c = graphcap_new(&p, &o);
	assert_non_null(c);
	/* a weft task open around handle [100, 1000] with steps [200, 300] and [400, 500] */
	rec(c, WEFT_GREC_TASK_BEGIN, T0, (uint64_t[]){ HI, 1, 9, 0 }, 4, "svc", "req");
	memset(&r, 0, sizeof(r));
	r.kind = WEFT_GREC_SPAN;
	r.pid = 4242;
	r.tid = 4243;
	memcpy(r.comm, "app", 4);
	r.cookie = 1;
	r.time = T0 + 300;
	r.dur = 100;
	assert_int_equal(graphcap_record(c, &r, sizeof(r)), 0);
	r.time = T0 + 500;
	assert_int_equal(graphcap_record(c, &r, sizeof(r)), 0);
	r.cookie = 0;
	r.time = T0 + 1000;
	r.dur = 900;
	assert_int_equal(graphcap_record(c, &r, sizeof(r)), 0);
	rec(c, WEFT_GREC_TASK_END, T0 + 2000, (uint64_t[]){ HI, 1, 9, 1 }, 4, NULL, NULL);
	/* a span on another thread, outside any task: a trace of its own */
	r.tid = 7;
	r.time = T0 + 3000;
	r.dur = 10;
	assert_int_equal(graphcap_record(c, &r, sizeof(r)), 0);
	graph_init(&kept);
	assert_int_equal(graphcap_drain(c, true, &kept, NULL), 2);
	assert_int_equal(graph_check(&kept, why, sizeof(why)), 0);
	assert_int_equal(kept.ntasks, 5);
	for (size_t i = 0; i < kept.ntasks; i++) {
		const struct graph_task *k = &kept.tasks[i];

		if (k->id == 9)
			root = k;
		else if (strcmp(k->name, "handle") == 0 && k->tid == 4243)
			handle = k;
		else if (k->tid == 7)
			lone = k;
	}
	assert_non_null(root);
	assert_non_null(handle);
	assert_non_null(lone);
	assert_int_equal(handle->parent, 9);
	assert_true(graph_id128_eq(handle->trace, root->trace));
	assert_string_equal(handle->service, "app");
	assert_int_equal(handle->end - handle->start, 900);
	for (size_t i = 0; i < kept.ntasks; i++)
		if (strcmp(kept.tasks[i].name, "step") == 0) {
			assert_int_equal(kept.tasks[i].parent, handle->id);
			assert_true(graph_id128_eq(kept.tasks[i].trace, root->trace));
			steps++;
		}
	assert_int_equal(steps, 2);
	assert_int_equal(lone->parent, 0);
	assert_false(graph_id128_eq(lone->trace, root->trace));
	assert_int_equal(kept.nedges, 3); /* parent edges: req->handle, handle->step x2 */
	graph_free(&kept);
	graphcap_free(c);
}

/* A kernel:sockets record of a thread named comm (NULL: "p" and its pid): pid = tid's
 * process, 4-tuple, the sequence number after the call. */
static void krec_as(struct graphcap *c, const char *comm, bool send, uint64_t t, uint32_t pid,
		    uint32_t tid, uint64_t sk, uint32_t la, uint16_t lp, uint32_t ra, uint16_t rp,
		    uint32_t seq_end, uint32_t len)
{
	struct weft_graph_rec r;

	memset(&r, 0, sizeof(r));
	r.kind = send ? WEFT_GREC_KSEND : WEFT_GREC_KRECV;
	r.time = t;
	r.pid = pid;
	r.tid = tid;
	if (comm)
		snprintf(r.comm, sizeof(r.comm), "%s", comm);
	else
		snprintf(r.comm, sizeof(r.comm), "p%u", pid);
	r.a[0] = la;
	r.a[1] = ra;
	r.a[2] = lp;
	r.a[3] = rp;
	r.a[4] = seq_end;
	r.a[5] = len;
	r.a[6] = sk;
	assert_int_equal(graphcap_record(c, &r, sizeof(r)), 0);
}

static void krec(struct graphcap *c, bool send, uint64_t t, uint32_t pid, uint32_t tid, uint64_t sk,
		 uint32_t la, uint16_t lp, uint32_t ra, uint16_t rp, uint32_t seq_end, uint32_t len)
{
	krec_as(c, NULL, send, t, pid, tid, sk, la, lp, ra, rp, seq_end, len);
}

static const struct graph_task *task_named(const struct graph *g, const char *name)
{
	for (size_t i = 0; i < g->ntasks; i++)
		if (strcmp(g->tasks[i].name, name) == 0)
			return &g->tasks[i];
	fail_msg("no task %s", name);
	return NULL;
}

static bool has_edge(const struct graph *g, enum graph_edge_kind k, uint64_t from, uint64_t to)
{
	for (size_t i = 0; i < g->nedges; i++)
		if (g->edges[i].kind == k && g->edges[i].from_task == from &&
		    g->edges[i].to_task == to)
			return true;
	return false;
}

/*
 * A socket the same thread uses again for another connection (the kernel reuses the struct
 * sock's address) and a thread whose comm changed (exec): each exchange keeps its own 4-tuple
 * and comm, also when the capture keeps them once per socket and thread and compacts them at
 * a drain with calls still held.  Client thread 10 talks to 10.0.0.2:80 on socket 0xc1, as
 * "p10"; a drain holds that exchange; then, as "x10", on the same socket to 10.0.0.3:90.
 */
static void test_kernel_socket_reused(void **state)
{
	struct plan p = { .graph = true, .sample = 1.0 };
	struct graphcap_opts o = { .sz = sizeof(o), .host = "h", .instance = 7 };
	const uint32_t a1 = 0x0a000001, a2 = 0x0a000002, a3 = 0x0a000003;
	const struct graph_task *r1, *r2, *s1, *s2;
	struct graphcap *c;
	struct graph kept;
	char why[256];

	(void)state;
	c = graphcap_new(&p, &o);
	assert_non_null(c);
	krec(c, true, T0 + 100, 10, 10, 0xc1, a1, 5000, a2, 80, 110, 10);
	krec(c, false, T0 + 110, 20, 20, 0xf1, a2, 80, a1, 5000, 110, 10);
	krec(c, true, T0 + 120, 20, 20, 0xf1, a2, 80, a1, 5000, 7007, 7);
	krec(c, false, T0 + 130, 10, 10, 0xc1, a1, 5000, a2, 80, 7007, 7);
	graph_init(&kept);
	assert_int_equal(graphcap_drain(c, false, &kept, NULL), 0); /* all held */
	/* the same socket again, another connection, after an exec */
	krec_as(c, "x10", true, T0 + 200, 10, 10, 0xc1, a1, 5001, a3, 90, 2020, 20);
	krec(c, false, T0 + 210, 30, 30, 0xb1, a3, 90, a1, 5001, 2020, 20);
	krec(c, true, T0 + 220, 30, 30, 0xb1, a3, 90, a1, 5001, 3030, 5);
	krec_as(c, "x10", false, T0 + 230, 10, 10, 0xc1, a1, 5001, a3, 90, 3030, 5);
	assert_int_equal(graphcap_drain(c, true, &kept, NULL), 2);
	assert_int_equal(graph_check(&kept, why, sizeof(why)), 0);
	assert_int_equal(kept.ntasks, 4);
	r1 = task_named(&kept, "request 10.0.0.2:80");
	r2 = task_named(&kept, "request 10.0.0.3:90");
	s1 = task_named(&kept, "serve :80");
	s2 = task_named(&kept, "serve :90");
	assert_string_equal(r1->service, "p10");
	assert_string_equal(r2->service, "x10");
	assert_string_equal(s1->service, "p20");
	assert_string_equal(s2->service, "p30");
	assert_int_equal(r1->end - r1->start, 30);
	assert_int_equal(r2->end - r2->start, 30);
	/* each server's task joined its own client's trace, by its own 4-tuple */
	assert_true(graph_id128_eq(s1->trace, r1->trace));
	assert_true(graph_id128_eq(s2->trace, r2->trace));
	assert_false(graph_id128_eq(r1->trace, r2->trace));
	assert_true(has_edge(&kept, GRAPH_EDGE_MESSAGE, r1->id, s1->id));
	assert_true(has_edge(&kept, GRAPH_EDGE_MESSAGE, r2->id, s2->id));
	graph_free(&kept);
	graphcap_free(c);
}

/*
 * kernel:sockets: three tiers of unmodified programs.  Client C (10.0.0.1:5000) sends a
 * request to frontend F (10.0.0.2:80), which calls backend B (10.0.0.3:90) from its own
 * port 6000 before replying; B has a span inside its work.  F's receive is recorded before
 * C's send (the sender's tracepoint fires after the receiver woke, as on a real machine), and
 * the records are drained once before the exchanges are complete (nothing comes out) and then
 * at the end: one trace C -> (message) F -> (parent) F's request -> (message) B -> (parent)
 * the span.  A receive whose send nobody recorded roots a trace of its own.
 */
static void test_kernel_tiers(void **state)
{
	struct plan_attach at[1];
	struct plan p = { .graph = true, .sample = 1.0, .attach = at, .nattach = 1 };
	struct graphcap_opts o = { .sz = sizeof(o), .host = "h", .instance = 7 };
	const uint32_t a1 = 0x0a000001, a2 = 0x0a000002, a3 = 0x0a000003;
	const struct graph_task *cl, *fs, *fr, *bs, *sp, *lone;
	struct weft_graph_rec r;
	struct graphcap *c;
	struct graph kept;
	char why[256];

	(void)state;
	memset(at, 0, sizeof(at));
	snprintf(at[0].target.symbol, sizeof(at[0].target.symbol), "work");
	c = graphcap_new(&p, &o);
	assert_non_null(c);
	krec(c, false, T0 + 99, 20, 21, 0xf1, a2, 80, a1, 5000, 110, 10); /* F reads C's request */
	krec(c, true, T0 + 100, 10, 10, 0xc1, a1, 5000, a2, 80, 110, 10); /* C sends it */
	krec(c, true, T0 + 200, 20, 21, 0xf2, a2, 6000, a3, 90, 1020, 20); /* F calls B */
	krec(c, false, T0 + 210, 30, 31, 0xb1, a3, 90, a2, 6000, 1020, 20);
	memset(&r, 0, sizeof(r)); /* B's span [220, 230] */
	r.kind = WEFT_GREC_SPAN;
	r.pid = 30;
	r.tid = 31;
	memcpy(r.comm, "p30", 4);
	r.time = T0 + 230;
	r.dur = 10;
	assert_int_equal(graphcap_record(c, &r, sizeof(r)), 0);
	krec(c, true, T0 + 240, 30, 31, 0xb1, a3, 90, a2, 6000, 5005, 5); /* B replies */
	krec(c, false, T0 + 250, 20, 21, 0xf2, a2, 6000, a3, 90, 5005, 5);
	krec(c, true, T0 + 300, 20, 21, 0xf1, a2, 80, a1, 5000, 7007, 7); /* F replies */
	krec(c, false, T0 + 310, 10, 10, 0xc1, a1, 5000, a2, 80, 7007, 7);
	krec(c, false, T0 + 400, 40, 40, 0x41, a2, 80, 0x0a000009, 1234, 50, 3); /* no sender */
	graph_init(&kept);
	/* the newest record is 400 ns old: every exchange may still go on */
	assert_int_equal(graphcap_drain(c, false, &kept, NULL), 0);
	assert_int_equal(kept.ntasks, 0);
	assert_int_equal(graphcap_drain(c, true, &kept, NULL), 2);
	assert_int_equal(graph_check(&kept, why, sizeof(why)), 0);
	assert_int_equal(kept.ntasks, 6);
	cl = task_named(&kept, "request 10.0.0.2:80");
	fr = task_named(&kept, "request 10.0.0.3:90");
	sp = task_named(&kept, "work");
	bs = task_named(&kept, "serve :90");
	fs = NULL;
	lone = NULL;
	for (size_t i = 0; i < kept.ntasks; i++)
		if (strcmp(kept.tasks[i].name, "serve :80") == 0)
			*(kept.tasks[i].pid == 20 ? &fs : &lone) = &kept.tasks[i];
	assert_non_null(fs);
	assert_non_null(lone);
	assert_int_equal(cl->parent, 0);
	assert_int_equal(cl->pid, 10);
	assert_int_equal(cl->end - cl->start, 210);
	assert_int_equal(fs->parent, 0);
	assert_int_equal(fs->end - fs->start, 201); /* its request's receive to its reply */
	assert_int_equal(fr->parent, fs->id);
	assert_int_equal(bs->parent, 0);
	assert_int_equal(sp->parent, bs->id);
	assert_int_equal(sp->source, GRAPH_SRC_KERNEL);
	assert_true(graph_id128_eq(fs->trace, cl->trace));
	assert_true(graph_id128_eq(fr->trace, cl->trace));
	assert_true(graph_id128_eq(bs->trace, cl->trace));
	assert_true(graph_id128_eq(sp->trace, cl->trace));
	assert_false(graph_id128_eq(lone->trace, cl->trace));
	assert_int_equal(lone->parent, 0);
	assert_int_equal(kept.nedges, 4);
	assert_true(has_edge(&kept, GRAPH_EDGE_MESSAGE, cl->id, fs->id));
	assert_true(has_edge(&kept, GRAPH_EDGE_PARENT, fs->id, fr->id));
	assert_true(has_edge(&kept, GRAPH_EDGE_MESSAGE, fr->id, bs->id));
	assert_true(has_edge(&kept, GRAPH_EDGE_PARENT, bs->id, sp->id));
	graph_free(&kept);
	graphcap_free(c);
}

/* In kept: the "work" span that starts first, its server task (5 ns before it) and client
 * task (ending 20 ns after it); checks that they form one request's trace. */
static void expect_request(const struct graph *kept)
{
	const struct graph_task *sp = NULL, *srv = NULL, *cl = NULL;

	for (size_t i = 0; i < kept->ntasks; i++)
		if (strcmp(kept->tasks[i].name, "work") == 0 &&
		    (!sp || kept->tasks[i].start < sp->start))
			sp = &kept->tasks[i];
	assert_non_null(sp);
	for (size_t i = 0; i < kept->ntasks; i++)
		if (kept->tasks[i].pid == 20 && kept->tasks[i].start == sp->start - 5)
			srv = &kept->tasks[i];
		else if (kept->tasks[i].pid == 10 && kept->tasks[i].end == sp->end + 20)
			cl = &kept->tasks[i];
	assert_non_null(srv);
	assert_non_null(cl);
	assert_string_equal(srv->name, "serve :80");
	assert_int_equal(sp->parent, srv->id);
	assert_true(graph_id128_eq(sp->trace, srv->trace));
	assert_true(graph_id128_eq(srv->trace, cl->trace));
	assert_true(has_edge(kept, GRAPH_EDGE_MESSAGE, cl->id, srv->id));
	assert_true(has_edge(kept, GRAPH_EDGE_PARENT, srv->id, sp->id));
}

/*
 * A server thread that is never idle for a second: its spans that are a second old go, with
 * their requests, while the newer ones wait.  (They used to wait together, all of a thread's
 * spans while its newest was under a second old: on a busy redis-server, processCommand
 * spans piled up until the span buffer was full, and their requests were stored without them:
 * 200,000 requests of redis-benchmark gave 286,013 traces, 68,930 spans evicted.)  Request 1
 * of client thread 10 to server thread 20 has a span [110, 120] in its server task; request 2,
 * 1.5 s later, has one too.
 */
static void test_kernel_span_busy(void **state)
{
	struct plan_attach at[1];
	struct plan p = { .graph = true, .sample = 1.0, .attach = at, .nattach = 1 };
	struct graphcap_opts o = { .sz = sizeof(o), .host = "h", .instance = 7 };
	const uint32_t a1 = 0x0a000001, a2 = 0x0a000002;
	const uint64_t s2 = T0 + 1500000000ull;
	int64_t first;
	struct weft_graph_rec r;
	struct graphcap *c;
	struct graph kept;
	char why[256];

	(void)state;
	memset(at, 0, sizeof(at));
	snprintf(at[0].target.symbol, sizeof(at[0].target.symbol), "work");
	c = graphcap_new(&p, &o);
	assert_non_null(c);
	krec(c, true, T0 + 100, 10, 10, 0xc1, a1, 5000, a2, 80, 110, 10);
	krec(c, false, T0 + 105, 20, 20, 0xf1, a2, 80, a1, 5000, 110, 10);
	memset(&r, 0, sizeof(r)); /* the server's span [110, 120] */
	r.kind = WEFT_GREC_SPAN;
	r.pid = 20;
	r.tid = 20;
	memcpy(r.comm, "p20", 4);
	r.time = T0 + 120;
	r.dur = 10;
	assert_int_equal(graphcap_record(c, &r, sizeof(r)), 0);
	krec(c, true, T0 + 130, 20, 20, 0xf1, a2, 80, a1, 5000, 7007, 7);
	krec(c, false, T0 + 140, 10, 10, 0xc1, a1, 5000, a2, 80, 7007, 7);
	/* request 2, 1.5 s later, with its span [s2 + 10, s2 + 20] */
	krec(c, true, s2, 10, 10, 0xc1, a1, 5000, a2, 80, 120, 10);
	krec(c, false, s2 + 5, 20, 20, 0xf1, a2, 80, a1, 5000, 120, 10);
	r.time = s2 + 20;
	assert_int_equal(graphcap_record(c, &r, sizeof(r)), 0);
	krec(c, true, s2 + 30, 20, 20, 0xf1, a2, 80, a1, 5000, 7014, 7);
	krec(c, false, s2 + 40, 10, 10, 0xc1, a1, 5000, a2, 80, 7014, 7);
	graph_init(&kept);
	/* request 1, whole; request 2 waits */
	assert_int_equal(graphcap_drain(c, false, &kept, NULL), 1);
	assert_int_equal(graph_check(&kept, why, sizeof(why)), 0);
	assert_int_equal(kept.ntasks, 3);
	expect_request(&kept);
	first = task_named(&kept, "work")->start;
	graph_free(&kept);
	/* seconds later (a receive of another thread): request 2, whole */
	graph_init(&kept);
	krec(c, false, s2 + 3000000000ull, 40, 40, 0x41, a2, 80, 0x0a000009, 1234, 50, 3);
	assert_int_equal(graphcap_drain(c, false, &kept, NULL), 1);
	assert_int_equal(graph_check(&kept, why, sizeof(why)), 0);
	assert_int_equal(kept.ntasks, 3);
	expect_request(&kept);
	assert_int_equal(task_named(&kept, "work")->start - first, (int64_t)(s2 + 10 - (T0 + 110)));
	graph_free(&kept);
	graph_init(&kept);
	assert_int_equal(graphcap_drain(c, true, &kept, NULL), 1); /* the lone receive */
	assert_int_equal(kept.ntasks, 1);
	graph_free(&kept);
	graphcap_free(c);
}

/*
 * A span that must wait (it ended less than a second before the newest record: a span around
 * it may not have ended) inside a weft task that has ended: the task's trace waits with it,
 * and is drained once, whole, the span as the task's child; not first without it and then
 * again (a reader in between would see the task with no work in it).
 */
static void test_span_held_trace(void **state)
{
	struct plan_attach at[1];
	struct plan p = { .graph = true, .sample = 1.0, .attach = at, .nattach = 1 };
	struct graphcap_opts o = { .sz = sizeof(o), .host = "h", .instance = 5 };
	struct graphcap *c;
	struct graph kept;
	struct weft_graph_rec r;
	const struct graph_task *sp;
	char why[256];

	(void)state;
	memset(at, 0, sizeof(at));
	snprintf(at[0].target.symbol, sizeof(at[0].target.symbol), "handle");
	c = graphcap_new(&p, &o);
	assert_non_null(c);
	rec(c, WEFT_GREC_TASK_BEGIN, T0, (uint64_t[]){ HI, 1, 9, 0 }, 4, "svc", "req");
	memset(&r, 0, sizeof(r)); /* handle [100, 200] in it */
	r.kind = WEFT_GREC_SPAN;
	r.pid = 4242;
	r.tid = 4243;
	memcpy(r.comm, "app", 4);
	r.time = T0 + 200;
	r.dur = 100;
	assert_int_equal(graphcap_record(c, &r, sizeof(r)), 0);
	rec(c, WEFT_GREC_TASK_END, T0 + 300, (uint64_t[]){ HI, 1, 9, 1 }, 4, NULL, NULL);
	graph_init(&kept);
	assert_int_equal(graphcap_drain(c, false, &kept, NULL), 0);
	assert_int_equal(kept.ntasks, 0);
	/* 3 s later, another trace's task: now both */
	rec(c, WEFT_GREC_TASK_BEGIN, T0 + 3000000000ull, (uint64_t[]){ HI, 2, 1, 0 }, 4, "svc",
	    "req");
	rec(c, WEFT_GREC_TASK_END, T0 + 3000000100ull, (uint64_t[]){ HI, 2, 1, 1 }, 4, NULL, NULL);
	assert_int_equal(graphcap_drain(c, false, &kept, NULL), 2);
	assert_int_equal(graph_check(&kept, why, sizeof(why)), 0);
	assert_int_equal(kept.ntasks, 3);
	sp = task_named(&kept, "handle");
	assert_int_equal(sp->parent, 9);
	assert_true(sp->trace.hi == HI && sp->trace.lo == 1);
	graph_free(&kept);
	graphcap_free(c);
}

/* A kernel:sockets record of an IPv6 socket: in6 = local, remote (16 bytes each). */
static int krec6(struct graphcap *c, bool send, uint64_t t, uint32_t pid, uint64_t sk,
		 const char *la, uint16_t lp, const char *ra, uint16_t rp, uint32_t seq_end,
		 uint32_t len, uint32_t family)
{
	struct weft_graph_rec r;

	memset(&r, 0, sizeof(r));
	r.kind = send ? WEFT_GREC_KSEND : WEFT_GREC_KRECV;
	r.time = t;
	r.pid = pid;
	r.tid = pid;
	snprintf(r.comm, sizeof(r.comm), "p%u", pid);
	r.family = family;
	assert_int_equal(inet_pton(AF_INET6, la, r.in6), 1);
	assert_int_equal(inet_pton(AF_INET6, ra, r.in6 + 16), 1);
	r.a[2] = lp;
	r.a[3] = rp;
	r.a[4] = seq_end;
	r.a[5] = len;
	r.a[6] = sk;
	/* as the kernel writes it: without the strings (WEFT_GREC_SHORT bytes), which the
	 * capture must read as empty, never from beyond the record */
	memset(r.s0, 'x', sizeof(r.s0) + sizeof(r.s1));
	return graphcap_record(c, &r, WEFT_GREC_SHORT);
}

static const struct graph_task *task_of(const struct graph *g, uint32_t pid)
{
	for (size_t i = 0; i < g->ntasks; i++)
		if (g->tasks[i].pid == pid)
			return &g->tasks[i];
	fail_msg("no task of pid %u", pid);
	return NULL;
}

/*
 * kernel:sockets over IPv6: client C (2001:db8::1:5000) asks server F (2001:db8::2:80),
 * matched as IPv4 is: one trace, "request [2001:db8::2]:80" -> message -> "serve :80", the
 * attributes carrying the addresses as RFC 5952 text.  An IPv4 client D (10.0.0.1:5001) asks
 * server G, whose socket is IPv6 with v4-mapped addresses (::ffff:10.0.0.2:81): normalised to
 * IPv4, they match, and G ships its receive as IPv4 numbers.  A record of another family
 * (7) is bad: refused and counted, nothing else happens.
 */
static void test_kernel_ipv6(void **state)
{
	struct plan_attach at[1];
	struct plan p = { .graph = true, .sample = 1.0, .attach = at, .nattach = 1 };
	struct graphcap_opts o = { .sz = sizeof(o), .host = "h", .instance = 7 };
	const struct graph_task *cl, *sv, *d, *g;
	struct graphcap_stats st;
	struct graphcap *c;
	struct graph kept;
	char why[256];

	(void)state;
	memset(at, 0, sizeof(at));
	c = graphcap_new(&p, &o);
	assert_non_null(c);
	assert_int_equal(krec6(c, true, T0 + 100, 10, 0xc1, "2001:db8::1", 5000, "2001:db8::2", 80,
			       110, 10, WEFT_AF_INET6),
			 0);
	assert_int_equal(krec6(c, false, T0 + 110, 20, 0xf1, "2001:db8::2", 80, "2001:db8::1", 5000,
			       110, 10, WEFT_AF_INET6),
			 0);
	assert_int_equal(krec6(c, true, T0 + 120, 20, 0xf1, "2001:db8::2", 80, "2001:db8::1", 5000,
			       7007, 7, WEFT_AF_INET6),
			 0);
	assert_int_equal(krec6(c, false, T0 + 130, 10, 0xc1, "2001:db8::1", 5000, "2001:db8::2", 80,
			       7007, 7, WEFT_AF_INET6),
			 0);
	krec(c, true, T0 + 200, 30, 30, 0xd1, 0x0a000001, 5001, 0x0a000002, 81, 50, 5);
	assert_int_equal(krec6(c, false, T0 + 210, 40, 0x91, "::ffff:10.0.0.2", 81,
			       "::ffff:10.0.0.1", 5001, 50, 5, WEFT_AF_INET6),
			 0);
	assert_int_equal(krec6(c, true, T0 + 220, 40, 0x91, "::ffff:10.0.0.2", 81,
			       "::ffff:10.0.0.1", 5001, 90, 9, WEFT_AF_INET6),
			 0);
	krec(c, false, T0 + 230, 30, 30, 0xd1, 0x0a000001, 5001, 0x0a000002, 81, 90, 9);
	assert_int_equal(
		krec6(c, true, T0 + 240, 50, 0x51, "2001:db8::5", 1, "2001:db8::6", 2, 9, 9, 7),
		-EINVAL);
	graphcap_stats(c, &st);
	assert_int_equal(st.bad, 1);
	graph_init(&kept);
	assert_int_equal(graphcap_drain(c, true, &kept, NULL), 2);
	assert_int_equal(graph_check(&kept, why, sizeof(why)), 0);
	assert_int_equal(kept.ntasks, 4);
	cl = task_of(&kept, 10);
	sv = task_of(&kept, 20);
	d = task_of(&kept, 30);
	g = task_of(&kept, 40);
	assert_string_equal(cl->name, "request [2001:db8::2]:80");
	assert_string_equal(sv->name, "serve :80");
	assert_string_equal(
		cl->attrs, "{\"kernel.sends\":[[\"2001:db8::1\",5000,\"2001:db8::2\",80,110,10]]}");
	assert_string_equal(sv->attrs,
			    "{\"kernel.recv\":[\"2001:db8::2\",80,\"2001:db8::1\",5000,110,10]}");
	assert_true(graph_id128_eq(cl->trace, sv->trace));
	assert_true(has_edge(&kept, GRAPH_EDGE_MESSAGE, cl->id, sv->id));
	assert_string_equal(d->name, "request 10.0.0.2:81");
	assert_string_equal(g->name, "serve :81");
	assert_string_equal(g->attrs, "{\"kernel.recv\":[167772162,81,167772161,5001,50,5]}");
	assert_true(graph_id128_eq(d->trace, g->trace));
	assert_true(has_edge(&kept, GRAPH_EDGE_MESSAGE, d->id, g->id));
	assert_int_equal(kept.nedges, 2);
	graph_free(&kept);
	graphcap_free(c);
}

static void prec(struct graphcap *c, uint32_t kind, uint64_t t, uint32_t pid, uint32_t tid,
		 const uint64_t *a, int na, const char *s0, const char *s1)
{
	struct weft_graph_rec r;

	memset(&r, 0, sizeof(r));
	r.time = t;
	r.pid = pid;
	r.tid = tid;
	r.kind = kind;
	memcpy(r.comm, "app", 4);
	for (int i = 0; i < na; i++)
		r.a[i] = a[i];
	if (s0)
		snprintf(r.s0, sizeof(r.s0), "%s", s0);
	if (s1)
		snprintf(r.s1, sizeof(r.s1), "%s", s1);
	assert_int_equal(graphcap_record(c, &r, sizeof(r)), 0);
}

static const struct graph_task *task_of_id(const struct graph *g, uint64_t id)
{
	for (size_t i = 0; i < g->ntasks; i++)
		if (g->tasks[i].id == id)
			return &g->tasks[i];
	fail_msg("no task %llu", (unsigned long long)id);
	return NULL;
}

static size_t count_edges(const struct graph *g, enum graph_edge_kind k, uint64_t from, uint64_t to)
{
	size_t n = 0;

	for (size_t i = 0; i < g->nedges; i++)
		n += g->edges[i].kind == k && g->edges[i].from_task == from &&
		     g->edges[i].to_task == to;
	return n;
}

/*
 * kernel:sched and kernel:process on weft tasks: a wakeup or fork is an edge from the task
 * open on the waker's (parent's) thread to the one open on the woken thread (the child), or
 * to the next one it begins; exec and exit are events of the thread's open task.  What makes
 * no element is counted: a waker with no task, ends in two traces, a full pending table; an
 * exit forgets what its thread was waiting for.
 */
static void test_kernel_sched(void **state)
{
	struct plan p = { .graph = true, .sample = 1.0 };
	struct graphcap_opts o = { .sz = sizeof(o), .host = "h", .instance = 7 };
	const uint64_t lo = 77, lo2 = 78;
	uint64_t b1[] = { HI, lo, 1, 0 }, b2[] = { HI, lo, 2, 1 }, b3[] = { HI, lo, 3, 1 };
	uint64_t b4[] = { HI, lo, 4, 2 }, b5[] = { HI, lo, 5, 1 }, b9[] = { HI, lo2, 9, 0 };
	uint64_t w51[] = { 51 }, w52[] = { 52 }, f60[] = { 60 }, w80[] = { 80 }, w90[] = { 90 };
	struct graphcap_stats st;
	struct graph kept;
	struct graphcap *c;
	char why[256];
	size_t nexec = 0, nexit = 0;

	(void)state;
	c = graphcap_new(&p, &o);
	assert_non_null(c);
	prec(c, WEFT_GREC_TASK_BEGIN, T0, 50, 50, b1, 4, "svc", "root");
	prec(c, WEFT_GREC_TASK_BEGIN, T0 + 10, 50, 51, b2, 4, "svc", "worker");
	prec(c, WEFT_GREC_TASK_BEGIN, T0 + 11, 90, 90, b9, 4, "svc", "other");
	for (int i = 0; i < 3; i++) /* 50 wakes 51, whose task is open: 3 edges 1 -> 2 */
		prec(c, WEFT_GREC_KWAKE, T0 + 20 + (uint64_t)i, 50, 50, w51, 1, NULL, NULL);
	prec(c, WEFT_GREC_KWAKE, T0 + 30, 50, 50, w52, 1, NULL, NULL); /* 52: no task yet */
	prec(c, WEFT_GREC_TASK_BEGIN, T0 + 40, 50, 52, b3, 4, "svc", "late");
	prec(c, WEFT_GREC_KFORK, T0 + 50, 50, 51, f60, 1, NULL, NULL); /* 2 forks 60 */
	prec(c, WEFT_GREC_TASK_BEGIN, T0 + 60, 60, 60, b4, 4, "svc", "child");
	prec(c, WEFT_GREC_KEXEC, T0 + 61, 60, 60, NULL, 0, "/bin/true", NULL);
	prec(c, WEFT_GREC_KEXIT, T0 + 62, 60, 60, NULL, 0, NULL, NULL);
	prec(c, WEFT_GREC_KWAKE, T0 + 70, 70, 70, w51, 1, NULL, NULL); /* waker without task */
	prec(c, WEFT_GREC_KWAKE, T0 + 71, 50, 50, w90, 1, NULL, NULL); /* another trace */
	prec(c, WEFT_GREC_KWAKE, T0 + 72, 50, 50, w80, 1, NULL, NULL); /* 80 waits ... */
	prec(c, WEFT_GREC_KEXIT, T0 + 73, 80, 80, NULL, 0, NULL, NULL); /* ... and exits */
	prec(c, WEFT_GREC_TASK_BEGIN, T0 + 74, 81, 80, b5, 4, "svc", "reused");
	for (uint64_t id = 5; id >= 1; id--) { /* 4 ended when its thread exited */
		uint64_t e[] = { HI, lo, id, 1 };

		if (id == 4)
			continue;

		prec(c, WEFT_GREC_TASK_END, T0 + 100 - id,
		     id == 4 ? 60 :
		     id == 5 ? 81 :
			       50,
		     id == 1 ? 50 :
		     id == 2 ? 51 :
		     id == 3 ? 52 :
		     id == 4 ? 60 :
			       80,
		     e, 4, NULL, NULL);
	}
	{
		uint64_t e[] = { HI, lo2, 9, 1 };

		prec(c, WEFT_GREC_TASK_END, T0 + 200, 90, 90, e, 4, NULL, NULL);
	}
	graph_init(&kept);
	assert_int_equal(graphcap_drain(c, true, &kept, NULL), 2);
	assert_int_equal(graph_check(&kept, why, sizeof(why)), 0);
	assert_int_equal(count_edges(&kept, GRAPH_EDGE_WAKEUP, 1, 2), 3);
	assert_int_equal(count_edges(&kept, GRAPH_EDGE_WAKEUP, 1, 3), 1);
	assert_int_equal(count_edges(&kept, GRAPH_EDGE_FORK, 2, 4), 1);
	for (size_t i = 0; i < kept.nedges; i++)
		if (kept.edges[i].kind == GRAPH_EDGE_WAKEUP ||
		    kept.edges[i].kind == GRAPH_EDGE_FORK)
			assert_int_equal(kept.edges[i].source, GRAPH_SRC_KERNEL);
	assert_int_equal(count_edges(&kept, GRAPH_EDGE_WAKEUP, 1, 5) +
				 count_edges(&kept, GRAPH_EDGE_WAKEUP, 1, 9),
			 0);
	for (size_t i = 0; i < kept.nevents; i++) {
		const struct graph_event *ev = &kept.events[i];

		assert_int_equal(ev->task, 4);
		if (strcmp(ev->name, "exec") == 0) {
			assert_string_equal(ev->attrs, "{\"filename\":\"/bin/true\"}");
			nexec++;
		} else {
			assert_string_equal(ev->name, "exit");
			nexit++;
		}
	}
	assert_int_equal(nexec, 1);
	assert_int_equal(nexit, 1);
	assert_int_equal(task_of_id(&kept, 4)->status, GRAPH_STATUS_UNSET);
	assert_int_equal(task_of_id(&kept, 4)->end - task_of_id(&kept, 4)->start, 2);
	assert_int_equal(task_of_id(&kept, 2)->status, GRAPH_STATUS_OK);
	graphcap_stats(c, &st);
	/* the taskless waker, the wakeup across traces, the exit of thread 80 (no task) */
	assert_int_equal(st.kernel_unowned, 3);
	assert_int_equal(st.kernel_pending_full, 0);
	assert_int_equal(st.bad, 0);
	graph_free(&kept);
	graphcap_free(c);

	/* a bounded wait: 2 open tasks allowed, so 2 pending wakeups; the third is counted */
	o.max_open = 2;
	c = graphcap_new(&p, &o);
	assert_non_null(c);
	prec(c, WEFT_GREC_TASK_BEGIN, T0, 50, 50, b1, 4, "svc", "root");
	for (uint64_t t = 100; t < 103; t++) {
		uint64_t w[] = { t };

		prec(c, WEFT_GREC_KWAKE, T0 + t, 50, 50, w, 1, NULL, NULL);
	}
	graphcap_stats(c, &st);
	assert_int_equal(st.kernel_pending_full, 1);
	graphcap_free(c);
}

/* A span record of thread (pid, tid) over [t0, t1] (cookie 0). */
static void srec(struct graphcap *c, uint32_t pid, uint32_t tid, uint64_t t0, uint64_t t1)
{
	struct weft_graph_rec r;

	memset(&r, 0, sizeof(r));
	r.kind = WEFT_GREC_SPAN;
	r.pid = pid;
	r.tid = tid;
	snprintf(r.comm, sizeof(r.comm), "p%u", pid);
	r.time = t1;
	r.dur = t1 - t0;
	assert_int_equal(graphcap_record(c, &r, sizeof(r)), 0);
}

static const struct graph_task *task_of_tid(const struct graph *g, int64_t tid, int64_t start)
{
	for (size_t i = 0; i < g->ntasks; i++)
		if (g->tasks[i].tid == tid && (start < 0 || g->tasks[i].start == start))
			return &g->tasks[i];
	fail_msg("no task of thread %lld", (long long)tid);
	return NULL;
}

/*
 * kernel:sched at drain time, a thread pool of an unmodified program: client C (10) sends a
 * request to the reader thread 21 of server 20, which wakes worker 25 inside its exchange;
 * 25's span, which would root a trace, joins the server task's trace with a wakeup edge; 25
 * wakes helper 23 from inside its span, and 23's span joins too (23 sorts before 25: the
 * second pass of the drain); thread 27, forked by the reader then, joins by a fork edge.
 * Thread 26 is woken by the server task while inside a root span of its own (two traces:
 * counted), thread 30 has no task (counted).  A first drain, the exchanges complete and
 * worker 25's first span a second old while a later one of it still waits: the server's
 * trace comes out whole, and 26's; the end: 25's later span, a trace of its own (woken by
 * 30, in no task).
 */
/*
 * Kernel tasks beyond the memory for spans (max_open of them): three server exchanges of one
 * thread with max_open 2, the third not remembered.  Without spans nothing is lost and
 * nothing counted; a span inside the third exchange stays a root and is counted
 * (open_evicted), a span inside the second nests in it.  late: the first exchange ended 3 s
 * before the others, so it makes room for the third.
 */
static void forgotten_run(bool spans, bool late, uint64_t *evicted, struct graph *kept)
{
	const int64_t d = late ? 3000000000ll : 0; /* the 2nd and 3rd exchanges 3 s later */
	struct plan_attach at[1];
	struct plan p = { .graph = true, .sample = 1.0, .attach = at, .nattach = 1 };
	struct graphcap_opts o = { .sz = sizeof(o), .host = "h", .instance = 5, .max_open = 2 };
	const uint32_t a1 = 0x0a000001, a2 = 0x0a000002;
	struct graphcap_stats st;
	struct graphcap *c;

	memset(at, 0, sizeof(at));
	snprintf(at[0].target.symbol, sizeof(at[0].target.symbol), "handle");
	c = graphcap_new(&p, &o);
	assert_non_null(c);
	for (uint32_t i = 1; i <= 3; i++) {
		int64_t t = T0 + 100 * i + (i > 1 ? d : 0);

		krec(c, false, t, 20, 21, 0xf1, a2, 80, a1, 5000, 10 * i, 10);
		krec(c, true, t + 50, 20, 21, 0xf1, a2, 80, a1, 5000, 10 * i, 10);
	}
	if (spans) {
		srec(c, 20, 21, T0 + d + 210, T0 + d + 240); /* in the second exchange */
		srec(c, 20, 21, T0 + d + 310, T0 + d + 340); /* in the third */
		/* (two spans: max_open bounds the buffered spans too) */
	}
	graph_init(kept);
	assert_true(graphcap_drain(c, true, kept, NULL) >= 3);
	graphcap_stats(c, &st);
	*evicted = st.open_evicted;
	graphcap_free(c);
}

/* The "handle" span tasks of g: how many have a parent, how many are roots. */
static void handle_spans(const struct graph *g, int *nested, int *roots)
{
	*nested = *roots = 0;
	for (size_t i = 0; i < g->ntasks; i++)
		if (strcmp(g->tasks[i].name, "handle") == 0) {
			if (g->tasks[i].parent)
				(*nested)++;
			else
				(*roots)++;
		}
}

static void test_kernel_forgotten(void **state)
{
	struct graph kept;
	uint64_t ev;
	int roots, nested;

	(void)state;
	forgotten_run(false, false, &ev, &kept);
	assert_int_equal(kept.ntasks, 3); /* three server tasks, nothing lost */
	assert_int_equal(ev, 0);
	graph_free(&kept);

	forgotten_run(true, false, &ev, &kept);
	assert_int_equal(kept.ntasks, 5);
	assert_int_equal(ev, 1); /* the span in the third exchange */
	handle_spans(&kept, &nested, &roots);
	assert_int_equal(nested, 1);
	assert_int_equal(roots, 1);
	graph_free(&kept);

	/* the first exchange 3 s before the others: it makes room (no span can wait for it),
	 * the third is remembered and both spans nest, nothing counted */
	forgotten_run(true, true, &ev, &kept);
	assert_int_equal(kept.ntasks, 5);
	assert_int_equal(ev, 0);
	handle_spans(&kept, &nested, &roots);
	assert_int_equal(nested, 2);
	assert_int_equal(roots, 0);
	graph_free(&kept);
}

/*
 * Remembered kernel tasks across drains (max_open 2): exchanges A and B (threads 21, 22) are
 * emitted by a first drain and fill the table; in the last one, 3 s later, exchange D
 * (thread 21 again, a span inside it) finds the table full and makes room: A and B ended two
 * span holds before the newest record, so they go, D is remembered and its span nests in it,
 * nothing is lost; then C (thread 23, buffered since the first drain) takes the second slot.
 * The capture skips the make-room pass while no remembered task is old enough: the earliest
 * end it keeps for that must come through the first drain's prune as it was.
 */
static void test_kernel_room_drains(void **state)
{
	struct plan_attach at[1];
	struct plan p = { .graph = true, .sample = 1.0, .attach = at, .nattach = 1 };
	struct graphcap_opts o = { .sz = sizeof(o), .host = "h", .instance = 3, .max_open = 2 };
	const uint32_t a1 = 0x0a000001, a2 = 0x0a000002;
	const uint64_t S = 1000000000ull;
	const struct graph_task *d, *sp;
	struct graphcap_stats st;
	struct graphcap *c;
	struct graph kept;
	int roots, nested;

	(void)state;
	memset(at, 0, sizeof(at));
	snprintf(at[0].target.symbol, sizeof(at[0].target.symbol), "handle");
	c = graphcap_new(&p, &o);
	assert_non_null(c);
	krec(c, false, T0 + 100, 20, 21, 0xf1, a2, 80, a1, 5000, 10, 10); /* A */
	krec(c, true, T0 + 150, 20, 21, 0xf1, a2, 80, a1, 5000, 20, 10);
	krec(c, false, T0 + 200, 20, 22, 0xf2, a2, 80, a1, 5001, 10, 10); /* B */
	krec(c, true, T0 + 250, 20, 22, 0xf2, a2, 80, a1, 5001, 20, 10);
	krec(c, false, T0 + 15 * S / 10, 20, 23, 0xf3, a2, 80, a1, 5002, 10, 10); /* C */
	krec(c, true, T0 + 15 * S / 10 + 50, 20, 23, 0xf3, a2, 80, a1, 5002, 20, 10);
	graph_init(&kept);
	assert_int_equal(graphcap_drain(c, false, &kept, NULL), 2); /* A and B */
	assert_int_equal(kept.ntasks, 2);
	graph_clear(&kept);
	krec(c, false, T0 + 3 * S, 20, 21, 0xf1, a2, 80, a1, 5000, 30, 10); /* D */
	srec(c, 20, 21, T0 + 3 * S + 10, T0 + 3 * S + 40);
	krec(c, true, T0 + 3 * S + 50, 20, 21, 0xf1, a2, 80, a1, 5000, 40, 10);
	assert_int_equal(graphcap_drain(c, true, &kept, NULL), 2); /* C; D with its span */
	assert_int_equal(kept.ntasks, 3);
	d = task_named(&kept, "serve :80");
	if (d->tid != 21) /* C's is the other one */
		d = task_of_tid(&kept, 21,
				(int64_t)(T0 + 3 * S) + (d->start - (int64_t)(T0 + 15 * S / 10)));
	assert_int_equal(d->tid, 21);
	assert_string_equal(d->name, "serve :80");
	handle_spans(&kept, &nested, &roots);
	assert_int_equal(nested, 1);
	assert_int_equal(roots, 0);
	sp = NULL;
	for (size_t i = 0; i < kept.ntasks; i++)
		if (strcmp(kept.tasks[i].name, "handle") == 0)
			sp = &kept.tasks[i];
	assert_non_null(sp);
	assert_int_equal(sp->parent, d->id);
	graphcap_stats(c, &st);
	assert_int_equal(st.open_evicted, 0);
	assert_int_equal(st.bad, 0);
	graph_free(&kept);
	graphcap_free(c);
}

/*
 * Remembered sends make room: with a table of two, three client requests (A, B, C, three
 * connections) emitted in one drain, then the server's receive of C's bytes in a later drain
 * (a late receive): it finds C's send (the older half, A, made room) and joins C's trace with
 * a message edge.  When the table refused new sends once full, the receive found no sender
 * and its server task rooted a trace of its own.
 */
static void test_kernel_sends_room(void **state)
{
	struct plan p = { .graph = true, .sample = 1.0 };
	struct graphcap_opts o = { .sz = sizeof(o), .host = "h", .instance = 4, .max_open = 2 };
	const uint32_t a1 = 0x0a000001, a2 = 0x0a000002;
	const uint64_t S = 1000000000ull;
	const struct graph_task *sv;
	struct graph_id128 c_trace = { 0 };
	uint64_t c_id = 0;
	struct graph kept;
	struct graphcap *c;

	(void)state;
	c = graphcap_new(&p, &o);
	assert_non_null(c);
	krec(c, true, T0 + 100, 10, 11, 0xc1, a1, 5001, a2, 80, 10, 10); /* A */
	krec(c, true, T0 + 200, 10, 12, 0xc2, a1, 5002, a2, 80, 10, 10); /* B */
	krec(c, true, T0 + 300, 10, 13, 0xc3, a1, 5003, a2, 80, 10, 10); /* C */
	krec(c, true, T0 + 15 * S / 10, 10, 19, 0xc9, a1, 5009, a2, 80, 10, 10); /* newer */
	graph_init(&kept);
	assert_int_equal(graphcap_drain(c, false, &kept, NULL), 3); /* A, B, C */
	assert_int_equal(kept.ntasks, 3);
	for (size_t i = 0; i < kept.ntasks; i++)
		if (kept.tasks[i].tid == 13) {
			c_trace = kept.tasks[i].trace;
			c_id = kept.tasks[i].id;
		}
	assert_true(c_id != 0);
	graph_clear(&kept);
	krec(c, false, T0 + 2 * S, 20, 21, 0xf3, a2, 80, a1, 5003, 10, 10); /* C's, late */
	graphcap_drain(c, true, &kept, NULL);
	assert_int_equal(kept.ntasks, 2); /* the server task, and the newer request */
	sv = task_named(&kept, "serve :80");
	assert_memory_equal(&sv->trace, &c_trace, sizeof(c_trace));
	assert_true(has_edge(&kept, GRAPH_EDGE_MESSAGE, c_id, sv->id));
	graph_free(&kept);
	graphcap_free(c);
}

/*
 * The capture's running total of aggregates (the outlier rules' view) is bounded: eighteen
 * drains each finish a kernel task of 60 s, whose concurrency is 60,000 entries (a ms each);
 * the caller's aggregates of each drain hold them (and are put, then dropped), the total does
 * not.  When the total kept every ms of every process since the start, the eighteenth drain
 * took it past GRAPH_AGGS_MAX (2^20) entries and every drain from then on failed with -E2BIG.
 */
static void test_total_bounded(void **state)
{
	struct plan p = { .graph = true, .sample = 1.0 };
	struct graphcap_opts o = { .sz = sizeof(o), .host = "h", .instance = 5 };
	const uint32_t a1 = 0x0a000001, a2 = 0x0a000002;
	const uint64_t S = 1000000000ull;
	struct graph_aggs aggs;
	struct graph kept;
	struct graphcap *c;

	(void)state;
	c = graphcap_new(&p, &o);
	assert_non_null(c);
	graph_init(&kept);
	for (uint32_t k = 0; k <= 18; k++) {
		uint64_t t = T0 + k * 70 * S;

		/* a request read at t, answered 60 s later (no sender: a root of its own) */
		krec(c, false, t, 20, 21, 0xf1, a2, 80, a1, 5000, 10 * (k + 1), 5);
		if (k) { /* the previous exchange is complete now */
			graph_aggs_init(&aggs);
			assert_int_equal(graphcap_drain(c, false, &kept, &aggs), 1);
			assert_int_equal(aggs.nconc, GRAPH_CONC_MAX_MS);
			graph_aggs_free(&aggs);
			graph_clear(&kept);
		}
		if (k < 18)
			krec(c, true, t + 60 * S, 20, 21, 0xf1, a2, 80, a1, 5000, 10 * (k + 1), 5);
	}
	graph_free(&kept);
	graphcap_free(c);
}

/*
 * A thread's calls on a socket handed over out of time order (another CPU's record first),
 * some held over from a drain before: the server's reply to the second request comes before
 * its receive of it, and the first exchange was buffered through a drain that could not
 * finish it.  The capture orders each thread's calls by time (a counting sort by thread and
 * socket, then a sort of the group only when it came out of order): two server tasks, each
 * from its receive to its reply, each joined to its client's request by a message edge.
 */
static void test_kernel_out_of_order(void **state)
{
	struct plan p = { .graph = true, .sample = 1.0 };
	struct graphcap_opts o = { .sz = sizeof(o), .host = "h", .instance = 6 };
	const uint32_t a1 = 0x0a000001, a2 = 0x0a000002;
	const struct graph_task *cl[2] = { NULL, NULL }, *sv[2] = { NULL, NULL };
	struct graph kept;
	struct graphcap *c;
	int64_t t0 = 0;
	char why[256];

	(void)state;
	c = graphcap_new(&p, &o);
	assert_non_null(c);
	krec(c, true, T0 + 100, 10, 10, 0xc1, a1, 5000, a2, 80, 110, 10); /* request 1 */
	krec(c, false, T0 + 105, 20, 21, 0xf1, a2, 80, a1, 5000, 110, 10);
	graph_init(&kept);
	assert_int_equal(graphcap_drain(c, false, &kept, NULL), 0); /* held over */
	krec(c, true, T0 + 200, 20, 21, 0xf1, a2, 80, a1, 5000, 1005, 5); /* reply 1 */
	krec(c, false, T0 + 210, 10, 10, 0xc1, a1, 5000, a2, 80, 1005, 5);
	krec(c, true, T0 + 300, 10, 10, 0xc1, a1, 5000, a2, 80, 130, 20); /* request 2 */
	krec(c, true, T0 + 400, 20, 21, 0xf1, a2, 80, a1, 5000, 1012, 7); /* its reply first */
	krec(c, false, T0 + 305, 20, 21, 0xf1, a2, 80, a1, 5000, 130, 20);
	krec(c, false, T0 + 410, 10, 10, 0xc1, a1, 5000, a2, 80, 1012, 7);
	assert_int_equal(graphcap_drain(c, true, &kept, NULL), 2);
	assert_int_equal(graph_check(&kept, why, sizeof(why)), 0);
	assert_int_equal(kept.ntasks, 4);
	for (size_t i = 0; i < kept.ntasks; i++)
		if (!i || kept.tasks[i].start < t0)
			t0 = kept.tasks[i].start;
	for (size_t i = 0; i < kept.ntasks; i++) {
		const struct graph_task *t = &kept.tasks[i];
		bool second = t->start - t0 >= 200; /* the first request's began at t0 */

		if (t->pid == 10)
			cl[second] = t;
		else
			sv[second] = t;
	}
	for (int k = 0; k < 2; k++) {
		assert_non_null(cl[k]);
		assert_non_null(sv[k]);
		assert_string_equal(sv[k]->name, "serve :80");
		assert_true(graph_id128_eq(sv[k]->trace, cl[k]->trace));
		assert_true(has_edge(&kept, GRAPH_EDGE_MESSAGE, cl[k]->id, sv[k]->id));
	}
	assert_int_equal(cl[0]->end - cl[0]->start, 110);
	assert_int_equal(sv[0]->end - sv[0]->start, 95);
	assert_int_equal(cl[1]->end - cl[1]->start, 110);
	assert_int_equal(sv[1]->end - sv[1]->start, 95);
	assert_false(graph_id128_eq(cl[0]->trace, cl[1]->trace));
	graph_free(&kept);
	graphcap_free(c);
}

/*
 * The trace ids the capture makes are time-ordered in their high half (the trace's start
 * second, wall clock, above 32 bits of the instance) and random-looking in their low half,
 * so that a store's index on the id takes each second's new traces at its end.  Twelve
 * requests of one client, 0.4 s apart (over five seconds), drained at the end: every trace's
 * high half names its client task's start second, the low 32 bits are one instance's, the
 * ids are unique, and ordered as the requests' starts are.
 */
static void test_kernel_trace_ids(void **state)
{
	struct plan p = { .graph = true, .sample = 1.0 };
	struct graphcap_opts o = { .sz = sizeof(o), .host = "h", .instance = 11 };
	const uint32_t a1 = 0x0a000001, a2 = 0x0a000002;
	const struct graph_task *cl[12] = { NULL };
	struct graph kept;
	struct graphcap *c;
	uint32_t seq = 100, rseq = 5000;
	size_t ncl = 0;
	char why[256];

	(void)state;
	c = graphcap_new(&p, &o);
	assert_non_null(c);
	for (int i = 0; i < 12; i++) {
		uint64_t t = T0 + (uint64_t)i * 400000000ull;

		seq += 10;
		krec(c, true, t, 10, 10, 0xc1, a1, 5000, a2, 80, seq, 10);
		krec(c, false, t + 10, 20, 20, 0xf1, a2, 80, a1, 5000, seq, 10);
		rseq += 5;
		krec(c, true, t + 20, 20, 20, 0xf1, a2, 80, a1, 5000, rseq, 5);
		krec(c, false, t + 30, 10, 10, 0xc1, a1, 5000, a2, 80, rseq, 5);
	}
	graph_init(&kept);
	assert_int_equal(graphcap_drain(c, true, &kept, NULL), 12);
	assert_int_equal(graph_check(&kept, why, sizeof(why)), 0);
	for (size_t i = 0; i < kept.ntasks; i++)
		if (kept.tasks[i].pid == 10)
			cl[ncl++] = &kept.tasks[i];
	assert_int_equal(ncl, 12);
	for (size_t i = 0; i < ncl; i++) {
		struct graph_id128 id = cl[i]->trace;

		assert_int_equal(id.hi >> 32, (uint64_t)cl[i]->start / 1000000000u);
		assert_int_equal((uint32_t)id.hi, (uint32_t)cl[0]->trace.hi);
		for (size_t j = 0; j < ncl; j++) {
			struct graph_id128 o2 = cl[j]->trace;

			if (j == i)
				continue;
			assert_false(graph_id128_eq(id, o2));
			/* a later start never has a smaller high half */
			if (cl[j]->start > cl[i]->start)
				assert_true(o2.hi >= id.hi);
		}
	}
	/* five seconds of starts: at least five distinct high halves (one a second) */
	{
		size_t distinct = 0;

		for (size_t i = 0; i < ncl; i++) {
			bool seen = false;

			for (size_t j = 0; j < i; j++)
				seen |= cl[j]->trace.hi == cl[i]->trace.hi;
			distinct += !seen;
		}
		assert_in_range(distinct, 5, 6);
	}
	/* the low halves are not a counter (samplers read them as randomness): some pair of
	 * requests has them in the other order than their starts */
	{
		size_t inverted = 0;

		for (size_t i = 0; i < ncl; i++)
			for (size_t j = 0; j < ncl; j++)
				inverted += cl[j]->start > cl[i]->start &&
					    cl[j]->trace.lo < cl[i]->trace.lo;
		assert_true(inverted > 0);
	}
	graph_free(&kept);
	graphcap_free(c);
}

static void test_kernel_pool(void **state)
{
	struct plan_attach at[1];
	struct plan p = { .graph = true, .sample = 1.0, .attach = at, .nattach = 1 };
	struct graphcap_opts o = { .sz = sizeof(o), .host = "h", .instance = 9 };
	const uint32_t a1 = 0x0a000001, a2 = 0x0a000002;
	const uint64_t S = 1000000000ull;
	const struct graph_task *cl, *sv, *wk, *hp, *w2, *fk, *lone;
	struct graph_id128 trace;
	struct graphcap_stats st;
	struct graphcap *c;
	struct graph kept;
	char why[256];

	(void)state;
	memset(at, 0, sizeof(at));
	snprintf(at[0].target.symbol, sizeof(at[0].target.symbol), "handle");
	c = graphcap_new(&p, &o);
	assert_non_null(c);
	krec(c, true, T0 + 100, 10, 10, 0xc1, a1, 5000, a2, 80, 110, 10);
	krec(c, false, T0 + 105, 20, 21, 0xf1, a2, 80, a1, 5000, 110, 10);
	prec(c, WEFT_GREC_KWAKE, T0 + 110, 20, 21, (uint64_t[]){ 25 }, 1, NULL, NULL);
	prec(c, WEFT_GREC_KWAKE, T0 + 115, 20, 21, (uint64_t[]){ 26 }, 1, NULL, NULL);
	prec(c, WEFT_GREC_KFORK, T0 + 116, 20, 21, (uint64_t[]){ 27 }, 1, NULL, NULL);
	srec(c, 20, 27, T0 + 160, T0 + 170); /* the new thread's span: joins by the fork */
	srec(c, 20, 26, T0 + 112, T0 + 118);
	prec(c, WEFT_GREC_KWAKE, T0 + 130, 20, 25, (uint64_t[]){ 23 }, 1, NULL, NULL);
	srec(c, 20, 23, T0 + 140, T0 + 145);
	srec(c, 20, 25, T0 + 120, T0 + 150);
	krec(c, true, T0 + 200, 20, 21, 0xf1, a2, 80, a1, 5000, 7007, 7);
	krec(c, false, T0 + 210, 10, 10, 0xc1, a1, 5000, a2, 80, 7007, 7);
	prec(c, WEFT_GREC_KWAKE, T0 + 300, 30, 30, (uint64_t[]){ 25 }, 1, NULL, NULL);
	srec(c, 20, 25, T0 + 12 * S / 10, T0 + 13 * S / 10); /* waits; 25's first does not */
	prec(c, WEFT_GREC_KWAKE, T0 + 15 * S / 10, 30, 30, (uint64_t[]){ 99 }, 1, NULL, NULL);
	graph_init(&kept);
	/* the request's trace (thread 25's first span is a second old: it goes, while its
	 * second waits) and 26's */
	assert_int_equal(graphcap_drain(c, false, &kept, NULL), 2);
	assert_int_equal(graph_check(&kept, why, sizeof(why)), 0);
	assert_int_equal(kept.ntasks, 6);
	graphcap_stats(c, &st);
	assert_int_equal(st.kernel_unowned, 2); /* 26 (two traces), 30 -> 25 (no task) */
	lone = task_of_tid(&kept, 26, -1);
	assert_int_equal(lone->parent, 0);
	cl = task_named(&kept, "request 10.0.0.2:80");
	sv = task_named(&kept, "serve :80");
	wk = task_of_tid(&kept, 25,
			 (int64_t)(T0 + 120) +
				 (task_named(&kept, "serve :80")->start - (int64_t)(T0 + 105)));
	hp = task_of_tid(&kept, 23, -1);
	assert_int_equal(wk->end - wk->start, 30);
	assert_int_equal(wk->parent, 0);
	assert_int_equal(hp->parent, 0);
	assert_false(graph_id128_eq(lone->trace, cl->trace));
	assert_true(graph_id128_eq(sv->trace, cl->trace));
	assert_true(graph_id128_eq(wk->trace, cl->trace));
	assert_true(graph_id128_eq(hp->trace, cl->trace));
	fk = task_of_tid(&kept, 27, -1);
	assert_int_equal(fk->parent, 0);
	assert_true(graph_id128_eq(fk->trace, cl->trace));
	assert_true(has_edge(&kept, GRAPH_EDGE_FORK, sv->id, fk->id));
	assert_int_equal(kept.nedges, 4);
	assert_true(has_edge(&kept, GRAPH_EDGE_MESSAGE, cl->id, sv->id));
	assert_true(has_edge(&kept, GRAPH_EDGE_WAKEUP, sv->id, wk->id));
	assert_true(has_edge(&kept, GRAPH_EDGE_WAKEUP, wk->id, hp->id));
	for (size_t i = 0; i < kept.nedges; i++)
		assert_int_equal(kept.edges[i].source, GRAPH_SRC_KERNEL);
	trace = cl->trace;
	graph_clear(&kept);
	/* the end: 25's second span, woken by 30 (in no task): a trace of its own */
	assert_int_equal(graphcap_drain(c, true, &kept, NULL), 1);
	assert_int_equal(kept.ntasks, 1);
	w2 = task_of_tid(&kept, 25, -1);
	assert_int_equal(w2->end - w2->start, (int64_t)(S / 10));
	assert_int_equal(w2->parent, 0);
	assert_false(graph_id128_eq(w2->trace, trace));
	graphcap_stats(c, &st);
	assert_int_equal(st.kernel_unowned, 3); /* and 30 -> 99 at the end */
	assert_int_equal(st.kernel_pending_full, 0);
	assert_int_equal(st.bad, 0);
	graph_free(&kept);
	graphcap_free(c);
}

/* Aggregates merge exactly: aggs(a) + aggs(b) = aggs(a u b), in either order. */
static void test_aggs_merge(void **state)
{
	struct graph g1, g2, both;
	struct graph_aggs a1, a2, ab, m12, m21;
	struct graph_task t = { .service = "s", .name = "n", .host = "h", .pid = 1, .attrs = "{}" };

	(void)state;
	graph_init(&g1);
	graph_init(&g2);
	graph_init(&both);
	for (uint64_t i = 1; i <= 300; i++) {
		t.trace = (struct graph_id128){ 1, i };
		t.id = 1;
		t.start = (int64_t)(i * 1000000);
		t.end = t.start + (int64_t)(i * 7919 % 5000000);
		assert_non_null(graph_add_task(i % 3 ? &g1 : &g2, &t));
		assert_non_null(graph_add_task(&both, &t));
	}
	graph_aggs_init(&a1);
	graph_aggs_init(&a2);
	graph_aggs_init(&ab);
	graph_aggs_init(&m12);
	graph_aggs_init(&m21);
	assert_int_equal(graph_aggs_add(&a1, &g1), 0);
	assert_int_equal(graph_aggs_add(&a2, &g2), 0);
	assert_int_equal(graph_aggs_add(&ab, &both), 0);
	assert_int_equal(graph_aggs_merge(&m12, &a1), 0);
	assert_int_equal(graph_aggs_merge(&m12, &a2), 0);
	assert_int_equal(graph_aggs_merge(&m21, &a2), 0);
	assert_int_equal(graph_aggs_merge(&m21, &a1), 0);
	assert_int_equal(ab.ntypes, 1);
	assert_int_equal(ab.types[0].count, 300);
	for (int k = 0; k < 2; k++) {
		const struct graph_aggs *m = k ? &m21 : &m12;

		assert_int_equal(m->ntypes, 1);
		assert_int_equal(m->types[0].count, ab.types[0].count);
		assert_int_equal(m->types[0].min, ab.types[0].min);
		assert_int_equal(m->types[0].max, ab.types[0].max);
		assert_memory_equal(m->types[0].sketch, ab.types[0].sketch,
				    WEFT_SKETCH_NBUCKETS * sizeof(uint64_t));
		assert_int_equal(m->nconc, ab.nconc);
	}
	graph_aggs_free(&a1);
	graph_aggs_free(&a2);
	graph_aggs_free(&ab);
	graph_aggs_free(&m12);
	graph_aggs_free(&m21);
	graph_free(&g1);
	graph_free(&g2);
	graph_free(&both);
}

/* The wire form: a round trip gives the same aggregates; hostile bytes are refused, never
 * trusted (every prefix, every single-byte change). */
static void test_aggs_wire(void **state)
{
	struct graph g;
	struct graph_aggs a, b;
	struct graph_task t = {
		.service = "svc", .name = "op", .host = "h", .pid = 3, .attrs = "{}"
	};
	struct graph_event ev = { .name = "retry", .attrs = "{}" };
	struct graph_edge ed = { .kind = GRAPH_EDGE_MESSAGE };
	void *buf = NULL, *buf2 = NULL;
	size_t len = 0, len2 = 0;
	char why[256];
	FILE *f;

	(void)state;
	graph_init(&g);
	for (uint64_t i = 1; i <= 50; i++) {
		t.trace = (struct graph_id128){ 9, i };
		t.id = 1;
		t.parent = 0;
		t.start = (int64_t)(i * 3000000);
		t.end = t.start + (int64_t)(i * 10007);
		assert_non_null(graph_add_task(&g, &t));
		t.id = 2;
		t.parent = 1;
		t.name = "child";
		assert_non_null(graph_add_task(&g, &t));
		t.name = "op";
		ev.trace = ed.trace = t.trace;
		ev.task = 2;
		assert_non_null(graph_add_event(&g, &ev));
		ed.from_task = 1;
		ed.to_task = 2;
		assert_non_null(graph_add_edge(&g, &ed));
	}
	graph_aggs_init(&a);
	graph_aggs_init(&b);
	assert_int_equal(graph_aggs_add(&a, &g), 0);
	a.sampling = (struct graph_sampling){
		.rate = 0.25, .seen = 50, .kept_head = 12, .kept_outlier = 3
	};
	assert_int_equal(graph_aggs_encode(&a, &buf, &len), 0);
	assert_int_equal(graph_aggs_decode(&b, buf, len, why, sizeof(why)), 0);
	assert_int_equal(b.ntypes, 2);
	assert_int_equal(b.nevents, 1);
	assert_int_equal(b.nedges, 1);
	assert_int_equal(b.nconc, a.nconc);
	assert_int_equal(b.sampling.seen, 50);
	assert_int_equal(b.sampling.kept_head, 12);
	assert_true(b.sampling.rate == 0.25);
	assert_int_equal(graph_aggs_encode(&b, &buf2, &len2), 0);
	assert_int_equal(len, len2);
	assert_memory_equal(buf, buf2, len);
	graph_aggs_free(&b);
	for (size_t n = 0; n < len; n++) { /* every strict prefix is refused */
		graph_aggs_init(&b);
		assert_int_equal(graph_aggs_decode(&b, buf, n, why, sizeof(why)), -EINVAL);
		graph_aggs_free(&b);
	}
	for (size_t i = 0; i < len; i++) /* any byte changed: refused or read, never a crash */
		for (int bit = 0; bit < 8; bit++) {
			((uint8_t *)buf)[i] ^= (uint8_t)(1u << bit);
			graph_aggs_init(&b);
			(void)graph_aggs_decode(&b, buf, len, why, sizeof(why));
			graph_aggs_free(&b);
			((uint8_t *)buf)[i] ^= (uint8_t)(1u << bit);
		}
	/* the fuzz target's seed */
	if (getenv("WEFT_WRITE_SEED") && (f = fopen(getenv("WEFT_WRITE_SEED"), "wb"))) {
		fwrite(buf, 1, len, f);
		fclose(f);
	}
	free(buf);
	free(buf2);
	graph_aggs_free(&a);
	graph_free(&g);
}

/* The head sample is a fixed function of the id: pinned values (docs/graphs.md). */
static void test_head_sample(void **state)
{
	long n = 0;

	(void)state;
	assert_true(graph_sample_head((struct graph_id128){ 0, 0 }, 1.0));
	assert_false(graph_sample_head((struct graph_id128){ 1, 2 }, 0.0));
	for (uint64_t i = 0; i < 100000; i++)
		n += graph_sample_head((struct graph_id128){ 0x5eed, i }, 0.25);
	/* a uniform hash: within 1% of a quarter (the count is fixed by the function) */
	assert_true(n > 24000 && n < 26000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sampling_exact),
		cmocka_unit_test(test_bounds),
		cmocka_unit_test(test_spans),
		cmocka_unit_test(test_aggs_merge),
		cmocka_unit_test(test_head_sample),
		cmocka_unit_test(test_aggs_wire),
		cmocka_unit_test(test_kernel_tiers),
		cmocka_unit_test(test_kernel_span_busy),
		cmocka_unit_test(test_span_held_trace),
		cmocka_unit_test(test_kernel_ipv6),
		cmocka_unit_test(test_kernel_sched),
		cmocka_unit_test(test_kernel_sends_room),
		cmocka_unit_test(test_kernel_pool),
		cmocka_unit_test(test_kernel_forgotten),
		cmocka_unit_test(test_kernel_room_drains),
		cmocka_unit_test(test_total_bounded),
		cmocka_unit_test(test_kernel_out_of_order),
		cmocka_unit_test(test_kernel_socket_reused),
		cmocka_unit_test(test_kernel_trace_ids),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}

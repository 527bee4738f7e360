// SPDX-License-Identifier: Apache-2.0
/*
 * `weft aggregator --graph-forward URL` end to end: a real `weft agent` runs the graph query
 * `from usdt:wl_graph:weft:* graph every 1s` (submitted with `weft submit` over real
 * CURVE-secured ZeroMQ) over wl_graph making N_REQ requests; the aggregator stitches the
 * batches into its graph store and forwards them, on its own thread, to a real OTLP/HTTP
 * receiver (tests/otlp_receiver.py), which records every span of every request it answered
 * 200.
 *
 * Mid-run the receiver goes away: it exits after answering EXIT_AFTER requests (requests
 * are small: --graph-forward-batch 40 makes more than 2 N_REQ / 40 of them), so the
 * forwarder finds the port refusing, spools and retries; the test starts a new receiver on
 * the same port once `weft status` says something was spooled.  Asserted:
 *   - the receivers recorded exactly 2 N_REQ spans, each (trace, span) once: every span
 *     arrived exactly once across the restart;
 *   - each is exactly wl_graph's (tests/graph_wl.h): trace {WL_GRAPH_TRACE_HI, i + 1}, span
 *     1 a root without events or links, span 2 the child of 1 with one event (two when
 *     i % 100 == 7) and one link (the message edge 1 -> 2);
 *   - `weft status` counts 2 N_REQ spans sent, some spooled, nothing dropped, rejected,
 *     repeated, late or pending;
 *   - at the aggregator's clean stop the per-type aggregates go as OTLP metrics of their
 *     own resource (weft-aggregates): the duration histogram of frontend/request and of
 *     backend/query counts exactly N_REQ each.
 *
 * test_rules checks the forwarding rules one by one with test senders (a piece stitched
 * within the linger, a piece that comes after its trace was forwarded, a repeated task, an
 * event whose span was sent): see its comment.
 *
 * Needs root (weft submit compiles through the probe catalog) and python3; skipped otherwise.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/wire_graph.h"
#include "graph/store.h"
#include "tests/cluster/cluster_util.h"
#include "tests/graph_wl.h"
#include "tests/skip.h"

#define N_REQ 1000
#define EXIT_AFTER 5 /* requests the first receiver answers */

static char receiver[PATH_MAX];

/* Starts a receiver (port 0: any) recording into DIR/spans; returns its port. */
static int receiver_start(struct cl *cl, const char *name, int port, int exit_after)
{
	char pf[PATH_MAX], ps[16], ea[16], rec[PATH_MAX], log[PATH_MAX];
	struct cl_proc *p;
	char *pt;
	int got = -1;

	snprintf(pf, sizeof(pf), "%s/%s.port", cl->dir, name);
	snprintf(rec, sizeof(rec), "%s/spans", cl->dir);
	snprintf(log, sizeof(log), "%s/requests", cl->dir);
	snprintf(ps, sizeof(ps), "%d", port);
	snprintf(ea, sizeof(ea), "%d", exit_after);
	p = cl_spawn(cl, name, NULL,
		     (char *const[]){ (char *)"python3", receiver, (char *)"--port", ps,
				      (char *)"--port-file", pf, (char *)"--record", rec,
				      (char *)"--log", log, (char *)"--exit-after", ea, NULL });
	if (!CL_WAIT(access(pf, F_OK) == 0 || !cl_alive(p), CL_WAIT_MS) || !cl_alive(p)) {
		char *err = cl_slurp(p->err);

		fail_msg("%s did not start: %s", name, err ? err : "");
	}
	pt = cl_slurp(pf);
	assert_non_null(pt);
	got = atoi(pt);
	free(pt);
	assert_true(got > 0);
	return got;
}

static long lines_of(const char *path)
{
	char *s = cl_slurp(path);
	long n = 0;

	if (!s)
		return 0;
	for (char *p = s; *p; p++)
		n += *p == '\n';
	free(s);
	return n;
}

/* Every recorded span: exactly wl_graph's, each once. */
static void check_spans(const char *path)
{
	static unsigned char seen[N_REQ][2];
	char *s = cl_slurp(path), *line, *save = NULL, hi[17];
	long n = 0;

	assert_non_null(s);
	memset(seen, 0, sizeof(seen));
	snprintf(hi, sizeof(hi), "%016llx", (unsigned long long)WL_GRAPH_TRACE_HI);
	for (line = strtok_r(s, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char trace[64], span[32], parent[32];
		int nev, nlink;
		unsigned long long lo, id;

		if (sscanf(line, "%63s %31s %31s %d %d", trace, span, parent, &nev, &nlink) != 5)
			fail_msg("bad record line '%s'", line);
		if (strlen(trace) != 32 || strncmp(trace, hi, 16) != 0)
			fail_msg("a span of another trace: '%s'", line);
		lo = strtoull(trace + 16, NULL, 16);
		id = strtoull(span, NULL, 16);
		if (lo < 1 || lo > N_REQ || (id != 1 && id != 2))
			fail_msg("a span wl_graph never made: '%s'", line);
		if (seen[lo - 1][id - 1]++)
			fail_msg("span %llu of request %llu arrived twice", id, lo - 1);
		if (id == 1) {
			assert_string_equal(parent, "-");
			assert_int_equal(nev, 0);
			assert_int_equal(nlink, 0);
		} else {
			assert_string_equal(parent, "0000000000000001");
			assert_int_equal(nev, (lo - 1) % 100 == 7 ? 2 : 1);
			assert_int_equal(nlink, 1);
		}
		n++;
	}
	free(s);
	assert_int_equal(n, 2 * N_REQ);
}

static void test_forward(void **state)
{
	struct cl *cl = *state;
	char gpath[PATH_MAX], url[64], query[PATH_MAX + 64], n[64], spool[PATH_MAX];
	char spans[PATH_MAX], metrics[PATH_MAX + 16];
	struct cl_proc *agg, *agent, *sub, *r1;
	struct wr_proc wl;
	uint64_t qid;
	int port;

	if (!cl->dir[0])
		skip();
	if (system("python3 -c 'import http.server' >/dev/null 2>&1") != 0) {
		print_message("skipped: python3 missing\n");
		skip();
	}
	port = receiver_start(cl, "rcv1", 0, EXIT_AFTER);
	r1 = &cl->procs[cl->nprocs - 1];
	snprintf(spans, sizeof(spans), "%s/spans", cl->dir);
	snprintf(metrics, sizeof(metrics), "%s.metrics", spans);

	cl_keygen(cl, "agent", "h1", true);
	snprintf(gpath, sizeof(gpath), "%s", cl_path(cl, "graphs.sqlite"));
	snprintf(spool, sizeof(spool), "%s", cl_path(cl, "fwd.spool"));
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	agg = cl_aggregator(cl, "agg", NULL, NULL,
			    (char *const[]){ (char *)"--graph-store", gpath, (char *)"--lateness",
					     (char *)"15s", (char *)"--graph-forward", url,
					     (char *)"--graph-forward-spool", spool,
					     (char *)"--graph-forward-batch", (char *)"40",
					     (char *)"--graph-forward-linger", (char *)"500ms",
					     (char *)"--graph-forward-wait", (char *)"60s", NULL });
	cl_expect_log(agg, "forwarding graphs to", CL_WAIT_MS);
	agent = cl_agent_with(cl, "h1", "h1", NULL, NULL, true,
			      (char *const[]){ (char *)"-v", NULL });
	snprintf(query, sizeof(query), "from usdt:%s:weft:* graph every 1s",
		 wr_workload("wl_graph"));
	sub = cl_submit(cl, "submit", NULL, query, &qid);
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

	/* the first receiver leaves after EXIT_AFTER requests: the forwarder spools */
	if (cl_wait_exit(r1, 60000) != 0)
		fail_msg("the first receiver did not exit by itself (status %d)", r1->status);
	assert_true(lines_of(spans) < 2 * N_REQ);
	if (!CL_WAIT(cl_fwd_count(cl, "spooled") > 0, 60000))
		fail_msg("nothing spooled while the receiver was away");
	receiver_start(cl, "rcv2", port, 0);

	/* everything arrives; the query ends */
	if (!CL_WAIT(lines_of(spans) >= 2 * N_REQ && cl_fwd_count(cl, "queued") == 0 &&
			     cl_fwd_count(cl, "pending") == 0,
		     120000))
		fail_msg("not every span arrived: %ld recorded", lines_of(spans));
	cl_cancel(cl, NULL, qid);
	cl_expect_end(sub);

	check_spans(spans);
	assert_int_equal(cl_fwd_count(cl, "sent"), 2 * N_REQ);
	assert_true(cl_fwd_count(cl, "spooled") > 0);
	assert_true(cl_fwd_count(cl, "retried") > 0);
	assert_int_equal(cl_fwd_count(cl, "dropped"), 0);
	assert_int_equal(cl_fwd_count(cl, "rejected"), 0);
	assert_int_equal(cl_fwd_count(cl, "repeated"), 0);
	assert_int_equal(cl_fwd_count(cl, "late"), 0);

	/* the clean stop sends the aggregates, as their own resource */
	assert_int_equal(cl_stop(agg, SIGTERM, 90000), 0);
	snprintf(n, sizeof(n), "weft-aggregates weft.task.duration frontend|request| %d\n", N_REQ);
	if (!cl_file_has(metrics, n))
		fail_msg("no '%s' in the metrics the receiver took:\n%s", n, cl_slurp(metrics));
	snprintf(n, sizeof(n), "weft-aggregates weft.task.duration backend|query| %d\n", N_REQ);
	assert_true(cl_file_has(metrics, n));
	/* and no span twice after it all */
	check_spans(spans);
	cl->passed = true;
}

/* ---- the rules, with test senders: a late piece, a repeat, a late event ---- */

#define T0 1700000000000000000ll
#define US 1000ll

static struct graph_id128 tr(int k)
{
	return (struct graph_id128){ .hi = 0x7e58000000000000ull | (uint64_t)getpid(),
				     .lo = (uint64_t)k };
}

static void add_task(struct graph *g, int k, uint64_t id, uint64_t parent, const char *svc)
{
	struct graph_task t = { .trace = tr(k),
				.id = id,
				.parent = parent,
				.service = svc,
				.name = "op",
				.host = "",
				.pid = 100,
				.tid = 100,
				.start = T0 + k * 1000 * US + (int64_t)id * US,
				.end = T0 + k * 1000 * US + 500 * US - (int64_t)id * US,
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

static void add_event(struct graph *g, int k, uint64_t task, const char *name)
{
	struct graph_event e = { .trace = tr(k),
				 .task = task,
				 .time = T0 + k * 1000 * US + 200 * US,
				 .name = name,
				 .attrs = "{}" };

	assert_non_null(graph_add_event(g, &e));
}

static void hello(struct cl_raw *r, const char *host, uint64_t instance)
{
	Weft__Envelope e, *w;
	Weft__Hello h;

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
	wire_free(w);
}

/* Sends g (then emptied) as the next GraphBatch of host and waits for its Ack. */
static void ship(struct cl_raw *r, uint64_t qid, const char *host, struct graph *g)
{
	struct wire_graph_meta m = { .query_id = qid, .window = 0, .host = host };
	uint64_t seq = ++r->seq, end = wr_now_ms() + CL_WAIT_MS;
	void *body, *env;
	size_t len, elen;
	char why[256];

	if (wire_graph_pack(&m, g, &body, &len, why, sizeof(why)))
		fail_msg("pack: %s", why);
	assert_int_equal(
		wire_envelope_wrap(seq, WEFT__ENVELOPE__BODY_GRAPH_BATCH, body, len, &env, &elen),
		0);
	assert_int_equal(cl_raw_bytes(r, env, elen, 0), 0);
	free(body);
	free(env);
	graph_free(g);
	graph_init(g);
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

/* The record line of span id of trace k, or NULL (malloc'd). */
static char *span_line(const char *path, int k, uint64_t id)
{
	char key[64], hex[33], *s = cl_slurp(path), *p, *nl, *out = NULL;

	graph_id128_hex(tr(k), hex);
	snprintf(key, sizeof(key), "%s %016llx ", hex, (unsigned long long)id);
	p = s ? strstr(s, key) : NULL;
	if (p) {
		nl = strchr(p, '\n');
		out = strndup(p + strlen(key), nl ? (size_t)(nl - p) - strlen(key) : strlen(p));
		if (strstr(nl ? nl : p + 1, key))
			fail_msg("span %llu of T%d recorded twice", (unsigned long long)id, k);
	}
	free(s);
	return out;
}

static void expect_span(const char *path, int k, uint64_t id, const char *rest)
{
	char *l = NULL;

	if (!CL_WAIT((free(l), (l = span_line(path, k, id)) != NULL), 30000))
		fail_msg("span %llu of T%d never arrived", (unsigned long long)id, k);
	if (strcmp(l, rest) != 0)
		fail_msg("span %llu of T%d arrived as '%s', not '%s'", (unsigned long long)id, k, l,
			 rest);
	free(l);
}

/*
 * With two test senders h1 and h2 (real CURVE ZeroMQ, agent keys) and linger 500 ms:
 *   stitched  T1: h1's root (with the message edge to the child) and h2's child (with an
 *             event) within the linger arrive, each once: the root bare, the child with
 *             its parent, its event and its link;
 *   late      T2: h1's root alone, forwarded (recorded) before h2's child comes; then the
 *             child (with the message edge, its event) is forwarded too, on its own;
 *   repeated  T1's root sent again by h1 (a new seq: the store recognises it) is not
 *             forwarded again: `repeated` 1;
 *   late event  an event of T2's child, whose span was sent, is not forwarded: `late` 1.
 * Exactly 4 spans recorded, each once; `sent` 4, nothing dropped.  First, bad
 * --graph-forward* values are refused with exit status 2 and a message.
 */
static void test_rules(void **state)
{
	struct cl *cl = *state;
	char gpath[PATH_MAX], url[64], spans[PATH_MAX];
	struct cl_raw r1, r2;
	struct cl_proc *sub;
	struct graph g;
	uint64_t qid, inst = ((uint64_t)getpid() << 16) | 0x2001;
	int port;

	if (!cl->dir[0])
		skip();
	if (system("python3 -c 'import http.server' >/dev/null 2>&1") != 0) {
		print_message("skipped: python3 missing\n");
		skip();
	}
	/* bad command lines: exit status 2, said */
	{
		static const char *const bad[][3] = {
			{ "--graph-forward", "ftp://collector", "an http:// or https:// URL" },
			{ "--graph-forward-linger", "5ms", "from 100ms to 10m" },
			{ "--graph-forward-queue", "0", "a number from 1" },
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			struct wr_proc p;

			assert_int_equal(cl_weft(&p, (char *)"aggregator", (char *)"--key",
						 (char *)"k", (char *)"--allow", (char *)"a",
						 (char *)"--graph-forward", (char *)"http://c:4318",
						 (char *)bad[i][0], (char *)bad[i][1]),
					 2);
			if (!p.err.p || !strstr(p.err.p, bad[i][2]))
				fail_msg("%s %s: %s", bad[i][0], bad[i][1], p.err.p);
			wr_free(&p);
		}
	}
	port = receiver_start(cl, "rcv", 0, 0);
	snprintf(spans, sizeof(spans), "%s/spans", cl->dir);
	cl_keygen(cl, "agent", "h1", true);
	cl_keygen(cl, "agent", "h2", true);
	snprintf(gpath, sizeof(gpath), "%s", cl_path(cl, "graphs.sqlite"));
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/traces", port);
	cl_aggregator(cl, "agg", NULL, NULL,
		      (char *const[]){ (char *)"--graph-store", gpath, (char *)"--graph-forward",
				       url, (char *)"--graph-forward-linger", (char *)"500ms",
				       (char *)"--graph-forward-aggregates", (char *)"0", NULL });
	cl_raw_open(&r1, cl, cl->endpoint, "h1");
	hello(&r1, "h1", inst);
	cl_raw_open(&r2, cl, cl->endpoint, "h2");
	hello(&r2, "h2", inst + 1);
	sub = cl_submit(cl, "submit", NULL, "from interval:100ms select count() as n every 1s",
			&qid);
	graph_init(&g);

	/* T1, stitched from two hosts within the linger */
	add_task(&g, 1, 1, 0, "front");
	add_edge(&g, 1, 1, 2);
	ship(&r1, qid, "h1", &g);
	add_task(&g, 1, 2, 1, "back");
	add_event(&g, 1, 2, "cache-miss");
	ship(&r2, qid, "h2", &g);
	expect_span(spans, 1, 1, "- 0 0");
	expect_span(spans, 1, 2, "0000000000000001 1 1");

	/* T2: the root goes before the child comes; the child goes after */
	add_task(&g, 2, 1, 0, "front");
	ship(&r1, qid, "h1", &g);
	expect_span(spans, 2, 1, "- 0 0");
	add_task(&g, 2, 2, 1, "back");
	add_event(&g, 2, 2, "cache-miss");
	add_edge(&g, 2, 1, 2);
	ship(&r2, qid, "h2", &g);
	expect_span(spans, 2, 2, "0000000000000001 1 1");

	/* a repeat and a late event: counted, not sent */
	add_task(&g, 1, 1, 0, "front");
	ship(&r1, qid, "h1", &g);
	add_event(&g, 2, 2, "retry");
	ship(&r2, qid, "h2", &g);
	if (!CL_WAIT(cl_fwd_count(cl, "repeated") == 1 && cl_fwd_count(cl, "late") == 1 &&
			     cl_fwd_count(cl, "pending") == 0,
		     30000))
		fail_msg("repeated %lld, late %lld, pending %lld", cl_fwd_count(cl, "repeated"),
			 cl_fwd_count(cl, "late"), cl_fwd_count(cl, "pending"));
	assert_int_equal(cl_fwd_count(cl, "sent"), 4);
	assert_int_equal(cl_fwd_count(cl, "dropped"), 0);
	assert_int_equal(cl_fwd_count(cl, "rejected"), 0);
	assert_int_equal(lines_of(spans), 4);
	cl_cancel(cl, NULL, qid);
	cl_expect_end(sub);
	graph_free(&g);
	cl_raw_close(&r1);
	cl_raw_close(&r2);
	cl->passed = true;
}

int main(void)
{
	const char *src = getenv("WEFT_SOURCE_DIR");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_rules, cl_test_setup, cl_test_teardown),
		cmocka_unit_test_setup_teardown(test_forward, cl_test_setup, cl_test_teardown),
	};

	snprintf(receiver, sizeof(receiver), "%s/tests/otlp_receiver.py", src ? src : ".");
	return cmocka_run_group_tests(tests, NULL, NULL);
}

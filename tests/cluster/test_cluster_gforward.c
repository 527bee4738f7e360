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

#include "graph/store.h"
#include "tests/cluster/cluster_util.h"
#include "tests/graph_wl.h"
#include "tests/skip.h"

#define N_REQ 1000
#define EXIT_AFTER 5 /* requests the first receiver answers */

static char receiver[PATH_MAX];

static int setup(void **state)
{
	struct cl *cl = calloc(1, sizeof(*cl));

	if (!cl)
		return -1;
	if (wr_ready())
		cl_init(cl);
	*state = cl;
	return 0;
}

static int teardown(void **state)
{
	struct cl *cl = *state;

	if (cl->dir[0])
		cl_fini(cl);
	free(cl);
	return 0;
}

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

/* The graph store's forward object of `weft status --format json`, as a number. */
static long long fwd_count(struct cl *cl, const char *name)
{
	struct wj *st = cl_status(cl, NULL);
	const struct wj *g = wj_get(st, "graph"), *f = g ? wj_get(g, "forward") : NULL;
	long long v;

	assert_non_null(f);
	v = wj_int_of(f, name);
	wj_free(st);
	return v;
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
	if (!CL_WAIT(fwd_count(cl, "spooled") > 0, 60000))
		fail_msg("nothing spooled while the receiver was away");
	receiver_start(cl, "rcv2", port, 0);

	/* everything arrives; the query ends */
	if (!CL_WAIT(lines_of(spans) >= 2 * N_REQ && fwd_count(cl, "queued") == 0 &&
			     fwd_count(cl, "pending") == 0,
		     120000))
		fail_msg("not every span arrived: %ld recorded", lines_of(spans));
	cl_cancel(cl, NULL, qid);
	cl_expect_end(sub);

	check_spans(spans);
	assert_int_equal(fwd_count(cl, "sent"), 2 * N_REQ);
	assert_true(fwd_count(cl, "spooled") > 0);
	assert_true(fwd_count(cl, "retried") > 0);
	assert_int_equal(fwd_count(cl, "dropped"), 0);
	assert_int_equal(fwd_count(cl, "rejected"), 0);
	assert_int_equal(fwd_count(cl, "repeated"), 0);
	assert_int_equal(fwd_count(cl, "late"), 0);

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

int main(void)
{
	const char *src = getenv("WEFT_SOURCE_DIR");
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_forward, setup, teardown),
	};

	snprintf(receiver, sizeof(receiver), "%s/tests/otlp_receiver.py", src ? src : ".");
	return cmocka_run_group_tests(tests, NULL, NULL);
}

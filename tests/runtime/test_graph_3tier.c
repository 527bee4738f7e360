// SPDX-License-Identifier: Apache-2.0
/*
 * The three-tier program (tests/workloads/wl_3tier.c: client -> frontend -> backend over TCP
 * on loopback, the traceparent in the payload, instrumented with include/weft/trace.h)
 * recorded by lttng-tools and, in the same run, counted by `weft run` through the same
 * sites' USDT notes and captured live by a second `weft run` of the graph query `from
 * usdt:WL:weft:* graph` into a store of its own; the CTF trace imported with the real `weft graph import` into a fresh
 * store.  The reference the live capture is compared against.
 *
 * NREQ requests, request ERR_REQ asked to fail.  Asserted, each derived from what wl_3tier
 * does (its header comment), never from a capture:
 *  - the import stores exactly NREQ traces, 4 NREQ tasks, 3 NREQ events and 5 NREQ edges
 *    (2 messages and 3 parents per request), as `weft graph import` prints them;
 *  - tests/graph_expect.h's ge_3tier_check_store(): per request one trace, the ids the client
 *    printed, of exactly client/request <- frontend/handle <- frontend/call-backend <-
 *    backend/handle (parents), the events and edges in their tasks, the pid (= tid) of the
 *    process that made each task, the host, each child inside its parent (one clock), all
 *    ok except the failing request, whose four tasks are all error;
 *  - `weft graph list --format json` and `show --format json` say the same through the CLI;
 *  - weft counted 4 NREQ task_begin and task_end, 3 NREQ events and 2 NREQ edges while LTTng
 *    recorded them: one site, both tracers;
 *  - the live capture holds exactly the same graphs: wl_3tier's, and trace by trace the
 *    import's tasks, events and edges (ge_stores_same_implicit(), both ways);
 *  - the checker itself fails on a trace with one thing wrong (a parent, a status, an event,
 *    an extra edge), and ge_same_structure() tells two imports of the trace alike and a
 *    changed one apart.
 * The program runs as a copy named for this run (wl3t-PID), and both LTTng (a procname
 * filter) and weft (the copy's path) see only its processes, whatever else runs on the
 * machine (tests/runtime/lttng_util.h).  Times are checked for order only.  Skips (77) when not root, or lttng-tools is missing or
 * no session daemon can be reached.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <sys/stat.h>

#include "graph/graph.h"
#include "graph/store.h"
#include "lttng_util.h"
#include "run_util.h"
#include "tests/graph_expect.h"
#include "tests/skip.h"

#define NREQ 20 /* requests the client makes */
#define ERR_REQ 7 /* the one that fails */

static char tracedir[PATH_MAX], store_path[PATH_MAX], store2_path[PATH_MAX];
static char live_path[PATH_MAX]; /* `weft run ... graph`'s store, captured in the same run */
static struct wr_proc live; /* that weft run, its output */
static char wl[PATH_MAX], host[256];
static struct lt_session session;
static const char *skip_why;
static struct wr_proc imp; /* `weft graph import`, its output */
static struct wr_json counted; /* weft run's output while LTTng recorded */
static struct graph_id128 traces[NREQ]; /* as the client printed them */
static pid_t pids[3]; /* client, frontend, backend */
static bool copied; /* wl is a copy of wl_3tier to remove */

static void rm_store(const char *path)
{
	char p[PATH_MAX + 8];

	unlink(path);
	snprintf(p, sizeof(p), "%s-wal", path);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", path);
	unlink(p);
}

/* The port in a server's "wl_3tier: MODE listening on ADDR:PORT pid PID" line. */
static int port_of(const struct wr_proc *p)
{
	const char *s = strstr(p->out.p, " listening on ");
	const char *pid = s ? strstr(s, " pid ") : NULL;
	const char *colon = pid ? memrchr(s, ':', (size_t)(pid - s)) : NULL;

	return colon ? atoi(colon + 1) : -1;
}

static int start_server(struct wr_proc *p, const char *mode, const char *listen,
			const char *backend)
{
	char count[16];
	char *const be[] = { wl, (char *)mode, (char *)listen, count, NULL };
	char *const fe[] = { wl, (char *)mode, (char *)listen, (char *)backend, count, NULL };

	snprintf(count, sizeof(count), "%d", NREQ);
	if (wr_start(p, backend ? fe : be) != 0 || wr_wait_out(p, " pid ", 60000) != 0) {
		wr_dump(p, mode);
		return -1;
	}
	return port_of(p);
}

/* The three tiers, NREQ requests; the client's output parsed into traces[]. */
static int run_three_tiers(void)
{
	struct wr_proc be, fe, cl;
	char addr[64], n[16], e[16];
	int bport, fport, rc = -1;

	memset(&fe, 0, sizeof(fe));
	memset(&cl, 0, sizeof(cl));
	bport = start_server(&be, "backend", "127.0.0.1:0", NULL);
	if (bport <= 0)
		goto out;
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", bport);
	fport = start_server(&fe, "frontend", "127.0.0.1:0", addr);
	if (fport <= 0)
		goto out;
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", fport);
	snprintf(n, sizeof(n), "%d", NREQ);
	snprintf(e, sizeof(e), "%d", ERR_REQ);
	{
		char *const av[] = { wl, "client", addr, n, e, NULL };

		if (wr_start(&cl, av) != 0)
			goto out;
	}
	pids[GE_CLIENT] = cl.pid;
	pids[GE_FRONTEND] = fe.pid;
	pids[GE_BACKEND] = be.pid;
	if (wr_finish(&cl, WR_TIMEOUT_MS) != 0 || wr_finish(&fe, WR_TIMEOUT_MS) != 0 ||
	    wr_finish(&be, WR_TIMEOUT_MS) != 0) {
		wr_dump(&cl, "client");
		wr_dump(&fe, "frontend");
		wr_dump(&be, "backend");
		goto out;
	}
	if (!strstr(cl.out.p, "client made 20 requests, 1 errors") ||
	    ge_3tier_client_traces(cl.out.p, traces, NREQ) != 0) {
		wr_dump(&cl, "client");
		goto out;
	}
	rc = 0;
out:
	wr_free(&cl);
	wr_free(&fe);
	wr_free(&be);
	return rc;
}

static int record(void **state)
{
	static const char *const events[] = { "weft:*", NULL };
	const char *bdir = getenv("WEFT_BINARY_DIR");
	struct wr_proc weft;
	char q[PATH_MAX + 128];
	int ret;

	(void)state;
	memset(&imp, 0, sizeof(imp));
	memset(&weft, 0, sizeof(weft));
	memset(&live, 0, sizeof(live));
	snprintf(tracedir, sizeof(tracedir), "%s/tests/graph_3tier_trace", bdir);
	snprintf(store_path, sizeof(store_path), "%s/tests/graph_3tier.sqlite", bdir);
	snprintf(store2_path, sizeof(store2_path), "%s/tests/graph_3tier_2.sqlite", bdir);
	snprintf(live_path, sizeof(live_path), "%s/tests/graph_3tier_live.sqlite", bdir);
	snprintf(lt_logpath, sizeof(lt_logpath), "%s/tests/graph_3tier.log", bdir);
	assert_int_equal(gethostname(host, sizeof(host) - 1), 0);
	unlink(lt_logpath);
	rm_store(store_path);
	rm_store(store2_path);
	rm_store(live_path);
	{
		char dir[PATH_MAX];

		/* a copy named for this run: other tests' processes stay out of the trace and
		 * out of weft's counts */
		snprintf(dir, sizeof(dir), "%s/tests", bdir);
		if (lt_copy_unique(wr_workload("wl_3tier"), dir, "wl3t", wl, sizeof(wl)) != 0) {
			lt_dump_log();
			return -1;
		}
		copied = true;
	}
	ret = lt_session_start(&session, "weft-test-3tier", tracedir, events, strrchr(wl, '/') + 1,
			       &skip_why);
	if (ret > 0) {
		lt_dump_log();
		return 0;
	}
	if (ret < 0)
		goto out_fail;
	/* weft counts the same sites, in every process of the binary, until Ctrl-C */
	snprintf(q, sizeof(q), "from usdt:%s:weft:* group by probe select count() as n", wl);
	if (wr_weft_start(&weft, "--format", "json", q, (char *)NULL) != 0 ||
	    wr_wait_err(&weft, "attached", WR_TIMEOUT_MS) != 0) {
		wr_dump(&weft, "weft run");
		goto out_fail;
	}
	/* and captures their graphs live, into a store of its own */
	snprintf(q, sizeof(q), "from usdt:%s:weft:* graph", wl);
	if (wr_weft_start(&live, "--format", "json", "--ringbuf-size", "64MiB", "--graph-store",
			  live_path, q, (char *)NULL) != 0 ||
	    wr_wait_err(&live, "attached", WR_TIMEOUT_MS) != 0) {
		wr_dump(&live, "weft run (graph)");
		goto out_fail;
	}
	if (run_three_tiers() != 0)
		goto out_fail;
	kill(weft.pid, SIGINT);
	kill(live.pid, SIGINT);
	if (wr_finish(&weft, WR_TIMEOUT_MS) != 0) {
		wr_dump(&weft, "weft run");
		goto out_fail;
	}
	if (wr_finish(&live, WR_TIMEOUT_MS) != 0) {
		wr_dump(&live, "weft run (graph)");
		goto out_fail;
	}
	wr_json_lines(&weft.out, &counted);
	wr_free(&weft);
	if (lt_session_stop(&session) != 0)
		goto out_fail;
	/* the real command line, into a fresh store */
	{
		char *const av[] = {
			getenv("WEFT_BIN"), "graph", "--graph-store", store_path, "import",
			tracedir,	    NULL
		};

		if (wr_start(&imp, av) != 0 || wr_finish(&imp, WR_TIMEOUT_MS) != 0) {
			wr_dump(&imp, "weft graph import");
			return -1;
		}
	}
	return 0;
out_fail:
	fprintf(stderr, "recording the three tiers failed; the lttng commands' output:\n");
	lt_dump_log();
	wr_free(&weft);
	lt_session_destroy(&session);
	return -1;
}

static int cleanup(void **state)
{
	(void)state;
	lt_session_destroy(&session);
	if (copied)
		unlink(wl);
	wr_free(&imp);
	wr_free(&live);
	wr_json_free(&counted);
	return 0;
}

static void test_import_counts(void **state)
{
	char want[PATH_MAX + 128];

	(void)state;
	wt_skip_if(skip_why);
	snprintf(want, sizeof(want), "%s: ctf, %d traces, %d tasks, %d events, %d edges stored\n",
		 tracedir, NREQ, 4 * NREQ, 3 * NREQ, 5 * NREQ);
	if (strcmp(imp.out.p, want) != 0)
		fail_msg("weft graph import printed:\n%s\nstderr:\n%s\nnot:\n%s", imp.out.p,
			 imp.err.p, want);
}

static struct ge_3tier expected(void)
{
	struct ge_3tier x = {
		.n = NREQ,
		.error_req = ERR_REQ,
		.traces = traces,
		.source = GRAPH_SRC_LTTNG,
		.pid = { pids[GE_CLIENT], pids[GE_FRONTEND], pids[GE_BACKEND] },
		.host = { host, host, host },
		.parent_edges = true,
		.one_clock = true,
	};

	return x;
}

static void test_structure(void **state)
{
	struct ge_3tier x = expected();
	struct graph_store *s;
	char why[512] = "";

	(void)state;
	wt_skip_if(skip_why);
	s = graph_store_open(store_path, why, sizeof(why));
	assert_non_null(s);
	if (ge_3tier_check_store(s, &x, why, sizeof(why)) != 0)
		fail_msg("%s", why);
	graph_store_close(s);
}

/* Runs `weft graph --graph-store STORE ARGS...` and parses its JSON output. */
static json_t *weft_graph_json(const char *a1, const char *a2, const char *a3, const char *a4,
			       const char *a5)
{
	char *const av[] = { getenv("WEFT_BIN"), "graph",    "--graph-store", store_path,
			     (char *)a1,	 (char *)a2, (char *)a3,      (char *)a4,
			     (char *)a5,	 NULL };
	struct wr_proc p;
	json_error_t err;
	json_t *j;

	assert_int_equal(wr_start(&p, av), 0);
	if (wr_finish(&p, WR_TIMEOUT_MS) != 0)
		wr_dump(&p, a1);
	assert_int_equal(p.status, 0);
	j = json_loads(p.out.p, 0, &err);
	if (!j)
		fail_msg("not JSON (%s): %s", err.text, p.out.p);
	wr_free(&p);
	return j;
}

/* Through the command line: list finds the NREQ traces, rooted at the client; show of the
 * failed request draws its four tasks, all error, in the tree's order. */
static void test_cli_list_show(void **state)
{
	static const char *const types[4][2] = { { "client", "request" },
						 { "frontend", "handle" },
						 { "frontend", "call-backend" },
						 { "backend", "handle" } };
	json_t *list, *show, *tasks, *v;
	char hex[33], limit[16];
	size_t i;

	(void)state;
	wt_skip_if(skip_why);
	snprintf(limit, sizeof(limit), "%d", 2 * NREQ);
	list = weft_graph_json("list", "--limit", limit, "--format", "json");
	assert_true(json_is_array(list));
	assert_int_equal(json_array_size(list), NREQ);
	json_array_foreach(list, i, v)
	{
		assert_int_equal(json_integer_value(json_object_get(v, "tasks")), 4);
		assert_string_equal(json_string_value(json_object_get(v, "service")), "client");
		assert_string_equal(json_string_value(json_object_get(v, "name")), "request");
	}
	graph_id128_hex(traces[ERR_REQ], hex);
	show = weft_graph_json("show", hex, "--format", "json", NULL);
	tasks = json_object_get(show, "tasks");
	assert_int_equal(json_array_size(tasks), 4);
	json_array_foreach(tasks, i, v)
	{
		assert_string_equal(json_string_value(json_object_get(v, "service")), types[i][0]);
		assert_string_equal(json_string_value(json_object_get(v, "name")), types[i][1]);
		assert_string_equal(json_string_value(json_object_get(v, "status")), "error");
		assert_int_equal(json_integer_value(json_object_get(v, "depth")), (json_int_t)i);
	}
	assert_int_equal(json_array_size(json_object_get(show, "edges")), 5);
	json_decref(show);
	json_decref(list);
}

/* weft attached the same sites while LTTng recorded them, and counted every one. */
static void test_weft_counted_same_sites(void **state)
{
	static const struct {
		const char *probe;
		long long n;
	} want[] = { { "task_begin", 4 * NREQ },
		     { "task_end", 4 * NREQ },
		     { "event", 3 * NREQ },
		     { "edge", 2 * NREQ } };
	const struct wj *w;

	(void)state;
	wt_skip_if(skip_why);
	w = wr_one_window(&counted);
	assert_int_equal(wr_nrows(w), 4);
	for (size_t i = 0; i < 4; i++) {
		char probe[PATH_MAX + 64];
		bool found = false;

		snprintf(probe, sizeof(probe), "usdt:%s:weft:%s", wl, want[i].probe);
		for (size_t r = 0; r < wr_nrows(w); r++)
			if (strcmp(wj_str(wj_get(wr_row(w, r), "probe")), probe) == 0) {
				assert_int_equal(wj_int_of(wr_row(w, r), "n"), want[i].n);
				found = true;
			}
		if (!found)
			fail_msg("weft counted no %s", probe);
	}
}

/* The checker is honest: one thing wrong in a trace that passes, and it fails. */
static void test_checker_fails_on_wrong(void **state)
{
	struct ge_3tier x = expected();
	struct graph_store *s;
	struct graph g;
	char why[512], hex[33];
	bool failed = false;

	(void)state;
	wt_skip_if(skip_why);
	s = graph_store_open(store_path, why, sizeof(why));
	assert_non_null(s);
	graph_id128_hex(traces[ERR_REQ], hex);
	for (int mutation = 0; mutation <= 6; mutation++) {
		graph_init(&g);
		assert_int_equal(graph_store_load(s, hex, &g, why, sizeof(why)), 0);
		assert_int_equal(g.ntasks, 4);
		switch (mutation) {
		case 0: /* none: it passes */
			break;
		case 1: /* a parent pointing elsewhere */
			for (size_t i = 0; i < g.ntasks; i++)
				if (strcmp(g.tasks[i].service, "backend") == 0)
					g.tasks[i].parent = g.tasks[i].id;
			break;
		case 2: /* one status different */
			g.tasks[2].status = GRAPH_STATUS_OK;
			break;
		case 3: /* an event renamed */
			g.events[0].name = "other";
			break;
		case 4: { /* an edge too many */
			struct graph_edge e = g.edges[0];

			assert_non_null(graph_add_edge(&g, &e));
			break;
		}
		case 5: /* a task from another process */
			g.tasks[1].pid += 1;
			break;
		case 6: /* a child starting before its parent */
			for (size_t i = 0; i < g.ntasks; i++)
				if (strcmp(g.tasks[i].service, "backend") == 0)
					g.tasks[i].start -= 1000000000;
			break;
		}
		if (mutation == 0) {
			if (ge_3tier_check_trace(&g, &x, &failed, why, sizeof(why)) != 0)
				fail_msg("%s", why);
			assert_true(failed);
		} else if (ge_3tier_check_trace(&g, &x, &failed, why, sizeof(why)) == 0) {
			fail_msg("mutation %d passed the check", mutation);
		}
		graph_free(&g);
	}
	graph_store_close(s);
}

/* ge_same_structure(): a second import of the same trace is the same, a changed one not. */
static void test_same_structure(void **state)
{
	struct graph_store *a, *b;
	struct graph ga, gb;
	char why[512], hex[33];
	enum graph_status old;

	(void)state;
	wt_skip_if(skip_why);
	{
		char *const av[] = {
			getenv("WEFT_BIN"), "graph", "--graph-store", store2_path, "import",
			tracedir,	    NULL
		};
		struct wr_proc p;

		assert_int_equal(wr_start(&p, av), 0);
		assert_int_equal(wr_finish(&p, WR_TIMEOUT_MS), 0);
		wr_free(&p);
	}
	a = graph_store_open(store_path, why, sizeof(why));
	b = graph_store_open(store2_path, why, sizeof(why));
	assert_non_null(a);
	assert_non_null(b);
	if (ge_stores_same(a, b, 2 * NREQ, why, sizeof(why)) != 0)
		fail_msg("%s", why);
	graph_id128_hex(traces[0], hex);
	graph_init(&ga);
	graph_init(&gb);
	assert_int_equal(graph_store_load(a, hex, &ga, why, sizeof(why)), 0);
	assert_int_equal(graph_store_load(b, hex, &gb, why, sizeof(why)), 0);
	assert_int_equal(ge_same_structure(&ga, &gb, why, sizeof(why)), 0);
	old = gb.tasks[3].status;
	gb.tasks[3].status = old == GRAPH_STATUS_OK ? GRAPH_STATUS_ERROR : GRAPH_STATUS_OK;
	assert_int_equal(ge_same_structure(&ga, &gb, why, sizeof(why)), -1);
	gb.tasks[3].status = old;
	assert_int_equal(ge_same_structure(&ga, &gb, why, sizeof(why)), 0);
	gb.edges[0].kind =
		gb.edges[0].kind == GRAPH_EDGE_MESSAGE ? GRAPH_EDGE_FOLLOWS : GRAPH_EDGE_MESSAGE;
	assert_int_equal(ge_same_structure(&ga, &gb, why, sizeof(why)), -1);
	graph_free(&ga);
	graph_free(&gb);
	graph_store_close(a);
	graph_store_close(b);
}

/*
 * The live capture (`weft run ... graph`, attached to the same sites while LTTng recorded
 * them) gives the same graphs as the CTF trace imported: exactly wl_3tier's (source weft,
 * no explicit parent edges: a live task's parent is its parent field), and trace by trace the
 * same tasks, events and edges as the import (ge_stores_same_implicit: the import's explicit
 * parent edges are the parent fields both have).
 */
static void test_live_same_as_lttng(void **state)
{
	struct ge_3tier x = expected();
	struct graph_store *a, *b;
	char why[1024] = "";

	(void)state;
	wt_skip_if(skip_why);
	a = graph_store_open(store_path, why, sizeof(why));
	assert_non_null(a);
	b = graph_store_open(live_path, why, sizeof(why));
	if (!b)
		fail_msg("%s; weft run said:\n%s\n%s", why, live.out.p, live.err.p);
	x.source = GRAPH_SRC_WEFT;
	x.parent_edges = false;
	if (ge_3tier_check_store(b, &x, why, sizeof(why)) != 0)
		fail_msg("the live capture: %s", why);
	if (ge_stores_same_implicit(a, b, NREQ + 16, why, sizeof(why)) != 0)
		fail_msg("the import against the live capture: %s", why);
	if (ge_stores_same_implicit(b, a, NREQ + 16, why, sizeof(why)) != 0)
		fail_msg("the live capture against the import: %s", why);
	graph_store_close(a);
	graph_store_close(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_import_counts),
		cmocka_unit_test(test_structure),
		cmocka_unit_test(test_cli_list_show),
		cmocka_unit_test(test_weft_counted_same_sites),
		cmocka_unit_test(test_checker_fails_on_wrong),
		cmocka_unit_test(test_same_structure),
		cmocka_unit_test(test_live_same_as_lttng),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, record, cleanup));
}

// SPDX-License-Identifier: Apache-2.0
/*
 * Graph queries end to end (docs/language.md, "Graph queries"): `weft run` of a graph query
 * over the real kernel, the workload wl_graph firing weft's provider (USDT probes with the
 * contract's arguments) and calling two functions per request, the traces read back from
 * the graph store it wrote.  Exact: N requests are N traces of exactly the tasks, parents,
 * events, edges and statuses wl_graph makes; with `sample`, the stored traces are exactly
 * those the trace-id hash selects plus outliers, while the per-type aggregates count every
 * request (the counts, event shares and edge shapes equal those of all N).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "graph/aggs.h"
#include "graph/store.h"
#include "run_util.h"
#include "tests/graph_wl.h"
#include "tests/skip.h"

#define N_REQ 2000

static char wl_path[PATH_MAX], dir[PATH_MAX];

static int setup(void **state)
{
	(void)state;
	if (getenv("WEFT_BINARY_DIR"))
		snprintf(wl_path, sizeof(wl_path), "%s", wr_workload("wl_graph"));
	snprintf(dir, sizeof(dir), "/tmp/weft-test-graph-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	return wr_rm_rf(dir);
}

/* Runs `weft run` of a graph query over `wl_graph n` into a fresh store, with one more
 * option and its value (or NULL, NULL); the summary line. */
static struct wj *run_graph_opts(const char *store, long n, const char *query, const char *opt,
				 const char *val)
{
	char cmd[PATH_MAX + 32], line[4096];
	struct wr_proc p;
	struct wj *v;
	int rc;

	snprintf(cmd, sizeof(cmd), "'%s' %ld", wl_path, n);
	unlink(store);
	if (opt)
		rc = wr_weft_run(&p, "--format", "json", "--ringbuf-size", "64MiB", "--graph-store",
				 store, opt, val, "-c", cmd, query);
	else
		rc = wr_weft_run(&p, "--format", "json", "--ringbuf-size", "64MiB", "--graph-store",
				 store, "-c", cmd, query);
	if (rc != 0)
		wr_dump(&p, query);
	assert_int_equal(rc, 0);
	assert_true(wr_cut_line(&p.out, "wl_graph: ", line, sizeof(line)));
	if (!wr_cut_line(&p.out, "{\"type\":\"graph\"", line, sizeof(line))) {
		wr_dump(&p, query);
		fail_msg("no graph summary");
	}
	v = wj_parse(line, strlen(line));
	assert_non_null(v);
	wr_free(&p);
	return v;
}

static struct wj *run_graph(const char *store, long n, const char *query)
{
	return run_graph_opts(store, n, query, NULL, NULL);
}

static const char *query_of(const char *tmpl)
{
	static char q[3 * PATH_MAX];
	char *o = q;

	for (const char *s = tmpl; *s && o < q + sizeof(q) - PATH_MAX - 1; s++) {
		if (s[0] == '%' && s[1] == 'W') {
			o += snprintf(o, PATH_MAX, "%s", wl_path);
			s++;
		} else {
			*o++ = *s;
		}
	}
	*o = 0;
	return q;
}

static struct graph_store *open_store(const char *path)
{
	char why[512] = "";
	struct graph_store *s = graph_store_open(path, why, sizeof(why));

	if (!s)
		fail_msg("%s: %s", path, why);
	return s;
}

/* Every request, every trace kept: exactly N traces of exactly wl_graph's structure. */
static void test_provider_all(void **state)
{
	char store[PATH_MAX + 16], host[256] = "";
	struct graph_store *s;
	struct graph_sampling sm;
	struct wj *v;
	char why[256];

	(void)state;
	snprintf(store, sizeof(store), "%s/all.db", dir);
	v = run_graph(store, N_REQ, query_of("from usdt:%W:weft:* graph"));
	assert_int_equal(wj_int_of(v, "traces"), N_REQ);
	assert_int_equal(wj_int_of(v, "tasks"), 2 * N_REQ);
	assert_int_equal(wj_int_of(v, "events"), N_REQ + N_REQ / 100);
	assert_int_equal(wj_int_of(v, "edges"), N_REQ);
	assert_int_equal(wj_int_of(v, "seen"), N_REQ);
	assert_int_equal(wj_int_of(v, "kept_head"), N_REQ);
	assert_int_equal(wj_int_of(v, "kept_outlier"), 0);
	assert_int_equal(wj_int_of(v, "bad"), 0);
	assert_int_equal(wj_int_of(v, "orphans"), 0);
	assert_int_equal(wj_int_of(v, "end_without_begin"), 0);
	assert_int_equal(wj_int_of(v, "unfinished"), 0);
	assert_int_equal(wj_int_of(wj_get(v, "lost"), "ringbuf_full"), 0);
	wj_free(v);

	gethostname(host, sizeof(host) - 1);
	s = open_store(store);
	for (long i = 0; i < N_REQ; i++)
		if (!check_request(s, i, host))
			fail_msg("request %ld not stored", i);
	check_aggregates(s, N_REQ);
	assert_int_equal(graph_store_sampling(s, &sm, why, sizeof(why)), 0);
	assert_int_equal(sm.seen, N_REQ);
	assert_int_equal(sm.kept_head, N_REQ);
	assert_int_equal(sm.kept_outlier, 0);
	graph_store_close(s);
}

/*
 * `graph sample 10%`: the stored traces are exactly the hash's choice plus outliers, and
 * every error trace is kept; the aggregates count all N requests.
 */
static void test_provider_sampled(void **state)
{
	char store[PATH_MAX + 16], host[256] = "", why[256];
	struct graph_store *s;
	struct graph_sampling sm;
	struct wj *v;
	long head = 0, stored = 0, outliers = 0;

	(void)state;
	snprintf(store, sizeof(store), "%s/sampled.db", dir);
	v = run_graph(store, N_REQ, query_of("from usdt:%W:weft:* graph sample 10%"));
	for (long i = 0; i < N_REQ; i++)
		head += graph_sample_head(
			(struct graph_id128){ WL_GRAPH_TRACE_HI, (uint64_t)i + 1 }, 0.10);
	/* the hash keeps about a tenth: far from none and from all */
	assert_true(head > N_REQ / 20 && head < N_REQ / 5);
	assert_int_equal(wj_int_of(v, "seen"), N_REQ);
	assert_int_equal(wj_int_of(v, "kept_head"), head);
	assert_int_equal(wj_int_of(v, "traces"),
			 wj_int_of(v, "kept_head") + wj_int_of(v, "kept_outlier"));
	assert_int_equal(wj_int_of(v, "bad"), 0);
	assert_int_equal(wj_int_of(wj_get(v, "lost"), "ringbuf_full"), 0);

	gethostname(host, sizeof(host) - 1);
	s = open_store(store);
	for (long i = 0; i < N_REQ; i++) {
		bool h = graph_sample_head(
			(struct graph_id128){ WL_GRAPH_TRACE_HI, (uint64_t)i + 1 }, 0.10);
		bool in = check_request(s, i, host);

		if (h || i % 1000 == 999) /* selected by the hash, or an error: always kept */
			assert_true(in);
		stored += in;
		outliers += in && !h;
	}
	assert_int_equal(stored, wj_int_of(v, "traces"));
	assert_int_equal(outliers, wj_int_of(v, "kept_outlier"));
	/* exact aggregates: what test_provider_all found with every trace kept */
	check_aggregates(s, N_REQ);
	assert_int_equal(graph_store_sampling(s, &sm, why, sizeof(why)), 0);
	assert_int_equal(sm.seen, N_REQ);
	assert_int_equal(sm.kept_head, head);
	assert_int_equal(sm.kept_outlier, outliers);
	assert_true(sm.rate > 0.0999 && sm.rate < 0.1001);
	graph_store_close(s);
	wj_free(v);
}

/*
 * Spans as tasks: every wl_handle and wl_step call a task of the workload's thread, named
 * after the function, its service the process's comm; the steps are wl_handle's children.
 */
static void test_spans(void **state)
{
	char store[PATH_MAX + 16], why[256];
	struct graph_store *s;
	struct graph_type_stats *rows = NULL;
	struct graph_trace_row *tr = NULL;
	struct graph_filter f = { .limit = 100000 };
	ssize_t nt, n;
	struct wj *v;
	long full = 0;

	(void)state;
	snprintf(store, sizeof(store), "%s/spans.db", dir);
	v = run_graph(store, 500,
		      query_of("from span(uprobe:%W:wl_handle), span(uprobe:%W:wl_step) graph"));
	assert_int_equal(wj_int_of(v, "tasks"), 3 * 500);
	assert_int_equal(wj_int_of(v, "bad"), 0);
	wj_free(v);

	s = open_store(store);
	nt = graph_store_stats(s, &rows, why, sizeof(why));
	assert_int_equal(nt, 2);
	assert_int_equal(type_of(rows, nt, "wl_graph", "wl_handle")->count, 500);
	assert_int_equal(type_of(rows, nt, "wl_graph", "wl_step")->count, 1000);
	free(rows);
	n = graph_store_list(s, &f, &tr, why, sizeof(why));
	assert_true(n >= 500);
	for (ssize_t i = 0; i < n; i++) {
		char hex[33];
		struct graph g;
		const struct graph_task *h = NULL;
		int steps = 0;

		graph_id128_hex(tr[i].trace, hex);
		graph_init(&g);
		assert_int_equal(graph_store_load(s, hex, &g, why, sizeof(why)), 0);
		for (size_t k = 0; k < g.ntasks; k++) {
			assert_string_equal(g.tasks[k].service, "wl_graph");
			assert_true(g.tasks[k].start <= g.tasks[k].end);
			if (strcmp(g.tasks[k].name, "wl_handle") == 0)
				h = &g.tasks[k];
		}
		for (size_t k = 0; h && k < g.ntasks; k++)
			if (strcmp(g.tasks[k].name, "wl_step") == 0 && g.tasks[k].parent == h->id) {
				assert_true(h->start <= g.tasks[k].start &&
					    g.tasks[k].end <= h->end);
				steps++;
			}
		full += h && h->parent == 0 && steps == 2 && g.ntasks == 3 && g.nedges == 2;
		graph_free(&g);
	}
	/* the nesting comes from the kernel's timestamps (docs/graphs.md, "Spans as tasks"):
	 * at least one request has the whole structure; most have */
	assert_true(full >= 1);
	free(tr);
	graph_store_close(s);
}

/* The traces the store holds now, and its count of frontend requests (the aggregates). */
static void store_counts(const char *path, ssize_t *traces, uint64_t *requests)
{
	struct graph_store *s = open_store(path);
	struct graph_filter f = { .limit = 100000 };
	struct graph_trace_row *tr = NULL;
	struct graph_type_stats *rows = NULL;
	char why[256] = "";
	ssize_t nt;

	*traces = graph_store_list(s, &f, &tr, why, sizeof(why));
	if (*traces < 0)
		fail_msg("%s: %s", path, why);
	free(tr);
	*requests = 0;
	nt = graph_store_stats(s, &rows, why, sizeof(why));
	for (ssize_t i = 0; i < nt; i++)
		if (strcmp(rows[i].service, "frontend") == 0)
			*requests = rows[i].count;
	free(rows);
	graph_store_close(s);
}

/*
 * --graph-max-age: the run keeps its store bounded while it writes.  wl_graph's N requests
 * are stored, and once they ended more than a second ago the next flush drops them; the
 * aggregates still count all N, and the summary says N stored and N dropped.
 */
static void test_retention(void **state)
{
	char store[PATH_MAX + 16], line[4096], n_req[16];
	char *wl_argv[] = { wl_path, n_req, NULL };
	struct wr_proc weft, wl;
	uint64_t deadline, requests = 0;
	ssize_t traces = -1;
	struct graph_store *s;
	struct wj *v;

	(void)state;
	snprintf(store, sizeof(store), "%s/keep.db", dir);
	snprintf(n_req, sizeof(n_req), "%d", N_REQ);
	unlink(store);
	assert_int_equal(wr_weft_start(&weft, "--format", "json", "--ringbuf-size", "64MiB",
				       "--graph-store", store, "--graph-max-age", "1s",
				       query_of("from usdt:%W:weft:* graph"), (char *)NULL),
			 0);
	if (wr_wait_err(&weft, "attached", WR_TIMEOUT_MS) != 0) {
		wr_dump(&weft, "weft run --graph-max-age");
		fail_msg("weft did not attach");
	}
	assert_int_equal(wr_start(&wl, wl_argv), 0);
	assert_int_equal(wr_finish(&wl, WR_TIMEOUT_MS), 0);
	wr_free(&wl);
	/* every request counted in the aggregates, and no trace left: each was stored (the
	 * summary below) and then dropped */
	deadline = wr_now_ms() + WR_TIMEOUT_MS;
	do {
		wr_sleep_ms(200);
		store_counts(store, &traces, &requests);
	} while ((traces != 0 || requests != N_REQ) && wr_now_ms() < deadline);
	kill(weft.pid, SIGINT);
	if (wr_finish(&weft, WR_TIMEOUT_MS) != 0) {
		wr_dump(&weft, "weft run --graph-max-age");
		fail_msg("weft run failed");
	}
	assert_int_equal(requests, N_REQ);
	assert_int_equal(traces, 0);
	if (!wr_cut_line(&weft.out, "{\"type\":\"graph\"", line, sizeof(line))) {
		wr_dump(&weft, "weft run --graph-max-age");
		fail_msg("no graph summary");
	}
	wr_free(&weft);
	v = wj_parse(line, strlen(line));
	assert_non_null(v);
	assert_int_equal(wj_int_of(v, "traces"), N_REQ);
	assert_int_equal(wj_int_of(v, "retained"), N_REQ);
	assert_int_equal(wj_int_of(wj_get(v, "lost"), "ringbuf_full"), 0);
	wj_free(v);
	s = open_store(store);
	check_aggregates(s, N_REQ);
	graph_store_close(s);
}

/*
 * --graph-max-size: wl_graph's N requests into a store bounded below what they take (2,000
 * take 640 KiB of 16 KiB pages here; 448 KiB keeps some 800 of them); the
 * run drops the oldest traces as it writes, so what is left is exactly the newest requests,
 * every one of the others counted as dropped, and the aggregates count all N.
 */
static void test_retention_size(void **state)
{
	char store[PATH_MAX + 16], why[256];
	struct graph_store *s;
	struct graph_trace_row *tr = NULL;
	struct graph_filter f = { .limit = 100000 };
	long long dropped;
	ssize_t n;
	struct wj *v;

	(void)state;
	snprintf(store, sizeof(store), "%s/size.db", dir);
	v = run_graph_opts(store, N_REQ, query_of("from usdt:%W:weft:* graph"), "--graph-max-size",
			   "448KiB");
	assert_int_equal(wj_int_of(v, "traces"), N_REQ);
	dropped = wj_int_of(v, "retained");
	wj_free(v);
	s = open_store(store);
	n = graph_store_list(s, &f, &tr, why, sizeof(why));
	assert_true(dropped > 0 && n > 0);
	assert_int_equal(n + dropped, N_REQ);
	/* the newest: requests N - n .. N - 1, each whole */
	for (ssize_t i = 0; i < n; i++) {
		assert_true(tr[i].trace.hi == WL_GRAPH_TRACE_HI);
		assert_true(tr[i].trace.lo > (uint64_t)(N_REQ - n) && tr[i].trace.lo <= N_REQ);
	}
	free(tr);
	{
		char host[256] = "";

		gethostname(host, sizeof(host) - 1);
		for (long i = N_REQ - n; i < N_REQ; i++)
			if (!check_request(s, i, host))
				fail_msg("request %ld not stored", i);
	}
	check_aggregates(s, N_REQ);
	graph_store_close(s);
}

/* The bounds are for graph queries, and take a unit. */
static void test_retention_usage(void **state)
{
	static const char *const bad[][2] = {
		{ "--graph-max-age", "10" }, /* no unit */
		{ "--graph-max-age", "0s" },
		{ "--graph-max-size", "0" },
		{ "--graph-max-size", "lots" },
	};
	struct wr_proc p;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(wr_weft_run(&p, bad[i][0], bad[i][1], "from syscall:getpid graph"),
				 2);
		assert_non_null(strstr(p.err.p, bad[i][0]));
		wr_free(&p);
	}
	/* not a graph query */
	assert_int_equal(wr_weft_run(&p, "--graph-max-age", "1h",
				     "from syscall:getpid select count() for 1s"),
			 2);
	assert_non_null(strstr(p.err.p, "are for graph queries"));
	wr_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_provider_all),   cmocka_unit_test(test_provider_sampled),
		cmocka_unit_test(test_spans),	       cmocka_unit_test(test_retention),
		cmocka_unit_test(test_retention_size), cmocka_unit_test(test_retention_usage),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, setup, teardown));
}

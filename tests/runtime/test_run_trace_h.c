// SPDX-License-Identifier: Apache-2.0
/*
 * include/weft/trace.h's sites are USDT probes that weft counts exactly: the real `weft run
 * --format json -c 'wl_trace N'` against the real kernel, for both builds of the header —
 * wl_trace (LTTng-UST tracepoints compiled with LTTNG_UST_HAVE_SDT_INTEGRATION: the stapsdt
 * note comes from LTTng's own macro) and wl_trace_sdt (-DWEFT_TRACE_SDT_ONLY: <sys/sdt.h>).
 *
 * wl_trace makes N calls of each of the four sites with arguments that are functions of the
 * iteration i (tests/workloads/wl_trace.c says which), so every count and every sum below is
 * known exactly, and so is the order of the arguments: a site whose arguments were swapped or
 * cut would sum to something else.  The strings (service, name, edge kind) are read with
 * str(): each value and how often it came.  -c attaches before the workload's first
 * instruction, so nothing is missed.  wl_trace_cxx, wl_trace compiled as C++11 (the header
 * promises C++ too), is counted the same way; without a C++ compiler it is not built, and the
 * test says so and skips.  And docs/graphs.md's complete example is built as the page says,
 * against the header as `cmake --install` installs it, and counted exactly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "run_util.h"
#include "tests/skip.h"

#define N 3000 /* iterations of wl_trace: a multiple of 3 and of 2 */

static const char *const builds[] = { "wl_trace", "wl_trace_sdt", "wl_trace_cxx" };
static size_t nbuilds = 3; /* 2 without wl_trace_cxx */

static int setup(void **state)
{
	(void)state;
	if (access(wr_workload("wl_trace_cxx"), X_OK) != 0) {
		wt_skip_note("wl_trace_cxx is not built (no C++ compiler): the C++ build is not "
			     "checked");
		nbuilds = 2;
	}
	return 0;
}

/* Runs `query` (its "%W" replaced by the workload's path) over `BIN N`; its only window. */
static const struct wj *run_one(struct wr_proc *p, struct wr_json *j, const char *bin,
				const char *tmpl)
{
	char q[PATH_MAX + 1024], cmd[PATH_MAX + 32], line[256];
	const char *at = strstr(tmpl, "%W");
	long iters = -1, evals = -1;
	int rc;

	assert_non_null(at);
	snprintf(q, sizeof(q), "%.*s%s%s", (int)(at - tmpl), tmpl, bin, at + 2);
	snprintf(cmd, sizeof(cmd), "'%s' %d", bin, N);
	rc = wr_weft_run(p, "--format", "json", "-c", cmd, q);
	if (rc != 0)
		wr_dump(p, q);
	assert_int_equal(rc, 0);
	/* the workload did what we think: every argument evaluated once per site */
	assert_true(wr_cut_line(&p->out, "wl_trace: ", line, sizeof(line)));
	assert_int_equal(sscanf(line, "wl_trace: %ld iterations, %ld evaluations", &iters, &evals),
			 2);
	assert_int_equal(iters, N);
	assert_int_equal(evals, 21L * N);
	wr_json_lines(&p->out, j);
	return wr_one_window(j);
}

/* The row of w whose string column `col` is `val`. */
static const struct wj *row_with(const struct wj *w, const char *col, const char *val)
{
	for (size_t i = 0; i < wr_nrows(w); i++) {
		const char *s = wj_str(wj_get(wr_row(w, i), col));

		if (s && strcmp(s, val) == 0)
			return wr_row(w, i);
	}
	fail_msg("no row with %s = '%s'", col, val);
	return NULL;
}

static long long sum_0_to(long long n) /* 0 + 1 + ... + (n - 1) */
{
	return n * (n - 1) / 2;
}

/* The key test: weft:task_begin counted as a usdt probe, its six arguments in order. */
static void test_task_begin_count(void **state)
{
	(void)state;
	for (size_t b = 0; b < nbuilds; b++) {
		const char *bin = wr_workload(builds[b]);
		struct wr_proc p;
		struct wr_json j;
		const struct wj *w, *r;

		w = run_one(&p, &j, bin,
			    "from usdt:%W:weft:task_begin select count() as n, sum(arg0) as hi, "
			    "sum(arg1) as lo, sum(arg2) as task, sum(arg3) as parent");
		assert_int_equal(wr_nrows(w), 1);
		r = wr_row(w, 0);
		assert_int_equal(wj_int_of(r, "n"), N);
		assert_int_equal(wj_int_of(r, "hi"), 1000LL * N + sum_0_to(N));
		assert_int_equal(wj_int_of(r, "lo"), 2000LL * N + sum_0_to(N));
		assert_int_equal(wj_int_of(r, "task"), sum_0_to(N) + N);
		assert_int_equal(wj_int_of(r, "parent"), sum_0_to(N));
		wr_json_free(&j);
		wr_free(&p);
	}
}

/* Every site of the provider, by probe: N each, and no other probe of weft's name. */
static void test_all_sites(void **state)
{
	static const char *const names[] = { "task_begin", "task_end", "event", "edge" };

	(void)state;
	for (size_t b = 0; b < nbuilds; b++) {
		const char *bin = wr_workload(builds[b]);
		struct wr_proc p;
		struct wr_json j;
		const struct wj *w;

		w = run_one(&p, &j, bin, "from usdt:%W:weft:* group by probe select count() as n");
		assert_int_equal(wr_nrows(w), 4);
		for (size_t i = 0; i < 4; i++) {
			char probe[PATH_MAX + 64];

			snprintf(probe, sizeof(probe), "usdt:%s:weft:%s", bin, names[i]);
			assert_int_equal(wj_int_of(row_with(w, "probe", probe), "n"), N);
		}
		wr_json_free(&j);
		wr_free(&p);
	}
}

/* The strings of task_begin (service, name) and the status of task_end. */
static void test_begin_strings_end_status(void **state)
{
	static const char *const names[] = { "alpha", "beta", "gamma" };

	(void)state;
	for (size_t b = 0; b < nbuilds; b++) {
		const char *bin = wr_workload(builds[b]);
		struct wr_proc p;
		struct wr_json j;
		const struct wj *w;

		w = run_one(&p, &j, bin,
			    "from usdt:%W:weft:task_begin group by str(arg4) as service, "
			    "str(arg5) as name select count() as n");
		assert_int_equal(wr_nrows(w), 3);
		for (size_t i = 0; i < 3; i++) {
			const struct wj *r = row_with(w, "name", names[i]);

			assert_string_equal(wj_str(wj_get(r, "service")), "wl_trace");
			assert_int_equal(wj_int_of(r, "n"), N / 3);
		}
		/* every string read whole (the sites touch their strings first) */
		assert_int_equal(wj_int_of(wj_get(w, "notes"), "string_fault"), 0);
		wr_json_free(&j);
		wr_free(&p);

		/* status i % 3 of task i + 1: task ids 1 + k, 4 + k, ... for status k */
		w = run_one(
			&p, &j, bin,
			"from usdt:%W:weft:task_end group by arg3 as status select count() as n, "
			"sum(arg2) as task, sum(arg0) as hi");
		assert_int_equal(wr_nrows(w), 3);
		for (size_t i = 0; i < 3; i++) {
			const struct wj *r = wr_row(w, i);
			long long k = wj_int_of(r, "status"), m = N / 3;

			assert_true(k >= 0 && k <= 2);
			assert_int_equal(wj_int_of(r, "n"), m);
			assert_int_equal(wj_int_of(r, "task"), 3 * sum_0_to(m) + m * (k + 1));
			assert_int_equal(wj_int_of(r, "hi"), 1000 * m + 3 * sum_0_to(m) + m * k);
		}
		wr_json_free(&j);
		wr_free(&p);
	}
}

/* weft:event's name and weft:edge's kind and four ids, in their places. */
static void test_event_and_edge(void **state)
{
	(void)state;
	for (size_t b = 0; b < nbuilds; b++) {
		const char *bin = wr_workload(builds[b]);
		struct wr_proc p;
		struct wr_json j;
		const struct wj *w, *r;

		w = run_one(
			&p, &j, bin,
			"from usdt:%W:weft:event group by str(arg3) as name select count() as n, "
			"sum(arg2) as task, sum(arg1) as lo");
		assert_int_equal(wr_nrows(w), 1);
		r = row_with(w, "name", "tick");
		assert_int_equal(wj_int_of(r, "n"), N);
		assert_int_equal(wj_int_of(r, "task"), sum_0_to(N) + N);
		assert_int_equal(wj_int_of(r, "lo"), 2000LL * N + sum_0_to(N));
		wr_json_free(&j);
		wr_free(&p);

		/* i even: follows, i odd: message; from i + 1 to i + 2, no events */
		w = run_one(
			&p, &j, bin,
			"from usdt:%W:weft:edge group by str(arg2) as kind select count() as n, "
			"sum(arg3) as from_task, sum(arg4) as from_event, sum(arg5) as to_task, "
			"sum(arg6) as to_event, sum(arg0) as hi");
		assert_int_equal(wr_nrows(w), 2);
		for (int odd = 0; odd < 2; odd++) {
			long long m = N / 2, sum_i = 2 * sum_0_to(m) + m * odd;

			r = row_with(w, "kind", odd ? "message" : "follows");
			assert_int_equal(wj_int_of(r, "n"), m);
			assert_int_equal(wj_int_of(r, "from_task"), sum_i + m);
			assert_int_equal(wj_int_of(r, "to_task"), sum_i + 2 * m);
			assert_int_equal(wj_int_of(r, "from_event"), 0);
			assert_int_equal(wj_int_of(r, "to_event"), 0);
			assert_int_equal(wj_int_of(r, "hi"), 1000 * m + sum_i);
		}
		wr_json_free(&j);
		wr_free(&p);
	}
}

/* Runs argv to its end (output kept in *p); its status. */
static int run_cmd(struct wr_proc *p, char *const argv[])
{
	int rc = wr_start(p, argv);

	if (rc == 0)
		rc = wr_finish(p, WR_TIMEOUT_MS);
	if (rc != 0)
		wr_dump(p, argv[0]);
	return rc;
}

/*
 * docs/graphs.md's complete example, as a user would take it: the header installed by
 * `cmake --install` into a fresh prefix, the example's code cut from the page, built with the
 * page's two compile lines, and counted with the page's query: 3 requests make 6 task_begin,
 * 6 task_end and 3 event sites, one of the requests ending with status 2.
 */
static void test_docs_example(void **state)
{
	char dir[] = "/tmp/weft-trace-h-XXXXXX", path[PATH_MAX], inc[PATH_MAX + 16];
	char bin[2][64], q[256], *doc = NULL, *code, *end;
	const char *src = getenv("WEFT_SOURCE_DIR"), *bdir = getenv("WEFT_BINARY_DIR");
	size_t len = 0;
	struct wr_proc p;
	FILE *f;

	(void)state;
	assert_non_null(src);
	assert_non_null(mkdtemp(dir));
	/* the example, from the page */
	snprintf(path, sizeof(path), "%s/docs/graphs.md", src);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_int_equal(getdelim(&doc, &len, 0, f) > 0, 1);
	fclose(f);
	code = strstr(doc, "### A complete example");
	assert_non_null(code);
	code = strstr(code, "```c\n");
	assert_non_null(code);
	code += 5;
	end = strstr(code, "\n```");
	assert_non_null(end);
	snprintf(path, sizeof(path), "%s/app.c", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "%.*s\n", (int)(end - code), code);
	fclose(f);
	free(doc);
	/* the header, installed */
	{
		char prefix[PATH_MAX];
		char *const av[] = { "cmake", "--install", (char *)bdir, "--prefix", prefix, NULL };

		snprintf(prefix, sizeof(prefix), "%s/inst", dir);
		assert_int_equal(run_cmd(&p, av), 0);
		wr_free(&p);
		snprintf(inc, sizeof(inc), "-I%s/include", prefix);
	}
	/* the page's two compile lines */
	snprintf(bin[0], sizeof(bin[0]), "%s/app", dir);
	snprintf(bin[1], sizeof(bin[1]), "%s/app-sdt", dir);
	{
		char *const lt[] = { "cc",   "-O2",	    inc,    path, "-o",
				     bin[0], "-llttng-ust", "-ldl", NULL };
		char *const sdt[] = { "cc", "-O2", inc,	   "-DWEFT_TRACE_SDT_ONLY",
				      path, "-o",  bin[1], NULL };

		assert_int_equal(run_cmd(&p, lt), 0);
		wr_free(&p);
		assert_int_equal(run_cmd(&p, sdt), 0);
		wr_free(&p);
	}
	for (int b = 0; b < 2; b++) {
		static const struct {
			const char *probe;
			long long n;
		} want[] = { { "task_begin", 6 }, { "task_end", 6 }, { "event", 3 } };
		struct wr_json j;
		const struct wj *w;
		int rc;

		snprintf(q, sizeof(q), "from usdt:%s:weft:* group by probe select count() as n",
			 bin[b]);
		rc = wr_weft_run(&p, "--format", "json", "-c", bin[b], q);
		if (rc != 0)
			wr_dump(&p, q);
		assert_int_equal(rc, 0);
		wr_json_lines(&p.out, &j);
		w = wr_one_window(&j);
		assert_int_equal(wr_nrows(w), 3);
		for (size_t i = 0; i < 3; i++) {
			char probe[PATH_MAX + 64];

			snprintf(probe, sizeof(probe), "usdt:%s:weft:%s", bin[b], want[i].probe);
			assert_int_equal(wj_int_of(row_with(w, "probe", probe), "n"), want[i].n);
		}
		wr_json_free(&j);
		wr_free(&p);
		/* the third request ends with error, the others ok; the children ok */
		snprintf(q, sizeof(q),
			 "from usdt:%s:weft:task_end group by arg3 as status select count() as n",
			 bin[b]);
		assert_int_equal(wr_weft_run(&p, "--format", "json", "-c", bin[b], q), 0);
		wr_json_lines(&p.out, &j);
		w = wr_one_window(&j);
		assert_int_equal(wr_nrows(w), 2);
		for (size_t i = 0; i < 2; i++) {
			long long st = wj_int_of(wr_row(w, i), "status");

			assert_true(st == 1 || st == 2);
			assert_int_equal(wj_int_of(wr_row(w, i), "n"), st == 2 ? 1 : 5);
		}
		wr_json_free(&j);
		wr_free(&p);
	}
	{
		char *const av[] = { "rm", "-rf", dir, NULL };

		assert_int_equal(run_cmd(&p, av), 0);
		wr_free(&p);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_task_begin_count),
		cmocka_unit_test(test_all_sites),
		cmocka_unit_test(test_begin_strings_end_status),
		cmocka_unit_test(test_event_and_edge),
		cmocka_unit_test(test_docs_example),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, setup, NULL));
}

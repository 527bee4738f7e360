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
 * instruction, so nothing is missed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "run_util.h"
#include "tests/skip.h"

#define N 3000 /* iterations of wl_trace: a multiple of 3 and of 2 */

static const char *const builds[] = { "wl_trace", "wl_trace_sdt" };

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
	for (size_t b = 0; b < 2; b++) {
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
	for (size_t b = 0; b < 2; b++) {
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
	for (size_t b = 0; b < 2; b++) {
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
	for (size_t b = 0; b < 2; b++) {
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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_task_begin_count),
		cmocka_unit_test(test_all_sites),
		cmocka_unit_test(test_begin_strings_end_status),
		cmocka_unit_test(test_event_and_edge),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}

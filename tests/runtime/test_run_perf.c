// SPDX-License-Identifier: Apache-2.0
/*
 * End to end, perf event sources and stacks as values: the real `weft run` against the real
 * kernel and tests/workloads/wl_perf, which does a known number of one thing under a name
 * (comm) of its own, so every count is exact:
 *  - software:page-faults:1 (and its alias faults) counts the N fresh pages wl_perf writes;
 *  - software:context-switches:1 (alias cs) counts the N sleeps of wl_perf, the switches
 *    out of a task that blocks (curtask.__state != 0: a preemption is not a sleep);
 *  - --format folded prints wl_perf's user stack root first with its count: main -> wl_a ->
 *    wl_b -> wl_c, which makes the getppid system call N times itself, gives exactly the line
 *    "...;main;wl_a;wl_b;wl_c N" (frames below main are the C library's start-up, without
 *    symbols on Debian), and ustack(3) cuts it to "wl_a;wl_b;wl_c N";
 *  - a span's start-side stack: span(uprobe:wl_c) groups by start.ustack(4) as the stack at
 *    wl_c's entry, "main;wl_a;wl_b;wl_c 1", while ustack(3) is the end's (the return into
 *    wl_b): "main;wl_a;wl_b 1".
 * The stack tests run wl_perf stackwait with -p: it stays alive until weft has printed, so
 * its stack can be symbolized (a process gone cannot be), and calls only once weft says
 * "attached" (a line on its stdin).  Hardware events are test_run_perf_hw's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "run_util.h"
#include "tests/skip.h"

#define N_PAGES 1000
#define N_SLEEPS 50
#define N_CALLS 100

static const char *wl_cmd(const char *mode, long n)
{
	static char cmd[PATH_MAX + 64];

	snprintf(cmd, sizeof(cmd), "'%s' %s %ld", wr_workload("wl_perf"), mode, n);
	return cmd;
}

/* Runs query over `wl_perf mode n` (-c) and returns the one row's column n. */
static long long count_of(const char *mode, long n, const char *query)
{
	struct wr_proc p;
	struct wr_json j;
	const struct wj *w;
	char line[128], want[64];
	long long v;
	int rc;

	rc = wr_weft_run(&p, "--format", "json", "-c", wl_cmd(mode, n), query);
	if (rc != 0)
		wr_dump(&p, query);
	assert_int_equal(rc, 0);
	snprintf(want, sizeof(want), "wl_perf: %s %ld", mode, n);
	assert_true(wr_cut_line(&p.out, "wl_perf: ", line, sizeof(line)));
	assert_string_equal(line, want); /* the workload did what we think */
	wr_json_lines(&p.out, &j);
	w = wr_one_window(&j);
	assert_int_equal(wr_nrows(w), 1);
	v = wj_int_of(wr_row(w, 0), "n");
	wr_json_free(&j);
	wr_free(&p);
	return v;
}

static void test_page_faults(void **state)
{
	(void)state;
	assert_int_equal(count_of("faults", N_PAGES,
				  "from software:page-faults:1 where comm = 'wl_touch' "
				  "select count() as n"),
			 N_PAGES);
	assert_int_equal(
		count_of("faults", 3 * N_PAGES,
			 "from software:faults:1 where comm = 'wl_touch' select count() as n"),
		3 * N_PAGES);
}

static void test_context_switches(void **state)
{
	(void)state;
	assert_int_equal(count_of("sleeps", N_SLEEPS,
				  "from software:context-switches:1 where comm = 'wl_sleep' and "
				  "curtask.__state != 0 select count() as n"),
			 N_SLEEPS);
	assert_int_equal(
		count_of("sleeps", 2 * N_SLEEPS,
			 "from software:cs:1 where comm = 'wl_sleep' and curtask.__state != 0 "
			 "select count() as n"),
		2 * N_SLEEPS);
}

/* weft run --format folded -p (wl_perf stackwait n) query: weft's stdout, malloc'd. */
static char *folded_of(long n, const char *query)
{
	char *argv[] = { (char *)wr_workload("wl_perf"), (char *)"stackwait", NULL, NULL };
	char nbuf[24], pidbuf[24], want[64];
	struct wr_proc wl, p;
	char *out;
	int rc;

	snprintf(nbuf, sizeof(nbuf), "%ld", n);
	argv[2] = nbuf;
	assert_int_equal(wr_start(&wl, argv), 0);
	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)wl.pid);
	assert_int_equal(wr_weft_start(&p, "--format", "folded", "-p", pidbuf, query, NULL), 0);
	rc = wr_wait_err(&p, "attached", WR_TIMEOUT_MS);
	if (rc)
		wr_dump(&p, query);
	assert_int_equal(rc, 0);
	assert_int_equal(write(wl.in_fd, "go\n", 3), 3);
	snprintf(want, sizeof(want), "wl_perf: stackwait %ld\n", n);
	assert_int_equal(wr_wait_out(&wl, want, WR_TIMEOUT_MS), 0);
	kill(p.pid, SIGINT); /* the window ends; weft prints it and exits */
	rc = wr_finish(&p, WR_TIMEOUT_MS);
	if (rc != 0)
		wr_dump(&p, query);
	assert_int_equal(rc, 0);
	assert_int_equal(wr_finish(&wl, WR_TIMEOUT_MS), 0);
	out = strdup(p.out.p);
	wr_free(&p);
	wr_free(&wl);
	assert_non_null(out);
	return out;
}

/* The output is exactly one line; it ends with tail (a root-side prefix of frames may
 * come before, ';'-joined, without any wl_ frame). */
static void assert_one_line_ending(const char *out, const char *tail)
{
	size_t n = strlen(out), t = strlen(tail);

	if (n == 0 || out[n - 1] != '\n' || strchr(out, '\n') != out + n - 1 || n - 1 < t ||
	    strncmp(out + n - 1 - t, tail, t) != 0 || (n - 1 > t && out[n - 2 - t] != ';') ||
	    strstr(out, "wl_") < out + n - 1 - t)
		fail_msg("folded output '%s' is not one line ending in '%s'", out, tail);
}

static void test_folded_ustack(void **state)
{
	char *out;
	char want[64];

	(void)state;
	out = folded_of(N_CALLS, "from syscall:getppid group by ustack select count()");
	snprintf(want, sizeof(want), "main;wl_a;wl_b;wl_c %d", N_CALLS);
	assert_one_line_ending(out, want);
	free(out);

	out = folded_of(N_CALLS, "from syscall:getppid group by ustack(3) select count()");
	snprintf(want, sizeof(want), "wl_a;wl_b;wl_c %d\n", N_CALLS);
	assert_string_equal(out, want);
	free(out);
}

static void test_span_start_stack(void **state)
{
	char q[PATH_MAX + 128];
	char *out;

	(void)state;
	snprintf(q, sizeof(q), "from span(uprobe:%s:wl_c) group by start.ustack(4) select count()",
		 wr_workload("wl_perf"));
	out = folded_of(1, q);
	assert_string_equal(out, "main;wl_a;wl_b;wl_c 1\n");
	free(out);
	snprintf(q, sizeof(q), "from span(uprobe:%s:wl_c) group by ustack(3) select count()",
		 wr_workload("wl_perf"));
	out = folded_of(1, q);
	assert_string_equal(out, "main;wl_a;wl_b 1\n");
	free(out);
}

static void test_folded_refused(void **state)
{
	struct wr_proc p;

	(void)state;
	assert_int_equal(wr_weft_run(&p, "--format", "folded", "from syscall:getppid select pid"),
			 2);
	assert_non_null(strstr(p.err.p, "--format folded needs an aggregating query"));
	wr_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_page_faults),    cmocka_unit_test(test_context_switches),
		cmocka_unit_test(test_folded_ustack),  cmocka_unit_test(test_span_start_stack),
		cmocka_unit_test(test_folded_refused),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}

// SPDX-License-Identifier: Apache-2.0
/*
 * The CPU budget (agent_query_budget(), weft run --cpu-budget), against the real kernel:
 *  - A uprobe (and a syscall probe) that a workload hits in a tight loop, under a budget of
 *    0.001% of one CPU (10 us a second): `weft run` warns twice (W_CPU_BUDGET, JSON lines of
 *    type cpu_budget with verdict "over"), then stops it (E_CPU_BUDGET, verdict "stopped")
 *    naming the probe and its program, prints the last window and exits 4, while the workload
 *    still runs (the budget ended the query, not the workload).
 *  - In process, the stop detaches everything: the query's perf events are closed and a
 *    second window of the still-running workload counts nothing.
 *  - The same kind of query under the default budget with a light workload (1,000 calls after
 *    3.5 s, so more than three budget windows pass) is not stopped: exit 0, no warning, the
 *    exact count; --cpu-budget 0 never stops even the tight loop.
 *  - Bad --cpu-budget values are refused (exit 2).
 * Nothing here asserts how long anything took: only verdicts, statuses and counts.
 */
#include <dirent.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "tests/skip.h"
#include "agent/agent.h"
#include "agent/result.h"
#include "compiler/compiler.h"
#include "compiler/plan.h"
#include "kernel/weft_abi.h"
#include "run_util.h"

#define WEFT_EXIT_BUDGET 4 /* tools/weft.h */

static int count_of(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *s = hay; (s = strstr(s, needle)); s += strlen(needle))
		n++;
	return n;
}

/* A workload that runs until killed, started now: wl_ufuncs 0 (which dies with this process
 * too), or wl_syscalls with more calls than a test lasts. */
static void forever_start(struct wr_proc *wl, bool syscalls, char pid[32])
{
	char *uf[] = { (char *)wr_workload("wl_ufuncs"), (char *)"0", NULL };
	/* bounded: if a test fails before it kills it, it ends by itself (within ~2 min) */
	char *sc[] = { (char *)wr_workload("wl_syscalls"), (char *)"50000000", (char *)"1", NULL };

	assert_int_equal(wr_workload_start(wl, syscalls ? sc : uf), 0);
	snprintf(pid, 32, "%d", (int)wl->pid);
}

/* Runs `weft run --format json --cpu-budget 0.001 -p PID QUERY` against a tight loop and checks
 * the warnings, the stop and its report; `probe` must appear in the stop's message. */
static void check_stopped(bool syscalls, const char *query, const char *probe)
{
	struct wr_proc wl, p;
	struct wr_json j;
	char pid[32];
	int status, nbudget = 0, nwindows = 0;

	forever_start(&wl, syscalls, pid);
	status = wr_weft_run(&p, "--format", "json", "--cpu-budget", "0.001", "-p", pid, query);
	if (status != WEFT_EXIT_BUDGET)
		wr_dump(&p, query);
	assert_int_equal(status, WEFT_EXIT_BUDGET);
	/* the workload runs on: the budget stopped the query */
	assert_int_equal(kill(wl.pid, 0), 0);

	assert_int_equal(count_of(p.err.p, "[W_CPU_BUDGET]"), AGENT_CPU_BUDGET_WINDOWS - 1);
	assert_int_equal(count_of(p.err.p, "[E_CPU_BUDGET]"), 1);
	if (!strstr(p.err.p, "query stopped by its CPU budget") || !strstr(p.err.p, "wp0 ") ||
	    !strstr(strstr(p.err.p, "query stopped by its CPU budget"), probe))
		fail_msg("the stop does not name %s (wp0):\n%s", probe, p.err.p);

	wr_json_lines(&p.out, &j);
	for (size_t i = 0; i < j.n; i++) {
		const struct wj *v = j.v[i], *probes, *hot;
		const char *verdict;

		if (wr_is_type(v, "window")) {
			nwindows++;
			assert_true(wj_int_of(wr_row(v, 0), "n") > 0);
			assert_int_equal(nbudget, AGENT_CPU_BUDGET_WINDOWS); /* after the stop */
			continue;
		}
		if (!wr_is_type(v, "cpu_budget"))
			continue;
		nbudget++;
		verdict = wj_str(wj_get(v, "verdict"));
		assert_non_null(verdict);
		assert_string_equal(verdict,
				    nbudget < AGENT_CPU_BUDGET_WINDOWS ? "over" : "stopped");
		assert_int_equal(wj_int_of(v, "over"), nbudget);
		assert_int_equal(wj_int_of(v, "limit"), AGENT_CPU_BUDGET_WINDOWS);
		assert_true(wj_int_of(v, "cost_ns") > wj_int_of(v, "budget_ns"));
		assert_true(wj_int_of(v, "calls") > 0);
		probes = wj_get(v, "probes");
		assert_non_null(probes);
		assert_int_equal(probes->kind, WJ_ARR);
		assert_int_equal(probes->nkids, 1);
		hot = &probes->kids[0];
		assert_string_equal(wj_str(wj_get(hot, "program")), "wp0");
		assert_non_null(strstr(wj_str(wj_get(hot, "probe")), probe));
		assert_int_equal(wj_int_of(hot, "calls"), wj_int_of(v, "calls"));
		/* a user probe is charged its trap too, a tracepoint its run time alone */
		if (syscalls)
			assert_int_equal(wj_int_of(hot, "trap_ns"), 0);
		else
			assert_true(wj_int_of(hot, "trap_ns") > 0);
		assert_non_null(strstr(wj_str(wj_get(v, "message")), probe));
	}
	assert_int_equal(nbudget, AGENT_CPU_BUDGET_WINDOWS);
	assert_int_equal(nwindows, 1);
	wr_json_free(&j);
	wr_free(&p);
	kill(wl.pid, SIGKILL);
	wr_free(&wl);
}

static void test_uprobe_over_budget_is_stopped(void **state)
{
	char query[PATH_MAX + 64];

	(void)state;
	if (!wr_ready())
		wt_skip("tracing needs root, tracefs and the weft binary");
	snprintf(query, sizeof(query), "from uprobe:%s:wl_f05 select count() as n",
		 wr_workload("wl_ufuncs"));
	check_stopped(false, query, "wl_f05");
}

static void test_syscall_over_budget_is_stopped(void **state)
{
	(void)state;
	if (!wr_ready())
		wt_skip("tracing needs root, tracefs and the weft binary");
	check_stopped(true, "from syscall:getppid select count() as n", "syscall:getppid");
}

static void test_default_budget_light_not_stopped(void **state)
{
	char cmd[PATH_MAX + 32], query[PATH_MAX + 64];
	struct wr_proc p;
	struct wr_json j;
	int status;

	(void)state;
	if (!wr_ready())
		wt_skip("tracing needs root, tracefs and the weft binary");
	/* wl_usdt sleeps 3.5 s (more than AGENT_CPU_BUDGET_WINDOWS budget windows), then makes
	 * 1000 calls of wl_work: light, under the default budget */
	snprintf(cmd, sizeof(cmd), "%s 1000 3500", wr_workload("wl_usdt"));
	snprintf(query, sizeof(query), "from uprobe:%s:wl_work select count() as n",
		 wr_workload("wl_usdt"));
	status = wr_weft_run(&p, WR_DEFAULT_BUDGET, "--format", "json", "-c", cmd, query);
	if (status != 0)
		wr_dump(&p, query);
	assert_int_equal(status, 0);
	assert_null(strstr(p.err.p, "CPU_BUDGET"));
	assert_null(strstr(p.out.p, "cpu_budget"));
	wr_json_lines(&p.out, &j);
	assert_int_equal(wj_int_of(wr_row(wr_one_window(&j), 0), "n"), 1000);
	wr_json_free(&j);
	wr_free(&p);
}

static void test_budget_zero_is_unlimited(void **state)
{
	char query[PATH_MAX + 64], pid[32];
	struct wr_proc wl, p;
	int status;

	(void)state;
	if (!wr_ready())
		wt_skip("tracing needs root, tracefs and the weft binary");
	forever_start(&wl, false, pid);
	snprintf(query, sizeof(query), "from uprobe:%s:wl_f05 select count() as n for 4s",
		 wr_workload("wl_ufuncs"));
	status = wr_weft_run(&p, "--cpu-budget", "0", "-p", pid, query);
	if (status != 0)
		wr_dump(&p, query);
	assert_int_equal(status, 0);
	assert_null(strstr(p.err.p, "CPU_BUDGET"));
	wr_free(&p);
	kill(wl.pid, SIGKILL);
	wr_free(&wl);
}

static void test_bad_budget_refused(void **state)
{
	static const char *const bad[] = { "-1", "abc", "5%", "1e9", "nan", "" };
	struct wr_proc p;

	(void)state;
	if (!wr_ready())
		wt_skip("tracing needs root, tracefs and the weft binary");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int status = wr_weft_run(&p, "--cpu-budget", bad[i],
					 "from syscall:getppid select "
					 "count()");

		if (status != 2 || !strstr(p.err.p, "--cpu-budget"))
			wr_dump(&p, bad[i]);
		assert_int_equal(status, 2);
		wr_free(&p);
	}
}

/* Perf-event fds this process holds (the query's single uprobe). */
static int perf_events_held(void)
{
	char path[PATH_MAX], target[64];
	struct dirent *de;
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d))) {
		ssize_t len;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
		len = readlink(path, target, sizeof(target) - 1);
		if (len <= 0)
			continue;
		target[len] = 0;
		n += strcmp(target, "anon_inode:[perf_event]") == 0;
	}
	closedir(d);
	return n;
}

/* The count of one window read now (0 if the table is empty). */
static long long window_count(struct agent_query *q, const struct plan *plan)
{
	struct agent_table *t = agent_table_new(plan, 0);
	struct wr_buf out = { 0 };
	struct wr_json j;
	char *text = NULL;
	size_t len = 0;
	long long n;
	FILE *f;

	assert_non_null(t);
	assert_int_equal(agent_query_window(q, t, NULL), 0);
	f = open_memstream(&text, &len);
	assert_non_null(f);
	agent_table_print(t, AGENT_FMT_JSON, NULL, f);
	fclose(f);
	wr_buf_add(&out, text, len);
	wr_json_lines(&out, &j);
	n = wr_nrows(j.v[0]) ? wj_int_of(wr_row(j.v[0], 0), "n") : 0;
	wr_json_free(&j);
	free(out.p);
	free(text);
	agent_table_free(t);
	return n;
}

static void test_stop_detaches_in_process(void **state)
{
	struct compile_opts o = { .sz = sizeof(o) };
	struct agent_query_opts ao = { .sz = sizeof(ao), .cpu_budget = 0.001 };
	struct agent_budget_report br;
	struct compile_result res;
	struct agent_err err;
	struct diag_list dl;
	struct agent_query *q = NULL;
	struct wr_proc wl;
	char query[PATH_MAX + 64], pid[32];
	int before, verdicts = 0;
	uint64_t end;

	(void)state;
	if (!wr_ready())
		wt_skip("tracing needs root, tracefs and the weft binary");
	forever_start(&wl, false, pid);
	snprintf(query, sizeof(query), "from uprobe:%s:wl_f05 select count() as n",
		 wr_workload("wl_ufuncs"));
	o.pid = wl.pid;
	diag_list_init(&dl, query, "query");
	assert_int_equal(compiler_run(query, &o, PASS_CLANG, &dl, &res), 0);
	before = perf_events_held();
	ao.pid = wl.pid;
	assert_int_equal(agent_query_start(res.plan, res.object, res.object_sz, &ao, &q, &err), 0);
	assert_int_equal(perf_events_held(), before + 1);
	/* windows of about a second: the third over the budget stops it (a bound only for a
	 * hang) */
	end = wr_now_ms() + 30000;
	while (!agent_query_budget_stopped(q) && wr_now_ms() < end) {
		int rc = agent_query_budget(q, &br);

		assert_true(rc >= 0);
		if (rc == 1) {
			verdicts++;
			assert_int_equal(br.verdict, verdicts < AGENT_CPU_BUDGET_WINDOWS ?
							     AGENT_BUDGET_OVER :
							     AGENT_BUDGET_STOPPED);
		}
		wr_sleep_ms(100);
	}
	assert_true(agent_query_budget_stopped(q));
	assert_int_equal(verdicts, AGENT_CPU_BUDGET_WINDOWS);
	/* detached: the perf event is closed, and after the window in flight is read, the
	 * still-running workload adds nothing */
	assert_int_equal(perf_events_held(), before);
	assert_true(window_count(q, res.plan) > 0);
	wr_sleep_ms(200);
	assert_int_equal(kill(wl.pid, 0), 0);
	assert_int_equal(window_count(q, res.plan), 0);
	/* and no more verdicts */
	assert_int_equal(agent_query_budget(q, &br), 0);
	agent_query_free(q);
	compile_result_free(&res);
	diag_list_free(&dl);
	kill(wl.pid, SIGKILL);
	wr_free(&wl);
}

/*
 * The cost meter every program keeps (WEFT_COST_MAP), which the budget reads: every run
 * counted, one in WEFT_COST_SAMPLE timed, the first included.  The workload runs on one CPU
 * (the test's affinity, inherited), so that the timed runs are exactly those of one CPU's
 * count: wl_ufuncs 500 calls wl_f05 exactly 1,000 times, runs 0, 32, ..., 992 are timed.
 */
static void test_meter_counts_every_run(void **state)
{
	struct compile_opts o = { .sz = sizeof(o) };
	struct agent_query_opts ao = { .sz = sizeof(ao) }; /* no budget: the meter runs anyway */
	struct agent_prog_cost cost;
	struct compile_result res;
	struct agent_err err;
	struct diag_list dl;
	struct agent_query *q = NULL;
	struct wr_proc wl;
	char query[PATH_MAX + 64];
	char *argv[] = { (char *)wr_workload("wl_ufuncs"), (char *)"500", NULL };
	cpu_set_t all, one;

	(void)state;
	if (!wr_ready())
		wt_skip("tracing needs root, tracefs and the weft binary");
	snprintf(query, sizeof(query), "from uprobe:%s:wl_f05 select count() as n",
		 wr_workload("wl_ufuncs"));
	diag_list_init(&dl, query, "query");
	assert_int_equal(compiler_run(query, &o, PASS_CLANG, &dl, &res), 0);
	assert_int_equal(res.plan->nprogs, 1);
	assert_int_equal(agent_query_start(res.plan, res.object, res.object_sz, &ao, &q, &err), 0);
	assert_int_equal(agent_query_cost(q, 0, &cost), 0);
	assert_int_equal(cost.calls, 0);
	assert_int_equal(cost.sampled, 0);
	assert_int_equal(agent_query_cost(q, 1, &cost), -ENOENT);

	assert_int_equal(sched_getaffinity(0, sizeof(all), &all), 0);
	CPU_ZERO(&one);
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &all)) {
			CPU_SET(c, &one);
			break;
		}
	assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
	assert_int_equal(wr_workload_start(&wl, argv), 0);
	assert_int_equal(sched_setaffinity(0, sizeof(all), &all), 0);
	assert_int_equal(wr_finish(&wl, 30000), 0);

	assert_int_equal(agent_query_cost(q, 0, &cost), 0);
	assert_int_equal(cost.calls, 1000);
	assert_int_equal(cost.sampled, (1000 + WEFT_COST_SAMPLE - 1) / WEFT_COST_SAMPLE);
	assert_true(cost.ns > 0);
	assert_int_equal(window_count(q, res.plan), 1000);
	agent_query_stop(q);
	agent_query_free(q);
	compile_result_free(&res);
	diag_list_free(&dl);
	wr_free(&wl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_uprobe_over_budget_is_stopped),
		cmocka_unit_test(test_syscall_over_budget_is_stopped),
		cmocka_unit_test(test_default_budget_light_not_stopped),
		cmocka_unit_test(test_budget_zero_is_unlimited),
		cmocka_unit_test(test_bad_budget_refused),
		cmocka_unit_test(test_stop_detaches_in_process),
		cmocka_unit_test(test_meter_counts_every_run),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}

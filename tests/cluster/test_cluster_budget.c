// SPDX-License-Identifier: Apache-2.0
/*
 * The CPU budget in a cluster of real processes on loopback: one `weft aggregator` and three
 * `weft agent`s on this machine: "tight" with `--cpu-budget 0.001` (10 us a second), "off" with
 * `--cpu-budget 0` (none) and "dflt" without the option.  A query submitted to all three puts a
 * uprobe on a function that a workload calls in a tight loop (a copy of wl_ufuncs unique to
 * this test, so nothing else hits it).
 *
 *  - Each agent applies its budget to the submitted query (its log says which: 0.001%, none,
 *    and the default 5%).
 *  - "tight" stops the query by itself (its log: two W_CPU_BUDGET warnings, then E_CPU_BUDGET
 *    naming the probe), holds no probe afterwards (no perf event or BPF link among its file
 *    descriptors, where it held some while the query ran), and is no longer listed as running
 *    it;
 *  - the aggregator records why: `weft status` lists "tight: query stopped by its CPU budget:
 *    ... [E_CPU_BUDGET]" among the query's errors, and the following `weft submit` is told;
 *  - "off" runs the query on (still running it after "tight" stopped, its counts still
 *    coming, never a warning).
 * Whether the tight loop exceeds 5% of a CPU depends on the machine's load, so nothing is
 * asserted about "dflt" beyond its budget; nor about timing.  Needs root; skipped otherwise.
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

#include "tests/skip.h"
#include "agent/agent.h"
#include "tests/cluster/cluster_util.h"

/* `weft agent --host HOST` with extra options (cl_agent() with a budget), once connected. */
static struct cl_proc *agent_with(struct cl *cl, const char *host, const char *budget)
{
	char key[PATH_MAX], log[32];
	struct cl_proc *p;

	snprintf(key, sizeof(key), "%s/%s.key", cl->dir, host);
	snprintf(log, sizeof(log), "agent-%s", host);
	p = cl_spawn(cl, log, NULL,
		     (char *const[]){
			     getenv("WEFT_BIN"), (char *)"agent", (char *)"--connect", cl->endpoint,
			     (char *)"--server-key", (char *)cl_pub(cl, cl->agent_server),
			     (char *)"--key", key, (char *)"--host", (char *)host,
			     budget ? (char *)"--cpu-budget" : NULL, (char *)budget, NULL });
	cl_expect_log(p, "connected to aggregator", CL_WAIT_MS);
	return p;
}

/* The errors the aggregator lists for query id. */
static bool status_error_has(struct cl *cl, uint64_t id, const char *a, const char *b)
{
	struct wj *st = cl_status(cl, NULL);
	const struct wj *qs = wj_get(st, "queries");
	bool found = false;

	for (size_t i = 0; qs && i < qs->nkids && !found; i++) {
		const struct wj *errs = wj_get(&qs->kids[i], "errors");

		if (wj_int_of(&qs->kids[i], "id") != (long long)id || !errs)
			continue;
		for (size_t k = 0; k < errs->nkids; k++) {
			const char *e = wj_str(&errs->kids[k]);

			if (e && strstr(e, a) && strstr(e, b) && strstr(e, "[E_CPU_BUDGET]"))
				found = true;
		}
	}
	wj_free(st);
	return found;
}

static void test_agent_budget_stops_and_reports(void **state)
{
	struct cl *cl = *state;
	struct cl_proc *tight, *off, *dflt, *sub;
	char bin[PATH_MAX], query[PATH_MAX + 128], *log;
	struct wr_proc wl;
	long long before;
	uint64_t id;

	if (!cl->dir[0])
		wt_skip("the cluster tests need root, tracefs and the weft binary");
	cl_keygen(cl, "agent", "tight", true);
	cl_keygen(cl, "agent", "off", true);
	cl_keygen(cl, "agent", "dflt", true);
	cl_aggregator(cl, "agg", NULL, NULL, NULL);
	tight = agent_with(cl, "tight", "0.001");
	off = agent_with(cl, "off", "0");
	dflt = agent_with(cl, "dflt", NULL);
	assert_int_equal(cl_probes_held(tight->pid, true), 0);

	snprintf(bin, sizeof(bin), "%s", cl_path(cl, "wl_ufuncs"));
	cl_copy_file(wr_workload("wl_ufuncs"), bin);
	snprintf(query, sizeof(query),
		 "from uprobe:%s:wl_f05 group by host select count() as n every 1s", bin);
	sub = cl_submit(cl, "submit", NULL, query, &id);
	cl_expect_log(tight, "running: 1 probe, window 0 of 1000 ms, CPU budget 0.001% of one CPU",
		      CL_WAIT_MS);
	cl_expect_log(off, "running: 1 probe, window 0 of 1000 ms, no CPU budget", CL_WAIT_MS);
	cl_expect_log(dflt, "running: 1 probe, window 0 of 1000 ms, CPU budget 5% of one CPU",
		      CL_WAIT_MS);
	assert_true(cl_probes_held(tight->pid, true) > 0);

	/* the tight loop: wl_f05 twice a round, rounds until killed */
	assert_int_equal(wr_workload_start(&wl, (char *const[]){ bin, (char *)"0", NULL }), 0);

	cl_expect_log(tight, "[E_CPU_BUDGET]", 60000);
	log = cl_slurp(tight->err);
	assert_int_equal(cl_file_count(tight->err, "[W_CPU_BUDGET]"), AGENT_CPU_BUDGET_WINDOWS - 1);
	if (!strstr(strstr(log, "query stopped by its CPU budget"), "wl_f05"))
		fail_msg("the stop does not name the probe:\n%s", log);
	free(log);
	/* tight detached everything and says so; off runs on */
	assert_true(CL_WAIT(cl_probes_held(tight->pid, true) == 0, CL_WAIT_MS));
	assert_true(CL_WAIT(!cl_agent_runs(cl, NULL, "tight", id), CL_WAIT_MS));
	assert_true(cl_agent_runs(cl, NULL, "off", id));
	assert_false(cl_file_has(off->err, "CPU_BUDGET"));
	assert_true(cl_probes_held(off->pid, true) > 0);

	/* the aggregator knows why, and told the follower */
	assert_true(CL_WAIT(
		status_error_has(cl, id, "tight: query stopped by its CPU budget", "wl_f05"),
		CL_WAIT_MS));
	cl_expect_log(sub, "tight: query stopped by its CPU budget", CL_WAIT_MS);

	/* off's counts keep coming after tight stopped */
	before = cl_file_sum(sub->out, "n", "off", NULL);
	assert_true(CL_WAIT(cl_file_sum(sub->out, "n", "off", NULL) > before, CL_WAIT_MS));

	kill(wl.pid, SIGKILL);
	wr_free(&wl);
	cl_cancel(cl, NULL, id);
	cl_expect_end(sub);
	assert_false(cl_file_has(off->err, "CPU_BUDGET"));
	cl->passed = true;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_agent_budget_stops_and_reports, cl_test_setup,
						cl_test_teardown),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}

// SPDX-License-Identifier: Apache-2.0
/*
 * An agent detaching a slow query keeps its heartbeats: one `weft aggregator` (heartbeat
 * 200 ms: silent for 600 ms is taken for dead) and one `weft agent` "slow" started with
 * WEFT_UPROBE_MULTI=0, so that each uprobe site is a perf event of its own, as on kernels
 * before 6.6 and for libbpf's USDT attach; detaching such a uprobe waits for a grace period
 * (~70 ms each here: docs/performance.md, "Attaching and detaching many uprobe sites").  A
 * query on 48 functions of a copy of wl_ufuncs (wl_f00 .. wl_f2f) then takes seconds to
 * detach.
 *
 *  - the workload's calls are counted exactly: ROUNDS rounds, function k called (k % 4) + 1
 *    times a round: 120 calls a round over the 48;
 *  - the agent holds a perf event a site (else there is nothing to show here: skipped);
 *  - cancelled, the agent detaches beside its loop (its log says how long it took, when a
 *    second or more), the aggregator never takes it for dead meanwhile (no "expired" in its
 *    log; that the agent still runs a query it ended logged once, not at each heartbeat),
 *    the follower ends, and the count is still exact;
 *  - afterwards the agent holds no probe and runs nothing.
 * Before the detach moved beside the loop, the agent was silent for the whole detach and the
 * aggregator logged it expired.  Nothing is asserted about timing.  Needs root; skipped
 * otherwise.
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
#include "tests/cluster/cluster_util.h"

#define ROUNDS 100
#define CALLS (ROUNDS * 120) /* wl_f00 .. wl_f2f: 12 runs of 1 + 2 + 3 + 4 calls a round */

static void test_detach_keeps_heartbeats(void **state)
{
	struct cl *cl = *state;
	struct cl_proc *agg, *slow, *sub;
	char bin[PATH_MAX], query[3 * PATH_MAX + 128], rounds[16], needle[64];
	struct wr_proc wl;
	uint64_t id;

	if (!cl->dir[0])
		wt_skip("the cluster tests need root, tracefs and the weft binary");
	cl_keygen(cl, "agent", "slow", true);
	agg = cl_aggregator(cl, "agg", NULL, NULL, NULL);
	/* inherited by the agent alone: every uprobe site a perf event of its own */
	setenv("WEFT_UPROBE_MULTI", "0", 1);
	slow = cl_agent(cl, "slow", "agent-slow", NULL, NULL, true);
	unsetenv("WEFT_UPROBE_MULTI");

	snprintf(bin, sizeof(bin), "%s", cl_path(cl, "wl_ufuncs"));
	cl_copy_file(wr_workload("wl_ufuncs"), bin);
	snprintf(query, sizeof(query),
		 "from uprobe:%s:wl_f0*, uprobe:%s:wl_f1*, uprobe:%s:wl_f2* group by host "
		 "select count() as n every 1s",
		 bin, bin, bin);
	sub = cl_submit(cl, "submit", NULL, query, &id);
	cl_expect_log(slow, "running: 48 probes", CL_WAIT_MS);

	snprintf(rounds, sizeof(rounds), "%d", ROUNDS);
	assert_int_equal(
		wr_workload_start(&wl, (char *const[]){ bin, rounds, (char *)"wait", NULL }), 0);
	wr_close_stdin(&wl); /* go */
	assert_int_equal(wr_finish(&wl, CL_WAIT_MS), 0);
	wr_free(&wl);
	assert_true(CL_WAIT(cl_file_sum(sub->out, "n", "slow", NULL) == CALLS, CL_WAIT_MS));
	/* one perf event a site: each waits for a grace period when it goes */
	if (cl_probes_held(slow->pid, false) < 48) {
		cl->passed = true;
		wt_skip("the agent's uprobes are not perf events of their own here");
	}

	cl_cancel(cl, NULL, id);
	snprintf(needle, sizeof(needle), "query %llu ended", (unsigned long long)id);
	cl_expect_log(slow, needle, 4 * CL_WAIT_MS);
	cl_expect_end(sub);
	assert_false(cl_file_has(agg->err, "expired (silent for"));
	assert_false(cl_file_has(agg->err, "slow is back"));
	/* its heartbeats list the query until it is detached: said once, not at each */
	snprintf(needle, sizeof(needle), "runs query %llu, which is not running here",
		 (unsigned long long)id);
	assert_true(cl_file_count(agg->err, needle) <= 1);
	assert_int_equal(cl_file_sum(sub->out, "n", "slow", NULL), CALLS);
	assert_true(CL_WAIT(cl_probes_held(slow->pid, true) == 0, CL_WAIT_MS));
	assert_true(CL_WAIT(!cl_agent_runs(cl, NULL, "slow", id), CL_WAIT_MS));
	cl->passed = true;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_detach_keeps_heartbeats, cl_test_setup,
						cl_test_teardown),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}

// SPDX-License-Identifier: Apache-2.0
/*
 * A tree of aggregators (docs/operations.md, "A tree of aggregators"): a root aggregator,
 * a region aggregator reporting to it (`--parent`, its key allow-listed at the root with the
 * role aggregator), and two agents connected to the region.  Queries are submitted to the
 * root; the region runs them on its agents under ids of its own and sends each window up as
 * one partial.  At the root, grouped by host, each leaf host counts the workload's calls
 * exactly, the two runs in windows of their own, and the results name the leaf hosts, not
 * the region; ungrouped, the count is exactly twice the calls.  Cancelling at the root stops
 * the queries on the agents.
 *
 * Needs root (agents load BPF); skipped otherwise.
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

#include "tests/cluster/cluster_util.h"
#include "tests/skip.h"

static int setup(void **state)
{
	struct cl *cl = calloc(1, sizeof(*cl));

	if (!cl)
		return -1;
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

static void test_tree(void **state)
{
	static const char *const hosts[] = { "a", "b", NULL };
	const unsigned long n1 = 25000, n2 = 8000;
	struct cl *cl = *state;
	struct cl_proc *root, *region, *agents[2], *by_host, *total;
	char comm[32], q_host[256], q_total[256], log[32], region_ep[64], id_text[32];
	uint64_t id_host, id_total;
	const struct wj *ag;
	struct cl_res r;
	struct wj *st;

	cl_keygen(cl, "aggregator", "root", false);
	cl_keygen(cl, "aggregator", "region1", true); /* a child of the root */
	for (int i = 0; hosts[i]; i++)
		cl_keygen(cl, "agent", hosts[i], true);
	/* the root waits longer than the region, which closes its windows first */
	root = cl_aggregator(cl, "root", NULL, NULL,
			     (char *const[]){ (char *)"--lateness", (char *)"1500ms", NULL });
	snprintf(region_ep, sizeof(region_ep), "tcp://127.0.0.1:%d", cl_free_port());
	region = cl_aggregator(cl, "region1", region_ep, NULL,
			       (char *const[]){ (char *)"--parent", cl->endpoint,
						(char *)"--parent-key", (char *)cl_pub(cl, "root"),
						NULL });
	cl_expect_log(region, "welcomed by the parent", CL_WAIT_MS);
	snprintf(cl->agent_server, sizeof(cl->agent_server), "region1");
	snprintf(cl->client_server, sizeof(cl->client_server), "root");
	for (int i = 0; hosts[i]; i++) {
		snprintf(log, sizeof(log), "agent-%s", hosts[i]);
		agents[i] = cl_agent(cl, hosts[i], log, NULL, region_ep, true);
	}

	snprintf(comm, sizeof(comm), "%st", cl->tag);
	cl_workload_make(cl, comm);
	snprintf(q_host, sizeof(q_host),
		 "from syscall:getppid where comm = '%s' group by host select count() as n "
		 "every 1s",
		 comm);
	snprintf(q_total, sizeof(q_total),
		 "from syscall:getppid where comm = '%s' select count() as n every 1s", comm);
	by_host = cl_submit(cl, "submit-host", NULL, q_host, &id_host);
	total = cl_submit(cl, "submit-total", NULL, q_total, &id_total);
	/* the region runs both under ids of its own */
	for (int i = 0; i < 2; i++)
		if (!CL_WAIT(cl_file_count(agents[i]->err, " running: ") == 2, CL_WAIT_MS))
			fail_msg("agent %s does not run both queries", hosts[i]);

	/* the root sees the region (an aggregator), not the agents */
	st = cl_status(cl, NULL);
	ag = cl_status_agent(st, "region1");
	assert_non_null(ag);
	assert_string_equal(wj_str(wj_get(ag, "role")), "aggregator");
	assert_true(cl_json_true(ag, "alive"));
	assert_true(cl_json_has_int(ag, "running", (long long)id_host));
	assert_null(cl_status_agent(st, "a"));
	wj_free(st);

	cl_workload(cl, comm, NULL, n1, 2);
	for (int i = 0; hosts[i]; i++)
		assert_true(CL_WAIT(cl_file_sum(by_host->out, "n", hosts[i], NULL) == (long long)n1,
				    CL_WAIT_MS));
	cl_workload(cl, comm, NULL, n2, 3);
	cl_cancel(cl, NULL, id_host);
	cl_cancel(cl, NULL, id_total);
	cl_expect_end(by_host);
	cl_expect_end(total);
	/* stopped all the way down */
	for (int i = 0; i < 2; i++)
		assert_true(CL_WAIT(cl_file_count(agents[i]->err, " ended after window ") == 2,
				    CL_WAIT_MS));

	cl_res_load(&r, by_host->out);
	assert_true(r.ended);
	for (int i = 0; hosts[i]; i++) {
		assert_int_equal(cl_res_sum(&r, "n", hosts[i], NULL), n1 + n2);
		/* the second run started once the first was merged: windows of its own */
		assert_true(cl_res_splits(&r, "n", hosts[i], NULL, n1, n2));
	}
	cl_res_rows_only(&r, hosts);
	for (size_t w = 0; w < r.nwin; w++)
		assert_true(cl_json_strs_are(r.final[w], "hosts", hosts));
	assert_int_equal(r.late_dropped, 0);
	cl_res_free(&r);

	cl_res_load(&r, total->out);
	assert_true(r.ended);
	assert_int_equal(cl_res_sum(&r, "n", NULL, NULL), 2 * (n1 + n2));
	for (size_t w = 0; w < r.nwin; w++)
		assert_true(cl_json_strs_are(r.final[w], "hosts", hosts));
	cl_res_free(&r);

	assert_true(cl_alive(root));
	assert_true(cl_alive(region));
	snprintf(id_text, sizeof(id_text), "query %llu ended", (unsigned long long)id_host);
	assert_true(cl_file_has(root->err, id_text));
	cl->passed = true;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_tree, setup, teardown),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}

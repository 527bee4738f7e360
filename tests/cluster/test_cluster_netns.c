// SPDX-License-Identifier: Apache-2.0
/*
 * Agents as distinct hosts, each in a network namespace of its own (weft-ns-PID-1..3, a
 * veth pair to the root namespace each), reaching the aggregator in the root namespace over
 * real TCP; the clients connect from the root namespace.
 *
 *   merge      a workload with a comm of its own runs inside each namespace (checked: the
 *              workload's network namespace is that one).  The namespaces share one kernel,
 *              so every agent sees all three workloads: grouped by host and comm, every
 *              host counts each workload's calls exactly, and grouped by comm alone the
 *              merged count is exactly three times each workload's
 *   partition  the third namespace is cut off for 30 s (the root end of its veth down: a
 *              real loss of the link, not a stopped process) while workloads run in every
 *              namespace; the aggregator closes windows without that host, naming it
 *              missing; the agent keeps its partials, reconnects by itself when the link
 *              is back and delivers them; the windows are emitted again as revisions
 *              (exactly those first emitted without a host), and the sums over the
 *              windows' answers equal the workloads' known counts for every host, the cut
 *              one included, with every window finally holding all three hosts
 *
 * The namespaces and veths are removed in the teardown, and any left by a crashed run of
 * this test are removed before it starts.  Needs root; skipped otherwise.
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

#define NS 3
#define CUT_MS 30000

static const char *const hosts[] = { "ns1", "ns2", "ns3", NULL };

struct fixture {
	struct cl cl;
	struct cl_net net;
	struct cl_proc *agg, *agents[NS];
	char comm[NS][32];
	bool failed; /* some test of the group failed: keep the logs */
};

static int group_setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char listen[64], log[32];

	if (!f)
		return -1;
	*state = f;
	cl_net_group_begin(&f->cl, &f->net, &f->failed);
	f->failed = true; /* until the setup is through */
	cl_init(&f->cl);
	cl_net_setup(&f->net, NS);
	cl_net_endpoint(&f->cl, &f->net, listen);
	for (int k = 0; k < NS; k++)
		cl_keygen(&f->cl, "agent", hosts[k], true);
	f->agg = cl_aggregator(&f->cl, "agg", listen, NULL, NULL);
	for (int k = 0; k < NS; k++) {
		snprintf(log, sizeof(log), "agent-%s", hosts[k]);
		f->agents[k] = cl_agent(&f->cl, hosts[k], log, f->net.ns[k], listen, true);
		snprintf(f->comm[k], sizeof(f->comm[k]), "%s_%d", f->cl.tag, k + 1);
		cl_workload_make(&f->cl, f->comm[k]);
	}
	f->failed = false;
	return 0;
}

static int group_teardown(void **state)
{
	struct fixture *f = *state;

	cl_net_group_end(&f->cl, &f->net, f->failed);
	free(f);
	return 0;
}

static int test_setup(void **state)
{
	struct fixture *f = *state;

	f->cl.passed = false;
	return 0;
}

static int test_teardown(void **state)
{
	struct fixture *f = *state;

	f->failed |= !f->cl.passed;
	return 0;
}

static void expect_running(struct cl_proc *agent, uint64_t id)
{
	char needle[64];

	snprintf(needle, sizeof(needle), "query %llu running", (unsigned long long)id);
	cl_expect_log(agent, needle, CL_WAIT_MS);
}

/* `... where comm in (the three) group by GROUP select count() as n every 1s` */
static const char *query_text(struct fixture *f, const char *group)
{
	static char q[512];

	snprintf(q, sizeof(q),
		 "from syscall:getppid where comm in ('%s', '%s', '%s') group by %s "
		 "select count() as n every 1s",
		 f->comm[0], f->comm[1], f->comm[2], group);
	return q;
}

/* Runs workload k in namespace k, `calls[k]` calls each. */
static void run_workloads(struct fixture *f, const unsigned long calls[NS])
{
	for (int k = 0; k < NS; k++)
		cl_workload(&f->cl, f->comm[k], f->net.ns[k], calls[k], k + 1);
}

/* Whether every (host, comm) of a follower counts want[comm] calls by now. */
static bool sums_are(struct fixture *f, struct cl_proc *sub, const unsigned long want[NS])
{
	for (int h = 0; h < NS; h++)
		for (int k = 0; k < NS; k++)
			if (cl_file_sum(sub->out, "n", hosts[h], f->comm[k]) != (long long)want[k])
				return false;
	return true;
}

static void test_merge(void **state)
{
	const unsigned long calls[NS] = { 7001, 12002, 17003 };
	struct fixture *f = *state;
	struct cl *cl = &f->cl;
	struct cl_proc *by_host, *by_comm;
	uint64_t id_host, id_comm;
	struct cl_res r;

	by_host = cl_submit(cl, "merge-host", NULL, query_text(f, "host, comm"), &id_host);
	by_comm = cl_submit(cl, "merge-comm", NULL, query_text(f, "comm"), &id_comm);
	for (int k = 0; k < NS; k++) {
		expect_running(f->agents[k], id_host);
		expect_running(f->agents[k], id_comm);
	}
	run_workloads(f, calls);
	cl_cancel(cl, NULL, id_host);
	cl_cancel(cl, NULL, id_comm);
	cl_expect_end(by_host);
	cl_expect_end(by_comm);

	cl_res_load(&r, by_host->out);
	assert_true(r.ended);
	for (int h = 0; h < NS; h++)
		for (int k = 0; k < NS; k++)
			assert_int_equal(cl_res_sum(&r, "n", hosts[h], f->comm[k]), calls[k]);
	cl_res_rows_only(&r, hosts);
	cl_res_assert_hosts(&r, 0, hosts, f->agents, id_host);
	cl_res_free(&r);

	cl_res_load(&r, by_comm->out);
	assert_true(r.ended);
	for (int k = 0; k < NS; k++)
		assert_int_equal(cl_res_sum(&r, "n", NULL, f->comm[k]), NS * calls[k]);
	assert_int_equal(cl_res_sum(&r, "n", NULL, NULL), NS * (calls[0] + calls[1] + calls[2]));
	cl_res_free(&r);
	cl->passed = true;
}

/* Whether host is listed and alive in a fresh status. */
static bool host_alive(struct cl *cl, const char *host)
{
	struct wj *st = cl_status(cl, NULL);
	const struct wj *ag = cl_status_agent(st, host);
	bool alive = ag && cl_json_true(ag, "alive");

	wj_free(st);
	return alive;
}

/* From the agent's n-th (1-based) "connected to aggregator AGG as HOST; N partials merged
 * before, K to send": N (the aggregator had merged them, their Acks were lost) and K (it
 * had not: sent again).  -1 if there is no such line. */
static void reconnect_counts(struct cl_proc *agent, int n, long *merged, long *resent)
{
	char *log = cl_slurp(agent->err), *s = log;

	*merged = *resent = -1;
	for (int i = 0; s && i < n; i++)
		if ((s = strstr(s, "connected to aggregator")))
			s++;
	s = s ? strchr(s, ';') : NULL;
	if (s && sscanf(s, "; %ld partials merged before, %ld to send", merged, resent) != 2)
		*merged = *resent = -1;
	free(log);
}

static void test_partition(void **state)
{
	const unsigned long before[NS] = { 3001, 4002, 5003 }, during[NS] = { 6004, 7005, 8006 },
			    after[NS] = { 9007, 10008, 11009 };
	const int cut = NS - 1; /* its veth does not carry the aggregator's address */
	unsigned long want[NS];
	struct fixture *f = *state;
	struct cl *cl = &f->cl;
	struct cl_proc *sub, *agent = f->agents[cut];
	size_t at_cut, cut_missing = 0;
	uint64_t id, cut_at;
	struct cl_res r;
	long merged, spooled;

	sub = cl_submit(cl, "partition", NULL, query_text(f, "host, comm"), &id);
	for (int k = 0; k < NS; k++)
		expect_running(f->agents[k], id);
	run_workloads(f, before);
	assert_true(CL_WAIT(sums_are(f, sub, before), CL_WAIT_MS));

	/* cut: the aggregator expires the host and closes windows without it */
	at_cut = cl_file_windows(sub->out);
	cut_at = wr_now_ms();
	cl_net_link(&f->net, cut, false);
	assert_true(CL_WAIT(!host_alive(cl, hosts[cut]), CL_WAIT_MS));
	cl_expect_log(agent, "lost the aggregator", CL_WAIT_MS);

	/* calls made while it is cut off: the others deliver theirs at once, it cannot */
	run_workloads(f, during);
	for (int h = 0; h < NS; h++)
		for (int k = 0; k < NS && h != cut; k++)
			assert_true(CL_WAIT(cl_file_sum(sub->out, "n", hosts[h], f->comm[k]) ==
						    (long long)(before[k] + during[k]),
					    CL_WAIT_MS));
	for (int k = 0; k < NS; k++)
		assert_int_equal(cl_file_sum(sub->out, "n", hosts[cut], f->comm[k]), before[k]);
	assert_true(cl_file_missing(sub->out, hosts[cut], at_cut));
	assert_false(host_alive(cl, hosts[cut]));

	/* 30 s in all, then the link comes back and the agent by itself */
	while (wr_now_ms() < cut_at + CUT_MS)
		wr_sleep_ms(100);
	assert_int_equal(cl_file_count(agent->err, "connected to aggregator"), 1);
	cl_net_link(&f->net, cut, true);
	assert_true(CL_WAIT(cl_file_count(agent->err, "connected to aggregator") == 2, CL_WAIT_MS));
	reconnect_counts(agent, 2, &merged, &spooled);
	print_message("partition: %s had %ld partials to send after %d ms cut off\n", hosts[cut],
		      spooled, CUT_MS);
	assert_true(spooled >= 1);
	for (int k = 0; k < NS; k++)
		want[k] = before[k] + during[k];
	assert_true(CL_WAIT(sums_are(f, sub, want), CL_WAIT_MS));
	assert_true(host_alive(cl, hosts[cut]));

	run_workloads(f, after);
	cl_cancel(cl, NULL, id);
	cl_expect_end(sub);

	cl_res_load(&r, sub->out);
	assert_true(r.ended);
	for (int h = 0; h < NS; h++)
		for (int k = 0; k < NS; k++)
			assert_int_equal(cl_res_sum(&r, "n", hosts[h], f->comm[k]),
					 before[k] + during[k] + after[k]);
	cl_res_rows_only(&r, hosts);
	/* every window's answer holds all three hosts in the end (the last those that ran in
	 * it, none those that skipped it for waking late); a window was emitted again exactly
	 * when it was first emitted without some host that then sent it (those of the cut: the
	 * windows closed while the link was down, as many as its length makes) */
	cl_res_assert_hosts(&r, 0, hosts, f->agents, id);
	for (size_t w = 0; w < r.nwin; w++) {
		bool resent = false;

		for (int h = 0; h < NS; h++)
			resent |= cl_res_was_missing(&r, w, hosts[h]) &&
				  !cl_agent_skipped(f->agents[h], id, w);
		assert_int_equal(wj_int_of(r.final[w], "revision") > 0, resent);
		cut_missing += w >= at_cut && cl_res_was_missing(&r, w, hosts[cut]);
	}
	/* each window closed without the cut host after the cut got its partial from what the
	 * agent kept: merged before the reconnect (its Ack lost) or sent after it */
	print_message("partition: %zu windows closed without %s after the cut, all emitted again; "
		      "%ld + %ld partials kept\n",
		      cut_missing, hosts[cut], merged, spooled);
	assert_true(cut_missing >= 1);
	assert_true(cut_missing <= (size_t)(merged + spooled));
	assert_int_equal(r.late_dropped, 0);
	cl_res_free(&r);
	cl->passed = true;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_merge, test_setup, test_teardown),
		cmocka_unit_test_setup_teardown(test_partition, test_setup, test_teardown),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, group_setup, group_teardown));
}

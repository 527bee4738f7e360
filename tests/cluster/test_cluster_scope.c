// SPDX-License-Identifier: Apache-2.0
/*
 * Agents scoped to part of one machine (`weft agent --scope netns:PATH`): two "hosts" in two
 * network namespaces of one kernel (weft-ns-PID-1 and -2, a veth pair to the root namespace
 * each), each agent running inside its namespace and scoped to it, plus a third agent in the
 * root namespace that is not scoped, all under one aggregator in the root namespace.
 *
 *   scoped     the same workload binary (one comm) runs in both namespaces, N1 calls in the
 *              first and N2 in the second.  Grouped by host, the first agent counts exactly
 *              N1 and the second exactly N2 (without the scope each would count N1 + N2, as
 *              test_cluster_netns shows), and the unscoped agent exactly N1 + N2: the
 *              workloads ran while the query did, and unscoped behaviour is unchanged.
 *              `weft status` lists each agent's scope, and none for the unscoped one (JSON:
 *              null; text: "all" in the SCOPE column).
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

#define NS 2

static const char *const hosts[] = { "ns1", "ns2", "whole", NULL };

struct fixture {
	struct cl cl;
	struct cl_net net;
	struct cl_proc *agg, *agents[NS + 1];
	char scope[NS][PATH_MAX];
	char comm[32];
	bool failed; /* some test of the group failed: keep the logs */
};

static int group_setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char listen[64];

	if (!f)
		return -1;
	*state = f;
	cl_net_group_begin(&f->cl, &f->net, &f->failed);
	f->failed = true; /* until the setup is through */
	cl_init(&f->cl);
	cl_net_setup(&f->net, NS);
	cl_net_endpoint(&f->cl, &f->net, listen);
	for (int k = 0; k <= NS; k++)
		cl_keygen(&f->cl, "agent", hosts[k], true);
	f->agg = cl_aggregator(&f->cl, "agg", listen, NULL, NULL);
	cl_net_scoped_agents(&f->cl, &f->net, hosts, NS, listen, f->scope, f->agents);
	f->agents[NS] = cl_agent(&f->cl, hosts[NS], "agent-whole", NULL, listen, true);
	cl_expect_log(f->agents[NS], "tracing the whole machine", CL_WAIT_MS);
	snprintf(f->comm, sizeof(f->comm), "%s_s", f->cl.tag);
	cl_workload_make(&f->cl, f->comm);
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

static void test_scoped(void **state)
{
	const unsigned long calls[NS] = { 7001, 12002 };
	struct fixture *f = *state;
	struct cl *cl = &f->cl;
	struct cl_proc *sub;
	char q[256], needle[64];
	uint64_t id;
	struct cl_res r;
	struct wj *st;
	struct wr_proc text;

	cl->passed = false;
	st = cl_status(cl, NULL);
	for (int k = 0; k <= NS; k++) {
		const struct wj *ag = cl_status_agent(st, hosts[k]), *sc;

		assert_non_null(ag);
		sc = wj_get(ag, "scope");
		assert_non_null(sc);
		if (k < NS)
			assert_string_equal(wj_str(sc), f->scope[k]);
		else
			assert_int_equal(sc->kind, WJ_NULL);
	}
	wj_free(st);
	/* the text: a SCOPE column with each agent's scope, "all" for the unscoped one */
	assert_int_equal(cl_weft(&text, (char *)"status", (char *)"--to", cl->endpoint,
				 (char *)"--server-key", (char *)cl_pub(cl, cl->client_server),
				 (char *)"--key", (char *)cl_path(cl, "me.key")),
			 0);
	assert_non_null(strstr(text.out.p, "SCOPE"));
	for (int k = 0; k < NS; k++)
		assert_non_null(strstr(text.out.p, f->scope[k]));
	assert_non_null(strstr(text.out.p, "  all  "));
	wr_free(&text);

	snprintf(q, sizeof(q),
		 "from syscall:getppid where comm = '%s' group by host select count() as n "
		 "every 1s",
		 f->comm);
	sub = cl_submit(cl, "scoped", NULL, q, &id);
	snprintf(needle, sizeof(needle), "query %llu running", (unsigned long long)id);
	for (int k = 0; k <= NS; k++)
		cl_expect_log(f->agents[k], needle, CL_WAIT_MS);
	for (int k = 0; k < NS; k++)
		cl_workload(cl, f->comm, f->net.ns[k], calls[k], k + 1);
	assert_true(CL_WAIT(cl_file_sum(sub->out, "n", hosts[NS], NULL) ==
				    (long long)(calls[0] + calls[1]),
			    CL_WAIT_MS));
	cl_cancel(cl, NULL, id);
	cl_expect_end(sub);

	cl_res_load(&r, sub->out);
	assert_true(r.ended);
	for (int k = 0; k < NS; k++)
		assert_int_equal(cl_res_sum(&r, "n", hosts[k], NULL), calls[k]);
	assert_int_equal(cl_res_sum(&r, "n", hosts[NS], NULL), calls[0] + calls[1]);
	cl_res_free(&r);
	cl->passed = true;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scoped),
	};

	if (!wr_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, group_setup, group_teardown));
}

// SPDX-License-Identifier: Apache-2.0
/*
 * Kernel edges across hosts (docs/graphs.md, "Across hosts"): unmodified programs, each end
 * of a connection seen by another agent, the aggregator matching one agent's send with the
 * other's receive (aggregator/aggd_kx.c).
 *
 * redis-server runs in namespace 1 ("h-server"), `redis-benchmark -c 1 -n N -t set -P 1` in
 * namespace 2 ("h-client"), joined by a veth pair of their own; each namespace has its own
 * agent scoped to it (`weft agent --scope netns:PATH`), the aggregator is in the root
 * namespace, and
 *   from kernel:sockets, span(uprobe:/usr/bin/redis-server:processCommand)
 *   where comm = 'redis-server' or comm = 'redis-benchmark' graph every 1s
 * is submitted with `weft submit`.  Neither agent sees both ends: the client's agent makes
 * client tasks, the server's agent server tasks (with their processCommand children) rooting
 * traces of their own.  The aggregator's graph store must then hold, among the traces of
 * this redis-benchmark, exactly what test_run_kedges asserts of one host:
 *   - N traces of a SET: a client task (redis-benchmark, "request ADDR:6379", host h-client,
 *     the root), a message edge from it to a server task (redis-server, "serve :6379", host
 *     h-server) and one processCommand task, the server task's child;
 *   - 1 trace of the settings (CONFIG GET save, CONFIG GET appendonly in one write): the
 *     same with two processCommand children;
 * and no other trace may hold a task of this redis-server.
 * Then the same over IPv6 (test_redis_across_ipv6, a cluster of its own, where the IPv6 query
 * is the agents' second, after an IPv4 one was cancelled: the second query of an agent must
 * capture as the first did): the link's ends
 * also have fd00:201:X::101 and ::102 (nodad), redis-server binds the first, the client tasks
 * are named "request [fd00:201:X::101]:6379" and ship their IPv6 addresses as text, which the
 * aggregator matches as it does IPv4 numbers: N + 1 matches, the same traces.
 *
 * Needs root, ip(8), redis-server, redis-benchmark and redis-cli, and the sock tracepoints;
 * skipped otherwise.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "graph/store.h"
#include "tests/cluster/cluster_util.h"
#include "tests/kedges_expect.h"
#include "tests/skip.h"

#define NS 2
#define N_SET 100

static const char *const hosts[NS] = { "h-server", "h-client" };

struct fixture {
	struct cl cl;
	struct cl_net net;
	struct cl_proc *agg, *agents[NS];
	char scope[NS][PATH_MAX];
	char ip[2][32]; /* the server's and the client's end of their link */
	char ip6[2][48]; /* the same ends' IPv6 addresses */
	char gpath[PATH_MAX];
	bool failed;
};

static int group_setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char listen[64];

	if (!f)
		return -1;
	*state = f;
	cl_net_group_begin(&f->cl, &f->net, &f->failed);
	f->failed = true;
	cl_init(&f->cl);
	cl_net_setup(&f->net, NS);
	snprintf(f->ip[0], sizeof(f->ip[0]), "10.201.%d.101", f->net.x);
	snprintf(f->ip[1], sizeof(f->ip[1]), "10.201.%d.102", f->net.x);
	snprintf(f->ip6[0], sizeof(f->ip6[0]), "fd00:201:%d::101", f->net.x);
	snprintf(f->ip6[1], sizeof(f->ip6[1]), "fd00:201:%d::102", f->net.x);
	cl_net_join(&f->net, "x", 0, 1, f->ip[0], f->ip[1], f->ip6[0], f->ip6[1]);

	cl_net_endpoint(&f->cl, &f->net, listen);
	for (int k = 0; k < NS; k++)
		cl_keygen(&f->cl, "agent", hosts[k], true);
	snprintf(f->gpath, sizeof(f->gpath), "%s", cl_path(&f->cl, "graphs.sqlite"));
	f->agg = cl_aggregator(&f->cl, "agg", listen, NULL,
			       (char *const[]){ (char *)"--graph-store", f->gpath,
						(char *)"--lateness", (char *)"15s", NULL });
	cl_net_scoped_agents(&f->cl, &f->net, hosts, NS, listen, f->scope, f->agents);
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

/* redis-server in h-server bound to addr (f->ip[0] or f->ip6[0]), redis-benchmark from
 * h-client; the aggregator's counts are checked against what they were before. */
static void run_across(struct fixture *f, const char *addr, bool v6)
{
	struct cl *cl = &f->cl;
	struct cl_proc *sub, *redis, *bench;
	struct ke_redis x = { .client_host = hosts[1], .server_host = hosts[0] };
	char query[256], num[32], n[64];
	long by_npc[3];
	uint64_t qid;
	long long tasks0 = cl_graph_count(cl, "tasks"),
		  matched0 = cl_graph_count(cl, "kernel_matched");

	assert_int_equal(cl_graph_count(cl, "kernel_split") + cl_graph_count(cl, "kernel_bad") +
				 cl_graph_count(cl, "kernel_dropped"),
			 0);
	/* up when it answers (before the query runs: these pings are not traced) */
	redis = cl_redis(cl, "redis", f->net.ns[0], f->net.ns[1], addr);

	snprintf(query, sizeof(query),
		 "from kernel:sockets, span(uprobe:%s:processCommand) "
		 "where comm = 'redis-server' or comm = 'redis-benchmark' graph every 1s",
		 NU_REDIS_BIN);
	sub = cl_submit(cl, "submit", NULL, query, &qid);
	snprintf(n, sizeof(n), "query %llu running", (unsigned long long)qid);
	for (int k = 0; k < NS; k++)
		cl_expect_log(f->agents[k], n, CL_WAIT_MS);

	snprintf(num, sizeof(num), "%d", N_SET);
	bench = cl_spawn(cl, "bench", f->net.ns[1],
			 (char *const[]){ (char *)NU_BENCH_BIN, (char *)"-h", (char *)addr,
					  (char *)"-p", (char *)"6379", (char *)"-c", (char *)"1",
					  (char *)"-n", num, (char *)"-t", (char *)"set",
					  (char *)"-P", (char *)"1", (char *)"-q", NULL });
	if (cl_wait_exit(bench, 120000) != 0)
		fail_msg("redis-benchmark failed (%d): %s", bench->status, cl_slurp(bench->err));
	/* an exchange is complete a second after its last call, by the agent's clock: with
	 * redis-server stopped (no record comes on either host), every task (client, server,
	 * processCommand) is stored while the query still runs */
	assert_int_equal(kill(redis->pid, SIGSTOP), 0);
	if (!CL_WAIT(cl_graph_count(cl, "tasks") - tasks0 >= 3 * N_SET + 4, 60000))
		fail_msg("%lld tasks stored while the query ran, not %d",
			 cl_graph_count(cl, "tasks") - tasks0, 3 * N_SET + 4);
	assert_int_equal(kill(redis->pid, SIGCONT), 0);
	cl_cancel(cl, NULL, qid);
	cl_expect_end(sub);
	cl_stop(redis, SIGTERM, 10000);
	assert_int_equal(cl_graph_count(cl, "rejected"), 0);
	assert_int_equal(cl_graph_count(cl, "failed"), 0);
	/* the aggregator's matching, as `weft status` says it: one message edge a request
	 * (and one for the settings), each a send of h-client's agent matched with a receive
	 * of h-server's; nothing refused, forgotten or left unjoined */
	assert_int_equal(cl_graph_count(cl, "kernel_matched") - matched0, N_SET + 1);
	assert_int_equal(cl_graph_count(cl, "kernel_split"), 0);
	assert_int_equal(cl_graph_count(cl, "kernel_bad"), 0);
	assert_int_equal(cl_graph_count(cl, "kernel_dropped"), 0);

	x.bench = (long)bench->pid;
	x.redis = (long)redis->pid;
	snprintf(x.request, sizeof(x.request), v6 ? "request [%s]:6379" : "request %s:6379", addr);
	ke_redis_count(f->gpath, &x, by_npc);
	assert_int_equal(by_npc[1], N_SET); /* the SETs */
	assert_int_equal(by_npc[2], 1); /* CONFIG GET save, CONFIG GET appendonly */
}

static void test_redis_across(void **state)
{
	struct fixture *f = *state;

	run_across(f, f->ip[0], false);
	f->cl.passed = true;
}

/* IPv6, as the second query of its agents: a query that follows a cancelled one on the same
 * agents captures as the first did (run_across() counts from what was stored before it) */
static void test_redis_across_ipv6(void **state)
{
	struct fixture *f = *state;

	run_across(f, f->ip[0], false);
	run_across(f, f->ip6[0], true);
	f->cl.passed = true;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		/* each its own cluster: a second query of one cluster stored nothing here */
		cmocka_unit_test_setup_teardown(test_redis_across, group_setup, group_teardown),
		cmocka_unit_test_setup_teardown(test_redis_across_ipv6, group_setup,
						group_teardown),
	};

	if (!wr_ready() || !nu_redis_ready() || !ke_sock_ready())
		return WT_SKIP;
	return wt_status(cmocka_run_group_tests(tests, NULL, NULL));
}

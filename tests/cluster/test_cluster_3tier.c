// SPDX-License-Identifier: Apache-2.0
/*
 * The three-tier program (tests/workloads/wl_3tier.c: client -> frontend -> backend over
 * TCP, the traceparent in the payload, instrumented with include/weft/trace.h) across three
 * "hosts": each tier in a network namespace of its own, each namespace with its own agent
 * scoped to it (`weft agent --scope netns:PATH`, running inside it), one aggregator in the
 * root namespace, the graph query `from usdt:WL_3TIER:weft:* graph every 1s` submitted with
 * `weft submit`.
 *
 * The network: namespaces 1 (client), 2 (frontend) and 3 (backend) reach the aggregator over
 * their veths to the root namespace (tests/cluster/cluster_util.h); two more veth pairs join
 * 1 to 2 and 2 to 3 directly (10.201.X.100/30 and .104/30), so the requests go namespace to
 * namespace over real TCP without forwarding in the root namespace.
 *
 *   stitched   NREQ requests, request ERR_REQ asked to fail: the aggregator's graph store
 *              holds exactly NREQ traces, each of exactly the tasks, parents, events and
 *              edges wl_3tier makes (tests/graph_expect.h, ge_3tier_check_store()), with
 *              the trace ids the client printed, each task made by its tier's process (the
 *              pid the test started) and stored with its agent's host: every graph spans
 *              the three agents; only the failed request's tasks are errors; `weft
 *              status` counts exactly 4 NREQ tasks, 3 NREQ events and 2 NREQ edges stored,
 *              nothing refused, failed or lost.
 *
 * A tier's last batches may reach the aggregator after the query's last window (they are stored
 * and checked then); the test waits for `weft status` to count every task before it checks.
 *
 * The scope is what makes the hosts right: the three namespaces share one kernel, so an
 * unscoped agent would see every tier's sites (test_cluster_scope shows the difference).
 * Needs root; skipped otherwise.
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

#include "graph/store.h"
#include "tests/cluster/cluster_util.h"
#include "tests/graph_expect.h"
#include "tests/skip.h"

#define NS 3
#define NREQ 50
#define ERR_REQ 17

static const char *const hosts[NS] = { "h-client", "h-frontend", "h-backend" };

struct fixture {
	struct cl cl;
	struct cl_net net;
	struct cl_proc *agg, *agents[NS];
	char scope[NS][PATH_MAX];
	char ip[4][32]; /* 1-2 link: ns1 end, ns2 end; 2-3 link: ns2 end, ns3 end */
	char gpath[PATH_MAX];
	bool failed;
};

static struct fixture *live;

static void fixture_clean(struct fixture *f)
{
	if (f->cl.dir[0]) {
		f->cl.passed = !f->failed;
		cl_fini(&f->cl);
		f->cl.dir[0] = 0;
	}
	cl_net_teardown(&f->net); /* the extra veths go with their namespaces */
}

static void clean_at_exit(void)
{
	if (live)
		fixture_clean(live);
}

/* A veth pair wft<pid><tag>a/b joining namespaces a and b, with addresses ipa, ipb (/30). */
static void link_ns(struct fixture *f, const char *tag, int a, int b, const char *ipa,
		    const char *ipb)
{
	char va[16], vb[16];

	snprintf(va, sizeof(va), "wft%d%sa", (int)getpid(), tag);
	snprintf(vb, sizeof(vb), "wft%d%sb", (int)getpid(), tag);
	assert_int_equal(cl_ip("link add %s type veth peer name %s", va, vb), 0);
	assert_int_equal(cl_ip("link set %s netns %s", va, f->net.ns[a]), 0);
	assert_int_equal(cl_ip("link set %s netns %s", vb, f->net.ns[b]), 0);
	assert_int_equal(cl_ip("-n %s addr add %s/30 dev %s", f->net.ns[a], ipa, va), 0);
	assert_int_equal(cl_ip("-n %s addr add %s/30 dev %s", f->net.ns[b], ipb, vb), 0);
	assert_int_equal(cl_ip("-n %s link set %s up", f->net.ns[a], va), 0);
	assert_int_equal(cl_ip("-n %s link set %s up", f->net.ns[b], vb), 0);
}

static int group_setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char listen[64], log[32], pre[20];
	int x;

	if (!f)
		return -1;
	*state = f;
	if (!wr_ready())
		return 0; /* the test skips */
	live = f;
	atexit(clean_at_exit);
	f->failed = true;
	cl_init(&f->cl);
	cl_net_setup(&f->net, NS);
	/* the /24 cl_net_setup chose: 10.201.X.* */
	assert_int_equal(sscanf(f->net.root_ip[0], "10.201.%d.", &x), 1);
	snprintf(pre, sizeof(pre), "10.201.%d", x);
	snprintf(f->ip[0], sizeof(f->ip[0]), "%s.101", pre);
	snprintf(f->ip[1], sizeof(f->ip[1]), "%s.102", pre);
	snprintf(f->ip[2], sizeof(f->ip[2]), "%s.105", pre);
	snprintf(f->ip[3], sizeof(f->ip[3]), "%s.106", pre);
	link_ns(f, "x", 0, 1, f->ip[0], f->ip[1]);
	link_ns(f, "y", 1, 2, f->ip[2], f->ip[3]);

	snprintf(listen, sizeof(listen), "tcp://%s:%d", f->net.listen_ip, f->cl.port);
	snprintf(f->cl.endpoint, sizeof(f->cl.endpoint), "%s", listen);
	for (int k = 0; k < NS; k++)
		cl_keygen(&f->cl, "agent", hosts[k], true);
	snprintf(f->gpath, sizeof(f->gpath), "%s", cl_path(&f->cl, "graphs.sqlite"));
	f->agg = cl_aggregator(&f->cl, "agg", listen, NULL,
			       (char *const[]){ (char *)"--graph-store", f->gpath,
						(char *)"--lateness", (char *)"15s", NULL });
	for (int k = 0; k < NS; k++) {
		snprintf(f->scope[k], sizeof(f->scope[k]), "netns:/run/netns/%s", f->net.ns[k]);
		snprintf(log, sizeof(log), "agent-%s", hosts[k]);
		f->agents[k] =
			cl_agent_with(&f->cl, hosts[k], log, f->net.ns[k], listen, true,
				      (char *const[]){ (char *)"--scope", f->scope[k], NULL });
		cl_expect_log(f->agents[k], "tracing only netns:", CL_WAIT_MS);
	}
	f->failed = false;
	return 0;
}

static int group_teardown(void **state)
{
	struct fixture *f = *state;

	f->failed |= !f->cl.passed;
	fixture_clean(f);
	live = NULL;
	free(f);
	return 0;
}

/* Starts `wl_3tier MODE ARGS` in namespace k; waits for it to listen (servers): its port. */
static int tier_start(struct fixture *f, int k, const char *name, char *const args[],
		      struct cl_proc **out)
{
	char *argv[12];
	struct cl_proc *p;
	int n = 0, port = -1;

	argv[n++] = (char *)wr_workload("wl_3tier");
	for (int i = 0; args[i] && n < 11; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	p = cl_spawn(&f->cl, name, f->net.ns[k], argv);
	*out = p;
	if (strcmp(args[0], "client") == 0)
		return 0;
	if (!CL_WAIT(cl_file_has(p->out, " listening on ") || !cl_alive(p), CL_WAIT_MS)) {
		fail_msg("%s does not listen", name);
	} else {
		char *o = cl_slurp(p->out), *s = o ? strstr(o, " listening on ") : NULL;
		char *colon = s ? strchr(s + 14, ' ') : NULL;

		while (colon && colon > s && *colon != ':')
			colon--;
		if (colon && *colon == ':')
			port = atoi(colon + 1);
		free(o);
	}
	if (port <= 0)
		fail_msg("%s: no port in its output: %s", name, cl_slurp(p->out));
	return port;
}

/* A count of the graph store's object in `weft status --format json`. */
static long long graph_count(struct cl *cl, const char *name)
{
	struct wj *st = cl_status(cl, NULL);
	const struct wj *g = wj_get(st, "graph");
	long long v;

	assert_non_null(g);
	v = wj_int_of(g, name);
	wj_free(st);
	return v;
}

static long long graph_windows_sum(const char *path, const char *name, long long *incomplete)
{
	char *out = cl_slurp(path), *line, *save = NULL;
	long long sum = 0;

	assert_non_null(out);
	*incomplete = -1;
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct wj *v;

		if (strncmp(line, "{\"type\":\"graph_window\"", 22) != 0)
			continue;
		v = wj_parse(line, strlen(line));
		assert_non_null(v);
		sum += wj_int_of(v, name);
		if (cl_json_true(v, "last"))
			*incomplete = wj_int_of(v, "incomplete");
		wj_free(v);
	}
	free(out);
	return sum;
}

static void test_stitched(void **state)
{
	struct fixture *f = *state;
	struct cl *cl = &f->cl;
	struct cl_proc *sub, *be, *fe, *cli;
	struct graph_id128 ids[NREQ];
	struct graph_store *s;
	char query[PATH_MAX + 64], addr[64], cnt[16], nreq[16], err[16], why[1024] = "", n[64];
	int pb, pf;
	long long inc;
	uint64_t qid;

	if (!cl->dir[0])
		skip();
	snprintf(query, sizeof(query), "from usdt:%s:weft:* graph every 1s",
		 wr_workload("wl_3tier"));
	sub = cl_submit(cl, "submit", NULL, query, &qid);
	snprintf(n, sizeof(n), "query %llu running", (unsigned long long)qid);
	for (int k = 0; k < NS; k++)
		cl_expect_log(f->agents[k], n, CL_WAIT_MS);

	snprintf(cnt, sizeof(cnt), "%d", NREQ);
	snprintf(addr, sizeof(addr), "%s:0", f->ip[3]);
	pb = tier_start(f, 2, "backend", (char *const[]){ (char *)"backend", addr, cnt, NULL },
			&be);
	{
		char baddr[64];

		snprintf(baddr, sizeof(baddr), "%s:%d", f->ip[3], pb);
		snprintf(addr, sizeof(addr), "%s:0", f->ip[1]);
		pf = tier_start(f, 1, "frontend",
				(char *const[]){ (char *)"frontend", addr, baddr, cnt, NULL }, &fe);
	}
	snprintf(addr, sizeof(addr), "%s:%d", f->ip[1], pf);
	snprintf(nreq, sizeof(nreq), "%d", NREQ);
	snprintf(err, sizeof(err), "%d", ERR_REQ);
	tier_start(f, 0, "client", (char *const[]){ (char *)"client", addr, nreq, err, NULL },
		   &cli);
	if (cl_wait_exit(cli, 120000) != 0)
		fail_msg("the client failed (%d): %s", cli->status, cl_slurp(cli->err));
	assert_int_equal(cl_wait_exit(fe, 30000), 0);
	assert_int_equal(cl_wait_exit(be, 30000), 0);
	{
		char *o = cl_slurp(cli->out);

		assert_non_null(o);
		if (ge_3tier_client_traces(o, ids, NREQ) != 0)
			fail_msg("the client's trace ids: %s", o);
		free(o);
	}

	cl_cancel(cl, NULL, qid);
	cl_expect_end(sub);
	/* a tier's last batch may come after the last window (a batch after the end is stored
	 * and checked alone): wait for every task, then for nothing more to come */
	if (!CL_WAIT(graph_count(cl, "tasks") >= 4 * NREQ, 60000))
		fail_msg("%lld tasks stored, not %d", graph_count(cl, "tasks"), 4 * NREQ);
	assert_int_equal(graph_count(cl, "tasks"), 4 * NREQ);
	assert_int_equal(graph_count(cl, "events"), 3 * NREQ);
	assert_int_equal(graph_count(cl, "edges"), 2 * NREQ);
	assert_int_equal(graph_count(cl, "rejected"), 0);
	assert_int_equal(graph_count(cl, "failed"), 0);
	assert_int_equal(graph_count(cl, "lost"), 0);
	s = graph_store_open(f->gpath, why, sizeof(why));
	if (!s)
		fail_msg("%s", why);
	{
		struct ge_3tier x = {
			.n = NREQ,
			.error_req = ERR_REQ,
			.traces = ids,
			.source = GRAPH_SRC_WEFT,
			.pid = { cli->pid, fe->pid, be->pid },
			.host = { hosts[0], hosts[1], hosts[2] },
			.parent_edges = false,
			.one_clock = true,
		};

		if (ge_3tier_check_store(s, &x, why, sizeof(why)) != 0)
			fail_msg("%s", why);
	}
	graph_store_close(s);
	/* what the windows said, and what the late batches added (stored after the end) */
	assert_true(graph_windows_sum(sub->out, "tasks", &inc) <= 4 * NREQ);
	cl->passed = true;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stitched),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

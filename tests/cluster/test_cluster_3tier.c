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
 *              nothing refused, failed or lost; and the aggregator forwarded them
 *              (--graph-forward) to tests/otlp_receiver.py: exactly 4 NREQ spans, each
 *              once, 4 per request with one root, 3 NREQ span events, 2 NREQ links.
 *
 *   agent killed  the frontend's agent SIGKILLed mid-capture: only its own pieces are
 *              lost, exactly those it held unshipped and those made after its death, the
 *              rest of each graph is kept and those traces are marked incomplete; the other
 *              agents' pieces all arrive (test_agent_killed says how).
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
	char url[64]; /* the OTLP receiver the aggregator forwards to */
	bool failed;
};

static int group_setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char listen[64];

	if (!f)
		return -1;
	*state = f;
	if (!wr_ready())
		return 0; /* the test skips */
	cl_net_group_begin(&f->cl, &f->net, &f->failed);
	f->failed = true;
	cl_init(&f->cl);
	cl_net_setup(&f->net, NS);
	/* in the /24 cl_net_setup chose: 10.201.X.* */
	snprintf(f->ip[0], sizeof(f->ip[0]), "10.201.%d.101", f->net.x);
	snprintf(f->ip[1], sizeof(f->ip[1]), "10.201.%d.102", f->net.x);
	snprintf(f->ip[2], sizeof(f->ip[2]), "10.201.%d.105", f->net.x);
	snprintf(f->ip[3], sizeof(f->ip[3]), "10.201.%d.106", f->net.x);
	cl_net_join(&f->net, "x", 0, 1, f->ip[0], f->ip[1], NULL, NULL);
	cl_net_join(&f->net, "y", 1, 2, f->ip[2], f->ip[3], NULL, NULL);

	cl_net_endpoint(&f->cl, &f->net, listen);
	for (int k = 0; k < NS; k++)
		cl_keygen(&f->cl, "agent", hosts[k], true);
	snprintf(f->gpath, sizeof(f->gpath), "%s", cl_path(&f->cl, "graphs.sqlite"));
	/* the stitched graphs are forwarded to an OTLP receiver too (aggd_gfwd.c) */
	{
		char pf[PATH_MAX], rec[PATH_MAX], rlog[PATH_MAX], rcv[PATH_MAX];
		const char *src = getenv("WEFT_SOURCE_DIR");
		struct cl_proc *r;
		char *pt = NULL;

		snprintf(pf, sizeof(pf), "%s/rcv.port", f->cl.dir);
		snprintf(rec, sizeof(rec), "%s/spans", f->cl.dir);
		snprintf(rlog, sizeof(rlog), "%s/requests", f->cl.dir);
		snprintf(rcv, sizeof(rcv), "%s/tests/otlp_receiver.py", src ? src : ".");
		r = cl_spawn(&f->cl, "rcv", NULL,
			     (char *const[]){ (char *)"python3", rcv, (char *)"--port-file", pf,
					      (char *)"--record", rec, (char *)"--log", rlog,
					      NULL });
		if (!CL_WAIT(access(pf, F_OK) == 0 || !cl_alive(r), CL_WAIT_MS) ||
		    !(pt = cl_slurp(pf)))
			fail_msg("the OTLP receiver did not start: %s", cl_slurp(r->err));
		snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%d", atoi(pt));
		free(pt);
	}
	f->agg = cl_aggregator(
		&f->cl, "agg", listen, NULL,
		(char *const[]){ (char *)"--graph-store", f->gpath, (char *)"--lateness",
				 (char *)"15s", (char *)"--graph-forward", f->url,
				 (char *)"--graph-forward-linger", (char *)"500ms", NULL });
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
	if (!CL_WAIT(cl_graph_count(cl, "tasks") >= 4 * NREQ, 60000))
		fail_msg("%lld tasks stored, not %d", cl_graph_count(cl, "tasks"), 4 * NREQ);
	assert_int_equal(cl_graph_count(cl, "tasks"), 4 * NREQ);
	assert_int_equal(cl_graph_count(cl, "events"), 3 * NREQ);
	assert_int_equal(cl_graph_count(cl, "edges"), 2 * NREQ);
	assert_int_equal(cl_graph_count(cl, "rejected"), 0);
	assert_int_equal(cl_graph_count(cl, "failed"), 0);
	assert_int_equal(cl_graph_count(cl, "lost"), 0);
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
	/* forwarded: every span once, each trace of the client's 4 spans (one root), 3 NREQ
	 * events and 2 NREQ links in all */
	{
		char spans[PATH_MAX], *o, *line, *save = NULL;
		long nl = 0, roots = 0, evs = 0, links = 0, per[NREQ] = { 0 };

		snprintf(spans, sizeof(spans), "%s/spans", cl->dir);
		if (!CL_WAIT(cl_fwd_count(cl, "sent") >= 4 * NREQ &&
				     cl_fwd_count(cl, "pending") == 0,
			     60000))
			fail_msg("%lld spans forwarded, not %d", cl_fwd_count(cl, "sent"),
				 4 * NREQ);
		assert_int_equal(cl_fwd_count(cl, "sent"), 4 * NREQ);
		assert_int_equal(cl_fwd_count(cl, "dropped"), 0);
		assert_int_equal(cl_fwd_count(cl, "repeated"), 0);
		assert_int_equal(cl_fwd_count(cl, "late"), 0);
		o = cl_slurp(spans);
		assert_non_null(o);
		for (line = strtok_r(o, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			char trace[64], span[32], parent[32], again[128];
			struct graph_id128 id;
			int ne, nk;
			size_t r;

			assert_int_equal(
				sscanf(line, "%63s %31s %31s %d %d", trace, span, parent, &ne, &nk),
				5);
			assert_int_equal(graph_id128_parse_hex(trace, strlen(trace), &id), 0);
			for (r = 0; r < NREQ && !graph_id128_eq(ids[r], id); r++)
				;
			if (r == NREQ)
				fail_msg("a span of a trace the client never made: %s", line);
			per[r]++;
			snprintf(again, sizeof(again), "%s %s ", trace, span);
			if (strstr(line + strlen(again), again))
				fail_msg("span recorded twice: %s", line);
			roots += strcmp(parent, "-") == 0;
			evs += ne;
			links += nk;
			nl++;
		}
		free(o);
		assert_int_equal(nl, 4 * NREQ);
		for (size_t r = 0; r < NREQ; r++)
			assert_int_equal(per[r], 4);
		assert_int_equal(roots, NREQ);
		assert_int_equal(evs, 3 * NREQ);
		assert_int_equal(links, 2 * NREQ);
	}
	/* what the windows said, and what the late batches added (stored after the end) */
	assert_true(graph_windows_sum(sub->out, "tasks", &inc) <= 4 * NREQ);
	cl->passed = true;
}

/* Traces of the store with a task of `service` (as ge_3tier_check_store() lists them). */
static long traces_with(const char *gpath, const char *service)
{
	struct graph_filter fl = { .service = service, .limit = 100000 };
	struct graph_trace_row *rows = NULL;
	struct graph_store *s;
	char why[512];
	ssize_t n;

	s = graph_store_open(gpath, why, sizeof(why));
	if (!s)
		return -1;
	n = graph_store_list(s, &fl, &rows, why, sizeof(why));
	free(rows);
	graph_store_close(s);
	return (long)n;
}

static long lines_with(const char *path, const char *needle)
{
	char *o = cl_slurp(path), *p = o;
	long n = 0;

	while (p && (p = strstr(p, needle))) {
		n++;
		p++;
	}
	free(o);
	return n;
}

/*
 * Request r of a run whose frontend agent died: its trace holds exactly the client's and
 * the backend's pieces (C with "reply", B with "query", the message edge F2 -> B) and is
 * marked incomplete for a missing parent and a missing edge end; returns false when the
 * trace is whole instead (checked whole, exactly).
 */
static bool check_cut(struct graph_store *s, struct graph_id128 id, const struct ge_3tier *x,
		      bool failing)
{
	const struct graph_task *c = NULL, *b = NULL;
	char hex[33], why[1024] = "";
	uint32_t marks = 0;
	struct graph g;
	bool failed = false;

	graph_id128_hex(id, hex);
	graph_init(&g);
	if (graph_store_load(s, hex, &g, why, sizeof(why)) != 0)
		fail_msg("trace %s: %s", hex, why);
	if (g.ntasks == 4) {
		if (ge_3tier_check_trace(&g, x, &failed, why, sizeof(why)) != 0)
			fail_msg("%s", why);
		assert_true(failed == failing);
		assert_int_equal(graph_store_mark_get(s, hex, &marks, why, sizeof(why)), 0);
		assert_int_equal(marks, 0);
		graph_free(&g);
		return false;
	}
	if (g.ntasks != 2)
		fail_msg("trace %s: %zu tasks, neither the whole 4 nor the cut 2", hex, g.ntasks);
	for (size_t i = 0; i < 2; i++) {
		const struct graph_task *t = &g.tasks[i];

		if (!strcmp(t->service, "client") && !strcmp(t->name, "request"))
			c = t;
		else if (!strcmp(t->service, "backend") && !strcmp(t->name, "handle"))
			b = t;
	}
	if (!c || !b)
		fail_msg("trace %s: its 2 tasks are not the client's and the backend's", hex);
	assert_int_equal(c->parent, 0);
	assert_true(b->parent != 0 && b->parent != c->id);
	assert_string_equal(c->host, x->host[GE_CLIENT]);
	assert_string_equal(b->host, x->host[GE_BACKEND]);
	assert_int_equal(c->pid, x->pid[GE_CLIENT]);
	assert_int_equal(b->pid, x->pid[GE_BACKEND]);
	assert_int_equal(c->status, failing ? GRAPH_STATUS_ERROR : GRAPH_STATUS_OK);
	assert_int_equal(g.nevents, 2);
	for (size_t i = 0; i < 2; i++) {
		const struct graph_event *e = &g.events[i];

		assert_true((e->task == c->id && !strcmp(e->name, "reply")) ||
			    (e->task == b->id && !strcmp(e->name, "query")));
	}
	assert_true(g.events[0].task != g.events[1].task);
	assert_int_equal(g.nedges, 1);
	assert_int_equal(g.edges[0].kind, GRAPH_EDGE_MESSAGE);
	assert_int_equal(g.edges[0].from_task, b->parent);
	assert_int_equal(g.edges[0].to_task, b->id);
	assert_int_equal(graph_store_mark_get(s, hex, &marks, why, sizeof(why)), 0);
	assert_int_equal(marks, GRAPH_INC_PARENT | GRAPH_INC_EDGE);
	graph_free(&g);
	return true;
}

/*
 * The frontend's agent SIGKILLed mid-capture.  N1 requests first, all shipped (the store
 * holds their 4 N1 tasks); then a client of N2 requests, and the frontend's agent killed
 * once KILL_AT of them were answered.  The frontend process goes on serving: only its
 * agent is gone.  Then:
 *   - the client's and the backend's agents shipped everything: every one of the N1 + N2
 *     traces holds its client task (with "reply") and its backend task (with "query" and
 *     the message edge F2 -> B);
 *   - the first N1 traces, and the second run's requests before some K, are whole, exact
 *     and unmarked; from K on, every trace lost exactly the frontend's piece (F1, F2, the
 *     "parsed" event, the message edge C -> F1: 4 elements each) and is marked incomplete
 *     (parent, edge), and K <= KILL_AT + 1 (nothing made after the kill is kept, so what is
 *     lost is what the dead agent held unshipped plus what happened after);
 *   - so the loss is known exactly, 4 (N2 - K) elements, and the store's marks count
 *     exactly the N2 - K traces that lost them.
 */
#define N1 30
#define N2 1500
#define KILL_AT 300

static void test_agent_killed(void **state)
{
	struct fixture *f = *state;
	struct cl *cl = &f->cl;
	struct cl_proc *sub, *be, *fe, *c1, *c2;
	struct graph_id128 ids1[N1], *ids2 = calloc(N2, sizeof(*ids2));
	struct graph_store *s;
	char query[PATH_MAX + 64], addr[64], baddr[64], cnt[16], nreq[16], why[1024] = "", n[64];
	long printed, k = -1, cut = 0;
	int pb, pf;
	uint64_t qid;

	if (!cl->dir[0])
		skip();
	assert_non_null(ids2);
	snprintf(query, sizeof(query), "from usdt:%s:weft:* graph every 1s",
		 wr_workload("wl_3tier"));
	sub = cl_submit(cl, "submit-kill", NULL, query, &qid);
	snprintf(n, sizeof(n), "query %llu running", (unsigned long long)qid);
	for (int i = 0; i < NS; i++)
		cl_expect_log(f->agents[i], n, CL_WAIT_MS);

	snprintf(cnt, sizeof(cnt), "%d", N1 + N2);
	snprintf(addr, sizeof(addr), "%s:0", f->ip[3]);
	pb = tier_start(f, 2, "backend2", (char *const[]){ (char *)"backend", addr, cnt, NULL },
			&be);
	snprintf(baddr, sizeof(baddr), "%s:%d", f->ip[3], pb);
	snprintf(addr, sizeof(addr), "%s:0", f->ip[1]);
	pf = tier_start(f, 1, "frontend2",
			(char *const[]){ (char *)"frontend", addr, baddr, cnt, NULL }, &fe);
	snprintf(addr, sizeof(addr), "%s:%d", f->ip[1], pf);

	/* N1 requests, every piece stored */
	snprintf(nreq, sizeof(nreq), "%d", N1);
	tier_start(f, 0, "client-a", (char *const[]){ (char *)"client", addr, nreq, NULL }, &c1);
	if (cl_wait_exit(c1, 120000) != 0)
		fail_msg("the first client failed: %s", cl_slurp(c1->err));
	{
		char *o = cl_slurp(c1->out);

		assert_int_equal(ge_3tier_client_traces(o, ids1, N1), 0);
		free(o);
	}
	if (!CL_WAIT(traces_with(f->gpath, "frontend") == NREQ + N1, 60000))
		fail_msg("the first %d requests were not all stored", N1);

	/* N2 more; the frontend's agent killed mid-run */
	snprintf(nreq, sizeof(nreq), "%d", N2);
	tier_start(f, 0, "client-b", (char *const[]){ (char *)"client", addr, nreq, NULL }, &c2);
	if (!CL_WAIT(lines_with(c2->out, "wl_3tier: request ") >= KILL_AT || !cl_alive(c2), 120000))
		fail_msg("the second client does not get on");
	kill(f->agents[1]->pid, SIGKILL);
	printed = lines_with(c2->out, "wl_3tier: request ");
	assert_true(cl_wait_exit(f->agents[1], 10000) == 128 + SIGKILL);
	assert_true(printed < N2); /* mid-run */
	if (cl_wait_exit(c2, 120000) != 0)
		fail_msg("the second client failed: %s", cl_slurp(c2->err));
	{
		char *o = cl_slurp(c2->out);

		assert_int_equal(ge_3tier_client_traces(o, ids2, N2), 0);
		free(o);
	}
	assert_int_equal(cl_wait_exit(fe, 30000), 0);
	assert_int_equal(cl_wait_exit(be, 30000), 0);

	/* the other agents' pieces all arrive; the query ends and its traces are checked */
	if (!CL_WAIT(traces_with(f->gpath, "client") == NREQ + N1 + N2 &&
			     traces_with(f->gpath, "backend") == NREQ + N1 + N2,
		     60000))
		fail_msg("the client's and backend's pieces did not all arrive: %ld, %ld",
			 traces_with(f->gpath, "client"), traces_with(f->gpath, "backend"));
	cl_cancel(cl, NULL, qid);
	cl_expect_end(sub);

	s = graph_store_open(f->gpath, why, sizeof(why));
	if (!s)
		fail_msg("%s", why);
	{
		struct ge_3tier x = {
			.n = N1,
			.error_req = -1,
			.source = GRAPH_SRC_WEFT,
			.pid = { c1->pid, fe->pid, be->pid },
			.host = { hosts[0], hosts[1], hosts[2] },
			.one_clock = true,
		};

		for (long r = 0; r < N1; r++)
			assert_false(check_cut(s, ids1[r], &x, false));
		x.pid[GE_CLIENT] = c2->pid;
		for (long r = 0; r < N2; r++) {
			bool c = check_cut(s, ids2[r], &x, false);

			if (c && k < 0)
				k = r;
			if (k >= 0 && !c)
				fail_msg("request %ld kept whole after request %ld was cut", r, k);
			cut += c;
		}
	}
	graph_store_close(s);
	print_message("the frontend's agent killed after %ld answers: requests %ld.. cut "
		      "(%ld traces, %ld elements lost)\n",
		      printed, k, cut, 4 * cut);
	assert_true(k >= 0 && k <= printed + 1);
	assert_int_equal(cut, N2 - k);
	free(ids2);
	cl->passed = true;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stitched),
		cmocka_unit_test(test_agent_killed), /* last: it kills an agent of the fixture */
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}

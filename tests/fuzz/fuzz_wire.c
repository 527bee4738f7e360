// SPDX-License-Identifier: Apache-2.0
/*
 * libFuzzer target: wire_decode() on arbitrary bytes (every envelope an agent, client or
 * aggregator receives), then, for a Partial or Result, agent_table_add_groups() of its groups
 * into a table of one fixed plan (every key and aggregate kind), as the aggregator merges
 * them.  What must hold besides not crashing:
 *   - an accepted envelope passes wire_validate(), re-encodes, and decodes again to the
 *     same bytes;
 *   - groups are taken all or not at all: refused, the table stays empty; taken, the
 *     table's own wire form goes into a second table and comes out equal.
 * Seeds: tests/fuzz/corpus/wire/, real envelopes of every kind and partials of this plan,
 * written by this target itself: WEFT_WIRE_SEEDS=DIR fuzz_wire writes them into DIR and exits.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "kernel/weft_agg.bpf.h"
#include "agent/result.h"
#include "agent/wire.h"
#include "agent/wire_graph.h"
#include "compiler/compiler.h"
#include "compiler/plan.h"

static void check_graph(const Weft__GraphBatch *b);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static const char fuzz_query[] =
	"from profile:99hz group by comm, cpu select count() as calls, sum(cpu) as s, "
	"min(cpu) as lo, max(cpu) as hi, avg(cpu) as mean, stddev(cpu) as sd, hist(cpu) as h, "
	"lhist(cpu, 0, 100, 10) as lh, p50(cpu) as med, p99(cpu) as p99, distinct(cpu) as d";

static const struct plan *fuzz_plan(void)
{
	static struct compile_result res;
	static struct diag_list dl;
	static bool done;
	struct compile_opts o = { .sz = sizeof(o) };

	if (!done) {
		diag_list_init(&dl, fuzz_query, "query");
		if (compiler_run(fuzz_query, &o, PASS_PLAN, &dl, &res) != 0) {
			diag_print(&dl, stderr, false);
			if (geteuid() != 0) {
				/* the exit status ctest counts as skipped (tests/skip.h) */
				fprintf(stderr, "skipped: needs root (the plan's probe is resolved "
						"through perf events)\n");
				exit(77);
			}
			abort();
		}
		done = true;
	}
	return res.plan;
}

static void check_groups(Weft__Group *const *groups, size_t n)
{
	const struct plan *p = fuzz_plan();
	struct agent_table *t = agent_table_new(p, 1024), *u;
	Weft__Group **again;
	size_t m;
	int rc;

	if (!t)
		abort();
	rc = agent_table_add_groups(t, groups, n);
	if (rc != 0) {
		if (agent_table_groups(t) != 0 || agent_table_overflow(t) != 0)
			abort(); /* a refusal must leave nothing behind */
		agent_table_free(t);
		return;
	}
	u = agent_table_new(p, 1024);
	if (!u || agent_table_to_groups(t, &again, &m) != 0)
		abort();
	if (agent_table_add_groups(u, again, m) != 0)
		abort(); /* what we produce we must accept */
	if (!agent_table_equal(t, u))
		abort();
	agent_groups_free(again, m);
	agent_table_free(u);
	agent_table_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[256];
	Weft__Envelope *e = wire_decode(data, size, why, sizeof(why)), *f;
	void *a, *b;
	size_t la, lb;

	if (!e)
		return 0;
	if (wire_validate(e, why, sizeof(why)) != 0)
		abort();
	if (wire_encode(e, &a, &la) != 0)
		abort();
	f = wire_decode(a, la, why, sizeof(why));
	if (!f || wire_encode(f, &b, &lb) != 0)
		abort();
	if (la != lb || memcmp(a, b, la) != 0)
		abort();
	if (e->body_case == WEFT__ENVELOPE__BODY_PARTIAL)
		check_groups(e->partial->groups, e->partial->n_groups);
	else if (e->body_case == WEFT__ENVELOPE__BODY_RESULT)
		check_groups(e->result->groups, e->result->n_groups);
	else if (e->body_case == WEFT__ENVELOPE__BODY_GRAPH_BATCH)
		check_graph(e->graph_batch);
	free(a);
	free(b);
	wire_free(f);
	wire_free(e);
	return 0;
}

/* A checked GraphBatch becomes a struct graph of exactly its elements; packing that graph
 * again passes the sender's checks (what one side accepts, the other can send). */
static void check_graph(const Weft__GraphBatch *b)
{
	struct wire_graph_meta m = { .query_id = b->query_id,
				     .window = b->window,
				     .host = b->host };
	struct graph g;
	char why[256];
	size_t nopen = 0;
	void *buf;
	size_t len;

	graph_init(&g);
	if (wire_graph_unpack(b, b->host, &g, &nopen, why, sizeof(why)) != 0)
		abort();
	if (g.ntasks != b->n_tasks || g.nevents != b->n_events || g.nedges != b->n_edges ||
	    nopen > g.ntasks)
		abort();
	if (wire_graph_pack(&m, &g, &buf, &len, why, sizeof(why)) != 0)
		abort();
	free(buf);
	graph_free(&g);
}

/* ---- the seed corpus ---- */

static void seed_write(const char *dir, const char *name, Weft__Envelope *e)
{
	char path[512];
	void *buf;
	size_t len;
	FILE *f;

	e->version = WIRE_VERSION;
	e->seq = 1;
	if (wire_encode(e, &buf, &len) != 0)
		abort();
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0)
		abort();
	free(buf);
}

/* A table of the fuzz plan with ngroups groups, built from kernel values as the agent does. */
static struct agent_table *seed_table(int ngroups)
{
	const struct plan *p = fuzz_plan();
	struct agent_table *t = agent_table_new(p, 0);
	size_t vwords = (p->value_size + 7) / 8;
	uint8_t *key = calloc(1, p->key_size);
	uint64_t *val = calloc(vwords, 8);

	if (!t || !key || !val)
		abort();
	for (int g = 0; g < ngroups; g++) {
		const void *cpu_vals[1] = { val };
		int64_t cpu = g;
		char comm[16];

		memset(key, 0, p->key_size);
		memset(val, 0, vwords * 8);
		snprintf(comm, sizeof(comm), "comm%d", g);
		memcpy(key + p->keys[0].offset, comm, strlen(comm));
		memcpy(key + p->keys[1].offset, &cpu, 8);
		for (int x = 0; x < 5 + g; x++)
			for (int a = 0; a < p->naggs; a++) {
				const struct plan_agg *ag = &p->aggs[a];
				void *v = (uint8_t *)val + ag->offset;
				int64_t y = x * 37 + g;
				bool dup = false;

				for (int b = 0; b < a; b++)
					dup |= p->aggs[b].offset == ag->offset;
				if (dup)
					continue;
				switch (ag->spec.kind) {
				case AGG_COUNT:
					weft_aggval_count_add(v, y);
					break;
				case AGG_SUM:
					weft_aggval_sum_add(v, y);
					break;
				case AGG_MIN:
					weft_aggval_min_add(v, y);
					break;
				case AGG_MAX:
					weft_aggval_max_add(v, y);
					break;
				case AGG_AVG:
					weft_aggval_avg_add(v, y);
					break;
				case AGG_STDDEV:
					weft_aggval_stddev_add(v, y);
					break;
				case AGG_HIST:
					weft_aggval_hist_add(v, y);
					break;
				case AGG_LHIST:
					weft_aggval_lhist_add(v, y, ag->spec.lo, ag->spec.hi,
							      ag->spec.step);
					break;
				case AGG_QUANTILE:
					weft_aggval_quantile_add(v, y);
					break;
				case AGG_DISTINCT:
					weft_aggval_distinct_add(v, y);
					break;
				default:
					abort();
				}
			}
		if (agent_table_add_kernel(t, key, cpu_vals, 1, NULL) != 0)
			abort();
	}
	free(key);
	free(val);
	return t;
}

static void seeds_write(const char *dir)
{
	Weft__Envelope e = WEFT__ENVELOPE__INIT;
	Weft__Hello h = WEFT__HELLO__INIT;
	Weft__Welcome w = WEFT__WELCOME__INIT;
	Weft__Heartbeat hb = WEFT__HEARTBEAT__INIT;
	Weft__Submit sub = WEFT__SUBMIT__INIT;
	Weft__QueryStart qs = WEFT__QUERY_START__INIT;
	Weft__QueryStop stop = WEFT__QUERY_STOP__INIT;
	Weft__Partial pm = WEFT__PARTIAL__INIT;
	Weft__Ack ack = WEFT__ACK__INIT;
	Weft__Result res = WEFT__RESULT__INIT;
	Weft__StatusRequest sr = WEFT__STATUS_REQUEST__INIT;
	Weft__StatusReply rep = WEFT__STATUS_REPLY__INIT;
	Weft__AgentStatus as = WEFT__AGENT_STATUS__INIT, *asp = &as;
	Weft__QueryStatus qst = WEFT__QUERY_STATUS__INIT, *qstp = &qst;
	Weft__Subscribe subs = WEFT__SUBSCRIBE__INIT;
	Weft__QueryError qe = WEFT__QUERY_ERROR__INIT;
	Weft__Error err = WEFT__ERROR__INIT;
	char *features[] = { "tracepoint", "uprobe", "usdt" }, *hosts[] = { "web-1", "web-2" };
	uint64_t running[] = { 1, 2 }, drops[9] = { 0, 1, 0, 0, 0, 0, 0, 0, 3 };
	static uint8_t object[] = { 0x7f, 'E', 'L', 'F', 2, 1, 1, 0 };
	static const char manifest[] = "weft-manifest 1\nend\n";
	struct agent_table *t;
	Weft__Group **groups;
	size_t n;

	h.role = "agent";
	h.host = "web-1";
	h.version = "0.1.0";
	h.instance = 0x5eed;
	h.kernel = "6.18.0";
	h.features = features;
	h.n_features = 3;
	h.running = running;
	h.n_running = 2;
	e.body_case = WEFT__ENVELOPE__BODY_HELLO;
	e.hello = &h;
	seed_write(dir, "hello", &e);

	w.aggregator = "root";
	w.instance = 9;
	w.heartbeat_ms = 1000;
	w.has_last_seq = true;
	w.last_seq = 12;
	e.body_case = WEFT__ENVELOPE__BODY_WELCOME;
	e.welcome = &w;
	seed_write(dir, "welcome", &e);

	hb.time_ns = 1700000000000000000ull;
	hb.running = running;
	hb.n_running = 2;
	hb.has_spooled = hb.has_spool_dropped = true;
	hb.spooled = 2;
	e.body_case = WEFT__ENVELOPE__BODY_HEARTBEAT;
	e.heartbeat = &hb;
	seed_write(dir, "heartbeat", &e);

	sub.query = (char *)fuzz_query;
	sub.manifest.data = (uint8_t *)manifest;
	sub.manifest.len = sizeof(manifest) - 1;
	sub.object.data = object;
	sub.object.len = sizeof(object);
	sub.has_follow = sub.follow = true;
	e.body_case = WEFT__ENVELOPE__BODY_SUBMIT;
	e.submit = &sub;
	seed_write(dir, "submit", &e);

	qs.query_id = 3;
	qs.query = (char *)fuzz_query;
	qs.manifest = sub.manifest;
	qs.object = sub.object;
	qs.epoch_realtime_ns = 1700000000000000000ull;
	qs.has_end_realtime_ns = true;
	qs.end_realtime_ns = qs.epoch_realtime_ns + 10000000000ull;
	e.body_case = WEFT__ENVELOPE__BODY_QUERY_START;
	e.query_start = &qs;
	seed_write(dir, "query_start", &e);

	stop.query_id = 3;
	e.body_case = WEFT__ENVELOPE__BODY_QUERY_STOP;
	e.query_stop = &stop;
	seed_write(dir, "query_stop", &e);

	t = seed_table(3);
	if (agent_table_to_groups(t, &groups, &n) != 0)
		abort();
	pm.query_id = 3;
	pm.window = 4;
	pm.host = "web-1";
	pm.groups = groups;
	pm.n_groups = n;
	pm.drops = drops;
	pm.n_drops = 9;
	pm.has_misses = pm.has_overflow = true;
	pm.has_last = pm.last = true;
	e.body_case = WEFT__ENVELOPE__BODY_PARTIAL;
	e.partial = &pm;
	seed_write(dir, "partial", &e);
	pm.n_groups = 1;
	pm.hosts = hosts;
	pm.n_hosts = 2;
	seed_write(dir, "partial_subtree", &e);

	res.query_id = 3;
	res.window = 4;
	res.groups = groups;
	res.n_groups = n;
	res.drops = drops;
	res.n_drops = 9;
	res.hosts = hosts;
	res.n_hosts = 1;
	res.missing = hosts + 1;
	res.n_missing = 1;
	res.has_revision = true;
	res.revision = 1;
	res.has_manifest = true;
	res.manifest = sub.manifest;
	e.body_case = WEFT__ENVELOPE__BODY_RESULT;
	e.result = &res;
	seed_write(dir, "result", &e);
	agent_groups_free(groups, n);
	agent_table_free(t);

	ack.upto = 12;
	e.body_case = WEFT__ENVELOPE__BODY_ACK;
	e.ack = &ack;
	seed_write(dir, "ack", &e);

	sr.has_query_id = true;
	sr.query_id = 3;
	e.body_case = WEFT__ENVELOPE__BODY_STATUS_REQUEST;
	e.status_request = &sr;
	seed_write(dir, "status_request", &e);

	as.host = "web-1";
	as.version = "0.1.0";
	as.kernel = "6.18.0";
	as.features = features;
	as.n_features = 2;
	as.alive = true;
	as.last_seen_ms = 250;
	as.running = running;
	as.n_running = 1;
	as.role = "agent";
	qst.query_id = 3;
	qst.query = (char *)fuzz_query;
	qst.windows = 4;
	qst.hosts = hosts;
	qst.n_hosts = 2;
	rep.aggregator = "root";
	rep.agents = &asp;
	rep.n_agents = 1;
	rep.queries = &qstp;
	rep.n_queries = 1;
	e.body_case = WEFT__ENVELOPE__BODY_STATUS_REPLY;
	e.status_reply = &rep;
	seed_write(dir, "status_reply", &e);

	subs.query_id = 3;
	e.body_case = WEFT__ENVELOPE__BODY_SUBSCRIBE;
	e.subscribe = &subs;
	seed_write(dir, "subscribe", &e);

	qe.query_id = 3;
	qe.message = "cannot attach uprobe:/bin/x:f [E_ATTACH]";
	qe.detail = "no such symbol";
	e.body_case = WEFT__ENVELOPE__BODY_QUERY_ERROR;
	e.query_error = &qe;
	seed_write(dir, "query_error", &e);

	err.message = "not welcomed: send Hello first";
	err.has_in_reply_to = true;
	err.in_reply_to = 1;
	e.body_case = WEFT__ENVELOPE__BODY_ERROR;
	e.error = &err;
	seed_write(dir, "error", &e);

	{
		/* a stream query's rows: two of (integer, text) */
		Weft__RowBatch rb = WEFT__ROW_BATCH__INIT;
		int64_t ints[2] = { 123456789, -1 };
		ProtobufCBinaryData texts[2] = { { 4, (uint8_t *)"bash" }, { 0, NULL } };

		rb.query_id = 3;
		rb.window = 1;
		rb.host = (char *)"h";
		rb.has_columns = rb.has_rows = true;
		rb.columns = 2;
		rb.rows = 2;
		rb.n_ints = 2;
		rb.ints = ints;
		rb.n_texts = 2;
		rb.texts = texts;
		rb.has_lost = true;
		rb.lost = 1;
		e.body_case = WEFT__ENVELOPE__BODY_ROW_BATCH;
		e.row_batch = &rb;
		seed_write(dir, "row_batch", &e);
	}

	{
		struct graph g;
		struct graph_task gt = { .trace = { 1, 2 },
					 .id = 1,
					 .service = "s",
					 .name = "root",
					 .host = "h",
					 .pid = 5,
					 .tid = 6,
					 .start = 100,
					 .end = 900,
					 .status = GRAPH_STATUS_OK,
					 .source = GRAPH_SRC_WEFT,
					 .attrs = "{\"k\":\"v\"}" };
		struct graph_event v = {
			.trace = { 1, 2 }, .task = 2, .time = 300, .name = "ev", .attrs = "{}"
		};
		struct graph_edge d = {
			.trace = { 1, 2 }, .kind = GRAPH_EDGE_MESSAGE, .from_task = 2, .to_task = 40
		};
		bool open[2] = { false, true };
		struct wire_graph_meta m = { .query_id = 3,
					     .window = 1,
					     .host = "h",
					     .open = open,
					     .lost = 2,
					     .last = true };
		void *body, *env;
		size_t blen, elen;
		char path[512], why[256];
		FILE *f;

		graph_init(&g);
		graph_add_task(&g, &gt);
		gt.id = 2;
		gt.parent = 1;
		gt.name = "child";
		graph_add_task(&g, &gt);
		graph_add_event(&g, &v);
		graph_add_edge(&g, &d);
		if (wire_graph_pack(&m, &g, &body, &blen, why, sizeof(why)) ||
		    wire_envelope_wrap(1, WEFT__ENVELOPE__BODY_GRAPH_BATCH, body, blen, &env,
				       &elen))
			abort();
		snprintf(path, sizeof(path), "%s/graph_batch", dir);
		f = fopen(path, "wb");
		if (!f || fwrite(env, 1, elen, f) != elen || fclose(f) != 0)
			abort();
		free(body);
		free(env);
		graph_free(&g);
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *dir = getenv("WEFT_WIRE_SEEDS");

	fuzz_plan();
	if (dir) {
		seeds_write(dir);
		exit(0);
	}
	return 0;
}

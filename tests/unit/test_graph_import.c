// SPDX-License-Identifier: Apache-2.0
/*
 * The JSON importers (graph/import*.c) on real and written files, with exact numbers:
 *
 *  - every Zipkin UI test trace of tests/data/zipkin imports with its exact trace, task,
 *    event and edge counts (the derivation, an independent Python reading of the mapping
 *    rules of docs/graphs.md, is in the comment above zipkin_files[]);
 *  - the samples of tests/data/{otlp,jaeger,xtrace}, written after each format's
 *    specification, import with the tasks, events, edges, ids, times and attributes they hold;
 *  - the format is told from the content, and a file of no known shape is refused;
 *  - malformed files are refused with the file's name and the line:column of a syntax error,
 *    or the JSON path of a wrong value, and the graph they were imported into is unchanged.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "graph/graph.h"
#include "graph/import.h"

static const char *data_path(const char *rel)
{
	static char p[4][1024];
	static int next;
	const char *src = getenv("WEFT_SOURCE_DIR");
	char *s = p[next++ % 4];

	snprintf(s, 1024, "%s/tests/data/%s", src ? src : ".", rel);
	return s;
}

static int cmp_id128(const void *a, const void *b)
{
	return graph_id128_cmp(*(const struct graph_id128 *)a, *(const struct graph_id128 *)b);
}

static size_t count_traces(const struct graph *g)
{
	struct graph_id128 *ids = malloc((g->ntasks + 1) * sizeof(*ids));
	size_t i, n = 0;

	assert_non_null(ids);
	for (i = 0; i < g->ntasks; i++)
		ids[i] = g->tasks[i].trace;
	qsort(ids, g->ntasks, sizeof(*ids), cmp_id128);
	for (i = 0; i < g->ntasks; i++)
		if (i == 0 || graph_id128_cmp(ids[i - 1], ids[i]))
			n++;
	free(ids);
	return n;
}

static size_t count_edges(const struct graph *g, enum graph_edge_kind k)
{
	size_t i, n = 0;

	for (i = 0; i < g->nedges; i++)
		n += g->edges[i].kind == k;
	return n;
}

static const struct graph_task *task_by_id(const struct graph *g, uint64_t id)
{
	size_t i;

	for (i = 0; i < g->ntasks; i++)
		if (g->tasks[i].id == id)
			return &g->tasks[i];
	return NULL;
}

static bool has_edge(const struct graph *g, enum graph_edge_kind k, uint64_t from, uint64_t to)
{
	size_t i;

	for (i = 0; i < g->nedges; i++)
		if (g->edges[i].kind == k && g->edges[i].from_task == from &&
		    g->edges[i].to_task == to)
			return true;
	return false;
}

static void import_ok(const char *rel, enum graph_format fmt, enum graph_format want,
		      struct graph *g)
{
	struct graph_import_err err;
	char why[256];
	int ret;

	ret = graph_import_file(data_path(rel), fmt, g, &err);
	if (ret < 0)
		fail_msg("%s: %s", rel, err.msg);
	assert_int_equal(ret, want);
	if (graph_check(g, why, sizeof(why)))
		fail_msg("%s: graph_check: %s", rel, why);
}

/*
 * Expected numbers for tests/data/zipkin, derived with this Python reading of the rules in
 * docs/graphs.md ("Zipkin v2"), independent of the C code:
 *
 * import json, sys
 * def count(path):
 *     spans = json.load(open(path))
 *     ep = lambda s: s.get('localEndpoint') or {}
 *     def agree(a, b):
 *         return all(not a.get(k) or not b.get(k) or a[k] == b[k]
 *                    for k in ('serviceName', 'ipv4', 'ipv6', 'port'))
 *     def merged(p):  # a piece's endpoint: first value present wins
 *         d = {}
 *         for m in p:
 *             for k, v in ep(spans[m]).items(): d.setdefault(k, v)
 *         return d
 *     def first(p, k):
 *         return next((spans[m][k] for m in p if spans[m].get(k)), None)
 *     none_last = lambda v: (v is None, v or '')
 *     def order(i):  # Zipkin's Trace.merge order, then file order
 *         s, e = spans[i], spans[i].get('localEndpoint')
 *         return (int(s['traceId'], 16), int(s['id'], 16), bool(s.get('shared')),
 *                 not (not s.get('shared') and s.get('kind') == 'CLIENT'), e is not None,
 *                 none_last(ep(s).get('serviceName')), none_last(ep(s).get('ipv4')),
 *                 none_last(ep(s).get('ipv6')), i)
 *     groups = {}
 *     for i in sorted(range(len(spans)), key=order):  # same shared, agreeing endpoints: merge
 *         s = spans[i]
 *         g = groups.setdefault((int(s['traceId'], 16), int(s['id'], 16)), [])
 *         if g and bool(spans[g[-1][0]].get('shared')) == bool(s.get('shared')) \
 *                 and agree(merged(g[-1]), ep(s)):
 *             g[-1].append(i)
 *         else:
 *             g.append([i])
 *     for g in groups.values():  # untimed: joins the next agreeing piece, else the previous
 *         q = 0
 *         while q < len(g):
 *             if first(g[q], 'timestamp') is None:
 *                 if q + 1 < len(g) and agree(merged(g[q]), merged(g[q + 1])):
 *                     g[q + 1][:0] = g[q]; del g[q]; continue
 *                 if q > 0 and agree(merged(g[q]), merged(g[q - 1])):
 *                     g[q - 1] += g[q]; del g[q]; continue
 *             q += 1
 *     tasks = events = parents = messages = 0
 *     for (tr, sid), pieces in groups.items():
 *         for qi, p in enumerate(pieces):
 *             tasks += 1
 *             events += len({(a['timestamp'], a['value'])
 *                            for m in p for a in spans[m].get('annotations', [])})
 *             frm = None
 *             if qi > 0:
 *                 parents += 1; frm = pieces[0]
 *             elif first(p, 'parentId') and int(first(p, 'parentId'), 16):
 *                 parents += 1
 *                 hp = groups.get((tr, int(first(p, 'parentId'), 16)))
 *                 if hp:
 *                     me = merged(p)
 *                     same = [x for x in hp if me.get('serviceName')
 *                             and merged(x).get('serviceName') == me['serviceName']
 *                             and (not me.get('ipv4') or not merged(x).get('ipv4')
 *                                  or merged(x)['ipv4'] == me['ipv4'])]
 *                     server = [x for x in hp[1:]
 *                               if first(x, 'shared') or first(x, 'kind') == 'SERVER']
 *                     frm = (same + server + hp)[0]
 *             if frm and (first(frm, 'kind'), first(p, 'kind')) in \
 *                     (('CLIENT', 'SERVER'), ('PRODUCER', 'CONSUMER')):
 *                 messages += 1
 *     return (len({int(s['traceId'], 16) for s in spans}), tasks, events,
 *             parents + messages, parents, messages)
 *
 * Cross-checks by hand: smartthings-mobile-web-install.json has 1041 spans of which 84 are
 * untimed fragments of a shared server span (same id and endpoint): 1041 - 84 = 957 tasks;
 * one root, so 956 parent edges.
 */
static const struct zipkin_file {
	const char *file;
	size_t traces, tasks, events, edges, parent, message;
} zipkin_files[] = {
	{ "zipkin/ascend.json", 1, 8, 0, 9, 7, 2 },
	{ "zipkin/envoy.json", 1, 1, 0, 0, 0, 0 },
	{ "zipkin/messaging-kafka.json", 1, 28, 0, 33, 27, 6 },
	{ "zipkin/messaging.json", 1, 4, 0, 4, 3, 1 },
	{ "zipkin/messaging2.json", 1, 11, 0, 10, 10, 0 },
	{ "zipkin/simple-db-p6.json", 1, 5, 0, 4, 4, 0 },
	{ "zipkin/skew.json", 1, 4, 0, 4, 3, 1 },
	{ "zipkin/smartthings-mobile-web-install.json", 1, 957, 92, 1250, 956, 294 },
	{ "zipkin/smartthings-oauth-authorization.json", 1, 172, 9, 213, 171, 42 },
	{ "zipkin/yelp.json", 1, 16, 1, 18, 15, 3 },
};

static void test_zipkin_files(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(zipkin_files) / sizeof(zipkin_files[0]); i++) {
		const struct zipkin_file *z = &zipkin_files[i];
		struct graph g;

		graph_init(&g);
		import_ok(z->file, GRAPH_FMT_AUTO, GRAPH_FMT_ZIPKIN, &g);
		if (count_traces(&g) != z->traces || g.ntasks != z->tasks ||
		    g.nevents != z->events || g.nedges != z->edges ||
		    count_edges(&g, GRAPH_EDGE_PARENT) != z->parent ||
		    count_edges(&g, GRAPH_EDGE_MESSAGE) != z->message)
			fail_msg("%s: %zu traces %zu tasks %zu events %zu edges (%zu parent, %zu "
				 "message); expected %zu %zu %zu %zu (%zu, %zu)",
				 z->file, count_traces(&g), g.ntasks, g.nevents, g.nedges,
				 count_edges(&g, GRAPH_EDGE_PARENT),
				 count_edges(&g, GRAPH_EDGE_MESSAGE), z->traces, z->tasks,
				 z->events, z->edges, z->parent, z->message);
		graph_free(&g);
	}
}

/*
 * skew.json in detail.  Its span 74280ae0c10d8062 is reported twice: CLIENT by servicea
 * (127.0.0.0) and SERVER, shared, by serviceb (192.0.0.0).  The client keeps the id; the
 * server's id is FNV-1a 64 of the id's bytes, "server\0", "serviceb\0", "192.0.0.0\0", "\0"
 * (no ipv6) and the port 0 as 2 bytes:
 *   python3 -c "def fnv(b, h=0xcbf29ce484222325):
 *       for x in b: h = ((h ^ x) * 0x100000001b3) & (2**64 - 1)
 *       return h
 *   print(hex(fnv(bytes.fromhex('74280ae0c10d8062') + b'server\0serviceb\0192.0.0.0\0\0'
 *                 + bytes(2))))"                                  -> 0xaea2f3f2af7624b5
 * serviceb's "async" (43210ae0c10d1234, parent 74280ae0c10d8062) hangs off the server side,
 * its own service; times are the file's microseconds * 1000.
 */
static void test_zipkin_shared(void **state)
{
	const uint64_t client = 0x74280ae0c10d8062ULL, server = 0xaea2f3f2af7624b5ULL;
	const struct graph_task *t;
	struct graph g;

	(void)state;
	graph_init(&g);
	import_ok("zipkin/skew.json", GRAPH_FMT_ZIPKIN, GRAPH_FMT_ZIPKIN, &g);
	assert_int_equal(g.ntasks, 4);
	t = task_by_id(&g, client);
	assert_non_null(t);
	assert_string_equal(t->service, "servicea");
	assert_string_equal(t->name, "post");
	assert_string_equal(t->host, "127.0.0.0");
	assert_int_equal(t->parent, 0xbf396325699c84bfULL);
	assert_int_equal(t->start, 1470150004074202000LL);
	assert_int_equal(t->end, (1470150004074202LL + 94539) * 1000);
	assert_int_equal(t->pid, -1);
	assert_int_equal(t->tid, -1);
	assert_int_equal(t->source, GRAPH_SRC_ZIPKIN);
	assert_string_equal(t->attrs, "{\"span.kind\":\"client\"}");
	t = task_by_id(&g, server);
	assert_non_null(t);
	assert_string_equal(t->service, "serviceb");
	assert_int_equal(t->parent, client);
	assert_int_equal(t->start, 1470150004008761000LL);
	assert_int_equal(t->end, (1470150004008761LL + 93577) * 1000);
	assert_string_equal(t->attrs,
			    "{\"span.kind\":\"server\",\"zipkin.id\":\"74280ae0c10d8062\","
			    "\"zipkin.shared\":true}");
	assert_true(has_edge(&g, GRAPH_EDGE_MESSAGE, client, server));
	assert_true(has_edge(&g, GRAPH_EDGE_PARENT, client, server));
	assert_true(has_edge(&g, GRAPH_EDGE_PARENT, 0xbf396325699c84bfULL, client));
	t = task_by_id(&g, 0x43210ae0c10d1234ULL);
	assert_non_null(t);
	assert_int_equal(t->parent, server);
	assert_true(has_edge(&g, GRAPH_EDGE_PARENT, server, 0x43210ae0c10d1234ULL));
	t = task_by_id(&g, 0xbf396325699c84bfULL);
	assert_non_null(t);
	assert_int_equal(t->parent, 0);
	graph_free(&g);
}

/* A buffer that must be refused: the message holds `want`, and g is as before. */
static void refused(const char *name, const char *text, enum graph_format fmt, const char *want,
		    long line, long col)
{
	struct graph_import_err err;
	struct graph g;
	size_t nt, ne, nd;
	int ret;

	graph_init(&g);
	import_ok("zipkin/yelp.json", GRAPH_FMT_AUTO, GRAPH_FMT_ZIPKIN, &g);
	nt = g.ntasks;
	ne = g.nevents;
	nd = g.nedges;
	ret = graph_import_buffer(name, text, strlen(text), fmt, &g, &err);
	if (ret >= 0)
		fail_msg("%s: accepted (%d)", name, ret);
	if (!strstr(err.msg, want))
		fail_msg("%s: message '%s' does not hold '%s'", name, err.msg, want);
	if (strncmp(err.msg, name, strlen(name)))
		fail_msg("%s: message '%s' does not start with the name", name, err.msg);
	if (line) {
		assert_int_equal(err.line, line);
		assert_int_equal(err.column, col);
	}
	assert_int_equal(g.ntasks, nt);
	assert_int_equal(g.nevents, ne);
	assert_int_equal(g.nedges, nd);
	graph_free(&g);
}

static const char zspan_ok[] = "{\"traceId\":\"00000000000000aa\",\"id\":\"0000000000000001\","
			       "\"name\":\"a\",\"timestamp\":1000,\"duration\":5}";

static void test_zipkin_refused(void **state)
{
	char buf[1024];

	(void)state;
	/* syntax: jansson's line:column, that of the last character of the token it choked on:
	 * line 2 is `  {"traceId": "aa" "id": "1"}]`, the comma is missing before "id", whose
	 * closing quote is column 2 + 1 + 10 + 1 + 4 + 1 + 4 = 23 */
	refused("cut.json", "[\n  {\"traceId\": \"aa\" \"id\": \"1\"}]", GRAPH_FMT_AUTO,
		"cut.json:2:23:", 2, 23);
	/* the first span is good and imported, the second is wrong: nothing stays */
	snprintf(buf, sizeof(buf),
		 "[%s,{\"traceId\":\"aa\",\"id\":\"2\",\"timestamp\":1,\"duration\":-4}]",
		 zspan_ok);
	refused("neg.json", buf, GRAPH_FMT_AUTO, "[1].duration", 0, 0);
	snprintf(buf, sizeof(buf), "[%s,{\"traceId\":\"aa\",\"id\":\"xyz\"}]", zspan_ok);
	refused("id.json", buf, GRAPH_FMT_AUTO, "[1].id: not a span id", 0, 0);
	snprintf(buf, sizeof(buf), "[%s,{\"traceId\":\"aa\",\"id\":\"2\",\"kind\":\"PEER\"}]",
		 zspan_ok);
	refused("kind.json", buf, GRAPH_FMT_ZIPKIN, "[1].kind", 0, 0);
	refused("ts.json", "[{\"traceId\":\"aa\",\"id\":\"2\",\"timestamp\":99999999999999999}]",
		GRAPH_FMT_ZIPKIN, "[0].timestamp", 0, 0);
	refused("tag.json",
		"[{\"traceId\":\"aa\",\"id\":\"2\",\"timestamp\":1,\"tags\":{\"x\":1}}]",
		GRAPH_FMT_ZIPKIN, "[0].tags.x: not a string", 0, 0);
	refused("ann.json",
		"[{\"traceId\":\"aa\",\"id\":\"2\",\"timestamp\":1,"
		"\"annotations\":[{\"timestamp\":5,\"value\":\"x\"},{\"value\":\"y\"}]}]",
		GRAPH_FMT_ZIPKIN, "[0].annotations[1].timestamp", 0, 0);
	refused("untimed.json", "[{\"traceId\":\"aa\",\"id\":\"2\",\"name\":\"n\"}]",
		GRAPH_FMT_ZIPKIN, "no timestamp", 0, 0);
	refused("self.json",
		"[{\"traceId\":\"aa\",\"id\":\"2\",\"parentId\":\"2\",\"timestamp\":1}]",
		GRAPH_FMT_ZIPKIN, "[0].parentId", 0, 0);
	/* a key twice: refused where the second one ends, 2 + 9 + 1 + 4 + 1 + 9 = column 26 */
	refused("dup.json", "[{\"traceId\":\"aa\",\"traceId\":\"bb\",\"id\":\"2\"}]",
		GRAPH_FMT_AUTO, "duplicate", 1, 26);
	/* a Zipkin list given as another format: the shape is refused */
	snprintf(buf, sizeof(buf), "[%s]", zspan_ok);
	refused("notx.json", buf, GRAPH_FMT_XTRACE, "notx.json", 0, 0);
}

static void test_detect_refused(void **state)
{
	(void)state;
	refused("none.json", "{\"spans\": []}", GRAPH_FMT_AUTO, "not a trace file weft knows", 0,
		0);
	/* jansson reads only an object or a list at the top */
	refused("num.json", "42", GRAPH_FMT_AUTO, "num.json:1:2: '[' or '{' expected", 1, 2);
	refused("list.json", "[1, 2]", GRAPH_FMT_AUTO, "expected an OTLP JSON object", 0, 0);
	refused("empty.json", "", GRAPH_FMT_AUTO, "empty.json:", 0, 0);
	refused("two.json", "[]\n[]", GRAPH_FMT_AUTO, "2:1: more after the zipkin JSON value", 2,
		1);
	refused("ctf.json", "[]", GRAPH_FMT_CTF, "cannot be read from a JSON file", 0, 0);
}

/* graph_import_file reads only regular files (base/file.h): a directory or a missing file is
 * refused with the path in the message, and the graph stays empty. */
static void test_file_refused(void **state)
{
	struct graph_import_err err;
	struct graph g;
	const char *dir = data_path("zipkin");

	(void)state;
	graph_init(&g);
	assert_int_equal(graph_import_file(dir, GRAPH_FMT_AUTO, &g, &err), -EISDIR);
	assert_non_null(strstr(err.msg, dir));
	assert_int_equal(graph_import_file(data_path("zipkin/none.json"), GRAPH_FMT_AUTO, &g, &err),
			 -ENOENT);
	assert_int_equal(g.ntasks, 0);
	graph_free(&g);
}

static const struct graph_task *task_in(const struct graph *g, uint64_t hi, uint64_t lo,
					uint64_t id)
{
	size_t i;

	for (i = 0; i < g->ntasks; i++)
		if (g->tasks[i].id == id && g->tasks[i].trace.hi == hi &&
		    g->tasks[i].trace.lo == lo)
			return &g->tasks[i];
	return NULL;
}

static const struct graph_event *event_named(const struct graph *g, const char *name)
{
	size_t i;

	for (i = 0; i < g->nevents; i++)
		if (!strcmp(g->events[i].name, name))
			return &g->events[i];
	return NULL;
}

static bool has_edge_ev(const struct graph *g, enum graph_edge_kind k, uint64_t ft, uint64_t fe,
			uint64_t tt, uint64_t te)
{
	size_t i;

	for (i = 0; i < g->nedges; i++) {
		const struct graph_edge *e = &g->edges[i];

		if (e->kind == k && e->from_task == ft && e->from_event == fe && e->to_task == tt &&
		    e->to_event == te)
			return true;
	}
	return false;
}

/*
 * tests/data/otlp/checkout.json, counted with jq:
 *   jq '[.resourceSpans[].scopeSpans[].spans[]] | {tasks: length,
 *       traces: (map(.traceId) | unique | length), events: (map(.events // [] | length) | add),
 *       parent: (map(select((.parentSpanId // "") != "")) | length),
 *       links_same_trace: (map(. as $s | (.links // [])[] | select(.traceId == $s.traceId))
 *                          | length)}'
 *   -> 5 tasks, 2 traces, 2 events, 3 parent edges, 1 link inside its trace (the other link
 *      names another trace: dropped); 4 edges.
 */
static void test_otlp_sample(void **state)
{
	const uint64_t hi = 0x5b8efff798038103ULL, lo = 0xd269b633813fc60cULL;
	const struct graph_task *t;
	const struct graph_event *e;
	struct graph g;

	(void)state;
	graph_init(&g);
	import_ok("otlp/checkout.json", GRAPH_FMT_AUTO, GRAPH_FMT_OTLP, &g);
	assert_int_equal(count_traces(&g), 2);
	assert_int_equal(g.ntasks, 5);
	assert_int_equal(g.nevents, 2);
	assert_int_equal(g.nedges, 4);
	assert_int_equal(count_edges(&g, GRAPH_EDGE_PARENT), 3);
	assert_int_equal(count_edges(&g, GRAPH_EDGE_FOLLOWS), 1);
	t = task_in(&g, hi, lo, 0xeee19b7ec3c1b174ULL);
	assert_non_null(t);
	assert_string_equal(t->service, "frontend");
	assert_string_equal(t->name, "GET /checkout");
	assert_string_equal(t->host, "web-1");
	assert_int_equal(t->pid, 4242);
	assert_int_equal(t->tid, 17);
	assert_int_equal(t->parent, 0);
	assert_int_equal(t->status, GRAPH_STATUS_OK);
	assert_int_equal(t->source, GRAPH_SRC_OTLP);
	assert_int_equal(t->start, 1700000000000000000LL);
	assert_int_equal(t->end, 1700000000250000000LL);
	assert_string_equal(t->attrs,
			    "{\"deployment.environment\":\"prod\",\"http.method\":\"GET\","
			    "\"http.status_code\":200,\"otel.scope.name\":"
			    "\"io.opentelemetry.http\",\"otel.scope.version\":\"1.2.0\","
			    "\"span.kind\":\"server\"}");
	t = task_in(&g, hi, lo, 0xeee19b7ec3c1b173ULL);
	assert_non_null(t);
	assert_int_equal(t->status, GRAPH_STATUS_ERROR);
	assert_int_equal(t->end, 1700000000200000123LL); /* ns kept */
	assert_int_equal(t->tid, -1);
	assert_non_null(strstr(t->attrs, "\"otel.status_description\":\"payment declined\""));
	t = task_in(&g, hi, lo, 0x00f067aa0ba902b7ULL); /* numbers for times, enum names */
	assert_non_null(t);
	assert_string_equal(t->service, "payments");
	assert_int_equal(t->pid, 99);
	assert_int_equal(t->start, 1700000000020000000LL);
	assert_int_equal(t->status, GRAPH_STATUS_ERROR);
	assert_string_equal(t->attrs,
			    "{\"amount\":12.5,\"cards\":[\"visa\",2],\"meta\":{\"region\":"
			    "\"eu\"},\"otel.scope.name\":\"payments\",\"retry\":true,"
			    "\"span.kind\":\"server\"}");
	assert_true(has_edge(&g, GRAPH_EDGE_FOLLOWS, 0xeee19b7ec3c1b174ULL, 0x00f067aa0ba902b8ULL));
	assert_true(has_edge(&g, GRAPH_EDGE_PARENT, 0x00f067aa0ba902b7ULL, 0x00f067aa0ba902b8ULL));
	t = task_in(&g, 0x0af7651916cd43ddULL, 0x8448eb211c80319cULL, 0xb7ad6b7169203331ULL);
	assert_non_null(t);
	assert_string_equal(t->attrs, "{\"otel.scope.name\":\"cron\"}"); /* kind 0: no span.kind */
	assert_int_equal(t->start, t->end);
	e = event_named(&g, "request.received");
	assert_non_null(e);
	assert_int_equal(e->task, 0xeee19b7ec3c1b174ULL);
	assert_int_equal(e->time, 1700000000001000000LL);
	assert_string_equal(e->attrs, "{\"bytes\":512}");
	graph_free(&g);
}

/* base64.json: the ids of a protobuf JSON writer, base64 of 0123456789abcdef0123456789abcdef,
 * 1111111111111111 and 2222222222222222 (python3 base64.b64encode(bytes.fromhex(...))); its
 * link says the step follows the job.  lines.jsonl: two requests, one per line (the
 * collector's file exporter): 1 + 2 spans, both queries children of handle. */
static void test_otlp_base64_lines(void **state)
{
	const struct graph_task *t;
	struct graph g;

	(void)state;
	graph_init(&g);
	import_ok("otlp/base64.json", GRAPH_FMT_AUTO, GRAPH_FMT_OTLP, &g);
	assert_int_equal(g.ntasks, 2);
	assert_int_equal(g.nedges, 2);
	t = task_in(&g, 0x0123456789abcdefULL, 0x0123456789abcdefULL, 0x2222222222222222ULL);
	assert_non_null(t);
	assert_int_equal(t->parent, 0x1111111111111111ULL);
	assert_true(has_edge(&g, GRAPH_EDGE_FOLLOWS, 0x1111111111111111ULL, 0x2222222222222222ULL));
	graph_clear(&g);
	import_ok("otlp/lines.jsonl", GRAPH_FMT_AUTO, GRAPH_FMT_OTLP, &g);
	assert_int_equal(count_traces(&g), 1);
	assert_int_equal(g.ntasks, 3);
	assert_int_equal(count_edges(&g, GRAPH_EDGE_PARENT), 2);
	assert_true(has_edge(&g, GRAPH_EDGE_PARENT, 0xa, 0xc));
	graph_free(&g);
}

/*
 * tests/data/jaeger/hotrod.json, counted with jq:
 *   jq '[.data[] as $t | $t.spans[]] | {tasks: length, traces: (map(.traceID)|unique|length),
 *       events: (map(.logs // [] | length) | add),
 *       child_of: (map(.references[]? | select(.refType == "CHILD_OF")) | length),
 *       follows_in_file: ([.[].spanID] as $ids | map(.references[]? |
 *           select(.refType == "FOLLOWS_FROM" and (.spanID as $s | $ids | index($s)))) | length)}'
 *   -> 5 tasks, 2 traces, 4 events, 3 CHILD_OF (one names a span outside the file: kept, the
 *      model allows a parent outside), 2 FOLLOWS_FROM inside the file (the third names a span
 *      outside: dropped); 5 edges.
 */
static void test_jaeger_sample(void **state)
{
	const uint64_t tr = 0x3f0d7e0a2b1c4d5eULL;
	const struct graph_task *t;
	const struct graph_event *e;
	struct graph g;

	(void)state;
	graph_init(&g);
	import_ok("jaeger/hotrod.json", GRAPH_FMT_AUTO, GRAPH_FMT_JAEGER, &g);
	assert_int_equal(count_traces(&g), 2);
	assert_int_equal(g.ntasks, 5);
	assert_int_equal(g.nevents, 4);
	assert_int_equal(g.nedges, 5);
	assert_int_equal(count_edges(&g, GRAPH_EDGE_PARENT), 3);
	assert_int_equal(count_edges(&g, GRAPH_EDGE_FOLLOWS), 2);
	t = task_in(&g, 0, tr, tr);
	assert_non_null(t);
	assert_string_equal(t->service, "frontend");
	assert_string_equal(t->host, "frontend-7d9f");
	assert_int_equal(t->pid, -1);
	assert_int_equal(t->tid, 41);
	assert_int_equal(t->start, 1700000000000000000LL);
	assert_int_equal(t->end, 1700000000730000000LL);
	assert_int_equal(t->status, GRAPH_STATUS_UNSET);
	assert_string_equal(t->attrs, "{\"http.status_code\":200,\"ip\":\"10.0.0.5\","
				      "\"jaeger.version\":\"Go-2.30.0\",\"sampler.param\":true,"
				      "\"span.kind\":\"server\"}");
	t = task_in(&g, 0, tr, 0x55ee66ff77008811ULL);
	assert_non_null(t);
	assert_string_equal(t->service, "redis");
	assert_string_equal(t->host, "redis-0");
	assert_int_equal(t->pid, 7);
	assert_int_equal(t->parent, 0x11aa22bb33cc44ddULL); /* the first CHILD_OF */
	assert_int_equal(t->status, GRAPH_STATUS_ERROR);
	assert_string_equal(t->attrs, "{\"payload\":\"AAEC\",\"span.kind\":\"server\"}");
	assert_true(has_edge(&g, GRAPH_EDGE_FOLLOWS, tr, 0x55ee66ff77008811ULL));
	assert_true(has_edge(&g, GRAPH_EDGE_FOLLOWS, 0x55ee66ff77008811ULL, 0xabc));
	t = task_in(&g, 0, 0xc0ffee00c0ffee00ULL, 0xc1);
	assert_non_null(t);
	assert_int_equal(t->parent, 0xff);
	assert_int_equal(t->status, GRAPH_STATUS_OK);
	assert_string_equal(t->attrs, "{}");
	assert_int_equal(t->end - t->start, 5000);
	e = event_named(&g, "HTTP request received");
	assert_non_null(e);
	assert_int_equal(e->time, 1700000000000500000LL);
	assert_string_equal(e->attrs, "{\"method\":\"GET\"}");
	e = event_named(&g, "log"); /* no "event" field */
	assert_non_null(e);
	assert_int_equal(e->task, 0x11aa22bb33cc44ddULL);
	assert_string_equal(e->attrs, "{\"message\":\"found 10 drivers\"}");
	graph_free(&g);
}

/*
 * tests/data/xtrace/rpc.json: a client thread (client-1, pid 4100, tid 1) calls a server
 * whose acceptor thread (server-1, pid 200, tid 7) hands the work to a worker thread (tid 8)
 * and replies; plus a second trace of one event.  By the rules of docs/graphs.md:
 *   tasks: client a1 (a1 a2 a6 a7: a6 follows a2 of the same task), acceptor b1 (b1 b2 b5),
 *          worker c1 (c1 c2 c3), and the other trace's 1: 4 tasks of 10 + 1 = 11 events;
 *   edges across tasks: a2 -> b1 message (other host), b2 -> c1 fork (same process, other
 *          thread, b2 not the last event of its task), c3 -> b5 follows (c3 ends its task),
 *          b5 -> a6 message; parents: b1 under a1, c1 under b1 (their first events' first
 *          cross-task edges): 4 + 2 = 6 edges;
 *   b1's Edge 00000000000000ff names no event of the file: kept in its attributes.
 */
static void test_xtrace_sample(void **state)
{
	const uint64_t tr = 0x1122334455667788ULL;
	const struct graph_task *t;
	const struct graph_event *e;
	struct graph g;

	(void)state;
	graph_init(&g);
	import_ok("xtrace/rpc.json", GRAPH_FMT_AUTO, GRAPH_FMT_XTRACE, &g);
	assert_int_equal(count_traces(&g), 2);
	assert_int_equal(g.ntasks, 4);
	assert_int_equal(g.nevents, 11);
	assert_int_equal(g.nedges, 6);
	assert_true(has_edge_ev(&g, GRAPH_EDGE_MESSAGE, 0xa1, 0xa2, 0xb1, 0xb1));
	assert_true(has_edge_ev(&g, GRAPH_EDGE_FORK, 0xb1, 0xb2, 0xc1, 0xc1));
	assert_true(has_edge_ev(&g, GRAPH_EDGE_FOLLOWS, 0xc1, 0xc3, 0xb1, 0xb5));
	assert_true(has_edge_ev(&g, GRAPH_EDGE_MESSAGE, 0xb1, 0xb5, 0xa1, 0xa6));
	assert_true(has_edge_ev(&g, GRAPH_EDGE_PARENT, 0xa1, 0, 0xb1, 0));
	assert_true(has_edge_ev(&g, GRAPH_EDGE_PARENT, 0xb1, 0, 0xc1, 0));
	t = task_in(&g, 0, tr, 0xa1);
	assert_non_null(t);
	assert_string_equal(t->service, "rpc-client");
	assert_string_equal(t->name, "call start");
	assert_string_equal(t->host, "client-1");
	assert_int_equal(t->pid, 4100);
	assert_int_equal(t->tid, 1);
	assert_int_equal(t->parent, 0);
	assert_int_equal(t->start, 1371663412000100000LL);
	assert_int_equal(t->end, 1371663412051234567LL); /* nine digits of fraction */
	assert_string_equal(t->attrs, "{\"ThreadName\":\"main\"}");
	assert_int_equal(t->source, GRAPH_SRC_XTRACE);
	t = task_in(&g, 0, tr, 0xc1);
	assert_non_null(t);
	assert_int_equal(t->parent, 0xb1);
	assert_int_equal(t->tid, 8);
	assert_int_equal(t->end, 1371663412035000000LL);
	t = task_in(&g, 0, 0xaa, 1); /* host from "pid@host", no ThreadName */
	assert_non_null(t);
	assert_string_equal(t->host, "batch-host");
	assert_int_equal(t->pid, 77);
	assert_int_equal(t->start, 1371663500000000000LL);
	assert_string_equal(t->attrs, "{}");
	e = event_named(&g, "request received");
	assert_non_null(e);
	assert_int_equal(e->id, 0xb1);
	assert_int_equal(e->task, 0xb1);
	assert_string_equal(e->attrs, "{\"Agent\":\"rpc-server\",\"Edge\":[\"00000000000000ff\"]}");
	e = event_named(&g, "call end");
	assert_non_null(e);
	assert_int_equal(e->task, 0xa1);
	assert_string_equal(e->attrs,
			    "{\"Agent\":\"rpc-client\",\"Severity\":[\"info\",\"audit\"]}");
	e = event_named(&g, "db query");
	assert_non_null(e);
	assert_int_equal(e->task, 0xc1);
	assert_string_equal(e->attrs, "{\"Agent\":\"rpc-server\",\"Query\":\"SELECT 1\"}");
	graph_free(&g);
}

#define OTLP_SPAN(id, extra)                                                                      \
	"{\"traceId\":\"5b8efff798038103d269b633813fc60c\",\"spanId\":\"" id "\",\"name\":\"n\"," \
	"\"startTimeUnixNano\":\"10\",\"endTimeUnixNano\":\"20\"" extra "}"
#define OTLP_REQ(spans) "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[" spans "]}]}]}"

static void test_otlp_refused(void **state)
{
	char deep[2048];
	size_t i, n = 0;

	(void)state;
	refused("o1.json", OTLP_REQ(OTLP_SPAN("00000000000000a1", "") "," OTLP_SPAN("zz", "")),
		GRAPH_FMT_AUTO, "resourceSpans[0].scopeSpans[0].spans[1].spanId: not a span id", 0,
		0);
	refused("o2.json", OTLP_REQ(OTLP_SPAN("00000000000000a1", ",\"endTimeUnixNano\":\"5\"")),
		GRAPH_FMT_AUTO, "duplicate", 0, 0); /* a key twice: jansson refuses it */
	refused("o3.json",
		"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":"
		"\"5b8efff798038103d269b633813fc60c\",\"spanId\":\"00000000000000a1\","
		"\"startTimeUnixNano\":\"30\",\"endTimeUnixNano\":\"20\"}]}]}]}",
		GRAPH_FMT_OTLP, "spans[0].endTimeUnixNano: before startTimeUnixNano", 0, 0);
	refused("o4.json", OTLP_REQ(OTLP_SPAN("00000000000000a1", ",\"kind\":9")), GRAPH_FMT_OTLP,
		"spans[0].kind: not a SpanKind", 0, 0);
	refused("o5.json",
		OTLP_REQ(OTLP_SPAN("00000000000000a1", "") "," OTLP_SPAN("00000000000000a1", "")),
		GRAPH_FMT_OTLP, "spans[1].spanId: 00000000000000a1 appears twice", 0, 0);
	refused("o6.json",
		OTLP_REQ(OTLP_SPAN(
			"00000000000000a1",
			",\"attributes\":[{\"key\":\"k\",\"value\":{\"intValue\":\"x\"}}]")),
		GRAPH_FMT_OTLP, "spans[0].attributes[0].value: not an AnyValue", 0, 0);
	/* an AnyValue nested 40 lists deep: over IMP_MAX_DEPTH (32) */
	n += (size_t)snprintf(
		deep + n, sizeof(deep) - n, "%s",
		"{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":"
		"\"5b8efff798038103d269b633813fc60c\",\"spanId\":\"00000000000000a1\","
		"\"startTimeUnixNano\":\"10\",\"endTimeUnixNano\":\"20\","
		"\"attributes\":[{\"key\":\"k\",\"value\":");
	for (i = 0; i < 40; i++)
		n += (size_t)snprintf(deep + n, sizeof(deep) - n, "{\"arrayValue\":{\"values\":[");
	n += (size_t)snprintf(deep + n, sizeof(deep) - n, "{\"stringValue\":\"x\"}");
	for (i = 0; i < 40; i++)
		n += (size_t)snprintf(deep + n, sizeof(deep) - n, "]}}");
	snprintf(deep + n, sizeof(deep) - n, "}]}]}]}]}");
	refused("o7.json", deep, GRAPH_FMT_OTLP, "nested over 32 deep", 0, 0);
	/* JSON Lines: the second request is cut; its line and column in the whole file, those
	 * of the last character read: `{"resourceSpans": [` is 19 characters */
	refused("o8.jsonl", OTLP_REQ(OTLP_SPAN("00000000000000a1", "")) "\n{\"resourceSpans\": [",
		GRAPH_FMT_AUTO, "o8.jsonl:2:19:", 2, 19);
	refused("o9.jsonl", OTLP_REQ(OTLP_SPAN("00000000000000a1", "")) "\n{\"resourceSpans\": 3}",
		GRAPH_FMT_AUTO, "(value 2) resourceSpans: missing, or not a list", 0, 0);
}

#define JAEGER_SPAN(id, extra)                                                              \
	"{\"traceID\":\"00000000000000aa\",\"spanID\":\"" id "\",\"operationName\":\"op\"," \
	"\"startTime\":1000,\"duration\":10,\"processID\":\"p1\"" extra "}"
#define JAEGER_DOC(spans)                                                              \
	"{\"data\":[{\"traceID\":\"aa\",\"spans\":[" spans "],\"processes\":{\"p1\":{" \
	"\"serviceName\":\"s\",\"tags\":[]}}}]}"

static void test_jaeger_refused(void **state)
{
	(void)state;
	refused("j1.json",
		JAEGER_DOC(JAEGER_SPAN("0000000000000001", "") "," JAEGER_SPAN(
			"0000000000000002",
			",\"references\":[{\"refType\":\"PARENT\",\"traceID\":\"aa\",\"spanID\":"
			"\"1\"}]")),
		GRAPH_FMT_AUTO,
		"data[0].spans[1].references[0].refType: not CHILD_OF or FOLLOWS_FROM", 0, 0);
	refused("j2.json",
		JAEGER_DOC(
			JAEGER_SPAN("0000000000000002",
				    ",\"references\":[{\"refType\":\"CHILD_OF\",\"traceID\":\"aa\","
				    "\"spanID\":\"xyz\"}]")),
		GRAPH_FMT_JAEGER, "data[0].spans[0].references[0].spanID: not a span id", 0, 0);
	refused("j3.json",
		"{\"data\":[{\"spans\":[{\"traceID\":\"aa\",\"spanID\":\"1\",\"startTime\":1,"
		"\"duration\":-3}]}]}",
		GRAPH_FMT_AUTO, "data[0].spans[0].duration", 0, 0);
	refused("j4.json",
		"{\"data\":[{\"spans\":[{\"traceID\":\"aa\",\"spanID\":\"1\",\"startTime\":1,"
		"\"duration\":3,\"processID\":\"p9\"}]}]}",
		GRAPH_FMT_AUTO, "data[0].spans[0].processID: not a process of data[0].processes", 0,
		0);
	refused("j5.json",
		JAEGER_DOC(JAEGER_SPAN("0000000000000001", "") "," JAEGER_SPAN("0000000000000001",
									       "")),
		GRAPH_FMT_AUTO, "data[0].spans[1].spanID: 0000000000000001 appears twice", 0, 0);
	refused("j6.json",
		JAEGER_DOC(JAEGER_SPAN("0000000000000001",
				       ",\"tags\":[{\"key\":\"n\",\"type\":\"int64\",\"value\":"
				       "\"x\"}]")),
		GRAPH_FMT_AUTO, "data[0].spans[0].tags[0].value: not a value of its type", 0, 0);
	refused("j7.json", "{\"data\": 3}", GRAPH_FMT_JAEGER, "data: missing, or not a list", 0, 0);
}

#define XREP(md, extra) "{\"X-Trace\":[\"" md "\"],\"Timestamp\":[\"1371663412.5\"]" extra "}"
#define XMD(ev) \
	"19"    \
	"1122334455667788" ev

static void test_xtrace_refused(void **state)
{
	(void)state;
	refused("x1.json",
		"[{\"id\":\"1122334455667788\",\"reports\":[" XREP(XMD("0000000000000001"),
								   "") "," XREP("191122", "") "]}]",
		GRAPH_FMT_AUTO, "[0].reports[1].X-Trace[0]: not X-Trace metadata", 0, 0);
	refused("x2.json",
		"[{\"id\":\"1122334455667799\",\"reports\":[" XREP(XMD("0000000000000001"),
								   "") "]}]",
		GRAPH_FMT_AUTO,
		"[0].reports[0].X-Trace[0]: task id 1122334455667788, not the trace's", 0, 0);
	refused("x3.json",
		"[{\"id\":\"1122334455667788\",\"reports\":[{\"X-Trace\":[\"" XMD(
			"0000000000000001") "\"],\"Timestamp\":[\"12:30\"]}]}]",
		GRAPH_FMT_AUTO, "[0].reports[0].Timestamp[0]: not seconds", 0, 0);
	refused("x4.json",
		"[{\"id\":\"1122334455667788\",\"reports\":[" XREP(
			XMD("0000000000000001"), "") "," XREP(XMD("0000000000000001"), "") "]}]",
		GRAPH_FMT_AUTO, "[0].reports[1].X-Trace[0]: event 0000000000000001 appears twice",
		0, 0);
	refused("x5.json",
		"[{\"id\":\"1122334455667788\",\"reports\":[" XREP(XMD("0000000000000001"),
								   ",\"Host\":\"h\"") "]}]",
		GRAPH_FMT_AUTO, "[0].reports[0].Host: not a list of strings", 0, 0);
	refused("x6.json",
		"[{\"id\":\"1122334455667788\",\"reports\":[" XREP(XMD("0000000000000001"),
								   ",\"Edge\":[\"q\"]") "]}]",
		GRAPH_FMT_AUTO, "[0].reports[0].Edge[0]: not an event id", 0, 0);
}

/* Attributes whose text would pass GRAPH_MAX_STR (which the arena cuts, breaking the JSON):
 * long strings are cut to 1024 bytes and the mark weft.attrs_cut added; the text stays JSON. */
static void test_attrs_cut(void **state)
{
	const size_t big = 70000;
	struct graph_import_err err;
	struct graph g;
	char *buf, *p;
	const char *a;
	size_t n = big + 256;

	(void)state;
	buf = malloc(n);
	assert_non_null(buf);
	p = buf + sprintf(buf, "[{\"traceId\":\"aa\",\"id\":\"1\",\"timestamp\":1,\"tags\":{"
			       "\"short\":\"s\",\"sql\":\"");
	memset(p, 'x', big);
	p += big;
	strcpy(p, "\"}}]");
	graph_init(&g);
	assert_int_equal(
		graph_import_buffer("big.json", buf, strlen(buf), GRAPH_FMT_AUTO, &g, &err),
		GRAPH_FMT_ZIPKIN);
	assert_int_equal(g.ntasks, 1);
	a = g.tasks[0].attrs;
	/* {"short":"s","sql":"x...x","weft.attrs_cut":true}: 20 + 1024 + 24 bytes */
	assert_int_equal(strlen(a), 20 + 1024 + 24);
	assert_memory_equal(a, "{\"short\":\"s\",\"sql\":\"xxx", 23);
	assert_string_equal(a + 20 + 1024, "\",\"weft.attrs_cut\":true}");
	graph_free(&g);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_zipkin_files),   cmocka_unit_test(test_zipkin_shared),
		cmocka_unit_test(test_zipkin_refused), cmocka_unit_test(test_detect_refused),
		cmocka_unit_test(test_otlp_sample),    cmocka_unit_test(test_otlp_base64_lines),
		cmocka_unit_test(test_jaeger_sample),  cmocka_unit_test(test_xtrace_sample),
		cmocka_unit_test(test_otlp_refused),   cmocka_unit_test(test_jaeger_refused),
		cmocka_unit_test(test_xtrace_refused), cmocka_unit_test(test_attrs_cut),
		cmocka_unit_test(test_file_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

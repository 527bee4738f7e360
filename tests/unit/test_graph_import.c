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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_zipkin_files),
		cmocka_unit_test(test_zipkin_shared),
		cmocka_unit_test(test_zipkin_refused),
		cmocka_unit_test(test_detect_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

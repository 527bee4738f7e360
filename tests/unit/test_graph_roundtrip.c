// SPDX-License-Identifier: Apache-2.0
/*
 * Import -> export -> import gives the same graph (graph/export.c):
 *
 *  - through OTLP JSON, exactly: the same tasks (trace, id, parent, service, name, host,
 *    pid, tid, start, end, status, attributes), events (trace, task, id, time, name,
 *    attributes) and edges (kind, both ends with their event ids), for every Zipkin test trace
 *    and every sample of tests/data;
 *  - through Jaeger JSON, the same with times to the microsecond (Jaeger's resolution), for
 *    the same files; list and map attributes, which Jaeger tags cannot hold, travel as JSON
 *    text named in the tag weft.json (checked on its own);
 *  - the Chrome trace export, parsed back with jansson, holds one complete ("X") event per
 *    task, one instant ("i") event per event, one flow start ("s") and one flow end ("f") per
 *    message edge, process and thread names for every lane, and every X event nests
 *    properly inside its lane (what Perfetto needs to draw it).
 * The source of each element is not compared: it names the format last read.
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
#include <jansson.h>

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

static const char *const files[] = {
	"zipkin/ascend.json",
	"zipkin/envoy.json",
	"zipkin/messaging-kafka.json",
	"zipkin/messaging.json",
	"zipkin/messaging2.json",
	"zipkin/simple-db-p6.json",
	"zipkin/skew.json",
	"zipkin/smartthings-mobile-web-install.json",
	"zipkin/smartthings-oauth-authorization.json",
	"zipkin/yelp.json",
	"jaeger/hotrod.json",
	"otlp/checkout.json",
	"otlp/base64.json",
	"otlp/lines.jsonl",
	"xtrace/rpc.json",
};

static int64_t res_ns; /* the time resolution compared: 1 or 1000 */

static int64_t q(int64_t t)
{
	return t / res_ns;
}

static int cmp_task(const void *a, const void *b)
{
	const struct graph_task *x = a, *y = b;
	int c = graph_id128_cmp(x->trace, y->trace);

	if (c)
		return c;
	return x->id < y->id ? -1 : x->id > y->id;
}

static int cmp_event(const void *a, const void *b)
{
	const struct graph_event *x = a, *y = b;
	int c = graph_id128_cmp(x->trace, y->trace);

	if (c)
		return c;
	if (x->task != y->task)
		return x->task < y->task ? -1 : 1;
	if (q(x->time) != q(y->time))
		return q(x->time) < q(y->time) ? -1 : 1;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	if ((c = strcmp(x->name, y->name)))
		return c;
	return strcmp(x->attrs, y->attrs);
}

static int cmp_edge(const void *a, const void *b)
{
	const struct graph_edge *x = a, *y = b;
	int c = graph_id128_cmp(x->trace, y->trace);

	if (c)
		return c;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->from_task != y->from_task)
		return x->from_task < y->from_task ? -1 : 1;
	if (x->to_task != y->to_task)
		return x->to_task < y->to_task ? -1 : 1;
	if (x->from_event != y->from_event)
		return x->from_event < y->from_event ? -1 : 1;
	return x->to_event < y->to_event ? -1 : x->to_event > y->to_event;
}

static void canon(struct graph *g)
{
	if (g->ntasks)
		qsort(g->tasks, g->ntasks, sizeof(*g->tasks), cmp_task);
	if (g->nevents)
		qsort(g->events, g->nevents, sizeof(*g->events), cmp_event);
	if (g->nedges)
		qsort(g->edges, g->nedges, sizeof(*g->edges), cmp_edge);
}

static void same_graph(const char *what, struct graph *a, struct graph *b)
{
	size_t i;

	canon(a);
	canon(b);
	if (a->ntasks != b->ntasks || a->nevents != b->nevents || a->nedges != b->nedges)
		fail_msg("%s: %zu/%zu/%zu elements, then %zu/%zu/%zu", what, a->ntasks, a->nevents,
			 a->nedges, b->ntasks, b->nevents, b->nedges);
	for (i = 0; i < a->ntasks; i++) {
		const struct graph_task *x = &a->tasks[i], *y = &b->tasks[i];

		if (!graph_id128_eq(x->trace, y->trace) || x->id != y->id ||
		    x->parent != y->parent || strcmp(x->service, y->service) ||
		    strcmp(x->name, y->name) || strcmp(x->host, y->host) || x->pid != y->pid ||
		    x->tid != y->tid || q(x->start) != q(y->start) || q(x->end) != q(y->end) ||
		    x->status != y->status || strcmp(x->attrs, y->attrs))
			fail_msg("%s: task %016llx differs: %s/%s %s %lld..%lld %d %s | %s/%s %s "
				 "%lld..%lld %d %s",
				 what, (unsigned long long)x->id, x->service, x->name, x->host,
				 (long long)x->start, (long long)x->end, x->status, x->attrs,
				 y->service, y->name, y->host, (long long)y->start,
				 (long long)y->end, y->status, y->attrs);
	}
	for (i = 0; i < a->nevents; i++)
		if (cmp_event(&a->events[i], &b->events[i]))
			fail_msg("%s: event %zu differs: %s %s | %s %s", what, i, a->events[i].name,
				 a->events[i].attrs, b->events[i].name, b->events[i].attrs);
	for (i = 0; i < a->nedges; i++)
		if (cmp_edge(&a->edges[i], &b->edges[i]))
			fail_msg("%s: edge %zu differs", what, i);
}

static void import(const char *name, const char *buf, size_t len, enum graph_format fmt,
		   struct graph *g)
{
	struct graph_import_err err;
	char why[256];
	int ret;

	ret = buf ? graph_import_buffer(name, buf, len, fmt, g, &err) :
		    graph_import_file(name, fmt, g, &err);
	if (ret < 0)
		fail_msg("%s: %s", name, err.msg);
	if (graph_check(g, why, sizeof(why)))
		fail_msg("%s: graph_check: %s", name, why);
}

static char *export(const struct graph *g, enum graph_format fmt, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	assert_non_null(f);
	assert_int_equal(graph_export(f, g, fmt), 0);
	assert_int_equal(fclose(f), 0);
	return buf;
}

static void roundtrip(const char *rel, enum graph_format fmt)
{
	struct graph a, b;
	char what[256], *buf;
	size_t len;

	graph_init(&a);
	graph_init(&b);
	import(data_path(rel), NULL, 0, GRAPH_FMT_AUTO, &a);
	buf = export(&a, fmt, &len);
	snprintf(what, sizeof(what), "%s via %s", rel, graph_format_name(fmt));
	import(what, buf, len, fmt, &b);
	same_graph(what, &a, &b);
	free(buf);
	graph_free(&a);
	graph_free(&b);
}

static void test_otlp_roundtrip(void **state)
{
	size_t i;

	(void)state;
	res_ns = 1;
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		roundtrip(files[i], GRAPH_FMT_OTLP);
}

static void test_jaeger_roundtrip(void **state)
{
	size_t i;

	(void)state;
	res_ns = 1000;
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		roundtrip(files[i], GRAPH_FMT_JAEGER);
}

/* checkout.json's "charge" has a list and a map attribute, which Jaeger tags cannot hold: the
 * export writes their JSON text and names them in the tag weft.json. */
static void test_jaeger_lists(void **state)
{
	struct graph a;
	json_t *root, *t, *sp, *tag;
	char *buf;
	size_t len, i, k, j, found = 0;

	(void)state;
	graph_init(&a);
	import(data_path("otlp/checkout.json"), NULL, 0, GRAPH_FMT_OTLP, &a);
	buf = export(&a, GRAPH_FMT_JAEGER, &len);
	root = json_loadb(buf, len, 0, NULL);
	assert_non_null(root);
	json_array_foreach(json_object_get(root, "data"), i, t)
	{
		json_array_foreach(json_object_get(t, "spans"), k, sp)
		{
			if (strcmp(json_string_value(json_object_get(sp, "spanID")),
				   "00f067aa0ba902b7"))
				continue;
			json_array_foreach(json_object_get(sp, "tags"), j, tag)
			{
				const char *key = json_string_value(json_object_get(tag, "key"));
				const char *v = json_string_value(json_object_get(tag, "value"));

				if (!strcmp(key, "cards"))
					found += !strcmp(v, "[\"visa\",2]");
				if (!strcmp(key, "meta"))
					found += !strcmp(v, "{\"region\":\"eu\"}");
				if (!strcmp(key, "weft.json"))
					found += !strcmp(v, "[\"cards\",\"meta\"]");
			}
		}
	}
	assert_int_equal(found, 3);
	json_decref(root);
	free(buf);
	graph_free(&a);
}

static size_t count_ph(const json_t *evs, const char *ph, const char *name)
{
	const json_t *e;
	size_t i, n = 0;

	json_array_foreach(evs, i, e)
	{
		if (strcmp(json_string_value(json_object_get(e, "ph")), ph))
			continue;
		if (name && strcmp(json_string_value(json_object_get(e, "name")), name))
			continue;
		n++;
	}
	return n;
}

struct slice {
	json_int_t pid, tid;
	double ts, end;
};

static int cmp_slice(const void *a, const void *b)
{
	const struct slice *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->end > y->end ? -1 : x->end < y->end;
}

/* Every X event of a lane either encloses or follows the ones before it. */
static void check_nesting(const char *rel, const json_t *evs)
{
	struct slice *s = calloc(json_array_size(evs) + 1, sizeof(*s)), stack[64];
	const json_t *e;
	size_t i, n = 0, k;
	int depth = 0;

	assert_non_null(s);
	json_array_foreach(evs, i, e)
	{
		if (strcmp(json_string_value(json_object_get(e, "ph")), "X"))
			continue;
		s[n].pid = json_integer_value(json_object_get(e, "pid"));
		s[n].tid = json_integer_value(json_object_get(e, "tid"));
		s[n].ts = json_number_value(json_object_get(e, "ts"));
		s[n].end = s[n].ts + json_number_value(json_object_get(e, "dur"));
		n++;
	}
	qsort(s, n, sizeof(*s), cmp_slice);
	for (k = 0; k < n; k++) {
		if (k > 0 && (s[k].pid != s[k - 1].pid || s[k].tid != s[k - 1].tid))
			depth = 0;
		while (depth > 0 && stack[depth - 1].end <= s[k].ts)
			depth--;
		if (depth > 0 && stack[depth - 1].end < s[k].end)
			fail_msg("%s: slices overlap without nesting in pid %lld tid %lld", rel,
				 (long long)s[k].pid, (long long)s[k].tid);
		if (depth < 64)
			stack[depth++] = s[k];
	}
	free(s);
}

static void chrome(const char *rel)
{
	struct graph a;
	json_error_t je;
	json_t *root, *evs;
	char *buf;
	size_t len, i, nmsg = 0;

	graph_init(&a);
	import(data_path(rel), NULL, 0, GRAPH_FMT_AUTO, &a);
	buf = export(&a, GRAPH_FMT_CHROME, &len);
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		fail_msg("%s: the Chrome export is not JSON: %d:%d %s", rel, je.line, je.column,
			 je.text);
	evs = json_object_get(root, "traceEvents");
	assert_true(json_is_array(evs));
	for (i = 0; i < a.nedges; i++)
		nmsg += a.edges[i].kind == GRAPH_EDGE_MESSAGE;
	if (count_ph(evs, "X", NULL) != a.ntasks || count_ph(evs, "i", NULL) != a.nevents ||
	    count_ph(evs, "s", NULL) != nmsg || count_ph(evs, "f", NULL) != nmsg)
		fail_msg("%s: %zu X, %zu i, %zu s, %zu f; expected %zu, %zu, %zu, %zu", rel,
			 count_ph(evs, "X", NULL), count_ph(evs, "i", NULL),
			 count_ph(evs, "s", NULL), count_ph(evs, "f", NULL), a.ntasks, a.nevents,
			 nmsg, nmsg);
	/* every (pid) of an X event has a process_name, every (pid, tid) a thread_name */
	{
		const json_t *e, *m;
		size_t j, k;

		json_array_foreach(evs, j, e)
		{
			bool proc = false, thr = false;

			if (strcmp(json_string_value(json_object_get(e, "ph")), "X"))
				continue;
			json_array_foreach(evs, k, m)
			{
				if (strcmp(json_string_value(json_object_get(m, "ph")), "M") ||
				    json_integer_value(json_object_get(m, "pid")) !=
					    json_integer_value(json_object_get(e, "pid")))
					continue;
				if (!strcmp(json_string_value(json_object_get(m, "name")),
					    "process_name"))
					proc = true;
				if (!strcmp(json_string_value(json_object_get(m, "name")),
					    "thread_name") &&
				    json_integer_value(json_object_get(m, "tid")) ==
					    json_integer_value(json_object_get(e, "tid")))
					thr = true;
			}
			if (!proc || !thr)
				fail_msg("%s: an X event's lane has no %s name", rel,
					 proc ? "thread" : "process");
		}
	}
	check_nesting(rel, evs);
	json_decref(root);
	free(buf);
	graph_free(&a);
}

static void test_chrome(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		chrome(files[i]);
}

/* skew.json: exact numbers.  4 tasks, 0 events, 1 message edge (74280ae0c10d8062's client
 * -> server); processes: servicea @ 127.0.0.0 and serviceb @ 192.0.0.0 (no pids: one per
 * host and service).  servicea's get (..71068..170479) encloses its post (..74202..168741):
 * one lane; serviceb's post (..08761..102338) encloses async (..08762..073762): one lane. */
static void test_chrome_skew(void **state)
{
	struct graph a;
	json_t *root, *evs;
	char *buf;
	size_t len;

	(void)state;
	graph_init(&a);
	import(data_path("zipkin/skew.json"), NULL, 0, GRAPH_FMT_ZIPKIN, &a);
	buf = export(&a, GRAPH_FMT_CHROME, &len);
	root = json_loadb(buf, len, 0, NULL);
	assert_non_null(root);
	evs = json_object_get(root, "traceEvents");
	assert_int_equal(count_ph(evs, "X", NULL), 4);
	assert_int_equal(count_ph(evs, "i", NULL), 0);
	assert_int_equal(count_ph(evs, "s", NULL), 1);
	assert_int_equal(count_ph(evs, "f", NULL), 1);
	assert_int_equal(count_ph(evs, "M", "process_name"), 2);
	assert_int_equal(count_ph(evs, "M", "thread_name"), 2);
	json_decref(root);
	free(buf);
	graph_free(&a);
}

/* rpc.json's two message edges name their events: a2 (sent at ...412.001000) -> b1 (received
 * at ...412.010000) and b5 (...412.040000) -> a6 (...412.050000); the flows leave and arrive
 * at those times, in µs, on the lanes of the client (tid 1) and the acceptor (tid 7). */
static void test_chrome_xtrace(void **state)
{
	struct graph a;
	json_t *root, *e;
	char *buf;
	size_t len, i, seen = 0;

	(void)state;
	graph_init(&a);
	import(data_path("xtrace/rpc.json"), NULL, 0, GRAPH_FMT_XTRACE, &a);
	buf = export(&a, GRAPH_FMT_CHROME, &len);
	root = json_loadb(buf, len, 0, NULL);
	assert_non_null(root);
	json_array_foreach(json_object_get(root, "traceEvents"), i, e)
	{
		const char *ph = json_string_value(json_object_get(e, "ph"));
		json_int_t ts = json_integer_value(json_object_get(e, "ts"));
		json_int_t tid = json_integer_value(json_object_get(e, "tid"));

		if (!strcmp(ph, "s"))
			seen += (ts == 1371663412001000 && tid == 1) ||
				(ts == 1371663412040000 && tid == 7);
		if (!strcmp(ph, "f"))
			seen += (ts == 1371663412010000 && tid == 7) ||
				(ts == 1371663412050000 && tid == 1);
	}
	assert_int_equal(seen, 4);
	json_decref(root);
	free(buf);
	graph_free(&a);
}

static void test_export_refused(void **state)
{
	struct graph g;
	FILE *f = fopen("/dev/null", "w");

	(void)state;
	assert_non_null(f);
	graph_init(&g);
	assert_int_equal(graph_export(f, &g, GRAPH_FMT_ZIPKIN), -EINVAL);
	assert_int_equal(graph_export(f, &g, GRAPH_FMT_CTF), -EINVAL);
	fclose(f);
	f = fopen("/dev/full", "w");
	if (f) {
		import(data_path("zipkin/yelp.json"), NULL, 0, GRAPH_FMT_ZIPKIN, &g);
		assert_int_equal(graph_export(f, &g, GRAPH_FMT_OTLP), -EIO);
		fclose(f);
	}
	graph_free(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_otlp_roundtrip), cmocka_unit_test(test_jaeger_roundtrip),
		cmocka_unit_test(test_jaeger_lists),   cmocka_unit_test(test_chrome),
		cmocka_unit_test(test_chrome_skew),    cmocka_unit_test(test_export_refused),
		cmocka_unit_test(test_chrome_xtrace),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

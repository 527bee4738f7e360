// SPDX-License-Identifier: Apache-2.0
/*
 * Writing a graph out (graph_export): Chrome trace event JSON for Perfetto and chrome://tracing,
 * OTLP JSON and Jaeger JSON.  docs/graphs.md ("Formats") says what each carries; the rule the
 * OTLP and Jaeger writers keep is that importing what they wrote gives the same graph (tasks,
 * events, edges, ids, types, attributes; times to the format's resolution: ns for OTLP, us
 * for Jaeger), which tests/unit/test_graph_roundtrip.c checks.  Where the target format has
 * no place for something the model holds, a weft-named attribute carries it, and the
 * importers take it back out:
 *   an edge other than the task's one parent edge: OTLP a link (attributes weft.edge.kind,
 *     weft.edge.from_event, weft.edge.to_event unless it is a plain follows-from); Jaeger a
 *     CHILD_OF / FOLLOWS_FROM reference for event-less parent and follows edges, else an entry
 *     of the span tag weft.edges (a JSON list);
 *   an event's id: the event attribute / log field weft.event_id;
 *   a list or map attribute in Jaeger (whose tags are scalars): its JSON text, its key listed
 *     in the tag / log field weft.json.
 * Those names are reserved: an attribute of the graph that bears one is not written.
 * The kind ("span.kind") and the status travel in each format's own fields.
 *
 * Everything is built as a jansson tree per trace group and written with json_dumpf: the
 * writers are not hot paths, and jansson escapes every string correctly.  Lookups of a task's
 * events and incoming edges go through index arrays sorted once: O(n log n) in all.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "graph/import.h"
#include "graph/import_priv.h"

struct xp {
	const struct graph *g;
	size_t *tasks; /* by (trace, start, id) */
	size_t *events; /* by (trace, task, time, position) */
	size_t *edges; /* by (trace, to_task, position) */
};

static int cmp_task(const void *a, const void *b, void *arg)
{
	const struct graph *g = arg;
	const struct graph_task *x = &g->tasks[*(const size_t *)a],
				*y = &g->tasks[*(const size_t *)b];
	int c = graph_id128_cmp(x->trace, y->trace);

	if (c)
		return c;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

static int cmp_event(const void *a, const void *b, void *arg)
{
	const struct graph *g = arg;
	const struct graph_event *x = &g->events[*(const size_t *)a];
	const struct graph_event *y = &g->events[*(const size_t *)b];
	int c = graph_id128_cmp(x->trace, y->trace);

	if (c)
		return c;
	if (x->task != y->task)
		return x->task < y->task ? -1 : 1;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

static int cmp_edge(const void *a, const void *b, void *arg)
{
	const struct graph *g = arg;
	const struct graph_edge *x = &g->edges[*(const size_t *)a];
	const struct graph_edge *y = &g->edges[*(const size_t *)b];
	int c = graph_id128_cmp(x->trace, y->trace);

	if (c)
		return c;
	if (x->to_task != y->to_task)
		return x->to_task < y->to_task ? -1 : 1;
	return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

static void xp_free(struct xp *x)
{
	free(x->tasks);
	free(x->events);
	free(x->edges);
}

static int xp_init(struct xp *x, const struct graph *g)
{
	size_t i;

	x->g = g;
	x->tasks = malloc((g->ntasks + 1) * sizeof(size_t));
	x->events = malloc((g->nevents + 1) * sizeof(size_t));
	x->edges = malloc((g->nedges + 1) * sizeof(size_t));
	if (!x->tasks || !x->events || !x->edges) {
		xp_free(x);
		return -ENOMEM;
	}
	for (i = 0; i < g->ntasks; i++)
		x->tasks[i] = i;
	for (i = 0; i < g->nevents; i++)
		x->events[i] = i;
	for (i = 0; i < g->nedges; i++)
		x->edges[i] = i;
	qsort_r(x->tasks, g->ntasks, sizeof(size_t), cmp_task, (void *)g);
	qsort_r(x->events, g->nevents, sizeof(size_t), cmp_event, (void *)g);
	qsort_r(x->edges, g->nedges, sizeof(size_t), cmp_edge, (void *)g);
	return 0;
}

/* The range [*lo, *hi) of x->events (by_edge: x->edges, by to_task) of task (trace, id). */
static void xp_range(const struct xp *x, bool by_edge, struct graph_id128 trace, uint64_t id,
		     size_t *lo, size_t *hi)
{
	size_t n = by_edge ? x->g->nedges : x->g->nevents;
	const size_t *ix = by_edge ? x->edges : x->events;
	size_t a = 0, b = n, m;

	for (int pass = 0; pass < 2; pass++) {
		a = 0;
		b = n;
		while (a < b) {
			struct graph_id128 t;
			uint64_t k;
			int c;

			m = a + (b - a) / 2;
			if (by_edge) {
				t = x->g->edges[ix[m]].trace;
				k = x->g->edges[ix[m]].to_task;
			} else {
				t = x->g->events[ix[m]].trace;
				k = x->g->events[ix[m]].task;
			}
			c = graph_id128_cmp(t, trace);
			if (c == 0)
				c = k < id ? -1 : k > id;
			if (c < 0 || (pass == 1 && c == 0))
				a = m + 1;
			else
				b = m;
		}
		if (pass == 0)
			*lo = a;
		else
			*hi = a;
	}
}

static json_t *attrs_of(const char *text)
{
	json_t *o = text ? json_loads(text, 0, NULL) : NULL;

	if (!json_is_object(o)) {
		json_decref(o);
		o = json_object();
	}
	return o;
}

static int dump(FILE *f, json_t *root)
{
	int ret = 0;

	if (!root)
		return -ENOMEM;
	if (json_dumpf(root, f, JSON_COMPACT) || fputc('\n', f) == EOF || ferror(f))
		ret = -EIO;
	json_decref(root);
	return ret;
}

static json_t *hex64(uint64_t id)
{
	char b[17];

	graph_id64_hex(id, b);
	return json_string(b);
}

static json_t *hex128(struct graph_id128 id, bool short_ok)
{
	char b[33];

	graph_id128_hex(id, b);
	return json_string(short_ok && id.hi == 0 ? b + 16 : b);
}

static json_t *ns_str(int64_t ns)
{
	char b[24];

	snprintf(b, sizeof(b), "%lld", (long long)ns);
	return json_string(b);
}

/* Is e the task's own parent edge (said by parentSpanId / the first CHILD_OF)? */
static bool is_own_parent(const struct graph_task *t, const struct graph_edge *e)
{
	return e->kind == GRAPH_EDGE_PARENT && e->from_task == t->parent && t->parent &&
	       !e->from_event && !e->to_event;
}

/* ---- OTLP ---- */

static json_t *any_value(const json_t *v)
{
	json_t *o = json_object(), *x = NULL;
	char buf[24];

	if (!o)
		return NULL;
	switch (json_typeof(v)) {
	case JSON_STRING:
		json_object_set_new(o, "stringValue", json_deep_copy(v));
		break;
	case JSON_TRUE:
	case JSON_FALSE:
		json_object_set_new(o, "boolValue", json_boolean(json_is_true(v)));
		break;
	case JSON_INTEGER:
		snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
		json_object_set_new(o, "intValue", json_string(buf));
		break;
	case JSON_REAL:
		json_object_set_new(o, "doubleValue", json_real(json_real_value(v)));
		break;
	case JSON_ARRAY: {
		size_t i;
		json_t *e, *vals = json_array();

		json_array_foreach(v, i, e)
		{
			json_array_append_new(vals, any_value(e));
		}
		x = json_object();
		json_object_set_new(x, "values", vals);
		json_object_set_new(o, "arrayValue", x);
		break;
	}
	case JSON_OBJECT: {
		const char *k;
		json_t *e, *vals = json_array();

		json_object_foreach((json_t *)v, k, e)
		{
			json_t *kv = json_object();

			json_object_set_new(kv, "key", json_string(k));
			json_object_set_new(kv, "value", any_value(e));
			json_array_append_new(vals, kv);
		}
		x = json_object();
		json_object_set_new(x, "values", vals);
		json_object_set_new(o, "kvlistValue", x);
		break;
	}
	default: /* null: an empty AnyValue */
		break;
	}
	return o;
}

/* An AnyValue of a new JSON value, which it takes. */
static json_t *any_new(json_t *v)
{
	json_t *a = any_value(v);

	json_decref(v);
	return a;
}

static json_t *kv(const char *key, json_t *value /* an AnyValue, taken */)
{
	json_t *o = json_object();

	json_object_set_new(o, "key", json_string(key));
	json_object_set_new(o, "value", value);
	return o;
}

json_t *graph_otlp_attr(const char *key, json_t *v)
{
	return kv(key, any_new(v));
}

static json_t *kv_list(const json_t *obj)
{
	json_t *a = json_array(), *v;
	const char *k;

	json_object_foreach((json_t *)obj, k, v)
	{
		json_array_append_new(a, kv(k, any_value(v)));
	}
	return a;
}

static const char *const otlp_kinds[] = {
	"", "internal", "server", "client", "producer", "consumer"
};

static json_t *otlp_span(const struct xp *x, const struct graph_task *t)
{
	json_t *sp = json_object(), *a = attrs_of(t->attrs), *k, *evs, *links, *st;
	size_t lo, hi, i;
	int kind = 0;

	json_object_set_new(sp, "traceId", hex128(t->trace, false));
	json_object_set_new(sp, "spanId", hex64(t->id));
	if (t->parent)
		json_object_set_new(sp, "parentSpanId", hex64(t->parent));
	json_object_set_new(sp, "name", json_string(t->name));
	k = json_object_get(a, "span.kind");
	for (i = 1; json_is_string(k) && i < 6; i++) {
		if (!strcmp(json_string_value(k), otlp_kinds[i])) {
			kind = (int)i;
			json_object_del(a, "span.kind");
			break;
		}
	}
	json_object_set_new(sp, "kind", json_integer(kind));
	json_object_set_new(sp, "startTimeUnixNano", ns_str(t->start));
	json_object_set_new(sp, "endTimeUnixNano", ns_str(t->end));
	st = json_object();
	json_object_set_new(st, "code",
			    json_integer(t->status == GRAPH_STATUS_OK	 ? 1 :
					 t->status == GRAPH_STATUS_ERROR ? 2 :
									   0));
	k = json_object_get(a, "otel.status_description");
	if (json_is_string(k) && json_string_length(k)) { /* the importer keeps "" as it is */
		json_object_set(st, "message", k);
		json_object_del(a, "otel.status_description");
	}
	if (t->tid >= 0)
		json_object_set_new(a, "thread.id", json_integer(t->tid));
	json_object_set_new(sp, "attributes", kv_list(a));
	json_decref(a);

	evs = json_array();
	xp_range(x, false, t->trace, t->id, &lo, &hi);
	for (i = lo; i < hi; i++) {
		const struct graph_event *e = &x->g->events[x->events[i]];
		json_t *ev = json_object(), *ea = attrs_of(e->attrs);

		json_object_del(ea, WEFT_ATTR_EVENT_ID); /* reserved: only the event's own id */

		json_object_set_new(ev, "timeUnixNano", ns_str(e->time));
		json_object_set_new(ev, "name", json_string(e->name));
		if (e->id)
			json_object_set_new(ea, WEFT_ATTR_EVENT_ID, hex64(e->id));
		json_object_set_new(ev, "attributes", kv_list(ea));
		json_decref(ea);
		json_array_append_new(evs, ev);
	}
	json_object_set_new(sp, "events", evs);

	links = json_array();
	xp_range(x, true, t->trace, t->id, &lo, &hi);
	bool own = false;

	for (i = lo; i < hi; i++) {
		const struct graph_edge *e = &x->g->edges[x->edges[i]];
		json_t *l, *la;

		if (!own && is_own_parent(t, e)) {
			own = true; /* said by parentSpanId */
			continue;
		}
		l = json_object();
		la = json_array();
		json_object_set_new(l, "traceId", hex128(e->trace, false));
		json_object_set_new(l, "spanId", hex64(e->from_task));
		if (e->kind != GRAPH_EDGE_FOLLOWS || e->from_event || e->to_event) {
			json_array_append_new(
				la, kv(WEFT_ATTR_EDGE_KIND,
				       any_new(json_string(graph_edge_kind_name(e->kind)))));
			if (e->from_event)
				json_array_append_new(la, kv(WEFT_ATTR_FROM_EVENT,
							     any_new(hex64(e->from_event))));
			if (e->to_event)
				json_array_append_new(
					la, kv(WEFT_ATTR_TO_EVENT, any_new(hex64(e->to_event))));
		}
		json_object_set_new(l, "attributes", la);
		json_array_append_new(links, l);
	}
	json_object_set_new(sp, "links", links);
	json_object_set_new(sp, "status", st);
	return sp;
}

/* Tasks of one resource: same service, host and pid. */
static int cmp_resource(const void *a, const void *b, void *arg)
{
	const struct graph *g = arg;
	const struct graph_task *x = &g->tasks[*(const size_t *)a],
				*y = &g->tasks[*(const size_t *)b];
	int c = strcmp(x->service, y->service);

	if (c)
		return c;
	if ((c = strcmp(x->host, y->host)))
		return c;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return cmp_task(a, b, arg);
}

static int export_otlp(FILE *f, const struct xp *x)
{
	const struct graph *g = x->g;
	json_t *root = json_object(), *rss = json_array(), *spans = NULL;
	size_t *ix = malloc((g->ntasks + 1) * sizeof(size_t)), i;
	const struct graph_task *prev = NULL;

	if (!ix || !root || !rss) {
		free(ix);
		json_decref(root);
		json_decref(rss);
		return -ENOMEM;
	}
	memcpy(ix, x->tasks, g->ntasks * sizeof(size_t));
	qsort_r(ix, g->ntasks, sizeof(size_t), cmp_resource, (void *)g);
	for (i = 0; i < g->ntasks; i++) {
		const struct graph_task *t = &g->tasks[ix[i]];

		if (!prev || strcmp(prev->service, t->service) || strcmp(prev->host, t->host) ||
		    prev->pid != t->pid) {
			json_t *rs = json_object(), *res = json_object(), *ra = json_array();
			json_t *ss = json_array(), *scope = json_object();

			json_array_append_new(ra,
					      kv("service.name", any_new(json_string(t->service))));
			if (t->host[0])
				json_array_append_new(
					ra, kv("host.name", any_new(json_string(t->host))));
			if (t->pid >= 0)
				json_array_append_new(
					ra, kv("process.pid", any_new(json_integer(t->pid))));
			json_object_set_new(res, "attributes", ra);
			json_object_set_new(rs, "resource", res);
			spans = json_array();
			json_object_set_new(scope, "scope", json_object());
			json_object_set_new(scope, "spans", spans);
			json_array_append_new(ss, scope);
			json_object_set_new(rs, "scopeSpans", ss);
			json_array_append_new(rss, rs);
		}
		json_array_append_new(spans, otlp_span(x, t));
		prev = t;
	}
	free(ix);
	json_object_set_new(root, "resourceSpans", rss);
	return dump(f, root);
}

/* ---- Jaeger ---- */

static json_t *jtag(const char *key, const json_t *v)
{
	json_t *o = json_object();
	const char *type = "string";
	json_t *val;

	switch (json_typeof(v)) {
	case JSON_STRING:
		val = json_deep_copy(v);
		break;
	case JSON_TRUE:
	case JSON_FALSE:
		type = "bool";
		val = json_boolean(json_is_true(v));
		break;
	case JSON_INTEGER:
		type = "int64";
		val = json_integer(json_integer_value(v));
		break;
	case JSON_REAL:
		type = "float64";
		val = json_real(json_real_value(v));
		break;
	default: { /* lists, objects and null have no Jaeger type: their JSON text */
		char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);

		val = json_string(s ? s : "");
		free(s);
		break;
	}
	}
	json_object_set_new(o, "key", json_string(key));
	json_object_set_new(o, "type", json_string(type));
	json_object_set_new(o, "value", val);
	return o;
}

/* A tag of a new JSON value, which it takes. */
static json_t *jtag_new(const char *key, json_t *v)
{
	json_t *t = jtag(key, v);

	json_decref(v);
	return t;
}

/* Tags of obj's keys; those whose values Jaeger has no type for (lists, objects, null) are
 * written as their JSON text and named in the tag weft.json (a JSON list of keys), so that
 * the importer parses them back. */
static json_t *jtags(const json_t *obj)
{
	json_t *a = json_array(), *v, *js = json_array();
	const char *k;

	json_object_foreach((json_t *)obj, k, v)
	{
		json_array_append_new(a, jtag(k, v));
		if (json_is_array(v) || json_is_object(v) || json_is_null(v))
			json_array_append_new(js, json_string(k));
	}
	if (json_array_size(js)) {
		char *txt = json_dumps(js, JSON_COMPACT);
		json_t *t = json_string(txt ? txt : "[]");

		json_array_append_new(a, jtag(WEFT_ATTR_JSON, t));
		json_decref(t);
		free(txt);
	}
	json_decref(js);
	return a;
}

static json_t *jaeger_span(const struct xp *x, const struct graph_task *t, const char *proc)
{
	json_t *sp = json_object(), *a = attrs_of(t->attrs), *refs = json_array(), *logs;
	json_t *extra = json_array();
	size_t lo, hi, i;
	bool own = false;

	/* reserved names: what this writer itself puts there */
	json_object_del(a, WEFT_ATTR_EDGES);
	json_object_del(a, WEFT_ATTR_JSON);
	json_object_set_new(sp, "traceID", hex128(t->trace, true));
	json_object_set_new(sp, "spanID", hex64(t->id));
	json_object_set_new(sp, "flags", json_integer(1));
	json_object_set_new(sp, "operationName", json_string(t->name));
	xp_range(x, true, t->trace, t->id, &lo, &hi);
	/* the task's own parent first: the importer takes the first CHILD_OF as the parent */
	for (i = lo; i < hi; i++) {
		const struct graph_edge *e = &x->g->edges[x->edges[i]];

		if (is_own_parent(t, e)) {
			json_t *r = json_object();

			json_object_set_new(r, "refType", json_string("CHILD_OF"));
			json_object_set_new(r, "traceID", hex128(e->trace, true));
			json_object_set_new(r, "spanID", hex64(e->from_task));
			json_array_append_new(refs, r);
			own = true;
			break;
		}
	}
	for (i = lo; i < hi; i++) {
		const struct graph_edge *e = &x->g->edges[x->edges[i]];
		json_t *r;

		if (own && is_own_parent(t, e)) {
			own = false; /* written above: only the first one */
			continue;
		}
		if ((e->kind == GRAPH_EDGE_PARENT || e->kind == GRAPH_EDGE_FOLLOWS) &&
		    !e->from_event && !e->to_event) {
			r = json_object();
			json_object_set_new(r, "refType",
					    json_string(e->kind == GRAPH_EDGE_PARENT ?
								"CHILD_OF" :
								"FOLLOWS_FROM"));
			json_object_set_new(r, "traceID", hex128(e->trace, true));
			json_object_set_new(r, "spanID", hex64(e->from_task));
			json_array_append_new(refs, r);
			continue;
		}
		r = json_object();
		json_object_set_new(r, "kind", json_string(graph_edge_kind_name(e->kind)));
		json_object_set_new(r, "from", hex64(e->from_task));
		if (e->from_event)
			json_object_set_new(r, "from_event", hex64(e->from_event));
		if (e->to_event)
			json_object_set_new(r, "to_event", hex64(e->to_event));
		json_array_append_new(extra, r);
	}
	json_object_set_new(sp, "references", refs);
	json_object_set_new(sp, "startTime", json_integer(t->start / 1000));
	json_object_set_new(sp, "duration", json_integer(t->end / 1000 - t->start / 1000));
	if (t->status == GRAPH_STATUS_ERROR && !json_object_get(a, "error"))
		json_object_set_new(a, "error", json_true());
	if (t->status == GRAPH_STATUS_OK)
		json_object_set_new(a, "otel.status_code", json_string("OK"));
	if (t->tid >= 0)
		json_object_set_new(a, "thread.id", json_integer(t->tid));
	if (json_array_size(extra)) {
		char *s = json_dumps(extra, JSON_COMPACT);

		json_object_set_new(a, WEFT_ATTR_EDGES, json_string(s ? s : "[]"));
		free(s);
	}
	json_decref(extra);
	json_object_set_new(sp, "tags", jtags(a));
	json_decref(a);
	logs = json_array();
	xp_range(x, false, t->trace, t->id, &lo, &hi);
	for (i = lo; i < hi; i++) {
		const struct graph_event *e = &x->g->events[x->events[i]];
		json_t *l = json_object(), *fa = attrs_of(e->attrs), *fields;

		/* reserved names: what this writer itself puts there */
		json_object_del(fa, WEFT_ATTR_EVENT_ID);
		json_object_del(fa, WEFT_ATTR_JSON);

		json_object_set_new(l, "timestamp", json_integer(e->time / 1000));
		fields = json_array();
		{
			json_t *nm = json_string(e->name);

			json_array_append_new(fields, jtag("event", nm));
			json_decref(nm);
		}
		if (e->id)
			json_object_set_new(fa, WEFT_ATTR_EVENT_ID, hex64(e->id));
		json_object_del(fa, "event");
		{
			json_t *rest = jtags(fa);

			json_array_extend(fields, rest);
			json_decref(rest);
		}
		json_decref(fa);
		json_object_set_new(l, "fields", fields);
		json_array_append_new(logs, l);
	}
	json_object_set_new(sp, "logs", logs);
	json_object_set_new(sp, "processID", json_string(proc));
	json_object_set_new(sp, "warnings", json_null());
	return sp;
}

static int export_jaeger(FILE *f, const struct xp *x)
{
	const struct graph *g = x->g;
	json_t *root = json_object(), *data = json_array();
	size_t i = 0, j, k, *ix = malloc((g->ntasks + 1) * sizeof(size_t));

	if (!root || !data || !ix) {
		json_decref(root);
		json_decref(data);
		free(ix);
		return -ENOMEM;
	}
	while (i < g->ntasks) {
		struct graph_id128 tr = g->tasks[x->tasks[i]].trace;
		json_t *trace = json_object(), *spans = json_array(), *procs = json_object();
		size_t n, np = 0;

		for (j = i; j < g->ntasks && graph_id128_eq(g->tasks[x->tasks[j]].trace, tr); j++)
			;
		n = j - i;
		/* processes: one per (service, host, pid) of the trace, p1, p2, ... */
		memcpy(ix, x->tasks + i, n * sizeof(size_t));
		qsort_r(ix, n, sizeof(size_t), cmp_resource, (void *)g);
		json_t *pname = json_object(); /* task index -> process name */

		for (k = 0; k < n; k++) {
			const struct graph_task *t = &g->tasks[ix[k]],
						*p = k ? &g->tasks[ix[k - 1]] : NULL;
			char name[32], key[32];

			if (!p || strcmp(p->service, t->service) || strcmp(p->host, t->host) ||
			    p->pid != t->pid) {
				json_t *pr = json_object(), *tags = json_array();

				np++;
				snprintf(name, sizeof(name), "p%zu", np);
				json_object_set_new(pr, "serviceName", json_string(t->service));
				if (t->host[0])
					json_array_append_new(
						tags, jtag_new("hostname", json_string(t->host)));
				if (t->pid >= 0)
					json_array_append_new(tags, jtag_new("process.pid",
									     json_integer(t->pid)));
				json_object_set_new(pr, "tags", tags);
				json_object_set_new(procs, name, pr);
			}
			snprintf(name, sizeof(name), "p%zu", np);
			snprintf(key, sizeof(key), "%zu", ix[k]);
			json_object_set_new(pname, key, json_string(name));
		}
		for (k = i; k < j; k++) {
			char key[32];

			snprintf(key, sizeof(key), "%zu", x->tasks[k]);
			json_array_append_new(
				spans, jaeger_span(x, &g->tasks[x->tasks[k]],
						   json_string_value(json_object_get(pname, key))));
		}
		json_decref(pname);
		json_object_set_new(trace, "traceID", hex128(tr, true));
		json_object_set_new(trace, "spans", spans);
		json_object_set_new(trace, "processes", procs);
		json_object_set_new(trace, "warnings", json_null());
		json_array_append_new(data, trace);
		i = j;
	}
	free(ix);
	json_object_set_new(root, "data", data);
	json_object_set_new(root, "total", json_integer(0));
	json_object_set_new(root, "limit", json_integer(0));
	json_object_set_new(root, "offset", json_integer(0));
	json_object_set_new(root, "errors", json_null());
	return dump(f, root);
}

/* ---- Chrome trace events ---- */

/* A process lane: tasks of one (host, pid), or of one (host, service) when the pid is not
 * known; Chrome's pid is its number, from 1. */
static int cmp_lane(const void *a, const void *b, void *arg)
{
	const struct graph *g = arg;
	const struct graph_task *x = &g->tasks[*(const size_t *)a],
				*y = &g->tasks[*(const size_t *)b];
	int c = strcmp(x->host, y->host);

	if (c)
		return c;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->pid < 0 && (c = strcmp(x->service, y->service)))
		return c;
	if (x->start != y->start) /* then by start: threads are packed in time order */
		return x->start < y->start ? -1 : 1;
	if (x->end != y->end) /* longer first: the enclosing slice before what it encloses */
		return x->end > y->end ? -1 : 1;
	return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

static bool same_lane(const struct graph_task *x, const struct graph_task *y)
{
	return !strcmp(x->host, y->host) && x->pid == y->pid &&
	       (x->pid >= 0 || !strcmp(x->service, y->service));
}

/* Tasks with no thread id are packed into synthetic threads in which slices nest, as Chrome's
 * format needs: at most CHROME_MAX_LANES per process (then the last one takes the rest). */
#define CHROME_MAX_LANES 256
#define CHROME_LANE_BASE 1000000000 /* synthetic tids, far from real ones */

struct lane {
	int64_t stack[64]; /* ends of the open slices */
	size_t depth;
};

static json_t *meta(const char *what, int64_t pid, int64_t tid, const char *name)
{
	json_t *m = json_object(), *args = json_object();

	json_object_set_new(m, "name", json_string(what));
	json_object_set_new(m, "ph", json_string("M"));
	json_object_set_new(m, "pid", json_integer(pid));
	if (tid >= 0)
		json_object_set_new(m, "tid", json_integer(tid));
	json_object_set_new(args, "name", json_string(name));
	json_object_set_new(m, "args", args);
	return m;
}

static json_t *us(int64_t ns)
{
	if (ns % 1000 == 0)
		return json_integer(ns / 1000);
	return json_real((double)(ns / 1000) + (double)(ns % 1000) / 1000.0);
}

static int cmp_evid(const void *a, const void *b, void *arg)
{
	const struct graph *g = arg;
	const struct graph_event *x = &g->events[*(const size_t *)a];
	const struct graph_event *y = &g->events[*(const size_t *)b];
	int c = graph_id128_cmp(x->trace, y->trace);

	if (c)
		return c;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* When a flow leaves or arrives: at its event (X-Trace names them), else at the task's start. */
static int64_t flow_time(const struct graph *g, const size_t *evid, size_t n,
			 const struct graph_edge *e, uint64_t id, int64_t dflt)
{
	size_t lo = 0, hi = n;

	if (!id)
		return dflt;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct graph_event *v = &g->events[evid[mid]];
		int c = graph_id128_cmp(v->trace, e->trace);

		if (c == 0)
			c = v->id < id ? -1 : v->id > id;
		if (c == 0)
			return v->time;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return dflt;
}

struct chrome_place {
	int64_t pid, tid;
};

static int export_chrome(FILE *f, const struct xp *x)
{
	const struct graph *g = x->g;
	json_t *root = json_object(), *evs = json_array();
	size_t *ix = malloc((g->ntasks + 1) * sizeof(size_t)), i, k, lo, hi;
	struct chrome_place *pl = calloc(g->ntasks + 1, sizeof(*pl));
	struct lane *lanes = calloc(CHROME_MAX_LANES, sizeof(*lanes));
	int64_t pid = 0;
	int nlanes = 0;
	uint64_t flow = 0;
	struct imp_index byid = { 0 };
	size_t nevid = 0, *evid = malloc((g->nevents + 1) * sizeof(size_t));

	if (evid) {
		for (i = 0; i < g->nevents; i++)
			if (g->events[i].id)
				evid[nevid++] = i;
		qsort_r(evid, nevid, sizeof(size_t), cmp_evid, (void *)g);
	}
	if (!root || !evs || !ix || !pl || !lanes || !evid || imp_index_build(&byid, g, 0)) {
		free(evid);
		imp_index_free(&byid);
		json_decref(root);
		json_decref(evs);
		free(ix);
		free(pl);
		free(lanes);
		return -ENOMEM;
	}
	for (i = 0; i < g->ntasks; i++)
		ix[i] = i;
	qsort_r(ix, g->ntasks, sizeof(size_t), cmp_lane, (void *)g);
	for (i = 0; i < g->ntasks; i++) {
		const struct graph_task *t = &g->tasks[ix[i]];
		char name[600];

		if (i == 0 || !same_lane(&g->tasks[ix[i - 1]], t)) {
			pid++;
			nlanes = 0;
			memset(lanes, 0, CHROME_MAX_LANES * sizeof(*lanes));
			if (t->pid >= 0)
				snprintf(name, sizeof(name), "%s%s%s pid %lld", t->service,
					 t->host[0] ? " @ " : "", t->host, (long long)t->pid);
			else
				snprintf(name, sizeof(name), "%s%s%s",
					 t->service[0] ? t->service : "?", t->host[0] ? " @ " : "",
					 t->host);
			json_array_append_new(evs, meta("process_name", pid, -1, name));
		}
		pl[ix[i]].pid = pid;
		if (t->tid >= 0) {
			pl[ix[i]].tid = t->tid;
		} else {
			int l;

			for (l = 0; l < nlanes; l++) {
				struct lane *ln = &lanes[l];

				while (ln->depth > 0 && ln->stack[ln->depth - 1] <= t->start)
					ln->depth--;
				if (ln->depth == 0 ||
				    (ln->stack[ln->depth - 1] >= t->end && ln->depth < 64))
					break;
			}
			if (l == nlanes) {
				if (nlanes < CHROME_MAX_LANES) {
					nlanes++;
					snprintf(name, sizeof(name), "lane %d", l + 1);
					json_array_append_new(evs,
							      meta("thread_name", pid,
								   CHROME_LANE_BASE + l, name));
				} else {
					l = CHROME_MAX_LANES - 1;
				}
			}
			if (lanes[l].depth < 64)
				lanes[l].stack[lanes[l].depth++] = t->end;
			pl[ix[i]].tid = CHROME_LANE_BASE + l;
		}
	}
	/* thread names of the real threads, once per (pid, tid) */
	json_t *seen = json_object();

	for (i = 0; i < g->ntasks; i++) {
		const struct graph_task *t = &g->tasks[ix[i]];
		char name[48];

		if (t->tid < 0)
			continue;
		snprintf(name, sizeof(name), "%lld:%lld", (long long)pl[ix[i]].pid,
			 (long long)t->tid);
		if (json_object_get(seen, name))
			continue;
		json_object_set_new(seen, name, json_true());
		snprintf(name, sizeof(name), "tid %lld", (long long)t->tid);
		json_array_append_new(evs, meta("thread_name", pl[ix[i]].pid, t->tid, name));
	}
	json_decref(seen);
	for (i = 0; i < g->ntasks; i++) {
		const struct graph_task *t = &g->tasks[x->tasks[i]];
		const struct chrome_place *p = &pl[x->tasks[i]];
		json_t *ev = json_object(), *args = attrs_of(t->attrs);

		json_object_set_new(ev, "name", json_string(t->name));
		json_object_set_new(ev, "cat", json_string(t->service));
		json_object_set_new(ev, "ph", json_string("X"));
		json_object_set_new(ev, "ts", us(t->start));
		json_object_set_new(ev, "dur", us(t->end - t->start));
		json_object_set_new(ev, "pid", json_integer(p->pid));
		json_object_set_new(ev, "tid", json_integer(p->tid));
		json_object_set_new(args, "weft.trace", hex128(t->trace, false));
		json_object_set_new(args, "weft.id", hex64(t->id));
		if (t->parent)
			json_object_set_new(args, "weft.parent", hex64(t->parent));
		json_object_set_new(args, "weft.status", json_string(graph_status_name(t->status)));
		json_object_set_new(ev, "args", args);
		json_array_append_new(evs, ev);
		xp_range(x, false, t->trace, t->id, &lo, &hi);
		for (k = lo; k < hi; k++) {
			const struct graph_event *e = &g->events[x->events[k]];
			json_t *ie = json_object();

			json_object_set_new(ie, "name", json_string(e->name));
			json_object_set_new(ie, "ph", json_string("i"));
			json_object_set_new(ie, "s", json_string("t"));
			json_object_set_new(ie, "ts", us(e->time));
			json_object_set_new(ie, "pid", json_integer(p->pid));
			json_object_set_new(ie, "tid", json_integer(p->tid));
			json_object_set_new(ie, "args", attrs_of(e->attrs));
			json_array_append_new(evs, ie);
		}
	}
	/* message edges as flows: "s" in the sender's slice, "f" bound to the receiver's */
	for (i = 0; i < g->nedges; i++) {
		const struct graph_edge *e = &g->edges[i];
		long a, b;

		if (e->kind != GRAPH_EDGE_MESSAGE)
			continue;
		a = imp_index_find(&byid, e->trace, e->from_task);
		b = imp_index_find(&byid, e->trace, e->to_task);
		if (a < 0 || b < 0)
			continue;
		flow++;
		for (int end = 0; end < 2; end++) {
			long w = end ? b : a;
			json_t *fe = json_object();

			json_object_set_new(fe, "name", json_string("message"));
			json_object_set_new(fe, "cat", json_string("message"));
			json_object_set_new(fe, "ph", json_string(end ? "f" : "s"));
			if (end)
				json_object_set_new(fe, "bp", json_string("e"));
			json_object_set_new(fe, "id", json_integer((json_int_t)flow));
			json_object_set_new(
				fe, "ts",
				us(flow_time(g, evid, nevid, e, end ? e->to_event : e->from_event,
					     g->tasks[w].start)));
			json_object_set_new(fe, "pid", json_integer(pl[w].pid));
			json_object_set_new(fe, "tid", json_integer(pl[w].tid));
			json_array_append_new(evs, fe);
		}
	}
	imp_index_free(&byid);
	free(evid);
	free(ix);
	free(pl);
	free(lanes);
	json_object_set_new(root, "traceEvents", evs);
	json_object_set_new(root, "displayTimeUnit", json_string("ms"));
	return dump(f, root);
}

int graph_export(FILE *f, const struct graph *g, enum graph_format fmt)
{
	struct xp x;
	int ret;

	if (fmt != GRAPH_FMT_CHROME && fmt != GRAPH_FMT_OTLP && fmt != GRAPH_FMT_JAEGER)
		return -EINVAL;
	ret = xp_init(&x, g);
	if (ret)
		return ret;
	if (fmt == GRAPH_FMT_CHROME)
		ret = export_chrome(f, &x);
	else if (fmt == GRAPH_FMT_OTLP)
		ret = export_otlp(f, &x);
	else
		ret = export_jaeger(f, &x);
	xp_free(&x);
	if (!ret && fflush(f))
		ret = -EIO;
	return ret;
}

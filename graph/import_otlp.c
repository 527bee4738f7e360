// SPDX-License-Identifier: Apache-2.0
/*
 * OTLP JSON (an ExportTraceServiceRequest in the OTLP/JSON encoding of opentelemetry-proto, as
 * the collector's file exporter writes it, one request per line) into the model:
 *
 *   {"resourceSpans": [{"resource": {"attributes": [KeyValue...]},
 *                       "scopeSpans": [{"scope": {"name", "version"},
 *                                       "spans": [Span...]}]}]}
 *   Span: traceId, spanId, parentSpanId, name, kind, startTimeUnixNano, endTimeUnixNano,
 *         attributes, events [{timeUnixNano, name, attributes}],
 *         links [{traceId, spanId, attributes}], status {code, message}
 *
 * OTLP/JSON writes ids as hex, but protobuf's generic JSON writers emit bytes as base64, so both
 * are read; 64-bit times may be strings or numbers, enums numbers or names.  Mapping
 * (docs/graphs.md, "OTLP JSON"): type = (resource service.name, span name); host.name the host,
 * process.pid the pid, the span's thread.id the tid; the other resource attributes, then the
 * span's, the scope's name and version (as otel.scope.name/version), the kind (span.kind:
 * "server", ...) and status.message (otel.status_description) are the attributes; events are
 * events; parentSpanId is the parent edge; links are follows edges (or, with weft's
 * "weft.edge.kind" link attribute, the kind weft exported).  Links to another trace, or to a
 * span not in the file, have no second end in the model and are dropped; the old name
 * "instrumentationLibrarySpans" is read like "scopeSpans".
 *
 * AnyValue becomes plain JSON (string, bool, integer, double, list, object), nested at most
 * IMP_MAX_DEPTH deep: the conversion recurses, so the depth is bounded here, not only by
 * jansson.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "graph/import_priv.h"

struct opos {
	size_t v, r, s, sp; /* value (JSON Lines), resourceSpans, scopeSpans, spans */
};

struct octx {
	struct imp *im;
	const char *scopes_key;
	struct graph_edge *pend;
	size_t npend, cappend;
	struct opos *where;
	size_t nwhere, capwhere;
	char pre[160]; /* the path of the span being read */
	char vpre[32]; /* "(value N) " for the N-th request of a JSON Lines file, N > 1 */
};

static const json_t *get(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);

	return json_is_null(v) ? NULL : v;
}

static json_t *any_value(const json_t *av, int depth);

static json_t *kvlist(const json_t *values, int depth)
{
	const json_t *kv;
	json_t *o;
	size_t k;

	if (!json_is_array(values))
		return NULL;
	o = json_object();
	json_array_foreach(values, k, kv)
	{
		const json_t *key = get(kv, "key");
		json_t *v;

		if (!json_is_string(key) || !(v = any_value(get(kv, "value"), depth + 1)) ||
		    json_object_set_new(o, json_string_value(key), v)) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

/* An AnyValue as JSON; NULL if it is not one (or nests too deep). */
static json_t *any_value(const json_t *av, int depth)
{
	const json_t *v;
	int64_t i;

	if (depth > IMP_MAX_DEPTH)
		return NULL;
	if (!av) /* an empty AnyValue (the value is unset) */
		return json_null();
	if (!json_is_object(av) || json_object_size(av) > 1)
		return NULL;
	if (json_object_size(av) == 0)
		return json_null();
	if ((v = get(av, "stringValue")) || (v = get(av, "bytesValue")))
		return json_is_string(v) ? json_deep_copy(v) : NULL;
	if ((v = get(av, "boolValue")))
		return json_is_boolean(v) ? json_deep_copy(v) : NULL;
	if ((v = get(av, "intValue")))
		return imp_json_i64(v, &i) ? NULL : json_integer(i);
	if ((v = get(av, "doubleValue"))) {
		if (json_is_number(v))
			return json_real(json_number_value(v));
		return NULL;
	}
	if ((v = get(av, "arrayValue"))) {
		const json_t *vals = get(v, "values"), *x;
		json_t *a = json_array(), *y;
		size_t k;

		if (!json_is_object(v) || (vals && !json_is_array(vals))) {
			json_decref(a);
			return NULL;
		}
		json_array_foreach(vals, k, x)
		{
			y = any_value(x, depth + 1);
			if (!y || json_array_append_new(a, y)) {
				json_decref(a);
				return NULL;
			}
		}
		return a;
	}
	if ((v = get(av, "kvlistValue"))) {
		const json_t *vals = json_is_object(v) ? get(v, "values") : NULL;

		if (!json_is_object(v))
			return NULL;
		return vals ? kvlist(vals, depth) : json_object();
	}
	return NULL;
}

/* KeyValue list into obj; the path for messages is pre + what. */
static int attributes(struct octx *c, const json_t *list, json_t *obj, const char *what)
{
	const json_t *kv;
	size_t k;

	if (!list)
		return 0;
	if (!json_is_array(list))
		return imp_fail(c->im, "%s%s: not a list", c->pre, what);
	json_array_foreach(list, k, kv)
	{
		const json_t *key = get(kv, "key");
		json_t *v;

		if (!json_is_object(kv) || !json_is_string(key))
			return imp_fail(c->im, "%s%s[%zu]: not a KeyValue", c->pre, what, k);
		v = any_value(get(kv, "value"), 0);
		if (!v)
			return imp_fail(c->im,
					"%s%s[%zu].value: not an AnyValue (or nested over %d deep)",
					c->pre, what, k, IMP_MAX_DEPTH);
		if (json_object_set_new(obj, json_string_value(key), v))
			return imp_nomem(c->im);
	}
	return 0;
}

static int time_ns(const json_t *v, int64_t *ns)
{
	uint64_t u;

	if (imp_json_u64(v, (uint64_t)IMP_TIME_MAX, &u))
		return -EINVAL;
	*ns = (int64_t)u;
	return 0;
}

static int enum_value(const json_t *v, const char *const *names, int n)
{
	int i;

	if (!v)
		return 0;
	if (json_is_integer(v))
		return json_integer_value(v) >= 0 && json_integer_value(v) < n ?
			       (int)json_integer_value(v) :
			       -1;
	if (!json_is_string(v))
		return -1;
	for (i = 0; i < n; i++)
		if (!strcmp(json_string_value(v), names[i]))
			return i;
	return -1;
}

static const char *const kind_names[] = {
	"SPAN_KIND_UNSPECIFIED", "SPAN_KIND_INTERNAL", "SPAN_KIND_SERVER",
	"SPAN_KIND_CLIENT",	 "SPAN_KIND_PRODUCER", "SPAN_KIND_CONSUMER",
};
static const char *const kind_attr[] = { NULL,	   "internal", "server",
					 "client", "producer", "consumer" };
static const char *const status_names[] = { "STATUS_CODE_UNSET", "STATUS_CODE_OK",
					    "STATUS_CODE_ERROR" };

static int grow_pend(struct octx *c)
{
	if (c->npend == c->cappend) {
		size_t n = c->cappend ? c->cappend * 2 : 64;
		struct graph_edge *p = realloc(c->pend, n * sizeof(*p));

		if (!p)
			return imp_nomem(c->im);
		c->pend = p;
		c->cappend = n;
	}
	return 0;
}

static int parse_events(struct octx *c, const struct graph_task *t, const json_t *evs)
{
	const json_t *ev;
	size_t k;
	char what[48];
	int ret;

	if (!evs)
		return 0;
	if (!json_is_array(evs))
		return imp_fail(c->im, "%sevents: not a list", c->pre);
	json_array_foreach(evs, k, ev)
	{
		struct graph_event e = { .trace = t->trace,
					 .task = t->id,
					 .source = GRAPH_SRC_OTLP };
		const json_t *name = get(ev, "name");
		json_t *a, *id;

		if (!json_is_object(ev))
			return imp_fail(c->im, "%sevents[%zu]: not an object", c->pre, k);
		if (time_ns(get(ev, "timeUnixNano"), &e.time))
			return imp_fail(c->im, "%sevents[%zu].timeUnixNano: not a time in ns",
					c->pre, k);
		if (name && !json_is_string(name))
			return imp_fail(c->im, "%sevents[%zu].name: not a string", c->pre, k);
		a = json_object();
		if (!a)
			return imp_nomem(c->im);
		snprintf(what, sizeof(what), "events[%zu].attributes", k);
		ret = attributes(c, get(ev, "attributes"), a, what);
		id = json_object_get(a, WEFT_ATTR_EVENT_ID);
		if (!ret && id) {
			if (imp_id64(id, false, false, &e.id))
				ret = imp_fail(c->im, "%s%s.%s: not an event id", c->pre, what,
					       WEFT_ATTR_EVENT_ID);
			json_object_del(a, WEFT_ATTR_EVENT_ID);
		}
		if (!ret) {
			e.name = imp_jstr(c->im, name);
			e.attrs = imp_attrs(c->im, a);
			if (!e.name || !e.attrs || !graph_add_event(c->im->g, &e))
				ret = imp_nomem(c->im);
		}
		json_decref(a);
		if (ret)
			return ret;
	}
	return 0;
}

static int parse_links(struct octx *c, const struct graph_task *t, const json_t *links)
{
	const json_t *l;
	size_t k;
	char what[48];
	int ret;

	if (!links)
		return 0;
	if (!json_is_array(links))
		return imp_fail(c->im, "%slinks: not a list", c->pre);
	json_array_foreach(links, k, l)
	{
		struct graph_edge e = { .trace = t->trace,
					.kind = GRAPH_EDGE_FOLLOWS,
					.to_task = t->id,
					.source = GRAPH_SRC_OTLP };
		struct graph_id128 tr;
		json_t *a, *x;

		if (!json_is_object(l))
			return imp_fail(c->im, "%slinks[%zu]: not an object", c->pre, k);
		if (imp_id128(get(l, "traceId"), true, &tr))
			return imp_fail(c->im, "%slinks[%zu].traceId: not a trace id", c->pre, k);
		if (imp_id64(get(l, "spanId"), true, false, &e.from_task))
			return imp_fail(c->im, "%slinks[%zu].spanId: not a span id", c->pre, k);
		a = json_object();
		if (!a)
			return imp_nomem(c->im);
		snprintf(what, sizeof(what), "links[%zu].attributes", k);
		ret = attributes(c, get(l, "attributes"), a, what);
		x = json_object_get(a, WEFT_ATTR_EDGE_KIND);
		if (!ret && x) {
			int kn = json_is_string(x) ? graph_edge_kind_parse(json_string_value(x)) :
						     -1;

			if (kn < 0)
				ret = imp_fail(c->im, "%s%s.%s: not an edge kind", c->pre, what,
					       WEFT_ATTR_EDGE_KIND);
			e.kind = (enum graph_edge_kind)kn;
		}
		x = json_object_get(a, WEFT_ATTR_FROM_EVENT);
		if (!ret && x && imp_id64(x, false, true, &e.from_event))
			ret = imp_fail(c->im, "%s%s.%s: not an event id", c->pre, what,
				       WEFT_ATTR_FROM_EVENT);
		x = json_object_get(a, WEFT_ATTR_TO_EVENT);
		if (!ret && x && imp_id64(x, false, true, &e.to_event))
			ret = imp_fail(c->im, "%s%s.%s: not an event id", c->pre, what,
				       WEFT_ATTR_TO_EVENT);
		json_decref(a);
		if (ret)
			return ret;
		if (!graph_id128_eq(tr, t->trace) || e.from_task == t->id)
			continue; /* no second end in this trace's graph */
		if ((ret = grow_pend(c)))
			return ret;
		c->pend[c->npend++] = e;
	}
	return 0;
}

static int parse_span(struct octx *c, struct opos at, const json_t *sp, const json_t *res_attrs,
		      const json_t *scope)
{
	struct graph_task t = { .source = GRAPH_SRC_OTLP, .pid = -1, .tid = -1 };
	const json_t *v, *st;
	json_t *attrs, *x;
	int kind, code, ret;

	snprintf(c->pre, sizeof(c->pre), "%sresourceSpans[%zu].%s[%zu].spans[%zu].", c->vpre, at.r,
		 c->scopes_key, at.s, at.sp);
	if (!json_is_object(sp))
		return imp_fail(c->im, "%.*s: not an object", (int)strlen(c->pre) - 1, c->pre);
	if (imp_id128(get(sp, "traceId"), true, &t.trace))
		return imp_fail(c->im, "%straceId: not a trace id (32 hex digits, not 0)", c->pre);
	if (imp_id64(get(sp, "spanId"), true, false, &t.id))
		return imp_fail(c->im, "%sspanId: not a span id (16 hex digits, not 0)", c->pre);
	v = get(sp, "parentSpanId");
	if (v && !(json_is_string(v) && json_string_length(v) == 0) &&
	    imp_id64(v, true, true, &t.parent))
		return imp_fail(c->im, "%sparentSpanId: not a span id", c->pre);
	if (t.parent == t.id)
		return imp_fail(c->im, "%sparentSpanId: the span's own id", c->pre);
	v = get(sp, "name");
	if (v && !json_is_string(v))
		return imp_fail(c->im, "%sname: not a string", c->pre);
	t.name = imp_jstr(c->im, v);
	if (time_ns(get(sp, "startTimeUnixNano"), &t.start))
		return imp_fail(c->im, "%sstartTimeUnixNano: not a time in ns (0 to year 2200)",
				c->pre);
	if (time_ns(get(sp, "endTimeUnixNano"), &t.end))
		return imp_fail(c->im, "%sendTimeUnixNano: not a time in ns (0 to year 2200)",
				c->pre);
	if (t.end < t.start)
		return imp_fail(c->im, "%sendTimeUnixNano: before startTimeUnixNano", c->pre);
	kind = enum_value(get(sp, "kind"), kind_names, 6);
	if (kind < 0)
		return imp_fail(c->im, "%skind: not a SpanKind", c->pre);
	st = get(sp, "status");
	if (st && !json_is_object(st))
		return imp_fail(c->im, "%sstatus: not an object", c->pre);
	code = enum_value(get(st, "code"), status_names, 3);
	if (code < 0)
		return imp_fail(c->im, "%sstatus.code: not a StatusCode", c->pre);
	t.status = code == 1 ? GRAPH_STATUS_OK :
		   code == 2 ? GRAPH_STATUS_ERROR :
			       GRAPH_STATUS_UNSET;
	v = get(st, "message");
	if (v && !json_is_string(v))
		return imp_fail(c->im, "%sstatus.message: not a string", c->pre);

	attrs = json_deep_copy(res_attrs);
	if (!attrs)
		return imp_nomem(c->im);
	x = json_object_get(attrs, "service.name");
	t.service = json_is_string(x) ? imp_jstr(c->im, x) : "";
	json_object_del(attrs, "service.name");
	x = json_object_get(attrs, "host.name");
	t.host = json_is_string(x) ? imp_jstr(c->im, x) : "";
	json_object_del(attrs, "host.name");
	x = json_object_get(attrs, "process.pid");
	if (json_is_integer(x) && json_integer_value(x) >= 0) {
		t.pid = json_integer_value(x);
		json_object_del(attrs, "process.pid");
	}
	if ((ret = attributes(c, get(sp, "attributes"), attrs, "attributes")))
		goto out;
	x = json_object_get(attrs, "thread.id");
	if (json_is_integer(x) && json_integer_value(x) >= 0) {
		t.tid = json_integer_value(x);
		json_object_del(attrs, "thread.id");
	}
	ret = -ENOMEM;
	if (scope) {
		const json_t *n = get(scope, "name"), *ver = get(scope, "version");

		if (json_is_string(n) && json_string_length(n) &&
		    json_object_set(attrs, "otel.scope.name", (json_t *)n))
			goto nomem;
		if (json_is_string(ver) && json_string_length(ver) &&
		    json_object_set(attrs, "otel.scope.version", (json_t *)ver))
			goto nomem;
	}
	if (kind_attr[kind] &&
	    json_object_set_new(attrs, "span.kind", json_string(kind_attr[kind])))
		goto nomem;
	if (v && json_string_length(v) &&
	    json_object_set(attrs, "otel.status_description", (json_t *)v))
		goto nomem;
	t.attrs = imp_attrs(c->im, attrs);
	if (!t.name || !t.service || !t.host || !t.attrs || !graph_add_task(c->im->g, &t))
		goto nomem;
	if (t.parent) {
		if ((ret = grow_pend(c)))
			goto out;
		c->pend[c->npend++] = (struct graph_edge){ .trace = t.trace,
							   .kind = GRAPH_EDGE_PARENT,
							   .from_task = t.parent,
							   .to_task = t.id,
							   .source = GRAPH_SRC_OTLP };
	}
	if (c->nwhere == c->capwhere) {
		size_t n = c->capwhere ? c->capwhere * 2 : 64;
		struct opos *p = realloc(c->where, n * sizeof(*p));

		if (!p)
			goto nomem;
		c->where = p;
		c->capwhere = n;
	}
	c->where[c->nwhere++] = at;
	if ((ret = parse_events(c, &t, get(sp, "events"))))
		goto out;
	ret = parse_links(c, &t, get(sp, "links"));
	goto out;
nomem:
	ret = imp_nomem(c->im);
out:
	json_decref(attrs);
	return ret;
}

/*
 * Every span of this value read: refuse an id twice in a trace (against the earlier values of
 * a JSON Lines file too), add the edges whose ends are known.  where[] covers this value's
 * tasks, the last nwhere of the graph; an earlier value had no duplicate, so the second
 * occurrence of one is this value's.
 */
static int finish(struct octx *c)
{
	size_t base = c->im->g->ntasks - c->nwhere;
	struct imp_index ix;
	struct graph_id128 tr;
	uint64_t id;
	size_t k;
	int ret = 0;

	if (imp_index_build(&ix, c->im->g, c->im->nt))
		return imp_nomem(c->im);
	if (imp_index_dup(&ix, &tr, &id)) {
		long a = imp_index_find(&ix, tr, id);
		size_t i;
		struct opos at;

		for (i = (size_t)a + 1; i < c->im->g->ntasks; i++)
			if (c->im->g->tasks[i].id == id &&
			    graph_id128_eq(c->im->g->tasks[i].trace, tr))
				break;
		at = c->where[i >= base ? i - base : 0];
		ret = imp_fail(c->im,
			       "%sresourceSpans[%zu].%s[%zu].spans[%zu].spanId: %016llx "
			       "appears twice in its trace",
			       c->vpre, at.r, c->scopes_key, at.s, at.sp, (unsigned long long)id);
		goto out;
	}
	for (k = 0; k < c->npend; k++) {
		const struct graph_edge *e = &c->pend[k];

		if (e->kind != GRAPH_EDGE_PARENT && imp_index_find(&ix, e->trace, e->from_task) < 0)
			continue;
		if (!graph_add_edge(c->im->g, e)) {
			ret = imp_nomem(c->im);
			goto out;
		}
	}
out:
	imp_index_free(&ix);
	return ret;
}

int imp_otlp(struct imp *im, json_t *root, size_t value_index)
{
	struct octx c = { .im = im };
	const json_t *rss, *rs;
	size_t ri;
	int ret = 0;

	if (value_index)
		snprintf(c.vpre, sizeof(c.vpre), "(value %zu) ", value_index + 1);
	rss = json_is_object(root) ? get(root, "resourceSpans") : NULL;
	if (!json_is_array(rss))
		return imp_fail(im, "%sresourceSpans: missing, or not a list", c.vpre);
	json_array_foreach(rss, ri, rs)
	{
		const json_t *res, *sss, *ss;
		json_t *ra;
		size_t si;

		if (!json_is_object(rs)) {
			ret = imp_fail(im, "%sresourceSpans[%zu]: not an object", c.vpre, ri);
			break;
		}
		c.scopes_key = "scopeSpans";
		sss = get(rs, "scopeSpans");
		if (!sss && get(rs, "instrumentationLibrarySpans")) {
			c.scopes_key = "instrumentationLibrarySpans";
			sss = get(rs, c.scopes_key);
		}
		if (sss && !json_is_array(sss)) {
			ret = imp_fail(im, "resourceSpans[%zu].%s: not a list", ri, c.scopes_key);
			break;
		}
		res = get(rs, "resource");
		ra = json_object();
		if (!ra) {
			ret = imp_nomem(im);
			break;
		}
		snprintf(c.pre, sizeof(c.pre), "%sresourceSpans[%zu].resource.", c.vpre, ri);
		if (res && !json_is_object(res))
			ret = imp_fail(im, "resourceSpans[%zu].resource: not an object", ri);
		else if (res)
			ret = attributes(&c, get(res, "attributes"), ra, "attributes");
		json_array_foreach(sss, si, ss)
		{
			const json_t *spans, *sp, *scope;
			size_t pi;

			if (ret)
				break;
			if (!json_is_object(ss)) {
				ret = imp_fail(im, "resourceSpans[%zu].%s[%zu]: not an object", ri,
					       c.scopes_key, si);
				break;
			}
			scope = get(ss, "scope");
			if (!scope)
				scope = get(ss, "instrumentationLibrary");
			if (scope && !json_is_object(scope)) {
				ret = imp_fail(im,
					       "resourceSpans[%zu].%s[%zu].scope: not an object",
					       ri, c.scopes_key, si);
				break;
			}
			spans = get(ss, "spans");
			if (spans && !json_is_array(spans)) {
				ret = imp_fail(im, "resourceSpans[%zu].%s[%zu].spans: not a list",
					       ri, c.scopes_key, si);
				break;
			}
			json_array_foreach(spans, pi, sp)
			{
				struct opos at = { value_index, ri, si, pi };

				if ((ret = parse_span(&c, at, sp, ra, scope)))
					break;
			}
		}
		json_decref(ra);
		if (ret)
			break;
	}
	if (!ret)
		ret = finish(&c);
	free(c.pend);
	free(c.where);
	return ret;
}

// SPDX-License-Identifier: Apache-2.0
/*
 * Jaeger JSON, as the Jaeger UI downloads a trace and uploads one back ("JSON file" in its
 * search page), into the model.  The file is {"data": [trace...]}, a trace is {"traceID",
 * "spans": [...], "processes": {"p1": {"serviceName", "tags"}}}, and a span is {"traceID",
 * "spanID", "operationName", "references": [{"refType", "traceID", "spanID"}], "startTime"
 * and "duration" (microseconds), "tags", "logs", "processID"}.  Tags and log fields are
 * {"key", "type", "value"} with type string, bool, int64, float64 or binary.
 *
 * Mapping (docs/graphs.md, "Jaeger JSON"): a span is a task of type (process serviceName,
 * operationName); the process's "hostname" (or "host.name") tag is the host and its
 * "process.pid" the pid; the span's "thread.id" the tid; an "error" tag (any value but false:
 * Zipkin-born spans carry a message there) or "otel.status_code", the status; the other process tags and the span's tags are the
 * attributes.  CHILD_OF references are parent edges (the first one is the task's parent),
 * FOLLOWS_FROM ones follows edges; a span tag "weft.edges" (written by weft's own Jaeger
 * export for the edges Jaeger cannot say) adds the edges it lists.  Logs are events, named by
 * their "event" field ("log" without one).
 *
 * Edges are checked after every span is read: a follows-from reference to a span that is not
 * in the file has nowhere to point and is dropped (a parent outside the file is kept: the
 * model allows it); a span id twice in one trace is refused.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "graph/import_priv.h"

struct jproc {
	const char *service, *host;
	int64_t pid;
	json_t *tags; /* the other tags, an object */
};

/* Where in the file the span being read is, for messages. */
struct jpos {
	size_t t, s;
};

struct jedge {
	struct graph_edge e;
	struct jpos at;
	size_t ref; /* the reference's index, or SIZE_MAX for weft.edges */
};

struct jctx {
	struct imp *im;
	struct jedge *pend; /* edges waiting for every task of the file */
	size_t npend, cappend;
	struct jpos *where; /* of each task added, by its index from im->nt */
	size_t nwhere, capwhere;
};

static const json_t *get(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);

	return json_is_null(v) ? NULL : v;
}

/* A tag's value as JSON, by its declared type (or the JSON type when there is none). */
static json_t *tag_value(const json_t *kv, const char **why)
{
	const json_t *type = get(kv, "type"), *v = get(kv, "value");
	const char *t = json_is_string(type) ? json_string_value(type) : NULL;
	int64_t i;

	*why = "not a value of its type";
	if (type && !t) {
		*why = "type is not a string";
		return NULL;
	}
	if (!v) {
		*why = "no value";
		return NULL;
	}
	if (!t) {
		if (json_is_string(v) || json_is_boolean(v) || json_is_number(v))
			return json_deep_copy(v);
		return NULL;
	}
	if (!strcmp(t, "string") || !strcmp(t, "binary"))
		return json_is_string(v) ? json_deep_copy(v) : NULL;
	if (!strcmp(t, "bool")) {
		if (json_is_boolean(v))
			return json_deep_copy(v);
		if (json_is_string(v) && !strcmp(json_string_value(v), "true"))
			return json_true();
		if (json_is_string(v) && !strcmp(json_string_value(v), "false"))
			return json_false();
		return NULL;
	}
	if (!strcmp(t, "int64"))
		return imp_json_i64(v, &i) ? NULL : json_integer(i);
	if (!strcmp(t, "float64")) {
		if (json_is_number(v))
			return json_real(json_number_value(v));
		return NULL;
	}
	*why = "type is not string, bool, int64, float64 or binary";
	return NULL;
}

/* A list of {key, type, value} into obj; path names the list for messages. */
static int kv_list(struct jctx *c, const json_t *list, json_t *obj, const char *path)
{
	const json_t *kv;
	size_t k;

	if (!list)
		return 0;
	if (!json_is_array(list))
		return imp_fail(c->im, "%s: not a list", path);
	json_array_foreach(list, k, kv)
	{
		const json_t *key = get(kv, "key");
		const char *why;
		json_t *v;

		if (!json_is_object(kv))
			return imp_fail(c->im, "%s[%zu]: not an object", path, k);
		if (!json_is_string(key))
			return imp_fail(c->im, "%s[%zu].key: not a string", path, k);
		v = tag_value(kv, &why);
		if (!v)
			return imp_fail(c->im, "%s[%zu].value: %s", path, k, why);
		if (json_object_set_new(obj, json_string_value(key), v))
			return imp_nomem(c->im);
	}
	return 0;
}

/* weft's own extension: the keys listed in obj's weft.json hold JSON text (lists, objects and
 * null, which Jaeger tags cannot hold): parse them back. */
static int unjson(struct jctx *c, json_t *obj, const char *path)
{
	json_t *list = json_object_get(obj, WEFT_ATTR_JSON), *keys, *k;
	size_t i;
	int ret = 0;

	if (!list)
		return 0;
	keys = json_is_string(list) ?
		       json_loadb(json_string_value(list), json_string_length(list), 0, NULL) :
		       NULL;
	if (!json_is_array(keys)) {
		json_decref(keys);
		return imp_fail(c->im, "%s.%s: not a JSON list of keys", path, WEFT_ATTR_JSON);
	}
	json_array_foreach(keys, i, k)
	{
		json_t *v = json_is_string(k) ? json_object_get(obj, json_string_value(k)) : NULL;
		json_t *parsed = json_is_string(v) ?
					 json_loadb(json_string_value(v), json_string_length(v),
						    JSON_DECODE_ANY, NULL) :
					 NULL;

		if (!parsed || !imp_json_depth_ok(parsed, IMP_MAX_DEPTH)) {
			json_decref(parsed);
			ret = imp_fail(c->im,
				       "%s.%s[%zu]: not a key holding JSON text (nested at most %d "
				       "deep)",
				       path, WEFT_ATTR_JSON, i, IMP_MAX_DEPTH);
			break;
		}
		json_object_set_new(obj, json_string_value(k), parsed);
	}
	json_decref(keys);
	json_object_del(obj, WEFT_ATTR_JSON);
	return ret;
}

static void jproc_free(struct jproc *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		json_decref(p[i].tags);
	free(p);
}

/* Takes key k out of obj as a string (or NULL), the obj keeps the rest. */
static const char *take_str(struct jctx *c, json_t *obj, const char *k)
{
	json_t *v = json_object_get(obj, k);
	const char *s;

	if (!json_is_string(v))
		return NULL;
	s = graph_strndup(c->im->g, json_string_value(v), json_string_length(v));
	if (s)
		json_object_del(obj, k);
	return s;
}

static int parse_processes(struct jctx *c, size_t ti, const json_t *procs, json_t *names,
			   struct jproc **out, size_t *nout)
{
	const char *key;
	const json_t *p;
	struct jproc *pr;
	size_t n = 0;
	char path[96];
	int ret = 0;

	*out = NULL;
	*nout = 0;
	if (!procs)
		return 0;
	if (!json_is_object(procs))
		return imp_fail(c->im, "data[%zu].processes: not an object", ti);
	pr = calloc(json_object_size(procs) + 1, sizeof(*pr));
	if (!pr)
		return imp_nomem(c->im);
	json_object_foreach((json_t *)procs, key, p)
	{
		struct jproc *j = &pr[n];
		const json_t *sn;
		json_t *pid;

		j->pid = -1;
		if (!json_is_object(p)) {
			ret = imp_fail(c->im, "data[%zu].processes.%s: not an object", ti, key);
			goto out;
		}
		sn = get(p, "serviceName");
		if (sn && !json_is_string(sn)) {
			ret = imp_fail(c->im, "data[%zu].processes.%s.serviceName: not a string",
				       ti, key);
			goto out;
		}
		j->service = imp_jstr(c->im, sn);
		j->tags = json_object();
		n++;
		if (!j->service || !j->tags ||
		    json_object_set_new(names, key, json_integer((json_int_t)(n - 1)))) {
			ret = imp_nomem(c->im);
			goto out;
		}
		snprintf(path, sizeof(path), "data[%zu].processes.%.40s.tags", ti, key);
		if ((ret = kv_list(c, get(p, "tags"), j->tags, path)))
			goto out;
		j->host = take_str(c, j->tags, "hostname");
		if (!j->host)
			j->host = take_str(c, j->tags, "host.name");
		if (!j->host)
			j->host = "";
		pid = json_object_get(j->tags, "process.pid");
		if (json_is_integer(pid) && json_integer_value(pid) >= 0) {
			j->pid = json_integer_value(pid);
			json_object_del(j->tags, "process.pid");
		}
	}
out:
	if (ret) {
		jproc_free(pr, n);
		return ret;
	}
	*out = pr;
	*nout = n;
	return 0;
}

static int pend_edge(struct jctx *c, const struct graph_edge *e, struct jpos at, size_t ref)
{
	if (c->npend == c->cappend) {
		size_t n = c->cappend ? c->cappend * 2 : 64;
		struct jedge *p = realloc(c->pend, n * sizeof(*p));

		if (!p)
			return imp_nomem(c->im);
		c->pend = p;
		c->cappend = n;
	}
	c->pend[c->npend].e = *e;
	c->pend[c->npend].at = at;
	c->pend[c->npend].ref = ref;
	c->npend++;
	return 0;
}

/* weft's own extension: the edges Jaeger's references cannot say, as a JSON list in a tag. */
static int weft_edges(struct jctx *c, struct jpos at, const struct graph_task *t, const json_t *v)
{
	json_error_t je;
	json_t *list, *e;
	size_t k;
	int ret = 0;

	if (!json_is_string(v))
		return imp_fail(c->im, "data[%zu].spans[%zu].tags.%s: not a string", at.t, at.s,
				WEFT_ATTR_EDGES);
	list = json_loadb(json_string_value(v), json_string_length(v), JSON_REJECT_DUPLICATES, &je);
	if (!json_is_array(list)) {
		json_decref(list);
		return imp_fail(c->im, "data[%zu].spans[%zu].tags.%s: not a JSON list", at.t, at.s,
				WEFT_ATTR_EDGES);
	}
	json_array_foreach(list, k, e)
	{
		struct graph_edge ed = { .trace = t->trace,
					 .to_task = t->id,
					 .source = GRAPH_SRC_JAEGER };
		const json_t *kind = get(e, "kind");
		int kn = json_is_string(kind) ? graph_edge_kind_parse(json_string_value(kind)) : -1;

		if (kn < 0 || imp_id64(get(e, "from"), false, false, &ed.from_task) ||
		    (get(e, "from_event") &&
		     imp_id64(get(e, "from_event"), false, true, &ed.from_event)) ||
		    (get(e, "to_event") &&
		     imp_id64(get(e, "to_event"), false, true, &ed.to_event)) ||
		    ed.from_task == t->id) {
			ret = imp_fail(c->im, "data[%zu].spans[%zu].tags.%s[%zu]: not an edge",
				       at.t, at.s, WEFT_ATTR_EDGES, k);
			break;
		}
		ed.kind = (enum graph_edge_kind)kn;
		if ((ret = pend_edge(c, &ed, at, SIZE_MAX)))
			break;
	}
	json_decref(list);
	return ret;
}

static int parse_refs(struct jctx *c, struct jpos at, struct graph_task *t, const json_t *refs)
{
	const json_t *r;
	size_t k;
	int ret;

	if (!refs)
		return 0;
	if (!json_is_array(refs))
		return imp_fail(c->im, "data[%zu].spans[%zu].references: not a list", at.t, at.s);
	json_array_foreach(refs, k, r)
	{
		struct graph_edge e = { .to_task = t->id, .source = GRAPH_SRC_JAEGER };
		const json_t *rt = get(r, "refType");
		const char *rs = json_is_string(rt) ? json_string_value(rt) : "";
		struct graph_id128 tr;

		if (!json_is_object(r))
			return imp_fail(c->im,
					"data[%zu].spans[%zu].references[%zu]: not an object", at.t,
					at.s, k);
		if (!strcmp(rs, "CHILD_OF"))
			e.kind = GRAPH_EDGE_PARENT;
		else if (!strcmp(rs, "FOLLOWS_FROM"))
			e.kind = GRAPH_EDGE_FOLLOWS;
		else
			return imp_fail(
				c->im,
				"data[%zu].spans[%zu].references[%zu].refType: not CHILD_OF "
				"or FOLLOWS_FROM",
				at.t, at.s, k);
		if (imp_id128(get(r, "traceID"), true, &tr))
			return imp_fail(
				c->im,
				"data[%zu].spans[%zu].references[%zu].traceID: not a trace id",
				at.t, at.s, k);
		if (imp_id64(get(r, "spanID"), true, false, &e.from_task))
			return imp_fail(
				c->im, "data[%zu].spans[%zu].references[%zu].spanID: not a span id",
				at.t, at.s, k);
		if (e.from_task == t->id)
			return imp_fail(
				c->im,
				"data[%zu].spans[%zu].references[%zu].spanID: the span's own id",
				at.t, at.s, k);
		if (!graph_id128_eq(tr, t->trace))
			continue; /* another trace's span: the model's edges stay in one trace */
		e.trace = t->trace;
		if (e.kind == GRAPH_EDGE_PARENT && !t->parent)
			t->parent = e.from_task;
		if ((ret = pend_edge(c, &e, at, k)))
			return ret;
	}
	return 0;
}

static int parse_logs(struct jctx *c, struct jpos at, const struct graph_task *t,
		      const json_t *logs)
{
	const json_t *l;
	size_t k;
	char path[96];
	int ret = 0;

	if (!logs)
		return 0;
	if (!json_is_array(logs))
		return imp_fail(c->im, "data[%zu].spans[%zu].logs: not a list", at.t, at.s);
	json_array_foreach(logs, k, l)
	{
		struct graph_event e = { .trace = t->trace,
					 .task = t->id,
					 .source = GRAPH_SRC_JAEGER };
		const json_t *ts = get(l, "timestamp");
		json_t *f, *ev, *id;

		if (!json_is_object(l))
			return imp_fail(c->im, "data[%zu].spans[%zu].logs[%zu]: not an object",
					at.t, at.s, k);
		if (!json_is_integer(ts) || !imp_us_to_ns(json_integer_value(ts), &e.time))
			return imp_fail(c->im,
					"data[%zu].spans[%zu].logs[%zu].timestamp: not a time in "
					"microseconds",
					at.t, at.s, k);
		f = json_object();
		if (!f)
			return imp_nomem(c->im);
		snprintf(path, sizeof(path), "data[%zu].spans[%zu].logs[%zu].fields", at.t, at.s,
			 k);
		ret = kv_list(c, get(l, "fields"), f, path);
		if (!ret)
			ret = unjson(c, f, path);
		ev = json_object_get(f, "event");
		if (!ret && json_is_string(ev)) {
			e.name = graph_strndup(c->im->g, json_string_value(ev),
					       json_string_length(ev));
			json_object_del(f, "event");
		} else {
			e.name = graph_strndup(c->im->g, "log", 3);
		}
		id = json_object_get(f, WEFT_ATTR_EVENT_ID);
		if (!ret && id) {
			if (imp_id64(id, false, false, &e.id))
				ret = imp_fail(c->im, "%s.%s: not an event id", path,
					       WEFT_ATTR_EVENT_ID);
			json_object_del(f, WEFT_ATTR_EVENT_ID);
		}
		if (!ret) {
			e.attrs = imp_attrs(c->im, f);
			if (!e.name || !e.attrs || !graph_add_event(c->im->g, &e))
				ret = imp_nomem(c->im);
		}
		json_decref(f);
		if (ret)
			return ret;
	}
	return 0;
}

static int parse_span(struct jctx *c, struct jpos at, const json_t *sp, const struct jproc *procs,
		      const json_t *names)
{
	struct graph_task t = { .source = GRAPH_SRC_JAEGER, .pid = -1, .tid = -1 };
	const json_t *v, *pidx;
	const struct jproc *pr = NULL;
	json_t *attrs = NULL, *x;
	char path[96];
	int64_t st, dur;
	int ret;

	if (!json_is_object(sp))
		return imp_fail(c->im, "data[%zu].spans[%zu]: not an object", at.t, at.s);
	if (imp_id128(get(sp, "traceID"), true, &t.trace))
		return imp_fail(c->im, "data[%zu].spans[%zu].traceID: not a trace id", at.t, at.s);
	if (imp_id64(get(sp, "spanID"), true, false, &t.id))
		return imp_fail(c->im, "data[%zu].spans[%zu].spanID: not a span id", at.t, at.s);
	v = get(sp, "operationName");
	if (v && !json_is_string(v))
		return imp_fail(c->im, "data[%zu].spans[%zu].operationName: not a string", at.t,
				at.s);
	t.name = imp_jstr(c->im, v);
	v = get(sp, "startTime");
	if (!json_is_integer(v) || !imp_us_to_ns(json_integer_value(v), &st))
		return imp_fail(c->im,
				"data[%zu].spans[%zu].startTime: not a time in microseconds (0 to "
				"year 2200)",
				at.t, at.s);
	v = get(sp, "duration");
	if (!json_is_integer(v) || !imp_us_to_ns(json_integer_value(v), &dur) ||
	    dur > IMP_TIME_MAX - st)
		return imp_fail(c->im,
				"data[%zu].spans[%zu].duration: not a duration in microseconds (0 "
				"or more)",
				at.t, at.s);
	t.start = st;
	t.end = st + dur;
	v = get(sp, "processID");
	if (v) {
		pidx = json_is_string(v) ? json_object_get(names, json_string_value(v)) : NULL;
		if (!pidx)
			return imp_fail(c->im,
					"data[%zu].spans[%zu].processID: not a process of "
					"data[%zu].processes",
					at.t, at.s, at.t);
		pr = &procs[json_integer_value(pidx)];
	}
	attrs = json_object();
	if (!attrs)
		return imp_nomem(c->im);
	if (pr) {
		t.service = pr->service;
		t.host = pr->host;
		t.pid = pr->pid;
		if (json_object_update(attrs, pr->tags)) {
			ret = imp_nomem(c->im);
			goto out;
		}
	} else {
		t.service = t.host = "";
	}
	snprintf(path, sizeof(path), "data[%zu].spans[%zu].tags", at.t, at.s);
	if ((ret = kv_list(c, get(sp, "tags"), attrs, path)) || (ret = unjson(c, attrs, path)))
		goto out;
	x = json_object_get(attrs, "thread.id");
	if (json_is_integer(x) && json_integer_value(x) >= 0) {
		t.tid = json_integer_value(x);
		json_object_del(attrs, "thread.id");
	}
	x = json_object_get(attrs, "error");
	if (x && !json_is_false(x) &&
	    !(json_is_string(x) && !strcmp(json_string_value(x), "false"))) {
		t.status = GRAPH_STATUS_ERROR;
		if (json_is_true(x))
			json_object_del(attrs, "error");
	}
	x = json_object_get(attrs, "otel.status_code");
	if (json_is_string(x) &&
	    (!strcmp(json_string_value(x), "OK") || !strcmp(json_string_value(x), "ERROR"))) {
		if (t.status == GRAPH_STATUS_UNSET)
			t.status = json_string_value(x)[0] == 'O' ? GRAPH_STATUS_OK :
								    GRAPH_STATUS_ERROR;
		json_object_del(attrs, "otel.status_code");
	}
	if ((ret = parse_refs(c, at, &t, get(sp, "references"))))
		goto out;
	x = json_object_get(attrs, WEFT_ATTR_EDGES);
	if (x) {
		if ((ret = weft_edges(c, at, &t, x)))
			goto out;
		json_object_del(attrs, WEFT_ATTR_EDGES);
	}
	t.attrs = imp_attrs(c->im, attrs);
	if (!t.name || !t.service || !t.attrs || !graph_add_task(c->im->g, &t)) {
		ret = imp_nomem(c->im);
		goto out;
	}
	if (c->nwhere == c->capwhere) {
		size_t n = c->capwhere ? c->capwhere * 2 : 64;
		struct jpos *p = realloc(c->where, n * sizeof(*p));

		if (!p) {
			ret = imp_nomem(c->im);
			goto out;
		}
		c->where = p;
		c->capwhere = n;
	}
	c->where[c->nwhere++] = at;
	ret = parse_logs(c, at, &t, get(sp, "logs"));
out:
	json_decref(attrs);
	return ret;
}

/* Every span read: refuse duplicate ids, add the edges whose ends are known. */
static int finish(struct jctx *c)
{
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

		for (i = (size_t)a + 1; i < c->im->g->ntasks; i++)
			if (c->im->g->tasks[i].id == id &&
			    graph_id128_eq(c->im->g->tasks[i].trace, tr))
				break;
		ret = imp_fail(c->im,
			       "data[%zu].spans[%zu].spanID: %016llx appears twice in its trace",
			       c->where[i - c->im->nt].t, c->where[i - c->im->nt].s,
			       (unsigned long long)id);
		goto out;
	}
	for (k = 0; k < c->npend; k++) {
		const struct graph_edge *e = &c->pend[k].e;

		if (e->kind != GRAPH_EDGE_PARENT && imp_index_find(&ix, e->trace, e->from_task) < 0)
			continue; /* the other end is not in the file */
		if (!graph_add_edge(c->im->g, e)) {
			ret = imp_nomem(c->im);
			goto out;
		}
	}
out:
	imp_index_free(&ix);
	return ret;
}

int imp_jaeger(struct imp *im, json_t *root)
{
	struct jctx c = { .im = im };
	const json_t *data, *tr;
	size_t ti;
	int ret = 0;

	data = json_is_object(root) ? get(root, "data") : NULL;
	if (!json_is_array(data))
		return imp_fail(im,
				"data: missing, or not a list (a Jaeger JSON file is {\"data\": "
				"[trace...]})");
	json_array_foreach(data, ti, tr)
	{
		const json_t *spans, *sp;
		struct jproc *procs = NULL;
		size_t np = 0, si;
		json_t *names;

		if (!json_is_object(tr)) {
			ret = imp_fail(im, "data[%zu]: not an object", ti);
			break;
		}
		spans = get(tr, "spans");
		if (!json_is_array(spans)) {
			ret = imp_fail(im, "data[%zu].spans: missing, or not a list", ti);
			break;
		}
		names = json_object();
		if (!names) {
			ret = imp_nomem(im);
			break;
		}
		ret = parse_processes(&c, ti, get(tr, "processes"), names, &procs, &np);
		json_array_foreach(spans, si, sp)
		{
			struct jpos at = { ti, si };

			if (ret)
				break;
			ret = parse_span(&c, at, sp, procs, names);
		}
		jproc_free(procs, np);
		json_decref(names);
		if (ret)
			break;
	}
	if (!ret)
		ret = finish(&c);
	free(c.pend);
	free(c.where);
	return ret;
}

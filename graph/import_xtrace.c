// SPDX-License-Identifier: Apache-2.0
/*
 * X-Trace JSON reports, as the X-Trace web UI reads them, into the model.  X-Trace is
 * event-based: the file is a list of traces [{"id": TASKID, "reports": [report...]}], and a
 * report is one event, an object whose values are lists of strings:
 *   "X-Trace"    the event's metadata, hex: one flags byte, the 8-byte task id (the trace),
 *                the 8-byte event id (34 hex digits);
 *   "Edge"       the ids of the events it follows (16 hex digits each);
 *   "Timestamp"  seconds since the epoch with a fraction ("1371663412.000123");
 *   "Host", "ProcessID" ("pid@host"), "ThreadID", "ThreadName", "Agent", "Label";
 *   any other key: kept, as an attribute of the event.
 *
 * There are no spans, so tasks are derived (docs/graphs.md, "X-Trace"): the events of one
 * thread (trace, host, pid, tid), in time order, form one task as long as each event follows
 * (has an Edge to) an event of the thread's current task; an event that does not starts a new
 * task there.  A task's id is its first event's id, its type (that event's Agent, Label), its
 * span from its first to its last event.  An Edge inside a task only orders events; one across
 * tasks becomes an edge between them with both event ids: a message edge when the processes
 * (or hosts) differ, a fork edge when the cause is in another thread of the process and its
 * task went on after it (the two threads ran concurrently), a follows edge otherwise (the
 * cause was the last thing its task did: a hand-off).  The first cross-task edge into a task's
 * first event also makes that task its parent (with a parent edge), which gives the Gantt chart
 * its indentation.  An Edge naming an event not in the file has no other end: it is kept in the
 * event's attributes (its "Edge" list, of those ids only).
 *
 * Everything is sorted once (by thread and time for the tasks, by id for the lookups): no
 * quadratic step, and no recursion over the event graph, which hostile input may make cyclic.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "graph/import_priv.h"

struct xev {
	struct graph_id128 trace;
	uint64_t id;
	int64_t time;
	const char *host; /* "" if none */
	size_t hostlen;
	int64_t pid, tid;
	const json_t *rep; /* the report */
	size_t item, pos; /* where in the file */
	size_t task; /* index of its task in xctx.tasks */
	size_t order; /* its place in its thread's sequence */
};

struct xtask {
	size_t first, last; /* events (indices into ev) */
	uint64_t parent;
	bool has_parent;
};

struct xctx {
	struct imp *im;
	struct xev *ev;
	size_t n;
	size_t *byid; /* by (trace, id) */
	size_t *bythread; /* by (trace, host, pid, tid, time, position) */
	struct xtask *tasks;
	size_t ntasks;
};

static const json_t *get(const json_t *o, const char *k)
{
	const json_t *v = json_object_get(o, k);

	return json_is_null(v) ? NULL : v;
}

/* The first string of a report's value, or NULL if the key is absent or its list empty. */
static const json_t *first(const json_t *rep, const char *k)
{
	return json_array_get(get(rep, k), 0);
}

static int parse_seconds(const char *s, size_t len, int64_t *ns)
{
	uint64_t sec = 0, frac = 0;
	size_t i = 0, d = 0;

	if (len == 0)
		return -EINVAL;
	for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
		sec = sec * 10 + (uint64_t)(s[i] - '0');
		if (sec > (uint64_t)(IMP_TIME_MAX / 1000000000))
			return -EINVAL;
	}
	if (i == 0)
		return -EINVAL;
	if (i < len && s[i] == '.') {
		for (i++; i < len && s[i] >= '0' && s[i] <= '9'; i++, d++)
			if (d < 9)
				frac = frac * 10 + (uint64_t)(s[i] - '0');
		for (; d < 9; d++)
			frac *= 10;
	}
	if (i != len)
		return -EINVAL;
	if ((int64_t)sec * 1000000000 + (int64_t)frac > IMP_TIME_MAX)
		return -EINVAL;
	*ns = (int64_t)sec * 1000000000 + (int64_t)frac;
	return 0;
}

static int parse_report(struct xctx *c, size_t i, size_t j, const json_t *rep, uint64_t task,
			struct xev *e)
{
	const char *key, *s;
	const json_t *v, *x;
	size_t len, k;
	uint64_t t, flags;

	memset(e, 0, sizeof(*e));
	e->item = i;
	e->pos = j;
	e->rep = rep;
	e->pid = e->tid = -1;
	if (!json_is_object(rep))
		return imp_fail(c->im, "[%zu].reports[%zu]: not an object", i, j);
	json_object_foreach((json_t *)rep, key, v)
	{
		if (!json_is_array(v))
			return imp_fail(c->im, "[%zu].reports[%zu].%s: not a list of strings", i, j,
					key);
		json_array_foreach(v, k, x)
		{
			if (!json_is_string(x))
				return imp_fail(c->im, "[%zu].reports[%zu].%s[%zu]: not a string",
						i, j, key, k);
		}
	}
	v = first(rep, "X-Trace");
	s = json_string_value(v);
	len = json_string_length(v);
	if (!v || len != 34 || graph_id64_parse_hex(s, 2, &flags) ||
	    graph_id64_parse_hex(s + 2, 16, &t) || graph_id64_parse_hex(s + 18, 16, &e->id) ||
	    e->id == 0)
		return imp_fail(
			c->im,
			"[%zu].reports[%zu].X-Trace[0]: not X-Trace metadata (34 hex digits: "
			"flags, task id, event id not 0)",
			i, j);
	if (t != task)
		return imp_fail(c->im,
				"[%zu].reports[%zu].X-Trace[0]: task id %016llx, not the trace's "
				"(%016llx)",
				i, j, (unsigned long long)t, (unsigned long long)task);
	e->trace.lo = task;
	v = first(rep, "Timestamp");
	if (!v || parse_seconds(json_string_value(v), json_string_length(v), &e->time))
		return imp_fail(c->im,
				"[%zu].reports[%zu].Timestamp[0]: not seconds since the epoch "
				"(\"1371663412.000123\", before year 2200)",
				i, j);
	v = first(rep, "ProcessID");
	if (v) {
		const char *p = json_string_value(v), *at = memchr(p, '@', json_string_length(v));
		size_t plen = at ? (size_t)(at - p) : json_string_length(v);
		json_t *num = json_stringn(p, plen);
		int bad = !num || imp_json_i64(num, &e->pid) || e->pid < 0;

		json_decref(num);
		if (bad)
			return imp_fail(
				c->im,
				"[%zu].reports[%zu].ProcessID[0]: not \"pid\" or \"pid@host\"", i,
				j);
		if (at) {
			e->host = at + 1;
			e->hostlen = json_string_length(v) - plen - 1;
		}
	}
	v = first(rep, "Host");
	if (v) {
		e->host = json_string_value(v);
		e->hostlen = json_string_length(v);
	}
	if (!e->host) {
		e->host = "";
		e->hostlen = 0;
	}
	v = first(rep, "ThreadID");
	if (v && (imp_json_i64(v, &e->tid) || e->tid < 0))
		return imp_fail(c->im, "[%zu].reports[%zu].ThreadID[0]: not a thread id", i, j);
	v = get(rep, "Edge");
	json_array_foreach(v, k, x)
	{
		uint64_t p;

		if (graph_id64_parse_hex(json_string_value(x), json_string_length(x), &p) || !p)
			return imp_fail(c->im, "[%zu].reports[%zu].Edge[%zu]: not an event id", i,
					j, k);
	}
	return 0;
}

static int cmp_byid(const void *a, const void *b, void *arg)
{
	const struct xev *ev = arg, *x = &ev[*(const size_t *)a], *y = &ev[*(const size_t *)b];
	int c = graph_id128_cmp(x->trace, y->trace);

	if (c)
		return c;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

static int cmp_bythread(const void *a, const void *b, void *arg)
{
	const struct xev *ev = arg, *x = &ev[*(const size_t *)a], *y = &ev[*(const size_t *)b];
	int c = graph_id128_cmp(x->trace, y->trace);
	size_t n = x->hostlen < y->hostlen ? x->hostlen : y->hostlen;

	if (c)
		return c;
	if ((c = memcmp(x->host, y->host, n)))
		return c;
	if (x->hostlen != y->hostlen)
		return x->hostlen < y->hostlen ? -1 : 1;
	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

static bool same_thread(const struct xev *x, const struct xev *y)
{
	return graph_id128_eq(x->trace, y->trace) && x->hostlen == y->hostlen &&
	       !memcmp(x->host, y->host, x->hostlen) && x->pid == y->pid && x->tid == y->tid;
}

static bool same_process(const struct xev *x, const struct xev *y)
{
	return x->hostlen == y->hostlen && !memcmp(x->host, y->host, x->hostlen) &&
	       x->pid == y->pid;
}

static long find_event(const struct xctx *c, struct graph_id128 trace, uint64_t id)
{
	size_t lo = 0, hi = c->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct xev *e = &c->ev[c->byid[mid]];
		int d = graph_id128_cmp(e->trace, trace);

		if (d == 0)
			d = e->id < id ? -1 : e->id > id;
		if (d == 0)
			return (long)c->byid[mid];
		if (d < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* Splits each thread's sequence into tasks. */
static int derive_tasks(struct xctx *c)
{
	size_t k, cur = SIZE_MAX;

	c->tasks = calloc(c->n + 1, sizeof(*c->tasks));
	if (!c->tasks)
		return imp_nomem(c->im);
	for (k = 0; k < c->n; k++) {
		struct xev *e = &c->ev[c->bythread[k]];
		bool cont = false;
		size_t j;
		const json_t *p;

		e->order = k;
		if (k > 0 && same_thread(&c->ev[c->bythread[k - 1]], e)) {
			json_array_foreach(get(e->rep, "Edge"), j, p)
			{
				uint64_t id;
				long w;

				graph_id64_parse_hex(json_string_value(p), json_string_length(p),
						     &id);
				w = find_event(c, e->trace, id);
				if (w >= 0 && c->ev[w].task == cur && c->ev[w].order < k) {
					cont = true;
					break;
				}
			}
		}
		if (!cont) {
			cur = c->ntasks++;
			c->tasks[cur].first = c->bythread[k];
		}
		e->task = cur;
		c->tasks[cur].last = c->bythread[k];
	}
	return 0;
}

static const char *const special[] = { "X-Trace", "Edge",      "Timestamp", "Label",
				       "Host",	  "ProcessID", "ThreadID",  "ThreadName" };

/* The event's attributes: its other keys, a one-string list as the string. */
static json_t *event_attrs(const json_t *rep, json_t *unknown_edges)
{
	json_t *o = json_object(), *v;
	const char *key;
	size_t s;

	json_object_foreach((json_t *)rep, key, v)
	{
		for (s = 0; s < sizeof(special) / sizeof(special[0]); s++)
			if (!strcmp(key, special[s]))
				break;
		if (s < sizeof(special) / sizeof(special[0]))
			continue;
		json_object_set_new(o, key,
				    json_array_size(v) == 1 ? json_deep_copy(json_array_get(v, 0)) :
							      json_deep_copy(v));
	}
	if (json_array_size(unknown_edges))
		json_object_set(o, "Edge", unknown_edges);
	return o;
}

static int add_edge(struct imp *im, struct graph_id128 trace, enum graph_edge_kind kind,
		    uint64_t ft, uint64_t fe, uint64_t tt, uint64_t te)
{
	struct graph_edge e = { .trace = trace,
				.kind = kind,
				.from_task = ft,
				.from_event = fe,
				.to_task = tt,
				.to_event = te,
				.source = GRAPH_SRC_XTRACE };

	return graph_add_edge(im->g, &e) ? 0 : imp_nomem(im);
}

static int emit(struct xctx *c)
{
	struct imp *im = c->im;
	size_t k, t;
	int ret = 0;

	/* edges first (they name the parents), then tasks, then events */
	for (k = 0; k < c->n && !ret; k++) {
		struct xev *e = &c->ev[k];
		struct xtask *to = &c->tasks[e->task];
		const json_t *p;
		size_t j;

		json_array_foreach(get(e->rep, "Edge"), j, p)
		{
			uint64_t id;
			long w;
			enum graph_edge_kind kind;
			const struct xev *f;
			const struct xtask *from;

			graph_id64_parse_hex(json_string_value(p), json_string_length(p), &id);
			w = find_event(c, e->trace, id);
			if (w < 0 || c->ev[w].task == e->task)
				continue; /* unknown (kept as an attribute), or inside the task */
			f = &c->ev[w];
			from = &c->tasks[f->task];
			if (!same_process(f, e))
				kind = GRAPH_EDGE_MESSAGE;
			else if (f->tid != e->tid && from->last != (size_t)w)
				kind = GRAPH_EDGE_FORK;
			else
				kind = GRAPH_EDGE_FOLLOWS;
			ret = add_edge(im, e->trace, kind, c->ev[from->first].id, f->id,
				       c->ev[to->first].id, e->id);
			if (ret)
				break;
			if (to->first == k && !to->has_parent) {
				to->has_parent = true;
				to->parent = c->ev[from->first].id;
				ret = add_edge(im, e->trace, GRAPH_EDGE_PARENT, to->parent, 0,
					       e->id, 0);
				if (ret)
					break;
			}
		}
	}
	for (t = 0; t < c->ntasks && !ret; t++) {
		const struct xtask *x = &c->tasks[t];
		const struct xev *f = &c->ev[x->first], *l = &c->ev[x->last];
		struct graph_task tk = { .trace = f->trace,
					 .id = f->id,
					 .parent = x->parent,
					 .pid = f->pid,
					 .tid = f->tid,
					 .start = f->time,
					 .end = l->time,
					 .status = GRAPH_STATUS_UNSET,
					 .source = GRAPH_SRC_XTRACE };
		const json_t *tn = first(f->rep, "ThreadName");
		json_t *a = json_object();

		if (tn)
			json_object_set(a, "ThreadName", (json_t *)tn);
		tk.service = imp_jstr(im, first(f->rep, "Agent"));
		tk.name = imp_jstr(im, first(f->rep, "Label"));
		tk.host = graph_strndup(im->g, f->host, f->hostlen);
		tk.attrs = imp_attrs(im, a);
		json_decref(a);
		if (!tk.service || !tk.name || !tk.host || !tk.attrs || !graph_add_task(im->g, &tk))
			ret = imp_nomem(im);
	}
	for (k = 0; k < c->n && !ret; k++) {
		const struct xev *e = &c->ev[k];
		struct graph_event ge = { .trace = e->trace,
					  .task = c->ev[c->tasks[e->task].first].id,
					  .id = e->id,
					  .time = e->time,
					  .source = GRAPH_SRC_XTRACE };
		json_t *unknown = json_array(), *a;
		const json_t *p;
		size_t j;

		json_array_foreach(get(e->rep, "Edge"), j, p)
		{
			uint64_t id;

			graph_id64_parse_hex(json_string_value(p), json_string_length(p), &id);
			if (find_event(c, e->trace, id) < 0)
				json_array_append(unknown, (json_t *)p);
		}
		a = event_attrs(e->rep, unknown);
		json_decref(unknown);
		ge.name = imp_jstr(im, first(e->rep, "Label"));
		ge.attrs = imp_attrs(im, a);
		json_decref(a);
		if (!ge.name || !ge.attrs || !graph_add_event(im->g, &ge))
			ret = imp_nomem(im);
	}
	return ret;
}

int imp_xtrace(struct imp *im, json_t *root)
{
	struct xctx c = { .im = im };
	const json_t *item, *reps, *rep;
	size_t i, j, total = 0, k;
	int ret = 0;

	if (!json_is_array(root))
		return imp_fail(im, "not an X-Trace list of {\"id\", \"reports\"}");
	json_array_foreach(root, i, item)
	{
		if (!json_is_object(item))
			return imp_fail(im, "[%zu]: not an object", i);
		reps = get(item, "reports");
		if (!json_is_array(reps))
			return imp_fail(im, "[%zu].reports: missing, or not a list", i);
		total += json_array_size(reps);
		if (total > GRAPH_MAX_ELEMS)
			return imp_fail(im, "more than %u reports", GRAPH_MAX_ELEMS);
	}
	c.ev = calloc(total + 1, sizeof(*c.ev));
	c.byid = malloc((total + 1) * sizeof(size_t));
	c.bythread = malloc((total + 1) * sizeof(size_t));
	if (!c.ev || !c.byid || !c.bythread) {
		ret = imp_nomem(im);
		goto out;
	}
	json_array_foreach(root, i, item)
	{
		uint64_t task;

		if (imp_id64(get(item, "id"), false, false, &task)) {
			ret = imp_fail(im, "[%zu].id: not a task id (16 hex digits, not 0)", i);
			goto out;
		}
		json_array_foreach(get(item, "reports"), j, rep)
		{
			ret = parse_report(&c, i, j, rep, task, &c.ev[c.n]);
			if (ret)
				goto out;
			c.byid[c.n] = c.bythread[c.n] = c.n;
			c.n++;
		}
	}
	qsort_r(c.byid, c.n, sizeof(size_t), cmp_byid, c.ev);
	for (k = 1; k < c.n; k++) {
		const struct xev *a = &c.ev[c.byid[k - 1]], *b = &c.ev[c.byid[k]];

		if (a->id == b->id && graph_id128_eq(a->trace, b->trace)) {
			ret = imp_fail(im,
				       "[%zu].reports[%zu].X-Trace[0]: event %016llx appears twice",
				       b->item, b->pos, (unsigned long long)b->id);
			goto out;
		}
	}
	qsort_r(c.bythread, c.n, sizeof(size_t), cmp_bythread, c.ev);
	for (k = 0; k < c.n; k++)
		c.ev[k].task = SIZE_MAX;
	ret = derive_tasks(&c);
	if (!ret)
		ret = emit(&c);
out:
	free(c.ev);
	free(c.byid);
	free(c.bythread);
	free(c.tasks);
	return ret;
}

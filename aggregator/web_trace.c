// SPDX-License-Identifier: Apache-2.0
/*
 * The trace pages' JSON (docs/http.md, "Traces"), read from the graph store by the web
 * server's thread through its own connection: the list (graph_store_list(), the filters of
 * `weft graph list`), one trace with its context (graph/show.c's JSON, the same object as
 * `weft graph show --format json`, plus what a picture needs and a terminal does not: the
 * latency sketch of every task type in the trace, and each process's concurrency molehill
 * over the trace's time), and its exports (graph/export.c).
 *
 * Cost: O(size of the trace) plus one sketch per task type and one molehill per process
 * (at most WEB_MOLEHILL_MS milliseconds each), whatever the number of traces stored.
 */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "aggregator/web_int.h"
#include "base/units.h"
#include "graph/import.h"
#include "graph/show.h"
#include "graph/skew.h"
#include "graph/store.h"
#include "kernel/weft_sketch.h"

#define WEB_MOLEHILL_MS 4000 /* ms of a process's concurrency drawn per trace */
#define WEB_LIST_MAX 500

void *web_memdup(const void *p, size_t n)
{
	void *d = malloc(n ? n : 1);

	if (d && n)
		memcpy(d, p, n);
	return d;
}

char *web_json_error(unsigned int status, const char *msg)
{
	json_t *o = json_pack("{s:s, s:i}", "error", msg, "status", (int)status);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	return s;
}

void web_trace_close(struct web *w)
{
	if (w->gs)
		graph_store_close(w->gs);
	w->gs = NULL;
}

static struct graph_store *store(struct web *w, struct web_reply *rp)
{
	struct stat st;

	if (w->gs)
		return w->gs;
	/* never create one: a store nobody wrote is not there */
	if (stat(w->graph_store, &st) != 0) {
		rp->status = 404;
		snprintf(rp->why, sizeof(rp->why),
			 "no graph store at %s yet (weft graph import "
			 "--graph-store %s FILE...)",
			 w->graph_store, w->graph_store);
		return NULL;
	}
	w->gs = graph_store_open(w->graph_store, rp->why, sizeof(rp->why));
	if (!w->gs)
		rp->status = 503;
	return w->gs;
}

static bool dur_arg(const char *s, const char *what, int64_t *out, struct web_reply *rp)
{
	uint64_t v;

	if (!s)
		return true;
	if (units_duration_parse(s, 0, &v) || v == 0 || v > (uint64_t)INT64_MAX) {
		rp->status = 400;
		snprintf(rp->why, sizeof(rp->why),
			 "%s takes a positive duration with its unit (500us, 10ms, 2s)", what);
		return false;
	}
	*out = (int64_t)v;
	return true;
}

static void reply_json(json_t *o, struct web_reply *rp)
{
	rp->body = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	rp->len = rp->body ? strlen(rp->body) : 0;
	rp->type = "application/json";
	if (!rp->body) {
		rp->status = 500;
		snprintf(rp->why, sizeof(rp->why), "out of memory");
	}
	json_decref(o);
}

static void trace_list(struct web *w, const struct web_trace_req *rq, struct web_reply *rp)
{
	struct graph_filter f = { .service = rq->service, .name = rq->name, .host = rq->host };
	struct graph_trace_row *rows = NULL;
	struct graph_store *s = store(w, rp);
	json_t *o, *arr;
	ssize_t n;
	char hex[33];

	if (!s)
		return;
	if (!dur_arg(rq->min_duration, "min_duration", &f.min_dur, rp) ||
	    !dur_arg(rq->max_duration, "max_duration", &f.max_dur, rp))
		return;
	f.sort = GRAPH_SORT_START_DESC;
	if (rq->sort && strcmp(rq->sort, "duration") == 0)
		f.sort = GRAPH_SORT_DURATION_DESC;
	else if (rq->sort && strcmp(rq->sort, "start") != 0) {
		rp->status = 400;
		snprintf(rp->why, sizeof(rp->why), "sort takes start or duration");
		return;
	}
	f.limit = 50;
	if (rq->limit) {
		char *end;
		long v = strtol(rq->limit, &end, 10);

		if (*end || v < 1 || v > WEB_LIST_MAX) {
			rp->status = 400;
			snprintf(rp->why, sizeof(rp->why), "limit takes 1 to %d", WEB_LIST_MAX);
			return;
		}
		f.limit = (size_t)v;
	}
	n = graph_store_list(s, &f, &rows, rp->why, sizeof(rp->why));
	if (n < 0) {
		rp->status = 500;
		return;
	}
	o = json_object();
	arr = json_array();
	for (ssize_t i = 0; i < n && o && arr; i++) {
		const struct graph_trace_row *r = &rows[i];

		graph_id128_hex(r->trace, hex);
		json_array_append_new(
			arr, json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:i, s:i}", "trace",
				       hex, "service", r->service, "name", r->name, "host", r->host,
				       "start", (json_int_t)r->start, "end", (json_int_t)r->end,
				       "duration", (json_int_t)(r->end - r->start), "tasks",
				       (int)r->ntasks, "hosts", (int)r->nhosts));
	}
	free(rows);
	json_object_set_new(o, "traces", arr);
	json_object_set_new(o, "count", json_integer(n));
	reply_json(o, rp);
}

/* The sketch of every task type in the trace, and each task's index into them. */
static int add_types(struct graph_store *s, const struct graph *g, json_t *root)
{
	json_t *tasks = json_object_get(root, "tasks"), *types = json_array(), *t;
	uint64_t *counts = malloc(WEFT_SKETCH_NBUCKETS * sizeof(*counts));
	size_t i;
	char why[256];

	if (!types || !counts) {
		json_decref(types);
		free(counts);
		return -ENOMEM;
	}
	json_array_foreach(tasks, i, t)
	{
		const char *sv = json_string_value(json_object_get(t, "service"));
		const char *nm = json_string_value(json_object_get(t, "name"));
		size_t k, nt = json_array_size(types);
		json_t *buckets;

		for (k = 0; k < nt; k++) {
			json_t *ty = json_array_get(types, k);

			if (strcmp(json_string_value(json_object_get(ty, "service")), sv) == 0 &&
			    strcmp(json_string_value(json_object_get(ty, "name")), nm) == 0)
				break;
		}
		json_object_set_new(t, "type", json_integer((json_int_t)k));
		if (k < nt)
			continue;
		buckets = json_array();
		if (graph_store_type_sketch(s, sv, nm, counts, why, sizeof(why)) == 0) {
			for (uint32_t b = 0; b < WEFT_SKETCH_NBUCKETS; b++) {
				__u64 lo, width;

				if (!counts[b])
					continue;
				weft_sketch_bounds(b, &lo, &width);
				json_array_append_new(buckets,
						      json_pack("[i, I, I, I]", (int)b,
								(json_int_t)lo, (json_int_t)width,
								(json_int_t)counts[b]));
			}
		}
		json_array_append_new(types, json_pack("{s:s, s:s, s:o}", "service", sv, "name", nm,
						       "buckets", buckets));
	}
	(void)g;
	free(counts);
	return json_object_set_new(root, "types", types) ? -ENOMEM : 0;
}

/* Each process's molehill over the trace's time, and each task's index into them. */
static int add_processes(struct graph_store *s, json_t *root)
{
	json_t *tasks = json_object_get(root, "tasks"), *procs = json_array(), *t;
	int64_t from = json_integer_value(json_object_get(root, "start"));
	int64_t to = json_integer_value(json_object_get(root, "end"));
	uint32_t *counts;
	size_t i, n;
	char why[256];

	if ((to - from) / 1000000 + 2 < WEB_MOLEHILL_MS)
		n = (size_t)((to - from) / 1000000 + 2);
	else
		n = WEB_MOLEHILL_MS;
	counts = calloc(n, sizeof(*counts));
	if (!procs || !counts) {
		json_decref(procs);
		free(counts);
		return -ENOMEM;
	}
	json_array_foreach(tasks, i, t)
	{
		const char *host = json_string_value(json_object_get(t, "host"));
		int64_t pid = json_integer_value(json_object_get(t, "pid"));
		size_t k, np = json_array_size(procs);
		json_t *ms;
		int got;

		for (k = 0; k < np; k++) {
			json_t *p = json_array_get(procs, k);

			if (strcmp(json_string_value(json_object_get(p, "host")), host) == 0 &&
			    json_integer_value(json_object_get(p, "pid")) == pid)
				break;
		}
		json_object_set_new(t, "process", json_integer((json_int_t)k));
		if (k < np)
			continue;
		ms = json_array();
		got = graph_store_concurrency(s, host, pid, from, to, counts, n, why, sizeof(why));
		for (int m = 0; m < got; m++)
			json_array_append_new(ms, json_integer(counts[m]));
		/* the molehill's first entry is the millisecond holding `from` */
		json_array_append_new(procs,
				      json_pack("{s:s, s:I, s:I, s:o}", "host", host, "pid",
						(json_int_t)pid, "from",
						(json_int_t)(from / 1000000 * 1000000), "ms", ms));
	}
	free(counts);
	return json_object_set_new(root, "processes", procs) ? -ENOMEM : 0;
}

static void trace_one(struct web *w, const char *id, struct web_reply *rp)
{
	struct graph_store *s = store(w, rp);
	struct graph_context ctx = { 0 };
	struct graph g;
	bool have_ctx;
	json_t *root = NULL;
	int rc;

	if (!s)
		return;
	graph_init(&g);
	rc = graph_store_load_name(s, id, &g, rp->why, sizeof(rp->why));
	if (rc) {
		rp->status = rc == -ENOENT ? 404 : rc == -EINVAL ? 400 : 500;
		if (!rp->why[0])
			snprintf(rp->why, sizeof(rp->why), "%s", strerror(-rc));
		goto out;
	}
	have_ctx = graph_store_context(s, &g, &ctx, rp->why, sizeof(rp->why)) == 0;
	/* after the context, which is index-aligned with g: correcting moves, never reorders */
	rc = graph_skew_correct(&g, g.tasks[0].trace, NULL);
	if (!rc)
		rc = graph_show_json_obj(&g, g.tasks[0].trace, have_ctx ? &ctx : NULL, &root);
	if (!rc)
		rc = add_types(s, &g, root);
	if (!rc)
		rc = add_processes(s, root);
	if (have_ctx)
		graph_context_free(&ctx);
	if (rc) {
		rp->status = 500;
		snprintf(rp->why, sizeof(rp->why), "%s", strerror(-rc));
		json_decref(root);
		goto out;
	}
	reply_json(root, rp);
out:
	graph_free(&g);
}

static void trace_export(struct web *w, const char *id, const char *format, struct web_reply *rp)
{
	struct graph_store *s = store(w, rp);
	int fmt = format ? graph_format_parse(format) : -1;
	struct graph g;
	FILE *f;
	int rc;

	if (!s)
		return;
	if (fmt != GRAPH_FMT_CHROME && fmt != GRAPH_FMT_OTLP && fmt != GRAPH_FMT_JAEGER) {
		rp->status = 400;
		snprintf(rp->why, sizeof(rp->why), "format takes chrome, otlp or jaeger");
		return;
	}
	graph_init(&g);
	rc = graph_store_load_name(s, id, &g, rp->why, sizeof(rp->why));
	if (rc) {
		rp->status = rc == -ENOENT ? 404 : rc == -EINVAL ? 400 : 500;
		goto out;
	}
	f = open_memstream(&rp->body, &rp->len);
	if (!f || graph_export(f, &g, (enum graph_format)fmt) || fclose(f)) {
		if (f)
			fclose(f);
		free(rp->body);
		rp->body = NULL;
		rp->status = 500;
		snprintf(rp->why, sizeof(rp->why), "export failed");
		goto out;
	}
	rp->type = "application/json";
	snprintf(rp->disposition, sizeof(rp->disposition),
		 "attachment; filename=\"trace-%.32s-%s.json\"", id, format);
out:
	graph_free(&g);
}

void web_trace_answer(struct web *w, const struct web_trace_req *rq, struct web_reply *rp)
{
	char id[40];
	const char *slash;
	size_t n;

	if (!rq->id) {
		trace_list(w, rq, rp);
		return;
	}
	slash = strchr(rq->id, '/');
	n = slash ? (size_t)(slash - rq->id) : strlen(rq->id);
	if (n == 0 || n > 32 || strspn(rq->id, "0123456789abcdefABCDEF") != n ||
	    (slash && strcmp(slash, "/export") != 0)) {
		rp->status =
			n > 32 || (n && strspn(rq->id, "0123456789abcdefABCDEF") != n) ? 400 : 404;
		snprintf(rp->why, sizeof(rp->why),
			 rp->status == 400 ? "a trace id is 1 to 32 hex digits" :
					     "no such endpoint");
		return;
	}
	memcpy(id, rq->id, n);
	id[n] = 0;
	if (slash)
		trace_export(w, id, rq->format, rp);
	else
		trace_one(w, id, rp);
}

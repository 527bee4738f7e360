/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The body the importers' libFuzzer targets share (fuzz_import_{otlp,jaeger,zipkin,xtrace}.c,
 * each a one-line target naming its format).  What must hold besides not crashing:
 *   - a refused input leaves the graph exactly as it was (here: a graph that already holds
 *     one element of each kind keeps exactly those);
 *   - an accepted input's graph exports to OTLP and to Jaeger, and importing each export gives
 *     as many tasks, events and edges as before; through OTLP, which keeps ns, the very same
 *     graph, field by field (the source aside), as test_graph_roundtrip.c checks on real files
 *     through both; its Chrome export is JSON.
 * A broken property is an abort(), which libFuzzer and tests/fuzz/replay.c report.
 */
#ifndef WEFT_FUZZ_IMPORT_H
#define WEFT_FUZZ_IMPORT_H
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/graph.h"
#include "graph/import.h"

/* One task, one event, one edge: what a refused import must leave. */
static void fuzz_seed_graph(struct graph *g)
{
	struct graph_task t = { .trace = { 0, 1 },
				.id = 1,
				.service = "s",
				.name = "n",
				.host = "",
				.pid = -1,
				.tid = -1,
				.attrs = "{}" };
	struct graph_event e = { .trace = { 0, 1 }, .task = 1, .name = "e", .attrs = "{}" };
	struct graph_edge d = {
		.trace = { 0, 1 }, .kind = GRAPH_EDGE_PARENT, .from_task = 9, .to_task = 1
	};

	graph_init(g);
	if (!graph_add_task(g, &t) || !graph_add_event(g, &e) || !graph_add_edge(g, &d))
		abort();
}

static char *fuzz_export(const struct graph *g, enum graph_format fmt, size_t *len)
{
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (!f)
		abort();
	if (graph_export(f, g, fmt)) {
		fprintf(stderr, "graph_export(%s) failed\n", graph_format_name(fmt));
		abort();
	}
	fclose(f);
	return buf;
}

static int fz_cmp_task(const void *a, const void *b)
{
	const struct graph_task *x = a, *y = b;
	int c = graph_id128_cmp(x->trace, y->trace);

	if (c)
		return c;
	return x->id < y->id ? -1 : x->id > y->id;
}

static int fz_cmp_event(const void *a, const void *b)
{
	const struct graph_event *x = a, *y = b;
	int c = graph_id128_cmp(x->trace, y->trace);

	if (c)
		return c;
	if (x->task != y->task)
		return x->task < y->task ? -1 : 1;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	if ((c = strcmp(x->name, y->name)))
		return c;
	return strcmp(x->attrs, y->attrs);
}

static int fz_cmp_edge(const void *a, const void *b)
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

static void fz_canon(struct graph *g)
{
	if (g->ntasks)
		qsort(g->tasks, g->ntasks, sizeof(*g->tasks), fz_cmp_task);
	if (g->nevents)
		qsort(g->events, g->nevents, sizeof(*g->events), fz_cmp_event);
	if (g->nedges)
		qsort(g->edges, g->nedges, sizeof(*g->edges), fz_cmp_edge);
}

/* OTLP keeps everything exactly: the same graph, field by field (the source aside). */
static void fz_same(struct graph *a, struct graph *b)
{
	size_t i;

	fz_canon(a);
	fz_canon(b);
	for (i = 0; i < a->ntasks; i++) {
		const struct graph_task *x = &a->tasks[i], *y = &b->tasks[i];

		if (!graph_id128_eq(x->trace, y->trace) || x->id != y->id ||
		    x->parent != y->parent || strcmp(x->service, y->service) ||
		    strcmp(x->name, y->name) || strcmp(x->host, y->host) || x->pid != y->pid ||
		    x->tid != y->tid || x->start != y->start || x->end != y->end ||
		    x->status != y->status || strcmp(x->attrs, y->attrs)) {
			fprintf(stderr,
				"task %016llx differs: %s %s %s %lld %lld %d %s | %s %s %s %lld %lld %d %s\n",
				(unsigned long long)x->id, x->service, x->name, x->host,
				(long long)x->pid, (long long)x->tid, x->status, x->attrs,
				y->service, y->name, y->host, (long long)y->pid, (long long)y->tid,
				y->status, y->attrs);
			abort();
		}
	}
	for (i = 0; i < a->nevents; i++)
		if (fz_cmp_event(&a->events[i], &b->events[i])) {
			fprintf(stderr, "event differs: %s %s | %s %s\n", a->events[i].name,
				a->events[i].attrs, b->events[i].name, b->events[i].attrs);
			abort();
		}
	for (i = 0; i < a->nedges; i++)
		if (fz_cmp_edge(&a->edges[i], &b->edges[i])) {
			fprintf(stderr, "edge %zu differs\n", i);
			abort();
		}
}

static void fuzz_reimport(struct graph *g, enum graph_format fmt)
{
	struct graph_import_err err;
	struct graph h;
	size_t len;
	char *buf = fuzz_export(g, fmt, &len);

	graph_init(&h);
	if (graph_import_buffer("export", buf, len, fmt, &h, &err) < 0) {
		fprintf(stderr, "the %s export does not import: %s\n", graph_format_name(fmt),
			err.msg);
		abort();
	}
	if (h.ntasks != g->ntasks || h.nevents != g->nevents || h.nedges != g->nedges) {
		fprintf(stderr, "the %s export gives %zu/%zu/%zu elements, not %zu/%zu/%zu\n",
			graph_format_name(fmt), h.ntasks, h.nevents, h.nedges, g->ntasks,
			g->nevents, g->nedges);
		abort();
	}
	if (fmt == GRAPH_FMT_OTLP)
		fz_same(g, &h);
	graph_free(&h);
	free(buf);
}

static int fuzz_import(const uint8_t *data, size_t size, enum graph_format fmt)
{
	struct graph_import_err err;
	struct graph g;
	size_t len;
	char *buf;
	json_t *chrome;
	int ret;

	fuzz_seed_graph(&g);
	ret = graph_import_buffer("fuzz", (const char *)data, size, fmt, &g, &err);
	if (ret < 0) {
		if (g.ntasks != 1 || g.nevents != 1 || g.nedges != 1 || g.tasks[0].id != 1) {
			fprintf(stderr, "refused (%s) but the graph changed\n", err.msg);
			abort();
		}
		graph_free(&g);
		return 0;
	}
	if (ret != (int)fmt)
		abort();
	/* the import alone, without the seed elements, for the exports */
	graph_free(&g);
	graph_init(&g);
	if (graph_import_buffer("fuzz", (const char *)data, size, fmt, &g, &err) != ret)
		abort();
	fuzz_reimport(&g, GRAPH_FMT_OTLP);
	fuzz_reimport(&g, GRAPH_FMT_JAEGER);
	buf = fuzz_export(&g, GRAPH_FMT_CHROME, &len);
	chrome = json_loadb(buf, len, 0, NULL);
	if (!chrome)
		abort();
	json_decref(chrome);
	free(buf);
	graph_free(&g);
	return 0;
}

#endif

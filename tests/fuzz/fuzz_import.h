/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The body the importers' libFuzzer targets share (fuzz_import_{otlp,jaeger,zipkin,xtrace}.c,
 * each a one-line target naming its format).  What must hold besides not crashing:
 *   - a refused input leaves the graph exactly as it was (here: a graph that already holds
 *     one element of each kind keeps exactly those);
 *   - an accepted input's graph exports to OTLP and to Jaeger, and importing each export gives
 *     as many tasks, events and edges as before (what test_graph_roundtrip.c checks field by
 *     field on real files), and its Chrome export is JSON.
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

static void fuzz_reimport(const struct graph *g, enum graph_format fmt)
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

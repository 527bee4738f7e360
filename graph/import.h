/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Reading execution graphs from other tracers' files, and writing them back out (docs/graphs.md
 * describes every format and how its fields map onto the model of graph.h).
 *
 * Importers read untrusted bytes: a file that is not what it claims, or is cut short, or holds
 * absurd values, is refused with its name and the place of the fault (line:column for JSON,
 * a byte offset or event index otherwise), and nothing of it reaches the graph: on error the
 * graph is left as it was before the call (elements already added are removed).  JSON is
 * parsed by jansson, never by hand.
 */
#ifndef WEFT_GRAPH_IMPORT_H
#define WEFT_GRAPH_IMPORT_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "graph/graph.h"

enum graph_format {
	GRAPH_FMT_AUTO = 0, /* detect from the content */
	GRAPH_FMT_OTLP, /* OTLP JSON: an ExportTraceServiceRequest ({"resourceSpans": [...]}) */
	GRAPH_FMT_JAEGER, /* Jaeger UI JSON: {"data": [{"traceID", "spans", "processes"}]} */
	GRAPH_FMT_ZIPKIN, /* Zipkin v2 JSON: a list of spans */
	GRAPH_FMT_XTRACE, /* X-Trace JSON reports: [{"id", "reports": [...]}] */
	GRAPH_FMT_CTF, /* an LTTng CTF trace directory (libbabeltrace2) */
	GRAPH_FMT_CHROME, /* Chrome trace event JSON (export only) */
	GRAPH_FMT_COUNT
};

const char *graph_format_name(enum graph_format f); /* "otlp", "jaeger", ... */
int graph_format_parse(const char *name); /* -1 if unknown */

struct graph_import_err {
	char msg[512]; /* "spans[3].traceId: not 32 hex digits", ... */
	long line, column; /* 1-based place of the fault in a text file; 0 if not known */
	long long offset; /* byte offset of the fault; -1 if not known */
};

/*
 * Appends the elements of one file (or of buf[0, len), named `name` in messages) to g.  With
 * GRAPH_FMT_AUTO the format is detected from the content (docs/graphs.md, "Formats", has the
 * rules).  Returns the format read (> 0) or -errno with err filled; on error g is unchanged.
 * A file over 1 GiB is refused.  An OTLP file may hold several requests, one per line (JSON
 * Lines, as the collector's file exporter writes).  Tasks of one file are unique in their
 * trace; tasks already in g are not compared with them (the store keeps one of each).
 */
int graph_import_file(const char *path, enum graph_format fmt, struct graph *g,
		      struct graph_import_err *err);
int graph_import_buffer(const char *name, const char *buf, size_t len, enum graph_format fmt,
			struct graph *g, struct graph_import_err *err);

/* An LTTng CTF trace (a directory, searched for its streams as babeltrace2 does). */
int graph_import_ctf(const char *dir, struct graph *g, struct graph_import_err *err);

/* What an LTTng CTF import read and what of it it could not place (docs/graphs.md). */
struct graph_ctf_stats {
	uint64_t events; /* events of LTTng-UST traces read */
	uint64_t dropped_no_task; /* other events on a thread with no weft task open */
	uint64_t dropped_unknown; /* weft:event and weft:edge naming a task that never began */
	uint64_t unmatched_ends; /* weft:task_end of a task that never began, or ended twice */
	uint64_t cut; /* tasks begun and never ended: they end at the trace's last event */
	uint64_t kernel_events; /* events of kernel traces in the directory, skipped */
};

/* graph_import_ctf(), and what it read in *st (NULL: not wanted; zero on error).  Both read
 * the trace in a child process (fork), so that a trace that crashes babeltrace2 is refused
 * instead of crashing the caller. */
int graph_import_ctf_stats(const char *dir, struct graph *g, struct graph_ctf_stats *st,
			   struct graph_import_err *err);
/* The same in this process: for fuzzing (coverage) and debugging; a trace that crashes
 * babeltrace2 crashes the caller. */
int graph_import_ctf_here(const char *dir, struct graph *g, struct graph_ctf_stats *st,
			  struct graph_import_err *err);

/*
 * Writes g (one or more traces, as graph_store_load() or an import gave it) in an exporting
 * format: GRAPH_FMT_CHROME, GRAPH_FMT_OTLP or GRAPH_FMT_JAEGER.  0 or -errno (-EINVAL for a
 * format that cannot be written, -EIO on a write error).  Importing what was exported gives
 * the same graph (tests/unit/test_graph_roundtrip.c).
 */
int graph_export(FILE *f, const struct graph *g, enum graph_format fmt);

#endif

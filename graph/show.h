/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One trace with its aggregate context, for people and for programs (docs/graphs.md,
 * "`weft graph`"): `weft graph show` draws it as a Gantt chart in the terminal, or writes the
 * same content as JSON.
 *
 * The chart has one lane per task, in the order of the trace's tree (graph/critpath.h),
 * indented by depth; bars to scale in the given width; times relative to the trace's start.
 * Each lane carries the task's latency percentile within its type, the most other tasks of
 * its process that ran at once, its clock-skew correction, and its rare events and rare
 * incoming edges (seen in under GRAPH_RARE_SHARE of the tasks of the type); lanes on the
 * critical path are marked, and the part of their bar that is on it drawn apart.  A legend
 * ends the chart.  Colour (ANSI) only when the caller says so: the caller knows whether the
 * output is a terminal and whether NO_COLOR is set.
 *
 * Everything a trace's file put into names is printed with control characters replaced, so a
 * hostile trace cannot move the cursor or retitle the terminal.
 */
#ifndef WEFT_GRAPH_SHOW_H
#define WEFT_GRAPH_SHOW_H
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h> /* ssize_t, for graph/store.h */

#include "graph/graph.h"
#include "graph/store.h"

#define GRAPH_SHOW_WIDTH 100 /* columns when the caller does not know */

struct graph_show_opts {
	size_t sz; /* sizeof(struct graph_show_opts) */
	int width; /* columns of the terminal; 0: GRAPH_SHOW_WIDTH */
	bool color; /* ANSI bold and colours */
};

/*
 * Draws trace `trace` of g (times as they are: correct clock skew first).  ctx is the
 * context of g's elements, index-aligned with g->tasks, g->events and g->edges, as
 * graph_store_context() gives it for a loaded trace; NULL (or counts that do not match g)
 * leaves percentiles, concurrency and rarity out.  0, -ENOENT (no task of that trace),
 * -ENOMEM or -EIO (a write error).
 */
int graph_show_text(FILE *f, const struct graph *g, struct graph_id128 trace,
		    const struct graph_context *ctx, const struct graph_show_opts *o);
/* The same content as one JSON object (docs/graphs.md lists its fields). */
int graph_show_json(FILE *f, const struct graph *g, struct graph_id128 trace,
		    const struct graph_context *ctx);
/* That object itself (a new jansson reference in *out), for callers that add to it (the web
 * face's trace page).  0, -ENOENT or -ENOMEM. */
struct json_t;
int graph_show_json_obj(const struct graph *g, struct graph_id128 trace,
			const struct graph_context *ctx, struct json_t **out);

#endif

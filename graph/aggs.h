/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Graph aggregates, pre-aggregated where the elements are captured (docs/graphs.md,
 * "Sampling"): the per-type context the graph store keeps (graph/store.h), computed from
 * EVERY task a capture saw, whether or not its trace is kept.  A capture adds each finished
 * trace with graph_aggs_add() before it decides to keep it; the store adds the aggregates with
 * graph_store_put_aggs() and the kept traces with graph_store_put_opts(GRAPH_PUT_NO_AGGS), so
 * nothing is counted twice and the aggregates are exact whatever the sampling rate.
 *
 * Every member is a sum of counts (the sketch is bucket counts, min and max merge by min and
 * max), so graph_aggs_merge() is exact, associative and commutative: batches of many agents
 * and windows add up to what one capture of everything would have given.
 *
 *   types   (service, name): task count, latency sketch (kernel/weft_sketch.h), min, max;
 *   events  (type, event name): tasks of the type that had the event at least once;
 *   edges   (type of from task, type of to task, kind): edges of that shape, both ends known;
 *   conc    (host, pid, ms since the epoch): tasks of the process running in that ms (a task
 *           counts in its first GRAPH_CONC_MAX_MS ms, as the store's);
 *   sampling: the rate and how many traces were seen, kept by the head sample, kept as
 *           outliers (graph_store_stats() shows their sums).
 *
 * The struct is transparent so that a wire codec can walk and rebuild it; its strings live
 * in the aggs' own arena (owner: the struct graph_aggs).  Bounded: at most GRAPH_AGGS_MAX
 * entries of each kind; graph_aggs_add() returns -E2BIG past that (the caller drains first).
 */
#ifndef WEFT_GRAPH_AGGS_H
#define WEFT_GRAPH_AGGS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "graph/graph.h"

#define GRAPH_AGGS_MAX (1u << 20)

struct graph_agg_type {
	const char *service, *name;
	uint64_t count;
	int64_t min, max; /* ns; meaningful when count > 0 */
	uint64_t *sketch; /* WEFT_SKETCH_NBUCKETS bucket counts (kernel/weft_sketch.h) */
};

struct graph_agg_event {
	uint32_t type; /* index into types[] */
	const char *name;
	uint64_t ntasks;
};

struct graph_agg_edge {
	uint32_t ptype, ctype; /* indexes into types[]: the from task's and the to task's */
	enum graph_edge_kind kind;
	uint64_t count;
};

struct graph_agg_conc {
	const char *host;
	int64_t pid;
	int64_t ms; /* ms since the Unix epoch */
	uint32_t count;
};

struct graph_sampling {
	double rate; /* head-sample rate, 0..1 (the last one set) */
	uint64_t seen; /* traces seen (finished here) */
	uint64_t kept_head; /* kept because the trace id's hash fell under the rate */
	uint64_t kept_outlier; /* kept although the hash did not select them: outliers */
};

struct graph_aggs_index; /* lookup tables, private */

struct graph_aggs {
	struct graph_agg_type *types;
	size_t ntypes, cap_types;
	struct graph_agg_event *events;
	size_t nevents, cap_events;
	struct graph_agg_edge *edges;
	size_t nedges, cap_edges;
	struct graph_agg_conc *conc;
	size_t nconc, cap_conc;
	struct graph_sampling sampling;
	struct graph_aggs_index *ix;
	struct graph arena; /* only its string arena is used (graph_strdup()) */
};

void graph_aggs_init(struct graph_aggs *a);
void graph_aggs_free(struct graph_aggs *a); /* then as after graph_aggs_init() */
void graph_aggs_clear(struct graph_aggs *a);
bool graph_aggs_empty(const struct graph_aggs *a);

/*
 * Adds every task, event and edge of g (finished elements: tasks with start and end) as the
 * store's put would count them: the first event of each name per task, edges whose two ends
 * are tasks of g.  0, -ENOMEM, or -E2BIG over GRAPH_AGGS_MAX (a is then unchanged).
 */
int graph_aggs_add(struct graph_aggs *a, const struct graph *g);

/* Lower-level adds, for a source that counts without building a graph (and for decoders). */
int graph_aggs_add_type(struct graph_aggs *a, const char *service, const char *name, uint64_t count,
			int64_t min, int64_t max, const uint64_t *sketch, uint32_t *index);
int graph_aggs_add_event(struct graph_aggs *a, uint32_t type, const char *name, uint64_t ntasks);
int graph_aggs_add_edge(struct graph_aggs *a, uint32_t ptype, uint32_t ctype,
			enum graph_edge_kind kind, uint64_t count);
int graph_aggs_add_conc(struct graph_aggs *a, const char *host, int64_t pid, int64_t ms,
			uint32_t count);

/* into += from (sampling counts added, rate taken from `from` if into has none). */
int graph_aggs_merge(struct graph_aggs *into, const struct graph_aggs *from);

/*
 * The head-sample decision for a trace id: true when a hash of the 128-bit id falls under
 * rate (0..1).  The same on every host and in every weft (the hash is fixed: docs/graphs.md),
 * so the pieces of one trace captured on different hosts are kept or dropped together.
 */
bool graph_sample_head(struct graph_id128 trace, double rate);

#endif

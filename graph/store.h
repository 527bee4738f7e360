/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The graph store: where execution graphs and their aggregate context live (docs/graphs.md has
 * the schema).  One interface, struct graph_store_ops; SQLite (graph/store_sqlite.c) is the
 * default backend, a file next to the aggregator's store or --graph-store PATH.
 *
 * The aggregates are kept on ingest, never recomputed from the stored traces, so showing one
 * trace with its context costs O(size of that trace) whatever the number of traces stored:
 *   per task type (service, name)   a latency sketch (kernel/weft_sketch.h's, mergeable) and
 *                                   a task count;
 *   per (type, event name)          how many tasks of the type had the event at least once;
 *   per (parent type, child type,   how many edges of that shape were seen, against the
 *        edge kind)                 parent type's task count;
 *   per (host, pid, ms)             how many tasks of the process were running in that
 *                                   millisecond (the concurrency "molehills").
 * Every aggregate is a sum of counts (the sketch is bucket counts), so two stores' aggregates
 * merge exactly (graph_store_merge()).
 */
#ifndef WEFT_GRAPH_STORE_H
#define WEFT_GRAPH_STORE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "graph/aggs.h"
#include "graph/graph.h"

/* Rare: an event or edge seen in under this share of the tasks of its (parent) type. */
#define GRAPH_RARE_SHARE 0.05

/* The schema version this weft writes (PRAGMA user_version); a newer file is refused. */
#define GRAPH_STORE_VERSION 2 /* 2: marks of incomplete traces (a version 1 file is upgraded) */
/* A task counts in its process's concurrency during its first GRAPH_CONC_MAX_MS ms only (a
 * task longer than that touches at most 61 one-second blocks, whatever its length). */
#define GRAPH_CONC_MAX_MS 60000
/* graph_store_stats(): the rarest event names and edges kept per type. */
#define GRAPH_STATS_RAREST 3

struct graph_store;

/*
 * Why a trace is incomplete (docs/graphs.md "Stitching"): the aggregator checks each trace a
 * graph query touched after the query's last window, and marks it.  0: complete (or never
 * checked: imported traces are not).
 */
#define GRAPH_INC_PARENT 0x1u /* a task's parent is not in the trace */
#define GRAPH_INC_EDGE 0x2u /* an edge names a task that is not in the trace */
#define GRAPH_INC_OPEN 0x4u /* a task had not ended when its query did (stored end = start) */
#define GRAPH_INC_ALL 0x7u

/* What one put added. */
struct graph_put_stats {
	uint64_t traces, tasks, events, edges;
	uint64_t
		replaced; /* tasks already stored (same trace and id): kept once, not counted again */
};

/* A row of graph_store_list(). */
struct graph_trace_row {
	struct graph_id128 trace;
	char service[128], name[256], host[256]; /* of the root task (earliest start if several) */
	int64_t start, end; /* of the whole trace: min start, max end */
	uint32_t ntasks;
	uint32_t nhosts;
	uint32_t incomplete; /* GRAPH_INC_* */
};

enum graph_sort {
	GRAPH_SORT_START_DESC = 0, /* newest first: the default */
	GRAPH_SORT_START_ASC,
	GRAPH_SORT_DURATION_DESC,
	GRAPH_SORT_DURATION_ASC,
};

struct graph_filter {
	const char *service, *name, *host; /* any task of the trace matches; NULL: any */
	int64_t from, to; /* trace start in [from, to); 0: unbounded */
	int64_t min_dur, max_dur; /* min_dur <= trace duration <= max_dur, ns; 0: unbounded */
	enum graph_sort sort;
	size_t limit; /* 0: 20 */
};

/* An event name of a type, with how many of the type's tasks had it. */
struct graph_rare_event {
	char name[256];
	uint64_t tasks;
	double share; /* tasks / the type's count */
};

/* Edges from a type (the parent) to a child type of one kind. */
struct graph_rare_edge {
	char service[128], name[256]; /* the child type */
	enum graph_edge_kind kind;
	uint64_t count;
	double share; /* count / the parent type's count */
};

/* Per task type, for graph_store_stats() and the context of a trace. */
struct graph_type_stats {
	char service[128], name[256];
	uint64_t count;
	int64_t p50, p90, p99; /* ns, from the sketch (within its 1.6% relative error) */
	/* the rarest event names and outgoing edges, rarest first (ties: by name) */
	uint32_t nrare_events, nrare_edges;
	struct graph_rare_event rare_events[GRAPH_STATS_RAREST];
	struct graph_rare_edge rare_edges[GRAPH_STATS_RAREST];
};

/* The context of one task of a trace (graph_store_context()), index-aligned with its tasks. */
struct graph_task_ctx {
	uint64_t type_count; /* tasks of its type stored, this one included */
	double percentile; /* share of its type's tasks at or below its latency, 0..100 */
	uint32_t hist_bin; /* the sketch bucket of its latency (weft_sketch_index()) */
	uint32_t concurrency_max; /* most other tasks of its process running during it */
};

/* The context of one event of a trace. */
struct graph_event_ctx {
	double share; /* tasks of its task's type that have an event of this name, 0..1 */
	bool rare; /* share < GRAPH_RARE_SHARE */
};

/* The context of one edge of a trace. */
struct graph_edge_ctx {
	double share; /* edges of this (parent type, child type, kind) per parent-type task */
	bool rare;
};

struct graph_context {
	struct graph_task_ctx *tasks;
	struct graph_event_ctx *events;
	struct graph_edge_ctx *edges;
	size_t ntasks, nevents, nedges;
};
void graph_context_free(struct graph_context *c);

/*
 * A backend: one table of entry points, each the function of the same name below minus the
 * "graph_store_" prefix (graph/store.c dispatches).  SQLite (graph/store_sqlite.c) is the one
 * implementation; another backend (a remote store a fleet forwards to) fills in the same
 * table and embeds struct graph_store as its first member.
 */
struct graph_store_ops {
	const char *name;
	int (*put)(struct graph_store *s, const struct graph *g, struct graph_put_stats *st,
		   char *why, size_t whysz);
	ssize_t (*list)(struct graph_store *s, const struct graph_filter *f,
			struct graph_trace_row **rows, char *why, size_t whysz);
	int (*load)(struct graph_store *s, const char *trace_hex, struct graph *g, char *why,
		    size_t whysz);
	int (*context)(struct graph_store *s, const struct graph *g, struct graph_context *c,
		       char *why, size_t whysz);
	int (*type_sketch)(struct graph_store *s, const char *service, const char *name,
			   uint64_t *counts, char *why, size_t whysz);
	int (*concurrency)(struct graph_store *s, const char *host, int64_t pid, int64_t from,
			   int64_t to, uint32_t *counts, size_t n, char *why, size_t whysz);
	ssize_t (*stats)(struct graph_store *s, struct graph_type_stats **rows, char *why,
			 size_t whysz);
	ssize_t (*retain)(struct graph_store *s, int64_t before, uint64_t max_bytes,
			  size_t max_traces, char *why, size_t whysz);
	int (*merge)(struct graph_store *s, const char *other, char *why, size_t whysz);
	void (*close)(struct graph_store *s);
	/* sampled captures (graph/aggs.h); NULL in a backend without them */
	int (*put_opts)(struct graph_store *s, const struct graph *g, unsigned flags,
			struct graph_put_stats *st, char *why, size_t whysz);
	int (*put_aggs)(struct graph_store *s, const struct graph_aggs *a, char *why, size_t whysz);
	int (*sampling)(struct graph_store *s, struct graph_sampling *out, char *why, size_t whysz);
	/* optional (NULL: a backend without marks; graph_store_mark_*() say -EOPNOTSUPP) */
	int (*mark_get)(struct graph_store *s, const char *trace_hex, uint32_t *flags, char *why,
			size_t whysz);
	int (*mark_set)(struct graph_store *s, const char *trace_hex, uint32_t flags, char *why,
			size_t whysz);
};

/* What every backend's store starts with. */
struct graph_store {
	const struct graph_store_ops *ops;
};

/* The SQLite backend's constructor (graph_store_open() calls it). */
struct graph_store *graph_store_sqlite_open(const char *path, char *why, size_t whysz);
/* For tests: EXPLAIN QUERY PLAN of every statement that loading a trace, its context and a
 * put run per element; -EINVAL with the statement and step in why[] if one scans a table. */
int graph_store_sqlite_check_plans(struct graph_store *s, char *why, size_t whysz);

/*
 * Opens (creating if absent) the SQLite store at path; checks or creates the schema version.
 * NULL with why[] on failure (not a store, a newer schema, no permission, ...).  A store is
 * used by one thread at a time (any thread, not two at once): its statements and caches are
 * shared by its calls, and its SQLite connection has no mutex of its own.  Open one per
 * thread to work in parallel.
 */
struct graph_store *graph_store_open(const char *path, char *why, size_t whysz);
void graph_store_close(struct graph_store *s);

/* Stores a checked batch in one transaction and updates the aggregates; all or nothing. */
int graph_store_put(struct graph_store *s, const struct graph *g, struct graph_put_stats *st,
		    char *why, size_t whysz);

/*
 * Sampled captures (graph/aggs.h, docs/graphs.md "Sampling"): a capture that keeps only some
 * traces pre-aggregates every trace it saw and puts the aggregates with graph_store_put_aggs()
 * (one transaction: types, event and edge counts, concurrency, the sampling counts), and the
 * traces it kept with graph_store_put_opts(GRAPH_PUT_NO_AGGS), which stores their elements and
 * trace rows but adds nothing to the aggregates: together exact, whatever the rate.
 * graph_store_put() is graph_store_put_opts() with flags 0.
 */
#define GRAPH_PUT_NO_AGGS 1u
int graph_store_put_opts(struct graph_store *s, const struct graph *g, unsigned flags,
			 struct graph_put_stats *st, char *why, size_t whysz);
int graph_store_put_aggs(struct graph_store *s, const struct graph_aggs *a, char *why,
			 size_t whysz);
/* What was sampled, summed over every put_aggs (rate: the last one put); zeros if nothing. */
int graph_store_sampling(struct graph_store *s, struct graph_sampling *out, char *why,
			 size_t whysz);

/* Traces matching f, sorted, at most f->limit; *rows is malloc'd.  Returns the count or -errno. */
ssize_t graph_store_list(struct graph_store *s, const struct graph_filter *f,
			 struct graph_trace_row **rows, char *why, size_t whysz);

/* Loads one trace's elements into g (which the caller initialised); -ENOENT if unknown.  A
 * hex id is first taken whole (fewer than 32 digits are the low digits, as Zipkin's 16-digit
 * ids); if no trace has it, as a prefix of the 32-digit form that must match exactly one trace
 * (-EINVAL if several).  On error g is as it was. */
int graph_store_load(struct graph_store *s, const char *trace_hex, struct graph *g, char *why,
		     size_t whysz);

/* graph_store_load() of a name people type: a 64-bit id (Zipkin, Jaeger) prints with 16
 * leading zeros, so a prefix of its own 16 digits is tried that way when it names nothing as
 * it is.  -ENOENT also when the trace has no task. */
int graph_store_load_name(struct graph_store *s, const char *name, struct graph *g, char *why,
			  size_t whysz);

/* The aggregate context of a loaded trace (g as graph_store_load() gave it): O(size of g). */
int graph_store_context(struct graph_store *s, const struct graph *g, struct graph_context *c,
			char *why, size_t whysz);

/* The latency sketch of one task type: WEFT_SKETCH_NBUCKETS counts into counts[] (for the
 * histogram a trace view draws).  -ENOENT if the type is unknown. */
int graph_store_type_sketch(struct graph_store *s, const char *service, const char *name,
			    uint64_t *counts, char *why, size_t whysz);

/* The molehill: for each millisecond of [from, to) (ns, rounded out to whole ms), how many
 * tasks of process (host, pid) were running.  counts[] holds n; fills min(n, the number of
 * ms) and returns that number (zeros for an unknown process), or -errno. */
int graph_store_concurrency(struct graph_store *s, const char *host, int64_t pid, int64_t from,
			    int64_t to, uint32_t *counts, size_t n, char *why, size_t whysz);

/* Per task type statistics, most frequent type first. */
ssize_t graph_store_stats(struct graph_store *s, struct graph_type_stats **rows, char *why,
			  size_t whysz);

/* Retention: drops the traces that ended before `before` (ns, 0: no age limit) and then the
 * oldest traces until the file holds at most max_bytes (0: no size limit).  Aggregates are
 * kept (they describe everything ever seen).  Returns the traces dropped or -errno. */
ssize_t graph_store_retain(struct graph_store *s, int64_t before, uint64_t max_bytes, char *why,
			   size_t whysz);

/* Retention in slices, for a store's writer that keeps it bounded as it goes (`weft run`,
 * the aggregator: --graph-max-age, --graph-max-size): as graph_store_retain(), but drops at
 * most max_traces traces (> 0) in one transaction, and gives free pages back to the file
 * system only once a slice finds nothing more to drop and they are over a quarter of the
 * file (a store that grows again reuses them).  Returns the traces dropped, max_traces when
 * there may be more, or -errno. */
ssize_t graph_store_retain_some(struct graph_store *s, int64_t before, uint64_t max_bytes,
				size_t max_traces, char *why, size_t whysz);

/* A store kept bounded by its writer: the bounds and what they dropped so far. */
struct graph_retention {
	uint64_t max_age_ns; /* drop traces that ended longer ago (0: no bound) */
	uint64_t max_bytes; /* then the oldest until the pages in use fit (0: no bound) */
	uint64_t dropped; /* traces dropped so far */
};

/* One slice of graph_store_retain_some() against r's bounds, the age measured back from the
 * wall clock now (the traces' times are Unix ns); adds to r->dropped.  Returns what the slice
 * dropped (max_traces: there may be more), 0 without a bound, or -errno. */
ssize_t graph_retention_step(struct graph_store *s, struct graph_retention *r, size_t max_traces,
			     char *why, size_t whysz);

/* Adds the aggregates of the store at `other` into s (another aggregator's): exact.  Only the
 * aggregates: the other store's traces are not copied. */
int graph_store_merge(struct graph_store *s, const char *other, char *why, size_t whysz);

/* A trace's GRAPH_INC_* marks (0: none), named as graph_store_load() names it; -ENOENT if
 * unknown.  mark_set replaces them (0 clears). */
int graph_store_mark_get(struct graph_store *s, const char *trace_hex, uint32_t *flags, char *why,
			 size_t whysz);
int graph_store_mark_set(struct graph_store *s, const char *trace_hex, uint32_t flags, char *why,
			 size_t whysz);

/* What makes one trace's elements (all of them, as graph_store_load() gives them) incomplete:
 * GRAPH_INC_PARENT and GRAPH_INC_EDGE (GRAPH_INC_OPEN is known only to whoever stored it). */
uint32_t graph_trace_gaps(const struct graph *g);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The execution-graph model (docs/graphs.md is its reference): what every source of graph
 * elements fills in and every consumer reads.
 *
 *   trace   a 128-bit id; the elements that share it form one request's graph;
 *   task    a span of work on one host, process and thread: its type is (service, name);
 *           start and end in ns since the Unix epoch; a status; attributes;
 *   event   a point in time inside a task: name, attributes;
 *   edge    happened-before between two tasks or events: parent/child, follows-from,
 *           message send -> receive, thread wakeup, fork.
 *
 * Every element carries the source that produced it (GRAPH_SRC_*).  A struct graph is a batch
 * of elements of any number of traces, as one imported file or one live batch yields them;
 * its strings live in the graph's own arena and die with it.  Ids of tasks are unique within
 * their trace; an event id is 0 unless the source names events (X-Trace does), and then it
 * is unique within its trace.
 *
 * Nothing here allocates per element beyond the arena and the three arrays, which grow
 * geometrically; limits (GRAPH_MAX_*) bound what hostile input can make a batch hold.
 */
#ifndef WEFT_GRAPH_H
#define WEFT_GRAPH_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A batch holds at most this many elements of each kind (hostile input is bounded). */
#define GRAPH_MAX_ELEMS (16u * 1024 * 1024)
/* A string (name, service, attribute text) longer than this is cut, on a UTF-8 boundary. */
#define GRAPH_MAX_STR 65536

struct graph_id128 {
	uint64_t hi, lo; /* hi is 0 for 64-bit trace ids (Zipkin, Jaeger may write 16 hex digits) */
};

enum graph_source {
	GRAPH_SRC_UNKNOWN = 0,
	GRAPH_SRC_OTLP,
	GRAPH_SRC_JAEGER,
	GRAPH_SRC_ZIPKIN,
	GRAPH_SRC_XTRACE,
	GRAPH_SRC_LTTNG, /* an LTTng CTF trace */
	GRAPH_SRC_WEFT, /* weft's own provider, live (Execution graphs II) */
	GRAPH_SRC_KERNEL, /* kernel events weft inferred edges from */
	GRAPH_SRC_SKEW, /* elements weft derived itself (clock-skew bookkeeping) */
	GRAPH_SRC_COUNT
};

enum graph_status {
	GRAPH_STATUS_UNSET = 0,
	GRAPH_STATUS_OK,
	GRAPH_STATUS_ERROR,
};

/* What an edge means; the names are what docs/graphs.md and every output print. */
enum graph_edge_kind {
	GRAPH_EDGE_PARENT = 0, /* parent task -> child task (child of) */
	GRAPH_EDGE_FOLLOWS, /* follows-from: the cause does not wait for the effect */
	GRAPH_EDGE_MESSAGE, /* message send -> receive (an RPC, a queue hand-off) */
	GRAPH_EDGE_WAKEUP, /* the waker thread -> the woken thread */
	GRAPH_EDGE_FORK, /* parent process/thread -> the child it created */
	GRAPH_EDGE_EVENT, /* event -> event inside or across tasks (X-Trace's Edge) */
	GRAPH_EDGE_COUNT
};

struct graph_task {
	struct graph_id128 trace;
	uint64_t id; /* unique within the trace, never 0 */
	uint64_t parent; /* the parent task's id, 0 for a root; an edge GRAPH_EDGE_PARENT too */
	const char *service; /* with name, the task's type; never NULL ("" if unknown) */
	const char *name;
	const char *host; /* "" if unknown */
	int64_t pid, tid; /* -1 if unknown */
	int64_t start, end; /* ns since the Unix epoch, end >= start */
	int64_t skew; /* ns added to start and end by clock-skew correction (0: none) */
	enum graph_status status;
	enum graph_source source;
	const char *attrs; /* a JSON object's compact text ("{}" if none) */
};

struct graph_event {
	struct graph_id128 trace;
	uint64_t task; /* the task it happened in */
	uint64_t id; /* 0 unless the source names events */
	int64_t time; /* ns since the Unix epoch (skew applied like its task's) */
	const char *name;
	enum graph_source source;
	const char *attrs; /* JSON object text */
};

/* An edge's ends are a task, or an event of a task when *_event is not 0. */
struct graph_edge {
	struct graph_id128 trace;
	enum graph_edge_kind kind;
	uint64_t from_task, from_event;
	uint64_t to_task, to_event;
	enum graph_source source;
};

struct graph_arena_block;

struct graph {
	struct graph_task *tasks;
	size_t ntasks, cap_tasks;
	struct graph_event *events;
	size_t nevents, cap_events;
	struct graph_edge *edges;
	size_t nedges, cap_edges;
	struct graph_arena_block *arena;
};

void graph_init(struct graph *g);
void graph_free(struct graph *g); /* then it is as after graph_init() */
void graph_clear(struct graph *g); /* empty, keeps capacity */

/* Append one element (copied; fields are not checked here, graph_check() does).  The returned
 * pointer is valid until the next append of that kind; NULL when out of memory or over
 * GRAPH_MAX_ELEMS. */
struct graph_task *graph_add_task(struct graph *g, const struct graph_task *t);
struct graph_event *graph_add_event(struct graph *g, const struct graph_event *e);
struct graph_edge *graph_add_edge(struct graph *g, const struct graph_edge *e);

/* Appends copies of all of src's elements to dst, their strings copied into dst's arena (so
 * src may be freed after).  0, or -ENOMEM / -E2BIG (over GRAPH_MAX_ELEMS) with dst as it
 * was before the call. */
int graph_append(struct graph *dst, const struct graph *src);

/* A copy of s[0, len) in the graph's arena, NUL-terminated, cut at GRAPH_MAX_STR on a UTF-8
 * boundary; invalid UTF-8 bytes replaced by '?'.  NULL when out of memory. */
const char *graph_strndup(struct graph *g, const char *s, size_t len);
const char *graph_strdup(struct graph *g, const char *s);

/*
 * Ids as the formats write them.  Hex: 1..32 digits for a trace (fewer than 32 are the low
 * digits, as Zipkin's 16-digit ids), 1..16 for a task; base64 (OTLP JSON written from
 * protobuf, Jaeger's protobuf JSON): 16 bytes for a trace, 8 for a task.  0 on success,
 * -EINVAL on anything else (empty, bad digit, bad length).
 */
int graph_id128_parse_hex(const char *s, size_t len, struct graph_id128 *out);
int graph_id64_parse_hex(const char *s, size_t len, uint64_t *out);
int graph_id128_parse_base64(const char *s, size_t len, struct graph_id128 *out);
int graph_id64_parse_base64(const char *s, size_t len, uint64_t *out);
/* Lower-case hex, 32 digits (buf >= 33) and 16 digits (buf >= 17). */
void graph_id128_hex(struct graph_id128 id, char *buf);
void graph_id64_hex(uint64_t id, char *buf);
bool graph_id128_eq(struct graph_id128 a, struct graph_id128 b);
int graph_id128_cmp(struct graph_id128 a, struct graph_id128 b);

const char *graph_source_name(enum graph_source s); /* "otlp", "zipkin", ... */
const char *graph_edge_kind_name(enum graph_edge_kind k); /* "parent", "message", ... */
const char *graph_status_name(enum graph_status s); /* "unset", "ok", "error" */
/* -1 when the name is none of them */
int graph_edge_kind_parse(const char *name);
int graph_source_parse(const char *name);

/*
 * Consistency, after an import and before storing: every task has a non-zero id unique in its
 * trace and end >= start; every event and edge names tasks of the batch or (parent edges
 * only) a parent outside it.  0, or -EINVAL with why[] saying what is wrong with which
 * element.
 */
int graph_check(const struct graph *g, char *why, size_t whysz);

/* Sorts tasks by (trace, start, id), events by (trace, time), edges by (trace, from, to). */
void graph_sort(struct graph *g);

#endif

/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the JSON importers share (graph/import.c implements it): the import in progress (the
 * file's name for messages, the graph, where its counts stood before), refusals with the JSON
 * path of the offending value, attribute text, time and id conversions with their bounds, and
 * a sorted index of the tasks one import added.  Private to graph/import*.c.
 *
 * A refusal is one call, imp_fail(im, "data[%zu].spans[%zu].spanID: not 16 hex digits", ...),
 * which writes "NAME: PATH: WHY" into the caller's graph_import_err and returns -EINVAL; the
 * dispatcher (graph_import_buffer) then puts the graph's counts back, so an importer returns
 * at the first fault without undoing anything itself.
 */
#ifndef WEFT_GRAPH_IMPORT_PRIV_H
#define WEFT_GRAPH_IMPORT_PRIV_H
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "graph/graph.h"
#include "graph/import.h"

/* Times (ns since the epoch) and durations outside [0, IMP_TIME_MAX] are absurd: refused.
 * IMP_TIME_MAX is 2200-01-01, far enough for any trace and safely below INT64_MAX. */
#define IMP_TIME_MAX (7258118400LL * 1000000000LL)

/* Attribute values nested deeper than this (OTLP arrays of lists of ...) are refused. */
#define IMP_MAX_DEPTH 32

struct imp {
	const char *name; /* the file's name, for messages */
	struct graph *g;
	struct graph_import_err *err;
	size_t nt, ne, nd; /* g's counts before this import: what it is restored to on error */
};

int imp_fail(struct imp *im, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int imp_nomem(struct imp *im);

/* A JSON object as compact, key-sorted text in g's arena ("{}" for NULL or empty); NULL when
 * out of memory.  Text over GRAPH_MAX_STR (which the arena would cut, breaking the JSON) is
 * made to fit: string values over 1 KiB are cut and "weft.attrs_cut": true added; if that is
 * not enough, the attributes are only {"weft.attrs_cut": true}. */
const char *imp_attrs(struct imp *im, const json_t *obj);
/* A JSON string's value in g's arena ("" for NULL); NULL when out of memory. */
const char *imp_jstr(struct imp *im, const json_t *s);

/* Whether v nests at most max lists and objects deep (it stops looking past max, so its own
 * recursion is bounded by max). */
bool imp_json_depth_ok(const json_t *v, int max);

/* us -> ns within [0, IMP_TIME_MAX]; false if absurd. */
bool imp_us_to_ns(json_int_t us, int64_t *ns);
/* An unsigned decimal in a JSON string or integer (protobuf JSON writes 64-bit integers as
 * strings) within [0, max]; -EINVAL if it is neither, or out of range. */
int imp_json_u64(const json_t *v, uint64_t max, uint64_t *out);
/* An integer in a JSON integer or a decimal string; -EINVAL otherwise. */
int imp_json_i64(const json_t *v, int64_t *out);

/* Ids in a JSON string: hex, or (b64) base64 when it is not full-width hex (16 digits for a
 * span, 16 or 32 for a trace) and decodes as base64 of 8 (16) bytes.
 * -EINVAL when it is not a string or not an id; id 0 refused for tasks (zero_ok false). */
int imp_id64(const json_t *v, bool b64, bool zero_ok, uint64_t *out);
int imp_id128(const json_t *v, bool b64, struct graph_id128 *out);

/* A sorted index of the tasks g->tasks[from, ntasks): lookups by (trace, id). */
struct imp_index {
	const struct graph *g;
	size_t *idx, n;
};
int imp_index_build(struct imp_index *ix, const struct graph *g, size_t from);
/* The position in g->tasks of task (trace, id), or -1. */
long imp_index_find(const struct imp_index *ix, struct graph_id128 trace, uint64_t id);
/* The first task id that appears twice (same trace) in the index, with its trace; false if
 * none. */
bool imp_index_dup(const struct imp_index *ix, struct graph_id128 *trace, uint64_t *id);
void imp_index_free(struct imp_index *ix);

/* 64-bit FNV-1a, for derived ids (docs/graphs.md says which). */
uint64_t imp_fnv1a(uint64_t h, const void *p, size_t n);
#define IMP_FNV_INIT 0xcbf29ce484222325ULL

/* The importers: 0 or -errno (with im->err filled); they may leave partial elements in g. */
int imp_otlp(struct imp *im, json_t *root, size_t value_index);
int imp_jaeger(struct imp *im, json_t *root);
int imp_zipkin(struct imp *im, json_t *root);
int imp_xtrace(struct imp *im, json_t *root);

/* The weft-specific extensions exports write so that edges the target format cannot express
 * come back (docs/graphs.md, "Formats"): names shared by the exporters and importers. */
#define WEFT_ATTR_EDGES "weft.edges" /* Jaeger span tag: JSON list of extra edges */
#define WEFT_ATTR_EDGE_KIND "weft.edge.kind" /* OTLP link attribute */
#define WEFT_ATTR_FROM_EVENT "weft.edge.from_event"
#define WEFT_ATTR_TO_EVENT "weft.edge.to_event"
#define WEFT_ATTR_EVENT_ID "weft.event_id" /* OTLP event attribute, Jaeger log field */
#define WEFT_ATTR_JSON "weft.json" /* Jaeger tag / log field: keys whose values are JSON text */

/* An OTLP JSON KeyValue {"key": key, "value": AnyValue of v} (export.c); v is taken. */
json_t *graph_otlp_attr(const char *key, json_t *v);

#endif

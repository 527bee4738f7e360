// SPDX-License-Identifier: Apache-2.0
/*
 * The in-memory batch of graph elements (graph.h): three growing arrays and an arena for their
 * strings, plus the id syntaxes the formats use.  The arena hands out strings from 64 KiB
 * blocks (larger strings get a block of their own), so an import of a million spans makes a
 * few hundred allocations, not millions, and graph_free() is one walk.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
#include "graph/graph.h"

#define ARENA_BLOCK (64 * 1024)

struct graph_arena_block {
	struct graph_arena_block *next;
	size_t used, cap;
	char data[];
};

void graph_init(struct graph *g)
{
	memset(g, 0, sizeof(*g));
}

void graph_free(struct graph *g)
{
	struct graph_arena_block *b = g->arena, *n;

	for (; b; b = n) {
		n = b->next;
		free(b);
	}
	free(g->tasks);
	free(g->events);
	free(g->edges);
	graph_init(g);
}

void graph_clear(struct graph *g)
{
	struct graph_arena_block *b = g->arena, *n;

	for (; b; b = n) {
		n = b->next;
		free(b);
	}
	g->arena = NULL;
	g->ntasks = g->nevents = g->nedges = 0;
}

/* Room for one more element of `size` bytes in *arr (n used of *cap). */
static void *grow(void **arr, size_t n, size_t *cap, size_t size)
{
	size_t ncap;
	void *p;

	if (n >= GRAPH_MAX_ELEMS)
		return NULL;
	if (n < *cap)
		return (char *)*arr + n * size;
	ncap = *cap ? *cap * 2 : 64;
	if (ncap > GRAPH_MAX_ELEMS)
		ncap = GRAPH_MAX_ELEMS;
	p = realloc(*arr, ncap * size);
	if (!p)
		return NULL;
	*arr = p;
	*cap = ncap;
	return (char *)p + n * size;
}

struct graph_task *graph_add_task(struct graph *g, const struct graph_task *t)
{
	struct graph_task *d = grow((void **)&g->tasks, g->ntasks, &g->cap_tasks, sizeof(*t));

	if (!d)
		return NULL;
	*d = *t;
	g->ntasks++;
	return d;
}

struct graph_event *graph_add_event(struct graph *g, const struct graph_event *e)
{
	struct graph_event *d = grow((void **)&g->events, g->nevents, &g->cap_events, sizeof(*e));

	if (!d)
		return NULL;
	*d = *e;
	g->nevents++;
	return d;
}

struct graph_edge *graph_add_edge(struct graph *g, const struct graph_edge *e)
{
	struct graph_edge *d = grow((void **)&g->edges, g->nedges, &g->cap_edges, sizeof(*e));

	if (!d)
		return NULL;
	*d = *e;
	g->nedges++;
	return d;
}

static char *arena_alloc(struct graph *g, size_t n)
{
	struct graph_arena_block *b = g->arena;
	size_t cap;

	if (b && b->cap - b->used >= n) {
		char *p = b->data + b->used;

		b->used += n;
		return p;
	}
	cap = n > ARENA_BLOCK / 4 ? n : ARENA_BLOCK;
	b = malloc(sizeof(*b) + cap);
	if (!b)
		return NULL;
	b->cap = cap;
	b->used = n;
	if (cap == n && g->arena) { /* a big string: keep the current block current */
		b->next = g->arena->next;
		g->arena->next = b;
	} else {
		b->next = g->arena;
		g->arena = b;
	}
	return b->data;
}

const char *graph_strndup(struct graph *g, const char *s, size_t len)
{
	size_t i = 0, k;
	char *p;

	if (!s)
		len = 0;
	if (len > GRAPH_MAX_STR) { /* cut on a character boundary */
		len = GRAPH_MAX_STR;
		while (len > 0 && ((unsigned char)s[len] & 0xc0) == 0x80)
			len--;
	}
	p = arena_alloc(g, len + 1);
	if (!p)
		return NULL;
	while (i < len) {
		/* a run of ASCII at once: what text_utf8_seq() takes one byte at a time */
		for (k = i; k < len && !((unsigned char)s[k] & 0x80); k++)
			;
		if (k > i) {
			memcpy(p + i, s + i, k - i);
			i = k;
			continue;
		}
		k = text_utf8_seq(s + i, len - i);
		if (k == 0) {
			p[i++] = '?';
			continue;
		}
		memcpy(p + i, s + i, k);
		i += k;
	}
	p[len] = '\0';
	return p;
}

const char *graph_strdup(struct graph *g, const char *s)
{
	return graph_strndup(g, s, s ? strlen(s) : 0);
}

int graph_append(struct graph *dst, const struct graph *src)
{
	size_t nt = dst->ntasks, ne = dst->nevents, nd = dst->nedges, i;

	if (src->ntasks > GRAPH_MAX_ELEMS - nt || src->nevents > GRAPH_MAX_ELEMS - ne ||
	    src->nedges > GRAPH_MAX_ELEMS - nd)
		return -E2BIG;
	for (i = 0; i < src->ntasks; i++) {
		struct graph_task t = src->tasks[i];

		t.service = graph_strdup(dst, t.service);
		t.name = graph_strdup(dst, t.name);
		t.host = graph_strdup(dst, t.host);
		t.attrs = graph_strdup(dst, t.attrs);
		if (!t.service || !t.name || !t.host || !t.attrs || !graph_add_task(dst, &t))
			goto out_undo;
	}
	for (i = 0; i < src->nevents; i++) {
		struct graph_event e = src->events[i];

		e.name = graph_strdup(dst, e.name);
		e.attrs = graph_strdup(dst, e.attrs);
		if (!e.name || !e.attrs || !graph_add_event(dst, &e))
			goto out_undo;
	}
	for (i = 0; i < src->nedges; i++)
		if (!graph_add_edge(dst, &src->edges[i]))
			goto out_undo;
	return 0;
out_undo:
	/* the strings already copied stay in the arena until it is freed or cleared */
	dst->ntasks = nt;
	dst->nevents = ne;
	dst->nedges = nd;
	return -ENOMEM;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Up to 16 hex digits into *out. */
static int hex64(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;
	int d;

	if (len == 0 || len > 16)
		return -EINVAL;
	for (i = 0; i < len; i++) {
		d = hexval(s[i]);
		if (d < 0)
			return -EINVAL;
		v = v << 4 | (uint64_t)d;
	}
	*out = v;
	return 0;
}

int graph_id64_parse_hex(const char *s, size_t len, uint64_t *out)
{
	return hex64(s, len, out);
}

int graph_id128_parse_hex(const char *s, size_t len, struct graph_id128 *out)
{
	struct graph_id128 id = { 0, 0 };

	if (len == 0 || len > 32)
		return -EINVAL;
	if (len > 16) {
		if (hex64(s, len - 16, &id.hi) || hex64(s + len - 16, 16, &id.lo))
			return -EINVAL;
	} else if (hex64(s, len, &id.lo)) {
		return -EINVAL;
	}
	*out = id;
	return 0;
}

static int b64val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

/* Standard or URL-safe base64, padded or not, into exactly `want` bytes. */
static int b64_exact(const char *s, size_t len, uint8_t *out, size_t want)
{
	uint32_t acc = 0;
	size_t i, n = 0;
	int bits = 0, v;

	while (len > 0 && s[len - 1] == '=')
		len--;
	for (i = 0; i < len; i++) {
		v = b64val(s[i]);
		if (v < 0)
			return -EINVAL;
		acc = acc << 6 | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (n == want)
				return -EINVAL;
			out[n++] = (uint8_t)(acc >> bits);
		}
	}
	if (n != want || (acc & ((1u << bits) - 1)) != 0)
		return -EINVAL; /* wrong length, or stray bits in the last character */
	return 0;
}

static uint64_t be64(const uint8_t *b)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v = v << 8 | b[i];
	return v;
}

int graph_id128_parse_base64(const char *s, size_t len, struct graph_id128 *out)
{
	uint8_t b[16];

	if (b64_exact(s, len, b, 16))
		return -EINVAL;
	out->hi = be64(b);
	out->lo = be64(b + 8);
	return 0;
}

int graph_id64_parse_base64(const char *s, size_t len, uint64_t *out)
{
	uint8_t b[8];

	if (b64_exact(s, len, b, 8))
		return -EINVAL;
	*out = be64(b);
	return 0;
}

void graph_id128_hex(struct graph_id128 id, char *buf)
{
	snprintf(buf, 33, "%016llx%016llx", (unsigned long long)id.hi, (unsigned long long)id.lo);
}

void graph_id64_hex(uint64_t id, char *buf)
{
	snprintf(buf, 17, "%016llx", (unsigned long long)id);
}

bool graph_id128_eq(struct graph_id128 a, struct graph_id128 b)
{
	return a.hi == b.hi && a.lo == b.lo;
}

int graph_id128_cmp(struct graph_id128 a, struct graph_id128 b)
{
	if (a.hi != b.hi)
		return a.hi < b.hi ? -1 : 1;
	if (a.lo != b.lo)
		return a.lo < b.lo ? -1 : 1;
	return 0;
}

static const char *const source_names[GRAPH_SRC_COUNT] = {
	[GRAPH_SRC_UNKNOWN] = "unknown", [GRAPH_SRC_OTLP] = "otlp",
	[GRAPH_SRC_JAEGER] = "jaeger",	 [GRAPH_SRC_ZIPKIN] = "zipkin",
	[GRAPH_SRC_XTRACE] = "xtrace",	 [GRAPH_SRC_LTTNG] = "lttng",
	[GRAPH_SRC_WEFT] = "weft",	 [GRAPH_SRC_KERNEL] = "kernel",
	[GRAPH_SRC_SKEW] = "skew",
};

static const char *const edge_names[GRAPH_EDGE_COUNT] = {
	[GRAPH_EDGE_PARENT] = "parent",	  [GRAPH_EDGE_FOLLOWS] = "follows",
	[GRAPH_EDGE_MESSAGE] = "message", [GRAPH_EDGE_WAKEUP] = "wakeup",
	[GRAPH_EDGE_FORK] = "fork",	  [GRAPH_EDGE_EVENT] = "event",
};

const char *graph_source_name(enum graph_source s)
{
	return (unsigned)s < GRAPH_SRC_COUNT ? source_names[s] : "unknown";
}

const char *graph_edge_kind_name(enum graph_edge_kind k)
{
	return (unsigned)k < GRAPH_EDGE_COUNT ? edge_names[k] : "unknown";
}

const char *graph_status_name(enum graph_status s)
{
	return s == GRAPH_STATUS_OK ? "ok" : s == GRAPH_STATUS_ERROR ? "error" : "unset";
}

int graph_edge_kind_parse(const char *name)
{
	int i;

	for (i = 0; i < GRAPH_EDGE_COUNT; i++)
		if (!strcmp(name, edge_names[i]))
			return i;
	return -1;
}

int graph_source_parse(const char *name)
{
	int i;

	for (i = 0; i < GRAPH_SRC_COUNT; i++)
		if (!strcmp(name, source_names[i]))
			return i;
	return -1;
}

/* Tasks sorted by (trace, id) for lookups: an index array into g->tasks. */
static int cmp_task_idx(const void *a, const void *b, void *arg)
{
	const struct graph *g = arg;
	const struct graph_task *x = &g->tasks[*(const size_t *)a];
	const struct graph_task *y = &g->tasks[*(const size_t *)b];
	int c = graph_id128_cmp(x->trace, y->trace);

	if (c)
		return c;
	return x->id < y->id ? -1 : x->id > y->id;
}

static bool find_task(const struct graph *g, const size_t *idx, struct graph_id128 trace,
		      uint64_t id)
{
	size_t lo = 0, hi = g->ntasks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct graph_task *t = &g->tasks[idx[mid]];
		int c = graph_id128_cmp(t->trace, trace);

		if (c == 0)
			c = t->id < id ? -1 : t->id > id;
		if (c == 0)
			return true;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

int graph_check(const struct graph *g, char *why, size_t whysz)
{
	size_t *idx, i;
	char tr[33], id[17];
	int ret = 0;

	idx = malloc((g->ntasks ? g->ntasks : 1) * sizeof(*idx));
	if (!idx) {
		snprintf(why, whysz, "out of memory");
		return -ENOMEM;
	}
	for (i = 0; i < g->ntasks; i++) {
		const struct graph_task *t = &g->tasks[i];

		idx[i] = i;
		graph_id128_hex(t->trace, tr);
		if (t->id == 0) {
			snprintf(why, whysz, "task %zu (trace %s): id 0", i, tr);
			ret = -EINVAL;
			goto out;
		}
		if (t->end < t->start) {
			graph_id64_hex(t->id, id);
			snprintf(why, whysz, "task %s (trace %s) ends before it starts", id, tr);
			ret = -EINVAL;
			goto out;
		}
	}
	qsort_r(idx, g->ntasks, sizeof(*idx), cmp_task_idx, (void *)g);
	for (i = 1; i < g->ntasks; i++) {
		if (cmp_task_idx(&idx[i - 1], &idx[i], (void *)g) == 0) {
			graph_id128_hex(g->tasks[idx[i]].trace, tr);
			graph_id64_hex(g->tasks[idx[i]].id, id);
			snprintf(why, whysz, "task %s appears twice in trace %s", id, tr);
			ret = -EINVAL;
			goto out;
		}
	}
	for (i = 0; i < g->nevents; i++) {
		const struct graph_event *e = &g->events[i];

		if (!find_task(g, idx, e->trace, e->task)) {
			graph_id128_hex(e->trace, tr);
			graph_id64_hex(e->task, id);
			snprintf(why, whysz, "event '%s' names task %s, not in trace %s", e->name,
				 id, tr);
			ret = -EINVAL;
			goto out;
		}
	}
	for (i = 0; i < g->nedges; i++) {
		const struct graph_edge *e = &g->edges[i];
		bool from = find_task(g, idx, e->trace, e->from_task);

		if ((!from && e->kind != GRAPH_EDGE_PARENT) ||
		    !find_task(g, idx, e->trace, e->to_task)) {
			graph_id128_hex(e->trace, tr);
			graph_id64_hex(from ? e->to_task : e->from_task, id);
			snprintf(why, whysz, "a %s edge names task %s, not in trace %s",
				 graph_edge_kind_name(e->kind), id, tr);
			ret = -EINVAL;
			goto out;
		}
	}
out:
	free(idx);
	return ret;
}

static int cmp_task(const void *a, const void *b)
{
	const struct graph_task *x = a, *y = b;
	int c = graph_id128_cmp(x->trace, y->trace);

	if (c)
		return c;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static int cmp_event(const void *a, const void *b)
{
	const struct graph_event *x = a, *y = b;
	int c = graph_id128_cmp(x->trace, y->trace);

	if (c)
		return c;
	if (x->time != y->time)
		return x->time < y->time ? -1 : 1;
	if (x->task != y->task)
		return x->task < y->task ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int cmp_edge(const void *a, const void *b)
{
	const struct graph_edge *x = a, *y = b;
	int c = graph_id128_cmp(x->trace, y->trace);

	if (c)
		return c;
	if (x->from_task != y->from_task)
		return x->from_task < y->from_task ? -1 : 1;
	if (x->to_task != y->to_task)
		return x->to_task < y->to_task ? -1 : 1;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->from_event != y->from_event)
		return x->from_event < y->from_event ? -1 : 1;
	return x->to_event < y->to_event ? -1 : x->to_event > y->to_event;
}

void graph_sort(struct graph *g)
{
	/* an empty array's pointer may be NULL, which qsort() must not be given */
	if (g->ntasks)
		qsort(g->tasks, g->ntasks, sizeof(*g->tasks), cmp_task);
	if (g->nevents)
		qsort(g->events, g->nevents, sizeof(*g->events), cmp_event);
	if (g->nedges)
		qsort(g->edges, g->nedges, sizeof(*g->edges), cmp_edge);
}

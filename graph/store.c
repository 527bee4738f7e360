// SPDX-License-Identifier: Apache-2.0
/*
 * The graph store's backend-neutral face (store.h): every graph_store_*() call goes through
 * the backend's table of entry points, so the command line and the aggregator never name a
 * backend.  graph_store_open() opens the one backend there is, SQLite (store_sqlite.c); a
 * backend that forwards to a remote store would be chosen here, by the form of the path.
 *
 * Nothing here touches a store's contents; the checks that belong to every backend (NULL
 * arguments) are made once, here.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "graph/store.h"

static int bad_args(char *why, size_t whysz)
{
	if (why && whysz)
		snprintf(why, whysz, "graph store: missing argument");
	return -EINVAL;
}

struct graph_store *graph_store_open(const char *path, char *why, size_t whysz)
{
	if (!path || !*path) {
		bad_args(why, whysz);
		errno = EINVAL;
		return NULL;
	}
	return graph_store_sqlite_open(path, why, whysz);
}

void graph_store_close(struct graph_store *s)
{
	if (s)
		s->ops->close(s);
}

int graph_store_put(struct graph_store *s, const struct graph *g, struct graph_put_stats *st,
		    char *why, size_t whysz)
{
	if (!s || !g)
		return bad_args(why, whysz);
	return s->ops->put(s, g, st, why, whysz);
}

int graph_store_put_opts(struct graph_store *s, const struct graph *g, unsigned flags,
			 struct graph_put_stats *st, char *why, size_t whysz)
{
	if (!s || !g)
		return bad_args(why, whysz);
	if (!s->ops->put_opts) {
		if (flags) {
			if (why && whysz)
				snprintf(why, whysz, "graph store %s: no sampled puts",
					 s->ops->name);
			return -EOPNOTSUPP;
		}
		return s->ops->put(s, g, st, why, whysz);
	}
	return s->ops->put_opts(s, g, flags, st, why, whysz);
}

int graph_store_put_aggs(struct graph_store *s, const struct graph_aggs *a, char *why, size_t whysz)
{
	if (!s || !a)
		return bad_args(why, whysz);
	if (!s->ops->put_aggs) {
		if (why && whysz)
			snprintf(why, whysz, "graph store %s: no aggregate puts", s->ops->name);
		return -EOPNOTSUPP;
	}
	return s->ops->put_aggs(s, a, why, whysz);
}

int graph_store_sampling(struct graph_store *s, struct graph_sampling *out, char *why, size_t whysz)
{
	if (!s || !out)
		return bad_args(why, whysz);
	if (!s->ops->sampling) {
		*out = (struct graph_sampling){ 0 };
		return 0;
	}
	return s->ops->sampling(s, out, why, whysz);
}

ssize_t graph_store_list(struct graph_store *s, const struct graph_filter *f,
			 struct graph_trace_row **rows, char *why, size_t whysz)
{
	if (!s || !rows)
		return bad_args(why, whysz);
	return s->ops->list(s, f, rows, why, whysz);
}

int graph_store_load(struct graph_store *s, const char *trace_hex, struct graph *g, char *why,
		     size_t whysz)
{
	if (!s || !trace_hex || !g)
		return bad_args(why, whysz);
	return s->ops->load(s, trace_hex, g, why, whysz);
}

int graph_store_load_name(struct graph_store *s, const char *name, struct graph *g, char *why,
			  size_t whysz)
{
	char padded[40];
	int rc;

	why[0] = 0;
	rc = graph_store_load(s, name, g, why, whysz);
	if (rc == -ENOENT && strlen(name) < 16) {
		char why2[512];

		/* a prefix of a 64-bit id's own 16 digits (it prints with 16 leading zeros) */
		snprintf(padded, sizeof(padded), "0000000000000000%s", name);
		why2[0] = 0;
		graph_clear(g);
		if (graph_store_load(s, padded, g, why2, sizeof(why2)) == 0)
			rc = 0;
		else if (why2[0] && !strstr(why2, "no trace"))
			snprintf(why, whysz, "%s", why2);
	}
	if (rc == 0 && g->ntasks == 0)
		rc = -ENOENT;
	return rc;
}

int graph_store_context(struct graph_store *s, const struct graph *g, struct graph_context *c,
			char *why, size_t whysz)
{
	if (!s || !g || !c)
		return bad_args(why, whysz);
	return s->ops->context(s, g, c, why, whysz);
}

int graph_store_type_sketch(struct graph_store *s, const char *service, const char *name,
			    uint64_t *counts, char *why, size_t whysz)
{
	if (!s || !service || !name || !counts)
		return bad_args(why, whysz);
	return s->ops->type_sketch(s, service, name, counts, why, whysz);
}

int graph_store_concurrency(struct graph_store *s, const char *host, int64_t pid, int64_t from,
			    int64_t to, uint32_t *counts, size_t n, char *why, size_t whysz)
{
	if (!s || !host || (n && !counts))
		return bad_args(why, whysz);
	return s->ops->concurrency(s, host, pid, from, to, counts, n, why, whysz);
}

ssize_t graph_store_stats(struct graph_store *s, struct graph_type_stats **rows, char *why,
			  size_t whysz)
{
	if (!s || !rows)
		return bad_args(why, whysz);
	return s->ops->stats(s, rows, why, whysz);
}

ssize_t graph_store_retain(struct graph_store *s, int64_t before, uint64_t max_bytes, char *why,
			   size_t whysz)
{
	if (!s)
		return bad_args(why, whysz);
	return s->ops->retain(s, before, max_bytes, 0, why, whysz);
}

ssize_t graph_retention_step(struct graph_store *s, struct graph_retention *r, size_t max_traces,
			     char *why, size_t whysz)
{
	struct timespec ts;
	int64_t now, before = 0;
	ssize_t n;

	if (!s || !r || !max_traces)
		return bad_args(why, whysz);
	if (!r->max_age_ns && !r->max_bytes)
		return 0;
	if (r->max_age_ns) {
		clock_gettime(CLOCK_REALTIME, &ts);
		now = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
		/* a bound longer than the clock reaches back drops nothing; 1, not 0 (no bound) */
		before = r->max_age_ns < (uint64_t)now ? now - (int64_t)r->max_age_ns : 1;
	}
	n = s->ops->retain(s, before, r->max_bytes, max_traces, why, whysz);
	if (n > 0)
		r->dropped += (uint64_t)n;
	return n;
}

ssize_t graph_store_retain_some(struct graph_store *s, int64_t before, uint64_t max_bytes,
				size_t max_traces, char *why, size_t whysz)
{
	if (!s || !max_traces)
		return bad_args(why, whysz);
	return s->ops->retain(s, before, max_bytes, max_traces, why, whysz);
}

int graph_store_merge(struct graph_store *s, const char *other, char *why, size_t whysz)
{
	if (!s || !other)
		return bad_args(why, whysz);
	return s->ops->merge(s, other, why, whysz);
}

void graph_context_free(struct graph_context *c)
{
	if (!c)
		return;
	free(c->tasks);
	free(c->events);
	free(c->edges);
	c->tasks = NULL;
	c->events = NULL;
	c->edges = NULL;
	c->ntasks = c->nevents = c->nedges = 0;
}

int graph_store_mark_get(struct graph_store *s, const char *trace_hex, uint32_t *flags, char *why,
			 size_t whysz)
{
	if (!s || !trace_hex || !flags)
		return bad_args(why, whysz);
	if (!s->ops->mark_get) {
		snprintf(why, whysz, "the %s graph store keeps no marks", s->ops->name);
		return -EOPNOTSUPP;
	}
	return s->ops->mark_get(s, trace_hex, flags, why, whysz);
}

int graph_store_mark_set(struct graph_store *s, const char *trace_hex, uint32_t flags, char *why,
			 size_t whysz)
{
	if (!s || !trace_hex)
		return bad_args(why, whysz);
	if (!s->ops->mark_set) {
		snprintf(why, whysz, "the %s graph store keeps no marks", s->ops->name);
		return -EOPNOTSUPP;
	}
	return s->ops->mark_set(s, trace_hex, flags, why, whysz);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static bool has_task(const uint64_t *ids, size_t n, uint64_t id)
{
	return bsearch(&id, ids, n, sizeof(*ids), cmp_u64) != NULL;
}

uint32_t graph_trace_gaps(const struct graph *g)
{
	uint64_t *ids;
	uint32_t f = 0;

	if (!g || !g->ntasks)
		return g && g->nedges ? GRAPH_INC_EDGE : 0;
	ids = malloc(g->ntasks * sizeof(*ids));
	if (!ids)
		return 0;
	for (size_t i = 0; i < g->ntasks; i++)
		ids[i] = g->tasks[i].id;
	qsort(ids, g->ntasks, sizeof(*ids), cmp_u64);
	for (size_t i = 0; i < g->ntasks; i++)
		if (g->tasks[i].parent && !has_task(ids, g->ntasks, g->tasks[i].parent))
			f |= GRAPH_INC_PARENT;
	for (size_t i = 0; i < g->nedges; i++)
		if (!has_task(ids, g->ntasks, g->edges[i].from_task) ||
		    !has_task(ids, g->ntasks, g->edges[i].to_task))
			f |= GRAPH_INC_EDGE;
	free(ids);
	return f;
}

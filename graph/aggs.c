// SPDX-License-Identifier: Apache-2.0
/*
 * Graph aggregates (aggs.h): the store's per-type context, pre-aggregated by a capture from
 * every task it saw.  Four arrays of entries and one open-addressing index over all of them
 * (a 64-bit hash of the entry's key; collisions compared field by field), so an add is O(1)
 * per element.  What is counted and how mirrors graph/store_sqlite.c's put exactly (first
 * event of a name per task, edges with both ends known, a task's first GRAPH_CONC_MAX_MS ms
 * of concurrency), so that graph_store_put_aggs() of these and a plain put of the same
 * traces leave the same aggregates.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "graph/aggs.h"
#include "graph/store.h"
#include "kernel/weft_sketch.h"

enum { IX_TYPE = 1, IX_EVENT, IX_EDGE, IX_CONC };

struct ixent {
	uint64_t h;
	uint32_t kind; /* 0: free */
	uint32_t i; /* index into its array */
};

struct graph_aggs_index {
	struct ixent *e;
	size_t n, cap;
};

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 29;
	return h;
}

static uint64_t strhash(uint64_t h, const char *s)
{
	uint64_t x = 0xcbf29ce484222325ull;

	for (; *s; s++)
		x = (x ^ (unsigned char)*s) * 0x100000001b3ull;
	return mix(h, x);
}

static const char *str_or_empty(const char *s)
{
	return s ? s : "";
}

void graph_aggs_init(struct graph_aggs *a)
{
	memset(a, 0, sizeof(*a));
	graph_init(&a->arena);
}

void graph_aggs_free(struct graph_aggs *a)
{
	for (size_t i = 0; i < a->ntypes; i++)
		free(a->types[i].sketch);
	free(a->types);
	free(a->events);
	free(a->edges);
	free(a->conc);
	if (a->ix)
		free(a->ix->e);
	free(a->ix);
	graph_free(&a->arena);
	graph_aggs_init(a);
}

void graph_aggs_clear(struct graph_aggs *a)
{
	graph_aggs_free(a);
}

bool graph_aggs_empty(const struct graph_aggs *a)
{
	return !a->ntypes && !a->nevents && !a->nedges && !a->nconc && !a->sampling.seen;
}

static bool ix_match(const struct graph_aggs *a, const struct ixent *x, uint32_t kind,
		     const void *key)
{
	if (x->kind != kind)
		return false;
	switch (kind) {
	case IX_TYPE: {
		const struct graph_agg_type *k = key, *t = &a->types[x->i];

		return strcmp(k->service, t->service) == 0 && strcmp(k->name, t->name) == 0;
	}
	case IX_EVENT: {
		const struct graph_agg_event *k = key, *t = &a->events[x->i];

		return k->type == t->type && strcmp(k->name, t->name) == 0;
	}
	case IX_EDGE: {
		const struct graph_agg_edge *k = key, *t = &a->edges[x->i];

		return k->ptype == t->ptype && k->ctype == t->ctype && k->kind == t->kind;
	}
	default: {
		const struct graph_agg_conc *k = key, *t = &a->conc[x->i];

		return k->pid == t->pid && k->ms == t->ms && strcmp(k->host, t->host) == 0;
	}
	}
}

static int ix_grow(struct graph_aggs *a)
{
	struct graph_aggs_index *ix = a->ix;
	size_t ncap = ix->cap ? ix->cap * 2 : 256;
	struct ixent *ne = calloc(ncap, sizeof(*ne));

	if (!ne)
		return -ENOMEM;
	for (size_t i = 0; i < ix->cap; i++) {
		size_t j;

		if (!ix->e[i].kind)
			continue;
		for (j = ix->e[i].h & (ncap - 1); ne[j].kind; j = (j + 1) & (ncap - 1))
			;
		ne[j] = ix->e[i];
	}
	free(ix->e);
	ix->e = ne;
	ix->cap = ncap;
	return 0;
}

/* The slot of key (found: *found, its index in x->i), or the free slot to fill; NULL: ENOMEM */
static struct ixent *ix_find(struct graph_aggs *a, uint32_t kind, uint64_t h, const void *key,
			     bool *found)
{
	struct graph_aggs_index *ix;
	size_t i;

	if (!a->ix && !(a->ix = calloc(1, sizeof(*a->ix))))
		return NULL;
	ix = a->ix;
	if ((ix->n + 1) * 2 > ix->cap && ix_grow(a))
		return NULL;
	for (i = h & (ix->cap - 1); ix->e[i].kind; i = (i + 1) & (ix->cap - 1))
		if (ix->e[i].h == h && ix_match(a, &ix->e[i], kind, key)) {
			*found = true;
			return &ix->e[i];
		}
	*found = false;
	return &ix->e[i];
}

static int ix_claim(struct graph_aggs *a, struct ixent *x, uint32_t kind, uint64_t h, size_t i)
{
	x->kind = kind;
	x->h = h;
	x->i = (uint32_t)i;
	a->ix->n++;
	return 0;
}

/* Room for one more in an array of elements of size sz. */
static int grow(void **p, size_t n, size_t *cap, size_t sz)
{
	size_t ncap;
	void *np;

	if (n < *cap)
		return 0;
	if (n >= GRAPH_AGGS_MAX)
		return -E2BIG;
	ncap = *cap ? *cap * 2 : 16;
	np = realloc(*p, ncap * sz);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = ncap;
	return 0;
}

int graph_aggs_add_type(struct graph_aggs *a, const char *service, const char *name, uint64_t count,
			int64_t min, int64_t max, const uint64_t *sketch, uint32_t *index)
{
	struct graph_agg_type key = { .service = str_or_empty(service),
				      .name = str_or_empty(name) };
	uint64_t h = strhash(strhash(IX_TYPE, key.service), key.name);
	bool found;
	struct ixent *x = ix_find(a, IX_TYPE, h, &key, &found);
	struct graph_agg_type *t;
	int rc;

	if (!x)
		return -ENOMEM;
	if (!found) {
		uint64_t *sk;

		if ((rc = grow((void **)&a->types, a->ntypes, &a->cap_types, sizeof(*a->types))))
			return rc;
		sk = calloc(WEFT_SKETCH_NBUCKETS, sizeof(*sk));
		t = &a->types[a->ntypes];
		memset(t, 0, sizeof(*t));
		t->service = graph_strdup(&a->arena, key.service);
		t->name = graph_strdup(&a->arena, key.name);
		if (!sk || !t->service || !t->name) {
			free(sk);
			return -ENOMEM;
		}
		t->sketch = sk;
		ix_claim(a, x, IX_TYPE, h, a->ntypes++);
	}
	t = &a->types[x->i];
	if (count) {
		if (!t->count || min < t->min)
			t->min = min;
		if (!t->count || max > t->max)
			t->max = max;
		t->count += count;
		if (sketch)
			for (size_t b = 0; b < WEFT_SKETCH_NBUCKETS; b++)
				t->sketch[b] += sketch[b];
	}
	if (index)
		*index = x->i;
	return 0;
}

int graph_aggs_add_event(struct graph_aggs *a, uint32_t type, const char *name, uint64_t ntasks)
{
	struct graph_agg_event key = { .type = type, .name = str_or_empty(name) };
	uint64_t h = strhash(mix(IX_EVENT, type), key.name);
	bool found;
	struct ixent *x;
	int rc;

	if (type >= a->ntypes)
		return -EINVAL;
	if (!(x = ix_find(a, IX_EVENT, h, &key, &found)))
		return -ENOMEM;
	if (!found) {
		if ((rc = grow((void **)&a->events, a->nevents, &a->cap_events,
			       sizeof(*a->events))))
			return rc;
		key.name = graph_strdup(&a->arena, key.name);
		if (!key.name)
			return -ENOMEM;
		a->events[a->nevents] = key;
		ix_claim(a, x, IX_EVENT, h, a->nevents++);
	}
	a->events[x->i].ntasks += ntasks;
	return 0;
}

int graph_aggs_add_edge(struct graph_aggs *a, uint32_t ptype, uint32_t ctype,
			enum graph_edge_kind kind, uint64_t count)
{
	struct graph_agg_edge key = { .ptype = ptype, .ctype = ctype, .kind = kind };
	uint64_t h = mix(mix(mix(IX_EDGE, ptype), ctype), (uint64_t)kind);
	bool found;
	struct ixent *x;
	int rc;

	if (ptype >= a->ntypes || ctype >= a->ntypes || (unsigned)kind >= GRAPH_EDGE_COUNT)
		return -EINVAL;
	if (!(x = ix_find(a, IX_EDGE, h, &key, &found)))
		return -ENOMEM;
	if (!found) {
		if ((rc = grow((void **)&a->edges, a->nedges, &a->cap_edges, sizeof(*a->edges))))
			return rc;
		a->edges[a->nedges] = key;
		ix_claim(a, x, IX_EDGE, h, a->nedges++);
	}
	a->edges[x->i].count += count;
	return 0;
}

int graph_aggs_add_conc(struct graph_aggs *a, const char *host, int64_t pid, int64_t ms,
			uint32_t count)
{
	struct graph_agg_conc key = { .host = str_or_empty(host), .pid = pid, .ms = ms };
	uint64_t h = mix(mix(strhash(IX_CONC, key.host), (uint64_t)pid), (uint64_t)ms);
	bool found;
	struct ixent *x;
	int rc;

	if (!(x = ix_find(a, IX_CONC, h, &key, &found)))
		return -ENOMEM;
	if (!found) {
		if ((rc = grow((void **)&a->conc, a->nconc, &a->cap_conc, sizeof(*a->conc))))
			return rc;
		key.host = graph_strdup(&a->arena, key.host);
		if (!key.host)
			return -ENOMEM;
		a->conc[a->nconc] = key;
		ix_claim(a, x, IX_CONC, h, a->nconc++);
	}
	a->conc[x->i].count = a->conc[x->i].count + count < a->conc[x->i].count ?
				      UINT32_MAX :
				      a->conc[x->i].count + count;
	return 0;
}

static int64_t floordiv(int64_t a, int64_t b)
{
	int64_t q = a / b;

	return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

static int64_t ceildiv(int64_t a, int64_t b)
{
	return -floordiv(-a, b);
}

/* The ms a task counts in, as the store's task_ms(). */
static void task_ms(int64_t start, int64_t end, int64_t *first, int64_t *last)
{
	*first = floordiv(start, 1000000);
	*last = ceildiv(end, 1000000) - 1;
	if (*last < *first)
		*last = *first;
	if (*last - *first >= GRAPH_CONC_MAX_MS)
		*last = *first + GRAPH_CONC_MAX_MS - 1;
}

static int64_t task_lat(const struct graph_task *k)
{
	uint64_t d = (uint64_t)k->end - (uint64_t)k->start;

	if (k->end <= k->start)
		return 0;
	return d > INT64_MAX ? INT64_MAX : (int64_t)d;
}

/* A task's index in the batch by (trace, id): a small open-addressing map for one add. */
struct tmap {
	size_t *slot; /* task index + 1, 0 free */
	size_t cap;
};

static size_t tmap_find(const struct tmap *m, const struct graph *g, struct graph_id128 tr,
			uint64_t id)
{
	size_t i = mix(mix(tr.hi, tr.lo), id) & (m->cap - 1);

	for (; m->slot[i]; i = (i + 1) & (m->cap - 1)) {
		const struct graph_task *t = &g->tasks[m->slot[i] - 1];

		if (t->id == id && graph_id128_eq(t->trace, tr))
			return m->slot[i];
	}
	return i | ((size_t)1 << (sizeof(size_t) * 8 - 1)); /* high bit: free slot i */
}

static int add_graph(struct graph_aggs *a, const struct graph *g, uint32_t *ttype)
{
	struct tmap m = { 0 };
	uint64_t *seen = NULL; /* (task index, event name hash) pairs already counted */
	size_t seencap = 0, i;
	int rc = 0;

	m.cap = 16;
	while (m.cap < 2 * g->ntasks + 2)
		m.cap *= 2;
	if (!(m.slot = calloc(m.cap, sizeof(*m.slot))))
		return -ENOMEM;
	for (i = 0; i < g->ntasks; i++) {
		const struct graph_task *t = &g->tasks[i];
		size_t f = tmap_find(&m, g, t->trace, t->id);
		int64_t lat = task_lat(t), first, last, end = t->end > t->start ? t->end : t->start;
		if (!(f >> (sizeof(size_t) * 8 - 1))) {
			ttype[i] = UINT32_MAX; /* twice in the batch: the first copy counts */
			continue;
		}
		m.slot[f & ~((size_t)1 << (sizeof(size_t) * 8 - 1))] = i + 1;
		if ((rc = graph_aggs_add_type(a, t->service, t->name, 0, 0, 0, NULL, &ttype[i])))
			goto out;
		{
			struct graph_agg_type *ty = &a->types[ttype[i]];

			if (!ty->count || lat < ty->min)
				ty->min = lat;
			if (!ty->count || lat > ty->max)
				ty->max = lat;
			ty->count++;
			ty->sketch[weft_sketch_index(lat)]++;
		}
		if (t->pid < 0)
			continue;
		task_ms(t->start, end, &first, &last);
		for (int64_t ms = first; ms <= last; ms++)
			if ((rc = graph_aggs_add_conc(a, t->host, t->pid, ms, 1)))
				goto out;
	}
	/* events: the first of each name per task */
	seencap = 16;
	while (seencap < 2 * g->nevents + 2)
		seencap *= 2;
	if (!(seen = calloc(seencap * 2, sizeof(*seen)))) {
		rc = -ENOMEM;
		goto out;
	}
	for (i = 0; i < g->nevents; i++) {
		const struct graph_event *ev = &g->events[i];
		size_t f = tmap_find(&m, g, ev->trace, ev->task), j;
		uint64_t nh = strhash(0, str_or_empty(ev->name)) | 1;
		bool dup = false;

		if (f >> (sizeof(size_t) * 8 - 1))
			continue; /* its task is not in the batch */
		for (j = mix(f, nh) & (seencap - 1); seen[2 * j]; j = (j + 1) & (seencap - 1))
			if (seen[2 * j] == f && seen[2 * j + 1] == nh) {
				dup = true;
				break;
			}
		if (dup)
			continue;
		seen[2 * j] = f;
		seen[2 * j + 1] = nh;
		if (ttype[f - 1] == UINT32_MAX)
			continue;
		if ((rc = graph_aggs_add_event(a, ttype[f - 1], ev->name, 1)))
			goto out;
	}
	for (i = 0; i < g->nedges; i++) {
		const struct graph_edge *ed = &g->edges[i];
		size_t from = tmap_find(&m, g, ed->trace, ed->from_task);
		size_t to = tmap_find(&m, g, ed->trace, ed->to_task);

		if ((from | to) >> (sizeof(size_t) * 8 - 1))
			continue; /* an end outside the batch: its shape is unknown */
		if (ttype[from - 1] == UINT32_MAX || ttype[to - 1] == UINT32_MAX)
			continue;
		if ((rc = graph_aggs_add_edge(a, ttype[from - 1], ttype[to - 1], ed->kind, 1)))
			goto out;
	}
out:
	free(seen);
	free(m.slot);
	return rc;
}

int graph_aggs_add(struct graph_aggs *a, const struct graph *g)
{
	uint32_t *ttype = calloc(g->ntasks + 1, sizeof(*ttype));
	int rc;

	if (!ttype)
		return -ENOMEM;
	rc = add_graph(a, g, ttype);
	free(ttype);
	return rc;
}

int graph_aggs_merge(struct graph_aggs *into, const struct graph_aggs *from)
{
	uint32_t *map = calloc(from->ntypes + 1, sizeof(*map));
	int rc = 0;

	if (!map)
		return -ENOMEM;
	for (size_t i = 0; i < from->ntypes && !rc; i++) {
		const struct graph_agg_type *t = &from->types[i];

		rc = graph_aggs_add_type(into, t->service, t->name, t->count, t->min, t->max,
					 t->sketch, &map[i]);
	}
	for (size_t i = 0; i < from->nevents && !rc; i++)
		rc = graph_aggs_add_event(into, map[from->events[i].type], from->events[i].name,
					  from->events[i].ntasks);
	for (size_t i = 0; i < from->nedges && !rc; i++)
		rc = graph_aggs_add_edge(into, map[from->edges[i].ptype], map[from->edges[i].ctype],
					 from->edges[i].kind, from->edges[i].count);
	for (size_t i = 0; i < from->nconc && !rc; i++)
		rc = graph_aggs_add_conc(into, from->conc[i].host, from->conc[i].pid,
					 from->conc[i].ms, from->conc[i].count);
	if (!rc) {
		if (!into->sampling.seen && !into->sampling.rate)
			into->sampling.rate = from->sampling.rate;
		into->sampling.seen += from->sampling.seen;
		into->sampling.kept_head += from->sampling.kept_head;
		into->sampling.kept_outlier += from->sampling.kept_outlier;
	}
	free(map);
	return rc;
}

/*
 * The head sample: splitmix64 finalizers of both halves, combined, the top 53 bits as a
 * fraction in [0, 1).  Fixed forever (docs/graphs.md): every host decides alike.
 */
bool graph_sample_head(struct graph_id128 trace, double rate)
{
	uint64_t h = trace.hi * 0x9e3779b97f4a7c15ull ^ trace.lo;

	if (rate >= 1.0)
		return true;
	if (rate <= 0.0)
		return false;
	h ^= h >> 30;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 27;
	h *= 0x94d049bb133111ebull;
	h ^= h >> 31;
	return (double)(h >> 11) / 9007199254740992.0 < rate;
}

// SPDX-License-Identifier: Apache-2.0
/*
 * Graph aggregates (aggs.h): the store's per-type context, pre-aggregated by a capture from
 * every task it saw.  Four arrays of entries and one open-addressing index over all of them
 * (a 64-bit hash of the entry's key; collisions compared field by field), so an add is O(1)
 * per element.  What is counted and how mirrors graph/store_sqlite_put.c's put exactly (first
 * event of a name per task, edges with both ends known, a task's first GRAPH_CONC_MAX_MS ms
 * of concurrency), so that graph_store_put_aggs() of these and a plain put of the same
 * traces leave the same aggregates.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text.h"
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

/* The tables of one add on the stack up to this many slots (a trace of a few tasks: one
 * add per finished trace, so a malloc each would be a good part of its cost). */
#define ADD_STACK_SLOTS 64

static int add_graph(struct graph_aggs *a, const struct graph *g, uint32_t *ttype)
{
	size_t stackslot[ADD_STACK_SLOTS];
	uint64_t stackseen[2 * ADD_STACK_SLOTS];
	struct tmap m = { 0 };
	uint64_t *seen = NULL; /* (task index, event name hash) pairs already counted */
	size_t seencap = 0, i;
	int rc = 0;

	m.cap = 16;
	while (m.cap < 2 * g->ntasks + 2)
		m.cap *= 2;
	if (m.cap <= ADD_STACK_SLOTS)
		m.slot = memset(stackslot, 0, m.cap * sizeof(*m.slot));
	else if (!(m.slot = calloc(m.cap, sizeof(*m.slot))))
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
	if (!g->nevents)
		seencap = 0;
	else if (seencap <= ADD_STACK_SLOTS)
		seen = memset(stackseen, 0, 2 * seencap * sizeof(*seen));
	else if (!(seen = calloc(seencap * 2, sizeof(*seen)))) {
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
	if (seen != stackseen)
		free(seen);
	if (m.slot != stackslot)
		free(m.slot);
	return rc;
}

int graph_aggs_add(struct graph_aggs *a, const struct graph *g)
{
	uint32_t stackttype[ADD_STACK_SLOTS],
		*ttype = g->ntasks < ADD_STACK_SLOTS ? stackttype :
						       calloc(g->ntasks + 1, sizeof(*ttype));
	int rc;

	if (!ttype)
		return -ENOMEM;
	rc = add_graph(a, g, ttype);
	if (ttype != stackttype)
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

/* ---------------------------------------------------------------- wire form */

struct wbuf {
	uint8_t *p;
	size_t n, cap;
	bool oom;
};

static void put_bytes(struct wbuf *b, const void *p, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n > b->cap) {
		size_t ncap = b->cap ? b->cap : 256;
		uint8_t *np;

		while (ncap < b->n + n)
			ncap *= 2;
		np = realloc(b->p, ncap);
		if (!np) {
			b->oom = true;
			return;
		}
		b->p = np;
		b->cap = ncap;
	}
	memcpy(b->p + b->n, p, n);
	b->n += n;
}

static void put_u(struct wbuf *b, uint64_t v)
{
	uint8_t t[10];
	size_t n = 0;

	do {
		t[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	put_bytes(b, t, n);
}

static void put_i(struct wbuf *b, int64_t v) /* zigzag */
{
	put_u(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

static void put_s(struct wbuf *b, const char *s)
{
	size_t n = strlen(s);

	put_u(b, n);
	put_bytes(b, s, n);
}

int graph_aggs_encode(const struct graph_aggs *a, void **buf, size_t *len)
{
	struct wbuf b = { 0 };
	uint64_t rate_ppb = (uint64_t)(a->sampling.rate * 1e9 + 0.5);

	put_u(&b, GRAPH_AGGS_WIRE_VERSION);
	put_u(&b, rate_ppb);
	put_u(&b, a->sampling.seen);
	put_u(&b, a->sampling.kept_head);
	put_u(&b, a->sampling.kept_outlier);
	put_u(&b, a->ntypes);
	for (size_t i = 0; i < a->ntypes; i++) {
		const struct graph_agg_type *t = &a->types[i];
		uint64_t nb = 0;

		put_s(&b, t->service);
		put_s(&b, t->name);
		put_u(&b, t->count);
		put_i(&b, t->min);
		put_i(&b, t->max);
		for (size_t k = 0; k < WEFT_SKETCH_NBUCKETS; k++)
			nb += t->sketch[k] != 0;
		put_u(&b, nb);
		for (size_t k = 0; k < WEFT_SKETCH_NBUCKETS; k++)
			if (t->sketch[k]) {
				put_u(&b, k);
				put_u(&b, t->sketch[k]);
			}
	}
	put_u(&b, a->nevents);
	for (size_t i = 0; i < a->nevents; i++) {
		put_u(&b, a->events[i].type);
		put_s(&b, a->events[i].name);
		put_u(&b, a->events[i].ntasks);
	}
	put_u(&b, a->nedges);
	for (size_t i = 0; i < a->nedges; i++) {
		put_u(&b, a->edges[i].ptype);
		put_u(&b, a->edges[i].ctype);
		put_u(&b, (uint64_t)a->edges[i].kind);
		put_u(&b, a->edges[i].count);
	}
	put_u(&b, a->nconc);
	for (size_t i = 0; i < a->nconc; i++) {
		put_s(&b, a->conc[i].host);
		put_i(&b, a->conc[i].pid);
		put_i(&b, a->conc[i].ms);
		put_u(&b, a->conc[i].count);
	}
	if (b.oom) {
		free(b.p);
		return -ENOMEM;
	}
	*buf = b.p;
	*len = b.n;
	return 0;
}

struct rbuf {
	const uint8_t *p;
	size_t n, off;
	bool bad;
};

static uint64_t get_u(struct rbuf *r)
{
	uint64_t v = 0;

	for (int shift = 0; shift < 64; shift += 7) {
		uint8_t c;

		if (r->off >= r->n) {
			r->bad = true;
			return 0;
		}
		c = r->p[r->off++];
		if (shift == 63 && c > 1) {
			r->bad = true;
			return 0;
		}
		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return v;
	}
	r->bad = true;
	return 0;
}

static int64_t get_i(struct rbuf *r)
{
	uint64_t u = get_u(r);

	return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

/* A string of the buffer copied (NUL-terminated) into tmp[GRAPH_MAX_STR + 1]; NULL if bad. */
static const char *get_s(struct rbuf *r, char *tmp)
{
	uint64_t n = get_u(r);

	if (r->bad || n > GRAPH_MAX_STR || n > r->n - r->off ||
	    !text_utf8_valid((const char *)r->p + r->off, (size_t)n, NULL)) {
		r->bad = true;
		return NULL;
	}
	memcpy(tmp, r->p + r->off, (size_t)n);
	tmp[n] = 0;
	if (memchr(tmp, 0, (size_t)n)) {
		r->bad = true;
		return NULL;
	}
	r->off += (size_t)n;
	return tmp;
}

static int dfail(char *why, size_t whysz, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int dfail(char *why, size_t whysz, const char *fmt, ...)
{
	va_list ap;

	if (why && whysz) {
		va_start(ap, fmt);
		vsnprintf(why, whysz, fmt, ap);
		va_end(ap);
	}
	return -EINVAL;
}

int graph_aggs_decode(struct graph_aggs *a, const void *buf, size_t len, char *why, size_t whysz)
{
	struct rbuf r = { buf, len, 0, false };
	char *s1 = malloc(GRAPH_MAX_STR + 1), *s2 = malloc(GRAPH_MAX_STR + 1);
	uint64_t *sk = calloc(WEFT_SKETCH_NBUCKETS, sizeof(*sk));
	uint32_t *map = NULL;
	uint64_t v, n, rate, ntd = 0;
	struct graph_sampling sm;
	int rc = 0;

	if (!s1 || !s2 || !sk) {
		rc = -ENOMEM;
		goto out;
	}
	v = get_u(&r);
	if (r.bad || v != GRAPH_AGGS_WIRE_VERSION) {
		rc = dfail(why, whysz, "graph aggregates: version %llu, this weft reads %d",
			   (unsigned long long)v, GRAPH_AGGS_WIRE_VERSION);
		goto out;
	}
	rate = get_u(&r);
	sm.seen = get_u(&r);
	sm.kept_head = get_u(&r);
	sm.kept_outlier = get_u(&r);
	n = get_u(&r);
	if (r.bad || rate > 1000000000ull || n > GRAPH_AGGS_MAX || n > len) {
		rc = dfail(why, whysz, "graph aggregates: bad header");
		goto out;
	}
	sm.rate = (double)rate / 1e9;
	ntd = n; /* map[] holds the decoded types' indexes in a */
	map = calloc(n + 1, sizeof(*map));
	if (!map) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint64_t i = 0; i < n && !rc; i++) {
		const char *svc = get_s(&r, s1), *name = svc ? get_s(&r, s2) : NULL;
		uint64_t count = get_u(&r), nb, sum = 0;
		int64_t mn = get_i(&r), mx = get_i(&r);
		uint64_t last = 0;

		nb = get_u(&r);
		if (r.bad || !name || nb > WEFT_SKETCH_NBUCKETS || mn < 0 || mx < mn) {
			rc = dfail(why, whysz, "graph aggregates: type %llu malformed",
				   (unsigned long long)i);
			break;
		}
		memset(sk, 0, WEFT_SKETCH_NBUCKETS * sizeof(*sk));
		for (uint64_t k = 0; k < nb; k++) {
			uint64_t b = get_u(&r), c = get_u(&r);

			if (r.bad || b >= WEFT_SKETCH_NBUCKETS || (k && b <= last) || !c ||
			    c > count - sum) {
				r.bad = true;
				break;
			}
			last = b;
			sk[b] = c;
			sum += c;
		}
		if (r.bad || sum != count) {
			rc = dfail(why, whysz,
				   "graph aggregates: type %llu: sketch does not add up",
				   (unsigned long long)i);
			break;
		}
		rc = graph_aggs_add_type(a, svc, name, count, mn, mx, sk, &map[i]);
	}
	if (rc)
		goto out;
	n = get_u(&r);
	if (r.bad || n > GRAPH_AGGS_MAX || n > len) {
		rc = dfail(why, whysz, "graph aggregates: bad event count");
		goto out;
	}
	for (uint64_t i = 0; i < n && !rc; i++) {
		uint64_t t = get_u(&r);
		const char *name = get_s(&r, s1);
		uint64_t c = get_u(&r);

		if (r.bad || !name || t >= ntd) {
			rc = dfail(why, whysz, "graph aggregates: event %llu malformed",
				   (unsigned long long)i);
			break;
		}
		rc = graph_aggs_add_event(a, map[t], name, c);
	}
	if (rc)
		goto out;
	n = get_u(&r);
	if (r.bad || n > GRAPH_AGGS_MAX || n > len) {
		rc = dfail(why, whysz, "graph aggregates: bad edge count");
		goto out;
	}
	for (uint64_t i = 0; i < n && !rc; i++) {
		uint64_t pt = get_u(&r), ct = get_u(&r), k = get_u(&r), c = get_u(&r);

		if (r.bad || pt >= ntd || ct >= ntd || k >= GRAPH_EDGE_COUNT) {
			rc = dfail(why, whysz, "graph aggregates: edge %llu malformed",
				   (unsigned long long)i);
			break;
		}
		rc = graph_aggs_add_edge(a, map[pt], map[ct], (enum graph_edge_kind)k, c);
		if (rc == -EINVAL)
			rc = dfail(why, whysz, "graph aggregates: edge %llu of no type",
				   (unsigned long long)i);
	}
	if (rc)
		goto out;
	n = get_u(&r);
	if (r.bad || n > GRAPH_AGGS_MAX || n > len) {
		rc = dfail(why, whysz, "graph aggregates: bad concurrency count");
		goto out;
	}
	for (uint64_t i = 0; i < n && !rc; i++) {
		const char *host = get_s(&r, s1);
		int64_t pid = get_i(&r), ms = get_i(&r);
		uint64_t c = get_u(&r);

		if (r.bad || !host || pid < 0 || c > UINT32_MAX) {
			rc = dfail(why, whysz, "graph aggregates: concurrency %llu malformed",
				   (unsigned long long)i);
			break;
		}
		rc = graph_aggs_add_conc(a, host, pid, ms, (uint32_t)c);
	}
	if (rc)
		goto out;
	if (r.off != r.n) {
		rc = dfail(why, whysz, "graph aggregates: %zu bytes after the end", r.n - r.off);
		goto out;
	}
	if (!a->sampling.seen && !a->sampling.rate)
		a->sampling.rate = sm.rate;
	else if (sm.seen)
		a->sampling.rate = sm.rate;
	a->sampling.seen += sm.seen;
	a->sampling.kept_head += sm.kept_head;
	a->sampling.kept_outlier += sm.kept_outlier;
out:
	free(map);
	free(s1);
	free(s2);
	free(sk);
	return rc;
}

// SPDX-License-Identifier: Apache-2.0
/*
 * The SQLite graph store's codings and maps (store_sqlite.c's essay says why the store is
 * built as it is): the error helpers, the open-addressing hash maps a put accumulates in and
 * the id caches live in, the varint, sketch and concurrency BLOB codings, and the chunk
 * decoder.  None of it touches SQLite; it is its own file so that the store's other files
 * (open, put, read, keep) share one copy, declared in store_sqlite_int.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "graph/store_sqlite_int.h"

/* ---------------------------------------------------------------- errors */

int sq_failf(char *why, size_t whysz, int err, const char *fmt, ...)
{
	va_list ap;

	if (why && whysz) {
		va_start(ap, fmt);
		vsnprintf(why, whysz, fmt, ap);
		va_end(ap);
	}
	return err;
}

int sq_errno(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_READONLY:
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_CANTOPEN:
		return -ENOENT;
	case SQLITE_CONSTRAINT:
	case SQLITE_MISMATCH:
		return -EINVAL;
	default:
		return -EIO;
	}
}

/* ---------------------------------------------------------------- hash maps */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

size_t sq_khash(uint64_t a, uint64_t b, uint64_t c)
{
	return (size_t)mix64(a ^ mix64(b + 0x9e3779b97f4a7c15ull) ^
			     mix64(c + 0x632be59bd9b4e019ull));
}

struct kent *sq_kmap_find(const struct kmap *m, uint64_t a, uint64_t b, uint64_t c)
{
	size_t i;

	if (!m->cap)
		return NULL;
	for (i = sq_khash(a, b, c) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		struct kent *e = &m->e[i];

		if (!e->used)
			return NULL;
		if (e->k[0] == a && e->k[1] == b && e->k[2] == c)
			return e;
	}
}

int sq_kmap_grow(struct kmap *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 64, i;
	struct kent *ne = calloc(ncap, sizeof(*ne));

	if (!ne)
		return -ENOMEM;
	for (i = 0; i < m->cap; i++) {
		struct kent *o = &m->e[i];
		size_t j;

		if (!o->used)
			continue;
		for (j = sq_khash(o->k[0], o->k[1], o->k[2]) & (ncap - 1); ne[j].used;
		     j = (j + 1) & (ncap - 1))
			;
		ne[j] = *o;
	}
	free(m->e);
	m->e = ne;
	m->cap = ncap;
	return 0;
}

/* Room for n entries without growing (a put knows its batch's size: no rehash on the way). */
int sq_kmap_reserve(struct kmap *m, size_t n)
{
	size_t cap = 64;

	while (cap < 2 * n + 2)
		cap *= 2;
	if (m->cap >= cap)
		return 0;
	if (m->n) { /* not empty: grow by rehashing */
		while (m->cap < cap)
			if (sq_kmap_grow(m))
				return -ENOMEM;
		return 0;
	}
	free(m->e);
	m->e = calloc(cap, sizeof(*m->e));
	m->cap = m->e ? cap : 0;
	return m->e ? 0 : -ENOMEM;
}

/* The entry of key (a, b, c), added with zero values if absent (*isnew says which); NULL when
 * out of memory. */
struct kent *sq_kmap_get(struct kmap *m, uint64_t a, uint64_t b, uint64_t c, bool *isnew)
{
	struct kent *e = sq_kmap_find(m, a, b, c);
	size_t i;

	if (isnew)
		*isnew = false;
	if (e)
		return e;
	if ((m->n + 1) * 2 > m->cap && sq_kmap_grow(m))
		return NULL;
	for (i = sq_khash(a, b, c) & (m->cap - 1); m->e[i].used; i = (i + 1) & (m->cap - 1))
		;
	e = &m->e[i];
	memset(e, 0, sizeof(*e));
	e->k[0] = a;
	e->k[1] = b;
	e->k[2] = c;
	e->used = 1;
	m->n++;
	if (isnew)
		*isnew = true;
	return e;
}

void sq_kmap_clear(struct kmap *m)
{
	if (m->n)
		memset(m->e, 0, m->cap * sizeof(*m->e));
	m->n = 0;
}

void sq_kmap_free(struct kmap *m)
{
	free(m->e);
	memset(m, 0, sizeof(*m));
}

uint64_t sq_shash(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return mix64(h);
}

struct sent *sq_smap_find(const struct smap *m, const char *s, size_t len, uint64_t h)
{
	size_t i;

	if (!m->cap)
		return NULL;
	for (i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		struct sent *e = &m->e[i];

		if (!e->s)
			return NULL;
		if (e->h == h && e->len == len && !memcmp(e->s, s, len))
			return e;
	}
}

void sq_smap_clear(struct smap *m)
{
	size_t i;

	for (i = 0; i < m->cap; i++)
		free(m->e[i].s);
	free(m->e);
	memset(m, 0, sizeof(*m));
}

int sq_smap_put(struct smap *m, const char *s, size_t len, uint64_t h, int64_t v)
{
	struct sent *e;
	size_t i;

	if (m->n >= CACHE_MAX)
		sq_smap_clear(m); /* a cache, not a record: start again rather than grow forever */
	if ((m->n + 1) * 2 > m->cap) {
		size_t ncap = m->cap ? m->cap * 2 : 256;
		struct sent *ne = calloc(ncap, sizeof(*ne));

		if (!ne)
			return -ENOMEM;
		for (i = 0; i < m->cap; i++) {
			size_t j;

			if (!m->e[i].s)
				continue;
			for (j = m->e[i].h & (ncap - 1); ne[j].s; j = (j + 1) & (ncap - 1))
				;
			ne[j] = m->e[i];
		}
		free(m->e);
		m->e = ne;
		m->cap = ncap;
	}
	for (i = h & (m->cap - 1); m->e[i].s; i = (i + 1) & (m->cap - 1))
		;
	e = &m->e[i];
	e->s = malloc(len + 1);
	if (!e->s)
		return -ENOMEM;
	memcpy(e->s, s, len);
	e->s[len] = 0;
	e->len = len;
	e->h = h;
	e->v = v;
	m->n++;
	return 0;
}

/* ---------------------------------------------------------------- BLOB codings */

int sq_wb_varint(struct wbuf *b, uint64_t v)
{
	if (b->cap - b->n < 10) {
		size_t ncap = b->cap ? b->cap * 2 : 256;
		uint8_t *np = realloc(b->p, ncap);

		if (!np)
			return -ENOMEM;
		b->p = np;
		b->cap = ncap;
	}
	while (v >= 0x80) {
		b->p[b->n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	b->p[b->n++] = (uint8_t)v;
	return 0;
}

bool sq_rd_varint(const uint8_t *p, size_t len, size_t *off, uint64_t *v)
{
	uint64_t r = 0;
	unsigned shift = 0;

	while (*off < len && shift < 64) {
		uint8_t c = p[(*off)++];

		r |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*v = r;
			return true;
		}
		shift += 7;
	}
	return false;
}

/*
 * A sketch: pairs (bucket index - previous index - 1, count), indexes increasing, counts not
 * 0.  Decoding adds into counts[WEFT_SKETCH_NBUCKETS]; false if the BLOB is malformed (then
 * counts[] may be partly added to: callers treat the store as corrupt).
 */
bool sq_sketch_add_blob(uint64_t *counts, const void *blob, size_t len)
{
	const uint8_t *p = blob;
	size_t off = 0;
	uint64_t idx = 0, d, c;
	bool first = true;

	while (off < len) {
		if (!sq_rd_varint(p, len, &off, &d) || !sq_rd_varint(p, len, &off, &c) || !c)
			return false;
		if (d >= WEFT_SKETCH_NBUCKETS)
			return false;
		idx = first ? d : idx + d + 1;
		first = false;
		if (idx >= WEFT_SKETCH_NBUCKETS)
			return false;
		counts[idx] += c;
	}
	return true;
}

int sq_sketch_encode(const uint64_t *counts, struct wbuf *b)
{
	size_t i;
	long prev = -1;

	b->n = 0;
	for (i = 0; i < WEFT_SKETCH_NBUCKETS; i++) {
		if (!counts[i])
			continue;
		if (sq_wb_varint(b, (uint64_t)((long)i - prev - 1)) || sq_wb_varint(b, counts[i]))
			return -ENOMEM;
		prev = (long)i;
	}
	return 0;
}

/* A concurrency block: runs (length, count) whose lengths add up to exactly CONC_MS. */
bool sq_conc_decode(uint32_t *out, const void *blob, size_t len)
{
	const uint8_t *p = blob;
	size_t off = 0, at = 0;
	uint64_t run, val;

	while (off < len) {
		if (!sq_rd_varint(p, len, &off, &run) || !sq_rd_varint(p, len, &off, &val))
			return false;
		if (!run || run > CONC_MS - at || val > UINT32_MAX)
			return false;
		for (uint64_t i = 0; i < run; i++)
			out[at++] = (uint32_t)val;
	}
	return at == CONC_MS;
}

int sq_conc_encode(const uint32_t *c, struct wbuf *b)
{
	size_t i = 0;

	b->n = 0;
	while (i < CONC_MS) {
		size_t j = i + 1;

		while (j < CONC_MS && c[j] == c[i])
			j++;
		if (sq_wb_varint(b, j - i) || sq_wb_varint(b, c[i]))
			return -ENOMEM;
		i = j;
	}
	return 0;
}

/* floor and ceiling of a / b for b > 0, without overflow */
int64_t sq_floordiv(int64_t a, int64_t b)
{
	int64_t q = a / b;

	return (a % b != 0 && a < 0) ? q - 1 : q;
}

int64_t sq_ceildiv(int64_t a, int64_t b)
{
	int64_t q = a / b;

	return (a % b != 0 && a > 0) ? q + 1 : q;
}

/* The ms a task [start, end] covers, [*first, *last], cut to GRAPH_CONC_MAX_MS. */
void sq_task_ms(int64_t start, int64_t end, int64_t *first, int64_t *last)
{
	*first = sq_floordiv(start, 1000000);
	*last = sq_ceildiv(end, 1000000) - 1;
	if (*last < *first)
		*last = *first;
	if (*last - *first >= GRAPH_CONC_MAX_MS)
		*last = *first + GRAPH_CONC_MAX_MS - 1;
}

/* A task's latency, end - start: 0 if end is before start, INT64_MAX if it does not fit
 * (hostile times: [INT64_MIN, INT64_MAX] is a task too). */
int64_t sq_task_lat(const struct graph_task *k)
{
	uint64_t d = (uint64_t)k->end - (uint64_t)k->start;

	if (k->end <= k->start)
		return 0;
	return d > INT64_MAX ? INT64_MAX : (int64_t)d;
}

int64_t sq_bias(uint64_t v)
{
	return (int64_t)(v ^ ID_BIAS);
}

uint64_t sq_unbias(int64_t v)
{
	return (uint64_t)v ^ ID_BIAS;
}

void sq_cpy(char *dst, size_t sz, const unsigned char *src)
{
	snprintf(dst, sz, "%s", src ? (const char *)src : "");
}

uint64_t sq_zz(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzz(uint64_t v)
{
	return (int64_t)((v >> 1) ^ (~(v & 1) + 1));
}

int64_t sq_rel(int64_t v, int64_t base)
{
	return (int64_t)((uint64_t)v - (uint64_t)base);
}

static int64_t unrel(int64_t d, int64_t base)
{
	return (int64_t)((uint64_t)base + (uint64_t)d);
}

static uint64_t rd_u(struct rd *r)
{
	uint64_t v = 0;

	if (!r->bad && !sq_rd_varint(r->p, r->n, &r->off, &v))
		r->bad = true;
	return r->bad ? 0 : v;
}

static int64_t rd_z(struct rd *r)
{
	return unzz(rd_u(r));
}

/* An id or small enum column: at most INT64_MAX. */
static int64_t rd_id(struct rd *r)
{
	uint64_t v = rd_u(r);

	if (v > INT64_MAX)
		r->bad = true;
	return r->bad ? 0 : (int64_t)v;
}

static const char *rd_bytes(struct rd *r, size_t *len)
{
	uint64_t l = rd_u(r);
	const char *p;

	if (r->bad || l > r->n - r->off || l > GRAPH_MAX_STR) {
		r->bad = true;
		*len = 0;
		return NULL;
	}
	p = (const char *)r->p + r->off;
	r->off += l;
	*len = (size_t)l;
	return p;
}

/* Walks a chunk; 0, -EIO if it is malformed, or what a visitor returned. */
int sq_chunk_decode(const void *blob, size_t len, const struct cvisit *v)
{
	struct rd r = { .p = blob, .n = len };
	uint64_t nt, ne, nd, i;
	int64_t base;
	int rc;

	if (!blob || len < 1 || r.p[0] != CHUNK_VERSION)
		return -EIO;
	r.off = 1;
	nt = rd_u(&r);
	ne = rd_u(&r);
	nd = rd_u(&r);
	base = rd_z(&r);
	/* every element takes a byte at least: counts beyond the bytes left are lies */
	if (r.bad || nt > len || ne > len || nd > len)
		return -EIO;
	for (i = 0; i < nt; i++) {
		struct ctask t;

		t.id = rd_u(&r);
		t.parent = rd_u(&r);
		t.type = rd_id(&r);
		t.host = rd_id(&r);
		t.pid = rd_z(&r);
		t.tid = rd_z(&r);
		t.start = unrel(rd_z(&r), base);
		t.dur = rd_u(&r);
		t.skew = rd_z(&r);
		t.status = (uint32_t)rd_id(&r);
		t.source = (uint32_t)rd_id(&r);
		t.attrs = rd_bytes(&r, &t.alen);
		if (r.bad)
			return -EIO;
		if (v->task && (rc = v->task(v->arg, &t)))
			return rc;
	}
	for (i = 0; i < ne; i++) {
		struct cevent e;

		e.task = rd_u(&r);
		e.id = rd_u(&r);
		e.time = unrel(rd_z(&r), base);
		e.name = rd_id(&r);
		e.source = (uint32_t)rd_id(&r);
		e.attrs = rd_bytes(&r, &e.alen);
		if (r.bad)
			return -EIO;
		if (v->event && (rc = v->event(v->arg, &e)))
			return rc;
	}
	for (i = 0; i < nd; i++) {
		struct cedge d;

		d.kind = (uint32_t)rd_id(&r);
		d.from_task = rd_u(&r);
		d.from_event = rd_u(&r);
		d.to_task = rd_u(&r);
		d.to_event = rd_u(&r);
		d.source = (uint32_t)rd_id(&r);
		if (r.bad)
			return -EIO;
		if (v->edge && (rc = v->edge(v->arg, &d)))
			return rc;
	}
	return r.off == len ? 0 : -EIO;
}

int sq_wb_bytes(struct wbuf *b, const void *p, size_t n)
{
	if (b->cap - b->n < n) {
		size_t ncap = b->cap ? b->cap : 256;
		uint8_t *np;

		while (ncap - b->n < n)
			ncap *= 2;
		np = realloc(b->p, ncap);
		if (!np)
			return -ENOMEM;
		b->p = np;
		b->cap = ncap;
	}
	if (n)
		memcpy(b->p + b->n, p, n);
	b->n += n;
	return 0;
}

int sq_wb_attrs(struct wbuf *b, const char *attrs)
{
	size_t n = attrs && strcmp(attrs, "{}") ? strlen(attrs) : 0;

	return sq_wb_varint(b, n) || sq_wb_bytes(b, attrs, n) ? -ENOMEM : 0;
}

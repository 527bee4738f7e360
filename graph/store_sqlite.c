// SPDX-License-Identifier: Apache-2.0
/*
 * The graph store on SQLite (store.h; docs/graphs.md "The store" has the schema table by
 * table).  One file, WAL mode, one writer; every put is one transaction.
 *
 * Why it is built this way:
 *
 *  - Showing one trace with its context must cost O(size of the trace), whatever the number of
 *    traces stored.  So the elements (tasks, events, edges) that one put brings for one trace
 *    are one "chunk" BLOB whose row id is the trace's row id times 2^16 plus a sequence
 *    number: loading a trace is one range scan of the chunk table, and every aggregate the
 *    context reads is a point lookup by primary key (types, event_agg, edge_agg, conc).
 *    Nothing on that path scans a table; tests/unit/test_graph_store.c checks the plans with
 *    EXPLAIN QUERY PLAN.
 *
 *  - A row per span would cost two to three B-tree inserts per span (task, edge, event) and
 *    cap a put near 100,000 spans/s; a chunk is one insert per trace and put, and about a
 *    third of the bytes (varints, times relative to the chunk's first, ids for strings).  The
 *    price: a task is not a row SQL can query; graph_store_list()'s filters on the tasks of a
 *    trace read its chunks through weft_chunk_match(), a function this file registers.
 *
 *  - A put visits its batch trace by trace (one sort of the element indices): the maps that
 *    find a trace's tasks, hosts, edges and event names hold one trace and stay in cache, and
 *    each trace's chunk is written as soon as its elements are coded.
 *
 *  - The aggregates are maintained on ingest, and a put accumulates them in memory (hash maps
 *    keyed by ids) and writes each touched aggregate row once, at the end of the
 *    transaction, so that a batch of a million spans of ten task types updates ten sketch
 *    rows, not a million.  The accumulators are bounded: past a limit they are written back
 *    early, inside the same transaction, so the all-or-nothing rule still holds.
 *
 *  - Concurrency per millisecond is kept per (process, one-second block) as a run-length
 *    coded BLOB of 1000 counters.  A task adds +1 at its first ms and -1 after its last in a
 *    difference array per touched block, so its cost is the number of blocks it touches, not
 *    its length in ms; only its first GRAPH_CONC_MAX_MS ms count (at most 61 blocks).
 *
 *  - Strings that repeat (hosts, event names) and task types are interned, and their ids
 *    are cached in memory across puts; a rolled-back put drops the caches, since the ids it
 *    created are gone with it.
 *
 *  - A trace put again, or continued in a later batch, has its stored chunks decoded into the
 *    put's maps first (O(size of that trace)), so that a task, an edge or an event name of a
 *    task is counted once in the aggregates however often it arrives.
 *
 *  - Anything read back from the file may be hostile (a corrupt or crafted store): every BLOB
 *    is decoded with bounds checks, every enum clamped, every string cut; an error says what is
 *    wrong and nothing crashes.
 *
 * Trace ids are stored as two integers with the sign bit flipped, so that SQL's signed order
 * is the unsigned order of the hex form and a hex prefix is an index range.
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

#include "graph/store.h"
#include "kernel/aggstate.h"
#include "kernel/weft_sketch.h"

#define APP_ID 0x57464752 /* "WFGR": PRAGMA application_id of a weft graph store */
#define CONC_MS 1000 /* counters per concurrency block */
#define FLUSH_TYPES 512 /* touched types with a dense sketch delta in memory, at most */
#define FLUSH_BLOCKS 2048 /* concurrency difference blocks in memory, at most (8 MiB) */
#define CACHE_MAX (1u << 20) /* entries of an id cache before it is dropped */
#define ID_BIAS 0x8000000000000000ull

/* ---------------------------------------------------------------- errors */

static int fail(char *why, size_t whysz, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(char *why, size_t whysz, int err, const char *fmt, ...)
{
	va_list ap;

	if (why && whysz) {
		va_start(ap, fmt);
		vsnprintf(why, whysz, fmt, ap);
		va_end(ap);
	}
	return err;
}

static int sq_errno(int rc)
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

/* Keys of up to three 64-bit words, values of three 64-bit words; open addressing. */
struct kent {
	uint64_t k[3];
	int64_t v[3];
	uint8_t used;
};

struct kmap {
	struct kent *e;
	size_t cap, n;
};

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

static size_t khash(uint64_t a, uint64_t b, uint64_t c)
{
	return (size_t)mix64(a ^ mix64(b + 0x9e3779b97f4a7c15ull) ^
			     mix64(c + 0x632be59bd9b4e019ull));
}

static struct kent *kmap_find(const struct kmap *m, uint64_t a, uint64_t b, uint64_t c)
{
	size_t i;

	if (!m->cap)
		return NULL;
	for (i = khash(a, b, c) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		struct kent *e = &m->e[i];

		if (!e->used)
			return NULL;
		if (e->k[0] == a && e->k[1] == b && e->k[2] == c)
			return e;
	}
}

static int kmap_grow(struct kmap *m)
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
		for (j = khash(o->k[0], o->k[1], o->k[2]) & (ncap - 1); ne[j].used;
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
static int kmap_reserve(struct kmap *m, size_t n)
{
	size_t cap = 64;

	while (cap < 2 * n + 2)
		cap *= 2;
	if (m->cap >= cap)
		return 0;
	if (m->n) { /* not empty: grow by rehashing */
		while (m->cap < cap)
			if (kmap_grow(m))
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
static struct kent *kmap_get(struct kmap *m, uint64_t a, uint64_t b, uint64_t c, bool *isnew)
{
	struct kent *e = kmap_find(m, a, b, c);
	size_t i;

	if (isnew)
		*isnew = false;
	if (e)
		return e;
	if ((m->n + 1) * 2 > m->cap && kmap_grow(m))
		return NULL;
	for (i = khash(a, b, c) & (m->cap - 1); m->e[i].used; i = (i + 1) & (m->cap - 1))
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

static void kmap_clear(struct kmap *m)
{
	if (m->n)
		memset(m->e, 0, m->cap * sizeof(*m->e));
	m->n = 0;
}

static void kmap_free(struct kmap *m)
{
	free(m->e);
	memset(m, 0, sizeof(*m));
}

/* String keys (a byte string with its length), one 64-bit value: the id caches. */
struct sent {
	char *s;
	size_t len;
	uint64_t h;
	int64_t v;
};

struct smap {
	struct sent *e;
	size_t cap, n;
};

static uint64_t shash(const char *s, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t i;

	for (i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
	return mix64(h);
}

static struct sent *smap_find(const struct smap *m, const char *s, size_t len, uint64_t h)
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

static void smap_clear(struct smap *m)
{
	size_t i;

	for (i = 0; i < m->cap; i++)
		free(m->e[i].s);
	free(m->e);
	memset(m, 0, sizeof(*m));
}

static int smap_put(struct smap *m, const char *s, size_t len, uint64_t h, int64_t v)
{
	struct sent *e;
	size_t i;

	if (m->n >= CACHE_MAX)
		smap_clear(m); /* a cache, not a record: start again rather than grow forever */
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

struct wbuf {
	uint8_t *p;
	size_t n, cap;
};

static int wb_varint(struct wbuf *b, uint64_t v)
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

static bool rd_varint(const uint8_t *p, size_t len, size_t *off, uint64_t *v)
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
static bool sketch_add_blob(uint64_t *counts, const void *blob, size_t len)
{
	const uint8_t *p = blob;
	size_t off = 0;
	uint64_t idx = 0, d, c;
	bool first = true;

	while (off < len) {
		if (!rd_varint(p, len, &off, &d) || !rd_varint(p, len, &off, &c) || !c)
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

static int sketch_encode(const uint64_t *counts, struct wbuf *b)
{
	size_t i;
	long prev = -1;

	b->n = 0;
	for (i = 0; i < WEFT_SKETCH_NBUCKETS; i++) {
		if (!counts[i])
			continue;
		if (wb_varint(b, (uint64_t)((long)i - prev - 1)) || wb_varint(b, counts[i]))
			return -ENOMEM;
		prev = (long)i;
	}
	return 0;
}

/* A concurrency block: runs (length, count) whose lengths add up to exactly CONC_MS. */
static bool conc_decode(uint32_t *out, const void *blob, size_t len)
{
	const uint8_t *p = blob;
	size_t off = 0, at = 0;
	uint64_t run, val;

	while (off < len) {
		if (!rd_varint(p, len, &off, &run) || !rd_varint(p, len, &off, &val))
			return false;
		if (!run || run > CONC_MS - at || val > UINT32_MAX)
			return false;
		for (uint64_t i = 0; i < run; i++)
			out[at++] = (uint32_t)val;
	}
	return at == CONC_MS;
}

static int conc_encode(const uint32_t *c, struct wbuf *b)
{
	size_t i = 0;

	b->n = 0;
	while (i < CONC_MS) {
		size_t j = i + 1;

		while (j < CONC_MS && c[j] == c[i])
			j++;
		if (wb_varint(b, j - i) || wb_varint(b, c[i]))
			return -ENOMEM;
		i = j;
	}
	return 0;
}

/* floor and ceiling of a / b for b > 0, without overflow */
static int64_t floordiv(int64_t a, int64_t b)
{
	int64_t q = a / b;

	return (a % b != 0 && a < 0) ? q - 1 : q;
}

static int64_t ceildiv(int64_t a, int64_t b)
{
	int64_t q = a / b;

	return (a % b != 0 && a > 0) ? q + 1 : q;
}

/* The ms a task [start, end] covers, [*first, *last], cut to GRAPH_CONC_MAX_MS. */
static void task_ms(int64_t start, int64_t end, int64_t *first, int64_t *last)
{
	*first = floordiv(start, 1000000);
	*last = ceildiv(end, 1000000) - 1;
	if (*last < *first)
		*last = *first;
	if (*last - *first >= GRAPH_CONC_MAX_MS)
		*last = *first + GRAPH_CONC_MAX_MS - 1;
}

/* A task's latency, end - start: 0 if end is before start, INT64_MAX if it does not fit
 * (hostile times: [INT64_MIN, INT64_MAX] is a task too). */
static int64_t task_lat(const struct graph_task *k)
{
	uint64_t d = (uint64_t)k->end - (uint64_t)k->start;

	if (k->end <= k->start)
		return 0;
	return d > INT64_MAX ? INT64_MAX : (int64_t)d;
}

static int64_t bias(uint64_t v)
{
	return (int64_t)(v ^ ID_BIAS);
}

static uint64_t unbias(int64_t v)
{
	return (uint64_t)v ^ ID_BIAS;
}

static void cpy(char *dst, size_t sz, const unsigned char *src)
{
	snprintf(dst, sz, "%s", src ? (const char *)src : "");
}

/*
 * A chunk: the elements of one trace that one put stored, as one BLOB (docs/graphs.md gives
 * the layout).  Varints throughout, signed values zigzagged, times relative to the chunk's
 * base; strings that repeat are ids (types, strs), attributes are inline.
 *
 *   u8 version (1) | ntasks | nevents | nedges | zz base
 *   task:  id parent type host zz:pid zz:tid zz:start-base dur zz:skew status source
 *          attrs-length attrs (length 0: "{}")
 *   event: task id zz:time-base name source attrs-length attrs
 *   edge:  kind from_task from_event to_task to_event source
 */
#define CHUNK_VERSION 1
#define CHUNK_MAX_SEQ 0xffff /* chunks per trace: rowid = tr << 16 | seq */

struct ctask {
	uint64_t id, parent;
	int64_t type, host, pid, tid, start, skew;
	uint64_t dur; /* end - start, modulo 2^64: exact for any two int64 */
	uint32_t status, source;
	const char *attrs;
	size_t alen;
};

struct cevent {
	uint64_t task, id;
	int64_t time, name;
	uint32_t source;
	const char *attrs;
	size_t alen;
};

struct cedge {
	uint32_t kind, source;
	uint64_t from_task, from_event, to_task, to_event;
};

struct cvisit {
	int (*task)(void *arg, const struct ctask *t);
	int (*event)(void *arg, const struct cevent *e);
	int (*edge)(void *arg, const struct cedge *e);
	void *arg;
};

static uint64_t zz(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int64_t unzz(uint64_t v)
{
	return (int64_t)((v >> 1) ^ (~(v & 1) + 1));
}

static int64_t rel(int64_t v, int64_t base)
{
	return (int64_t)((uint64_t)v - (uint64_t)base);
}

static int64_t unrel(int64_t d, int64_t base)
{
	return (int64_t)((uint64_t)base + (uint64_t)d);
}

struct rd {
	const uint8_t *p;
	size_t n, off;
	bool bad;
};

static uint64_t rd_u(struct rd *r)
{
	uint64_t v = 0;

	if (!r->bad && !rd_varint(r->p, r->n, &r->off, &v))
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
static int chunk_decode(const void *blob, size_t len, const struct cvisit *v)
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

static int wb_bytes(struct wbuf *b, const void *p, size_t n)
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

static int wb_attrs(struct wbuf *b, const char *attrs)
{
	size_t n = attrs && strcmp(attrs, "{}") ? strlen(attrs) : 0;

	return wb_varint(b, n) || wb_bytes(b, attrs, n) ? -ENOMEM : 0;
}

/* ---------------------------------------------------------------- the store */

enum {
	ST_BEGIN,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_STR_GET,
	ST_STR_INS,
	ST_STR_TEXT,
	ST_TYPE_GET,
	ST_TYPE_INS,
	ST_TYPE_READ,
	ST_TYPE_WRITE,
	ST_TYPE_NAMES,
	ST_TYPE_COUNT,
	ST_PROC_GET,
	ST_PROC_INS,
	ST_TRACE_GET,
	ST_TRACE_INS,
	ST_TRACE_UPD,
	ST_TRACE_MAX,
	ST_CHUNK_INS,
	ST_CHUNKS_GET,
	ST_EVAGG_ADD,
	ST_EDGEAGG_ADD,
	ST_EVAGG_GET,
	ST_EDGEAGG_GET,
	ST_CONC_GET,
	ST_CONC_PUT,
	ST_FIND_EXACT,
	ST_FIND_HI,
	ST_FIND_LO,
	ST_DEL_CHUNKS,
	ST_DEL_TRACE,
	ST_MARK_GET,
	ST_MARK_SET,
	ST_MARK_DEL,
	ST_COUNT
};

static const char *const stmt_sql[ST_COUNT] = {
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	[ST_STR_GET] = "SELECT id FROM strs WHERE s = ?1",
	[ST_STR_INS] = "INSERT INTO strs(s) VALUES (?1)",
	[ST_STR_TEXT] = "SELECT s FROM strs WHERE id = ?1",
	[ST_TYPE_NAMES] = "SELECT service, name FROM types WHERE id = ?1",
	[ST_TYPE_COUNT] = "SELECT count FROM types WHERE id = ?1",
	[ST_CHUNK_INS] = "INSERT INTO chunks(id, data) VALUES (?1, ?2)",
	[ST_CHUNKS_GET] = "SELECT data, id FROM chunks WHERE id BETWEEN ?1 AND ?2",
	[ST_DEL_CHUNKS] = "DELETE FROM chunks WHERE id BETWEEN ?1 AND ?2",
	[ST_TYPE_GET] = "SELECT id FROM types WHERE service = ?1 AND name = ?2",
	[ST_TYPE_INS] = "INSERT INTO types(service, name, count, min_ns, max_ns, sketch) "
			"VALUES (?1, ?2, 0, 0, 0, x'')",
	[ST_TYPE_READ] = "SELECT count, min_ns, max_ns, sketch FROM types WHERE id = ?1",
	[ST_TYPE_WRITE] = "UPDATE types SET count = ?2, min_ns = ?3, max_ns = ?4, sketch = ?5 "
			  "WHERE id = ?1",
	[ST_PROC_GET] = "SELECT id FROM procs WHERE host = ?1 AND pid = ?2",
	[ST_PROC_INS] = "INSERT INTO procs(host, pid) VALUES (?1, ?2)",
	[ST_TRACE_GET] =
		"SELECT tr, start_ns, end_ns, ntasks, nhosts, root_task, root_type, "
		"root_host, root_start, root_parentless FROM traces WHERE hi = ?1 AND lo = ?2",
	[ST_TRACE_INS] = "INSERT INTO traces(tr, hi, lo, start_ns, end_ns, ntasks, nhosts, "
			 "root_task, root_type, root_host, root_start, root_parentless) "
			 "VALUES (?1, ?11, ?12, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
	[ST_TRACE_UPD] = "UPDATE traces SET start_ns = ?2, end_ns = ?3, ntasks = ?4, nhosts = ?5, "
			 "root_task = ?6, root_type = ?7, root_host = ?8, root_start = ?9, "
			 "root_parentless = ?10 WHERE tr = ?1",
	[ST_TRACE_MAX] = "SELECT coalesce(max(tr), 0) FROM traces",
	[ST_EVAGG_ADD] = "INSERT INTO event_agg(type, name, ntasks) VALUES (?1, ?2, ?3) "
			 "ON CONFLICT(type, name) DO UPDATE SET ntasks = ntasks + excluded.ntasks",
	[ST_EDGEAGG_ADD] =
		"INSERT INTO edge_agg(ptype, ctype, kind, count) VALUES (?1, ?2, ?3, ?4) "
		"ON CONFLICT(ptype, ctype, kind) DO UPDATE SET count = count + excluded.count",
	[ST_EVAGG_GET] = "SELECT ntasks FROM event_agg WHERE type = ?1 AND name = ?2",
	[ST_EDGEAGG_GET] =
		"SELECT count FROM edge_agg WHERE ptype = ?1 AND ctype = ?2 AND kind = ?3",
	[ST_CONC_GET] = "SELECT counts FROM conc WHERE proc = ?1 AND sec = ?2",
	[ST_CONC_PUT] = "INSERT OR REPLACE INTO conc(proc, sec, counts) VALUES (?1, ?2, ?3)",
	[ST_FIND_EXACT] = "SELECT tr, hi, lo FROM traces WHERE hi = ?1 AND lo = ?2",
	[ST_FIND_HI] = "SELECT tr, hi, lo FROM traces WHERE hi BETWEEN ?1 AND ?2 LIMIT 2",
	[ST_FIND_LO] =
		"SELECT tr, hi, lo FROM traces WHERE hi = ?1 AND lo BETWEEN ?2 AND ?3 LIMIT 2",
	[ST_DEL_TRACE] = "DELETE FROM traces WHERE tr = ?1",
	[ST_MARK_GET] = "SELECT flags FROM marks WHERE tr = ?1",
	[ST_MARK_SET] = "INSERT OR REPLACE INTO marks(tr, flags) VALUES (?1, ?2)",
	[ST_MARK_DEL] = "DELETE FROM marks WHERE tr = ?1",
};

/* Version 2: traces marked incomplete (GRAPH_INC_*), a row only for a marked trace. */
#define MARKS_SQL "CREATE TABLE marks(tr INTEGER PRIMARY KEY, flags INTEGER NOT NULL);"

static const char schema_sql[] =
	"CREATE TABLE strs(id INTEGER PRIMARY KEY, s TEXT NOT NULL UNIQUE);"
	"CREATE TABLE types(id INTEGER PRIMARY KEY, service TEXT NOT NULL, name TEXT NOT NULL,"
	" count INTEGER NOT NULL, min_ns INTEGER NOT NULL, max_ns INTEGER NOT NULL,"
	" sketch BLOB NOT NULL, UNIQUE(service, name));"
	"CREATE TABLE procs(id INTEGER PRIMARY KEY, host INTEGER NOT NULL, pid INTEGER NOT NULL,"
	" UNIQUE(host, pid));"
	"CREATE TABLE traces(tr INTEGER PRIMARY KEY, hi INTEGER NOT NULL, lo INTEGER NOT NULL,"
	" start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, ntasks INTEGER NOT NULL,"
	" nhosts INTEGER NOT NULL, root_task INTEGER NOT NULL, root_type INTEGER NOT NULL,"
	" root_host INTEGER NOT NULL, root_start INTEGER NOT NULL,"
	" root_parentless INTEGER NOT NULL);"
	"CREATE UNIQUE INDEX traces_id ON traces(hi, lo);"
	"CREATE INDEX traces_start ON traces(start_ns);"
	"CREATE TABLE chunks(id INTEGER PRIMARY KEY, data BLOB NOT NULL);"
	"CREATE TABLE event_agg(type INTEGER NOT NULL, name INTEGER NOT NULL,"
	" ntasks INTEGER NOT NULL, PRIMARY KEY(type, name)) WITHOUT ROWID;"
	"CREATE TABLE edge_agg(ptype INTEGER NOT NULL, ctype INTEGER NOT NULL,"
	" kind INTEGER NOT NULL, count INTEGER NOT NULL,"
	" PRIMARY KEY(ptype, ctype, kind)) WITHOUT ROWID;"
	"CREATE TABLE conc(proc INTEGER NOT NULL, sec INTEGER NOT NULL, counts BLOB NOT NULL,"
	" PRIMARY KEY(proc, sec)) WITHOUT ROWID;" MARKS_SQL;

/* A trace a put touches: its row, updated in memory and written once at commit. */
struct tacc {
	int64_t hi, lo; /* biased */
	int64_t tr, start, end, ntasks, nhosts, root_task, root_type, root_host, root_start;
	int64_t root_parentless;
	int64_t nchunks; /* stored chunks: the next one's seq */
	bool isnew, based;
	int64_t base; /* the chunk's time base: its first element's time */
	uint64_t nt, ne, nd; /* elements this put adds (coded in struct sq's body) */
};

/* A type a put touches: deltas, added to its row when flushed. */
struct typeacc {
	int64_t id;
	uint64_t count;
	int64_t min, max;
	uint64_t *counts; /* WEFT_SKETCH_NBUCKETS */
};

/* Flags of a task in put's task map (v[2]). */
#define PT_NEW 1 /* stored by this put */
#define PT_DUP 2 /* in the batch but already stored: replaced */
#define PT_STORED 4 /* not in the batch, found stored */

/*
 * A type's sketch as the context reads it: its non-empty buckets, increasing, with the running
 * count up to and including each; a task's "at or below" count is a binary search.  Kept
 * across calls (struct sq's ctcache) and valid while the type's count is unchanged: every
 * change to a sketch (put, merge) changes the count.
 */
struct ctx_type {
	uint64_t count;
	uint32_t *idx;
	uint64_t *cum;
	size_t n;
};

#define CT_MAX 4096 /* decoded sketches kept */

struct sq {
	struct graph_store base;
	sqlite3 *db;
	sqlite3_stmt *st[ST_COUNT];
	/* id caches, kept across puts, dropped on rollback */
	struct smap strs, types;
	struct kmap procs;
	/* a put's accumulators */
	struct kmap ptraces, ptasks, pevseen, pedges, pth, pevagg, pedgeagg, ptypes, pblocks;
	int64_t next_tr; /* row id of the next new trace */
	struct tacc *tacc;
	size_t ntacc, captacc;
	struct typeacc *tya;
	size_t ntya;
	int32_t (*blk)[CONC_MS + 1];
	size_t nblk;
	struct wbuf wb;
	struct wbuf body; /* the elements of the trace a put is at, coded for its chunk */
	/* stored edges of the trace a put is at with an end not stored (yet): when the put
	 * brings that task, the edge's shape is counted (stitching: pieces of a trace come
	 * from several hosts, in any order) */
	struct cedge *dangle;
	size_t ndangle, capdangle;
	uint64_t *scratch; /* WEFT_SKETCH_NBUCKETS */
	uint32_t conc_scratch[CONC_MS];
	/* the context's decoded sketches */
	struct kmap ctcache;
	struct ctx_type *ct;
	size_t nct, capct;
	/* put_opts(GRAPH_PUT_NO_AGGS): elements only, the aggregates come by put_aggs */
	bool noaggs;
	/* graph_store_list()'s filters, for weft_chunk_match() */
	struct kmap lf_types;
	int64_t lf_host;
};

static const struct graph_store_ops sqlite_ops;
static void chunk_match(sqlite3_context *ctx, int argc, sqlite3_value **argv);

static int sq_fail(struct sq *s, int rc, char *why, size_t whysz, const char *what)
{
	return fail(why, whysz, sq_errno(rc), "graph store: %s: %s", what, sqlite3_errmsg(s->db));
}

/* A prepared statement, reset with its bindings cleared. */
static sqlite3_stmt *stmt(struct sq *s, int which)
{
	sqlite3_stmt *t = s->st[which];

	sqlite3_reset(t); /* callers bind every parameter */
	return t;
}

/* Runs a statement that returns no row (or whose rows are ignored). */
static int step_done(struct sq *s, sqlite3_stmt *t, char *why, size_t whysz, const char *what)
{
	int rc;

	while ((rc = sqlite3_step(t)) == SQLITE_ROW)
		;
	if (rc != SQLITE_DONE) {
		rc = sq_fail(s, rc, why, whysz, what);
		sqlite3_reset(t);
		return rc;
	}
	sqlite3_reset(t);
	return 0;
}

/* Executes one integer-returning statement: 1 and *out if a row came, 0 if none, -errno. */
static int step_int(struct sq *s, sqlite3_stmt *t, int64_t *out, char *why, size_t whysz,
		    const char *what)
{
	int rc = sqlite3_step(t);

	if (rc == SQLITE_ROW) {
		*out = sqlite3_column_int64(t, 0);
		sqlite3_reset(t);
		return 1;
	}
	if (rc == SQLITE_DONE) {
		sqlite3_reset(t);
		return 0;
	}
	rc = sq_fail(s, rc, why, whysz, what);
	sqlite3_reset(t);
	return rc;
}

static void drop_caches(struct sq *s)
{
	smap_clear(&s->strs);
	smap_clear(&s->types);
	kmap_free(&s->procs);
}

/* The id of a string, interned if create; 0 when absent and !create (ids start at 1). */
static int str_id(struct sq *s, const char *str, bool create, int64_t *id, char *why, size_t whysz)
{
	size_t len = strlen(str);
	uint64_t h = shash(str, len);
	struct sent *e = smap_find(&s->strs, str, len, h);
	sqlite3_stmt *t;
	int rc;

	if (e) {
		*id = e->v;
		return 0;
	}
	t = stmt(s, ST_STR_GET);
	sqlite3_bind_text(t, 1, str, (int)len, SQLITE_STATIC);
	rc = step_int(s, t, id, why, whysz, "reading a string");
	if (rc < 0)
		return rc;
	if (!rc) {
		if (!create) {
			*id = 0;
			return 0;
		}
		t = stmt(s, ST_STR_INS);
		sqlite3_bind_text(t, 1, str, (int)len, SQLITE_STATIC);
		rc = step_done(s, t, why, whysz, "adding a string");
		if (rc)
			return rc;
		*id = sqlite3_last_insert_rowid(s->db);
	}
	return smap_put(&s->strs, str, len, h, *id) ? fail(why, whysz, -ENOMEM, "out of memory") :
						      0;
}

static int type_id(struct sq *s, const char *service, const char *name, bool create, int64_t *id,
		   char *why, size_t whysz)
{
	size_t ls = strlen(service), ln = strlen(name), len = ls + 1 + ln;
	char stackkey[512], *key = len <= sizeof(stackkey) ? stackkey : malloc(len);
	struct sent *e;
	sqlite3_stmt *t;
	uint64_t h;
	int rc = 0;

	if (!key)
		return fail(why, whysz, -ENOMEM, "out of memory");
	memcpy(key, service, ls);
	key[ls] = 0;
	memcpy(key + ls + 1, name, ln);
	h = shash(key, len);
	e = smap_find(&s->types, key, len, h);
	if (e) {
		*id = e->v;
		goto out;
	}
	t = stmt(s, ST_TYPE_GET);
	sqlite3_bind_text(t, 1, service, (int)ls, SQLITE_STATIC);
	sqlite3_bind_text(t, 2, name, (int)ln, SQLITE_STATIC);
	rc = step_int(s, t, id, why, whysz, "reading a task type");
	if (rc < 0)
		goto out;
	if (!rc) {
		*id = 0;
		if (!create)
			goto out;
		t = stmt(s, ST_TYPE_INS);
		sqlite3_bind_text(t, 1, service, (int)ls, SQLITE_STATIC);
		sqlite3_bind_text(t, 2, name, (int)ln, SQLITE_STATIC);
		rc = step_done(s, t, why, whysz, "adding a task type");
		if (rc)
			goto out;
		*id = sqlite3_last_insert_rowid(s->db);
	}
	rc = smap_put(&s->types, key, len, h, *id) ? fail(why, whysz, -ENOMEM, "out of memory") : 0;
out:
	if (key != stackkey)
		free(key);
	return rc;
}

static int proc_id(struct sq *s, int64_t host, int64_t pid, bool create, int64_t *id, char *why,
		   size_t whysz)
{
	struct kent *e = kmap_find(&s->procs, (uint64_t)host, (uint64_t)pid, 0);
	sqlite3_stmt *t;
	int rc;

	if (e) {
		*id = e->v[0];
		return 0;
	}
	t = stmt(s, ST_PROC_GET);
	sqlite3_bind_int64(t, 1, host);
	sqlite3_bind_int64(t, 2, pid);
	rc = step_int(s, t, id, why, whysz, "reading a process");
	if (rc < 0)
		return rc;
	if (!rc) {
		*id = 0;
		if (!create)
			return 0;
		t = stmt(s, ST_PROC_INS);
		sqlite3_bind_int64(t, 1, host);
		sqlite3_bind_int64(t, 2, pid);
		rc = step_done(s, t, why, whysz, "adding a process");
		if (rc)
			return rc;
		*id = sqlite3_last_insert_rowid(s->db);
	}
	if (s->procs.n >= CACHE_MAX)
		kmap_free(&s->procs);
	e = kmap_get(&s->procs, (uint64_t)host, (uint64_t)pid, 0, NULL);
	if (!e)
		return fail(why, whysz, -ENOMEM, "out of memory");
	e->v[0] = *id;
	return 0;
}

/* ---------------------------------------------------------------- open and close */

static int exec(struct sq *s, const char *sql, char *why, size_t whysz, const char *what)
{
	char *msg = NULL;
	int rc = sqlite3_exec(s->db, sql, NULL, NULL, &msg);

	if (rc != SQLITE_OK) {
		rc = fail(why, whysz, sq_errno(rc), "graph store: %s: %s", what,
			  msg ? msg : sqlite3_errstr(rc));
		sqlite3_free(msg);
		return rc;
	}
	return 0;
}

static int pragma_int(struct sq *s, const char *sql, int64_t *out, char *why, size_t whysz)
{
	sqlite3_stmt *t;
	int rc = sqlite3_prepare_v2(s->db, sql, -1, &t, NULL);

	if (rc != SQLITE_OK)
		return sq_fail(s, rc, why, whysz, sql);
	rc = step_int(s, t, out, why, whysz, sql);
	sqlite3_finalize(t);
	if (rc == 0)
		*out = 0;
	return rc < 0 ? rc : 0;
}

/* Checks (or creates) the schema of the file just opened. */
static int schema_check(struct sq *s, const char *path, const char *alias, char *why, size_t whysz)
{
	char sql[128];
	int64_t app, ver, ntab;
	int rc;

	snprintf(sql, sizeof(sql), "PRAGMA %s.application_id", alias);
	rc = pragma_int(s, sql, &app, why, whysz);
	if (rc) {
		/* SQLITE_NOTADB comes here: the first read of the header */
		return fail(why, whysz, -EINVAL, "%s: not a weft graph store (%s)", path,
			    sqlite3_errmsg(s->db));
	}
	snprintf(sql, sizeof(sql), "PRAGMA %s.user_version", alias);
	if ((rc = pragma_int(s, sql, &ver, why, whysz)))
		return rc;
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s.sqlite_master", alias);
	if ((rc = pragma_int(s, sql, &ntab, why, whysz)))
		return rc;
	if (app == 0 && ver == 0 && ntab == 0)
		return 1; /* an empty database: a new store */
	if (app != APP_ID)
		return fail(why, whysz, -EINVAL,
			    "%s: a SQLite database but not a weft graph store (application_id "
			    "%#" PRIx64 ")",
			    path, (uint64_t)app);
	if (ver > GRAPH_STORE_VERSION)
		return fail(why, whysz, -EPROTONOSUPPORT,
			    "%s: graph store schema version %" PRId64
			    " is newer than this weft's (%d): use a newer weft",
			    path, ver, GRAPH_STORE_VERSION);
	if (ver < 1)
		return fail(why, whysz, -EINVAL,
			    "%s: graph store schema version %" PRId64 " unknown", path, ver);
	return ver < GRAPH_STORE_VERSION ? 2 : 0;
}

static void sq_close(struct graph_store *base)
{
	struct sq *s = (struct sq *)base;
	size_t i;

	for (i = 0; i < ST_COUNT; i++)
		sqlite3_finalize(s->st[i]);
	sqlite3_close(s->db);
	drop_caches(s);
	kmap_free(&s->ptraces);
	kmap_free(&s->ptasks);
	kmap_free(&s->pevseen);
	kmap_free(&s->pedges);
	kmap_free(&s->lf_types);
	kmap_free(&s->ctcache);
	for (i = 0; i < s->nct; i++) {
		free(s->ct[i].idx);
		free(s->ct[i].cum);
	}
	free(s->ct);
	free(s->dangle);
	kmap_free(&s->pth);
	kmap_free(&s->pevagg);
	kmap_free(&s->pedgeagg);
	kmap_free(&s->ptypes);
	kmap_free(&s->pblocks);
	free(s->tacc);
	free(s->body.p);
	if (s->tya)
		for (i = 0; i < FLUSH_TYPES; i++)
			free(s->tya[i].counts);
	free(s->tya);
	free(s->blk);
	free(s->wb.p);
	free(s->scratch);
	free(s);
}

struct graph_store *graph_store_sqlite_open(const char *path, char *why, size_t whysz)
{
	struct sq *s = calloc(1, sizeof(*s));
	struct stat sb;
	int rc, err;
	size_t i;

	if (!s) {
		fail(why, whysz, -ENOMEM, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	s->base.ops = &sqlite_ops;
	s->scratch = calloc(WEFT_SKETCH_NBUCKETS, sizeof(*s->scratch));
	s->tya = calloc(FLUSH_TYPES, sizeof(*s->tya));
	if (!s->scratch || !s->tya) {
		err = fail(why, whysz, -ENOMEM, "out of memory");
		goto out_free;
	}
	if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
		err = fail(why, whysz, -EINVAL, "%s: not a regular file", path);
		goto out_free;
	}
	rc = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
	if (rc != SQLITE_OK) {
		err = fail(why, whysz, sq_errno(rc), "%s: cannot open: %s", path,
			   s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
		goto out_free;
	}
	sqlite3_busy_timeout(s->db, 10000);
	sqlite3_extended_result_codes(s->db, 0);
	err = schema_check(s, path, "main", why, whysz);
	if (err < 0)
		goto out_free;
	if (err == 1) {
		char sql[160];

		/* auto_vacuum must be set before the first table: retain can shrink the file */
		snprintf(sql, sizeof(sql),
			 "PRAGMA auto_vacuum = INCREMENTAL; PRAGMA application_id = %d;"
			 " PRAGMA user_version = %d;",
			 APP_ID, GRAPH_STORE_VERSION);
		if ((err = exec(s, sql, why, whysz, "creating the store")) ||
		    (err = exec(s, "BEGIN IMMEDIATE", why, whysz, "creating the store")))
			goto out_free;
		if ((err = exec(s, schema_sql, why, whysz, "creating the schema"))) {
			sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
			goto out_free;
		}
		if ((err = exec(s, "COMMIT", why, whysz, "creating the schema")))
			goto out_free;
	} else if (err == 2) {
		char sql[160];

		/* version 1 -> 2: the marks of incomplete traces (an empty table) */
		snprintf(sql, sizeof(sql), "BEGIN IMMEDIATE; %s PRAGMA user_version = %d; COMMIT;",
			 MARKS_SQL, GRAPH_STORE_VERSION);
		if ((err = exec(s, sql, why, whysz, "upgrading the schema to version 2"))) {
			sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
			goto out_free;
		}
	}
	/* 64 MiB of page cache: the trace id index takes inserts at random places */
	if ((err = exec(s,
			"PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
			" PRAGMA cache_size = -16384; PRAGMA wal_autocheckpoint = 8192;",
			why, whysz, "setting WAL mode")))
		goto out_free;
	rc = sqlite3_create_function(s->db, "weft_chunk_match", 2,
				     SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_DIRECTONLY, s,
				     chunk_match, NULL, NULL);
	if (rc != SQLITE_OK) {
		err = fail(why, whysz, sq_errno(rc), "%s: %s", path, sqlite3_errmsg(s->db));
		goto out_free;
	}
	for (i = 0; i < ST_COUNT; i++) {
		rc = sqlite3_prepare_v3(s->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
					&s->st[i], NULL);
		if (rc != SQLITE_OK) {
			/* a weft graph store whose tables are not ours: crafted or damaged */
			err = fail(why, whysz, -EINVAL, "%s: not a usable weft graph store: %s",
				   path, sqlite3_errmsg(s->db));
			goto out_free;
		}
	}
	return &s->base;

out_free:
	sq_close(&s->base);
	errno = -err;
	return NULL;
}

/* ---------------------------------------------------------------- put */

/* Empties a put's map; one that a huge put made big is freed, not kept for the next. */
static void kmap_reset(struct kmap *m)
{
	if (m->cap > (1u << 16))
		kmap_free(m);
	else
		kmap_clear(m);
}

static void put_reset(struct sq *s)
{
	size_t i;

	kmap_reset(&s->ptraces);
	kmap_reset(&s->ptasks);
	kmap_reset(&s->pevseen);
	kmap_reset(&s->pedges);
	kmap_reset(&s->pth);
	kmap_reset(&s->pevagg);
	kmap_reset(&s->pedgeagg);
	kmap_reset(&s->ptypes);
	kmap_reset(&s->pblocks);
	s->ntacc = 0;
	if (s->captacc > 4096) { /* the same for the traces' row buffer */
		free(s->tacc);
		s->tacc = NULL;
		s->captacc = 0;
	}
	s->body.n = 0;
	for (i = 0; i < s->ntya; i++)
		memset(s->tya[i].counts, 0, WEFT_SKETCH_NBUCKETS * sizeof(uint64_t));
	s->ntya = 0;
	s->nblk = 0;
}

/* Adds an edge to the put's set of edges (stored ones included); *added says if it is new. */
static int eset_add(struct kmap *m, uint64_t tr, const struct cedge *d, bool *added)
{
	size_t i;

	if ((m->n + 1) * 2 > m->cap && kmap_grow(m))
		return -ENOMEM;
	for (i = khash(tr, d->from_task, d->to_task) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		struct kent *e = &m->e[i];

		if (!e->used) {
			e->used = 1;
			e->k[0] = tr;
			e->k[1] = d->from_task;
			e->k[2] = d->to_task;
			e->v[0] = (int64_t)d->from_event;
			e->v[1] = (int64_t)d->to_event;
			e->v[2] = d->kind;
			m->n++;
			*added = true;
			return 0;
		}
		if (e->k[0] == tr && e->k[1] == d->from_task && e->k[2] == d->to_task &&
		    e->v[0] == (int64_t)d->from_event && e->v[1] == (int64_t)d->to_event &&
		    e->v[2] == d->kind) {
			*added = false;
			return 0;
		}
	}
}

/* What a stored trace already holds, so that a put adds to it without counting twice. */
struct seed {
	struct sq *s;
	uint64_t tr;
};

static int seed_task(void *arg, const struct ctask *t)
{
	struct seed *sd = arg;
	struct kent *e = kmap_get(&sd->s->ptasks, sd->tr, t->id, 0, NULL);

	if (!e || !kmap_get(&sd->s->pth, sd->tr, (uint64_t)t->host, 0, NULL))
		return -ENOMEM;
	e->v[0] = t->type;
	e->v[2] = PT_STORED;
	return 0;
}

static int seed_event(void *arg, const struct cevent *ev)
{
	struct seed *sd = arg;

	return kmap_get(&sd->s->pevseen, sd->tr, ev->task, (uint64_t)ev->name, NULL) ? 0 : -ENOMEM;
}

static int seed_edge(void *arg, const struct cedge *d)
{
	struct seed *sd = arg;
	struct sq *s = sd->s;
	bool added;

	if (s->ndangle == s->capdangle) {
		size_t cap = s->capdangle ? 2 * s->capdangle : 64;
		struct cedge *v = realloc(s->dangle, cap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		s->dangle = v;
		s->capdangle = cap;
	}
	s->dangle[s->ndangle++] = *d;
	return eset_add(&s->pedges, sd->tr, d, &added);
}

/* After a trace's chunks are seeded: keeps the seeded edges from `from` whose shape could not
 * be counted (an end was not stored). */
static void dangle_keep(struct sq *s, uint64_t tr, size_t from)
{
	size_t k = from;

	for (size_t i = from; i < s->ndangle; i++)
		if (!kmap_find(&s->ptasks, tr, s->dangle[i].from_task, 0) ||
		    !kmap_find(&s->ptasks, tr, s->dangle[i].to_task, 0))
			s->dangle[k++] = s->dangle[i];
	s->ndangle = k;
}

/* After a put's tasks of trace tr: the shapes of stored edges whose missing end came now. */
static int dangle_resolve(struct sq *s, uint64_t tr, char *why, size_t whysz)
{
	if (s->noaggs) { /* a sampled capture's aggregates come with it (graph_store_put_aggs) */
		s->ndangle = 0;
		return 0;
	}
	for (size_t i = 0; i < s->ndangle; i++) {
		const struct cedge *d = &s->dangle[i];
		struct kent *from = kmap_find(&s->ptasks, tr, d->from_task, 0),
			    *to = kmap_find(&s->ptasks, tr, d->to_task, 0), *agg;

		if (!from || !to || d->kind >= GRAPH_EDGE_COUNT)
			continue;
		agg = kmap_get(&s->pedgeagg, (uint64_t)from->v[0], (uint64_t)to->v[0], d->kind,
			       NULL);
		if (!agg)
			return fail(why, whysz, -ENOMEM, "out of memory");
		agg->v[0]++;
	}
	s->ndangle = 0;
	return 0;
}

static int trace_seed(struct sq *s, struct tacc *a, char *why, size_t whysz)
{
	struct seed sd = { .s = s, .tr = (uint64_t)a->tr };
	const struct cvisit v = {
		.task = seed_task, .event = seed_event, .edge = seed_edge, .arg = &sd
	};
	sqlite3_stmt *t = stmt(s, ST_CHUNKS_GET);
	size_t from = s->ndangle;
	int rc;

	sqlite3_bind_int64(t, 1, a->tr << 16);
	sqlite3_bind_int64(t, 2, a->tr << 16 | CHUNK_MAX_SEQ);
	while ((rc = sqlite3_step(t)) == SQLITE_ROW) {
		int err = chunk_decode(sqlite3_column_blob(t, 0),
				       (size_t)sqlite3_column_bytes(t, 0), &v);

		if (err) {
			sqlite3_reset(t);
			return err == -ENOMEM ?
				       fail(why, whysz, -ENOMEM, "out of memory") :
				       fail(why, whysz, -EIO,
					    "graph store: trace row %" PRId64 ": corrupt chunk",
					    a->tr);
		}
		a->nchunks = (sqlite3_column_int64(t, 1) & CHUNK_MAX_SEQ) + 1;
	}
	sqlite3_reset(t);
	dangle_keep(s, (uint64_t)a->tr, from);
	return rc == SQLITE_DONE ? 0 : sq_fail(s, rc, why, whysz, "reading a trace");
}

/* The trace of id, from the put's map or the file (then what it holds is seeded into the
 * put's maps); created when absent if create.  NULL *out (and 0) when absent and !create. */
static int trace_get(struct sq *s, struct graph_id128 id, bool create, struct tacc **out,
		     struct graph_put_stats *st, char *why, size_t whysz)
{
	int64_t hi = bias(id.hi), lo = bias(id.lo);
	bool isnew;
	struct kent *e = kmap_get(&s->ptraces, (uint64_t)hi, (uint64_t)lo, 0, &isnew);
	struct tacc *a;
	sqlite3_stmt *t;
	int rc;

	*out = NULL;
	if (!e)
		return fail(why, whysz, -ENOMEM, "out of memory");
	if (!isnew) {
		*out = e->v[0] ? &s->tacc[e->v[1]] : NULL;
		if (*out || !create)
			return 0;
	}
	if (s->ntacc == s->captacc) {
		size_t ncap = s->captacc ? s->captacc * 2 : 64;
		struct tacc *n = realloc(s->tacc, ncap * sizeof(*n));

		if (!n)
			return fail(why, whysz, -ENOMEM, "out of memory");
		s->tacc = n;
		s->captacc = ncap;
	}
	a = &s->tacc[s->ntacc];
	memset(a, 0, sizeof(*a));
	a->hi = hi;
	a->lo = lo;
	if (isnew) {
		t = stmt(s, ST_TRACE_GET);
		sqlite3_bind_int64(t, 1, hi);
		sqlite3_bind_int64(t, 2, lo);
		rc = sqlite3_step(t);
	} else {
		rc = SQLITE_DONE; /* known absent */
	}
	if (rc == SQLITE_ROW) {
		int64_t *f[] = { &a->tr,	 &a->start,	     &a->end,	    &a->ntasks,
				 &a->nhosts,	 &a->root_task,	     &a->root_type, &a->root_host,
				 &a->root_start, &a->root_parentless };

		for (int i = 0; i < 10; i++)
			*f[i] = sqlite3_column_int64(t, i);
		sqlite3_reset(t);
		if (a->tr <= 0 || a->tr > (INT64_MAX >> 16))
			return fail(why, whysz, -EIO, "graph store: a trace row id out of range");
		e->v[0] = 1;
		e->v[1] = (int64_t)s->ntacc++;
		*out = a;
		return trace_seed(s, a, why, whysz);
	}
	if (isnew)
		sqlite3_reset(t);
	if (rc != SQLITE_DONE)
		return sq_fail(s, rc, why, whysz, "reading a trace");
	e->v[0] = 0; /* known absent */
	if (!create)
		return 0;
	/* its row is written at the end of the put, with its final values */
	a->tr = s->next_tr++;
	a->isnew = true;
	if (st)
		st->traces++;
	e->v[0] = 1;
	e->v[1] = (int64_t)s->ntacc++;
	*out = a;
	return 0;
}

/* Writes back the type deltas (one read-modify-write per touched type). */
static int flush_types(struct sq *s, char *why, size_t whysz)
{
	size_t i;
	int rc;

	for (i = 0; i < s->ntya; i++) {
		struct typeacc *ty = &s->tya[i];
		sqlite3_stmt *t = stmt(s, ST_TYPE_READ);
		int64_t count, mn, mx;

		sqlite3_bind_int64(t, 1, ty->id);
		rc = sqlite3_step(t);
		if (rc != SQLITE_ROW) {
			rc = rc == SQLITE_DONE ?
				     fail(why, whysz, -EIO,
					  "graph store: type %" PRId64 " vanished", ty->id) :
				     sq_fail(s, rc, why, whysz, "reading a type");
			sqlite3_reset(t);
			return rc;
		}
		count = sqlite3_column_int64(t, 0);
		mn = sqlite3_column_int64(t, 1);
		mx = sqlite3_column_int64(t, 2);
		memset(s->scratch, 0, WEFT_SKETCH_NBUCKETS * sizeof(uint64_t));
		if (!sketch_add_blob(s->scratch, sqlite3_column_blob(t, 3),
				     (size_t)sqlite3_column_bytes(t, 3)) ||
		    count < 0) {
			sqlite3_reset(t);
			return fail(why, whysz, -EIO,
				    "graph store: type %" PRId64 ": corrupt sketch", ty->id);
		}
		sqlite3_reset(t);
		for (size_t b = 0; b < WEFT_SKETCH_NBUCKETS; b++)
			s->scratch[b] += ty->counts[b];
		if (count == 0 || ty->min < mn)
			mn = ty->min;
		if (count == 0 || ty->max > mx)
			mx = ty->max;
		if (sketch_encode(s->scratch, &s->wb))
			return fail(why, whysz, -ENOMEM, "out of memory");
		t = stmt(s, ST_TYPE_WRITE);
		sqlite3_bind_int64(t, 1, ty->id);
		sqlite3_bind_int64(t, 2, count + (int64_t)ty->count);
		sqlite3_bind_int64(t, 3, mn);
		sqlite3_bind_int64(t, 4, mx);
		sqlite3_bind_blob(t, 5, s->wb.p ? (const void *)s->wb.p : "", (int)s->wb.n,
				  SQLITE_STATIC);
		if ((rc = step_done(s, t, why, whysz, "writing a type")))
			return rc;
		memset(ty->counts, 0, WEFT_SKETCH_NBUCKETS * sizeof(uint64_t));
	}
	s->ntya = 0;
	kmap_clear(&s->ptypes);
	return 0;
}

static int type_add(struct sq *s, int64_t type, int64_t lat, char *why, size_t whysz)
{
	bool isnew;
	struct kent *e;
	struct typeacc *ty;
	int rc;

	if (s->ntya == FLUSH_TYPES && !kmap_find(&s->ptypes, (uint64_t)type, 0, 0) &&
	    (rc = flush_types(s, why, whysz)))
		return rc;
	e = kmap_get(&s->ptypes, (uint64_t)type, 0, 0, &isnew);
	if (!e)
		return fail(why, whysz, -ENOMEM, "out of memory");
	if (isnew) {
		ty = &s->tya[s->ntya];
		if (!ty->counts && !(ty->counts = calloc(WEFT_SKETCH_NBUCKETS, sizeof(uint64_t))))
			return fail(why, whysz, -ENOMEM, "out of memory");
		ty->id = type;
		ty->count = 0;
		ty->min = lat;
		ty->max = lat;
		e->v[0] = (int64_t)s->ntya++;
	}
	ty = &s->tya[e->v[0]];
	ty->count++;
	ty->counts[weft_sketch_index(lat)]++;
	if (lat < ty->min)
		ty->min = lat;
	if (lat > ty->max)
		ty->max = lat;
	return 0;
}

/* Adds a block's stored counters to c[] (zeros if none); -errno on a corrupt block. */
static int conc_read(struct sq *s, int64_t proc, int64_t sec, uint32_t *c, bool *found, char *why,
		     size_t whysz)
{
	sqlite3_stmt *t = stmt(s, ST_CONC_GET);
	int rc;

	sqlite3_bind_int64(t, 1, proc);
	sqlite3_bind_int64(t, 2, sec);
	rc = sqlite3_step(t);
	*found = rc == SQLITE_ROW;
	if (rc == SQLITE_ROW) {
		bool ok = conc_decode(c, sqlite3_column_blob(t, 0),
				      (size_t)sqlite3_column_bytes(t, 0));

		sqlite3_reset(t);
		if (!ok)
			return fail(why, whysz, -EIO,
				    "graph store: corrupt concurrency block (process %" PRId64
				    ", second %" PRId64 ")",
				    proc, sec);
		return 0;
	}
	memset(c, 0, CONC_MS * sizeof(*c));
	sqlite3_reset(t);
	return rc == SQLITE_DONE ? 0 : sq_fail(s, rc, why, whysz, "reading concurrency");
}

static int conc_write(struct sq *s, int64_t proc, int64_t sec, const uint32_t *c, char *why,
		      size_t whysz)
{
	sqlite3_stmt *t;

	if (conc_encode(c, &s->wb))
		return fail(why, whysz, -ENOMEM, "out of memory");
	t = stmt(s, ST_CONC_PUT);
	sqlite3_bind_int64(t, 1, proc);
	sqlite3_bind_int64(t, 2, sec);
	sqlite3_bind_blob(t, 3, s->wb.p, (int)s->wb.n, SQLITE_STATIC);
	return step_done(s, t, why, whysz, "writing concurrency");
}

static int flush_blocks(struct sq *s, char *why, size_t whysz)
{
	size_t i;
	int rc;

	for (i = 0; i < s->pblocks.cap && s->pblocks.n; i++) {
		struct kent *e = &s->pblocks.e[i];
		int32_t *d;
		int64_t run = 0;
		bool found;

		if (!e->used)
			continue;
		d = s->blk[e->v[0]];
		if ((rc = conc_read(s, (int64_t)e->k[0], (int64_t)e->k[1], s->conc_scratch, &found,
				    why, whysz)))
			return rc;
		for (size_t m = 0; m < CONC_MS; m++) {
			int64_t v;

			run += d[m];
			v = (int64_t)s->conc_scratch[m] + run;
			s->conc_scratch[m] = v < 0 ? 0 : v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
		}
		if ((rc = conc_write(s, (int64_t)e->k[0], (int64_t)e->k[1], s->conc_scratch, why,
				     whysz)))
			return rc;
	}
	kmap_clear(&s->pblocks);
	s->nblk = 0;
	return 0;
}

static int conc_add(struct sq *s, int64_t proc, int64_t start, int64_t end, char *why, size_t whysz)
{
	int64_t first, last, sec;
	int rc;

	task_ms(start, end, &first, &last);
	for (sec = floordiv(first, CONC_MS); sec <= floordiv(last, CONC_MS); sec++) {
		int64_t base = sec * CONC_MS;
		int64_t a = first > base ? first - base : 0;
		int64_t b = last < base + CONC_MS - 1 ? last - base : CONC_MS - 1;
		bool isnew;
		struct kent *e;
		int32_t *d;

		if (s->nblk == FLUSH_BLOCKS &&
		    !kmap_find(&s->pblocks, (uint64_t)proc, (uint64_t)sec, 0) &&
		    (rc = flush_blocks(s, why, whysz)))
			return rc;
		if (!s->blk && !(s->blk = malloc(FLUSH_BLOCKS * sizeof(*s->blk))))
			return fail(why, whysz, -ENOMEM, "out of memory");
		e = kmap_get(&s->pblocks, (uint64_t)proc, (uint64_t)sec, 0, &isnew);
		if (!e)
			return fail(why, whysz, -ENOMEM, "out of memory");
		if (isnew) {
			memset(s->blk[s->nblk], 0, sizeof(s->blk[0]));
			e->v[0] = (int64_t)s->nblk++;
		}
		d = s->blk[e->v[0]];
		d[a]++;
		d[b + 1]--;
	}
	return 0;
}

static int put_tasks(struct sq *s, const struct graph *g, const size_t *ix, size_t n,
		     struct graph_put_stats *st, char *why, size_t whysz)
{
	int rc;

	for (size_t j = 0; j < n; j++) {
		size_t i = ix[j];
		const struct graph_task *k = &g->tasks[i];
		struct tacc *a;
		int64_t type, host, lat = task_lat(k), end = k->end > k->start ? k->end : k->start;
		struct kent *e;
		struct wbuf *b;
		bool isnew, better;

		if (!k->id)
			return fail(why, whysz, -EINVAL, "graph store: task %zu has id 0", i);
		if ((rc = trace_get(s, k->trace, true, &a, st, why, whysz)) ||
		    (rc = type_id(s, k->service ? k->service : "", k->name ? k->name : "", true,
				  &type, why, whysz)) ||
		    (rc = str_id(s, k->host ? k->host : "", true, &host, why, whysz)))
			return rc;
		e = kmap_get(&s->ptasks, (uint64_t)a->tr, k->id, 0, &isnew);
		if (!e)
			return fail(why, whysz, -ENOMEM, "out of memory");
		if (!isnew) {
			/* stored already (or twice in this batch): the first copy stays */
			if (e->v[2] & PT_STORED)
				e->v[2] |= PT_DUP;
			st->replaced++;
			continue;
		}
		e->v[0] = type;
		e->v[2] = PT_NEW;
		if (!a->based) {
			a->base = k->start;
			a->based = true;
		}
		b = &s->body;
		if (wb_varint(b, k->id) || wb_varint(b, k->parent) ||
		    wb_varint(b, (uint64_t)type) || wb_varint(b, (uint64_t)host) ||
		    wb_varint(b, zz(k->pid)) || wb_varint(b, zz(k->tid)) ||
		    wb_varint(b, zz(rel(k->start, a->base))) ||
		    wb_varint(b, (uint64_t)end - (uint64_t)k->start) || wb_varint(b, zz(k->skew)) ||
		    wb_varint(b, (uint32_t)k->status) || wb_varint(b, (uint32_t)k->source) ||
		    wb_attrs(b, k->attrs))
			return fail(why, whysz, -ENOMEM, "out of memory");
		a->nt++;
		st->tasks++;
		if (!s->noaggs && (rc = type_add(s, type, lat, why, whysz)))
			return rc;
		/* the trace's row */
		if (!a->ntasks || k->start < a->start)
			a->start = k->start;
		if (!a->ntasks || end > a->end)
			a->end = end;
		better = !a->ntasks || (k->parent == 0) > (a->root_parentless != 0) ||
			 ((k->parent == 0) == (a->root_parentless != 0) &&
			  (k->start < a->root_start ||
			   (k->start == a->root_start && k->id < (uint64_t)a->root_task)));
		if (better) {
			a->root_task = (int64_t)k->id;
			a->root_type = type;
			a->root_host = host;
			a->root_start = k->start;
			a->root_parentless = k->parent == 0;
		}
		a->ntasks++;
		if (!kmap_get(&s->pth, (uint64_t)a->tr, (uint64_t)host, 0, &isnew))
			return fail(why, whysz, -ENOMEM, "out of memory");
		a->nhosts += isnew;
		if (k->pid >= 0 && !s->noaggs) {
			int64_t proc;

			if ((rc = proc_id(s, host, k->pid, true, &proc, why, whysz)) ||
			    (rc = conc_add(s, proc, k->start, end, why, whysz)))
				return rc;
		}
	}
	return 0;
}

static int put_events(struct sq *s, const struct graph *g, const size_t *ix, size_t n,
		      struct graph_put_stats *st, char *why, size_t whysz)
{
	int rc;

	for (size_t j = 0; j < n; j++) {
		size_t i = ix[j];
		const struct graph_event *ev = &g->events[i];
		struct tacc *a;
		struct kent *e;
		struct wbuf *b;
		int64_t name;
		bool isnew;

		if ((rc = trace_get(s, ev->trace, false, &a, NULL, why, whysz)))
			return rc;
		e = a ? kmap_find(&s->ptasks, (uint64_t)a->tr, ev->task, 0) : NULL;
		if (!e)
			return fail(why, whysz, -EINVAL,
				    "graph store: event %zu: task %016" PRIx64
				    " is neither in the batch nor stored",
				    i, ev->task);
		if (e->v[2] & PT_DUP)
			continue; /* came with the stored copy of its task */
		if ((rc = str_id(s, ev->name ? ev->name : "", true, &name, why, whysz)))
			return rc;
		if (!kmap_get(&s->pevseen, (uint64_t)a->tr, ev->task, (uint64_t)name, &isnew))
			return fail(why, whysz, -ENOMEM, "out of memory");
		if (isnew && !s->noaggs) { /* the first of its name in its task */
			struct kent *agg =
				kmap_get(&s->pevagg, (uint64_t)e->v[0], (uint64_t)name, 0, NULL);

			if (!agg)
				return fail(why, whysz, -ENOMEM, "out of memory");
			agg->v[0]++;
		}
		if (!a->based) {
			a->base = ev->time;
			a->based = true;
		}
		b = &s->body;
		if (wb_varint(b, ev->task) || wb_varint(b, ev->id) ||
		    wb_varint(b, zz(rel(ev->time, a->base))) || wb_varint(b, (uint64_t)name) ||
		    wb_varint(b, (uint32_t)ev->source) || wb_attrs(b, ev->attrs))
			return fail(why, whysz, -ENOMEM, "out of memory");
		a->ne++;
		st->events++;
	}
	return 0;
}

static int put_edges(struct sq *s, const struct graph *g, const size_t *ix, size_t n,
		     struct graph_put_stats *st, char *why, size_t whysz)
{
	int rc;

	for (size_t j = 0; j < n; j++) {
		size_t i = ix[j];
		const struct graph_edge *ed = &g->edges[i];
		struct cedge d = { .kind = (uint32_t)ed->kind,
				   .source = (uint32_t)ed->source,
				   .from_task = ed->from_task,
				   .from_event = ed->from_event,
				   .to_task = ed->to_task,
				   .to_event = ed->to_event };
		struct kent *from, *to, *agg;
		struct tacc *a;
		struct wbuf *b;
		int64_t ptype, ctype;
		bool added;

		if ((unsigned)ed->kind >= GRAPH_EDGE_COUNT)
			return fail(why, whysz, -EINVAL, "graph store: edge %zu: kind %d unknown",
				    i, (int)ed->kind);
		if ((rc = trace_get(s, ed->trace, false, &a, NULL, why, whysz)))
			return rc;
		if (!a)
			return fail(why, whysz, -EINVAL,
				    "graph store: edge %zu: its trace is neither in the batch nor "
				    "stored",
				    i);
		if (eset_add(&s->pedges, (uint64_t)a->tr, &d, &added))
			return fail(why, whysz, -ENOMEM, "out of memory");
		if (!added)
			continue; /* stored already */
		b = &s->body;
		if (wb_varint(b, d.kind) || wb_varint(b, d.from_task) ||
		    wb_varint(b, d.from_event) || wb_varint(b, d.to_task) ||
		    wb_varint(b, d.to_event) || wb_varint(b, d.source))
			return fail(why, whysz, -ENOMEM, "out of memory");
		a->nd++;
		st->edges++;
		from = kmap_find(&s->ptasks, (uint64_t)a->tr, ed->from_task, 0);
		to = kmap_find(&s->ptasks, (uint64_t)a->tr, ed->to_task, 0);
		ptype = from ? from->v[0] : 0;
		ctype = to ? to->v[0] : 0;
		if (!ptype || !ctype || s->noaggs)
			continue; /* an end outside the store: its shape is unknown */
		agg = kmap_get(&s->pedgeagg, (uint64_t)ptype, (uint64_t)ctype, (uint64_t)ed->kind,
			       NULL);
		if (!agg)
			return fail(why, whysz, -ENOMEM, "out of memory");
		agg->v[0]++;
	}
	return 0;
}

/* Writes a trace's chunk of this put: the header, then the body put_* appended. */
static int chunk_write(struct sq *s, struct tacc *a, char *why, size_t whysz)
{
	sqlite3_stmt *t;

	if (a->nchunks > CHUNK_MAX_SEQ)
		return fail(why, whysz, -EFBIG,
			    "graph store: a trace stored in more than %d batches: import it whole",
			    CHUNK_MAX_SEQ + 1);
	s->wb.n = 0;
	if (wb_varint(&s->wb, CHUNK_VERSION) || wb_varint(&s->wb, a->nt) ||
	    wb_varint(&s->wb, a->ne) || wb_varint(&s->wb, a->nd) ||
	    wb_varint(&s->wb, zz(a->base)) || wb_bytes(&s->wb, s->body.p, s->body.n))
		return fail(why, whysz, -ENOMEM, "out of memory");
	if (s->wb.n > INT_MAX)
		return fail(why, whysz, -EFBIG, "graph store: a trace's batch over 2 GiB");
	t = stmt(s, ST_CHUNK_INS);
	sqlite3_bind_int64(t, 1, a->tr << 16 | a->nchunks);
	sqlite3_bind_blob(t, 2, s->wb.p, (int)s->wb.n, SQLITE_STATIC);
	return step_done(s, t, why, whysz, "adding a trace's elements");
}

static int put_flush(struct sq *s, char *why, size_t whysz)
{
	size_t i;
	int rc;

	if ((rc = flush_types(s, why, whysz)) || (rc = flush_blocks(s, why, whysz)))
		return rc;
	for (i = 0; i < s->pevagg.cap && s->pevagg.n; i++) {
		struct kent *e = &s->pevagg.e[i];
		sqlite3_stmt *t;

		if (!e->used)
			continue;
		t = stmt(s, ST_EVAGG_ADD);
		sqlite3_bind_int64(t, 1, (int64_t)e->k[0]);
		sqlite3_bind_int64(t, 2, (int64_t)e->k[1]);
		sqlite3_bind_int64(t, 3, e->v[0]);
		if ((rc = step_done(s, t, why, whysz, "writing event counts")))
			return rc;
	}
	for (i = 0; i < s->pedgeagg.cap && s->pedgeagg.n; i++) {
		struct kent *e = &s->pedgeagg.e[i];
		sqlite3_stmt *t;

		if (!e->used)
			continue;
		t = stmt(s, ST_EDGEAGG_ADD);
		sqlite3_bind_int64(t, 1, (int64_t)e->k[0]);
		sqlite3_bind_int64(t, 2, (int64_t)e->k[1]);
		sqlite3_bind_int64(t, 3, (int64_t)e->k[2]);
		sqlite3_bind_int64(t, 4, e->v[0]);
		if ((rc = step_done(s, t, why, whysz, "writing edge counts")))
			return rc;
	}
	for (i = 0; i < s->ntacc; i++) {
		struct tacc *a = &s->tacc[i];
		sqlite3_stmt *t;

		if (!(a->nt + a->ne + a->nd))
			continue; /* nothing new for it */
		t = stmt(s, a->isnew ? ST_TRACE_INS : ST_TRACE_UPD);
		sqlite3_bind_int64(t, 1, a->tr);
		sqlite3_bind_int64(t, 2, a->start);
		sqlite3_bind_int64(t, 3, a->end);
		sqlite3_bind_int64(t, 4, a->ntasks);
		sqlite3_bind_int64(t, 5, a->nhosts);
		sqlite3_bind_int64(t, 6, a->root_task);
		sqlite3_bind_int64(t, 7, a->root_type);
		sqlite3_bind_int64(t, 8, a->root_host);
		sqlite3_bind_int64(t, 9, a->root_start);
		sqlite3_bind_int64(t, 10, a->root_parentless);
		if (a->isnew) {
			sqlite3_bind_int64(t, 11, a->hi);
			sqlite3_bind_int64(t, 12, a->lo);
		}
		if ((rc = step_done(s, t, why, whysz, "writing a trace")))
			return rc;
	}
	return 0;
}

/* An element of the batch, to visit the batch trace by trace. */
struct gref {
	uint64_t hi, lo;
	size_t i;
	int kind; /* 0 task, 1 event, 2 edge: a trace's tasks come first */
};

static int gref_cmp(const void *pa, const void *pb)
{
	const struct gref *a = pa, *b = pb;

	if (a->hi != b->hi)
		return a->hi < b->hi ? -1 : 1;
	if (a->lo != b->lo)
		return a->lo < b->lo ? -1 : 1;
	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	return a->i < b->i ? -1 : a->i > b->i;
}

/* An empty map with room for about n, cheap to empty again: the per-trace maps. */
static int kmap_fit(struct kmap *m, size_t n)
{
	size_t cap = 16;

	while (cap < 2 * n + 2)
		cap *= 2;
	if (m->cap >= cap && m->cap <= 4 * cap) {
		kmap_clear(m);
		return 0;
	}
	kmap_free(m);
	m->e = calloc(cap, sizeof(*m->e));
	m->cap = m->e ? cap : 0;
	return m->e ? 0 : -ENOMEM;
}

/*
 * The batch trace by trace (its elements sorted by trace, each kind in batch order), so that
 * the maps of one trace's tasks, hosts, edges and event names stay small and in cache, and
 * each trace's chunk is written as soon as its elements are coded.
 */
static int put_traces(struct sq *s, const struct graph *g, struct graph_put_stats *st, char *why,
		      size_t whysz)
{
	size_t n = g->ntasks + g->nevents + g->nedges, p, q, j;
	struct gref *r = malloc((n + 1) * sizeof(*r));
	size_t *ix = malloc((n + 1) * sizeof(*ix));
	int rc = 0;

	if (!r || !ix) {
		rc = fail(why, whysz, -ENOMEM, "out of memory");
		goto out;
	}
	for (j = 0, p = 0; j < g->ntasks; j++)
		r[p++] = (struct gref){ g->tasks[j].trace.hi, g->tasks[j].trace.lo, j, 0 };
	for (j = 0; j < g->nevents; j++)
		r[p++] = (struct gref){ g->events[j].trace.hi, g->events[j].trace.lo, j, 1 };
	for (j = 0; j < g->nedges; j++)
		r[p++] = (struct gref){ g->edges[j].trace.hi, g->edges[j].trace.lo, j, 2 };
	qsort(r, n, sizeof(*r), gref_cmp);
	for (j = 0, q = 0; j < n; j++) {
		ix[j] = r[j].i;
		q += !j || r[j].hi != r[j - 1].hi || r[j].lo != r[j - 1].lo;
	}
	if (kmap_reserve(&s->ptraces, q)) { /* q: the number of traces */
		rc = fail(why, whysz, -ENOMEM, "out of memory");
		goto out;
	}
	for (p = 0; p < n; p = q) {
		size_t nk[3] = { 0, 0, 0 };
		struct graph_id128 id = { .hi = r[p].hi, .lo = r[p].lo };
		struct tacc *a;

		for (q = p; q < n && r[q].hi == r[p].hi && r[q].lo == r[p].lo; q++)
			nk[r[q].kind]++;
		if (kmap_fit(&s->ptasks, nk[0]) || kmap_fit(&s->pth, nk[0]) ||
		    kmap_fit(&s->pedges, nk[2]) || kmap_fit(&s->pevseen, nk[1])) {
			rc = fail(why, whysz, -ENOMEM, "out of memory");
			goto out;
		}
		s->body.n = 0;
		s->ndangle = 0;
		if ((rc = put_tasks(s, g, ix + p, nk[0], st, why, whysz)) ||
		    (rc = trace_get(s, id, false, &a, NULL, why, whysz)) ||
		    (a && (rc = dangle_resolve(s, (uint64_t)a->tr, why, whysz))) ||
		    (rc = put_events(s, g, ix + p + nk[0], nk[1], st, why, whysz)) ||
		    (rc = put_edges(s, g, ix + p + nk[0] + nk[1], nk[2], st, why, whysz)) ||
		    (rc = trace_get(s, id, false, &a, NULL, why, whysz)))
			goto out;
		if (a && a->nt + a->ne + a->nd && (rc = chunk_write(s, a, why, whysz)))
			goto out;
	}
out:
	free(r);
	free(ix);
	return rc;
}

static int begin(struct sq *s, char *why, size_t whysz)
{
	return step_done(s, stmt(s, ST_BEGIN), why, whysz, "starting a transaction");
}

/* Undoes the open transaction; the id caches may hold ids it created, so they go too. */
static void rollback(struct sq *s)
{
	if (!sqlite3_get_autocommit(s->db))
		sqlite3_step(stmt(s, ST_ROLLBACK));
	sqlite3_reset(s->st[ST_ROLLBACK]);
	drop_caches(s);
}

static int sq_put_opts(struct graph_store *base, const struct graph *g, unsigned flags,
		       struct graph_put_stats *stp, char *why, size_t whysz)
{
	struct sq *s = (struct sq *)base;
	struct graph_put_stats st = { 0 };
	int rc;

	put_reset(s);
	s->noaggs = flags & GRAPH_PUT_NO_AGGS;
	if ((rc = begin(s, why, whysz)))
		return rc;
	if ((rc = step_int(s, stmt(s, ST_TRACE_MAX), &s->next_tr, why, whysz, "reading traces")) <
	    0) {
		rollback(s);
		return rc;
	}
	s->next_tr++;
	if ((rc = put_traces(s, g, &st, why, whysz)) || (rc = put_flush(s, why, whysz)) ||
	    (rc = step_done(s, stmt(s, ST_COMMIT), why, whysz, "committing"))) {
		rollback(s);
		put_reset(s);
		s->noaggs = false;
		return rc;
	}
	put_reset(s);
	s->noaggs = false;
	if (stp)
		*stp = st;
	return 0;
}

static int sq_put(struct graph_store *base, const struct graph *g, struct graph_put_stats *stp,
		  char *why, size_t whysz)
{
	return sq_put_opts(base, g, 0, stp, why, whysz);
}

/* ---------------------------------------------------------------- sampled captures */

/* The sampling table: one row, created by any weft that puts aggregates (older stores lack
 * it until then: graph_store_sampling() reads zeros). */
static const char sampling_sql[] =
	"CREATE TABLE IF NOT EXISTS sampling(id INTEGER PRIMARY KEY CHECK (id = 1),"
	" rate REAL NOT NULL, seen INTEGER NOT NULL, kept_head INTEGER NOT NULL,"
	" kept_outlier INTEGER NOT NULL)";

/* A type's whole delta (count, min, max, sketch) into the put's accumulators. */
static int type_add_agg(struct sq *s, int64_t type, const struct graph_agg_type *t, char *why,
			size_t whysz)
{
	struct typeacc *ty;
	struct kent *e;
	bool isnew;
	int rc;

	if (!t->count)
		return 0;
	if ((rc = type_add(s, type, t->min, why, whysz)))
		return rc;
	e = kmap_get(&s->ptypes, (uint64_t)type, 0, 0, &isnew);
	if (!e)
		return fail(why, whysz, -ENOMEM, "out of memory");
	ty = &s->tya[e->v[0]];
	/* type_add counted one task at min: replace it by the whole sketch */
	ty->count--;
	ty->counts[weft_sketch_index(t->min)]--;
	ty->count += t->count;
	for (size_t b = 0; b < WEFT_SKETCH_NBUCKETS; b++)
		ty->counts[b] += t->sketch[b];
	if (t->max > ty->max)
		ty->max = t->max;
	return 0;
}

/* count tasks running in one ms of a process, into the put's concurrency blocks */
static int conc_add_ms(struct sq *s, int64_t proc, int64_t ms, uint32_t count, char *why,
		       size_t whysz)
{
	int64_t sec = floordiv(ms, CONC_MS), a = ms - sec * CONC_MS;
	struct kent *e;
	bool isnew;
	int rc;

	if (s->nblk == FLUSH_BLOCKS && !kmap_find(&s->pblocks, (uint64_t)proc, (uint64_t)sec, 0) &&
	    (rc = flush_blocks(s, why, whysz)))
		return rc;
	if (!s->blk && !(s->blk = malloc(FLUSH_BLOCKS * sizeof(*s->blk))))
		return fail(why, whysz, -ENOMEM, "out of memory");
	e = kmap_get(&s->pblocks, (uint64_t)proc, (uint64_t)sec, 0, &isnew);
	if (!e)
		return fail(why, whysz, -ENOMEM, "out of memory");
	if (isnew) {
		memset(s->blk[s->nblk], 0, sizeof(s->blk[0]));
		e->v[0] = (int64_t)s->nblk++;
	}
	s->blk[e->v[0]][a] += (int32_t)(count > INT32_MAX ? INT32_MAX : count);
	s->blk[e->v[0]][a + 1] -= (int32_t)(count > INT32_MAX ? INT32_MAX : count);
	return 0;
}

static int sampling_add(struct sq *s, const struct graph_sampling *sm, char *why, size_t whysz)
{
	sqlite3_stmt *t = NULL;
	int rc;

	if ((rc = exec(s, sampling_sql, why, whysz, "creating the sampling table")))
		return rc;
	rc = sqlite3_prepare_v2(s->db,
				"INSERT INTO sampling(id, rate, seen, kept_head, kept_outlier)"
				" VALUES (1, ?1, ?2, ?3, ?4) ON CONFLICT(id) DO UPDATE SET"
				" rate = excluded.rate, seen = seen + excluded.seen,"
				" kept_head = kept_head + excluded.kept_head,"
				" kept_outlier = kept_outlier + excluded.kept_outlier",
				-1, &t, NULL);
	if (rc != SQLITE_OK)
		return sq_fail(s, rc, why, whysz, "writing the sampling counts");
	sqlite3_bind_double(t, 1, sm->rate);
	sqlite3_bind_int64(t, 2, (int64_t)sm->seen);
	sqlite3_bind_int64(t, 3, (int64_t)sm->kept_head);
	sqlite3_bind_int64(t, 4, (int64_t)sm->kept_outlier);
	rc = sqlite3_step(t);
	sqlite3_finalize(t);
	return rc == SQLITE_DONE ? 0 : sq_fail(s, rc, why, whysz, "writing the sampling counts");
}

static int put_aggs(struct sq *s, const struct graph_aggs *a, char *why, size_t whysz)
{
	int64_t *tid = calloc(a->ntypes + 1, sizeof(*tid));
	int rc = 0;

	if (!tid)
		return fail(why, whysz, -ENOMEM, "out of memory");
	for (size_t i = 0; i < a->ntypes && !rc; i++)
		if (!(rc = type_id(s, a->types[i].service, a->types[i].name, true, &tid[i], why,
				   whysz)))
			rc = type_add_agg(s, tid[i], &a->types[i], why, whysz);
	for (size_t i = 0; i < a->nevents && !rc; i++) {
		const struct graph_agg_event *ev = &a->events[i];
		int64_t name;
		struct kent *e;

		if (ev->type >= a->ntypes) {
			rc = fail(why, whysz, -EINVAL, "graph store: event count of no type");
			break;
		}
		if ((rc = str_id(s, ev->name, true, &name, why, whysz)))
			break;
		e = kmap_get(&s->pevagg, (uint64_t)tid[ev->type], (uint64_t)name, 0, NULL);
		if (!e) {
			rc = fail(why, whysz, -ENOMEM, "out of memory");
			break;
		}
		e->v[0] += (int64_t)ev->ntasks;
	}
	for (size_t i = 0; i < a->nedges && !rc; i++) {
		const struct graph_agg_edge *ed = &a->edges[i];
		struct kent *e;

		if (ed->ptype >= a->ntypes || ed->ctype >= a->ntypes ||
		    (unsigned)ed->kind >= GRAPH_EDGE_COUNT) {
			rc = fail(why, whysz, -EINVAL, "graph store: edge count of no type");
			break;
		}
		e = kmap_get(&s->pedgeagg, (uint64_t)tid[ed->ptype], (uint64_t)tid[ed->ctype],
			     (uint64_t)ed->kind, NULL);
		if (!e) {
			rc = fail(why, whysz, -ENOMEM, "out of memory");
			break;
		}
		e->v[0] += (int64_t)ed->count;
	}
	for (size_t i = 0; i < a->nconc && !rc; i++) {
		const struct graph_agg_conc *c = &a->conc[i];
		int64_t host, proc;

		if (c->pid < 0)
			continue;
		if (!(rc = str_id(s, c->host, true, &host, why, whysz)) &&
		    !(rc = proc_id(s, host, c->pid, true, &proc, why, whysz)))
			rc = conc_add_ms(s, proc, c->ms, c->count, why, whysz);
	}
	if (!rc && a->sampling.seen)
		rc = sampling_add(s, &a->sampling, why, whysz);
	free(tid);
	return rc;
}

static int sq_put_aggs(struct graph_store *base, const struct graph_aggs *a, char *why,
		       size_t whysz)
{
	struct sq *s = (struct sq *)base;
	int rc;

	put_reset(s);
	if ((rc = begin(s, why, whysz)))
		return rc;
	if ((rc = put_aggs(s, a, why, whysz)) || (rc = put_flush(s, why, whysz)) ||
	    (rc = step_done(s, stmt(s, ST_COMMIT), why, whysz, "committing"))) {
		rollback(s);
		put_reset(s);
		return rc;
	}
	put_reset(s);
	return 0;
}

static int sq_sampling(struct graph_store *base, struct graph_sampling *out, char *why,
		       size_t whysz)
{
	struct sq *s = (struct sq *)base;
	sqlite3_stmt *t = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = sqlite3_prepare_v2(
		s->db, "SELECT rate, seen, kept_head, kept_outlier FROM sampling WHERE id = 1", -1,
		&t, NULL);
	if (rc != SQLITE_OK) {
		sqlite3_finalize(t);
		return 0; /* no such table: nothing was sampled */
	}
	rc = sqlite3_step(t);
	if (rc == SQLITE_ROW) {
		out->rate = sqlite3_column_double(t, 0);
		out->seen = (uint64_t)sqlite3_column_int64(t, 1);
		out->kept_head = (uint64_t)sqlite3_column_int64(t, 2);
		out->kept_outlier = (uint64_t)sqlite3_column_int64(t, 3);
	}
	sqlite3_finalize(t);
	return rc == SQLITE_ROW || rc == SQLITE_DONE ?
		       0 :
		       fail(why, whysz, -EIO, "graph store: reading the sampling counts");
}

/* ---------------------------------------------------------------- load */

/* The row id of the trace a hex id or a unique prefix of the 32-digit form names. */
static int find_trace(struct sq *s, const char *hex, int64_t *tr, int64_t *thi, int64_t *tlo,
		      char *why, size_t whysz)
{
	size_t len = strlen(hex), i;
	struct graph_id128 id, lo, hi;
	char buf[33];
	sqlite3_stmt *t;
	int rc, n = 0;

	for (i = 0; i < len; i++)
		if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f') ||
		      (hex[i] >= 'A' && hex[i] <= 'F')))
			break;
	if (!len || len > 32 || i < len)
		return fail(why, whysz, -EINVAL,
			    "graph store: '%.40s' is not a trace id (1 to 32 "
			    "hex digits)",
			    hex);
	if (graph_id128_parse_hex(hex, len, &id) == 0) {
		t = stmt(s, ST_FIND_EXACT);
		sqlite3_bind_int64(t, 1, bias(id.hi));
		sqlite3_bind_int64(t, 2, bias(id.lo));
		rc = sqlite3_step(t);
		if (rc == SQLITE_ROW) {
			*tr = sqlite3_column_int64(t, 0);
			*thi = sqlite3_column_int64(t, 1);
			*tlo = sqlite3_column_int64(t, 2);
		}
		sqlite3_reset(t);
		if (rc == SQLITE_ROW)
			return 0;
		if (rc != SQLITE_DONE)
			return sq_fail(s, rc, why, whysz, "finding a trace");
	}
	/* a prefix of the 32-digit form: the range of ids it covers */
	memcpy(buf, hex, len);
	memset(buf + len, '0', 32 - len);
	buf[32] = 0;
	if (graph_id128_parse_hex(buf, 32, &lo))
		return fail(why, whysz, -EINVAL, "graph store: '%s' is not a trace id", hex);
	memset(buf + len, 'f', 32 - len);
	if (graph_id128_parse_hex(buf, 32, &hi))
		return fail(why, whysz, -EINVAL, "graph store: '%s' is not a trace id", hex);
	if (len <= 16) {
		t = stmt(s, ST_FIND_HI);
		sqlite3_bind_int64(t, 1, bias(lo.hi));
		sqlite3_bind_int64(t, 2, bias(hi.hi));
	} else {
		t = stmt(s, ST_FIND_LO);
		sqlite3_bind_int64(t, 1, bias(lo.hi));
		sqlite3_bind_int64(t, 2, bias(lo.lo));
		sqlite3_bind_int64(t, 3, bias(hi.lo));
	}
	while ((rc = sqlite3_step(t)) == SQLITE_ROW) {
		*tr = sqlite3_column_int64(t, 0);
		*thi = sqlite3_column_int64(t, 1);
		*tlo = sqlite3_column_int64(t, 2);
		n++;
	}
	sqlite3_reset(t);
	if (rc != SQLITE_DONE)
		return sq_fail(s, rc, why, whysz, "finding a trace");
	if (n == 0)
		return fail(why, whysz, -ENOENT, "graph store: no trace %s", hex);
	if (n > 1)
		return fail(why, whysz, -EINVAL,
			    "graph store: %s is the prefix of several traces: give more digits",
			    hex);
	return 0;
}

static const char *col_text(struct graph *g, sqlite3_stmt *t, int col)
{
	const unsigned char *p = sqlite3_column_text(t, col);

	return graph_strndup(g, p ? (const char *)p : "",
			     p ? (size_t)sqlite3_column_bytes(t, col) : 0);
}

/* Turning a chunk's ids back into strings, each looked up once per load. */
struct loadctx {
	struct sq *s;
	struct graph *g;
	struct graph_id128 id;
	struct kmap types, strs; /* id -> index into names[] */
	const char **names;
	size_t nnames, capnames;
	int err;
};

static int name_add(struct loadctx *l, const char *p)
{
	if (!p)
		return -ENOMEM;
	if (l->nnames == l->capnames) {
		size_t ncap = l->capnames ? l->capnames * 2 : 32;
		const char **n = realloc(l->names, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		l->names = n;
		l->capnames = ncap;
	}
	l->names[l->nnames++] = p;
	return 0;
}

static const char *load_str(struct loadctx *l, int64_t id)
{
	bool isnew;
	struct kent *e = kmap_get(&l->strs, (uint64_t)id, 0, 0, &isnew);
	sqlite3_stmt *t;

	if (!e) {
		l->err = -ENOMEM;
		return NULL;
	}
	if (!isnew)
		return l->names[e->v[0]];
	t = stmt(l->s, ST_STR_TEXT);
	sqlite3_bind_int64(t, 1, id);
	if (sqlite3_step(t) != SQLITE_ROW) {
		sqlite3_reset(t);
		l->err = -EIO; /* a chunk names a string that is not there */
		return NULL;
	}
	e->v[0] = (int64_t)l->nnames;
	l->err = name_add(l, col_text(l->g, t, 0));
	sqlite3_reset(t);
	return l->err ? NULL : l->names[e->v[0]];
}

static int load_type(struct loadctx *l, int64_t id, const char **svc, const char **name)
{
	bool isnew;
	struct kent *e = kmap_get(&l->types, (uint64_t)id, 0, 0, &isnew);
	sqlite3_stmt *t;
	int rc;

	if (!e)
		return -ENOMEM;
	if (isnew) {
		t = stmt(l->s, ST_TYPE_NAMES);
		sqlite3_bind_int64(t, 1, id);
		if (sqlite3_step(t) != SQLITE_ROW) {
			sqlite3_reset(t);
			return -EIO;
		}
		e->v[0] = (int64_t)l->nnames;
		rc = name_add(l, col_text(l->g, t, 0));
		if (!rc)
			rc = name_add(l, col_text(l->g, t, 1));
		sqlite3_reset(t);
		if (rc)
			return rc;
	}
	*svc = l->names[e->v[0]];
	*name = l->names[e->v[0] + 1];
	return 0;
}

static const char *load_attrs(struct loadctx *l, const char *p, size_t n)
{
	return n ? graph_strndup(l->g, p, n) : graph_strdup(l->g, "{}");
}

static int load_task(void *arg, const struct ctask *c)
{
	struct loadctx *l = arg;
	struct graph_task k = { .trace = l->id };
	int rc;

	if ((rc = load_type(l, c->type, &k.service, &k.name)))
		return rc;
	if (!(k.host = load_str(l, c->host)))
		return l->err;
	k.id = c->id;
	k.parent = c->parent;
	k.pid = c->pid;
	k.tid = c->tid;
	k.start = c->start;
	k.end = (int64_t)((uint64_t)c->start + c->dur);
	if (k.end < k.start)
		k.end = k.start; /* a damaged chunk: never end before start */
	k.skew = c->skew;
	k.status =
		c->status <= GRAPH_STATUS_ERROR ? (enum graph_status)c->status : GRAPH_STATUS_UNSET;
	k.source = c->source < GRAPH_SRC_COUNT ? (enum graph_source)c->source : GRAPH_SRC_UNKNOWN;
	k.attrs = load_attrs(l, c->attrs, c->alen);
	return k.attrs && graph_add_task(l->g, &k) ? 0 : -ENOMEM;
}

static int load_event(void *arg, const struct cevent *c)
{
	struct loadctx *l = arg;
	struct graph_event e = { .trace = l->id };

	if (!(e.name = load_str(l, c->name)))
		return l->err;
	e.task = c->task;
	e.id = c->id;
	e.time = c->time;
	e.source = c->source < GRAPH_SRC_COUNT ? (enum graph_source)c->source : GRAPH_SRC_UNKNOWN;
	e.attrs = load_attrs(l, c->attrs, c->alen);
	return e.attrs && graph_add_event(l->g, &e) ? 0 : -ENOMEM;
}

static int load_edge(void *arg, const struct cedge *c)
{
	struct loadctx *l = arg;
	struct graph_edge d = { .trace = l->id };

	if (c->kind >= GRAPH_EDGE_COUNT)
		return -EIO;
	d.kind = (enum graph_edge_kind)c->kind;
	d.from_task = c->from_task;
	d.from_event = c->from_event;
	d.to_task = c->to_task;
	d.to_event = c->to_event;
	d.source = c->source < GRAPH_SRC_COUNT ? (enum graph_source)c->source : GRAPH_SRC_UNKNOWN;
	return graph_add_edge(l->g, &d) ? 0 : -ENOMEM;
}

/*
 * graph_sort() of graph.c passes a NULL array to qsort() when a kind has no element (undefined
 * behaviour that UBSan reports): lend it an empty array until graph.c checks the count.
 */
static void sort_loaded(struct graph *g)
{
	struct graph_task t0;
	struct graph_event e0;
	struct graph_edge d0;
	bool nt = !g->tasks, ne = !g->events, nd = !g->edges;

	if (nt)
		g->tasks = &t0;
	if (ne)
		g->events = &e0;
	if (nd)
		g->edges = &d0;
	graph_sort(g);
	if (nt)
		g->tasks = NULL;
	if (ne)
		g->events = NULL;
	if (nd)
		g->edges = NULL;
}

static int sq_load(struct graph_store *base, const char *hex, struct graph *g, char *why,
		   size_t whysz)
{
	struct sq *s = (struct sq *)base;
	size_t nt = g->ntasks, ne = g->nevents, nd = g->nedges;
	struct loadctx l = { .s = s, .g = g };
	const struct cvisit v = {
		.task = load_task, .event = load_event, .edge = load_edge, .arg = &l
	};
	int64_t tr = 0, hi = 0, lo = 0;
	bool txn = false;
	sqlite3_stmt *t;
	int rc;

	/* one read transaction: the trace row and its chunks from one snapshot */
	if (sqlite3_get_autocommit(s->db)) {
		if ((rc = exec(s, "BEGIN", why, whysz, "reading")))
			return rc;
		txn = true;
	}
	if ((rc = find_trace(s, hex, &tr, &hi, &lo, why, whysz)))
		goto out;
	if (tr <= 0 || tr > (INT64_MAX >> 16)) {
		rc = fail(why, whysz, -EIO, "graph store: trace %s: row id out of range", hex);
		goto out;
	}
	l.id.hi = unbias(hi);
	l.id.lo = unbias(lo);
	t = stmt(s, ST_CHUNKS_GET);
	sqlite3_bind_int64(t, 1, tr << 16);
	sqlite3_bind_int64(t, 2, tr << 16 | CHUNK_MAX_SEQ);
	while ((rc = sqlite3_step(t)) == SQLITE_ROW) {
		int err = chunk_decode(sqlite3_column_blob(t, 0),
				       (size_t)sqlite3_column_bytes(t, 0), &v);

		if (err) {
			sqlite3_reset(t);
			rc = err == -ENOMEM ?
				     fail(why, whysz, -ENOMEM, "out of memory loading %s", hex) :
				     fail(why, whysz, -EIO, "graph store: trace %s: corrupt chunk",
					  hex);
			goto out;
		}
	}
	sqlite3_reset(t);
	rc = rc == SQLITE_DONE ? 0 : sq_fail(s, rc, why, whysz, "loading a trace");
out:
	if (txn)
		exec(s, "COMMIT", NULL, 0, "reading");
	kmap_free(&l.types);
	kmap_free(&l.strs);
	free(l.names);
	if (rc) {
		g->ntasks = nt;
		g->nevents = ne;
		g->nedges = nd;
		return rc;
	}
	sort_loaded(g);
	return 0;
}

/* ---------------------------------------------------------------- context */

static bool sketch_prefix(struct ctx_type *y, const void *blob, size_t len)
{
	const uint8_t *p = blob;
	size_t off = 0, cap = len / 2 < WEFT_SKETCH_NBUCKETS ? len / 2 : WEFT_SKETCH_NBUCKETS;
	uint64_t idx = 0, d, c, sum = 0;
	bool first = true;

	y->idx = malloc((cap + 1) * sizeof(*y->idx));
	y->cum = malloc((cap + 1) * sizeof(*y->cum));
	if (!y->idx || !y->cum)
		return false;
	while (off < len) {
		if (!rd_varint(p, len, &off, &d) || !rd_varint(p, len, &off, &c) || !c ||
		    d >= WEFT_SKETCH_NBUCKETS || y->n >= cap)
			return false;
		idx = first ? d : idx + d + 1;
		first = false;
		if (idx >= WEFT_SKETCH_NBUCKETS)
			return false;
		sum += c;
		y->idx[y->n] = (uint32_t)idx;
		y->cum[y->n++] = sum;
	}
	return true;
}

/* Tasks of the sketch in buckets <= bin (every task of the task's own bucket counts). */
static uint64_t sketch_at_or_below(const struct ctx_type *y, uint32_t bin)
{
	size_t lo = 0, hi = y->n; /* the first bucket above bin is in [lo, hi] */

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (y->idx[mid] <= bin)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? y->cum[lo - 1] : 0;
}

/* The decoded sketch of a type, from the cache if its count is unchanged. */
static int ctx_type_get(struct sq *s, int64_t type, struct ctx_type **out, char *why, size_t whysz)
{
	struct kent *e = kmap_find(&s->ctcache, (uint64_t)type, 0, 0);
	sqlite3_stmt *t = stmt(s, ST_TYPE_COUNT);
	struct ctx_type *y;
	int64_t n = 0;
	int rc;
	bool ok;

	sqlite3_bind_int64(t, 1, type);
	if ((rc = step_int(s, t, &n, why, whysz, "reading a type")) < 0)
		return rc;
	if (e && s->ct[e->v[0]].count == (uint64_t)(n > 0 ? n : 0)) {
		*out = &s->ct[e->v[0]];
		return 0;
	}
	if (!e) { /* room was made at the start of the call */
		e = kmap_get(&s->ctcache, (uint64_t)type, 0, 0, NULL);
		if (!e)
			return fail(why, whysz, -ENOMEM, "out of memory");
		e->v[0] = (int64_t)s->nct++;
		memset(&s->ct[e->v[0]], 0, sizeof(s->ct[0]));
	}
	y = &s->ct[e->v[0]];
	free(y->idx);
	free(y->cum);
	memset(y, 0, sizeof(*y));
	t = stmt(s, ST_TYPE_READ);
	sqlite3_bind_int64(t, 1, type);
	if ((rc = sqlite3_step(t)) != SQLITE_ROW) {
		sqlite3_reset(t);
		return rc == SQLITE_DONE ? fail(why, whysz, -EIO,
						"graph store: type %" PRId64 " vanished", type) :
					   sq_fail(s, rc, why, whysz, "reading a type");
	}
	n = sqlite3_column_int64(t, 0);
	ok = sketch_prefix(y, sqlite3_column_blob(t, 3), (size_t)sqlite3_column_bytes(t, 3));
	sqlite3_reset(t);
	if (!ok || n < 0 || (y->n && y->cum[y->n - 1] != (uint64_t)n) || (!y->n && n)) {
		rc = y->idx && y->cum ? -EIO : -ENOMEM;
		y->count = UINT64_MAX; /* never valid: read again next time */
		return fail(why, whysz, rc, "graph store: type %" PRId64 ": corrupt sketch", type);
	}
	y->count = (uint64_t)n;
	*out = y;
	return 0;
}

static int sq_context(struct graph_store *base, const struct graph *g, struct graph_context *c,
		      char *why, size_t whysz)
{
	struct sq *s = (struct sq *)base;
	struct kmap tasks = { 0 }, types = { 0 }, blocks = { 0 };
	uint32_t(*blk)[CONC_MS] = NULL;
	size_t nblk = 0, i;
	int64_t *ttype = NULL;
	int rc = 0;

	memset(c, 0, sizeof(*c));
	c->tasks = calloc(g->ntasks + 1, sizeof(*c->tasks));
	c->events = calloc(g->nevents + 1, sizeof(*c->events));
	c->edges = calloc(g->nedges + 1, sizeof(*c->edges));
	ttype = calloc(g->ntasks + 1, sizeof(*ttype));
	if (!c->tasks || !c->events || !c->edges || !ttype) {
		rc = fail(why, whysz, -ENOMEM, "out of memory");
		goto out;
	}
	c->ntasks = g->ntasks;
	/* room in the sketch cache for every type of this trace, so that entries stay put */
	if (s->nct + g->ntasks > CT_MAX) {
		for (i = 0; i < s->nct; i++) {
			free(s->ct[i].idx);
			free(s->ct[i].cum);
		}
		s->nct = 0;
		kmap_free(&s->ctcache);
	}
	if (s->nct + g->ntasks > s->capct) {
		size_t ncap = s->nct + g->ntasks + 64;
		struct ctx_type *n = realloc(s->ct, ncap * sizeof(*n));

		if (!n) {
			rc = fail(why, whysz, -ENOMEM, "out of memory");
			goto out;
		}
		s->ct = n;
		s->capct = ncap;
	}
	c->nevents = g->nevents;
	c->nedges = g->nedges;
	if (sqlite3_get_autocommit(s->db) && (rc = exec(s, "BEGIN", why, whysz, "reading")))
		goto out;
	for (i = 0; i < g->ntasks; i++) {
		const struct graph_task *k = &g->tasks[i];
		struct graph_task_ctx *x = &c->tasks[i];
		int64_t lat = task_lat(k), type, host, proc;
		struct kent *e;
		struct ctx_type *y = NULL;
		uint64_t cum;
		bool isnew;

		e = kmap_get(&tasks, k->trace.hi ^ k->trace.lo * 0x9e3779b97f4a7c15ull, k->trace.lo,
			     k->id, NULL);
		if (!e) {
			rc = fail(why, whysz, -ENOMEM, "out of memory");
			goto out_end;
		}
		e->v[0] = (int64_t)i + 1;
		x->hist_bin = weft_sketch_index(lat);
		if ((rc = type_id(s, k->service ? k->service : "", k->name ? k->name : "", false,
				  &type, why, whysz)))
			goto out_end;
		ttype[i] = type;
		if (type) {
			e = kmap_get(&types, (uint64_t)type, 0, 0, &isnew);
			if (!e) {
				rc = fail(why, whysz, -ENOMEM, "out of memory");
				goto out_end;
			}
			if (isnew) {
				if ((rc = ctx_type_get(s, type, &y, why, whysz)))
					goto out_end;
				e->v[0] = y - s->ct;
			}
			y = &s->ct[e->v[0]];
			x->type_count = y->count;
			if (y->count) {
				cum = sketch_at_or_below(y, x->hist_bin);
				x->percentile = 100.0 * (double)cum / (double)y->count;
				if (x->percentile > 100.0)
					x->percentile = 100.0;
			}
		}
		if (k->pid < 0)
			continue;
		if ((rc = str_id(s, k->host ? k->host : "", false, &host, why, whysz)))
			goto out_end;
		if (!host)
			continue;
		if ((rc = proc_id(s, host, k->pid, false, &proc, why, whysz)))
			goto out_end;
		if (!proc)
			continue;
		{
			int64_t first, last, ms;
			uint32_t mx = 0;

			task_ms(k->start, k->end > k->start ? k->end : k->start, &first, &last);
			for (ms = first; ms <= last;) {
				int64_t sec = floordiv(ms, CONC_MS), off = ms - sec * CONC_MS;
				uint32_t *b;

				e = kmap_get(&blocks, (uint64_t)proc, (uint64_t)sec, 0, &isnew);
				if (!e) {
					rc = fail(why, whysz, -ENOMEM, "out of memory");
					goto out_end;
				}
				if (isnew) {
					bool found;

					if (!(nblk & (nblk - 1)) || !nblk) {
						void *nb = realloc(blk, (nblk ? nblk * 2 : 4) *
										sizeof(*blk));

						if (!nb) {
							rc = fail(why, whysz, -ENOMEM,
								  "out of memory");
							goto out_end;
						}
						blk = nb;
					}
					if ((rc = conc_read(s, proc, sec, blk[nblk], &found, why,
							    whysz)))
						goto out_end;
					e->v[0] = (int64_t)nblk++;
				}
				b = blk[e->v[0]];
				for (; off < CONC_MS && ms <= last; off++, ms++)
					if (b[off] > mx)
						mx = b[off];
			}
			x->concurrency_max = mx ? mx - 1 : 0;
		}
	}
	for (i = 0; i < g->nevents; i++) {
		const struct graph_event *ev = &g->events[i];
		struct kent *e =
			kmap_find(&tasks, ev->trace.hi ^ ev->trace.lo * 0x9e3779b97f4a7c15ull,
				  ev->trace.lo, ev->task);
		int64_t type, name, n;
		sqlite3_stmt *t;
		uint64_t count;

		if (!e || !(type = ttype[e->v[0] - 1]))
			continue;
		count = c->tasks[e->v[0] - 1].type_count;
		if ((rc = str_id(s, ev->name ? ev->name : "", false, &name, why, whysz)))
			goto out_end;
		n = 0;
		if (name) {
			t = stmt(s, ST_EVAGG_GET);
			sqlite3_bind_int64(t, 1, type);
			sqlite3_bind_int64(t, 2, name);
			if ((rc = step_int(s, t, &n, why, whysz, "reading event counts")) < 0)
				goto out_end;
			rc = 0;
		}
		c->events[i].share = count && n > 0 ? (double)n / (double)count : 0.0;
		c->events[i].rare = count && c->events[i].share < GRAPH_RARE_SHARE;
	}
	for (i = 0; i < g->nedges; i++) {
		const struct graph_edge *ed = &g->edges[i];
		uint64_t th = ed->trace.hi ^ ed->trace.lo * 0x9e3779b97f4a7c15ull;
		struct kent *f = kmap_find(&tasks, th, ed->trace.lo, ed->from_task);
		struct kent *to = kmap_find(&tasks, th, ed->trace.lo, ed->to_task);
		int64_t pt, ct, n = 0;
		uint64_t count;
		sqlite3_stmt *t;

		if (!f || !to || !(pt = ttype[f->v[0] - 1]) || !(ct = ttype[to->v[0] - 1]))
			continue;
		count = c->tasks[f->v[0] - 1].type_count;
		t = stmt(s, ST_EDGEAGG_GET);
		sqlite3_bind_int64(t, 1, pt);
		sqlite3_bind_int64(t, 2, ct);
		sqlite3_bind_int(t, 3, (int)ed->kind);
		if ((rc = step_int(s, t, &n, why, whysz, "reading edge counts")) < 0)
			goto out_end;
		rc = 0;
		c->edges[i].share = count && n > 0 ? (double)n / (double)count : 0.0;
		c->edges[i].rare = count && c->edges[i].share < GRAPH_RARE_SHARE;
	}
out_end:
	exec(s, "COMMIT", NULL, 0, "reading");
out:
	free(ttype);
	free(blk);
	kmap_free(&tasks);
	kmap_free(&types);
	kmap_free(&blocks);
	if (rc)
		graph_context_free(c);
	return rc;
}

/* ---------------------------------------------------------------- sketch, concurrency */

static int read_sketch(struct sq *s, int64_t type, uint64_t *counts, int64_t *n, int64_t *mn,
		       int64_t *mx, char *why, size_t whysz)
{
	sqlite3_stmt *t = stmt(s, ST_TYPE_READ);
	int rc;
	bool ok;

	sqlite3_bind_int64(t, 1, type);
	rc = sqlite3_step(t);
	if (rc != SQLITE_ROW) {
		sqlite3_reset(t);
		return rc == SQLITE_DONE ? fail(why, whysz, -ENOENT, "graph store: no such type") :
					   sq_fail(s, rc, why, whysz, "reading a type");
	}
	memset(counts, 0, WEFT_SKETCH_NBUCKETS * sizeof(*counts));
	*n = sqlite3_column_int64(t, 0);
	*mn = sqlite3_column_int64(t, 1);
	*mx = sqlite3_column_int64(t, 2);
	ok = sketch_add_blob(counts, sqlite3_column_blob(t, 3), (size_t)sqlite3_column_bytes(t, 3));
	sqlite3_reset(t);
	if (!ok || *n < 0)
		return fail(why, whysz, -EIO, "graph store: type %" PRId64 ": corrupt sketch",
			    type);
	return 0;
}

static int sq_type_sketch(struct graph_store *base, const char *service, const char *name,
			  uint64_t *counts, char *why, size_t whysz)
{
	struct sq *s = (struct sq *)base;
	int64_t type, n, mn, mx;
	int rc;

	if ((rc = type_id(s, service, name, false, &type, why, whysz)))
		return rc;
	if (!type)
		return fail(why, whysz, -ENOENT, "graph store: no task type %s/%s", service, name);
	return read_sketch(s, type, counts, &n, &mn, &mx, why, whysz);
}

static int sq_concurrency(struct graph_store *base, const char *host, int64_t pid, int64_t from,
			  int64_t to, uint32_t *counts, size_t n, char *why, size_t whysz)
{
	struct sq *s = (struct sq *)base;
	int64_t first = floordiv(from, 1000000), end = ceildiv(to, 1000000), hid, proc = 0, ms;
	size_t i = 0;
	int rc;

	if (end < first)
		return fail(why, whysz, -EINVAL, "graph store: concurrency: to before from");
	if ((uint64_t)(end - first) < n)
		n = (size_t)(end - first);
	memset(counts, 0, n * sizeof(*counts));
	if ((rc = str_id(s, host, false, &hid, why, whysz)))
		return rc;
	if (hid && (rc = proc_id(s, hid, pid, false, &proc, why, whysz)))
		return rc;
	if (!proc)
		return (int)(n > INT_MAX ? INT_MAX : n);
	for (ms = first; i < n;) {
		int64_t sec = floordiv(ms, CONC_MS), off = ms - sec * CONC_MS;
		bool found;

		if ((rc = conc_read(s, proc, sec, s->conc_scratch, &found, why, whysz)))
			return rc;
		for (; off < CONC_MS && i < n; off++, ms++)
			counts[i++] = s->conc_scratch[off];
	}
	return (int)(n > INT_MAX ? INT_MAX : n);
}

/* ---------------------------------------------------------------- list and stats */

/* weft_chunk_match(data, what): 1 if a task of the chunk has a type of the list's filter
 * (what 1) or its host (what 2).  Registered as SQLITE_DIRECTONLY: a view or trigger in a
 * crafted file cannot call it. */
static int match_task(void *arg, const struct ctask *t)
{
	const int64_t *w = arg; /* [0]: what, [1]: struct sq * */
	const struct sq *s = (const struct sq *)(intptr_t)w[1];

	if (w[0] == 1)
		return kmap_find(&s->lf_types, (uint64_t)t->type, 0, 0) ? 1 : 0;
	return t->host == s->lf_host ? 1 : 0;
}

static void chunk_match(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	int64_t w[2] = { 0, (int64_t)(intptr_t)sqlite3_user_data(ctx) };
	const struct cvisit v = { .task = match_task, .arg = w };
	int rc;

	(void)argc;
	w[0] = sqlite3_value_int64(argv[1]);
	rc = chunk_decode(sqlite3_value_blob(argv[0]), (size_t)sqlite3_value_bytes(argv[0]), &v);
	if (rc < 0) {
		sqlite3_result_error(ctx, "corrupt chunk", -1);
		return;
	}
	sqlite3_result_int(ctx, rc == 1);
}

static ssize_t sq_list(struct graph_store *base, const struct graph_filter *fp,
		       struct graph_trace_row **rows, char *why, size_t whysz)
{
	struct sq *s = (struct sq *)base;
	struct graph_filter f = fp ? *fp : (struct graph_filter){ 0 };
	size_t limit = f.limit ? f.limit : 20, n = 0;
	char sql[1536];
	int len, rc, arg = 1;
	int64_t hostid = 0;
	sqlite3_stmt *t;
	const char *order;

	*rows = NULL;
	if (limit > 1000000)
		limit = 1000000;
	if (f.host) {
		if ((rc = str_id(s, f.host, false, &hostid, why, whysz)))
			return rc;
		if (!hostid)
			return 0;
	}
	s->lf_host = hostid;
	kmap_free(&s->lf_types);
	if (f.service || f.name) { /* the ids of the types that match */
		rc = sqlite3_prepare_v2(
			s->db,
			"SELECT id FROM types WHERE (?1 IS NULL OR service = ?1) AND "
			"(?2 IS NULL OR name = ?2)",
			-1, &t, NULL);
		if (rc != SQLITE_OK)
			return sq_fail(s, rc, why, whysz, "listing traces");
		if (f.service)
			sqlite3_bind_text(t, 1, f.service, -1, SQLITE_STATIC);
		if (f.name)
			sqlite3_bind_text(t, 2, f.name, -1, SQLITE_STATIC);
		while ((rc = sqlite3_step(t)) == SQLITE_ROW)
			if (!kmap_get(&s->lf_types, (uint64_t)sqlite3_column_int64(t, 0), 0, 0,
				      NULL)) {
				rc = SQLITE_NOMEM;
				break;
			}
		sqlite3_finalize(t);
		if (rc != SQLITE_DONE)
			return fail(why, whysz, sq_errno(rc), "graph store: listing traces: %s",
				    sqlite3_errstr(rc));
		if (!s->lf_types.n)
			return 0;
	}
	switch (f.sort) {
	case GRAPH_SORT_START_ASC:
		order = "t.start_ns ASC, t.tr ASC";
		break;
	case GRAPH_SORT_DURATION_DESC:
		order = "t.end_ns - t.start_ns DESC, t.tr DESC";
		break;
	case GRAPH_SORT_DURATION_ASC:
		order = "t.end_ns - t.start_ns ASC, t.tr ASC";
		break;
	default:
		order = "t.start_ns DESC, t.tr DESC";
		break;
	}
	len = snprintf(sql, sizeof(sql),
		       "SELECT t.hi, t.lo, t.start_ns, t.end_ns, t.ntasks, t.nhosts, ty.service, "
		       "ty.name, h.s, coalesce(m.flags, 0) FROM traces AS t LEFT JOIN types AS ty "
		       "ON ty.id = t.root_type LEFT JOIN strs AS h ON h.id = t.root_host "
		       "LEFT JOIN marks AS m ON m.tr = t.tr WHERE 1%s%s%s%s%s%s%s%s%s "
		       "ORDER BY %s LIMIT %zu",
		       f.from ? " AND t.start_ns >= ?1" : "", f.to ? " AND t.start_ns < ?2" : "",
		       f.min_dur ? " AND t.end_ns - t.start_ns >= ?3" : "",
		       f.max_dur ? " AND t.end_ns - t.start_ns <= ?4" : "",
		       f.service || f.name ? " AND EXISTS (SELECT 1 FROM chunks AS c WHERE c.id "
					     "BETWEEN t.tr * 65536 AND t.tr * 65536 + 65535 AND "
					     "weft_chunk_match(c.data, 1))" :
					     "",
		       "", "", "",
		       f.host ? " AND EXISTS (SELECT 1 FROM chunks AS c WHERE c.id BETWEEN "
				"t.tr * 65536 AND t.tr * 65536 + 65535 AND "
				"weft_chunk_match(c.data, 2))" :
				"",
		       order, limit);
	if (len < 0 || (size_t)len >= sizeof(sql))
		return fail(why, whysz, -EINVAL, "graph store: list: query too long");
	rc = sqlite3_prepare_v2(s->db, sql, -1, &t, NULL);
	if (rc != SQLITE_OK)
		return sq_fail(s, rc, why, whysz, "listing traces");
	(void)arg;
	if (f.from)
		sqlite3_bind_int64(t, 1, f.from);
	if (f.to)
		sqlite3_bind_int64(t, 2, f.to);
	if (f.min_dur)
		sqlite3_bind_int64(t, 3, f.min_dur);
	if (f.max_dur)
		sqlite3_bind_int64(t, 4, f.max_dur);
	*rows = calloc(limit < 64 ? limit : 64, sizeof(**rows));
	if (!*rows) {
		sqlite3_finalize(t);
		return fail(why, whysz, -ENOMEM, "out of memory");
	}
	while ((rc = sqlite3_step(t)) == SQLITE_ROW) {
		struct graph_trace_row *r;

		if (n >= 64 && !(n & (n - 1))) {
			struct graph_trace_row *nr = realloc(*rows, 2 * n * sizeof(*nr));

			if (!nr) {
				rc = SQLITE_NOMEM;
				break;
			}
			*rows = nr;
		}
		r = &(*rows)[n++];
		memset(r, 0, sizeof(*r));
		r->trace.hi = unbias(sqlite3_column_int64(t, 0));
		r->trace.lo = unbias(sqlite3_column_int64(t, 1));
		r->start = sqlite3_column_int64(t, 2);
		r->end = sqlite3_column_int64(t, 3);
		r->ntasks = (uint32_t)sqlite3_column_int64(t, 4);
		r->nhosts = (uint32_t)sqlite3_column_int64(t, 5);
		cpy(r->service, sizeof(r->service), sqlite3_column_text(t, 6));
		cpy(r->name, sizeof(r->name), sqlite3_column_text(t, 7));
		cpy(r->host, sizeof(r->host), sqlite3_column_text(t, 8));
		r->incomplete = (uint32_t)sqlite3_column_int64(t, 9) & GRAPH_INC_ALL;
	}
	if (rc != SQLITE_DONE) {
		rc = sq_fail(s, rc, why, whysz, "listing traces");
		sqlite3_finalize(t);
		free(*rows);
		*rows = NULL;
		return rc;
	}
	sqlite3_finalize(t);
	return (ssize_t)n;
}

/* The nearest-rank quantile of a sketch, as agg_state_final() computes it for AGG_QUANTILE:
 * rank 1 is the min and rank n the max (both exact), otherwise the midpoint of the bucket's
 * integers, clamped to [min, max]; rounded to the nearest ns. */
static int64_t sketch_quantile(const uint64_t *counts, uint64_t n, int64_t mn, int64_t mx, double q)
{
	uint64_t k = agg_quantile_rank(q, n), cum = 0;
	__u64 lo, width;
	double v;
	size_t i;

	if (!n)
		return 0;
	if (k == 1)
		return mn;
	if (k == n)
		return mx;
	for (i = 0; i < WEFT_SKETCH_NBUCKETS - 1; i++) {
		cum += counts[i];
		if (cum >= k)
			break;
	}
	weft_sketch_bounds((__u32)i, &lo, &width);
	v = (double)lo + (double)(width - 1) / 2.0;
	if (v < (double)mn)
		v = (double)mn;
	if (v > (double)mx)
		v = (double)mx;
	return (int64_t)llround(v);
}

static ssize_t sq_stats(struct graph_store *base, struct graph_type_stats **rows, char *why,
			size_t whysz)
{
	struct sq *s = (struct sq *)base;
	sqlite3_stmt *t = NULL, *ev = NULL, *ed = NULL;
	size_t n = 0, cap = 0;
	int rc;

	*rows = NULL;
	rc = sqlite3_prepare_v2(s->db,
				"SELECT id, service, name FROM types WHERE count > 0 "
				"ORDER BY count DESC, service, name",
				-1, &t, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(s->db,
					"SELECT n.s, ea.ntasks FROM event_agg AS ea CROSS JOIN "
					"strs AS n ON n.id = ea.name WHERE ea.type = ?1 "
					"ORDER BY ea.ntasks ASC, n.s ASC LIMIT "
					"3",
					-1, &ev, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_prepare_v2(s->db,
					"SELECT y.service, y.name, ea.kind, ea.count FROM edge_agg "
					"AS ea CROSS JOIN types AS y ON y.id = ea.ctype WHERE "
					"ea.ptype = ?1 ORDER BY ea.count ASC, y.service, y.name, "
					"ea.kind LIMIT 3",
					-1, &ed, NULL);
	if (rc != SQLITE_OK) {
		rc = sq_fail(s, rc, why, whysz, "reading statistics");
		goto out;
	}
	if (sqlite3_get_autocommit(s->db) && (rc = exec(s, "BEGIN", why, whysz, "reading")))
		goto out;
	while ((rc = sqlite3_step(t)) == SQLITE_ROW) {
		struct graph_type_stats *r;
		int64_t cnt, mn, mx, type = sqlite3_column_int64(t, 0);
		int rc2;

		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct graph_type_stats *nr = realloc(*rows, ncap * sizeof(*nr));

			if (!nr) {
				rc = fail(why, whysz, -ENOMEM, "out of memory");
				goto out_end;
			}
			*rows = nr;
			cap = ncap;
		}
		r = &(*rows)[n++];
		memset(r, 0, sizeof(*r));
		cpy(r->service, sizeof(r->service), sqlite3_column_text(t, 1));
		cpy(r->name, sizeof(r->name), sqlite3_column_text(t, 2));
		if ((rc = read_sketch(s, type, s->scratch, &cnt, &mn, &mx, why, whysz)))
			goto out_end;
		r->count = (uint64_t)cnt;
		r->p50 = sketch_quantile(s->scratch, r->count, mn, mx, 0.5);
		r->p90 = sketch_quantile(s->scratch, r->count, mn, mx, 0.9);
		r->p99 = sketch_quantile(s->scratch, r->count, mn, mx, 0.99);
		sqlite3_reset(ev);
		sqlite3_bind_int64(ev, 1, type);
		while ((rc2 = sqlite3_step(ev)) == SQLITE_ROW &&
		       r->nrare_events < GRAPH_STATS_RAREST) {
			struct graph_rare_event *x = &r->rare_events[r->nrare_events++];
			int64_t k = sqlite3_column_int64(ev, 1);

			cpy(x->name, sizeof(x->name), sqlite3_column_text(ev, 0));
			x->tasks = k > 0 ? (uint64_t)k : 0;
			x->share = r->count ? (double)x->tasks / (double)r->count : 0;
		}
		sqlite3_reset(ev);
		sqlite3_reset(ed);
		sqlite3_bind_int64(ed, 1, type);
		while ((rc2 = sqlite3_step(ed)) == SQLITE_ROW &&
		       r->nrare_edges < GRAPH_STATS_RAREST) {
			struct graph_rare_edge *x = &r->rare_edges[r->nrare_edges++];
			int64_t k = sqlite3_column_int64(ed, 3);
			int kind = sqlite3_column_int(ed, 2);

			cpy(x->service, sizeof(x->service), sqlite3_column_text(ed, 0));
			cpy(x->name, sizeof(x->name), sqlite3_column_text(ed, 1));
			x->kind = kind >= 0 && kind < GRAPH_EDGE_COUNT ?
					  (enum graph_edge_kind)kind :
					  GRAPH_EDGE_FOLLOWS;
			x->count = k > 0 ? (uint64_t)k : 0;
			x->share = r->count ? (double)x->count / (double)r->count : 0;
		}
		sqlite3_reset(ed);
	}
	rc = rc == SQLITE_DONE ? 0 : sq_fail(s, rc, why, whysz, "reading statistics");
out_end:
	exec(s, "COMMIT", NULL, 0, "reading");
out:
	sqlite3_finalize(t);
	sqlite3_finalize(ev);
	sqlite3_finalize(ed);
	if (rc) {
		free(*rows);
		*rows = NULL;
		return rc;
	}
	return (ssize_t)n;
}

/* ---------------------------------------------------------------- retention */

static int drop_trace(struct sq *s, int64_t tr, char *why, size_t whysz)
{
	sqlite3_stmt *t = stmt(s, ST_DEL_CHUNKS);
	int rc;

	if (tr <= 0 || tr > (INT64_MAX >> 16))
		return fail(why, whysz, -EIO, "graph store: a trace row id out of range");
	sqlite3_bind_int64(t, 1, tr << 16);
	sqlite3_bind_int64(t, 2, tr << 16 | CHUNK_MAX_SEQ);
	if ((rc = step_done(s, t, why, whysz, "dropping a trace")))
		return rc;
	t = stmt(s, ST_MARK_DEL);
	sqlite3_bind_int64(t, 1, tr);
	if ((rc = step_done(s, t, why, whysz, "dropping a trace")))
		return rc;
	t = stmt(s, ST_DEL_TRACE);
	sqlite3_bind_int64(t, 1, tr);
	return step_done(s, t, why, whysz, "dropping a trace");
}

/* Drops the traces the query selects (?1: the query's bound, ?2 and ?3: the (start_ns, tr) of
 * the last trace seen, so that every round continues where the last stopped), oldest first,
 * as long as it finds some and, with max_bytes, the pages in use exceed it.  Adds to
 * *dropped. */
static int drop_where(struct sq *s, const char *sql, int64_t arg, uint64_t max_bytes,
		      ssize_t *dropped, char *why, size_t whysz)
{
	int64_t trs[256], last_start = INT64_MIN, last_tr = INT64_MIN;
	sqlite3_stmt *q;
	int rc;

	rc = sqlite3_prepare_v2(s->db, sql, -1, &q, NULL);
	if (rc != SQLITE_OK)
		return sq_fail(s, rc, why, whysz, "retention");
	for (;;) {
		size_t n = 0, i;

		if (max_bytes) {
			int64_t pages, free_pages, psz;

			if ((rc = pragma_int(s, "PRAGMA page_count", &pages, why, whysz)) ||
			    (rc = pragma_int(s, "PRAGMA freelist_count", &free_pages, why,
					     whysz)) ||
			    (rc = pragma_int(s, "PRAGMA page_size", &psz, why, whysz)))
				break;
			if ((uint64_t)(pages - free_pages) * (uint64_t)psz <= max_bytes)
				break;
		}
		sqlite3_reset(q);
		sqlite3_bind_int64(q, 1, arg);
		sqlite3_bind_int64(q, 2, last_start);
		sqlite3_bind_int64(q, 3, last_tr);
		while (n < 256 && (rc = sqlite3_step(q)) == SQLITE_ROW) {
			trs[n++] = last_tr = sqlite3_column_int64(q, 0);
			last_start = sqlite3_column_int64(q, 1);
		}
		sqlite3_reset(q);
		if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
			rc = sq_fail(s, rc, why, whysz, "retention");
			break;
		}
		if (n == 0) {
			rc = 0;
			break;
		}
		for (i = 0; i < n; i++)
			if ((rc = drop_trace(s, trs[i], why, whysz)))
				goto out;
		*dropped += (ssize_t)n;
	}
out:
	sqlite3_finalize(q);
	return rc;
}

static ssize_t sq_retain(struct graph_store *base, int64_t before, uint64_t max_bytes, char *why,
			 size_t whysz)
{
	struct sq *s = (struct sq *)base;
	ssize_t dropped = 0;
	int rc;

	if ((rc = begin(s, why, whysz)))
		return rc;
	if (before &&
	    (rc = drop_where(
		     s,
		     "SELECT tr, start_ns FROM traces WHERE start_ns < ?1 AND (start_ns, tr) > "
		     "(?2, ?3) AND end_ns < ?1 ORDER BY start_ns, tr LIMIT 256",
		     before, 0, &dropped, why, whysz)))
		goto out_rollback;
	/* by size: the oldest by start first; each round drops up to 256 traces (32 when the
	 * store is small), then measures the pages in use again */
	if (max_bytes &&
	    (rc = drop_where(
		     s,
		     "SELECT tr, start_ns FROM traces WHERE ?1 = 0 AND (start_ns, tr) > (?2, ?3) "
		     "ORDER BY start_ns, tr LIMIT 32",
		     0, max_bytes, &dropped, why, whysz)))
		goto out_rollback;
	if ((rc = step_done(s, stmt(s, ST_COMMIT), why, whysz, "committing")))
		goto out_rollback;
	/* give the freed pages back to the file system, and empty the WAL */
	if ((rc = exec(s, "PRAGMA incremental_vacuum", why, whysz, "shrinking the file")))
		return rc;
	sqlite3_wal_checkpoint_v2(s->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
	return dropped;
out_rollback:
	rollback(s);
	return rc;
}

/* ---------------------------------------------------------------- merge */

static int merge_types(struct sq *s, struct kmap *map, char *why, size_t whysz)
{
	sqlite3_stmt *q;
	uint64_t *theirs = calloc(WEFT_SKETCH_NBUCKETS, sizeof(*theirs));
	int rc;

	if (!theirs)
		return fail(why, whysz, -ENOMEM, "out of memory");
	rc = sqlite3_prepare_v2(s->db,
				"SELECT id, service, name, count, min_ns, max_ns, sketch FROM "
				"other.types",
				-1, &q, NULL);
	if (rc != SQLITE_OK) {
		free(theirs);
		return sq_fail(s, rc, why, whysz, "reading the other store's types");
	}
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		const unsigned char *sv = sqlite3_column_text(q, 1),
				    *nm = sqlite3_column_text(q, 2);
		int64_t oid = sqlite3_column_int64(q, 0), cnt = sqlite3_column_int64(q, 3);
		int64_t omn = sqlite3_column_int64(q, 4), omx = sqlite3_column_int64(q, 5);
		int64_t id, n, mn, mx;
		struct kent *e;
		sqlite3_stmt *t;

		memset(theirs, 0, WEFT_SKETCH_NBUCKETS * sizeof(*theirs));
		uint64_t sum = 0;

		if (cnt >= 0 && sketch_add_blob(theirs, sqlite3_column_blob(q, 6),
						(size_t)sqlite3_column_bytes(q, 6)))
			for (size_t b = 0; b < WEFT_SKETCH_NBUCKETS; b++)
				sum += theirs[b];
		/* the buckets hold the count, no more, no less: the context's cache relies on it */
		if (cnt < 0 || sum != (uint64_t)cnt) {
			rc = fail(why, whysz, -EIO,
				  "the other store: type %" PRId64 ": corrupt sketch", oid);
			goto out;
		}
		if ((rc = type_id(s, sv ? (const char *)sv : "", nm ? (const char *)nm : "", true,
				  &id, why, whysz)))
			goto out;
		e = kmap_get(map, (uint64_t)oid, 0, 0, NULL);
		if (!e) {
			rc = fail(why, whysz, -ENOMEM, "out of memory");
			goto out;
		}
		e->v[0] = id;
		if ((rc = read_sketch(s, id, s->scratch, &n, &mn, &mx, why, whysz)))
			goto out;
		for (size_t b = 0; b < WEFT_SKETCH_NBUCKETS; b++)
			s->scratch[b] += theirs[b];
		if (cnt) {
			if (!n || omn < mn)
				mn = omn;
			if (!n || omx > mx)
				mx = omx;
		}
		if (sketch_encode(s->scratch, &s->wb)) {
			rc = fail(why, whysz, -ENOMEM, "out of memory");
			goto out;
		}
		t = stmt(s, ST_TYPE_WRITE);
		sqlite3_bind_int64(t, 1, id);
		sqlite3_bind_int64(t, 2, n + cnt);
		sqlite3_bind_int64(t, 3, mn);
		sqlite3_bind_int64(t, 4, mx);
		sqlite3_bind_blob(t, 5, s->wb.p ? (const void *)s->wb.p : "", (int)s->wb.n,
				  SQLITE_STATIC);
		if ((rc = step_done(s, t, why, whysz, "writing a type")))
			goto out;
	}
	rc = rc == SQLITE_DONE ? 0 : sq_fail(s, rc, why, whysz, "reading the other store's types");
out:
	sqlite3_finalize(q);
	free(theirs);
	return rc;
}

static int merge_counts(struct sq *s, const struct kmap *map, char *why, size_t whysz)
{
	sqlite3_stmt *q;
	int rc;

	rc = sqlite3_prepare_v2(s->db,
				"SELECT ea.type, n.s, ea.ntasks FROM other.event_agg AS ea CROSS "
				"JOIN other.strs AS n ON n.id = ea.name",
				-1, &q, NULL);
	if (rc != SQLITE_OK)
		return sq_fail(s, rc, why, whysz, "reading the other store's event counts");
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		struct kent *e = kmap_find(map, (uint64_t)sqlite3_column_int64(q, 0), 0, 0);
		const unsigned char *nm = sqlite3_column_text(q, 1);
		int64_t name;
		sqlite3_stmt *t;

		if (!e) {
			rc = fail(why, whysz, -EIO,
				  "the other store: event counts of an unknown type");
			goto out;
		}
		if ((rc = str_id(s, nm ? (const char *)nm : "", true, &name, why, whysz)))
			goto out;
		t = stmt(s, ST_EVAGG_ADD);
		sqlite3_bind_int64(t, 1, e->v[0]);
		sqlite3_bind_int64(t, 2, name);
		sqlite3_bind_int64(t, 3, sqlite3_column_int64(q, 2));
		if ((rc = step_done(s, t, why, whysz, "writing event counts")))
			goto out;
	}
	if (rc != SQLITE_DONE) {
		rc = sq_fail(s, rc, why, whysz, "reading the other store's event counts");
		goto out;
	}
	sqlite3_finalize(q);
	rc = sqlite3_prepare_v2(s->db, "SELECT ptype, ctype, kind, count FROM other.edge_agg", -1,
				&q, NULL);
	if (rc != SQLITE_OK)
		return sq_fail(s, rc, why, whysz, "reading the other store's edge counts");
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		struct kent *p = kmap_find(map, (uint64_t)sqlite3_column_int64(q, 0), 0, 0);
		struct kent *c = kmap_find(map, (uint64_t)sqlite3_column_int64(q, 1), 0, 0);
		sqlite3_stmt *t;

		if (!p || !c) {
			rc = fail(why, whysz, -EIO,
				  "the other store: edge counts of an unknown type");
			goto out;
		}
		t = stmt(s, ST_EDGEAGG_ADD);
		sqlite3_bind_int64(t, 1, p->v[0]);
		sqlite3_bind_int64(t, 2, c->v[0]);
		sqlite3_bind_int64(t, 3, sqlite3_column_int64(q, 2));
		sqlite3_bind_int64(t, 4, sqlite3_column_int64(q, 3));
		if ((rc = step_done(s, t, why, whysz, "writing edge counts")))
			goto out;
	}
	rc = rc == SQLITE_DONE ?
		     0 :
		     sq_fail(s, rc, why, whysz, "reading the other store's edge counts");
out:
	sqlite3_finalize(q);
	return rc;
}

static int merge_conc(struct sq *s, char *why, size_t whysz)
{
	uint32_t *theirs = malloc(CONC_MS * sizeof(*theirs));
	sqlite3_stmt *q;
	int rc;

	if (!theirs)
		return fail(why, whysz, -ENOMEM, "out of memory");
	rc = sqlite3_prepare_v2(
		s->db,
		"SELECT h.s, p.pid, c.sec, c.counts FROM other.conc AS c CROSS JOIN "
		"other.procs AS p ON p.id = c.proc CROSS JOIN other.strs AS h ON "
		"h.id = p.host",
		-1, &q, NULL);
	if (rc != SQLITE_OK) {
		free(theirs);
		return sq_fail(s, rc, why, whysz, "reading the other store's concurrency");
	}
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		const unsigned char *h = sqlite3_column_text(q, 0);
		int64_t host, proc, sec = sqlite3_column_int64(q, 2);
		bool found;

		if (!conc_decode(theirs, sqlite3_column_blob(q, 3),
				 (size_t)sqlite3_column_bytes(q, 3))) {
			rc = fail(why, whysz, -EIO, "the other store: corrupt concurrency block");
			goto out;
		}
		if ((rc = str_id(s, h ? (const char *)h : "", true, &host, why, whysz)) ||
		    (rc = proc_id(s, host, sqlite3_column_int64(q, 1), true, &proc, why, whysz)) ||
		    (rc = conc_read(s, proc, sec, s->conc_scratch, &found, why, whysz)))
			goto out;
		for (size_t m = 0; m < CONC_MS; m++) {
			uint64_t v = (uint64_t)s->conc_scratch[m] + theirs[m];

			s->conc_scratch[m] = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
		}
		if ((rc = conc_write(s, proc, sec, s->conc_scratch, why, whysz)))
			goto out;
	}
	rc = rc == SQLITE_DONE ?
		     0 :
		     sq_fail(s, rc, why, whysz, "reading the other store's concurrency");
out:
	sqlite3_finalize(q);
	free(theirs);
	return rc;
}

static int sq_merge(struct graph_store *base, const char *other, char *why, size_t whysz)
{
	struct sq *s = (struct sq *)base;
	struct kmap map = { 0 };
	sqlite3_stmt *t;
	struct stat sb;
	int rc;

	if (stat(other, &sb) != 0)
		return fail(why, whysz, -errno, "%s: %s", other, strerror(errno));
	if (!S_ISREG(sb.st_mode))
		return fail(why, whysz, -EINVAL, "%s: not a regular file", other);
	rc = sqlite3_prepare_v2(s->db, "ATTACH DATABASE ?1 AS other", -1, &t, NULL);
	if (rc != SQLITE_OK)
		return sq_fail(s, rc, why, whysz, "attaching the other store");
	sqlite3_bind_text(t, 1, other, -1, SQLITE_STATIC);
	rc = sqlite3_step(t);
	sqlite3_finalize(t);
	if (rc != SQLITE_DONE)
		return fail(why, whysz, sq_errno(rc), "%s: cannot attach: %s", other,
			    sqlite3_errmsg(s->db));
	rc = schema_check(s, other, "other", why, whysz);
	if (rc == 1)
		rc = fail(why, whysz, -EINVAL, "%s: an empty database, not a weft graph store",
			  other);
	if (rc)
		goto out_detach;
	if ((rc = begin(s, why, whysz)))
		goto out_detach;
	if ((rc = merge_types(s, &map, why, whysz)) || (rc = merge_counts(s, &map, why, whysz)) ||
	    (rc = merge_conc(s, why, whysz)) ||
	    (rc = step_done(s, stmt(s, ST_COMMIT), why, whysz, "committing")))
		rollback(s);
out_detach:
	kmap_free(&map);
	sqlite3_exec(s->db, "DETACH DATABASE other", NULL, NULL, NULL);
	return rc;
}

/* ---------------------------------------------------------------- plans */

int graph_store_sqlite_check_plans(struct graph_store *base, char *why, size_t whysz)
{
	static const int hot[] = {
		ST_FIND_EXACT, ST_FIND_HI,    ST_FIND_LO,     ST_CHUNKS_GET, ST_TYPE_GET,
		ST_TYPE_READ,  ST_TYPE_NAMES, ST_TYPE_COUNT,  ST_STR_GET,    ST_STR_TEXT,
		ST_PROC_GET,   ST_EVAGG_GET,  ST_EDGEAGG_GET, ST_CONC_GET,   ST_TRACE_GET,
		ST_TRACE_UPD,  ST_TYPE_WRITE, ST_DEL_CHUNKS,  ST_DEL_TRACE,  ST_TRACE_MAX,
	};
	struct sq *s = (struct sq *)base;
	char q[1024];
	size_t i;
	int rc;

	if (base->ops != &sqlite_ops)
		return fail(why, whysz, -EINVAL, "not a SQLite graph store");
	for (i = 0; i < sizeof(hot) / sizeof(hot[0]); i++) {
		sqlite3_stmt *t;

		snprintf(q, sizeof(q), "EXPLAIN QUERY PLAN %s", stmt_sql[hot[i]]);
		rc = sqlite3_prepare_v2(s->db, q, -1, &t, NULL);
		if (rc != SQLITE_OK)
			return sq_fail(s, rc, why, whysz, "explaining a statement");
		while ((rc = sqlite3_step(t)) == SQLITE_ROW) {
			const char *d = (const char *)sqlite3_column_text(t, 3);

			if (d && !strncmp(d, "SCAN", 4)) {
				fail(why, whysz, -EINVAL, "%s: %s", stmt_sql[hot[i]], d);
				sqlite3_finalize(t);
				return -EINVAL;
			}
		}
		sqlite3_finalize(t);
	}
	return 0;
}

/* ---------------------------------------------------------------- marks */

static int sq_mark_get(struct graph_store *base, const char *trace_hex, uint32_t *flags, char *why,
		       size_t whysz)
{
	struct sq *s = (struct sq *)base;
	int64_t tr, thi, tlo;
	sqlite3_stmt *t;
	int rc;

	*flags = 0;
	if ((rc = find_trace(s, trace_hex, &tr, &thi, &tlo, why, whysz)))
		return rc;
	t = stmt(s, ST_MARK_GET);
	sqlite3_bind_int64(t, 1, tr);
	rc = sqlite3_step(t);
	if (rc == SQLITE_ROW)
		*flags = (uint32_t)sqlite3_column_int64(t, 0) & GRAPH_INC_ALL;
	sqlite3_reset(t);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return sq_fail(s, rc, why, whysz, "reading a trace's marks");
	return 0;
}

static int sq_mark_set(struct graph_store *base, const char *trace_hex, uint32_t flags, char *why,
		       size_t whysz)
{
	struct sq *s = (struct sq *)base;
	int64_t tr, thi, tlo;
	sqlite3_stmt *t;
	int rc;

	if ((rc = find_trace(s, trace_hex, &tr, &thi, &tlo, why, whysz)))
		return rc;
	flags &= GRAPH_INC_ALL;
	t = stmt(s, flags ? ST_MARK_SET : ST_MARK_DEL);
	sqlite3_bind_int64(t, 1, tr);
	if (flags)
		sqlite3_bind_int64(t, 2, flags);
	return step_done(s, t, why, whysz, "marking a trace");
}

static const struct graph_store_ops sqlite_ops = {
	.name = "sqlite",
	.put = sq_put,
	.list = sq_list,
	.load = sq_load,
	.context = sq_context,
	.type_sketch = sq_type_sketch,
	.concurrency = sq_concurrency,
	.stats = sq_stats,
	.retain = sq_retain,
	.merge = sq_merge,
	.close = sq_close,
	.put_opts = sq_put_opts,
	.put_aggs = sq_put_aggs,
	.sampling = sq_sampling,
	.mark_get = sq_mark_get,
	.mark_set = sq_mark_set,
};

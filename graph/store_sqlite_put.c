// SPDX-License-Identifier: Apache-2.0
/*
 * The SQLite graph store's ingest (store_sqlite.c's essay says why it is built this way): a
 * put, trace by trace, its chunks and the aggregates kept on ingest (sketches, event and edge
 * shares, per-ms concurrency) accumulated in memory and written once per transaction; the
 * aggregates of a sampled capture (put_aggs) and its sampling row; and the marks of
 * incomplete traces.  Everything here writes; store_sqlite_read.c only reads.
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

/* ---------------------------------------------------------------- put */

/* Empties a put's map; one that a huge put made big is freed, not kept for the next. */
static void kmap_reset(struct kmap *m)
{
	if (m->cap > (1u << 16))
		sq_kmap_free(m);
	else
		sq_kmap_clear(m);
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

	if ((m->n + 1) * 2 > m->cap && sq_kmap_grow(m))
		return -ENOMEM;
	for (i = sq_khash(tr, d->from_task, d->to_task) & (m->cap - 1);;
	     i = (i + 1) & (m->cap - 1)) {
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
	struct kent *e = sq_kmap_get(&sd->s->ptasks, sd->tr, t->id, 0, NULL);

	if (!e || !sq_kmap_get(&sd->s->pth, sd->tr, (uint64_t)t->host, 0, NULL))
		return -ENOMEM;
	e->v[0] = t->type;
	e->v[2] = PT_STORED;
	return 0;
}

static int seed_event(void *arg, const struct cevent *ev)
{
	struct seed *sd = arg;

	return sq_kmap_get(&sd->s->pevseen, sd->tr, ev->task, (uint64_t)ev->name, NULL) ? 0 :
											  -ENOMEM;
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
		if (!sq_kmap_find(&s->ptasks, tr, s->dangle[i].from_task, 0) ||
		    !sq_kmap_find(&s->ptasks, tr, s->dangle[i].to_task, 0))
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
		struct kent *from = sq_kmap_find(&s->ptasks, tr, d->from_task, 0),
			    *to = sq_kmap_find(&s->ptasks, tr, d->to_task, 0), *agg;

		if (!from || !to || d->kind >= GRAPH_EDGE_COUNT)
			continue;
		agg = sq_kmap_get(&s->pedgeagg, (uint64_t)from->v[0], (uint64_t)to->v[0], d->kind,
				  NULL);
		if (!agg)
			return sq_failf(why, whysz, -ENOMEM, "out of memory");
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
	sqlite3_stmt *t = sq_stmt(s, ST_CHUNKS_GET);
	size_t from = s->ndangle;
	int rc;

	sqlite3_bind_int64(t, 1, a->tr << 16);
	sqlite3_bind_int64(t, 2, a->tr << 16 | CHUNK_MAX_SEQ);
	while ((rc = sqlite3_step(t)) == SQLITE_ROW) {
		int err = sq_chunk_decode(sqlite3_column_blob(t, 0),
					  (size_t)sqlite3_column_bytes(t, 0), &v);

		if (err) {
			sqlite3_reset(t);
			return err == -ENOMEM ?
				       sq_failf(why, whysz, -ENOMEM, "out of memory") :
				       sq_failf(why, whysz, -EIO,
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
/* ---------------------------------------------------------------- the trace-id filter */

#define TBLOOM_K 4 /* probes an id: ~0.2 % false positives at 16 bits an id */
#define TBLOOM_MIN_IDS 65536
#define TBLOOM_MAX_BITS (1ULL << 28) /* 32 MiB: a larger store gets more false positives */

static uint64_t tbloom_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	return x ^ (x >> 33);
}

static void tbloom_pos(const struct sq *s, int64_t hi, int64_t lo, uint64_t pos[TBLOOM_K])
{
	uint64_t h1 = tbloom_mix((uint64_t)hi ^ tbloom_mix((uint64_t)lo + 0x9e3779b97f4a7c15ULL));
	uint64_t h2 = tbloom_mix(h1) | 1;

	for (int i = 0; i < TBLOOM_K; i++)
		pos[i] = (h1 + (uint64_t)i * h2) & s->tbloom_mask;
}

static void tbloom_add(struct sq *s, int64_t hi, int64_t lo)
{
	uint64_t pos[TBLOOM_K];

	if (!s->tbloom)
		return;
	tbloom_pos(s, hi, lo, pos);
	for (int i = 0; i < TBLOOM_K; i++)
		s->tbloom[pos[i] >> 6] |= 1ULL << (pos[i] & 63);
	s->tbloom_n++;
}

/* false: the id is certainly not in the store; true: it may be (look it up) */
static bool tbloom_maybe(const struct sq *s, int64_t hi, int64_t lo)
{
	uint64_t pos[TBLOOM_K];

	if (!s->tbloom)
		return true;
	tbloom_pos(s, hi, lo, pos);
	for (int i = 0; i < TBLOOM_K; i++)
		if (!(s->tbloom[pos[i] >> 6] & (1ULL << (pos[i] & 63))))
			return false;
	return true;
}

/*
 * Before a put: the filter as the store now is.  Rebuilt from the traces table when there is
 * none, when another connection committed since (data_version: a second writer's traces),
 * or when more ids were added than it was sized for.  Without memory, or if the table cannot
 * be read, the put goes on without it (every trace looked up, as before); a failure the put
 * itself would meet is the put's to report.
 */
static void tbloom_sync(struct sq *s)
{
	int64_t dv = 0, count = 0;
	uint64_t bits = 1024, ids;
	sqlite3_stmt *t = NULL;
	char why[8];
	int rc;

	if (sq_pragma_int(s, "PRAGMA data_version", &dv, why, sizeof(why)))
		goto off;
	if (s->tbloom && dv == s->tbloom_dv && s->tbloom_n <= s->tbloom_cap)
		return;
	if (sq_pragma_int(s, "SELECT count(*) FROM traces", &count, why, sizeof(why)))
		goto off;
	ids = (uint64_t)count * 2 > TBLOOM_MIN_IDS ? (uint64_t)count * 2 : TBLOOM_MIN_IDS;
	while (bits < ids * 16 && bits < TBLOOM_MAX_BITS)
		bits <<= 1;
	free(s->tbloom);
	s->tbloom = calloc(bits / 64, sizeof(uint64_t));
	if (!s->tbloom)
		goto off;
	s->tbloom_mask = bits - 1;
	s->tbloom_n = 0;
	s->tbloom_cap = ids;
	s->tbloom_dv = dv;
	if (sqlite3_prepare_v2(s->db, "SELECT hi, lo FROM traces", -1, &t, NULL) != SQLITE_OK)
		goto off;
	while ((rc = sqlite3_step(t)) == SQLITE_ROW)
		tbloom_add(s, sqlite3_column_int64(t, 0), sqlite3_column_int64(t, 1));
	sqlite3_finalize(t);
	if (rc == SQLITE_DONE)
		return;
off:
	free(s->tbloom);
	s->tbloom = NULL;
}

static int trace_get(struct sq *s, struct graph_id128 id, bool create, struct tacc **out,
		     struct graph_put_stats *st, char *why, size_t whysz)
{
	int64_t hi = sq_bias(id.hi), lo = sq_bias(id.lo);
	bool isnew, looked;
	struct kent *e = sq_kmap_get(&s->ptraces, (uint64_t)hi, (uint64_t)lo, 0, &isnew);
	struct tacc *a;
	sqlite3_stmt *t = NULL;
	int rc;

	*out = NULL;
	if (!e)
		return sq_failf(why, whysz, -ENOMEM, "out of memory");
	if (!isnew) {
		*out = e->v[0] ? &s->tacc[e->v[1]] : NULL;
		if (*out || !create)
			return 0;
	}
	if (s->ntacc == s->captacc) {
		size_t ncap = s->captacc ? s->captacc * 2 : 64;
		struct tacc *n = realloc(s->tacc, ncap * sizeof(*n));

		if (!n)
			return sq_failf(why, whysz, -ENOMEM, "out of memory");
		s->tacc = n;
		s->captacc = ncap;
	}
	a = &s->tacc[s->ntacc];
	memset(a, 0, sizeof(*a));
	a->hi = hi;
	a->lo = lo;
	looked = isnew && tbloom_maybe(s, hi, lo);
	if (looked) {
		t = sq_stmt(s, ST_TRACE_GET);
		sqlite3_bind_int64(t, 1, hi);
		sqlite3_bind_int64(t, 2, lo);
		rc = sqlite3_step(t);
	} else {
		rc = SQLITE_DONE; /* known absent: from this put, or by the filter */
	}
	if (rc == SQLITE_ROW) {
		int64_t *f[] = { &a->start,	&a->end,	&a->ntasks,
				 &a->nhosts,	&a->root_task,	&a->root_type,
				 &a->root_host, &a->root_start, &a->root_parentless };

		a->tr = sqlite3_column_int64(t, 0);
		sqlite3_reset(t);
		if (a->tr <= 0 || a->tr > (INT64_MAX >> 16))
			return sq_failf(why, whysz, -EIO,
					"graph store: a trace row id out of range");
		t = sq_stmt(s, ST_TRACE_ROW);
		sqlite3_bind_int64(t, 1, a->tr);
		rc = sqlite3_step(t);
		if (rc != SQLITE_ROW) {
			rc = rc == SQLITE_DONE ?
				     sq_failf(why, whysz, -EIO,
					      "graph store: trace row %" PRId64 " vanished",
					      a->tr) :
				     sq_fail(s, rc, why, whysz, "reading a trace");
			sqlite3_reset(t);
			return rc;
		}
		for (int i = 0; i < 9; i++)
			*f[i] = sqlite3_column_int64(t, i);
		sqlite3_reset(t);
		e->v[0] = 1;
		e->v[1] = (int64_t)s->ntacc++;
		*out = a;
		return trace_seed(s, a, why, whysz);
	}
	if (looked)
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
		sqlite3_stmt *t = sq_stmt(s, ST_TYPE_READ);
		int64_t count, mn, mx;

		sqlite3_bind_int64(t, 1, ty->id);
		rc = sqlite3_step(t);
		if (rc != SQLITE_ROW) {
			rc = rc == SQLITE_DONE ?
				     sq_failf(why, whysz, -EIO,
					      "graph store: type %" PRId64 " vanished", ty->id) :
				     sq_fail(s, rc, why, whysz, "reading a type");
			sqlite3_reset(t);
			return rc;
		}
		count = sqlite3_column_int64(t, 0);
		mn = sqlite3_column_int64(t, 1);
		mx = sqlite3_column_int64(t, 2);
		memset(s->scratch, 0, WEFT_SKETCH_NBUCKETS * sizeof(uint64_t));
		if (!sq_sketch_add_blob(s->scratch, sqlite3_column_blob(t, 3),
					(size_t)sqlite3_column_bytes(t, 3)) ||
		    count < 0) {
			sqlite3_reset(t);
			return sq_failf(why, whysz, -EIO,
					"graph store: type %" PRId64 ": corrupt sketch", ty->id);
		}
		sqlite3_reset(t);
		for (size_t b = 0; b < WEFT_SKETCH_NBUCKETS; b++)
			s->scratch[b] += ty->counts[b];
		if (count == 0 || ty->min < mn)
			mn = ty->min;
		if (count == 0 || ty->max > mx)
			mx = ty->max;
		if (sq_sketch_encode(s->scratch, &s->wb))
			return sq_failf(why, whysz, -ENOMEM, "out of memory");
		t = sq_stmt(s, ST_TYPE_WRITE);
		sqlite3_bind_int64(t, 1, ty->id);
		sqlite3_bind_int64(t, 2, count + (int64_t)ty->count);
		sqlite3_bind_int64(t, 3, mn);
		sqlite3_bind_int64(t, 4, mx);
		sqlite3_bind_blob(t, 5, s->wb.p ? (const void *)s->wb.p : "", (int)s->wb.n,
				  SQLITE_STATIC);
		if ((rc = sq_step_done(s, t, why, whysz, "writing a type")))
			return rc;
		memset(ty->counts, 0, WEFT_SKETCH_NBUCKETS * sizeof(uint64_t));
	}
	s->ntya = 0;
	sq_kmap_clear(&s->ptypes);
	return 0;
}

static int type_add(struct sq *s, int64_t type, int64_t lat, char *why, size_t whysz)
{
	bool isnew;
	struct kent *e;
	struct typeacc *ty;
	int rc;

	if (s->ntya == FLUSH_TYPES && !sq_kmap_find(&s->ptypes, (uint64_t)type, 0, 0) &&
	    (rc = flush_types(s, why, whysz)))
		return rc;
	e = sq_kmap_get(&s->ptypes, (uint64_t)type, 0, 0, &isnew);
	if (!e)
		return sq_failf(why, whysz, -ENOMEM, "out of memory");
	if (isnew) {
		ty = &s->tya[s->ntya];
		if (!ty->counts && !(ty->counts = calloc(WEFT_SKETCH_NBUCKETS, sizeof(uint64_t))))
			return sq_failf(why, whysz, -ENOMEM, "out of memory");
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
int sq_conc_read(struct sq *s, int64_t proc, int64_t sec, uint32_t *c, bool *found, char *why,
		 size_t whysz)
{
	sqlite3_stmt *t = sq_stmt(s, ST_CONC_GET);
	int rc;

	sqlite3_bind_int64(t, 1, proc);
	sqlite3_bind_int64(t, 2, sec);
	rc = sqlite3_step(t);
	*found = rc == SQLITE_ROW;
	if (rc == SQLITE_ROW) {
		bool ok = sq_conc_decode(c, sqlite3_column_blob(t, 0),
					 (size_t)sqlite3_column_bytes(t, 0));

		sqlite3_reset(t);
		if (!ok)
			return sq_failf(why, whysz, -EIO,
					"graph store: corrupt concurrency block (process %" PRId64
					", second %" PRId64 ")",
					proc, sec);
		return 0;
	}
	memset(c, 0, CONC_MS * sizeof(*c));
	sqlite3_reset(t);
	return rc == SQLITE_DONE ? 0 : sq_fail(s, rc, why, whysz, "reading concurrency");
}

int sq_conc_write(struct sq *s, int64_t proc, int64_t sec, const uint32_t *c, char *why,
		  size_t whysz)
{
	sqlite3_stmt *t;

	if (sq_conc_encode(c, &s->wb))
		return sq_failf(why, whysz, -ENOMEM, "out of memory");
	t = sq_stmt(s, ST_CONC_PUT);
	sqlite3_bind_int64(t, 1, proc);
	sqlite3_bind_int64(t, 2, sec);
	sqlite3_bind_blob(t, 3, s->wb.p, (int)s->wb.n, SQLITE_STATIC);
	return sq_step_done(s, t, why, whysz, "writing concurrency");
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
		if ((rc = sq_conc_read(s, (int64_t)e->k[0], (int64_t)e->k[1], s->conc_scratch,
				       &found, why, whysz)))
			return rc;
		for (size_t m = 0; m < CONC_MS; m++) {
			int64_t v;

			run += d[m];
			v = (int64_t)s->conc_scratch[m] + run;
			s->conc_scratch[m] = v < 0 ? 0 : v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
		}
		if ((rc = sq_conc_write(s, (int64_t)e->k[0], (int64_t)e->k[1], s->conc_scratch, why,
					whysz)))
			return rc;
	}
	sq_kmap_clear(&s->pblocks);
	s->nblk = 0;
	return 0;
}

static int conc_add(struct sq *s, int64_t proc, int64_t start, int64_t end, char *why, size_t whysz)
{
	int64_t first, last, sec;
	int rc;

	sq_task_ms(start, end, &first, &last);
	for (sec = sq_floordiv(first, CONC_MS); sec <= sq_floordiv(last, CONC_MS); sec++) {
		int64_t base = sec * CONC_MS;
		int64_t a = first > base ? first - base : 0;
		int64_t b = last < base + CONC_MS - 1 ? last - base : CONC_MS - 1;
		bool isnew;
		struct kent *e;
		int32_t *d;

		if (s->nblk == FLUSH_BLOCKS &&
		    !sq_kmap_find(&s->pblocks, (uint64_t)proc, (uint64_t)sec, 0) &&
		    (rc = flush_blocks(s, why, whysz)))
			return rc;
		if (!s->blk && !(s->blk = malloc(FLUSH_BLOCKS * sizeof(*s->blk))))
			return sq_failf(why, whysz, -ENOMEM, "out of memory");
		e = sq_kmap_get(&s->pblocks, (uint64_t)proc, (uint64_t)sec, 0, &isnew);
		if (!e)
			return sq_failf(why, whysz, -ENOMEM, "out of memory");
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
		int64_t type, host, lat = sq_task_lat(k),
				    end = k->end > k->start ? k->end : k->start;
		struct kent *e;
		struct wbuf *b;
		bool isnew, better;

		if (!k->id)
			return sq_failf(why, whysz, -EINVAL, "graph store: task %zu has id 0", i);
		if ((rc = trace_get(s, k->trace, true, &a, st, why, whysz)) ||
		    (rc = sq_type_id(s, k->service ? k->service : "", k->name ? k->name : "", true,
				     &type, why, whysz)) ||
		    (rc = sq_str_id(s, k->host ? k->host : "", true, &host, why, whysz)))
			return rc;
		e = sq_kmap_get(&s->ptasks, (uint64_t)a->tr, k->id, 0, &isnew);
		if (!e)
			return sq_failf(why, whysz, -ENOMEM, "out of memory");
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
		if (sq_wb_varint(b, k->id) || sq_wb_varint(b, k->parent) ||
		    sq_wb_varint(b, (uint64_t)type) || sq_wb_varint(b, (uint64_t)host) ||
		    sq_wb_varint(b, sq_zz(k->pid)) || sq_wb_varint(b, sq_zz(k->tid)) ||
		    sq_wb_varint(b, sq_zz(sq_rel(k->start, a->base))) ||
		    sq_wb_varint(b, (uint64_t)end - (uint64_t)k->start) ||
		    sq_wb_varint(b, sq_zz(k->skew)) || sq_wb_varint(b, (uint32_t)k->status) ||
		    sq_wb_varint(b, (uint32_t)k->source) || sq_wb_attrs(b, k->attrs))
			return sq_failf(why, whysz, -ENOMEM, "out of memory");
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
		if (!sq_kmap_get(&s->pth, (uint64_t)a->tr, (uint64_t)host, 0, &isnew))
			return sq_failf(why, whysz, -ENOMEM, "out of memory");
		a->nhosts += isnew;
		if (k->pid >= 0 && !s->noaggs) {
			int64_t proc;

			if ((rc = sq_proc_id(s, host, k->pid, true, &proc, why, whysz)) ||
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
		e = a ? sq_kmap_find(&s->ptasks, (uint64_t)a->tr, ev->task, 0) : NULL;
		if (!e)
			return sq_failf(why, whysz, -EINVAL,
					"graph store: event %zu: task %016" PRIx64
					" is neither in the batch nor stored",
					i, ev->task);
		if (e->v[2] & PT_DUP)
			continue; /* came with the stored copy of its task */
		if ((rc = sq_str_id(s, ev->name ? ev->name : "", true, &name, why, whysz)))
			return rc;
		if (!sq_kmap_get(&s->pevseen, (uint64_t)a->tr, ev->task, (uint64_t)name, &isnew))
			return sq_failf(why, whysz, -ENOMEM, "out of memory");
		if (isnew && !s->noaggs) { /* the first of its name in its task */
			struct kent *agg =
				sq_kmap_get(&s->pevagg, (uint64_t)e->v[0], (uint64_t)name, 0, NULL);

			if (!agg)
				return sq_failf(why, whysz, -ENOMEM, "out of memory");
			agg->v[0]++;
		}
		if (!a->based) {
			a->base = ev->time;
			a->based = true;
		}
		b = &s->body;
		if (sq_wb_varint(b, ev->task) || sq_wb_varint(b, ev->id) ||
		    sq_wb_varint(b, sq_zz(sq_rel(ev->time, a->base))) ||
		    sq_wb_varint(b, (uint64_t)name) || sq_wb_varint(b, (uint32_t)ev->source) ||
		    sq_wb_attrs(b, ev->attrs))
			return sq_failf(why, whysz, -ENOMEM, "out of memory");
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
			return sq_failf(why, whysz, -EINVAL,
					"graph store: edge %zu: kind %d unknown", i, (int)ed->kind);
		if ((rc = trace_get(s, ed->trace, false, &a, NULL, why, whysz)))
			return rc;
		if (!a)
			return sq_failf(
				why, whysz, -EINVAL,
				"graph store: edge %zu: its trace is neither in the batch nor "
				"stored",
				i);
		if (eset_add(&s->pedges, (uint64_t)a->tr, &d, &added))
			return sq_failf(why, whysz, -ENOMEM, "out of memory");
		if (!added)
			continue; /* stored already */
		b = &s->body;
		if (sq_wb_varint(b, d.kind) || sq_wb_varint(b, d.from_task) ||
		    sq_wb_varint(b, d.from_event) || sq_wb_varint(b, d.to_task) ||
		    sq_wb_varint(b, d.to_event) || sq_wb_varint(b, d.source))
			return sq_failf(why, whysz, -ENOMEM, "out of memory");
		a->nd++;
		st->edges++;
		from = sq_kmap_find(&s->ptasks, (uint64_t)a->tr, ed->from_task, 0);
		to = sq_kmap_find(&s->ptasks, (uint64_t)a->tr, ed->to_task, 0);
		ptype = from ? from->v[0] : 0;
		ctype = to ? to->v[0] : 0;
		if (!ptype || !ctype || s->noaggs)
			continue; /* an end outside the store: its shape is unknown */
		agg = sq_kmap_get(&s->pedgeagg, (uint64_t)ptype, (uint64_t)ctype,
				  (uint64_t)ed->kind, NULL);
		if (!agg)
			return sq_failf(why, whysz, -ENOMEM, "out of memory");
		agg->v[0]++;
	}
	return 0;
}

/* Writes a trace's chunk of this put: the header, then the body put_* appended. */
static int chunk_write(struct sq *s, struct tacc *a, char *why, size_t whysz)
{
	sqlite3_stmt *t;

	if (a->nchunks > CHUNK_MAX_SEQ)
		return sq_failf(
			why, whysz, -EFBIG,
			"graph store: a trace stored in more than %d batches: import it whole",
			CHUNK_MAX_SEQ + 1);
	s->wb.n = 0;
	if (sq_wb_varint(&s->wb, CHUNK_VERSION) || sq_wb_varint(&s->wb, a->nt) ||
	    sq_wb_varint(&s->wb, a->ne) || sq_wb_varint(&s->wb, a->nd) ||
	    sq_wb_varint(&s->wb, sq_zz(a->base)) || sq_wb_bytes(&s->wb, s->body.p, s->body.n))
		return sq_failf(why, whysz, -ENOMEM, "out of memory");
	if (s->wb.n > INT_MAX)
		return sq_failf(why, whysz, -EFBIG, "graph store: a trace's batch over 2 GiB");
	t = sq_stmt(s, ST_CHUNK_INS);
	sqlite3_bind_int64(t, 1, a->tr << 16 | a->nchunks);
	sqlite3_bind_blob(t, 2, s->wb.p, (int)s->wb.n, SQLITE_STATIC);
	return sq_step_done(s, t, why, whysz, "adding a trace's elements");
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
		t = sq_stmt(s, ST_EVAGG_ADD);
		sqlite3_bind_int64(t, 1, (int64_t)e->k[0]);
		sqlite3_bind_int64(t, 2, (int64_t)e->k[1]);
		sqlite3_bind_int64(t, 3, e->v[0]);
		if ((rc = sq_step_done(s, t, why, whysz, "writing event counts")))
			return rc;
	}
	for (i = 0; i < s->pedgeagg.cap && s->pedgeagg.n; i++) {
		struct kent *e = &s->pedgeagg.e[i];
		sqlite3_stmt *t;

		if (!e->used)
			continue;
		t = sq_stmt(s, ST_EDGEAGG_ADD);
		sqlite3_bind_int64(t, 1, (int64_t)e->k[0]);
		sqlite3_bind_int64(t, 2, (int64_t)e->k[1]);
		sqlite3_bind_int64(t, 3, (int64_t)e->k[2]);
		sqlite3_bind_int64(t, 4, e->v[0]);
		if ((rc = sq_step_done(s, t, why, whysz, "writing edge counts")))
			return rc;
	}
	for (i = 0; i < s->ntacc; i++) {
		struct tacc *a = &s->tacc[i];
		sqlite3_stmt *t;

		if (!(a->nt + a->ne + a->nd))
			continue; /* nothing new for it */
		t = sq_stmt(s, a->isnew ? ST_TRACE_INS : ST_TRACE_UPD);
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
		if ((rc = sq_step_done(s, t, why, whysz, "writing a trace")))
			return rc;
		if (a->isnew) /* a rolled-back put leaves its ids: lookups that find nothing */
			tbloom_add(s, a->hi, a->lo);
	}
	return 0;
}

/* An element of the batch, to visit the batch trace by trace. */
struct gref {
	uint64_t hi, lo;
	size_t i;
	int kind; /* 0 task, 1 event, 2 edge: a trace's tasks come first */
};

/*
 * The batch's elements (tasks, then events, then edges, each in batch order) grouped by
 * trace, stably: the traces in the order they first appear, a trace's elements in the order
 * given.  A counting sort on a hash of the trace ids (not a comparison sort of the elements:
 * a kept batch of the graph capture is already in that order, trace by trace).  *r is
 * replaced; *ntraces set.
 */
static int group_traces(struct gref **r, size_t n, size_t *ntraces)
{
	struct kmap m = { 0 };
	size_t *tr = malloc((n + 1) * sizeof(*tr)), *pos = NULL, nt = 0;
	struct gref *o = malloc((n + 1) * sizeof(*o));
	int rc = -ENOMEM;

	if (!tr || !o)
		goto out;
	for (size_t j = 0; j < n; j++) {
		bool isnew;
		struct kent *e = sq_kmap_get(&m, (*r)[j].hi, (*r)[j].lo, 0, &isnew);

		if (!e)
			goto out;
		if (isnew)
			e->v[0] = (int64_t)nt++;
		tr[j] = (size_t)e->v[0];
	}
	if (!(pos = calloc(nt + 1, sizeof(*pos))))
		goto out;
	for (size_t j = 0; j < n; j++)
		pos[tr[j] + 1]++;
	for (size_t t = 1; t <= nt; t++)
		pos[t] += pos[t - 1];
	for (size_t j = 0; j < n; j++)
		o[pos[tr[j]]++] = (*r)[j];
	free(*r);
	*r = o;
	o = NULL;
	*ntraces = nt;
	rc = 0;
out:
	sq_kmap_free(&m);
	free(tr);
	free(pos);
	free(o);
	return rc;
}

/* An empty map with room for about n, cheap to empty again: the per-trace maps. */
static int kmap_fit(struct kmap *m, size_t n)
{
	size_t cap = 16;

	while (cap < 2 * n + 2)
		cap *= 2;
	if (m->cap >= cap && m->cap <= 4 * cap) {
		sq_kmap_clear(m);
		return 0;
	}
	sq_kmap_free(m);
	m->e = calloc(cap, sizeof(*m->e));
	m->cap = m->e ? cap : 0;
	return m->e ? 0 : -ENOMEM;
}

/*
 * The batch trace by trace (its elements grouped by trace, each kind in batch order), so that
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
		rc = sq_failf(why, whysz, -ENOMEM, "out of memory");
		goto out;
	}
	for (j = 0, p = 0; j < g->ntasks; j++)
		r[p++] = (struct gref){ g->tasks[j].trace.hi, g->tasks[j].trace.lo, j, 0 };
	for (j = 0; j < g->nevents; j++)
		r[p++] = (struct gref){ g->events[j].trace.hi, g->events[j].trace.lo, j, 1 };
	for (j = 0; j < g->nedges; j++)
		r[p++] = (struct gref){ g->edges[j].trace.hi, g->edges[j].trace.lo, j, 2 };
	if ((rc = group_traces(&r, n, &q))) {
		rc = sq_failf(why, whysz, rc, "out of memory");
		goto out;
	}
	for (j = 0; j < n; j++)
		ix[j] = r[j].i;
	if (sq_kmap_reserve(&s->ptraces, q)) { /* q: the number of traces */
		rc = sq_failf(why, whysz, -ENOMEM, "out of memory");
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
			rc = sq_failf(why, whysz, -ENOMEM, "out of memory");
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

int sq_begin(struct sq *s, char *why, size_t whysz)
{
	return sq_step_done(s, sq_stmt(s, ST_BEGIN), why, whysz, "starting a transaction");
}

/* Undoes the open transaction; the id caches may hold ids it created, so they go too. */
void sq_rollback(struct sq *s)
{
	if (!sqlite3_get_autocommit(s->db))
		sqlite3_step(sq_stmt(s, ST_ROLLBACK));
	sqlite3_reset(s->st[ST_ROLLBACK]);
	sq_drop_caches(s);
}

int sq_put_opts(struct graph_store *base, const struct graph *g, unsigned flags,
		struct graph_put_stats *stp, char *why, size_t whysz)
{
	struct sq *s = (struct sq *)base;
	struct graph_put_stats st = { 0 };
	int rc;

	put_reset(s);
	s->noaggs = flags & GRAPH_PUT_NO_AGGS;
	if ((rc = sq_begin(s, why, whysz)))
		return rc;
	tbloom_sync(s); /* inside the transaction: no writer can come between */
	if ((rc = sq_step_int(s, sq_stmt(s, ST_TRACE_MAX), &s->next_tr, why, whysz,
			      "reading traces")) < 0) {
		sq_rollback(s);
		return rc;
	}
	s->next_tr++;
	if ((rc = put_traces(s, g, &st, why, whysz)) || (rc = put_flush(s, why, whysz)) ||
	    (rc = sq_step_done(s, sq_stmt(s, ST_COMMIT), why, whysz, "committing"))) {
		sq_rollback(s);
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

int sq_put(struct graph_store *base, const struct graph *g, struct graph_put_stats *stp, char *why,
	   size_t whysz)
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
	e = sq_kmap_get(&s->ptypes, (uint64_t)type, 0, 0, &isnew);
	if (!e)
		return sq_failf(why, whysz, -ENOMEM, "out of memory");
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
	int64_t sec = sq_floordiv(ms, CONC_MS), a = ms - sec * CONC_MS;
	struct kent *e;
	bool isnew;
	int rc;

	if (s->nblk == FLUSH_BLOCKS &&
	    !sq_kmap_find(&s->pblocks, (uint64_t)proc, (uint64_t)sec, 0) &&
	    (rc = flush_blocks(s, why, whysz)))
		return rc;
	if (!s->blk && !(s->blk = malloc(FLUSH_BLOCKS * sizeof(*s->blk))))
		return sq_failf(why, whysz, -ENOMEM, "out of memory");
	e = sq_kmap_get(&s->pblocks, (uint64_t)proc, (uint64_t)sec, 0, &isnew);
	if (!e)
		return sq_failf(why, whysz, -ENOMEM, "out of memory");
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

	if ((rc = sq_exec(s, sampling_sql, why, whysz, "creating the sampling table")))
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
		return sq_failf(why, whysz, -ENOMEM, "out of memory");
	for (size_t i = 0; i < a->ntypes && !rc; i++)
		if (!(rc = sq_type_id(s, a->types[i].service, a->types[i].name, true, &tid[i], why,
				      whysz)))
			rc = type_add_agg(s, tid[i], &a->types[i], why, whysz);
	for (size_t i = 0; i < a->nevents && !rc; i++) {
		const struct graph_agg_event *ev = &a->events[i];
		int64_t name;
		struct kent *e;

		if (ev->type >= a->ntypes) {
			rc = sq_failf(why, whysz, -EINVAL, "graph store: event count of no type");
			break;
		}
		if ((rc = sq_str_id(s, ev->name, true, &name, why, whysz)))
			break;
		e = sq_kmap_get(&s->pevagg, (uint64_t)tid[ev->type], (uint64_t)name, 0, NULL);
		if (!e) {
			rc = sq_failf(why, whysz, -ENOMEM, "out of memory");
			break;
		}
		e->v[0] += (int64_t)ev->ntasks;
	}
	for (size_t i = 0; i < a->nedges && !rc; i++) {
		const struct graph_agg_edge *ed = &a->edges[i];
		struct kent *e;

		if (ed->ptype >= a->ntypes || ed->ctype >= a->ntypes ||
		    (unsigned)ed->kind >= GRAPH_EDGE_COUNT) {
			rc = sq_failf(why, whysz, -EINVAL, "graph store: edge count of no type");
			break;
		}
		e = sq_kmap_get(&s->pedgeagg, (uint64_t)tid[ed->ptype], (uint64_t)tid[ed->ctype],
				(uint64_t)ed->kind, NULL);
		if (!e) {
			rc = sq_failf(why, whysz, -ENOMEM, "out of memory");
			break;
		}
		e->v[0] += (int64_t)ed->count;
	}
	for (size_t i = 0; i < a->nconc && !rc; i++) {
		const struct graph_agg_conc *c = &a->conc[i];
		int64_t host, proc;

		if (c->pid < 0)
			continue;
		if (!(rc = sq_str_id(s, c->host, true, &host, why, whysz)) &&
		    !(rc = sq_proc_id(s, host, c->pid, true, &proc, why, whysz)))
			rc = conc_add_ms(s, proc, c->ms, c->count, why, whysz);
	}
	if (!rc && a->sampling.seen)
		rc = sampling_add(s, &a->sampling, why, whysz);
	free(tid);
	return rc;
}

int sq_put_aggs(struct graph_store *base, const struct graph_aggs *a, char *why, size_t whysz)
{
	struct sq *s = (struct sq *)base;
	int rc;

	put_reset(s);
	if ((rc = sq_begin(s, why, whysz)))
		return rc;
	if ((rc = put_aggs(s, a, why, whysz)) || (rc = put_flush(s, why, whysz)) ||
	    (rc = sq_step_done(s, sq_stmt(s, ST_COMMIT), why, whysz, "committing"))) {
		sq_rollback(s);
		put_reset(s);
		return rc;
	}
	put_reset(s);
	return 0;
}

int sq_sampling(struct graph_store *base, struct graph_sampling *out, char *why, size_t whysz)
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
		       sq_failf(why, whysz, -EIO, "graph store: reading the sampling counts");
}

/* ---------------------------------------------------------------- marks */

int sq_mark_get(struct graph_store *base, const char *trace_hex, uint32_t *flags, char *why,
		size_t whysz)
{
	struct sq *s = (struct sq *)base;
	int64_t tr, thi, tlo;
	sqlite3_stmt *t;
	int rc;

	*flags = 0;
	if ((rc = sq_find_trace(s, trace_hex, &tr, &thi, &tlo, why, whysz)))
		return rc;
	t = sq_stmt(s, ST_MARK_GET);
	sqlite3_bind_int64(t, 1, tr);
	rc = sqlite3_step(t);
	if (rc == SQLITE_ROW)
		*flags = (uint32_t)sqlite3_column_int64(t, 0) & GRAPH_INC_ALL;
	sqlite3_reset(t);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return sq_fail(s, rc, why, whysz, "reading a trace's marks");
	return 0;
}

int sq_mark_set(struct graph_store *base, const char *trace_hex, uint32_t flags, char *why,
		size_t whysz)
{
	struct sq *s = (struct sq *)base;
	int64_t tr, thi, tlo;
	sqlite3_stmt *t;
	int rc;

	if ((rc = sq_find_trace(s, trace_hex, &tr, &thi, &tlo, why, whysz)))
		return rc;
	flags &= GRAPH_INC_ALL;
	t = sq_stmt(s, flags ? ST_MARK_SET : ST_MARK_DEL);
	sqlite3_bind_int64(t, 1, tr);
	if (flags)
		sqlite3_bind_int64(t, 2, flags);
	return sq_step_done(s, t, why, whysz, "marking a trace");
}
